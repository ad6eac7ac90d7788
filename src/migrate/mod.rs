//! `chipset migrate`: moves a team's state between a directory and a
//! PostgreSQL server, in either direction (issue 30, "Moving over").
//!
//! ```
//! use chipset::migrate::Migration;
//! use chipset::Root;
//!
//! let tmp = tempfile::tempdir()?;
//! let (from, to) = (tmp.path().join("a"), tmp.path().join("b"));
//! let chipset = chipset::Chipset::open(&from)?;
//! chipset.hooks().assign(&"polecat".parse()?, "bead-1".parse()?, "Fix the parser", None)?;
//! let report = Migration::new(Root::parse(&from), Root::parse(&to)).run()?;
//! assert!(report.verified());
//! // A second run finds everything there and writes nothing.
//! let again = Migration::new(Root::parse(&from), Root::parse(&to)).run()?;
//! assert_eq!(again.written(), 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # How
//!
//! A migration is a replay of each channel's values, not a copy of keys:
//! [`CHANNELS`] says, per channel, which values and logs it owns on a
//! directory and how each is written on the target.
//!
//! 1. **Plan.** Every channel of the source is read, and each value is
//!    looked up on the target: missing (to write), there with the same
//!    bytes (nothing to do), or there with other bytes: a
//!    [`MigrateError::Conflict`], returned before anything is written.
//!    A log (mail's manifest, a bus agent's control log, the loops' logs)
//!    on the target must be a prefix of the source's, record by record;
//!    the rest is appended.
//! 2. **Copy.** Each missing value is created if absent (so a value that
//!    appeared meanwhile is a conflict, never overwritten), and each log's
//!    missing tail appended. Mail's messages on a server go through
//!    [`Mail::import`](chipset_mail::Mail::import): the message and the
//!    index rows a send would write (`ids/`, `task/`, `open/`, the reply
//!    index) in one transaction. Going back to a directory, those index
//!    rows are not copied: a directory's mail has none.
//! 3. **Check.** The target is read again and its counts, per channel,
//!    must equal the source's ([`Report::verified`]).
//!
//! Every write is create-if-absent and every log is compared as a prefix,
//! so a run killed at any point is completed by running it again, without
//! duplicates; a run on a complete target writes nothing.
//!
//! # What is not copied
//!
//! What is local by nature: dot-names (temporary files, lock files, the
//! store's `.quarantine/`, the search index in `.index/`, mail's gate
//! cache in `mail/.gate/`), which each side rebuilds. Between a directory
//! and a server, the pool's item files that no entry names (left by a
//! post cut short) are not copied: they are not in the pool.
//!
//! # A quiet source
//!
//! Migrate wants a quiet source: stop the agents first. A value changed on
//! the source during a run may be copied in its old form; a run after the
//! change then reports it as a conflict.

mod bus;
mod mail;
mod plan;
mod pool;
mod side;

use std::collections::BTreeSet;
use std::fmt;

use chipset_store::{Classify, ErrorKind};
use serde::Serialize;

use crate::root::Root;
use crate::server::ServerOptions;

use self::side::Side;

/// The channels a migration copies, in the order it copies them: the name
/// of each one's folder under a state root.
pub const CHANNELS: &[&str] = &[
    "hooks",
    "nudge",
    "reminders",
    "mail",
    "bus",
    "leases",
    "agents",
    "loop",
    POOL,
];

/// The work pool's folder: moved as rows to and from a server.
const POOL: &str = "pool";

/// A migration from one root to another. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct Migration {
    from: Root,
    to: Root,
    server: ServerOptions,
    skip: BTreeSet<String>,
}

impl Migration {
    /// Returns the migration of everything at `from` to `to`: a directory
    /// or a server each.
    pub fn new(from: Root, to: Root) -> Self {
        Migration {
            from,
            to,
            server: ServerOptions::default(),
            skip: BTreeSet::new(),
        }
    }

    /// Returns this migration with `options` for whichever side is a
    /// server (its schema, say).
    #[must_use]
    pub fn server_options(mut self, options: ServerOptions) -> Self {
        self.server = options;
        self
    }

    /// Returns this migration without the channel `channel` (one of
    /// [`CHANNELS`], or another top-level folder of a source directory).
    #[must_use]
    pub fn skip(mut self, channel: impl Into<String>) -> Self {
        self.skip.insert(channel.into());
        self
    }

