//! Where a test's pool lives (issue 30): a state root, or a PostgreSQL
//! server (`CHIPSET_TEST_PG`) and a schema of the test's own. The
//! lifecycle and race tests take a place, so the same bodies run on both
//! backends.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use chipset_backend::{Backend, Dir, PgBackend, PgOptions};
use chipset_hook::Hooks;
use chipset_pool::Pool;
use chipset_store::StateDir;

/// The variable that names the PostgreSQL server for the tests.
const PG_ENV: &str = "CHIPSET_TEST_PG";

/// A backend for the pool: the directory itself, or a server and a schema.
pub(crate) struct Place {
    pg: Option<(String, String)>,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// Runs each named body (`fn name(place: &Place)`) twice: as
/// `fs::name` on a directory and as `pg::name` on the server
/// `CHIPSET_TEST_PG` names (saying it was skipped without one).
macro_rules! both {
    ($($name:ident),* $(,)?) => {
        mod fs {
            $(
                #[test]
                fn $name() {
                    super::$name(&$crate::place::Place::fs());
                }
            )*
        }
        mod pg {
            $(
                #[test]
                fn $name() {
                    if let Some(place) = $crate::place::Place::pg(stringify!($name)) {
                        super::$name(&place);
                    }
                }
            )*
        }
    };
}

impl Place {
    /// The state root's own directory.
    pub(crate) fn fs() -> Place {
        Place { pg: None }
    }

    /// A fresh schema on the server `CHIPSET_TEST_PG` names, or `None`
    /// (saying that the PostgreSQL half of `test` is skipped).
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
            "pool_{}_{}_{nanos}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        Some(Place {
            pg: Some((url, schema)),
        })
    }

    /// Whether the pool is on PostgreSQL.
    pub(crate) fn is_pg(&self) -> bool {
        self.pg.is_some()
    }

    /// The server's URL and the schema, on PostgreSQL.
    pub(crate) fn server(&self) -> Option<(&str, &str)> {
        self.pg.as_ref().map(|(u, s)| (u.as_str(), s.as_str()))
    }

    /// A new handle on the server, `None` on a directory.
    pub(crate) fn backend(&self) -> Option<Arc<dyn Backend>> {
        self.pg.as_ref().map(|(url, schema)| backend(url, schema))
    }

    /// Says how a child process opens the same pool, with `root` as its
    /// local state root.
    pub(crate) fn spec(&self, root: &std::path::Path) -> String {
        let root = root.to_str().unwrap();
        match &self.pg {
            None => root.to_owned(),
            Some((url, schema)) => format!("pg\t{url}\t{schema}\t{root}"),
        }
    }

    /// The pool and the hooks on this place, with `state` as the local root.
    pub(crate) fn open(&self, state: &StateDir) -> (Pool, Hooks) {
        match self.backend() {
            None => (Pool::new(state.clone()), Hooks::new(state.clone())),
            Some(b) => (
                Pool::with_backend(state.clone(), Arc::clone(&b)),
                Hooks::with_backend(state.clone(), b),
            ),
        }
    }
}

/// A new handle (its own connections) on `schema` at `url`.
fn backend(url: &str, schema: &str) -> Arc<dyn Backend> {
    Arc::new(PgBackend::open_with(url, PgOptions::with_schema(schema)).unwrap())
}

/// Opens the pool a [`Place::spec`] names, on `state` (the spec's root,
/// opened by the caller with its own options).
pub(crate) fn open_spec(spec: &str, state: &StateDir) -> (Pool, Hooks) {
    let parts: Vec<&str> = spec.split('\t').collect();
    match parts.as_slice() {
        [_root] => (Pool::new(state.clone()), Hooks::new(state.clone())),
        ["pg", url, schema, _root] => {
            let b = backend(url, schema);
            (
                Pool::with_backend(state.clone(), Arc::clone(&b)),
                Hooks::with_backend(state.clone(), b),
            )
        }
        _ => panic!("bad place {spec}"),
    }
}

/// The root a [`Place::spec`] names.
pub(crate) fn root_of_spec(spec: &str) -> &str {
    spec.rsplit('\t').next().unwrap()
}

/// Every row under the pool's and the hooks' folders on a server, to show
/// that a refused operation changed nothing.
pub(crate) fn rows(backend: &dyn Backend) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for dir in ["pool", "pool/items", "pool/entries", "hooks"] {
        let mut segments = dir.split('/');
        let mut d = Dir::new(segments.next().unwrap()).unwrap();
        for s in segments {
            d = d.join(s).unwrap();
        }
        for (name, v) in backend.read_all(&d).unwrap() {
            out.push((format!("{dir}/{name}"), v.value));
        }
    }
    out
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
