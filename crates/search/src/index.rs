//! The index itself: one SQLite file with an FTS5 table, its schema, and
//! the few statements the catch-up and the query need.

use std::collections::HashSet;

use rusqlite::{Connection, OptionalExtension, Transaction, params};

use crate::query::Origin;

/// The schema this version writes, in SQLite's `user_version`. An index
/// of another version is rebuilt, never migrated: it is a cache.
pub(crate) const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "
CREATE TABLE docs(
    rowid INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    origin TEXT NOT NULL,
    place TEXT NOT NULL,
    ident TEXT NOT NULL,
    sender TEXT,
    recipient TEXT,
    task TEXT,
    kind TEXT,
    at_ms INTEGER
);
CREATE INDEX docs_place ON docs(place);
CREATE VIRTUAL TABLE fts USING fts5(title, body, tokenize = 'unicode61 remove_diacritics 2');
CREATE TABLE stamps(place TEXT PRIMARY KEY, stamp TEXT NOT NULL);
";

/// One searchable record, as the catch-up reads it from a channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Doc {
    /// Unique across the index: `mail/{id}`, `bus/{agent}/{id}`, `hook/{agent}`, `reminder/{id}`.
    pub(crate) key: String,
    pub(crate) origin: Origin,
    /// The group a catch-up replaces at once (`hook`, `reminder`,
    /// `bus/{agent}`), or for a message `mail/{to}`: its addressee, whose
    /// inbox a catch-up compares with it (messages are only ever added).
    pub(crate) place: String,
    /// The message, event or reminder id, or the hook's agent.
    pub(crate) ident: String,
    pub(crate) sender: Option<String>,
    pub(crate) recipient: Option<String>,
    pub(crate) task: Option<String>,
    pub(crate) kind: Option<String>,
    pub(crate) at_ms: Option<i64>,
    pub(crate) title: String,
    pub(crate) body: String,
}

/// Opens (creating if needed) the index at `path`, or in memory for `None`.
/// Fails on a file that is not an index of this version.
pub(crate) fn open(path: Option<&std::path::Path>) -> rusqlite::Result<Connection> {
    let conn = match path {
        Some(p) => Connection::open(p)?,
        None => Connection::open_in_memory()?,
    };
    conn.busy_timeout(std::time::Duration::from_secs(30))?;
    // A rollback journal rather than a write-ahead log: every query starts
    // with a write transaction (the catch-up) anyway, and a log beside the
    // file could keep serving an index whose file was damaged or replaced.
    // NORMAL: a crash rolls the last catch-up back, and what it loses is
    // read again from the channels.
    conn.pragma_update(None, "journal_mode", "DELETE")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if version == 0 {
        let tx = conn.unchecked_transaction()?;
        let again: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if again == 0 {
            tx.execute_batch(SCHEMA)?;
            tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
        }
        tx.commit()?;
    } else if version != SCHEMA_VERSION {
        return Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_NOTADB),
            Some(format!("index schema {version}, expected {SCHEMA_VERSION}")),
        ));
    }
    Ok(conn)
}

/// Returns why the index file at `path` is not a usable index, or `None`
/// when it is one or is empty (a file the next query fills). Opens it
/// read-only, so the check writes nothing and a full disk is not taken
/// for damage; only a journal that a cut write left is rolled back first,
/// as the next query would roll it back.
pub(crate) fn damage(path: &std::path::Path) -> Option<String> {
    use rusqlite::OpenFlags;
    let looked = match examine(Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY,
    )) {
        Err(rusqlite::Error::SqliteFailure(f, _))
            if f.extended_code == rusqlite::ffi::SQLITE_READONLY_ROLLBACK =>
        {
            examine(Connection::open(path))
        }
        looked => looked,
    };
    looked.unwrap_or_else(|e| Some(e.to_string()))
}

/// [`damage`] on an open connection: `Err` when SQLite could not look.
fn examine(conn: rusqlite::Result<Connection>) -> rusqlite::Result<Option<String>> {
    let conn = conn?;
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    let tables: i64 = conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))?;
    if version == 0 && tables == 0 {
        return Ok(None);
    }
    if version != SCHEMA_VERSION {
        return Ok(Some(format!(
            "index schema {version}, expected {SCHEMA_VERSION}"
        )));
    }
    let check: String = conn.query_row("PRAGMA quick_check", [], |r| r.get(0))?;
    Ok((check != "ok").then_some(check))
}

