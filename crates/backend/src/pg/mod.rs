//! The PostgreSQL backend.

mod claim;
mod config;
mod conn;
mod pgpass;
mod schema;
mod tls;
mod txn;
mod wake;

use std::sync::Arc;
use std::time::Duration;

use chipset_store::{EscapeAlphabet, Timestamp};

use crate::error::{Error, Result};
use crate::key::{Dir, Key};
use crate::seam::{
    Backend, Created, LockGuard, LogPos, LogRead, Version, Versioned, Wait, canonical_record,
    check_size,
};
use conn::{Pool, Pooled, statement_error};
pub use schema::SCHEMA_VERSION;

/// The `LISTEN` channel every write notifies, with `{schema}:{dir}` as
/// its payload.
const NOTIFY_CHANNEL: &str = "chipset";

/// How a [`PgBackend`] is opened.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PgOptions {
    /// The PostgreSQL schema (namespace) that holds chipset's tables:
    /// several teams can share one database, each in its own. Default
    /// `public`.
    pub schema: String,
    /// How many idle connections to keep. Default 8.
    pub max_idle: usize,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            schema: "public".to_owned(),
            max_idle: 8,
        }
    }
}

impl PgOptions {
    /// Returns the default options with `schema`.
    pub fn with_schema(schema: impl Into<String>) -> Self {
        PgOptions {
            schema: schema.into(),
            ..PgOptions::default()
        }
    }
}

/// The state on a PostgreSQL server: each key a row of `chipset_entries`,
/// each log rows of `chipset_log_records`, every change one statement
/// (one transaction) that also notifies the waiters.
///
/// | operation | on the server |
/// |---|---|
/// | [`read`](Backend::read) | `SELECT value, version` |
/// | [`create`](Backend::create) | `INSERT … ON CONFLICT DO NOTHING` |
/// | [`replace`](Backend::replace) | `UPDATE … WHERE version = $expected` |
/// | [`put`](Backend::put) | `INSERT … ON CONFLICT DO UPDATE` |
/// | [`remove`](Backend::remove) | `DELETE … WHERE version = $expected` |
/// | [`move_new`](Backend::move_new) | `DELETE … WHERE version = $expected` and `INSERT` of the destination, in one statement |
/// | [`append`](Backend::append) | the log's head row locked and moved on, its records inserted, in one statement |
/// | [`lock`](Backend::lock) | `pg_advisory_lock` on a pooled session, released with it |
/// | [`watch`](Backend::watch) | `LISTEN chipset` on its own connection, with the rescan as the safety net |
/// | [`now`](Backend::now) | the server's `clock_timestamp()` |
///
/// Committed means durable on the server (with its `fsync` and
/// `synchronous_commit` settings, `on` by default).
#[derive(Debug, Clone)]
pub struct PgBackend {
    pool: Arc<Pool>,
    schema: Arc<str>,
}

impl PgBackend {
    /// Connects to the server `url` names (a `postgres://` URL or a libpq
    /// `key=value` string, completed from `PGHOST`, `PGPORT`, `PGUSER`,
    /// `PGPASSWORD`, the password file (`passfile`, `PGPASSFILE`,
    /// `~/.pgpass`, ignored unless 0600 or less), `PGDATABASE`,
    /// `PGSSLMODE` (`disable` to `verify-full`), `PGSSLROOTCERT`,
    /// `PGCONNECT_TIMEOUT`), and
    /// creates or migrates chipset's tables in the `public` schema.
    ///
    /// # Errors
    ///
    /// [`Error::Config`]; [`Error::Unreachable`]; [`Error::AuthFailed`];
    /// [`Error::SchemaTooNew`] when the database holds a newer schema
    /// (nothing is changed); [`Error::Server`].
    pub fn open(url: &str) -> Result<Self> {
        Self::open_with(url, PgOptions::default())
    }

    /// [`PgBackend::open`] with `options`.
    ///
    /// # Errors
    ///
    /// As [`PgBackend::open`]; [`Error::InvalidName`] for a bad schema name.
    pub fn open_with(url: &str, options: PgOptions) -> Result<Self> {
        schema::check_schema(&options.schema)?;
        let config::Settings { mut config, tls } = config::resolve(url, |k| std::env::var(k).ok())?;
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        let tls = tls::connector(&tls, home.as_deref())?;
        let search_path = format!("-c search_path={}", options.schema);
        let opts = match config.get_options() {
            Some(o) => format!("{o} {search_path}"),
            None => search_path,
        };
        config.options(&opts);
        let pool = Arc::new(Pool::new(config, tls, options.max_idle));
        let mut client = pool.connect()?;
        let lock = lock_id("migrate", &options.schema);
        schema::migrate(&mut client, &options.schema, lock)?;
        Ok(PgBackend {
            pool,
            schema: options.schema.into(),
        })
    }

