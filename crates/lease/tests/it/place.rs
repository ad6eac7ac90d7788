//! Where a test's lease table lives (issue 30): a state root, or a
//! PostgreSQL server (`CHIPSET_TEST_PG`) and a schema of the test's own.
//! The model and race tests take a place, so the same bodies run on both
//! backends.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use chipset_backend::{Backend, Dir, FsBackend, PgBackend, PgOptions};
use chipset_lease::Leases;
use chipset_store::StateDir;

/// The variable that names the PostgreSQL server for the tests.
const PG_ENV: &str = "CHIPSET_TEST_PG";

/// A backend for the leases: the directory itself, or a server and a schema.
pub(crate) struct Place {
    pg: Option<(String, String)>,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

impl Place {
    /// The state root's own directory.
    pub(crate) fn fs() -> Place {
        Place { pg: None }
    }

    /// A fresh schema on the server `CHIPSET_TEST_PG` names, or `None`
    /// (saying that the PostgreSQL half is skipped).
    pub(crate) fn pg(test: &str) -> Option<Place> {
        let Some(url) = std::env::var(PG_ENV).ok().filter(|u| !u.is_empty()) else {
            #[allow(clippy::print_stderr, reason = "a skipped half must say so")]
            {
                eprintln!("{test}: SKIPPED on PostgreSQL: {PG_ENV} is not set");
            }
            return None;
        };
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let schema = format!(
            "lease_{}_{}_{nanos}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        Some(Place {
            pg: Some((url, schema)),
        })
    }

    /// Whether the leases are on PostgreSQL.
    pub(crate) fn is_pg(&self) -> bool {
        self.pg.is_some()
    }

    /// Says how a child process opens the same leases, with `root` as its
    /// local state root.
    pub(crate) fn spec(&self, root: &std::path::Path) -> String {
        let root = root.to_str().unwrap();
        match &self.pg {
            None => root.to_owned(),
            Some((url, schema)) => format!("pg\t{url}\t{schema}\t{root}"),
        }
    }

    /// Returns the leases on this place, with `state` as the local root.
    pub(crate) fn leases(&self, state: StateDir) -> Leases {
        match &self.pg {
            None => Leases::new(state),
            Some(_) => Leases::with_backend(state.clone(), self.backend(&state)),
        }
    }

    /// Returns a backend handle on this place, to inspect values as
    /// another program would (`state` is the directory's root).
    pub(crate) fn backend(&self, state: &StateDir) -> Arc<dyn Backend> {
        match &self.pg {
            None => Arc::new(FsBackend::new(state.clone())),
            Some((url, schema)) => {
                Arc::new(PgBackend::open_with(url, PgOptions::with_schema(schema)).unwrap())
            }
        }
    }

    /// Returns the table's bytes on this place, to show that a refused
    /// operation changed nothing.
    pub(crate) fn table(&self, backend: &dyn Backend) -> Option<Vec<u8>> {
        let key = Dir::new("leases").unwrap().key("table.json").unwrap();
        backend.read(&key).unwrap().map(|v| v.value)
    }
}

/// Opens the leases a [`Place::spec`] names.
pub(crate) fn leases_of(spec: &str) -> Leases {
    let parts: Vec<&str> = spec.split('\t').collect();
    match parts.as_slice() {
        [root] => Leases::new(StateDir::open(root).unwrap()),
        ["pg", url, schema, root] => {
            let state = StateDir::open(root).unwrap();
            let backend = PgBackend::open_with(url, PgOptions::with_schema(*schema)).unwrap();
            Leases::with_backend(state, Arc::new(backend))
        }
        _ => panic!("bad place {spec}"),
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        if let Some((url, schema)) = &self.pg
            && let Ok(mut c) = postgres::Client::connect(url, postgres::NoTls)
        {
            // The schema's name is ours: lower-case letters, digits and `_`.
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
        }
    }
}
