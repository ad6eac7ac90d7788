//! Test support for the crates on the seam (feature `testing`): where a
//! test's channel lives (a state root's own directory, or a fresh schema on
//! the PostgreSQL server `CHIPSET_TEST_PG` names), how a child process
//! opens the same place, a test crate's channel on either ([`Placed`]), a
//! backend a test puts in front of another to watch or disturb its
//! operations ([`Intercepted`]), and a TCP proxy that cuts a connection at
//! commit ([`Proxy`]).
//!
//! ```no_run
//! use chipset_backend::testing::{Place, open_spec};
//!
//! let root = std::path::Path::new("/tmp/state");
//! for place in [Some(Place::fs()), Place::pg("my_test")].into_iter().flatten() {
//!     // Hand `spec` to a child; it opens the same backend with `open_spec`.
//!     let spec = place.spec(root);
//!     let opened = open_spec(&spec);
//!     assert_eq!(opened.seam.is_some(), place.is_pg());
//! }
//! ```

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use chipset_store::{StateDir, Timestamp};

mod proxy;
pub use proxy::Proxy;

use crate::{
    Backend, Claim, Claimed, Created, Decide, Dir, FsBackend, Key, LockGuard, LogPos, LogRead,
    PgBackend, PgOptions, Result, Step, Version, Versioned, Wait,
};

/// The variable that names the PostgreSQL server for the tests.
pub const PG_ENV: &str = "CHIPSET_TEST_PG";

/// Returns the server `CHIPSET_TEST_PG` names, or `None`, saying that the
/// PostgreSQL half of `test` is skipped: on the test's own output, and once
/// per run on the process's standard error past the harness's capture, so
/// a passing run never reads as PostgreSQL coverage.
pub fn pg_url(test: &str) -> Option<String> {
    match std::env::var(PG_ENV) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            #[allow(clippy::print_stderr, reason = "a skipped half must say so")]
            {
                eprintln!("{test}: SKIPPED on PostgreSQL: {PG_ENV} is not set");
            }
            static SAID: std::sync::Once = std::sync::Once::new();
            // The harness captures the print macros only: a write to the
            // stderr handle reaches fd 2 itself.
            SAID.call_once(|| {
                use std::io::Write as _;
                let _ = writeln!(
                    std::io::stderr(),
                    "{PG_ENV} is not set: the PostgreSQL tests pass WITHOUT running (directory half only)"
                );
            });
            None
        }
    }
}

/// A schema of one test's own on the test server, dropped with everything
/// in it when this value is dropped.
#[derive(Debug)]
pub struct TestSchema {
    url: String,
    name: String,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

impl TestSchema {
    /// A schema no other test (or earlier run) uses, on the server
    /// [`pg_url`] returns; `None` as there.
    pub fn fresh(test: &str) -> Option<TestSchema> {
        let url = pg_url(test)?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let stem: String = test
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .take(30)
            .collect::<String>()
            .to_ascii_lowercase();
        let name = format!(
            "t_{stem}_{}_{}_{nanos}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        Some(TestSchema { url, name })
    }

    /// The server's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The schema's name: lower-case letters, digits and `_`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The options that put a backend on this schema.
    pub fn options(&self) -> PgOptions {
        PgOptions::with_schema(&self.name)
    }

    /// A new handle on the schema, with its own connections.
    ///
    /// # Panics
    ///
    /// When the server cannot be reached: a test's precondition.
    pub fn open(&self) -> Arc<dyn Backend> {
        Arc::new(PgBackend::open_with(&self.url, self.options()).expect("the test server"))
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        drop_schema(&self.url, &self.name);
    }
}

/// Removes the schema `schema` of the server `url` and everything in it;
/// errors are ignored (a test's cleanup).
pub fn drop_schema(url: &str, schema: &str) {
    if let Ok(mut c) = postgres::Client::connect(url, postgres::NoTls) {
        let sql: std::result::Result<String, _> = c
            .query_one(
                "SELECT format('DROP SCHEMA IF EXISTS %I CASCADE', $1::text)",
                &[&schema],
            )
            .map(|r| r.get(0));
        if let Ok(sql) = sql {
            let _ = c.batch_execute(&sql);
        }
    }
}

/// Where a test's channel lives: the state root's own directory (the
/// channel's tuned file paths), or a fresh [`TestSchema`].
#[derive(Debug)]
pub struct Place {
    schema: Option<TestSchema>,
}

impl Place {
    /// The state root's own directory.
    pub fn fs() -> Place {
        Place { schema: None }
    }

