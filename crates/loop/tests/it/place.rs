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

use chipset_backend::testing::{Intercept, Intercepted, TestSchema};
use chipset_backend::{Backend, PgBackend, PgOptions};
use chipset_store::{Clock, ManualClock, Timestamp};

/// A schema of the test's own on the server, dropped with it.
pub(crate) struct Schema {
    /// The server and the schema's name.
    pub(crate) at: TestSchema,
    pub(crate) backend: Arc<dyn Backend>,
}

impl Schema {
    /// A fresh schema on the server `CHIPSET_TEST_PG` names, its backend
    /// on `clock` (`None`: the server's own clock); `None` (saying that
    /// the PostgreSQL half is skipped) when the variable is not set.
    pub(crate) fn open(test: &str, clock: Option<ManualClock>) -> Option<Schema> {
        let at = TestSchema::fresh(test)?;
        let mut options = at.options();
        options.max_idle = 2;
        let server: Arc<dyn Backend> = Arc::new(PgBackend::open_with(at.url(), options).unwrap());
        let backend: Arc<dyn Backend> = match clock {
            Some(clock) => Arc::new(Intercepted {
                inner: server,
                by: Clocked(clock),
            }),
            None => server,
        };
        Some(Schema { at, backend })
    }
}

/// Puts the test's manual clock in front of a server's.
#[derive(Debug)]
pub(crate) struct Clocked(ManualClock);

impl Intercept for Clocked {
    fn now(&self, _server: &dyn Backend) -> chipset_backend::Result<Timestamp> {
        Ok(self.0.now())
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