    /// Returns the schema that holds chipset's tables.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// Returns `user@host:port/dbname`: which server and database this is,
    /// without the password (for messages and a local cache's name).
    pub fn identity(&self) -> &str {
        &self.pool.identity
    }

    fn payload(&self, dir: &Dir) -> String {
        format!("{}:{}", self.schema, dir.as_text())
    }

    /// Runs one statement on a pooled connection. A connection whose
    /// statement broke is dropped, not pooled.
    fn run(
        &self,
        op: &'static str,
        key: &dyn std::fmt::Display,
        write: bool,
        sql: &'static str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Vec<postgres::Row>> {
        let mut pooled: Pooled = self.pool.get()?;
        let conn = pooled.conn();
        let result = conn
            .prepare(sql)
            .and_then(|s| conn.client.query(&s, params));
        result.map_err(|e| {
            if e.as_db_error().is_none() {
                pooled.discard();
            }
            statement_error(op, key, write, e)
        })
    }
}

/// The advisory-lock id of `what` in `schema`: a digest, so two names may
/// share one lock (more exclusion, never less).
fn lock_id(what: &str, schema: &str) -> i64 {
    let text = format!("{schema}\0{what}");
    i64::from_ne_bytes(EscapeAlphabet::fnv1a_64(text.bytes()).to_ne_bytes())
}

/// Whether a statement was refused for a duplicate primary key (a move's
/// destination created concurrently): nothing changed.
fn is_unique_violation(e: &Error) -> bool {
    let Error::Server { source, .. } = e else {
        return false;
    };
    source
        .downcast_ref::<postgres::Error>()
        .and_then(postgres::Error::code)
        .is_some_and(|c| *c == postgres::error::SqlState::UNIQUE_VIOLATION)
}

fn version(v: i64) -> Version {
    Version(u64::from_ne_bytes(v.to_ne_bytes()))
}

fn raw(v: Version) -> i64 {
    i64::from_ne_bytes(v.0.to_ne_bytes())
}

const READ: &str = "SELECT value, version FROM chipset_entries WHERE dir = $1 AND name = $2";

const CREATE: &str = "WITH ins AS (
    INSERT INTO chipset_entries (dir, name, value, version)
    VALUES ($1, $2, $3, nextval('chipset_versions'))
    ON CONFLICT (dir, name) DO NOTHING RETURNING version)
SELECT version, pg_notify($4, $5) FROM ins";

const REPLACE: &str = "WITH upd AS (
    UPDATE chipset_entries
    SET value = $3, version = nextval('chipset_versions'), updated_at = now()
    WHERE dir = $1 AND name = $2 AND version = $6 RETURNING version)
SELECT version, pg_notify($4, $5) FROM upd";

const PUT: &str = "WITH up AS (
    INSERT INTO chipset_entries (dir, name, value, version)
    VALUES ($1, $2, $3, nextval('chipset_versions'))
    ON CONFLICT (dir, name) DO UPDATE
    SET value = EXCLUDED.value, version = EXCLUDED.version, updated_at = now()
    RETURNING version)
SELECT version, pg_notify($4, $5) FROM up";

const REMOVE: &str = "WITH del AS (
    DELETE FROM chipset_entries WHERE dir = $1 AND name = $2 AND version = $3 RETURNING version)
SELECT version, pg_notify($4, $5) FROM del";

// The source leaves only if the destination is inserted: a destination
// that appears concurrently fails the insert on the primary key, and the
// whole statement with it.
const MOVE: &str = "WITH src AS (
    DELETE FROM chipset_entries
    WHERE dir = $1 AND name = $2 AND version = $3
    AND NOT EXISTS (SELECT 1 FROM chipset_entries WHERE dir = $4 AND name = $5)
    RETURNING value),
ins AS (
    INSERT INTO chipset_entries (dir, name, value, version)
    SELECT $4, $5, value, nextval('chipset_versions') FROM src
    RETURNING version)
SELECT version, pg_notify($6, $7), pg_notify($6, $8) FROM ins";

const LIST: &str = "SELECT name FROM chipset_entries WHERE dir = $1 ORDER BY name";

// The prefix is compared as text, never as a LIKE pattern: a name may hold
// `%` or `_`. COLLATE "C" sorts by bytes, as a listing does.
const LIST_DIRS: &str =
    "SELECT DISTINCT split_part(substr(dir, length($1) + 1), '/', 1) COLLATE \"C\" AS sub
    FROM chipset_entries WHERE left(dir, length($1)) = $1 ORDER BY sub";

