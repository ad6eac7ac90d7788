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
use chipset_store::{AgentId, ManualClock, StateOptions, Timestamp};
use chipset_testkit::TempState;
use std::sync::Arc;

/// A fresh state root on a manual clock, with a bus on it.
pub(crate) fn manual() -> (TempState, ManualClock, Bus) {
    let clock = ManualClock::new(Timestamp::from_unix_ms(1_772_706_900_123));
    let t = TempState::with_options(StateOptions {
        clock: Arc::new(clock.clone()),
        ..StateOptions::default()
    });
    let bus = Bus::new(t.state.clone());
    (t, clock, bus)
}

pub(crate) fn agent(name: &str) -> AgentId {
    AgentId::new(name).unwrap()
}
