//! The trait every backend implements, and the values it passes.

use std::fmt;
use std::time::Duration;

use chipset_store::Timestamp;

use crate::claim::{Claim, Claimed, Decide};
use crate::error::{Error, Result};
use crate::key::{Dir, Key};
use crate::txn::Step;

/// The largest value or log record accepted, in bytes (1 MiB): the read cap
/// of chipset-store's typed reads, so a value written through the seam is
/// always readable by the channels. Larger is [`Error::TooLarge`].
pub const MAX_VALUE: usize = 1 << 20;

/// Which version of a value a read saw: the token a compare-and-swap
/// ([`Backend::replace`], [`Backend::remove`]) is made against.
///
/// Opaque, and comparable only with versions of the same backend. On a
/// directory it is a 64-bit digest of the file's bytes (a file has no
/// other field to carry it, and files stay byte for byte what the channels
/// write), so the swap succeeds when the bytes are the ones read; every
/// chipset value that changes meaning carries a generation or id, so equal
/// bytes are the same state. On PostgreSQL it is the `version` column,
/// drawn from one sequence: it never repeats, even after a delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Version(pub(crate) u64);

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// A value and the version it was read at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned {
    /// The bytes, exactly as written.
    pub value: Vec<u8>,
    /// The version to swap against.
    pub version: Version,
}

/// What [`Backend::create`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Created {
    /// This call created the value: of racing creators, exactly one sees this.
    New(Version),
    /// The key already held a value, returned as it is now. When it holds
    /// the bytes this call tried to write, the call is a retry of a create
    /// that applied: see [`Created::is_retry_of`].
    Existing(Versioned),
}

impl Created {
    /// Returns whether the key now holds `value`: a new create, or a retry
    /// of one that applied (the idempotent-retry rule: same key, same
    /// content, the first attempt's success).
    pub fn is_retry_of(&self, value: &[u8]) -> bool {
        match self {
            Created::New(_) => true,
            Created::Existing(v) => v.value == value,
        }
    }
}

/// Where a log reader is: a byte offset on a directory, a sequence number
/// on PostgreSQL. Start at [`LogPos::START`]; continue at
/// [`LogRead::next`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LogPos(pub(crate) u64);

impl LogPos {
    /// The start of every log.
    pub const START: LogPos = LogPos(0);
}

/// What [`Backend::read_log`] returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRead {
    /// The records from the position asked for, in append order, each one
    /// JSON value serialized compactly with sorted keys.
    pub records: Vec<Vec<u8>>,
    /// Where the next read continues.
    pub next: LogPos,
}

/// What a [`Wait::wait`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Wake {
    /// Something changed in a watched folder: read again.
    Changed,
    /// No notification came within the rescan interval (the safety net for
    /// a lost one): read again.
    Rescan,
    /// The timeout passed.
    TimedOut,
}

/// A wait for changes in some folders, from [`Backend::watch`].
pub trait Wait: fmt::Debug + Send {
    /// Blocks until something changes in a watched folder, a rescan is
    /// due, or `timeout` passes. It only says when to look: read the state
    /// again after every wake.
    ///
    /// # Errors
    ///
    /// A backend error that the wait cannot recover from (on PostgreSQL a
    /// lost connection is reconnected and reported as [`Wake::Rescan`]).
    fn wait(&mut self, timeout: Duration) -> Result<Wake>;
}

/// A held lock from [`Backend::lock`], released on drop (and by the
/// kernel or the server when its holder dies).
#[must_use = "the lock is released when the guard is dropped"]
pub struct LockGuard {
    pub(crate) _inner: Box<dyn Send>,
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LockGuard")
    }
}

