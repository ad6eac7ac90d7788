//! [`SearchIndex`]: the handle, the catch-up before every query, and the
//! rebuild that cures a damaged index.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use chipset_bus::{Bus, BusConfig};
use chipset_hook::Hooks;
use chipset_mail::{Mail, MailConfig};
use chipset_nudge::{KindRegistry, ReminderConfig, Reminders};
use chipset_store::{
    CorruptReason, Defect, DoctorMode, Finding, Report, StateDir, StatePath, Timestamp,
};
use rusqlite::{Connection, TransactionBehavior, params_from_iter, types::Value as Sql};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::index;
use crate::query::{Origin, Query, match_expression};
use crate::sources::Sources;

/// The index's folder under the state root.
pub const INDEX_DIR: &str = ".index/search";

/// The index file's name in [`INDEX_DIR`].
pub const INDEX_FILE: &str = "index.sqlite3";

/// One search result, best first.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Hit {
    /// The channel it comes from.
    pub channel: Origin,
    /// The message, event or reminder id; for a hook, its agent.
    pub id: String,
    /// Who sent or caused it (mail `from`, bus `source`, hook `assigned_by`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// To whom (mail `to`, the bus queue's or the hook's agent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// The task (mail `phase`, the hook's bead).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// The kind (mail kind, bus event kind, hook status, reminder kind).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// When it was created (sent, published, assigned, opened).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<Timestamp>,
    /// The subject, event kind, work title or reminder message.
    pub title: String,
    /// The best few words around the match, matches marked `**like this**`.
    pub snippet: String,
    /// BM25 relevance (lower is better, as SQLite ranks).
    pub score: f64,
}

/// What a catch-up or a rebuild did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Refreshed {
    /// Records read from the channels into the index.
    pub read: usize,
    /// True when the index was built from nothing (first use, a damaged or
    /// deleted index, another version, or [`SearchIndex::rebuild`]).
    pub rebuilt: bool,
}

/// A SQLite error; when [`index::is_damage`] says so, the index is rebuilt.
#[derive(Debug)]
pub(crate) struct Damage(pub(crate) rusqlite::Error);

impl From<Damage> for Error {
    fn from(d: Damage) -> Self {
        Error::Index {
            op: "use",
            path: PathBuf::new(),
            source: d.0,
        }
    }
}

/// Full-text search over every channel of one state root: mail subjects
/// and bodies (inbox and archive), unacknowledged bus events' kinds and
/// payloads, hook titles and reminder messages.
///
/// The index is a cache under `{root}/.index/search/`. Every query first
/// catches it up from the files, so it never answers from a stale index;
/// losing or damaging it loses nothing ([`SearchIndex::rebuild`]).
/// Cheap to clone; the open index is shared between clones.
#[derive(Debug, Clone)]
pub struct SearchIndex {
    sources: Sources,
    conn: Arc<Mutex<Option<Connection>>>,
}

impl SearchIndex {
    /// Returns the search over `state`'s channels (the seed's preset
    /// reminder kinds). Nothing is read or created until the first query.
    pub fn new(state: StateDir) -> Self {
        let sources = Sources {
            mail: Mail::new(state.clone()),
            bus: Bus::new(state.clone()),
            hooks: Hooks::new(state.clone()),
            reminders: Reminders::new(state.clone(), KindRegistry::preset()),
            state,
            seam: None,
            read_to: Arc::default(),
        };
        SearchIndex {
            sources,
            conn: Arc::new(Mutex::new(None)),
        }
    }

