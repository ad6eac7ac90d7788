//! Where a test's queues live (issue 30): a state root, or a PostgreSQL
//! server (`CHIPSET_TEST_PG`) and a schema of the test's own. The model
//! and race tests take a place, so the same bodies run on both backends.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use chipset_backend::{Backend, PgBackend, PgOptions};
use chipset_bus::{Bus, BusConfig};
use chipset_store::StateDir;

/// The variable that names the PostgreSQL server for the tests.
const PG_ENV: &str = "CHIPSET_TEST_PG";

/// A backend for the queues: the directory itself, or a server and a schema.
pub(crate) struct Place {
    pg: Option<(String, String)>,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// The server `CHIPSET_TEST_PG` names, or `None` (saying that the
/// PostgreSQL half of `test` is skipped).
pub(crate) fn pg_url(test: &str) -> Option<String> {
    let url = std::env::var(PG_ENV).ok().filter(|u| !u.is_empty());
    if url.is_none() {
        #[allow(clippy::print_stderr, reason = "a skipped half must say so")]
        {
            eprintln!("{test}: SKIPPED on PostgreSQL: {PG_ENV} is not set");
        }
    }
    url
}

impl Place {
    /// The state root's own directory.
    pub(crate) fn fs() -> Place {
        Place { pg: None }
    }

    /// A fresh schema on the server `CHIPSET_TEST_PG` names, or `None`.
    pub(crate) fn pg(test: &str) -> Option<Place> {
        let url = pg_url(test)?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let schema = format!(
            "bus_{}_{}_{nanos}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        Some(Place {
            pg: Some((url, schema)),
        })
    }

    /// Whether the queues are on PostgreSQL.
    pub(crate) fn is_pg(&self) -> bool {
        self.pg.is_some()
    }

    /// The server's URL and the schema, on PostgreSQL.
    pub(crate) fn server(&self) -> Option<(&str, &str)> {
        self.pg.as_ref().map(|(u, s)| (u.as_str(), s.as_str()))
    }

    /// Says how a child process opens the same queues, with `root` as its
    /// local state root.
    pub(crate) fn spec(&self, root: &std::path::Path) -> String {
        let root = root.to_str().unwrap();
        match &self.pg {
            None => root.to_owned(),
            Some((url, schema)) => format!("pg\t{url}\t{schema}\t{root}"),
        }
    }

    /// Returns a bus on this place, with `state` as the local root.
    pub(crate) fn bus(&self, state: StateDir) -> Bus {
        self.bus_with(state, BusConfig::default())
    }

    /// As [`Place::bus`], with `config`.
    pub(crate) fn bus_with(&self, state: StateDir, config: BusConfig) -> Bus {
        match &self.pg {
            None => Bus::with_config(state, config),
            Some((url, schema)) => Bus::with_backend(state, config, backend(url, schema)),
        }
    }
}

/// A new handle (its own connections) on `schema` at `url`.
pub(crate) fn backend(url: &str, schema: &str) -> Arc<dyn Backend> {
    Arc::new(PgBackend::open_with(url, PgOptions::with_schema(schema)).unwrap())
}

/// Opens the queues a [`Place::spec`] names, and its local root.
pub(crate) fn bus_of(spec: &str) -> (Bus, StateDir) {
    let parts: Vec<&str> = spec.split('\t').collect();
    match parts.as_slice() {
        [root] => {
            let state = StateDir::open(root).unwrap();
            (Bus::new(state.clone()), state)
        }
        ["pg", url, schema, root] => {
            let state = StateDir::open(root).unwrap();
            let bus = Bus::with_backend(state.clone(), BusConfig::default(), backend(url, schema));
            (bus, state)
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
