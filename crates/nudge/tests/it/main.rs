//! Integration tests for chipset-nudge: one binary, a module per area.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "tests plant, corrupt and inspect files as another program would, outside the store's API"
)]

mod both;
mod doctor_seam;
mod foreign;
mod golden;
mod model;
mod place;
mod procs;
mod reminder_repair;
mod reminders;
mod seam;
mod server_doctor;
mod signals;
mod support;
