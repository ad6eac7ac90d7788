//! Where a test's queues live (issue 30): a state root, or a PostgreSQL
//! server (`CHIPSET_TEST_PG`) and a schema of the test's own
//! ([`chipset_backend::testing::Place`]). The model and race tests take a
//! place, so the same bodies run on both backends.

use chipset_backend::testing::{self, open_spec};
use chipset_bus::{Bus, BusConfig};
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

    /// Returns a bus on this place, with `state` as the local root.
    pub(crate) fn bus(&self, state: StateDir) -> Bus {
        self.bus_with(state, BusConfig::default())
    }

    /// As [`Place::bus`], with `config`.
    pub(crate) fn bus_with(&self, state: StateDir, config: BusConfig) -> Bus {
        match self.seam() {
            None => Bus::with_config(state, config),
            Some(seam) => Bus::with_backend(state, config, seam),
        }
    }
}

/// Opens the queues a [`Place::spec`](testing::Place::spec) names, and its
/// local root.
pub(crate) fn bus_of(spec: &str) -> (Bus, StateDir) {
    let opened = open_spec(spec);
    let state = opened.state.clone();
    let bus = match opened.seam {
        None => Bus::new(opened.state),
        Some(seam) => Bus::with_backend(opened.state, BusConfig::default(), seam),
    };
    (bus, state)
}