    /// Returns the search over the channels on a server (issue 30), whose
    /// index is a cache in `state`, the server's local folder: every query
    /// first catches it up from the server's rows (the mail manifest, the
    /// bus queues, the hooks, the reminders with `kinds`) rather than from
    /// files. A backend that is a local directory
    /// ([`Backend::local_state`](chipset_backend::Backend::local_state)) is
    /// [`SearchIndex::new`] over its files.
    pub fn with_backend(
        state: StateDir,
        kinds: KindRegistry,
        backend: Arc<dyn chipset_backend::Backend>,
    ) -> Self {
        if backend.local_state().is_some() {
            return Self::new(state);
        }
        let b = &backend;
        let sources = Sources {
            mail: Mail::with_backend(state.clone(), MailConfig::default(), Arc::clone(b)),
            bus: Bus::with_backend(state.clone(), BusConfig::default(), Arc::clone(b)),
            hooks: Hooks::with_backend(state.clone(), Arc::clone(b)),
            reminders: Reminders::with_backend(
                state.clone(),
                kinds,
                ReminderConfig::default(),
                Arc::clone(b),
            ),
            state,
            seam: Some(backend),
            read_to: Arc::default(),
        };
        SearchIndex {
            sources,
            conn: Arc::new(Mutex::new(None)),
        }
    }

    /// Returns this search with mail read from `mail`: the mail handle the
    /// program uses, say a folder of the seed's layout outside the state
    /// root ([`Mail::in_folder`]). The index stays under the state root.
    #[must_use]
    pub fn with_mail(mut self, mail: Mail) -> Self {
        self.sources.mail = mail;
        self
    }

    /// Returns the index file's path, `{root}/.index/search/index.sqlite3`.
    pub fn path(&self) -> PathBuf {
        self.file(INDEX_FILE).into_path_buf()
    }

    fn dir(&self) -> StatePath {
        self.sources
            .state
            .root_path()
            .join_static(".index")
            .join_static("search")
    }

    fn file(&self, name: &'static str) -> StatePath {
        self.dir().join_static(name)
    }

    /// Catches the index up with the files, then returns the hits for
    /// `query`, best first, at most `query.limit`.
    ///
    /// # Errors
    ///
    /// [`Error::NoWords`], [`Error::QueryTooLong`] and
    /// [`Error::TooManyWords`] for a query it cannot run (nothing is read);
    /// [`Error::Store`] or [`Error::Channel`] when a channel cannot be
    /// listed; [`Error::Index`] when the index fails even once rebuilt.
    pub fn search(&self, query: &Query) -> Result<Vec<Hit>> {
        let expression = match_expression(&query.text)?;
        if query.limit == 0 {
            return Ok(Vec::new());
        }
        self.with_index(|conn, _| {
            catch_up(conn, &self.sources)?;
            run(conn, &expression, query)
        })
    }

    /// Catches the index up with the files, then returns how many records
    /// match `query` in all (its limit aside): for a listing that shows a
    /// few hits and says how many there are.
    ///
    /// # Errors
    ///
    /// As [`SearchIndex::search`].
    pub fn count(&self, query: &Query) -> Result<usize> {
        let expression = match_expression(&query.text)?;
        self.with_index(|conn, _| {
            catch_up(conn, &self.sources)?;
            count(conn, &expression, query)
        })
    }

    /// Catches the index up with the files without searching.
    ///
    /// # Errors
    ///
    /// As [`SearchIndex::search`].
    pub fn catch_up(&self) -> Result<Refreshed> {
        self.with_index(|conn, fresh| {
            let read = catch_up(conn, &self.sources)?;
            Ok(Refreshed {
                read,
                rebuilt: fresh,
            })
        })
    }

    /// Throws the index away and builds it again from every file.
    ///
    /// # Errors
    ///
    /// As [`SearchIndex::search`], and [`Error::Store`] when the old index
    /// cannot be removed.
    pub fn rebuild(&self) -> Result<Refreshed> {
        let mut guard = self.lock();
        *guard = None;
        self.remove_files()?;
        drop(guard);
        self.catch_up()
    }