    /// Runs the migration: plans, copies, then counts both sides.
    ///
    /// # Errors
    ///
    /// [`MigrateError::SameRoot`], [`MigrateError::NoSource`],
    /// [`MigrateError::Open`] before anything is read;
    /// [`MigrateError::Unknown`], [`MigrateError::Corrupt`],
    /// [`MigrateError::Conflict`], [`MigrateError::Pool`] from the plan,
    /// before anything is written; the error of a failed write or count,
    /// [`MigrateError::Unfinished`] once something was written (run again
    /// to finish).
    pub fn run(&self) -> Result<Report, MigrateError> {
        if self.from == self.to {
            return Err(MigrateError::SameRoot {
                root: self.from.to_string(),
            });
        }
        let source = Side::open(&self.from, &self.server, false)?;
        let target = Side::open(&self.to, &self.server, true)?;
        let channels = self.channels(&source)?;
        // A server keeps the pool as rows of its own, a directory as its
        // files: read in the target's form (see `pool.rs`).
        let pool_rows = source.is_server() || target.is_server();
        let read = |side: &Side, channel: &str, counting: bool| {
            if channel == POOL && pool_rows {
                pool::read(side, target.is_server())
            } else {
                plan::read(side, channel, counting)
            }
        };
        let mut plans = Vec::with_capacity(channels.len());
        for channel in &channels {
            let plan = read(&source, channel, false)?;
            let plan = plan::check(plan, &target)?;
            plans.push(plan);
        }
        // Whether anything was written yet: a failure after it leaves the
        // target part way, to finish by running again.
        let mut wrote = false;
        let mut report = Report {
            from: self.from.to_string(),
            to: self.to.to_string(),
            channels: Vec::with_capacity(plans.len()),
        };
        for plan in plans {
            let mut line = ChannelReport {
                channel: plan.channel.clone(),
                source: plan.counted(),
                written: 0,
                present: plan.present,
                target: 0,
            };
            let copied = plan::copy(&plan, &target, &mut wrote);
            line.written = copied.map_err(|e| unfinished(wrote, e))?;
            report.channels.push(line);
        }
        for line in &mut report.channels {
            line.target = read(&target, &line.channel, true)
                .map_err(|e| unfinished(wrote, e))?
                .counted();
        }
        Ok(report)
    }

    /// The channels to copy: [`CHANNELS`] less the skipped ones, after
    /// checking that a source directory holds nothing else.
    fn channels(&self, source: &Side) -> Result<Vec<String>, MigrateError> {
        for name in source.top_folders()? {
            if !CHANNELS.contains(&name.as_str()) && !self.skip.contains(&name) {
                return Err(MigrateError::Unknown { folder: name });
            }
        }
        Ok(CHANNELS
            .iter()
            .filter(|c| !self.skip.contains(**c))
            .map(|c| (*c).to_owned())
            .collect())
    }
}

/// What a migration did, per channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Report {
    /// The source, without a password.
    pub from: String,
    /// The target, without a password.
    pub to: String,
    /// One line per channel copied, in [`CHANNELS`] order.
    pub channels: Vec<ChannelReport>,
}

impl Report {
    /// Returns whether every channel's count on the target equals the
    /// source's.
    pub fn verified(&self) -> bool {
        self.channels.iter().all(ChannelReport::verified)
    }

    /// Returns how many values and log records this run wrote.
    pub fn written(&self) -> u64 {
        self.channels.iter().map(|c| c.written).sum()
    }
}

/// One channel of a [`Report`]. Counts are values plus log records; a
/// server's index rows (mail's `ids/`, `task/`, `open/`, reply index
/// entries; the bus's queue markers) are not counted, as a directory has
/// no such values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ChannelReport {
    /// The channel's folder (`mail`).
    pub channel: String,
    /// What the source holds.
    pub source: u64,
    /// What this run wrote.
    pub written: u64,
    /// What the target already held, the same.
    pub present: u64,
    /// What the target holds after the run.
    pub target: u64,
}

impl ChannelReport {
    /// Returns whether the target holds as much as the source.
    pub fn verified(&self) -> bool {
        self.source == self.target
    }
}

/// Which side of a migration failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum End {
    /// The state copied from.
    Source,
    /// The state copied to.
    Target,
}

