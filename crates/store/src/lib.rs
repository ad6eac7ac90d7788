//! Atomic, durable filesystem primitives for chipset.
//!
//! Every chipset channel keeps its state as files under one root and changes
//! them only through this crate, so its guarantees are the product's: no lost
//! assignment, no lost message, no torn file, whatever crashes.
//!
//! ```
//! use chipset_store::{AgentId, Channel, Decision, ReadOutcome, StateDir};
//!
//! let tmp = tempfile::tempdir()?;
//! let state = StateDir::open(tmp.path())?;
//! let agent = AgentId::new("polecat-alpha")?;
//! let path = state.channel_dir(Channel::Hooks)?.join(format!("{agent}.json"));
//!
//! // A locked read-modify-write: concurrent processes never lose an update.
//! let count = state.update(&path, |current: ReadOutcome<u64>| {
//!     let next = match current {
//!         ReadOutcome::Missing => 1,
//!         ReadOutcome::Value(n) => n + 1,
//!         ReadOutcome::Corrupt(bad) => return Err(bad.into()),
//!         ReadOutcome::Unsupported(newer) => return Err(newer.into()),
//!     };
//!     Ok::<_, chipset_store::Error>(Decision::Write(next, next))
//! })?;
//! assert_eq!(count, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The state root
//!
//! [`StateDir`] is the root (default [`DEFAULT_ROOT`], `.chipset/state`), with
//! one subdirectory per [`Channel`]: `hooks/`, `nudge/`, `mail/`, `bus/`,
//! `reminders/`, `loop/`, created on demand. Names starting with a dot are the
//! store's own: temp files (`.{name}.{pid}.{n}.{salt}.tmp`), lock files
//! (`.{name}.lock`) and `.quarantine/` folders. Listings skip them.
//!
//! # Ids and time
//!
//! Everything that becomes a path segment is a validated newtype ([`AgentId`],
//! [`TaskId`], [`MessageId`], [`BeadId`], or one made with [`define_id!`]): see
//! [`validate_segment`] for the rules. [`SortableId`] makes `{unix-ms}-{uuid-v4}`
//! ids that increase strictly within a process. Time comes from a [`Clock`]
//! ([`SystemClock`] or [`ManualClock`]) as a [`Timestamp`], written as RFC 3339
//! UTC with milliseconds.
//!
//! # Writing
//!
//! Each primitive has one **commit point**: the step after which the change
//! is visible to readers. A failure before it leaves nothing a reader can see
//! (no file, no temp outside a dot-name, no new empty directory). A failure
//! after it (a sync that makes it durable) is [`Error::OutcomeUnknown`]: the
//! change may be visible and is not known to be durable.
//!
//! | primitive | commit point |
//! |---|---|
//! | [`write_atomic`] / [`StateDir::write_json`]: durable replace | the rename over the target |
//! | [`create_new`] / [`StateDir::create_new_json`]: durable publish under a new name, never overwriting | the no-replace rename (or link) to the name |
//! | [`create_new_batch`]: many publishes sharing their syncs (two sync rounds per batch) | each file's own no-replace rename |
//! | [`write_unsynced`] / [`StateDir::write_unsynced`]: replace **without any sync**, for self-validating caches only | the rename over the target |
//! | [`move_noclobber`]: durable move between directories, never overwriting | the no-replace rename |
//! | [`JsonLog::append`] / [`JsonLog::append_batch`]: single-write appends | the data sync after the write (a failure before it truncates the log back) |
//! | [`JsonLog::append_batch_unsynced`]: a single-write append of records the caller can rebuild, durable with the log's next sync | the write |
//! | [`update_locked`] / [`StateDir::update`]: read-modify-write under a [`Lock`] | the rename of the new value |
//! | [`JsonLog::repair`]: whole records kept, the rest quarantined | the rename of the repaired copy |
//!
//! # Retrying: the idempotent-retry rule
//!
//! Every crate follows one rule, so that any failure, [`Error::OutcomeUnknown`]
//! included, is safe to retry:
//!
//! - **Same id, same content**: the retry returns the first attempt's outcome
//!   as success (for a no-clobber publish, [`Error::AlreadyExists`] on a file
//!   with the same content is the first attempt's success).
//! - **Same id, other content**: refused with a typed error; nothing changes.
//! - **A transition that already applied** (already moved, already
//!   acknowledged, already active): success, with nothing changed.
//!
//! Ids are chosen by the caller where a retry must be recognised (a message
//! or event id), so a retry carries the same id as the attempt it repeats.
//!
//! JSON is written canonically ([`to_canonical_json`]): sorted keys at every
//! depth, two-space indent, one trailing newline.
//!
//! # Reading
//!
//! Typed reads return a [`ReadOutcome`]: missing, corrupt (with a
//! [`CorruptReason`]: unparsable, wrong shape, over the size cap, not a regular
//! file), unsupported, or the value. A bad file is never "nothing there".
//! Repair moves a corrupt file aside with [`StateDir::quarantine`]; nothing is
//! ever deleted by repair.
//!
//! *Unsupported* ([`Unsupported`]) is for a file that is exactly what it
//! claims to be but holds a value this version does not know: a hook status,
//! message kind or format version written by a newer or foreign program. The
//! store's own reads never produce it (they cannot know a domain's values);
//! each channel produces it with [`ReadOutcome::and_then`] when it turns the
//! on-disk form into its types. Repair never moves such a file aside, and a
//! reader whose answer depends on it (a gate, a transition) fails closed.
//!
//! Reads in memory that does not grow with the state: [`JsonLog::for_each`]
//! hands a log's records over one at a time (keeping only bad lines and a
//! torn tail), [`StateDir::for_each_name`] walks a directory without
//! collecting its listing, and [`StateDir::scratch_file`] gives a reader a
//! nameless, never-synced file for working data that outgrows memory (an
//! external sort's runs): it vanishes with its handle, crash or not.
//!
//! # Durability
//!
//! chipset runs on Linux (it uses `openat2` and `renameat2`, with fallbacks
//! for kernels older than 5.6 and 3.15). What is guaranteed, on a local,
//! case-sensitive filesystem (ext4, XFS, btrfs) whose disk honours flushes:
//!
//! - When a write call returns `Ok`, the change survives a crash of the
//!   process, the operating system, or a power cut: file data is synced
//!   (`fsync`) before it is renamed or linked into place, and the directory is
//!   synced after. Appends are synced with `fdatasync` before returning.
//! - At every moment, a file under its real name is whole: the old contents or
//!   the new, never a mix or a prefix. Temp files are dot-files that no reader
//!   looks at; a crash may leave some behind, and [`sweep_temps`] removes them.
//! - No-clobber operations never overwrite: of two racing publishers of one
//!   name, one wins and the other gets [`Error::AlreadyExists`].
//! - A log reader returns only whole records, in bounded memory (a line over
//!   [`MAX_LINE`] is skipped and reported, never held); a torn last line (a
//!   crash mid-append) is reported, and the next append, or
//!   [`JsonLog::recover`], cuts it under the lock. A failed append truncates
//!   the log back to its last whole record before returning, so a full disk
//!   leaves no torn tail. A directory, FIFO or device at a log's path is
//!   [`Error::Corrupt`] ([`CorruptReason::NotARegularFile`]), never a hang.
//! - [`JsonLog::repair`] is the only change to an append-only log that is not
//!   an append: under the lock, it replaces the log (durably, by rename) with
//!   a copy holding every whole record that reads as the caller's type, in
//!   order, and moves every other line (and a torn tail) byte for byte, in
//!   order, into one file in `.quarantine/` beside it. It deletes nothing and
//!   reorders nothing; blank lines are dropped; offsets read before it are void.
//! - Locks are released by the kernel when their holder dies.
//!
//! ## Ordering rules (what a power cut may undo)
//!
//! The store's guarantees rest on these rules, which hold on ext4
//! (`data=ordered`), XFS and btrfs, and which the power-cut simulator of the
//! `testing` feature enumerates (`RecordIo::crash_states`):
//!
//! 1. Data written to a file and not yet synced (`fsync`/`fdatasync` of that
//!    file) may be lost, kept, or, for data appended at the end, kept in part
//!    (a torn tail), independently for each file.
//! 2. Namespace changes in a directory (create, rename, link, mkdir, remove)
//!    not yet made durable by a sync of that directory may be lost or kept,
//!    all together, independently for each directory.
//! 3. A rename is atomic within a directory. Between directories it is two
//!    changes (the new name, the old name's removal); the removal is never
//!    kept without the new name, so a moved file is never in neither place.
//! 4. A synced file or directory stays as synced; an entry whose directory is
//!    lost is lost with it.
//!
//! Every primitive syncs the file's data before its commit point and the
//! directory after it (except [`write_unsynced`], which promises nothing
//! after a power cut), so by rules 1 and 2 a reader after a power cut sees
//! the old state or the whole new one, and every call that returned `Ok`
//! survives. The seam ([`IoBackend`], chosen through [`StateOptions::io`])
//! carries every write, sync, rename, link, mkdir, truncate and remove, which
//! is what lets tests fail the Nth call ([`Error::OutcomeUnknown`] or nothing
//! visible, for every N) and replay every power cut these rules allow.
//!
//! **Batches.** [`create_new_batch`] keeps every guarantee above for each
//! file, and shares the waiting: it writes every temp first, then syncs all
//! of them in one round (`fsync` of each file, up to 16 at a time on
//! threads, which ext4 and XFS serve with shared journal commits), then
//! renames each into place, then syncs each distinct directory once, again
//! concurrently. So a batch of N files in one directory costs two sync
//! rounds, not N + 1. When it returns `Ok`, every file it reported
//! [`Created::New`] survives a power cut, whole; a power cut before it
//! returns leaves each file whole or absent (no file is visible before its
//! data was synced). Measured on this repository's ext4 volume (a C
//! program, 100 files of 400 bytes, 5 rounds, one run, the machine shared):
//! one `fsync` after another 900–2,000 µs per file, 8 concurrent `fsync`s
//! 460–915 µs, `syncfs` 580–2,850 µs (it also waits for every other
//! process's dirty data on the volume, which is why it is not used), and
//! `sync_file_range` then `fsync` 1,040–2,380 µs; a later pair of runs
//! (interleaved, 8 rounds) gave 240–350 µs one after another, 90–120 µs
//! with 16 threads, 80–115 µs with 64, 70–95 µs with `sync_file_range`
//! first. The figures drift by 2× and more between runs, so the mail bench
//! compares interleaved ratios.
//!
//! What is not guaranteed:
//!
//! - Disks or virtual disks that acknowledge a flush without making it durable
//!   (some consumer drives, some hypervisor cache modes) can lose synced data on
//!   power loss; no software above them can fix that.
//! - Network filesystems (NFS, SMB, most FUSE mounts) may not honour directory
//!   syncs, `RENAME_NOREPLACE` or `flock` across machines; use a local disk.
//!   Where `RENAME_NOREPLACE` is unsupported the store falls back to `link` +
//!   `unlink`, which is still no-clobber but may leave a temp behind on a crash.
//! - A write whose final directory sync fails returns
//!   [`Error::OutcomeUnknown`]: the change is visible but not known to be
//!   durable. Callers retry by the idempotent-retry rule above.
//! - A failure before a commit point removes the directories the operation
//!   created, but that removal is not synced: after a power cut an empty
//!   directory may come back. A log's directory is made by [`StateDir::log`],
//!   not by the append.
//! - A move between two directories syncs the destination, then the source; a
//!   crash between the two syncs can, on some filesystems, leave the file
//!   visible in both places after recovery (never in neither).
//! - Symlink checks walk the path before each operation; a process that swaps a
//!   directory for a symlink between the check and the use is not defended
//!   against. The state root is trusted; its contents are checked.
//!
//! # Waking on change
//!
//! [`Watcher`] blocks until something changes at a few [`WatchTarget`]s
//! (directories, trees or single files) under the root, or a periodic
//! rescan is due ([`WatchConfig::rescan_interval`]), or a timeout passes. It
//! uses directory notifications (inotify on Linux, through `notify`) for
//! speed and the rescan for safety: a lost notification, a filesystem that
//! does not notify or a watch that could not be set up delays a wake-up by
//! at most one interval. It only says when to look; the caller reads the
//! state again after each wake-up. Targets that do not exist yet are
//! watched through their nearest existing ancestor, so watching creates
//! nothing.
//!
//! # Errors
//!
//! One enum, [`Error`]; every I/O failure says what was being done and to which
//! path. [`Error::OutcomeUnknown`] is the one a caller must treat differently:
//! the change may have happened, so retry with the same id (or re-read)
//! rather than report a failure that invites a duplicate.