    /// A fresh schema on the test server, or `None` (saying that the
    /// PostgreSQL half of `test` is skipped).
    pub fn pg(test: &str) -> Option<Place> {
        TestSchema::fresh(test).map(|schema| Place {
            schema: Some(schema),
        })
    }

    /// Whether the channel is on PostgreSQL.
    pub fn is_pg(&self) -> bool {
        self.schema.is_some()
    }

    /// The schema, on PostgreSQL.
    pub fn schema(&self) -> Option<&TestSchema> {
        self.schema.as_ref()
    }

    /// A new handle on the server (its own connections), or `None` on a
    /// directory: what a channel's `with_backend` takes.
    pub fn seam(&self) -> Option<Arc<dyn Backend>> {
        self.schema.as_ref().map(TestSchema::open)
    }

    /// A backend on this place, to plant and inspect values as another
    /// program would: the server's, or the directory `state` itself.
    pub fn backend(&self, state: &StateDir) -> Arc<dyn Backend> {
        self.seam()
            .unwrap_or_else(|| Arc::new(FsBackend::new(state.clone())))
    }

    /// Says how a child process opens the same place, with `root` as its
    /// local state root (read back by [`open_spec`]).
    ///
    /// # Panics
    ///
    /// When `root` is not UTF-8.
    pub fn spec(&self, root: &Path) -> String {
        let root = root.to_str().expect("a UTF-8 test root");
        match &self.schema {
            None => root.to_owned(),
            Some(s) => format!("pg\t{}\t{}\t{root}", s.url, s.name),
        }
    }
}

/// A channel a test opens on a [`Place`], named by a marker type of the
/// test crate's own (which can implement this trait for a channel type it
/// does not own).
///
/// ```no_run
/// use std::sync::Arc;
/// use chipset_backend::testing::{Channel, Placed};
/// use chipset_backend::{Backend, FsBackend};
/// use chipset_store::StateDir;
///
/// /// The raw seam, as a channel would take it.
/// struct Raw;
/// impl Channel for Raw {
///     type Handle = Arc<dyn Backend>;
///     fn open(state: StateDir, seam: Option<Arc<dyn Backend>>) -> Arc<dyn Backend> {
///         seam.unwrap_or_else(|| Arc::new(FsBackend::new(state)))
///     }
/// }
/// type Place = Placed<Raw>;
///
/// let state = StateDir::open("/tmp/state")?;
/// for place in [Some(Place::fs()), Place::pg("my_test")].into_iter().flatten() {
///     let backend = place.open(&state);
///     // A child opens the same with `Place::open_spec(&place.spec(root))`.
/// #   let _ = backend;
/// }
/// # Ok::<(), chipset_store::Error>(())
/// ```
pub trait Channel {
    /// What the test works with: the channel's handle (or handles).
    type Handle;

    /// Opens the handle with `state` as the local root: on the server's
    /// backend `seam`, or (`None`) on the state root's own directory.
    fn open(state: StateDir, seam: Option<Arc<dyn Backend>>) -> Self::Handle;
}

/// A [`Place`] that opens the channel `C`: dereferences to the place, so
/// [`Place::spec`], [`Place::is_pg`] and the rest are at hand.
pub struct Placed<C> {
    place: Place,
    channel: std::marker::PhantomData<fn() -> C>,
}

impl<C> fmt::Debug for Placed<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.place.fmt(f)
    }
}

impl<C> std::ops::Deref for Placed<C> {
    type Target = Place;
    fn deref(&self) -> &Place {
        &self.place
    }
}

impl<C: Channel> Placed<C> {
    fn at(place: Place) -> Self {
        Placed {
            place,
            channel: std::marker::PhantomData,
        }
    }

    /// The state root's own directory.
    pub fn fs() -> Self {
        Self::at(Place::fs())
    }

