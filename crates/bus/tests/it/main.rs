//! Integration tests for chipset-bus.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "tests plant, corrupt and inspect files as another program would, outside the store's API"
)]

mod control;
mod dedup;
mod doctor_seam;
mod events;
mod foreign;
mod formats;
mod maintain;
mod model;
mod place;
mod presence;
mod procs;
mod reminders;
mod seam;
mod server;
mod server_doctor;
mod wait;

use chipset_bus::Bus;
use chipset_store::ManualClock;
use chipset_testkit::TempState;

pub(crate) use chipset_testkit::agent;

/// An event file name from [`Bus::queued`] or [`Bus::processed`], read as
/// the crate docs' layout gives it: `{P}-{id}-{source}-{kind}.json`, the id
/// being `{13 digits}-{uuid}`.
pub(crate) trait EventName {
    /// The file name.
    fn name(&self) -> &str;
    /// The event id in the name.
    fn id(&self) -> chipset_bus::EventId;
}

impl EventName for String {
    fn name(&self) -> &str {
        self
    }

    fn id(&self) -> chipset_bus::EventId {
        chipset_bus::EventId::new(&self[2..2 + 13 + 1 + 36]).expect("an event file name")
    }
}

/// `agent`'s registry as last applied (empty when never applied), read
/// from `bus/{agent}/registry.json` as the crate docs' layout gives it;
/// an error when it is corrupt.
pub(crate) fn registry(
    bus: &Bus,
    agent: &chipset_store::AgentId,
) -> chipset_store::Result<chipset_bus::Registry> {
    let path = bus
        .state()
        .channel(Bus::CHANNEL)
        .join_id(agent, "")
        .join_static("registry.json");
    Ok(bus
        .state()
        .read_json(&path)?
        .into_result()?
        .unwrap_or_default())
}

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