#![forbid(unsafe_code)]

mod atomic;
mod backend;
mod canonical;
mod error;
mod id;
mod line;
mod lock;
mod log;
mod read;
mod sortable;
mod state;
mod time;
mod watch;

#[cfg(feature = "testing")]
pub mod testing;

pub use atomic::{
    Created, TEMP_SUFFIX, create_new, create_new_batch, create_new_json, is_temp_name,
    move_noclobber, remove_file, stale_temps, sweep_temps, sync_dir, write_atomic, write_json,
    write_unsynced,
};
pub use backend::{IoBackend, IoOp, RealIo, SharedIo};
pub use canonical::{append_canonical_line, to_canonical_json, to_canonical_line};
pub use error::{Error, Result};
pub use id::{AgentId, BeadId, MAX_ID_LEN, MessageId, TaskId, validate_segment};
pub use lock::{Decision, Lock, LockGuard, update_locked};
pub use log::{BadLine, JsonLog, LogContents, LogRepair, MAX_LINE, TornTail};
pub use read::{
    CorruptReason, Corruption, DEFAULT_READ_CAP, ReadOutcome, Unsupported, parse_json, read_bytes,
    read_json,
};
pub use sortable::SortableId;
pub use state::{Channel, DEFAULT_ROOT, QUARANTINE_DIR, StateDir, StateOptions};
pub use time::{Clock, ManualClock, SharedClock, SystemClock, Timestamp};
pub use watch::{Wake, WatchConfig, WatchTarget, Watcher};

#[doc(hidden)]
pub mod __private {
    pub use serde;
}