/// The operations every chipset channel performs on its state, on a
/// directory ([`FsBackend`](crate::FsBackend)) or on PostgreSQL
/// (`PgBackend`, feature `postgres`). See the crate docs for which channel
/// needs which, and `docs/backend.md` for how each maps to files and rows.
///
/// Synchronous, like the rest of the workspace: every channel's I/O layer
/// is a locked read-decide-write on the caller's thread.
///
/// # Retrying
///
/// Any error may be retried; [`Error::OutcomeUnknown`] must be, with the
/// same key and value. A create that applied answers [`Created::Existing`]
/// with the same bytes ([`Created::is_retry_of`]); a replace that applied
/// answers [`Error::Conflict`] holding its own write
/// ([`Error::already_holds`] gives the version it made); a remove of a key
/// already gone answers `Ok`. Compare-and-swap stays strict: a conflict is
/// never turned into a success behind the caller's back.
pub trait Backend: fmt::Debug + Send + Sync {
    /// Returns the time on the backend's clock: the injected clock of a
    /// directory, the server's clock on PostgreSQL (so leases, presence
    /// and stall judgements agree across hosts).
    ///
    /// # Errors
    ///
    /// A server error on PostgreSQL.
    fn now(&self) -> Result<Timestamp>;

    /// Reads `key`: `None` when nothing is there.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] when something is there but cannot be read as a
    /// value (never "nothing there"); an I/O or server error.
    fn read(&self, key: &Key) -> Result<Option<Versioned>>;

    /// Creates `key` holding `value` unless it holds something: of racing
    /// creators exactly one gets [`Created::New`].
    ///
    /// # Errors
    ///
    /// [`Error::TooLarge`]; [`Error::OutcomeUnknown`]; an I/O or server error
    /// (nothing created).
    fn create(&self, key: &Key, value: &[u8]) -> Result<Created>;

    /// Replaces `key`'s value with `value` if it is still at `expected`,
    /// and returns the new version.
    ///
    /// # Errors
    ///
    /// [`Error::Conflict`] when it is at another version (nothing written;
    /// the error holds what is there);
    /// [`Error::NotFound`] when nothing is there; [`Error::TooLarge`];
    /// [`Error::OutcomeUnknown`]; an I/O or server error.
    fn replace(&self, key: &Key, expected: Version, value: &[u8]) -> Result<Version>;

    /// Writes `value` at `key` whatever is there (latest wins: a nudge's
    /// `latest.json`), and returns the new version.
    ///
    /// # Errors
    ///
    /// As [`Backend::replace`], without the conflict.
    fn put(&self, key: &Key, value: &[u8]) -> Result<Version>;