// The head row's lock, held to commit, orders appends: sequence numbers
// are handed out in commit order, so a reader never sees a gap that a
// slower transaction fills later.
const APPEND: &str = "WITH head AS (
    INSERT INTO chipset_logs AS l (log, next_seq) VALUES ($1, $2)
    ON CONFLICT (log) DO UPDATE SET next_seq = l.next_seq + $2
    RETURNING l.next_seq - $2 AS first),
ins AS (
    INSERT INTO chipset_log_records (log, seq, record)
    SELECT $1, head.first + r.ord - 1, r.rec
    FROM head, unnest($3::bytea[]) WITH ORDINALITY AS r(rec, ord)
    RETURNING seq)
SELECT (SELECT count(*) FROM ins), pg_notify($4, $5)";

const READ_LOG: &str =
    "SELECT seq, record FROM chipset_log_records WHERE log = $1 AND seq >= $2 ORDER BY seq";

const NOW: &str = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint";

impl Backend for PgBackend {
    fn now(&self) -> Result<Timestamp> {
        let rows = self.run("read the clock of", &self.pool.target, false, NOW, &[])?;
        Ok(Timestamp::from_unix_ms(rows[0].get(0)))
    }

    fn read(&self, key: &Key) -> Result<Option<Versioned>> {
        let dir = key.dir().as_text();
        let rows = self.run("read", key, false, READ, &[&dir, &key.name()])?;
        Ok(rows.first().map(|row| Versioned {
            value: row.get(0),
            version: version(row.get(1)),
        }))
    }

    fn create(&self, key: &Key, value: &[u8]) -> Result<Created> {
        check_size(key, value.len())?;
        let dir = key.dir().as_text();
        let payload = self.payload(key.dir());
        loop {
            let params: [&(dyn postgres::types::ToSql + Sync); 5] =
                [&dir, &key.name(), &value, &NOTIFY_CHANNEL, &payload];
            let rows = self.run("create", key, true, CREATE, &params)?;
            if let Some(row) = rows.first() {
                return Ok(Created::New(version(row.get(0))));
            }
            // Removed between the two statements: try again.
            if let Some(now) = self.read(key)? {
                return Ok(Created::Existing(now));
            }
        }
    }

    fn replace(&self, key: &Key, expected: Version, value: &[u8]) -> Result<Version> {
        check_size(key, value.len())?;
        let dir = key.dir().as_text();
        let payload = self.payload(key.dir());
        let params: [&(dyn postgres::types::ToSql + Sync); 6] = [
            &dir,
            &key.name(),
            &value,
            &NOTIFY_CHANNEL,
            &payload,
            &raw(expected),
        ];
        let rows = self.run("replace", key, true, REPLACE, &params)?;
        if let Some(row) = rows.first() {
            return Ok(version(row.get(0)));
        }
        match self.read(key)? {
            None => Err(Error::NotFound {
                key: key.to_string(),
            }),
            Some(now) => Err(Error::Conflict {
                key: key.to_string(),
                current: Some(now),
            }),
        }
    }

    fn put(&self, key: &Key, value: &[u8]) -> Result<Version> {
        check_size(key, value.len())?;
        let dir = key.dir().as_text();
        let payload = self.payload(key.dir());
        let params: [&(dyn postgres::types::ToSql + Sync); 5] =
            [&dir, &key.name(), &value, &NOTIFY_CHANNEL, &payload];
        let rows = self.run("put", key, true, PUT, &params)?;
        Ok(version(rows[0].get(0)))
    }

    fn remove(&self, key: &Key, expected: Version) -> Result<()> {
        let dir = key.dir().as_text();
        let payload = self.payload(key.dir());
        let params: [&(dyn postgres::types::ToSql + Sync); 5] =
            [&dir, &key.name(), &raw(expected), &NOTIFY_CHANNEL, &payload];
        if !self.run("remove", key, true, REMOVE, &params)?.is_empty() {
            return Ok(());
        }
        match self.read(key)? {
            None => Ok(()),
            Some(now) => Err(Error::Conflict {
                key: key.to_string(),
                current: Some(now),
            }),
        }
    }

