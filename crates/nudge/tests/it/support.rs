//! Shared helpers.

use chipset_nudge::Received;
use chipset_store::ManualClock;
use chipset_testkit::TempState;

pub(crate) use chipset_testkit::{T0, agent};

/// A fresh state root on a manual clock stopped at [`T0`].
pub(crate) fn manual_state() -> (TempState, ManualClock) {
    TempState::manual()
}

/// As [`manual_state`], on a store that skips its syncs: for the model tests.
pub(crate) fn manual_no_sync() -> (TempState, ManualClock) {
    TempState::manual_no_sync()
}

/// Names of the temp files (dot-files ending `.tmp`) under `dir`, recursively.
pub(crate) fn temps_under(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else if chipset_store::is_temp_name(&name) {
                out.push(name);
            }
        }
    }
    out
}

/// The nudge to act on and the reader's doubt, looked up through the read
/// outcome that [`chipset_nudge::Nudges::receive`] returns.
pub(crate) trait ReceivedExt {
    /// [`Received::to_process`] of the value; `None` when there is none.
    fn to_process(&self) -> Option<&chipset_nudge::Nudge>;
    /// [`Received::doubt`] of the value.
    fn doubt(&self) -> Option<String>;
}

impl ReceivedExt for chipset_store::ReadOutcome<Received> {
    fn to_process(&self) -> Option<&chipset_nudge::Nudge> {
        match self {
            chipset_store::ReadOutcome::Value(r) => r.to_process(),
            _ => None,
        }
    }

    fn doubt(&self) -> Option<String> {
        match self {
            chipset_store::ReadOutcome::Value(r) => r.doubt(),
            _ => None,
        }
    }
}
