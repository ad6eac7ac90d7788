//! Full-text search over every chipset channel: mail subjects and bodies
//! (inbox and archive), unacknowledged bus events, hook titles and
//! reminder messages, ranked, with a snippet.
//!
//! ```
//! use chipset_mail::{Mail, NewMessage};
//! use chipset_search::{Origin, Query, SearchIndex};
//! use chipset_store::StateDir;
//!
//! let tmp = tempfile::tempdir()?;
//! let state = StateDir::open(tmp.path())?;
//! let mail = Mail::new(state.clone());
//! let (critic, executor) = ("np-critic".parse()?, "np-executor".parse()?);
//! mail.send(&NewMessage::notify(critic, executor, "M005-T1".parse()?, "flaky-test",
//!     "The parser test fails one run in ten on CI"))?;
//!
//! let search = SearchIndex::new(state);
//! let hits = search.search(&Query::new("parser fails").from("np-critic"))?;
//! assert_eq!(hits.len(), 1);
//! assert_eq!(hits[0].channel, Origin::Mail);
//! assert_eq!(hits[0].title, "flaky-test");
//! assert!(hits[0].snippet.contains("**parser**"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Queries
//!
//! A [`Query`] is words (every one must match, in any order, ignoring case
//! and accents), `"phrases"`, `prefix*`, `a OR b` and `-word` (or
//! `NOT word`) to exclude, plus filters: from, to, task, kind, channel
//! ([`Origin`]) and since. Hits ([`Hit`]) come best first (BM25, a match in
//! the title counting four times one in the body), at most
//! [`Query::limit`] of them ([`DEFAULT_LIMIT`] unless set), each with a
//! snippet rather than the whole body.
//!
//! Every word is quoted before it reaches the engine, so no text is a
//! syntax error: a query with nothing to look for (only operators or
//! punctuation) is [`Error::NoWords`], one over [`MAX_QUERY_LEN`] bytes
//! [`Error::QueryTooLong`], one with more than [`MAX_TERMS`] words
//! [`Error::TooManyWords`], and a channel name that is not one is
//! [`Error::UnknownChannel`]. An agent, task or kind that nothing carries
//! simply matches nothing.
//!
//! # What is indexed
//!
//! | channel | title | body | from | to | task | kind | time |
//! |---|---|---|---|---|---|---|---|
//! | mail, every message in `inbox/`, `archive/` (and its `by-task/`, `orphan/`) | subject | body | `from` | `to` | `phase` | `kind` | `created_at` |
//! | bus, every unacknowledged event | kind | payload (a string as is, else its JSON) | source | queue's agent | | kind | `created_at` |
//! | hook, every hook holding a work item | title | a `description` another writer added | `assigned_by` | agent | bead | status | `assigned_at` |
//! | reminder, open, snoozed and resolved | message | source type and id | | | | kind | `created_at` |
//!
//! Files written by other programs are read by the channels' own readers,
//! so nubos-pilot's messages (and its manifest lines) and Tibsfox's
//! camelCase hooks are indexed like chipset's. A file that is not a
//! readable record is left out (each channel's doctor reports it).
//!
//! # The index is a cache
//!
//! The index is one SQLite file with an FTS5 table,
//! `{root}/.index/search/index.sqlite3` ([`INDEX_DIR`], [`INDEX_FILE`]),
//! with a rollback journal. It is never the truth: every [`SearchIndex::search`]
//! first catches it up from the files, in one write transaction:
//!
//! - mail: the manifest's lines since the last look (the `sent` events, in
//!   chipset's shape or nubos-pilot's, name each new message and its
//!   inbox), then every inbox whose folder stamp (device, inode, mtime,
//!   ctime) changed, for files written without a manifest line. A
//!   manifest replaced or cut shorter makes every message folder be read
//!   again. Messages never change, so one indexed stays indexed.
//! - bus, hooks, reminders: each queue, `hooks/` and the reminder folders
//!   are read again when their stamp changed; their records replace the
//!   old ones (an acknowledged event, a cleared hook leave the index).
//!
//! A stamp younger than two seconds is not trusted (coarse file times),
//! so such a folder is read again next time. Where it would not hold: a
//! message put straight into `archive/` by a program that writes no
//! manifest line is found only by a rebuild.
//!
//! Losing the index loses nothing: a missing file is built from every
//! folder; a damaged one (not a database, another schema version, a
//! corrupt page) is removed and built again, and the query runs on the
//! new one. [`SearchIndex::rebuild`] does it on demand and
//! [`SearchIndex::doctor`] checks it (`PRAGMA quick_check`) or, with
//! [`DoctorMode::Fix`](chipset_store::DoctorMode::Fix), rebuilds it.
//! Writers never touch the index: sending, publishing and assigning cost
//! what they cost without search. A root the index cannot be written in
//! (read-only) is searched through an index in memory, built per process.
//!
//! The index is the one file under the root that chipset does not write
//! through `chipset-store`: SQLite writes it (its own journal makes each
//! catch-up all or nothing, whatever crashes). The store makes and clears
//! its folder.
//!
//! # Errors
//!
//! One enum, [`Error`]: refused queries are typed variants, channel and
//! store failures carry their cause, and [`Error::Index`] is an index that
//! fails even after a rebuild (a full disk, a folder without write access
//! for the lock).

#![forbid(unsafe_code)]

mod error;
mod index;
mod query;
mod rows;
mod search;
mod sources;

pub use error::{Error, Result};
pub use query::{DEFAULT_LIMIT, MAX_QUERY_LEN, MAX_TERMS, Origin, Query};
pub use search::{Hit, INDEX_DIR, INDEX_FILE, Refreshed, SearchIndex};