    /// Checks the index ([`DoctorMode::Check`]: a damaged file is a
    /// finding) or, when there is one, rebuilds it from the files
    /// ([`DoctorMode::Fix`]: this also picks up what a catch-up cannot see,
    /// such as a message put straight into `archive/` by a program that
    /// logs nothing). The index is a cache: a rebuild loses nothing, and a
    /// root without an index is left without one (the next query builds it).
    ///
    /// # Errors
    ///
    /// As [`SearchIndex::rebuild`].
    pub fn doctor(&self, mode: DoctorMode) -> Result<Report> {
        let mut report = Report::new(mode);
        let damage = self.check();
        let exists = self.sources.state.stat(&self.file(INDEX_FILE))?.is_some();
        if mode == DoctorMode::Fix && exists {
            self.rebuild()?;
        }
        if let Some(why) = damage {
            let mut finding = Finding::new(
                "search-index-damaged",
                Defect::Corrupt(CorruptReason::Unparsable(why)),
                "the search index is damaged; it is a cache, rebuilt from the channels",
            )
            .at(self.path());
            if mode == DoctorMode::Fix {
                finding = finding.with(chipset_store::Action::Rewrote(
                    "rebuilt from the channels".to_owned(),
                ));
            }
            report.findings.push(finding);
        }
        Ok(report)
    }

    /// Returns why the index file is damaged, or `None` when it is sound
    /// or absent.
    fn check(&self) -> Option<String> {
        let mut guard = self.lock();
        *guard = None;
        match self.sources.state.stat(&self.file(INDEX_FILE)) {
            Ok(None) => return None,
            Ok(Some(_)) => {}
            Err(e) => return Some(e.to_string()),
        }
        index::damage(&self.path())
    }

    fn lock(&self) -> MutexGuard<'_, Option<Connection>> {
        // A panic while holding the connection leaves nothing half-done
        // that SQLite would not roll back.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn remove_files(&self) -> Result<()> {
        for name in [
            INDEX_FILE,
            "index.sqlite3-wal",
            "index.sqlite3-shm",
            "index.sqlite3-journal",
        ] {
            self.sources.state.remove_file(&self.file(name))?;
        }
        Ok(())
    }

    /// Runs `f` on the open index (opening it first; `fresh` says it was
    /// just created). A damaged index is removed and built again, and `f`
    /// runs once more.
    fn with_index<T>(&self, f: impl Fn(&Connection, bool) -> Result<T>) -> Result<T> {
        let mut guard = self.lock();
        for attempt in 0..2 {
            let fresh = match guard.as_ref() {
                Some(_) => false,
                None => {
                    let (conn, fresh) = self.open(attempt > 0)?;
                    *guard = Some(conn);
                    fresh
                }
            };
            let conn = guard.as_ref().expect("opened above");
            match f(conn, fresh) {
                Err(Error::Index { source, .. }) if attempt == 0 && index::is_damage(&source) => {
                    tracing::warn!(path = %self.path().display(), error = %source, "search index damaged; rebuilding it");
                    *guard = None;
                }
                Err(Error::Index { op, source, .. }) => {
                    return Err(Error::Index {
                        op,
                        path: self.path(),
                        source,
                    });
                }
                other => return other,
            }
        }
        unreachable!("the second attempt returns")
    }

    /// Opens the index file, removing it first when `clear` says so or
    /// when it will not open as an index of this version. Falls back to
    /// an index in memory when the folder cannot be made (a read-only root).
    fn open(&self, clear: bool) -> Result<(Connection, bool)> {
        let dir = self.dir();
        if let Err(e) = self.sources.state.ensure_dir(&dir) {
            tracing::warn!(error = %e, "no folder for the search index; using one in memory");
            let conn = index::open(None).map_err(|source| self.index_error("open", source))?;
            return Ok((conn, true));
        }
        let existed = !clear && self.sources.state.stat(&self.file(INDEX_FILE))?.is_some();
        // Without its database, a write-ahead log left behind would be
        // replayed into the new one: clear it too.
        if !existed {
            self.remove_files()?;
        }
        let path = self.path();
        match index::open(Some(&path)) {
            Ok(conn) => Ok((conn, !existed)),
            Err(e) if index::is_damage(&e) => {
                tracing::warn!(path = %path.display(), error = %e, "search index unusable; rebuilding it");
                self.remove_files()?;
                let conn = index::open(Some(&path))
                    .map_err(|source| self.index_error("create", source))?;
                Ok((conn, true))
            }
            Err(source) => Err(self.index_error("open", source)),
        }
    }

    fn index_error(&self, op: &'static str, source: rusqlite::Error) -> Error {
        Error::Index {
            op,
            path: self.path(),
            source,
        }
    }
}