/// Returns true for an error that means the file is not a usable index
/// (damaged, not a database, another version, unreadable): rebuild it.
pub(crate) fn is_damage(e: &rusqlite::Error) -> bool {
    use rusqlite::ffi::ErrorCode as C;
    match e {
        rusqlite::Error::SqliteFailure(f, _) => matches!(
            f.code,
            C::DatabaseCorrupt
                | C::NotADatabase
                | C::CannotOpen
                | C::SystemIoFailure
                | C::ReadOnly
                // Our statements are fixed: SQLITE_ERROR is a missing table.
                | C::Unknown
        ),
        rusqlite::Error::SqlInputError { .. } | rusqlite::Error::InvalidColumnType(..) => true,
        _ => false,
    }
}

pub(crate) fn stamp(tx: &Transaction<'_>, place: &str) -> rusqlite::Result<Option<String>> {
    tx.query_row("SELECT stamp FROM stamps WHERE place = ?1", [place], |r| {
        r.get(0)
    })
    .optional()
}

pub(crate) fn set_stamp(tx: &Transaction<'_>, place: &str, stamp: &str) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO stamps(place, stamp) VALUES (?1, ?2)
         ON CONFLICT(place) DO UPDATE SET stamp = excluded.stamp",
        [place, stamp],
    )?;
    Ok(())
}

/// Returns the idents of every doc of `place`.
pub(crate) fn idents_of(tx: &Transaction<'_>, place: &str) -> rusqlite::Result<HashSet<String>> {
    let mut stmt = tx.prepare_cached("SELECT ident FROM docs WHERE place = ?1")?;
    let rows = stmt.query_map([place], |r| r.get(0))?;
    rows.collect()
}

pub(crate) fn has(tx: &Transaction<'_>, key: &str) -> rusqlite::Result<bool> {
    Ok(tx
        .query_row("SELECT 1 FROM docs WHERE key = ?1", [key], |_| Ok(()))
        .optional()?
        .is_some())
}

/// Adds `doc` unless its key is there; returns whether it was added.
pub(crate) fn insert(tx: &Transaction<'_>, doc: &Doc) -> rusqlite::Result<bool> {
    let added = tx
        .prepare_cached(
            "INSERT OR IGNORE INTO docs(key, origin, place, ident, sender, recipient, task, kind, at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?
        .execute(params![
            doc.key,
            doc.origin.as_str(),
            doc.place,
            doc.ident,
            doc.sender,
            doc.recipient,
            doc.task,
            doc.kind,
            doc.at_ms
        ])?;
    if added == 0 {
        return Ok(false);
    }
    let rowid = tx.last_insert_rowid();
    tx.prepare_cached("INSERT INTO fts(rowid, title, body) VALUES (?1, ?2, ?3)")?
        .execute(params![rowid, doc.title, doc.body])?;
    Ok(true)
}

/// Replaces every doc of `place` with `docs`.
pub(crate) fn replace_place(
    tx: &Transaction<'_>,
    place: &str,
    docs: &[Doc],
) -> rusqlite::Result<()> {
    tx.execute(
        "DELETE FROM fts WHERE rowid IN (SELECT rowid FROM docs WHERE place = ?1)",
        [place],
    )?;
    tx.execute("DELETE FROM docs WHERE place = ?1", [place])?;
    for doc in docs {
        insert(tx, doc)?;
    }
    Ok(())
}

/// Removes the docs and stamps of every place starting with `prefix`
/// that `keep` refuses (a bus queue that is gone).
pub(crate) fn places_with_prefix(
    tx: &Transaction<'_>,
    prefix: &str,
) -> rusqlite::Result<Vec<String>> {
    let mut stmt = tx.prepare("SELECT place FROM stamps WHERE place >= ?1 AND place < ?2")?;
    let end = format!("{prefix}\u{10FFFF}");
    let rows = stmt.query_map([prefix, end.as_str()], |r| r.get(0))?;
    rows.collect()
}

pub(crate) fn forget_place(tx: &Transaction<'_>, place: &str) -> rusqlite::Result<()> {
    replace_place(tx, place, &[])?;
    tx.execute("DELETE FROM stamps WHERE place = ?1", [place])?;
    Ok(())
}

/// Removes every doc of `origin`, the stamp `stamp` and the stamps of
/// every place starting with `prefix` (a channel read from another store
/// since: none of its stamps says anything of the new one).
pub(crate) fn forget_origin(
    tx: &Transaction<'_>,
    origin: Origin,
    stamp: &str,
    prefix: &str,
) -> rusqlite::Result<()> {
    let origin = origin.as_str();
    tx.execute(
        "DELETE FROM fts WHERE rowid IN (SELECT rowid FROM docs WHERE origin = ?1)",
        [origin],
    )?;
    tx.execute("DELETE FROM docs WHERE origin = ?1", [origin])?;
    for place in places_with_prefix(tx, prefix)? {
        tx.execute("DELETE FROM stamps WHERE place = ?1", [place])?;
    }
    tx.execute("DELETE FROM stamps WHERE place = ?1", [stamp])?;
    Ok(())
}
