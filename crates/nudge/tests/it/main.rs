//! Integration tests for chipset-nudge: one binary, a module per area.

mod foreign;
mod golden;
mod model;
mod procs;
mod reminders;
mod seam;
mod signals;
mod support;
