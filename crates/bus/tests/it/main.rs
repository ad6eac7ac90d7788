//! Integration tests for chipset-bus.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "tests plant, corrupt and inspect files as another program would, outside the store's API"
)]

mod control;
mod dedup;
mod events;
mod foreign;
mod formats;
mod maintain;
mod model;
mod presence;
mod procs;
mod reminders;
mod seam;
mod wait;

use chipset_bus::Bus;
use chipset_store::ManualClock;
use chipset_testkit::TempState;

pub(crate) use chipset_testkit::agent;

/// A fresh state root on a manual clock, with a bus on it.
pub(crate) fn manual() -> (TempState, ManualClock, Bus) {
    let (t, clock) = TempState::manual();
    let bus = Bus::new(t.state.clone());
    (t, clock, bus)
}

/// As [`manual`], on a store that skips its syncs: for the model tests.
pub(crate) fn manual_no_sync() -> (TempState, ManualClock, Bus) {
    let (t, clock) = TempState::manual_no_sync();
    let bus = Bus::new(t.state.clone());
    (t, clock, bus)
}
