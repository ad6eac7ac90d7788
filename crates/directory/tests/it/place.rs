//! Where a test's directory's profiles live (issue 30): a state root, or a
//! PostgreSQL server (`CHIPSET_TEST_PG`) and a schema of the test's own
//! ([`chipset_backend::testing::Place`]). The model and race tests take a
//! place, so the same bodies run on both backends.

use chipset_backend::testing::{self, open_spec};
use chipset_directory::Directory;
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

    /// Returns the directory on this place (through the seam on both, as
    /// the model compares), with `state` as the local root.
    pub(crate) fn directory(&self, state: StateDir) -> Directory {
        Directory::with_backend(state.clone(), self.backend(&state))
    }
}

/// Opens the directory a [`Place::spec`](testing::Place::spec) names, and
/// its local root.
pub(crate) fn directory_of(spec: &str) -> (Directory, StateDir) {
    let opened = open_spec(spec);
    let state = opened.state.clone();
    let directory = match opened.seam {
        None => Directory::new(opened.state),
        Some(seam) => Directory::with_backend(opened.state, seam),
    };
    (directory, state)
}
