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

use chipset_hook::Hooks;
use chipset_store::ManualClock;
use chipset_testkit::TempState;

pub(crate) use chipset_testkit::{T0, agent, bead};

/// A state root on a manual clock at [`T0`], and its hooks.
pub(crate) struct Setup {
    pub(crate) tmp: TempState,
    pub(crate) hooks: Hooks,
    pub(crate) clock: ManualClock,
}

pub(crate) fn setup() -> Setup {
    let (tmp, clock) = TempState::manual();
    let hooks = Hooks::new(tmp.state.clone());
    Setup { tmp, hooks, clock }
}

/// As [`setup`], on a store that skips its syncs: for the model tests.
pub(crate) fn setup_no_sync() -> Setup {
    let (tmp, clock) = TempState::manual_no_sync();
    let hooks = Hooks::new(tmp.state.clone());
    Setup { tmp, hooks, clock }
}
