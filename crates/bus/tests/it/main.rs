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

/// An event file name from [`queued`], [`processed`] or [`listed`], read as
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

/// Whether `name` is an event file name, as the crate docs' layout gives
/// it: `{P}-{id}-{source}-{kind}.json`, `P` a digit from 0 to 3, the id
/// `{13 digits}-{uuid}`.
fn is_event_name(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".json") else {
        return false;
    };
    let bytes = stem.as_bytes();
    bytes.len() >= 52
        && (b'0'..=b'3').contains(&bytes[0])
        && bytes[1] == b'-'
        && stem
            .get(2..52)
            .is_some_and(|id| chipset_bus::EventId::new(id).is_ok())
        && stem
            .get(52..)
            .is_some_and(|tail| tail.is_empty() || tail.starts_with('-'))
}

/// The event file names in `dir`, a bus on a directory's queue or
/// processed area, in name order (for a queue, processing order); other
/// names are skipped.
fn event_names(bus: &Bus, dir: &chipset_store::StatePath) -> Vec<String> {
    let mut names = bus.state().list(dir).expect("the folder lists");
    names.retain(|n| is_event_name(n));
    names
}

/// The event file names in `agent`'s queue, on a bus on a directory.
pub(crate) fn queued(bus: &Bus, agent: &chipset_store::AgentId) -> Vec<String> {
    event_names(bus, &bus.queue_dir(agent))
}

/// The event file names in `agent`'s processed area, on a bus on a directory.
pub(crate) fn processed(bus: &Bus, agent: &chipset_store::AgentId) -> Vec<String> {
    event_names(bus, &bus.processed_dir(agent))
}

/// The event file names in `bus/{agent}/{folder}` (`queue` or
/// `processed`), in name order, read through `raw`: the backend a bus was
/// opened on ([`place::Place`]'s `backend`), a directory's or a server's.
pub(crate) fn listed(
    raw: &dyn chipset_backend::Backend,
    agent: &chipset_store::AgentId,
    folder: &str,
) -> Vec<String> {
    let dir = chipset_backend::Dir::new(Bus::CHANNEL.as_str())
        .and_then(|d| d.join(agent.as_str()))
        .and_then(|d| d.join(folder))
        .expect("a bus folder");
    let mut names = raw.list(&dir).expect("the folder lists");
    names.retain(|n| is_event_name(n));
    names.sort();
    names
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