    /// Writes `value` at `key` if the key is still as a read left it:
    /// creates it when the read found nothing (`seen` is `None`), else
    /// replaces it at `seen`. Returns the new version, or `None` when
    /// another writer created, rewrote or removed the key since (nothing
    /// written), and the caller reads again and decides again: the write
    /// of an optimistic read-decide-write loop (a hook, a profile, the
    /// lease table).
    ///
    /// A conflict is never taken for a success: a create that finds the
    /// very bytes it meant to write (a retry of one that applied) answers
    /// `None` too, and the caller's next read sees its own write.
    ///
    /// # Errors
    ///
    /// As [`Backend::create`] and [`Backend::replace`], but for a changed
    /// or missing value.
    fn create_or_replace(
        &self,
        key: &Key,
        seen: Option<Version>,
        value: &[u8],
    ) -> Result<Option<Version>> {
        match seen {
            None => match self.create(key, value)? {
                Created::New(v) => Ok(Some(v)),
                Created::Existing(_) => Ok(None),
            },
            Some(v) => match self.replace(key, v, value) {
                Ok(v) => Ok(Some(v)),
                Err(Error::Conflict { .. } | Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            },
        }
    }

    /// Removes `key` if it is still at `expected`. Removing a key that
    /// holds nothing succeeds (a retry of a remove that applied).
    ///
    /// # Errors
    ///
    /// [`Error::Conflict`] when it is at another version; an I/O or server error.
    fn remove(&self, key: &Key, expected: Version) -> Result<()>;

    /// Moves the value at `from`, if it is still at `expected`, to `to`,
    /// which must hold nothing (mail's archive, the bus's
    /// acknowledgement), and returns its version at `to`. Of racing movers
    /// exactly one succeeds; a reader sees the value in one place, never
    /// in neither.
    ///
    /// A retry of a move that applied finds `from` empty
    /// ([`Error::NotFound`]) and its value at `to`: the caller's read of
    /// `to` is the first attempt's success.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] when `from` holds nothing; [`Error::Conflict`]
    /// when it is at another version; [`Error::Exists`] when `to` holds a
    /// value (nothing moved); [`Error::OutcomeUnknown`]; an I/O or server
    /// error.
    fn move_new(&self, from: &Key, expected: Version, to: &Key) -> Result<Version>;

    /// Lists the names that hold a value in `dir`, in byte order. Folders
    /// below it are not listed.
    ///
    /// # Errors
    ///
    /// An I/O or server error.
    fn list(&self, dir: &Dir) -> Result<Vec<String>>;

    /// Appends `records` (each one JSON value) to the log `log`, durably
    /// and in order, all together: no reader sees some without the rest,
    /// and concurrent appends never interleave within a batch.
    ///
    /// # Errors
    ///
    /// [`Error::BadRecord`]; [`Error::TooLarge`];
    /// [`Error::OutcomeUnknown`] (the records may be there; a log is
    /// at-least-once under it, so records carry their own ids); an I/O or
    /// server error (nothing appended).
    fn append(&self, log: &Key, records: &[&[u8]]) -> Result<()>;

    /// Reads the log `log` from `from`, in append order.
    ///
    /// # Errors
    ///
    /// An I/O or server error.
    fn read_log(&self, log: &Key, from: LogPos) -> Result<LogRead>;

    /// Takes the exclusive lock of `key`, blocking until it is free. The
    /// lock is advisory: it excludes other holders of the same lock, not
    /// writers that do not take it.
    ///
    /// # Errors
    ///
    /// An I/O or server error.
    fn lock(&self, key: &Key) -> Result<LockGuard>;

    /// Returns a wait for changes in `dirs`, woken by any write through
    /// any handle on the same state (any process, any host for PostgreSQL).
    ///
    /// # Errors
    ///
    /// An I/O or server error.
    fn watch(&self, dirs: &[Dir], rescan: Duration) -> Result<Box<dyn Wait>>;

    /// Reads every value in `dir`, in byte order of their names (what
    /// [`Backend::list`] and a [`Backend::read`] of each return, a value
    /// removed in between left out). On PostgreSQL one statement; on a
    /// directory a listing and a read per file.
    ///
    /// # Errors
    ///
    /// As [`Backend::list`] and [`Backend::read`].
    fn read_all(&self, dir: &Dir) -> Result<Vec<(String, Versioned)>> {
        crate::txn::one_by_one(self, dir)
    }

    /// Applies `steps` together and returns, per step, the version it left
    /// (`None` for a remove or an append).
    ///
    /// On PostgreSQL the steps are one transaction: all of them or none,
    /// and a reader sees none of them before all of them. On a directory
    /// they run in order and stop at the first failure, the steps before it
    /// staying done (a directory has no multi-file transaction): a caller
    /// orders its steps so that every prefix is a safe state. Every value
    /// and record is checked before anything is written, on both.
    ///
    /// A retry after [`Error::OutcomeUnknown`] is recognised by a first
    /// [`Step::Create`] of a fresh key: when the transaction applied, the
    /// retry fails with [`Error::Exists`] holding the caller's own value.
    ///
    /// # Errors
    ///
    /// [`Error::TooLarge`] or [`Error::BadRecord`] for bad input, nothing
    /// written. The first failing step's refusal, as its single operation
    /// reports it ([`Error::Conflict`], [`Error::NotFound`],
    /// [`Error::Exists`] for a create or a move's destination), nothing of
    /// the transaction applied on PostgreSQL; [`Error::OutcomeUnknown`]
    /// when the commit's answer was lost, and on a directory when a step
    /// after the first fails otherwise (an I/O error: the steps before it
    /// are done); an I/O or server error, nothing changed.
    fn transact(&self, steps: &[Step<'_>]) -> Result<Vec<Option<Version>>> {
        crate::txn::in_order(self, steps)
    }

    /// Lists the folders directly below `dir` that hold a value (at any
    /// depth below), in byte order: an agent's folder under `nudge/`.
    /// On a directory every real folder not starting with a dot (an empty
    /// one too); on PostgreSQL, where a folder exists only through its
    /// values, the first segment below `dir` of every row's `dir`.
    ///
    /// # Errors
    ///
    /// An I/O or server error.
    fn list_dirs(&self, dir: &Dir) -> Result<Vec<String>>;

    /// Returns the state root when this backend is a local directory, so a
    /// channel keeps the file-only parts of its work there (a doctor's
    /// quarantine, stale temporary files); `None` on a server.
    fn local_state(&self) -> Option<&chipset_store::StateDir> {
        None
    }

    /// Moves the value at `key`, if it is still at `expected`, to
    /// [`Key::quarantined_at`] the time `at`: a doctor's fix for a value
    /// that cannot be read, which deletes nothing. Returns where it went,
    /// or `None` when the value was rewritten or removed since it was
    /// judged (the next check looks again).
    ///
    /// # Errors
    ///
    /// As [`Backend::move_new`], but for a changed or missing value.
    fn quarantine(&self, key: &Key, expected: Version, at: Timestamp) -> Result<Option<Key>> {
        let to = key.quarantined_at(at)?;
        match self.move_new(key, expected, &to) {
            Ok(_) => Ok(Some(to)),
            Err(Error::Conflict { .. } | Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Claims the first of `claim.candidates` (rows of `claim.dir`, in the
    /// caller's order) that `decide` accepts, and makes the writes it
    /// returns (the pool: a hook assignment), all in one step: of racing
    /// claimers no two claim one row, and a row is claimed exactly when
    /// its writes are made. `decide` sees the state through a
    /// [`ClaimView`](crate::ClaimView) with the candidate locked, and
    /// returns `None` to pass it over (claimed meanwhile). `None` when no
    /// candidate was claimed.
    ///
    /// The default, which a directory uses, is the lock-based claim below;
    /// a backend with row locks overrides it.
    ///
    /// On PostgreSQL it is one transaction: each candidate row is taken
    /// with `SELECT … FOR UPDATE SKIP LOCKED` (a row another claimer holds
    /// is skipped, never waited on), `decide` reads inside the transaction
    /// (after the row lock, so it sees the commit of whoever held the row
    /// before), and the writes and the commit follow. On a directory it
    /// runs under the lock of `claim.lock`, and the writes are made in
    /// order, each durable: a crash between two leaves the first, which
    /// the caller's retry recognises (see
    /// [`Claim::lock`](crate::Claim::lock)).
    ///
    /// # Retrying
    ///
    /// A claim whose commit was cut is [`Error::OutcomeUnknown`]: retry
    /// it with the same claimer; its `decide` finds its own writes (the
    /// claimer's hook holds the row) and answers as the first attempt did.
    ///
    /// # Errors
    ///
    /// What `decide` returns (nothing written); [`Error::Conflict`] when a
    /// write's key is no longer at its expected version (nothing written on
    /// PostgreSQL; on a directory the writes before it stand);
    /// [`Error::TooLarge`]; [`Error::OutcomeUnknown`]; an I/O or server
    /// error.
    fn claim(&self, claim: &Claim<'_>, decide: &mut Decide<'_>) -> Result<Option<Claimed>> {
        crate::claim::locked_claim(self, claim, decide)
    }
}

/// Refuses a value over [`MAX_VALUE`] before anything is written.
pub(crate) fn check_size(key: &Key, len: usize) -> Result<()> {
    if len > MAX_VALUE {
        return Err(Error::TooLarge {
            key: key.to_string(),
            len,
            max: MAX_VALUE,
        });
    }
    Ok(())
}

/// Parses a log record and returns its canonical compact form (sorted keys,
/// numbers exact), the bytes both backends keep and return.
pub(crate) fn canonical_record(log: &Key, record: &[u8]) -> Result<Vec<u8>> {
    check_size(log, record.len())?;
    let value: serde_json::Value =
        serde_json::from_slice(record).map_err(|e| Error::BadRecord {
            key: log.to_string(),
            why: e.to_string(),
        })?;
    serde_json::to_vec(&value).map_err(|e| Error::BadRecord {
        key: log.to_string(),
        why: e.to_string(),
    })
}
