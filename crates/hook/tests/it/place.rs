//! Where a test's hooks live (issue 30): a state root of the test's own,
//! and on PostgreSQL (`CHIPSET_TEST_PG`) a schema of the test's own too
//! ([`chipset_backend::testing::Place`]; the root then holds no hooks).
//! The races, the listing, the doctor and the wake-ups take a place, so
//! the same bodies run on both backends.

use std::sync::Arc;

use chipset_backend::testing::{self, open_spec};
use chipset_backend::{Backend, Dir};
use chipset_hook::Hooks;
use chipset_store::StateDir;
use chipset_testkit::TempState;

/// A state root, and where its hooks live.
pub(crate) struct Place {
    pub(crate) t: TempState,
    at: testing::Place,
}

impl std::ops::Deref for Place {
    type Target = testing::Place;
    fn deref(&self) -> &testing::Place {
        &self.at
    }
}

impl Place {
    /// The state root's own directory.
    pub(crate) fn fs() -> Place {
        Place {
            t: TempState::new(),
            at: testing::Place::fs(),
        }
    }

    /// A fresh schema on the test server, or `None` (saying so).
    pub(crate) fn pg(test: &str) -> Option<Place> {
        Some(Place {
            t: TempState::new(),
            at: testing::Place::pg(test)?,
        })
    }

    /// Says how a child opens the same hooks.
    pub(crate) fn spec(&self) -> String {
        self.at.spec(self.t.state.root())
    }

    /// A new handle on the hooks: on a directory what every caller opens
    /// ([`Hooks::new`]), on a server through the backend.
    pub(crate) fn hooks(&self) -> Hooks {
        hooks_of(&self.spec())
    }

    /// A new handle on the backend (on PostgreSQL its own connections).
    pub(crate) fn backend(&self) -> Arc<dyn Backend> {
        self.at.backend(&self.t.state)
    }

    /// Writes `bytes` at `hooks/{name}` through the seam.
    pub(crate) fn plant(&self, name: &str, bytes: &[u8]) {
        let key = Dir::new("hooks").unwrap().key(name).unwrap();
        let _ = self.backend().put(&key, bytes).unwrap();
    }
}

/// Opens the hooks a [`Place::spec`] names.
pub(crate) fn hooks_of(spec: &str) -> Hooks {
    let opened = open_spec(spec);
    match opened.seam {
        None => Hooks::new(opened.state),
        Some(seam) => Hooks::with_backend(StateDir::open(opened.state.root()).unwrap(), seam),
    }
}