    fn move_new(&self, from: &Key, expected: Version, to: &Key) -> Result<Version> {
        let (from_dir, to_dir) = (from.dir().as_text(), to.dir().as_text());
        let (from_payload, to_payload) = (self.payload(from.dir()), self.payload(to.dir()));
        loop {
            let params: [&(dyn postgres::types::ToSql + Sync); 8] = [
                &from_dir,
                &from.name(),
                &raw(expected),
                &to_dir,
                &to.name(),
                &NOTIFY_CHANNEL,
                &from_payload,
                &to_payload,
            ];
            match self.run("move", from, true, MOVE, &params) {
                Ok(rows) if !rows.is_empty() => return Ok(version(rows[0].get(0))),
                Ok(_) => {}
                Err(e) if is_unique_violation(&e) => {}
                Err(e) => return Err(e),
            }
            match self.read(from)? {
                None => {
                    return Err(Error::NotFound {
                        key: from.to_string(),
                    });
                }
                Some(now) if now.version != expected => {
                    return Err(Error::Conflict {
                        key: from.to_string(),
                        current: Some(now),
                    });
                }
                Some(_) => {
                    if let Some(there) = self.read(to)? {
                        return Err(Error::Exists {
                            key: to.to_string(),
                            current: Some(there),
                        });
                    }
                    // The destination was removed meanwhile: try again.
                }
            }
        }
    }

    fn list(&self, dir: &Dir) -> Result<Vec<String>> {
        let text = dir.as_text();
        let rows = self.run("list", dir, false, LIST, &[&text])?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    fn append(&self, log: &Key, records: &[&[u8]]) -> Result<()> {
        let records = records
            .iter()
            .map(|r| canonical_record(log, r))
            .collect::<Result<Vec<_>>>()?;
        if records.is_empty() {
            return Ok(());
        }
        let name = log.to_string();
        let count = i64::try_from(records.len()).expect("a batch fits in i64");
        let payload = self.payload(log.dir());
        let params: [&(dyn postgres::types::ToSql + Sync); 5] =
            [&name, &count, &records, &NOTIFY_CHANNEL, &payload];
        self.run("append to", log, true, APPEND, &params).map(drop)
    }

    fn read_log(&self, log: &Key, from: LogPos) -> Result<LogRead> {
        let name = log.to_string();
        let from_seq = i64::try_from(from.0).unwrap_or(i64::MAX);
        let rows = self.run("read log", log, false, READ_LOG, &[&name, &from_seq])?;
        let next = rows.last().map_or(from, |r| {
            LogPos(u64::try_from(r.get::<_, i64>(0)).unwrap_or(0) + 1)
        });
        Ok(LogRead {
            records: rows.iter().map(|r| r.get(1)).collect(),
            next,
        })
    }

    fn lock(&self, key: &Key) -> Result<LockGuard> {
        let id = lock_id(&key.to_string(), &self.schema);
        let mut pooled = self.pool.get()?;
        pooled
            .conn()
            .client
            .query("SELECT pg_advisory_lock($1)", &[&id])
            .map_err(|e| {
                pooled.discard();
                statement_error("lock", key, false, e)
            })?;
        Ok(LockGuard {
            _inner: Box::new(Advisory { pooled, id }),
        })
    }

    fn watch(&self, dirs: &[Dir], rescan: Duration) -> Result<Box<dyn Wait>> {
        let payloads = dirs.iter().map(|d| self.payload(d)).collect();
        Ok(Box::new(wake::PgWait::new(
            Arc::clone(&self.pool),
            payloads,
            rescan,
        )?))
    }

    fn read_all(&self, dir: &Dir) -> Result<Vec<(String, Versioned)>> {
        self.read_all_rows(dir)
    }

    fn transact(&self, steps: &[crate::Step<'_>]) -> Result<Vec<Option<Version>>> {
        self.transact_steps(steps)
    }

    fn list_dirs(&self, dir: &Dir) -> Result<Vec<String>> {
        let prefix = format!("{}/", dir.as_text());
        let rows = self.run("list folders of", dir, false, LIST_DIRS, &[&prefix])?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    fn claim(
        &self,
        claim: &crate::claim::Claim<'_>,
        decide: &mut crate::claim::Decide<'_>,
    ) -> Result<Option<crate::claim::Claimed>> {
        self.claim_rows(claim, decide)
    }
}

/// A held advisory lock: unlocked (and its session pooled again) on drop,
/// or released by the server with the session if the holder dies.
struct Advisory {
    pooled: Pooled,
    id: i64,
}

impl Drop for Advisory {
    fn drop(&mut self) {
        let unlocked = self
            .pooled
            .conn()
            .client
            .query_one("SELECT pg_advisory_unlock($1)", &[&self.id])
            .map(|r| r.get::<_, bool>(0));
        if !matches!(unlocked, Ok(true)) {
            // The session's lock state is unknown: never pool it; closing it
            // releases whatever it holds.
            tracing::warn!(
                lock = self.id,
                "advisory unlock failed; dropping the session"
            );
            self.pooled.discard();
        }
    }
}
