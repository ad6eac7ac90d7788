//! Where a test's lease table lives (issue 30): a state root, or a
//! PostgreSQL server (`CHIPSET_TEST_PG`) and a schema of the test's own
//! ([`chipset_backend::testing::Placed`]). The model and race tests take a
//! place, so the same bodies run on both backends.

use std::sync::Arc;

use chipset_backend::testing::{Channel, Placed};
use chipset_backend::{Backend, Dir};
use chipset_lease::Leases;
use chipset_store::StateDir;

/// The directory itself, or a server and a schema: `open` gives the leases.
pub(crate) type Place = Placed<Table>;

/// The leases.
pub(crate) struct Table;

impl Channel for Table {
    type Handle = Leases;
    fn open(state: StateDir, seam: Option<Arc<dyn Backend>>) -> Leases {
        match seam {
            None => Leases::new(state),
            Some(seam) => Leases::with_backend(state, seam),
        }
    }
}

/// Returns the table's bytes on `backend`, to show that a refused
/// operation changed nothing.
pub(crate) fn table(backend: &dyn Backend) -> Option<Vec<u8>> {
    let key = Dir::new("leases").unwrap().key("table.json").unwrap();
    backend.read(&key).unwrap().map(|v| v.value)
}
