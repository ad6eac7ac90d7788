//! The schema chipset keeps on the server: created and migrated by
//! chipset, versioned in `chipset_schema_version`, refused when newer.

use postgres::Client;

use crate::error::{Error, Result};

/// The schema version this binary writes and reads.
pub const SCHEMA_VERSION: i32 = 1;

/// Each migration's statements, in order: migration `i` takes the schema
/// from version `i` to `i + 1`. Fixed text, no input in it.
const MIGRATIONS: &[&str] = &[
    // 1: values, logs, and the version sequence.
    r#"
    CREATE SEQUENCE chipset_versions;
    CREATE TABLE chipset_entries (
        dir text COLLATE "C" NOT NULL,
        name text COLLATE "C" NOT NULL,
        value bytea NOT NULL,
        version bigint NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (dir, name)
    );
    CREATE TABLE chipset_logs (
        log text COLLATE "C" PRIMARY KEY,
        next_seq bigint NOT NULL
    );
    CREATE TABLE chipset_log_records (
        log text COLLATE "C" NOT NULL,
        seq bigint NOT NULL,
        record bytea NOT NULL,
        PRIMARY KEY (log, seq)
    );
    "#,
];

/// Creates or migrates chipset's tables in the schema `schema` (already on
/// the connection's `search_path`), in one transaction, under an advisory
/// lock so concurrent openers migrate once.
pub(crate) fn migrate(client: &mut Client, schema: &str, lock: i64) -> Result<()> {
    let err = |e: postgres::Error| super::conn::statement_error("migrate", schema, false, e);
    let mut tx = client.transaction().map_err(err)?;
    tx.query("SELECT pg_advisory_xact_lock($1)", &[&lock])
        .map_err(err)?;
    // The schema's name is an identifier, which cannot be a parameter:
    // the server quotes it (`%I`), and it was checked against
    // `[a-z_][a-z0-9_]*` before.
    let create: String = tx
        .query_one(
            "SELECT format('CREATE SCHEMA IF NOT EXISTS %I', $1::text)",
            &[&schema],
        )
        .map_err(err)?
        .get(0);
    tx.batch_execute(&create).map_err(err)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS chipset_schema_version (
            version integer PRIMARY KEY,
            applied_at timestamptz NOT NULL DEFAULT now()
        )",
    )
    .map_err(err)?;
    let found: Option<i32> = tx
        .query_one("SELECT max(version) FROM chipset_schema_version", &[])
        .map_err(err)?
        .get(0);
    let found = found.unwrap_or(0);
    if found > SCHEMA_VERSION {
        return Err(Error::SchemaTooNew {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let to = i32::try_from(i + 1).expect("few migrations");
        tx.batch_execute(sql).map_err(err)?;
        tx.execute(
            "INSERT INTO chipset_schema_version (version) VALUES ($1)",
            &[&to],
        )
        .map_err(err)?;
        tracing::info!(schema, version = to, "migrated chipset's PostgreSQL schema");
    }
    tx.commit().map_err(err)
}

/// Checks a schema name: the identifier rules every PostgreSQL accepts
/// unquoted, so it can also go in a connection's `search_path` option.
pub(crate) fn check_schema(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidName {
            kind: "schema",
            value: name.to_owned(),
            rule: "must be 1 to 63 of `a-z`, `0-9` and `_`, not starting with a digit",
        })
    }
}
