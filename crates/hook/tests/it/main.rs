//! Integration tests for chipset-hook.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "tests plant, corrupt and inspect files as another program would, outside the store's API"
)]

mod files;
mod foreign;
mod lifecycle;
mod model;
mod procs;
mod seam;

use std::sync::Arc;

use chipset_hook::Hooks;
use chipset_store::{AgentId, BeadId, DEFAULT_READ_CAP, ManualClock, StateOptions, Timestamp};
use chipset_testkit::TempState;

/// 2026-03-05T10:30:00.000Z, the seed's example time.
pub(crate) const T0: i64 = 1_772_706_600_000;

/// A state root on a manual clock at [`T0`], and its hooks.
pub(crate) struct Setup {
    pub(crate) tmp: TempState,
    pub(crate) hooks: Hooks,
    pub(crate) clock: ManualClock,
}

pub(crate) fn setup() -> Setup {
    let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
    let tmp = TempState::with_options(StateOptions {
        clock: Arc::new(clock.clone()),
        read_cap: DEFAULT_READ_CAP,
        ..StateOptions::default()
    });
    let hooks = Hooks::new(tmp.state.clone());
    Setup { tmp, hooks, clock }
}

pub(crate) fn agent(name: &str) -> AgentId {
    AgentId::new(name).unwrap()
}

pub(crate) fn bead(name: &str) -> BeadId {
    BeadId::new(name).unwrap()
}
