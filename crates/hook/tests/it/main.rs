//! Integration tests for chipset-hook.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "tests plant, corrupt and inspect files as another program would, outside the store's API"
)]

mod doctor_seam;
mod files;
mod foreign;
mod lifecycle;
mod place;
mod procs;
mod rows;
mod seam;

use chipset_hook::{Hook, HookStatus, Hooks};
use chipset_store::{Corruption, ManualClock, ReadOutcome, Unsupported};
use chipset_testkit::TempState;

pub(crate) use chipset_testkit::{T0, agent, bead};

/// The longest title `Hooks::assign` writes, in bytes, as
/// `Error::InvalidTitle` documents it.
pub(crate) const MAX_TITLE: usize = 1024;

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

/// Short ways to look into a read in assertions.
pub(crate) trait ReadExt {
    /// The status the read shows ([`HookStatus::of`]).
    fn status(&self) -> Option<HookStatus>;
    /// The hook, when the file holds one.
    fn hook(&self) -> Option<&Hook>;
    /// The corruption, when the file is corrupt.
    fn corruption(&self) -> Option<&Corruption>;
    /// What is unsupported, when the file holds a value this version does not know.
    fn unsupported(&self) -> Option<&Unsupported>;
}

impl ReadExt for ReadOutcome<Hook> {
    fn status(&self) -> Option<HookStatus> {
        HookStatus::of(self)
    }

    fn hook(&self) -> Option<&Hook> {
        match self {
            ReadOutcome::Value(h) => Some(h),
            _ => None,
        }
    }

    fn corruption(&self) -> Option<&Corruption> {
        match self {
            ReadOutcome::Corrupt(c) => Some(c),
            _ => None,
        }
    }

    fn unsupported(&self) -> Option<&Unsupported> {
        match self {
            ReadOutcome::Unsupported(u) => Some(u),
            _ => None,
        }
    }
}
