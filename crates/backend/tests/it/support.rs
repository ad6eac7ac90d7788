//! The fixture both backends share: a fresh state (a temporary directory,
//! or a fresh PostgreSQL schema), more handles on it, and the child roles.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use chipset_backend::{Backend, Created, Dir, FsBackend, Key, PgBackend, PgOptions};
use chipset_testkit as kit;

/// The variable that names the PostgreSQL server for the tests.
pub(crate) const PG_ENV: &str = "CHIPSET_TEST_PG";

/// A fresh state on one backend.
pub(crate) struct Fx {
    place: Place,
    /// The first handle.
    pub(crate) b: Arc<dyn Backend>,
}

enum Place {
    Fs(tempfile::TempDir),
    Pg { url: String, schema: String },
}

/// Returns the server's URL, or says that the PostgreSQL half is skipped.
pub(crate) fn pg_url(test: &str) -> Option<String> {
    match std::env::var(PG_ENV) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            #[allow(clippy::print_stderr, reason = "a skipped half must say so")]
            {
                eprintln!(
                    "{test}: SKIPPED on PostgreSQL: {PG_ENV} is not set (filesystem half only)"
                );
            }
            // Once per run, past the harness's capture (fd 2 itself), so a
            // passing run never reads as PostgreSQL coverage.
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                use std::io::Write as _;
                #[allow(
                    clippy::disallowed_types,
                    clippy::disallowed_methods,
                    reason = "fd 2 itself, which the harness does not capture"
                )]
                let Ok(mut fd2) = std::fs::OpenOptions::new().append(true).open("/dev/stderr") else {
                    return;
                };
                let _ = writeln!(
                    fd2,
                    "chipset-backend: {PG_ENV} is not set: the PostgreSQL tests pass WITHOUT running (filesystem half only)"
                );
            });
            None
        }
    }
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// Returns a schema name no other test (or earlier run) uses.
pub(crate) fn fresh_schema(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let mut name: String = test
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(30)
        .collect::<String>()
        .to_ascii_lowercase();
    name = format!(
        "t_{name}_{}_{}_{nanos}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    name
}

impl Fx {
    pub(crate) fn fs() -> Fx {
        let tmp = tempfile::tempdir().unwrap();
        let b = Arc::new(FsBackend::open(tmp.path()).unwrap());
        Fx {
            place: Place::Fs(tmp),
            b,
        }
    }

    pub(crate) fn pg(test: &str) -> Option<Fx> {
        let url = pg_url(test)?;
        let schema = fresh_schema(test);
        let b = Arc::new(PgBackend::open_with(&url, PgOptions::with_schema(&schema)).unwrap());
        Some(Fx {
            place: Place::Pg { url, schema },
            b,
        })
    }

    /// Returns another handle on the same state (its own connections).
    pub(crate) fn reopen(&self) -> Arc<dyn Backend> {
        open_spec(&self.spec())
    }

    /// Says how a child process opens the same state.
    pub(crate) fn spec(&self) -> String {
        match &self.place {
            Place::Fs(tmp) => format!("fs\t{}", tmp.path().display()),
            Place::Pg { url, schema } => format!("pg\t{url}\t{schema}"),
        }
    }
}

impl Drop for Fx {
    fn drop(&mut self) {
        if let Place::Pg { url, schema } = &self.place {
            drop_schema(url, schema);
        }
    }
}

/// Removes a test's schema and everything in it.
pub(crate) fn drop_schema(url: &str, schema: &str) {
    if let Ok(mut c) = postgres::Client::connect(url, postgres::NoTls) {
        let sql: Result<String, _> = c
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

/// Opens a handle from a [`Fx::spec`].
pub(crate) fn open_spec(spec: &str) -> Arc<dyn Backend> {
    let parts: Vec<&str> = spec.split('\t').collect();
    match parts[0] {
        "fs" => Arc::new(FsBackend::open(parts[1]).unwrap()),
        "pg" => Arc::new(PgBackend::open_with(parts[1], PgOptions::with_schema(parts[2])).unwrap()),
        other => panic!("unknown backend spec {other}"),
    }
}

/// Runs the conformance bodies named on both backends: `fs::name` always,
/// `pg::name` when `CHIPSET_TEST_PG` names a server.
macro_rules! both {
    ($($name:ident),* $(,)?) => {
        mod fs {
            $(
                #[test]
                fn $name() {
                    super::$name(&crate::support::Fx::fs());
                }
            )*
        }
        mod pg {
            $(
                #[test]
                fn $name() {
                    if let Some(fx) = crate::support::Fx::pg(stringify!($name)) {
                        super::$name(&fx);
                    }
                }
            )*
        }
    };
}
pub(crate) use both;

pub(crate) fn key(dir: &str, name: &str) -> Key {
    let mut parts = dir.split('/');
    let mut d = Dir::new(parts.next().unwrap()).unwrap();
    for p in parts {
        d = d.join(p).unwrap();
    }
    d.key(name).unwrap()
}

pub(crate) fn dir(path: &str) -> Dir {
    key(path, "x").dir().clone()
}

/// The mark a child's own lines carry.
pub(crate) const MARK: &str = "@@ ";

/// What a child does: `create SPEC START KEY VALUE` (wait for the start
/// file, create, say new or existing), `hold SPEC KEY` (take the lock, say
/// locked, wait to be killed), `append SPEC KEY` (append batches of 50
/// until killed), `cas SPEC KEY` (increment a counter until killed).
pub(crate) fn act(role: &kit::Role) {
    let b = open_spec(role.arg(0));
    match role.name.as_str() {
        "create" => {
            kit::wait_for_file(std::path::Path::new(role.arg(1)));
            let k = key("race", role.arg(2));
            let said = match b.create(&k, role.arg(3).as_bytes()).unwrap() {
                Created::New(_) => "new",
                Created::Existing(_) => "existing",
            };
            kit::say(MARK, said);
        }
        "hold" => {
            let _guard = b.lock(&key("locks", role.arg(1))).unwrap();
            kit::say(MARK, "locked");
            std::thread::sleep(Duration::from_secs(120));
        }
        "append" => {
            let log = key("logs", role.arg(1));
            kit::say(MARK, "started");
            for batch in 0.. {
                let records: Vec<Vec<u8>> = (0..50)
                    .map(|r| format!("{{\"b\":{batch},\"r\":{r}}}").into_bytes())
                    .collect();
                let refs: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
                b.append(&log, &refs).unwrap();
            }
        }
        "claim" => crate::claim::act_claim(b.as_ref(), role),
        other => panic!("unknown role {other}"),
    }
}