    /// A fresh schema on the test server, or `None` (saying that the
    /// PostgreSQL half of `test` is skipped).
    pub fn pg(test: &str) -> Option<Self> {
        Place::pg(test).map(Self::at)
    }

    /// Opens the channel on this place, with `state` as the local root (on
    /// PostgreSQL with connections of its own).
    pub fn open(&self, state: &StateDir) -> C::Handle {
        C::open(state.clone(), self.seam())
    }

    /// Opens the channel a [`Place::spec`] names, in a child process, and
    /// returns it with its local root.
    ///
    /// # Panics
    ///
    /// As [`open_spec`].
    pub fn open_spec(spec: &str) -> (C::Handle, StateDir) {
        let opened = open_spec(spec);
        let state = opened.state.clone();
        (C::open(opened.state, opened.seam), state)
    }
}

/// Runs each named test body twice: as `fs::name` on a directory and as
/// `pg::name` on the server `CHIPSET_TEST_PG` names (skipped, saying so,
/// without one). The first argument is a type, named by its path from the
/// crate root, with `fs() -> Self` and `pg(test: &str) -> Option<Self>` (a
/// [`Placed`], or a test's own fixture); each body is `fn name(place: &P)`.
///
/// ```
/// use chipset_backend::testing::Place;
///
/// // In a test crate the place is its own, e.g. `crate::place::Place`.
/// chipset_backend::both!(chipset_backend::testing::Place; knows_where_it_is);
///
/// fn knows_where_it_is(place: &Place) {
///     assert_eq!(place.is_pg(), place.schema().is_some());
/// }
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! both {
    ($place:ty; $($name:ident),* $(,)?) => {
        mod fs {
            $(
                #[test]
                fn $name() {
                    super::$name(&<$place>::fs());
                }
            )*
        }
        mod pg {
            $(
                #[test]
                fn $name() {
                    if let Some(place) = <$place>::pg(stringify!($name)) {
                        super::$name(&place);
                    }
                }
            )*
        }
    };
}

/// What a [`Place::spec`] opens in a child process.
#[derive(Debug)]
pub struct Opened {
    /// The local state root.
    pub state: StateDir,
    /// The server's backend, or `None` on a directory.
    pub seam: Option<Arc<dyn Backend>>,
}

/// Opens the place a [`Place::spec`] names.
///
/// # Panics
///
/// On a spec [`Place::spec`] did not make, or a server that cannot be
/// reached.
pub fn open_spec(spec: &str) -> Opened {
    let parts: Vec<&str> = spec.split('\t').collect();
    let (root, seam) = match parts.as_slice() {
        [root] => (*root, None),
        ["pg", url, schema, root] => {
            let backend = PgBackend::open_with(url, PgOptions::with_schema(*schema))
                .expect("the test server");
            (*root, Some(Arc::new(backend) as Arc<dyn Backend>))
        }
        _ => panic!("bad place {spec}"),
    };
    Opened {
        state: StateDir::open(root).expect("the test's state root"),
        seam,
    }
}

