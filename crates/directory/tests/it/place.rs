//! Where a test's directory's profiles live (issue 30): a state root, or a
//! PostgreSQL server (`CHIPSET_TEST_PG`) and a schema of the test's own
//! ([`chipset_backend::testing::Placed`]). The model and race tests take a
//! place, so the same bodies run on both backends.

use std::sync::Arc;

use chipset_backend::Backend;
use chipset_backend::testing::{Channel, Placed};
use chipset_directory::Directory;
use chipset_store::StateDir;

/// The directory itself, or a server and a schema: `open` gives the
/// agent directory.
pub(crate) type Place = Placed<DirectoryChannel>;

/// The agent directory (through the seam on both: on a state root's own
/// directory, `Directory::new` puts it on the files' backend).
pub(crate) struct DirectoryChannel;

impl Channel for DirectoryChannel {
    type Handle = Directory;
    fn open(state: StateDir, seam: Option<Arc<dyn Backend>>) -> Directory {
        match seam {
            None => Directory::new(state),
            Some(seam) => Directory::with_backend(state, seam),
        }
    }
}
