//! The fixture both backends share: a fresh state (a temporary directory,
//! or a fresh PostgreSQL schema), more handles on it, and the child roles.

use std::sync::Arc;
use std::time::Duration;

use chipset_backend::testing::TestSchema;
use chipset_backend::{Backend, Created, Dir, FsBackend, Key, PgBackend, PgOptions};
use chipset_testkit as kit;

pub(crate) use chipset_backend::testing::{drop_schema, pg_url};

/// A fresh state on one backend.
pub(crate) struct Fx {
    place: Place,
    /// The first handle.
    pub(crate) b: Arc<dyn Backend>,
}

enum Place {
    Fs(tempfile::TempDir),
    Pg(TestSchema),
}

/// Returns a schema name no other test (or earlier run) uses, on a server
/// the caller already has: the test drops it.
pub(crate) fn fresh_schema(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("t_{test}_{}_{nanos}", std::process::id())
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
        let schema = TestSchema::fresh(test)?;
        let b = schema.open();
        Some(Fx {
            place: Place::Pg(schema),
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
            Place::Pg(s) => format!("pg\t{}\t{}", s.url(), s.name()),
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
