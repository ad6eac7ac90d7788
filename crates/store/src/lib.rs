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
//! - [`write_atomic`] / [`StateDir::write_json`]: durable replace.
//! - [`create_new`] / [`StateDir::create_new_json`]: durable publish under a new
//!   name, never overwriting; [`create_new_batch`] shares directory syncs.
//! - [`move_noclobber`]: durable move between directories, never overwriting.
//! - [`JsonLog`]: append-only JSONL with single-write appends and batch appends.
//! - [`update_locked`] / [`StateDir::update`]: read-modify-write under a [`Lock`].
//!
//! JSON is written canonically ([`to_canonical_json`]): sorted keys at every
//! depth, two-space indent, one trailing newline.
//!
//! # Reading
//!
//! Typed reads return a [`ReadOutcome`]: missing, corrupt (with a
//! [`CorruptReason`]: unparsable, wrong shape, over the size cap, not a regular
//! file), or the value. A bad file is never "nothing there". Repair moves it
//! aside with [`StateDir::quarantine`]; nothing is ever deleted by repair.
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
//! - A log reader returns only whole records; a torn last line (a crash
//!   mid-append) is reported, later appends stay whole, and
//!   [`JsonLog::recover`] truncates the tail under the lock.
//! - Locks are released by the kernel when their holder dies.
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
//! - A write whose final directory sync fails returns an error after the new
//!   file is already in place: the change is visible but not known to be
//!   durable. Callers that retry re-read first.
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
//! One enum, [`Error`]; every I/O failure says what was being done and to which path.

#![forbid(unsafe_code)]

mod atomic;
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

pub use atomic::{
    Created, TEMP_SUFFIX, create_new, create_new_batch, create_new_json, is_temp_name,
    move_noclobber, remove_file, stale_temps, sweep_temps, sync_dir, write_atomic, write_json,
};
pub use canonical::{append_canonical_line, to_canonical_json, to_canonical_line};
pub use error::{Error, Result};
pub use id::{AgentId, BeadId, MAX_ID_LEN, MessageId, TaskId, validate_segment};
pub use lock::{Decision, Lock, LockGuard, update_locked};
pub use log::{BadLine, JsonLog, LogContents, MAX_LINE, TornTail};
pub use read::{
    CorruptReason, Corruption, DEFAULT_READ_CAP, ReadOutcome, parse_json, read_bytes, read_json,
};
pub use sortable::SortableId;
pub use state::{Channel, DEFAULT_ROOT, QUARANTINE_DIR, StateDir, StateOptions};
pub use time::{Clock, ManualClock, SharedClock, SystemClock, Timestamp};
pub use watch::{Wake, WatchConfig, WatchTarget, Watcher};

#[doc(hidden)]
pub mod __private {
    pub use serde;
}
