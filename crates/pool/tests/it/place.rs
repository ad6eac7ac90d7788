//! Where a test's pool lives (issue 30): a state root, or a PostgreSQL
//! server (`CHIPSET_TEST_PG`) and a schema of the test's own
//! ([`chipset_backend::testing::Placed`]). The lifecycle, model and race
//! tests take a place, so the same bodies run on both backends.

use std::sync::Arc;
use std::time::Duration;

use chipset_backend::testing::{Channel, Intercept, Intercepted, Placed, open_spec};
use chipset_backend::{
    self as backend, Backend, Claim, Claimed, Created, Decide, Dir, FsBackend, Key, LockGuard,
    LogPos, LogRead, Step, Version, Versioned, Wait,
};
use chipset_hook::Hooks;
use chipset_pool::Pool;
use chipset_store::{StateDir, Timestamp};

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

/// A directory's backend that answers as a server (no local state), so a
/// pool on it takes its server paths (rows, the backend's claim, the
/// tries of a claim) without a server. Every operation goes to `inner`.
#[derive(Debug)]
pub(crate) struct AsServer {
    pub(crate) inner: Arc<dyn Backend>,
}

impl AsServer {
    /// A pool and its hooks on `state`'s directory answering as a server,
    /// with `by` seeing each operation first.
    pub(crate) fn open<I: Intercept + 'static>(state: &StateDir, by: I) -> (Pool, Hooks) {
        let inner = Arc::new(Intercepted {
            inner: Arc::new(FsBackend::new(state.clone())),
            by,
        });
        PoolChannel::open(state.clone(), Some(Arc::new(AsServer { inner })))
    }
}

impl Backend for AsServer {
    fn now(&self) -> backend::Result<Timestamp> {
        self.inner.now()
    }
    fn read(&self, key: &Key) -> backend::Result<Option<Versioned>> {
        self.inner.read(key)
    }
    fn create(&self, key: &Key, value: &[u8]) -> backend::Result<Created> {
        self.inner.create(key, value)
    }
    fn replace(&self, key: &Key, expected: Version, value: &[u8]) -> backend::Result<Version> {
        self.inner.replace(key, expected, value)
    }
    fn put(&self, key: &Key, value: &[u8]) -> backend::Result<Version> {
        self.inner.put(key, value)
    }
    fn remove(&self, key: &Key, expected: Version) -> backend::Result<()> {
        self.inner.remove(key, expected)
    }
    fn move_new(&self, from: &Key, expected: Version, to: &Key) -> backend::Result<Version> {
        self.inner.move_new(from, expected, to)
    }
    fn list(&self, dir: &Dir) -> backend::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn append(&self, log: &Key, records: &[&[u8]]) -> backend::Result<()> {
        self.inner.append(log, records)
    }
    fn read_log(&self, log: &Key, from: LogPos) -> backend::Result<LogRead> {
        self.inner.read_log(log, from)
    }
    fn lock(&self, key: &Key) -> backend::Result<LockGuard> {
        self.inner.lock(key)
    }
    fn watch(&self, dirs: &[Dir], rescan: Duration) -> backend::Result<Box<dyn Wait>> {
        self.inner.watch(dirs, rescan)
    }
    fn read_all(&self, dir: &Dir) -> backend::Result<Vec<(String, Versioned)>> {
        self.inner.read_all(dir)
    }
    fn transact(&self, steps: &[Step<'_>]) -> backend::Result<Vec<Option<Version>>> {
        self.inner.transact(steps)
    }
    fn list_dirs(&self, dir: &Dir) -> backend::Result<Vec<String>> {
        self.inner.list_dirs(dir)
    }
    fn claim(
        &self,
        claim: &Claim<'_>,
        decide: &mut Decide<'_>,
    ) -> backend::Result<Option<Claimed>> {
        self.inner.claim(claim, decide)
    }
}
