//! Shared helpers.

use std::sync::Arc;

use chipset_store::{AgentId, DEFAULT_READ_CAP, ManualClock, StateOptions, Timestamp};
use chipset_testkit::TempState;

/// 2026-03-05T10:35:00.000Z, the seed's example time.
pub(crate) const T0: i64 = 1_772_706_900_000;

/// A fresh state root on a manual clock stopped at [`T0`].
pub(crate) fn manual_state() -> (TempState, ManualClock) {
    let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
    let t = TempState::with_options(StateOptions {
        clock: Arc::new(clock.clone()),
        read_cap: DEFAULT_READ_CAP,
        ..StateOptions::default()
    });
    (t, clock)
}

/// An agent id.
pub(crate) fn agent(name: &str) -> AgentId {
    AgentId::new(name).unwrap()
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
