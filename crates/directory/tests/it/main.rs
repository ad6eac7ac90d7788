//! The directory's integration tests: registration, listing, last seen
//! from each source, and corrupt profiles.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "tests plant, corrupt and inspect files as another program would, outside the store's API"
)]

mod doctor;
mod doctor_seam;
mod model;
mod place;
mod procs;
mod register;
mod seam;
mod seen;
mod server_doctor;

use std::sync::Arc;

use chipset_directory::Directory;
use chipset_store::{AgentId, ManualClock, StateDir, StateOptions, Timestamp};

pub(crate) struct Env {
    pub(crate) _tmp: tempfile::TempDir,
    pub(crate) state: StateDir,
    pub(crate) clock: ManualClock,
    pub(crate) dir: Directory,
}

pub(crate) fn env() -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let clock = ManualClock::new("2026-03-05T10:00:00Z".parse::<Timestamp>().unwrap());
    let options = StateOptions {
        clock: Arc::new(clock.clone()),
        ..StateOptions::default()
    };
    let state = StateDir::open_with(tmp.path(), options).unwrap();
    let dir = Directory::new(state.clone());
    Env {
        _tmp: tmp,
        state,
        clock,
        dir,
    }
}

pub(crate) fn agent(name: &str) -> AgentId {
    AgentId::new(name).unwrap()
}
