//! Where a test's queues live (issue 30): a state root, or a PostgreSQL
//! server (`CHIPSET_TEST_PG`) and a schema of the test's own
//! ([`chipset_backend::testing::Placed`]). The model and race tests take a
//! place, so the same bodies run on both backends.

use std::sync::Arc;

use chipset_backend::Backend;
use chipset_backend::testing::{Channel, Placed};
use chipset_bus::{Bus, BusConfig};
use chipset_store::StateDir;

/// The directory itself, or a server and a schema: `open` gives a bus.
pub(crate) type Place = Placed<Queues>;

/// A bus with the default configuration.
pub(crate) struct Queues;

impl Channel for Queues {
    type Handle = Bus;
    fn open(state: StateDir, seam: Option<Arc<dyn Backend>>) -> Bus {
        match seam {
            None => Bus::new(state),
            Some(seam) => Bus::with_backend(state, BusConfig::default(), seam),
        }
    }
}
