//! Where a test's lease table lives (issue 30): a state root, or a
//! PostgreSQL server (`CHIPSET_TEST_PG`) and a schema of the test's own
//! ([`chipset_backend::testing::Place`]). The model and race tests take a
//! place, so the same bodies run on both backends.

use chipset_backend::testing::{self, open_spec};
use chipset_backend::{Backend, Dir};
use chipset_lease::Leases;
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

    /// Returns the leases on this place, with `state` as the local root.
    pub(crate) fn leases(&self, state: StateDir) -> Leases {
        match self.seam() {
            None => Leases::new(state),
            Some(seam) => Leases::with_backend(state, seam),
        }
    }

    /// Returns the table's bytes on this place, to show that a refused
    /// operation changed nothing.
    pub(crate) fn table(&self, backend: &dyn Backend) -> Option<Vec<u8>> {
        let key = Dir::new("leases").unwrap().key("table.json").unwrap();
        backend.read(&key).unwrap().map(|v| v.value)
    }
}

/// Opens the leases a [`Place::spec`](testing::Place::spec) names.
pub(crate) fn leases_of(spec: &str) -> Leases {
    let opened = open_spec(spec);
    match opened.seam {
        None => Leases::new(opened.state),
        Some(seam) => Leases::with_backend(opened.state, seam),
    }
}
