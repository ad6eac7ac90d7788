//! Where a test's pool lives (issue 30): a state root, or a PostgreSQL
//! server (`CHIPSET_TEST_PG`) and a schema of the test's own
//! ([`chipset_backend::testing::Placed`]). The lifecycle, model and race
//! tests take a place, so the same bodies run on both backends.

use std::sync::Arc;

use chipset_backend::testing::{Channel, Placed, open_spec};
use chipset_backend::{Backend, Dir};
use chipset_hook::Hooks;
use chipset_pool::Pool;
use chipset_store::StateDir;

/// The directory itself, or a server and a schema: `open` gives the pool
/// and the hooks.
pub(crate) type Place = Placed<PoolChannel>;

/// The pool and the hooks it claims onto.
pub(crate) struct PoolChannel;

impl Channel for PoolChannel {
    type Handle = (Pool, Hooks);
    fn open(state: StateDir, seam: Option<Arc<dyn Backend>>) -> (Pool, Hooks) {
        match seam {
            None => (Pool::new(state.clone()), Hooks::new(state)),
            Some(b) => (
                Pool::with_backend(state.clone(), Arc::clone(&b)),
                Hooks::with_backend(state, b),
            ),
        }
    }
}

/// Opens the pool a [`Place::spec`](chipset_backend::testing::Place::spec) names, on
/// `state` (the spec's root, opened by the caller with its own options).
pub(crate) fn pool_of(spec: &str, state: &StateDir) -> (Pool, Hooks) {
    PoolChannel::open(state.clone(), open_spec(spec).seam)
}

/// The root a [`Place::spec`](chipset_backend::testing::Place::spec) names.
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
