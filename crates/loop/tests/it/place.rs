//! Where a test's loops live (issue 30): a state root's directory, or a
//! PostgreSQL server (`CHIPSET_TEST_PG`) and a schema of the test's own.
//! The witness, worker, dispatcher and rounds tests take a [`Setup`](crate::Setup)
//! on either, so the same bodies run on both backends ([`both!`]).
//!
//! On a server the loops judge time by the backend's clock, which a test
//! cannot move; [`Clocked`] puts the test's manual clock in front of the
//! server's (every other operation is the server's), so the bodies that
//! advance time run unchanged. The server's own clock is the backend's
//! tests' business.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use chipset_backend::{
    Backend, Created, Dir, Key, LockGuard, LogPos, LogRead, PgBackend, PgOptions, Step, Version,
    Versioned, Wait,
};
use chipset_store::{Clock, ManualClock, Timestamp};

/// The variable that names the PostgreSQL server for the tests.
pub(crate) const PG_ENV: &str = "CHIPSET_TEST_PG";

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A schema of the test's own on the server, dropped with it.
pub(crate) struct Schema {
    /// The server's URL.
    pub(crate) url: String,
    /// The schema's name.
    pub(crate) name: String,
    pub(crate) backend: Arc<dyn Backend>,
}

impl Schema {
    /// A fresh schema on the server `CHIPSET_TEST_PG` names, its backend
    /// on `clock` (`None`: the server's own clock); `None` (saying that
    /// the PostgreSQL half is skipped) when the variable is not set.
    pub(crate) fn open(test: &str, clock: Option<ManualClock>) -> Option<Schema> {
        let url = match std::env::var(PG_ENV) {
            Ok(url) if !url.is_empty() => url,
            _ => {
                #[allow(clippy::print_stderr, reason = "a skipped half must say so")]
                {
                    eprintln!("{test}: SKIPPED on PostgreSQL: {PG_ENV} is not set");
                }
                // Once per run, past the harness's capture (fd 2 itself), so
                // a passing run never reads as PostgreSQL coverage.
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| {
                    use std::io::Write as _;
                    let Ok(mut fd2) = std::fs::OpenOptions::new()
                        .append(true)
                        .open("/dev/stderr")
                    else {
                        return;
                    };
                    let _ = writeln!(
                        fd2,
                        "chipset-loop: {PG_ENV} is not set: the PostgreSQL tests pass WITHOUT running (directory half only)"
                    );
                });
                return None;
            }
        };
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!(
            "loop_{}_{}_{nanos}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let mut options = PgOptions::with_schema(&name);
        options.max_idle = 2;
        let server: Arc<dyn Backend> = Arc::new(PgBackend::open_with(&url, options).unwrap());
        let backend: Arc<dyn Backend> = match clock {
            Some(clock) => Arc::new(Clocked { server, clock }),
            None => server,
        };
        Some(Schema { url, name, backend })
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.url, postgres::NoTls) {
            // The schema's name is ours: lower-case letters, digits and `_`.
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name));
        }
    }
}

/// A server whose clock is the test's manual clock.
#[derive(Debug)]
pub(crate) struct Clocked {
    server: Arc<dyn Backend>,
    clock: ManualClock,
}

impl Backend for Clocked {
    fn now(&self) -> chipset_backend::Result<Timestamp> {
        Ok(self.clock.now())
    }
    fn read(&self, key: &Key) -> chipset_backend::Result<Option<Versioned>> {
        self.server.read(key)
    }
    fn create(&self, key: &Key, value: &[u8]) -> chipset_backend::Result<Created> {
        self.server.create(key, value)
    }
    fn replace(
        &self,
        key: &Key,
        expected: Version,
        value: &[u8],
    ) -> chipset_backend::Result<Version> {
        self.server.replace(key, expected, value)
    }
    fn put(&self, key: &Key, value: &[u8]) -> chipset_backend::Result<Version> {
        self.server.put(key, value)
    }
    fn remove(&self, key: &Key, expected: Version) -> chipset_backend::Result<()> {
        self.server.remove(key, expected)
    }
    fn move_new(
        &self,
        from: &Key,
        expected: Version,
        to: &Key,
    ) -> chipset_backend::Result<Version> {
        self.server.move_new(from, expected, to)
    }
    fn list(&self, dir: &Dir) -> chipset_backend::Result<Vec<String>> {
        self.server.list(dir)
    }
    fn append(&self, log: &Key, records: &[&[u8]]) -> chipset_backend::Result<()> {
        self.server.append(log, records)
    }
    fn read_log(&self, log: &Key, from: LogPos) -> chipset_backend::Result<LogRead> {
        self.server.read_log(log, from)
    }
    fn lock(&self, key: &Key) -> chipset_backend::Result<LockGuard> {
        self.server.lock(key)
    }
    fn watch(&self, dirs: &[Dir], rescan: Duration) -> chipset_backend::Result<Box<dyn Wait>> {
        self.server.watch(dirs, rescan)
    }
    fn read_all(&self, dir: &Dir) -> chipset_backend::Result<Vec<(String, Versioned)>> {
        self.server.read_all(dir)
    }
    fn transact(&self, steps: &[Step<'_>]) -> chipset_backend::Result<Vec<Option<Version>>> {
        self.server.transact(steps)
    }
    fn list_dirs(&self, dir: &Dir) -> chipset_backend::Result<Vec<String>> {
        self.server.list_dirs(dir)
    }
    fn local_state(&self) -> Option<&chipset_store::StateDir> {
        self.server.local_state()
    }
}

/// Returns a handle on the schema `name` of the server `url`, on the
/// server's clock: a child process's view of a [`Schema`].
pub(crate) fn server(url: &str, name: &str) -> Arc<dyn Backend> {
    Arc::new(PgBackend::open_with(url, PgOptions::with_schema(name)).unwrap())
}

/// Runs each named body (`fn name(s: Setup)`) on a directory as
/// `fs::name` and on PostgreSQL as `pg::name` (skipped, saying so,
/// without `CHIPSET_TEST_PG`).
macro_rules! both {
    ($($name:ident),* $(,)?) => {
        mod fs {
            $(
                #[test]
                fn $name() {
                    super::$name(crate::setup());
                }
            )*
        }
        mod pg {
            $(
                #[test]
                fn $name() {
                    if let Some(s) = crate::setup_pg(stringify!($name)) {
                        super::$name(s);
                    }
                }
            )*
        }
    };
}