/// One operation on its way to the backend an [`Intercepted`] wraps.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Op<'a> {
    /// [`Backend::read`].
    Read(&'a Key),
    /// [`Backend::create`].
    Create(&'a Key),
    /// [`Backend::replace`].
    Replace(&'a Key),
    /// [`Backend::put`].
    Put(&'a Key),
    /// [`Backend::remove`].
    Remove(&'a Key),
    /// [`Backend::move_new`], from the first key to the second.
    MoveNew(&'a Key, &'a Key),
    /// [`Backend::list`], [`Backend::list_dirs`] or [`Backend::read_all`].
    List(&'a Dir),
    /// [`Backend::append`].
    Append(&'a Key),
    /// [`Backend::read_log`].
    ReadLog(&'a Key),
    /// [`Backend::lock`].
    Lock(&'a Key),
    /// [`Backend::watch`].
    Watch,
    /// [`Backend::transact`].
    Transact(&'a [Step<'a>]),
    /// [`Backend::claim`].
    Claim,
}

/// What a test puts in front of a backend: it sees each operation first,
/// and may answer the clock.
pub trait Intercept: fmt::Debug + Send + Sync {
    /// Runs before `op` reaches `inner`; an error is returned in the
    /// operation's place, and `inner` never sees it.
    ///
    /// # Errors
    ///
    /// What the test chooses.
    fn before(&self, inner: &dyn Backend, op: Op<'_>) -> Result<()> {
        let _ = (inner, op);
        Ok(())
    }

    /// The time [`Backend::now`] answers: `inner`'s by default.
    ///
    /// # Errors
    ///
    /// As [`Backend::now`].
    fn now(&self, inner: &dyn Backend) -> Result<Timestamp> {
        inner.now()
    }
}

/// A backend that passes every operation to `inner` after `by` has seen it.
#[derive(Debug)]
pub struct Intercepted<I> {
    /// The backend that does the work.
    pub inner: Arc<dyn Backend>,
    /// What sees each operation first.
    pub by: I,
}

impl<I: Intercept> Backend for Intercepted<I> {
    fn now(&self) -> Result<Timestamp> {
        self.by.now(&*self.inner)
    }
    fn read(&self, key: &Key) -> Result<Option<Versioned>> {
        self.by.before(&*self.inner, Op::Read(key))?;
        self.inner.read(key)
    }
    fn create(&self, key: &Key, value: &[u8]) -> Result<Created> {
        self.by.before(&*self.inner, Op::Create(key))?;
        self.inner.create(key, value)
    }
    fn replace(&self, key: &Key, expected: Version, value: &[u8]) -> Result<Version> {
        self.by.before(&*self.inner, Op::Replace(key))?;
        self.inner.replace(key, expected, value)
    }
    fn put(&self, key: &Key, value: &[u8]) -> Result<Version> {
        self.by.before(&*self.inner, Op::Put(key))?;
        self.inner.put(key, value)
    }
    fn remove(&self, key: &Key, expected: Version) -> Result<()> {
        self.by.before(&*self.inner, Op::Remove(key))?;
        self.inner.remove(key, expected)
    }
    fn move_new(&self, from: &Key, expected: Version, to: &Key) -> Result<Version> {
        self.by.before(&*self.inner, Op::MoveNew(from, to))?;
        self.inner.move_new(from, expected, to)
    }
    fn list(&self, dir: &Dir) -> Result<Vec<String>> {
        self.by.before(&*self.inner, Op::List(dir))?;
        self.inner.list(dir)
    }
    fn append(&self, log: &Key, records: &[&[u8]]) -> Result<()> {
        self.by.before(&*self.inner, Op::Append(log))?;
        self.inner.append(log, records)
    }
    fn read_log(&self, log: &Key, from: LogPos) -> Result<LogRead> {
        self.by.before(&*self.inner, Op::ReadLog(log))?;
        self.inner.read_log(log, from)
    }
    fn lock(&self, key: &Key) -> Result<LockGuard> {
        self.by.before(&*self.inner, Op::Lock(key))?;
        self.inner.lock(key)
    }
    fn watch(&self, dirs: &[Dir], rescan: Duration) -> Result<Box<dyn Wait>> {
        self.by.before(&*self.inner, Op::Watch)?;
        self.inner.watch(dirs, rescan)
    }
    fn read_all(&self, dir: &Dir) -> Result<Vec<(String, Versioned)>> {
        self.by.before(&*self.inner, Op::List(dir))?;
        self.inner.read_all(dir)
    }
    fn transact(&self, steps: &[Step<'_>]) -> Result<Vec<Option<Version>>> {
        self.by.before(&*self.inner, Op::Transact(steps))?;
        self.inner.transact(steps)
    }
    fn list_dirs(&self, dir: &Dir) -> Result<Vec<String>> {
        self.by.before(&*self.inner, Op::List(dir))?;
        self.inner.list_dirs(dir)
    }
    fn local_state(&self) -> Option<&StateDir> {
        self.inner.local_state()
    }
    fn claim(&self, claim: &Claim<'_>, decide: &mut Decide<'_>) -> Result<Option<Claimed>> {
        self.by.before(&*self.inner, Op::Claim)?;
        self.inner.claim(claim, decide)
    }
}
