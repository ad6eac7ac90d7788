//! Integration tests for chipset-nudge: one binary, a module per area.

mod foreign;
mod golden;
mod model;
mod procs;
mod reminders;
mod signals;
mod support;
