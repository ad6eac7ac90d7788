//! Where a test's signals and reminders live (issue 30): a state root, or
//! a PostgreSQL server (`CHIPSET_TEST_PG`) and a schema of the test's own
//! ([`chipset_backend::testing::Placed`]). The model and race tests take a
//! place, so the same bodies run on both backends.

use std::sync::Arc;

use chipset_backend::testing::{Channel, Placed};
use chipset_backend::{Backend, Dir, Key};
use chipset_nudge::{KindRegistry, Nudges, ReminderConfig, Reminders};
use chipset_store::StateDir;

/// The directory itself, or a server and a schema: `open` gives the signals.
pub(crate) type Place = Placed<SignalChannel>;

/// As [`Place`]: `open` gives the reminders (the preset kinds).
pub(crate) type ReminderPlace = Placed<ReminderChannel>;

/// The signals.
pub(crate) struct SignalChannel;

impl Channel for SignalChannel {
    type Handle = Nudges;
    fn open(state: StateDir, seam: Option<Arc<dyn Backend>>) -> Nudges {
        match seam {
            None => Nudges::new(state),
            Some(seam) => Nudges::with_backend(state, seam),
        }
    }
}

/// The reminders, of the preset kinds.
pub(crate) struct ReminderChannel;

impl Channel for ReminderChannel {
    type Handle = Reminders;
    fn open(state: StateDir, seam: Option<Arc<dyn Backend>>) -> Reminders {
        let kinds = KindRegistry::preset();
        match seam {
            None => Reminders::new(state, kinds),
            Some(seam) => Reminders::with_backend(state, kinds, ReminderConfig::default(), seam),
        }
    }
}

/// Returns the seam key for a `/`-separated name such as `nudge/a/latest.json`.
pub(crate) fn key(text: &str) -> Key {
    let mut parts: Vec<&str> = text.split('/').collect();
    let name = parts.pop().unwrap();
    let mut dir = Dir::new(parts[0]).unwrap();
    for p in &parts[1..] {
        dir = dir.join(p).unwrap();
    }
    dir.key(name).unwrap()
}
