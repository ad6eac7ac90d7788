//! Integration tests for chipset-lease.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "tests plant, corrupt and inspect files as another program would, outside the store's API"
)]

mod doctor_seam;
mod input;
mod lifecycle;
mod model;
mod place;
mod procs;
mod seam;
mod server;
mod server_doctor;

use chipset_lease::{LeaseMode, LeaseRequest, Leases};
use chipset_store::{AgentId, ManualClock};
use chipset_testkit::TempState;

pub(crate) use chipset_testkit::agent;

/// A state root on a manual clock at `T0`, and its leases.
pub(crate) struct Setup {
    pub(crate) tmp: TempState,
    pub(crate) leases: Leases,
    pub(crate) clock: ManualClock,
}

pub(crate) fn setup() -> Setup {
    let (tmp, clock) = TempState::manual();
    let leases = Leases::new(tmp.state.clone());
    Setup { tmp, leases, clock }
}

pub(crate) fn exclusive(holder: &AgentId, paths: &[&str]) -> LeaseRequest {
    LeaseRequest::new(holder.clone(), LeaseMode::Exclusive, paths)
}

pub(crate) fn shared(holder: &AgentId, paths: &[&str]) -> LeaseRequest {
    LeaseRequest::new(holder.clone(), LeaseMode::Shared, paths)
}

/// The table's bytes, to show that a refused operation changed nothing.
pub(crate) fn table_bytes(s: &Setup) -> Option<Vec<u8>> {
    let state = &s.tmp.state;
    let table = state
        .channel(chipset_lease::Leases::CHANNEL)
        .join_static("table.json");
    state.read_bytes(&table).unwrap().value()
}