/// Reads what changed into the index in one write transaction (so two
/// processes catching up at once take turns, and the second finds the
/// first's work done). An empty index reads every folder.
fn catch_up(conn: &Connection, sources: &Sources) -> Result<usize> {
    let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate)
        .map_err(|e| Error::from(Damage(e)))?;
    let empty = index::stamp(&tx, "mail-manifest")
        .map_err(|e| Error::from(Damage(e)))?
        .is_none();
    let counts = sources.catch_up(&tx, empty)?;
    tx.commit().map_err(|e| Error::from(Damage(e)))?;
    Ok(counts.read)
}

/// Returns the SQL after `SELECT … FROM` that matches `query`, and its arguments.
fn matching(expression: &str, query: &Query) -> (String, Vec<Sql>) {
    let mut sql = String::from("fts JOIN docs d ON d.rowid = fts.rowid WHERE fts MATCH ?");
    let mut args: Vec<Sql> = vec![Sql::Text(expression.to_owned())];
    for (column, value) in [
        ("d.sender", &query.from),
        ("d.recipient", &query.to),
        ("d.task", &query.task),
        ("d.kind", &query.kind),
    ] {
        if let Some(v) = value {
            sql.push_str(&format!(" AND {column} = ?"));
            args.push(Sql::Text(v.clone()));
        }
    }
    if let Some(channel) = query.channel {
        sql.push_str(" AND d.origin = ?");
        args.push(Sql::Text(channel.as_str().to_owned()));
    }
    if let Some(since) = query.since {
        sql.push_str(" AND d.at_ms >= ?");
        args.push(Sql::Integer(since.unix_ms()));
    }
    (sql, args)
}

fn count(conn: &Connection, expression: &str, query: &Query) -> Result<usize> {
    let (from, args) = matching(expression, query);
    let sql = format!("SELECT count(*) FROM {from}");
    let n: i64 = conn
        .prepare_cached(&sql)
        .and_then(|mut s| s.query_row(params_from_iter(args), |r| r.get(0)))
        .map_err(|e| Error::from(Damage(e)))?;
    Ok(usize::try_from(n).unwrap_or_default())
}

fn run(conn: &Connection, expression: &str, query: &Query) -> Result<Vec<Hit>> {
    let (from, mut args) = matching(expression, query);
    let mut sql = format!(
        "SELECT d.origin, d.ident, d.sender, d.recipient, d.task, d.kind, d.at_ms, fts.title,
                snippet(fts, -1, '**', '**', '…', 16), bm25(fts, 4.0, 1.0) AS score
         FROM {from}"
    );
    sql.push_str(" ORDER BY score, d.at_ms DESC, d.ident LIMIT ?");
    args.push(Sql::Integer(i64::try_from(query.limit).unwrap_or(i64::MAX)));
    let mut stmt = conn
        .prepare_cached(&sql)
        .map_err(|e| Error::from(Damage(e)))?;
    let rows = stmt
        .query_map(params_from_iter(args), |r| {
            let origin: String = r.get(0)?;
            Ok(Hit {
                channel: origin.parse().unwrap_or(Origin::Mail),
                id: r.get(1)?,
                from: r.get(2)?,
                to: r.get(3)?,
                task: r.get(4)?,
                kind: r.get(5)?,
                at: r.get::<_, Option<i64>>(6)?.map(Timestamp::from_unix_ms),
                title: r.get(7)?,
                snippet: r.get(8)?,
                score: r.get(9)?,
            })
        })
        .map_err(|e| Error::from(Damage(e)))?;
    rows.collect::<rusqlite::Result<Vec<_>>>()
        .map_err(|e| Error::from(Damage(e)))
}
