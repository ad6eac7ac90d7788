//! Where a test's signals live (issue 30): a state root, or a PostgreSQL
//! server (`CHIPSET_TEST_PG`) and a schema of the test's own
//! ([`chipset_backend::testing::Place`]). The model and race tests take a
//! place, so the same bodies run on both backends.

use chipset_backend::testing::{self, open_spec};
use chipset_backend::{Dir, Key};
use chipset_nudge::{KindRegistry, NudgeConfig, Nudges, ReminderConfig, Reminders};
use chipset_store::StateDir;

/// The directory itself, or a server and a schema.
pub(crate) struct Place(testing::Place);

impl std::ops::Deref for Place {
    type Target = testing::Place;
    fn deref(&self) -> &testing::Place {
        &self.0
    }
}

impl Place {
    /// The state root's own directory.
    pub(crate) fn fs() -> Place {
        Place(testing::Place::fs())
    }

    /// A fresh schema on the test server, or `None` (saying so).
    pub(crate) fn pg(test: &str) -> Option<Place> {
        testing::Place::pg(test).map(Place)
    }

    /// Returns the signals on this place, with `state` as the local root.
    pub(crate) fn nudges(&self, state: StateDir) -> Nudges {
        match self.seam() {
            None => Nudges::new(state),
            Some(seam) => Nudges::with_backend(state, NudgeConfig::default(), seam),
        }
    }

    /// Returns the reminders on this place (the preset kinds), with
    /// `state` as the local root.
    pub(crate) fn reminders(&self, state: StateDir) -> Reminders {
        match self.seam() {
            None => Reminders::new(state, KindRegistry::preset()),
            Some(seam) => server_reminders(state, seam),
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

fn server_reminders(
    state: StateDir,
    seam: std::sync::Arc<dyn chipset_backend::Backend>,
) -> Reminders {
    Reminders::with_backend(
        state,
        KindRegistry::preset(),
        ReminderConfig::default(),
        seam,
    )
}

/// Opens the reminders a [`Place::spec`](testing::Place::spec) names.
pub(crate) fn reminders_of(spec: &str) -> Reminders {
    let opened = open_spec(spec);
    match opened.seam {
        None => Reminders::new(opened.state, KindRegistry::preset()),
        Some(seam) => server_reminders(opened.state, seam),
    }
}

/// Opens the signals a [`Place::spec`](testing::Place::spec) names, and its
/// local root.
pub(crate) fn nudges_of(spec: &str) -> (Nudges, StateDir) {
    let opened = open_spec(spec);
    let state = opened.state.clone();
    let nudges = match opened.seam {
        None => Nudges::new(opened.state),
        Some(seam) => Nudges::with_backend(opened.state, NudgeConfig::default(), seam),
    };
    (nudges, state)
}
