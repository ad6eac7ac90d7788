//! The hook doctor's repair driven through the store's I/O seam: a fault
//! (EIO, ENOSPC) at every call of `doctor(Fix)` on hooks with a corrupt
//! file, and every power-cut state of it. No run loses a byte of the
//! corrupt hook or a healthy hook's work, no report claims a fix a check
//! finds undone, a later Fix finishes the repair
//! ([`chipset_testkit::sweep_doctor`]), and a repaired hook's generation
//! is above the one its agent held before, so no assignment from before
//! the damage matches it again. (The doctor sweeps no temps.)

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chipset_hook::{Error, HookStatus, Hooks};
use chipset_store::{DoctorMode, ReadOutcome, RealIo, Report, SharedIo};
use chipset_testkit::{DoctorCase, cut_doctor, manual_state, sweep_doctor};

use crate::{agent, bead};

/// The torn head of cy's hook, which held an assignment.
const TORN: &[u8] = b"{\"agent_id\": \"cy\", \"generation\": 1, \"sta";

/// Ann's work is active, bo's pending; cy's hook, assigned at generation
/// 1, is torn.
struct Torn;

/// The generation of cy's assignment before the damage.
const CY_HELD: u64 = 1;

fn open(root: &Path, io: SharedIo) -> Hooks {
    let state = manual_state(root, io);
    Hooks::new(state)
}

impl DoctorCase for Torn {
    type World = Hooks;
    type Error = Error;

    fn name(&self) -> &str {
        "hooks"
    }

    fn plant(&self, root: &Path) {
        let hooks = open(root, Arc::new(RealIo));
        let ann = hooks
            .assign(&agent("ann"), bead("b-1"), "one", None)
            .unwrap();
        hooks.activate(&ann).unwrap();
        hooks
            .assign(&agent("bo"), bead("b-2"), "two", None)
            .unwrap();
        let cy = hooks
            .assign(&agent("cy"), bead("b-3"), "three", None)
            .unwrap();
        assert_eq!(cy.generation, CY_HELD);
        hooks
            .state()
            .write_bytes(&hooks.path(&agent("cy")), TORN)
            .unwrap();
    }

    fn open(&self, root: &Path, io: SharedIo) -> Hooks {
        open(root, io)
    }

    fn doctor(&self, hooks: &Hooks, mode: DoctorMode) -> Result<Report, Error> {
        hooks.doctor(mode)
    }

    fn damaged(&self) -> Vec<(PathBuf, Vec<u8>)> {
        vec![("hooks/cy.json".into(), TORN.to_vec())]
    }

    /// Ann's and bo's work is kept; cy's hook is still corrupt (failing
    /// closed) or repaired above the generation cy held: never missing,
    /// which reads as generation 0, from which cy's old assignment of the
    /// same bead at the same time would match again.
    fn healthy(&self, hooks: &Hooks, what: &str) {
        for (name, bead_id, status) in [
            ("ann", "b-1", HookStatus::Active),
            ("bo", "b-2", HookStatus::Pending),
        ] {
            let read = hooks
                .read(&agent(name))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(HookStatus::of(&read), Some(status), "{what}: {name}");
            let held = hooks.current(&agent(name)).unwrap().unwrap();
            assert_eq!(held.work.bead_id, bead(bead_id), "{what}: {name}");
        }
        match hooks.read(&agent("cy")) {
            Ok(ReadOutcome::Corrupt(_)) => {}
            Ok(ReadOutcome::Value(hook)) => assert!(
                hook.generation > CY_HELD,
                "{what}: cy's hook is back at generation {} (held {CY_HELD})",
                hook.generation
            ),
            Ok(ReadOutcome::Missing) => panic!(
                "{what}: cy's hook is gone: it reads as generation 0, from which \
                 cy's assignment of generation {CY_HELD} can match again"
            ),
            other => panic!("{what}: cy's hook: {other:?}"),
        }
    }
}

#[test]
fn every_fault_in_a_hook_repair_keeps_the_data_and_a_later_fix_finishes() {
    sweep_doctor(&Torn);
}

#[test]
fn every_power_cut_in_a_hook_repair_keeps_the_data_and_a_later_fix_finishes() {
    cut_doctor(&Torn);
}