impl fmt::Display for End {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            End::Source => "source",
            End::Target => "target",
        })
    }
}

/// Why a migration stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MigrateError {
    /// The source and the target are the same root.
    #[error("the source and the target are the same: {root}")]
    SameRoot {
        /// The root, without a password.
        root: String,
    },
    /// The source directory does not exist: nothing to copy.
    #[error("no state at {root}: the source must exist")]
    NoSource {
        /// The folder.
        root: String,
    },
    /// A side could not be opened (a bad folder, an unreachable server, a
    /// refused login, a newer schema, a build without PostgreSQL).
    #[error("cannot open the {end} {root}")]
    Open {
        /// Which side.
        end: End,
        /// The root, without a password.
        root: String,
        /// Why.
        #[source]
        source: Box<crate::Error>,
    },
    /// A source directory holds a folder no channel owns: refused rather
    /// than left behind.
    #[error(
        "the source holds `{folder}/`, which no channel owns: move it away or pass --skip {folder}"
    )]
    Unknown {
        /// The folder.
        folder: String,
    },
    /// The work pool on a side did not read (a corrupt table, log or
    /// row: run `chipset doctor --fix` on it first), or its storage
    /// failed; nothing of the pool was written.
    #[error("the work pool on the {end} failed")]
    Pool {
        /// Which side.
        end: End,
        /// The pool's error.
        #[source]
        source: chipset_pool::Error,
    },
    /// A source value that cannot be read (a corrupt message): run `chipset
    /// doctor --fix` on the source first; nothing was written.
    #[error("cannot migrate {key} from the source: {why} (run `chipset doctor --fix` on it first)")]
    Corrupt {
        /// The key.
        key: String,
        /// Why.
        why: String,
    },
    /// The target holds another value under a key the source holds, or a
    /// log that is not a prefix of the source's: nothing was written past
    /// it (found while planning: nothing at all).
    #[error("the target holds another value at {key} than the source: nothing was overwritten")]
    Conflict {
        /// The key.
        key: String,
    },
    /// A side's storage failed.
    #[error("the {end} failed")]
    Backend {
        /// Which side.
        end: End,
        /// The seam's error.
        #[source]
        source: chipset_backend::Error,
    },
    /// Mail refused a message on the target.
    #[error("mail on the target refused a message")]
    Mail(#[source] chipset_mail::Error),
    /// The bus refused on the target.
    #[error("the bus on the target failed")]
    Bus(#[source] chipset_bus::Error),
    /// A failure after this run wrote to the target: the target holds part
    /// of the copy. Running the same migration again finishes it.
    #[error("the migration stopped after it began to write (run it again to finish)")]
    Unfinished(#[source] Box<MigrateError>),
}

impl Classify for MigrateError {
    /// Bad input is [`ErrorKind::Invalid`]; a failure after the first
    /// write is [`ErrorKind::OutcomeUnknown`] (run again); the rest is the
    /// kind of the error beneath, or refused.
    fn kind(&self) -> ErrorKind {
        match self {
            MigrateError::SameRoot { .. } => ErrorKind::Invalid,
            MigrateError::NoSource { .. } => ErrorKind::NotFound,
            MigrateError::Open { source, .. } => source.kind(),
            MigrateError::Unknown { .. } | MigrateError::Conflict { .. } => ErrorKind::Refused,
            MigrateError::Pool { source, .. } => source.kind(),
            MigrateError::Corrupt { .. } => ErrorKind::Corrupt,
            MigrateError::Backend { source, .. } => source.kind(),
            MigrateError::Mail(e) => e.kind(),
            MigrateError::Bus(e) => e.kind(),
            MigrateError::Unfinished(_) => ErrorKind::OutcomeUnknown,
        }
    }
}

/// Marks a failure after something was written (`wrote`): the target
/// holds part of the copy.
fn unfinished(wrote: bool, e: MigrateError) -> MigrateError {
    if wrote {
        MigrateError::Unfinished(Box::new(e))
    } else {
        e
    }
}

impl MigrateError {
    pub(crate) fn source(e: chipset_backend::Error) -> Self {
        MigrateError::Backend {
            end: End::Source,
            source: e,
        }
    }

    pub(crate) fn target(e: chipset_backend::Error) -> Self {
        MigrateError::Backend {
            end: End::Target,
            source: e,
        }
    }
}
