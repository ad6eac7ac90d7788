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
//! let path = state.channel_dir(Channel::new("hooks"))?.join_id(&agent, ".json");
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
//! [`StateDir`] is the root (default [`StateDir::DEFAULT_ROOT`], `.chipset/state`), with
//! one subdirectory per [`Channel`], created on demand. A channel is an
//! opaque, validated name (`Channel::new("mail")`, checked when compiling):
//! the store does not know which channels exist; each channel crate owns its
//! name (`chipset_bus::Bus::CHANNEL` is `bus/`). Names starting with a dot
//! are the store's own: temp files (`.{name}.{pid}.{n}.{salt}.tmp`), lock files
//! (`.{name}.lock`) and `.quarantine/` folders. Listings skip them.
//!
//! # Paths under the root
//!
//! A [`StatePath`] is a path that cannot be outside the root: it starts at
//! a channel's directory ([`StateDir::channel`]) and grows one checked
//! segment at a time ([`StatePath::join`]: not empty, no `/` or `\`, not
//! `.` or `..`, no leading dot, at most 255 bytes; or
//! [`StatePath::join_id`], infallible for a validated id plus a constant
//! ending such as `.json`). It derefs to [`Path`](std::path::Path) for
//! display. Every [`StateDir`] method that takes a path takes a
//! `&StatePath`, so a path outside the root cannot be expressed: a bare
//! `&Path` does not compile. The methods still check at run time that the
//! path lies inside the root and that no directory on the way is a symlink
//! (a directory can be replaced by a symlink after its `StatePath` was
//! built). A channel's own hidden folder is a dot-name constant joined with
//! [`StatePath::join_static`] (mail's `.gate`); a folder with a channel's
//! layout at its top starts at [`StateDir::root_path`]. The store's own
//! dot-names stay out of reach: stale temps are listed (with
//! [`DoctorMode::Check`]) or removed (with [`DoctorMode::Fix`]) by
//! [`StateDir::sweep_temps`], a quarantine folder is read with [`StateDir::list_quarantine`], and the
//! `PathBuf`s those (and [`StateDir::quarantine`]) return are for showing.
//!
//! # Ids and time
//!
//! Everything that becomes a path segment is a validated newtype: see
//! [`define_id!`] for the rules. The store declares the two every
//! channel keys on, [`AgentId`] and [`TaskId`]; an id one channel owns is
//! declared in that crate in one line with [`define_id!`]
//! (`chipset_hook::BeadId`, `chipset_mail::MessageId`). [`SortableId`] makes `{unix-ms}-{uuid-v4}`
//! ids that increase strictly within a process. Time comes from a [`Clock`]
//! ([`SystemClock`] or [`ManualClock`]) as a [`Timestamp`], written as RFC 3339
//! UTC with milliseconds.
//!
//! Free text that must become a file name (a reminder's source id, a bus
//! event's source and kind, a de-duplication key) goes through one
//! percent-escaper, [`EscapeAlphabet::escape`], with one of two alphabets
//! (why two: see there), reversed by [`EscapeAlphabet::unescape`]; a value that must
//! hash alike in every process and version (a lock stripe, a cut name) uses
//! [`EscapeAlphabet::fnv1a_64`]. Both are contracts between processes and versions: the
//! channels pin their outputs as literals in tests.
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
//! | [`StateDir::write_bytes`] / [`StateDir::write_json`]: durable replace | the rename over the target |
//! | [`StateDir::create_new`] / [`StateDir::create_new_json`]: durable publish under a new name, never overwriting | the no-replace rename (or link) to the name |
//! | [`StateDir::create_new_batch`]: many publishes sharing their syncs (two sync rounds per batch) | each file's own no-replace rename |
//! | [`StateDir::write_unsynced`] / [`StateDir::write_cache_json`]: replace **without any sync**, for self-validating caches only (`write_cache_json` encodes into the file through a buffer) | the rename over the target |
//! | [`StateDir::move_noclobber`]: durable move between directories, never overwriting | the no-replace rename |
//! | [`JsonLog::append`] / [`JsonLog::append_batch`]: single-write appends | the data sync after the write (a failure before it truncates the log back) |
//! | [`JsonLog::append_batch_unsynced`]: a single-write append of records the caller can rebuild, durable with the log's next sync | the write |
//! | [`StateDir::update`]: read-modify-write under a lock ([`StateDir::lock`]) | the rename of the new value |
//! | [`StateDir::lock`] then [`StateDir::write_json`]s: a sequence of durable replaces under one lock | the rename of each value |
//! | [`JsonLog::repair`]: whole records kept, the rest quarantined | the rename of the repaired copy |
//!
//! [`StateDir::update`] is one decision under the lock. A caller that writes,
//! acts elsewhere (sends mail, appends to a log) and writes again, with no
//! other writer in between, holds the file's lock instead: it takes
//! [`StateDir::lock`] (the lock `update` takes), reads the value under it
//! ([`StateDir::read_json`]; a corrupt file is never "nothing there") and
//! makes each write a durable replace ([`StateDir::write_json`]) while it
//! holds the guard. A crash between two writes leaves the last one whole;
//! the sequence is not a transaction, so each step is written so the next
//! holder can finish or undo it.
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
//! Which failures to retry, and which to report, every chipset error says
//! the same way, whichever crate it comes from: [`Classify::kind`] is an
//! [`ErrorKind`] (bad input, not found, refused, stale, corrupt,
//! unsupported, unknown outcome, I/O).
//!
//! JSON is written canonically ([`StateDir::to_canonical_json`]): sorted keys at every
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
//! To ask what is at a path without reading it, [`StateDir::stat`] returns a
//! [`Stat`] (kind, size, inode, times) or `None` when nothing is there (of
//! any kind: a symlink is there, not followed); it goes through the root
//! and symlink checks of the reads, and fails, rather than answer "not
//! there", when the path cannot be looked at (permission denied, an I/O
//! error).
//!
//! *Unsupported* ([`Unsupported`]) is for a file that is exactly what it
//! claims to be but holds a value this version does not know: a hook status,
//! message kind or format version written by a newer or foreign program. The
//! store's own reads never produce it (they cannot know a domain's values);
//! each channel produces it with [`ReadOutcome::and_then`] when it turns the
//! on-disk form into its types. Repair never moves such a file aside, and a
//! reader whose answer depends on it (a gate, a transition) fails closed.
//!
//! A [`JsonLog`] is reached only through the root: [`StateDir::log`] (which
//! makes its directory, for writers) or [`StateDir::log_reader`] (which
//! makes nothing, for readers), both after the root and symlink checks; it
//! has no public constructor, so no crate can open a log outside the root.
//!
//! Reads in memory that does not grow with the state: [`JsonLog::for_each`]
//! hands a log's records over one at a time (keeping only bad lines and a
//! torn tail), [`StateDir::for_each_name`] walks a directory without
//! collecting its listing, and [`StateDir::scratch_file`] gives a reader a
//! nameless, never-synced file for working data that outgrows memory (an
//! external sort's runs): it vanishes with its handle, crash or not.
//!
//! A reader of every file in one directory (an inbox listing) opens it
//! once with [`StateDir::folder`] and reads each file by name through the
//! [`Folder`]: one `openat` relative to the open directory, a `statx`, one
//! `read` and a `close` per file, with no path resolved from the root again.
//! A reader that needs only the bytes uses [`Folder::read_into`], which
//! reuses one buffer and skips the `statx` for a file that its first read
//! shows whole: an `openat`, a `pread` and a `close`.
//!
//! Reads of files (by path or through a [`Folder`]) open them with
//! `O_NOATIME`, so a read never writes the file's access time: under the
//! default `relatime` mount option the first read of each new file would,
//! a write of its inode for every new message a listing reads (a quarter
//! of that listing's time on journalled ext4). The kernel grants the flag
//! to the file's owner and to a process with `CAP_FOWNER`; the first open
//! it refuses is made again without it, and that state's reads stop
//! asking for it. Nothing in the state uses access times.
//!
//! # Repair: one framework for every doctor
//!
//! Every channel's doctor has one shape: given a [`DoctorMode`]
//! ([`Check`](DoctorMode::Check) or [`Fix`](DoctorMode::Fix)) it returns one
//! [`Report`]: how many things it `scanned`, and its [`Finding`]s, each with
//! a stable `code`, a [`Defect`] class (corrupt, unsupported, stray, stale,
//! missing, unfinished, in flight, conflict), the path and id it is about,
//! whether a fix repairs it, a human line, and the [`Action`]s the fix took
//! (quarantined, rewrote, appended, moved, removed, truncated, completed, or
//! left alone and why). A report is clean when it has no findings;
//! [`Report::open`] counts those a fix did not change.
//!
//! A doctor moves a bad file aside only through
//! [`StateDir::quarantine_checked`]: it reads the file (stat first: a FIFO,
//! device or directory is never opened, only reported or moved), asks the
//! doctor whether it is bad, takes the lock its writers take, reads it
//! again, and moves it into `.quarantine/` only if it is byte for byte what
//! was judged bad. A file a writer rewrote between the check and the fix is
//! left alone.
//!
//! ```
//! use chipset_store::{Action, Channel, DoctorMode, Defect, Finding, ReadOutcome, Report, StateDir};
//!
//! let tmp = tempfile::tempdir()?;
//! let state = StateDir::open(tmp.path())?;
//! let path = state.channel(Channel::new("hooks")).join("broken.json")?;
//! state.write_bytes(&path, b"{")?;
//!
//! let mut report = Report::new(DoctorMode::Fix);
//! report.scanned += 1;
//! if let ReadOutcome::Corrupt(bad) = state.read_json::<serde_json::Value>(&path)? {
//!     let action = state.quarantine_checked(&path, Some(&path), |seen| {
//!         seen.as_ref()
//!             .and_then(|b| ReadOutcome::<serde_json::Value>::from_json(&path, b))
//!             .is_corrupt()
//!     })?;
//!     let line = format!("`{}`: {}", path.display(), bad.reason);
//!     report.findings.push(Finding::new("demo-corrupt", Defect::Corrupt(bad.reason), line)
//!         .at(&path)
//!         .with(action));
//! }
//! assert!(!report.is_clean());
//! assert_eq!(report.open(), 0);
//! assert!(matches!(report.findings[0].actions[0], Action::Quarantined { .. }));
//! assert!(state.read_bytes(&path)?.value().is_none());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
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
//!   synced after (on an in-order journal, written back before and made
//!   durable by the directory's sync: see the publish orders below). Appends
//!   are synced with `fdatasync` before returning.
//! - At every moment, a file under its real name is whole: the old contents or
//!   the new, never a mix or a prefix. Temp files are dot-files that no reader
//!   looks at; a crash may leave some behind, and [`StateDir::sweep_temps`] removes them.
//! - No-clobber operations never overwrite: of two racing publishers of one
//!   name, one wins and the other gets [`Error::AlreadyExists`].
//! - A log reader returns only whole records, in bounded memory (a line over
//!   1 MiB is skipped and reported, never held); a torn last line (a
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
//! (`data=ordered`), XFS and btrfs, and which the power-cut recorder in
//! `chipset-testkit` (`RecordIo::crash_states`) enumerates:
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
//! Every primitive makes the file's data durable before its commit point
//! and syncs the directory after it (except [`StateDir::write_unsynced`],
//! which promises nothing after a power cut), so by rules 1 and 2 a reader
//! after a power cut sees the old state or the whole new one, and every
//! call that returned `Ok` survives. Every write, sync, rename, link,
//! mkdir, truncate and remove goes through one internal I/O seam; with the
//! `testing` feature it is public (`IoBackend`, `StateOptions::io`), which
//! is what lets tests fail the Nth call ([`Error::OutcomeUnknown`] or
//! nothing visible, for every N) and replay every power cut these rules
//! allow. The recorder models named files only (it makes no file without
//! a name, so the store renames named temps under it); files published
//! from no name (below) are replayed at the block level, on a real kernel
//! (`scripts/block-crash`).
//!
//! ## Publish orders: one flush or two
//!
//! A new file ([`StateDir::create_new`], [`StateDir::create_new_batch`], and
//! so every message and event) is published in one of two orders, chosen
//! once per [`StateDir`] from the root's filesystem:
//!
//! - **File, then directory**, on every filesystem: write the temp, `fsync`
//!   it (data, size and allocation durable), publish it, `fsync` the
//!   directory (the name durable). Two cache flushes. Before the call
//!   returns the name may be durable or not; whenever it is, the data is.
//! - **Write-back, then directory**, only on XFS and on ext4 with a
//!   journal: write the file, `sync_file_range(WAIT_BEFORE | WRITE |
//!   WAIT_AFTER)` (data written to the disk, no cache flush), publish it,
//!   `fsync` the directory. One cache flush. These filesystems commit their
//!   journal in order and flush the disk cache before each commit block, so
//!   the first commit that carries the new name comes after the data's
//!   writes completed, flushes them, and commits the file's allocation and
//!   size with it: the name is never durable without the whole data. A
//!   batch first starts every file's writes (`sync_file_range(WRITE)`),
//!   then waits for each, so that they are in flight together. The file
//!   is written with no name (`O_TMPFILE`) and published by one `linkat`,
//!   which sets its link count and adds its name in one journal
//!   transaction: the directory changes once per file, not three times (a
//!   temp's name made, renamed and removed), and a failed step or a crash
//!   leaves nothing behind (the kernel frees a file that never got a
//!   name). The link is `linkat(AT_EMPTY_PATH)` where the kernel allows
//!   it (Linux 6.10 and later, or `CAP_DAC_READ_SEARCH`), else through
//!   the descriptor's `/proc/self/fd` link. Where `O_TMPFILE` or
//!   `/proc/self/fd` is missing, a named temp is renamed instead.
//!
//! The order is detected with `statfs` (XFS; ext4 whose
//! `/sys/fs/ext4/{device}/journal_task` names a journal thread) and falls
//! back to file-then-directory whenever the answer is uncertain.
//!
//! Without a journal both flushes are needed. A disk that caches writes may
//! reach the platter in any order between two flushes, and once a name is
//! in the directory's page cache the kernel may write it back at any
//! moment; so the data must be flushed before the rename (else a power cut
//! can leave the name on a partial file, which peers reading the seed
//! layout would take as a message), and the name must be flushed before the
//! call returns (else a returned send can vanish). Files with no name
//! (`O_TMPFILE` and `linkat`) are not used in this order: on ext4 without
//! a journal the directory's sync can make the name durable before the
//! inode's link count, which leaves a name `e2fsck` must repair. A named
//! temp, synced before its rename, has its link count already.
//!
//! **Batches.** [`StateDir::create_new_batch`] keeps every guarantee above
//! for each file and shares the waiting: it writes every temp first (from
//! 16 files on, under the write-back order, on two threads: the caller's
//! and one the process keeps; a failure is still the first failing
//! file's, and removes every temp), makes
//! all of them durable in one round (an `fsync` of each, up to 64 at a time
//! on the store's sync threads, which a process starts on its first batch
//! and keeps; or every write-back started, then each waited for), then
//! publishes each (a rename, or a link), then syncs
//! each distinct directory once, concurrently. A batch of N files in one
//! directory costs two rounds of waiting, not N + 1. A failed sync in the
//! first round removes every temp and returns a plain error: nothing is
//! published, and a retry starts over. When the batch returns `Ok`, every
//! file it reported [`Created::New`] survives a power cut, whole; a power
//! cut before it returns leaves each file whole or absent.
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
//! - [`StateDir::write_unsynced`] creates missing directories without a
//!   sync, so after a power cut they may be gone with the cache files in
//!   them. A durable write that later finds such a directory syncs the
//!   directory, not its parent: on a journalled filesystem that sync
//!   commits the directory's creation too (the journal commits in order),
//!   but on ext4 without a journal the file may be lost with its directory.
//!   Keep durable files out of directories that only caches make. (mail
//!   makes its `.gate/` folders and the reply index's `replies/{id}/` this
//!   way; the index is a cache of the response files, and a lost marker is
//!   found again from them.)
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
//! # The boundary
//!
//! This crate is the only one that touches the filesystem, and the
//! compiler checks it: the workspace's `clippy.toml` disallows `std::fs`,
//! `File`, `OpenOptions`, `DirBuilder` and `Path`'s filesystem methods, and
//! only this crate allows them. Other crates reach files through
//! [`StateDir`] (inside the root) or, for a file a user names on the
//! command line (a message body, a token, where to look for a root),
//! [`StateDir::read_outside`] and [`StateDir::stat_outside`], which follow symlinks as any
//! program reading a user's file does. A test or bench that must plant or
//! read a file raw says why in an `allow`.
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

// One `unsafe` call, `sync_file_range` in backend.rs, which neither std nor
// rustix exposes (and, in backend.rs's tests, `cachestat`, to read the page
// cache's dirty count); everything else is safe.
#![deny(unsafe_code)]
// This crate is the filesystem boundary: the root `clippy.toml` forbids
// `std::fs` and `Path`'s filesystem methods in every other crate.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "the store is the one crate that touches the filesystem"
)]

// The crate's own name, for the docs `define_id!` writes: they link to
// `chipset_store::Error::InvalidId`, which must resolve here as in every
// crate that invokes the macro.
extern crate self as chipset_store;

mod atomic;
mod backend;
mod canonical;
mod error;
mod escape;
mod id;
mod lock;
mod log;
mod path;
mod quarantine;
mod read;
mod repair;
mod scratch;
mod sortable;
mod stat;
mod state;
mod sync_pool;
mod time;
mod watch;

/// Helpers the store's unit tests share.
#[cfg(test)]
pub(crate) mod test_support {
    /// Makes a FIFO at `path`: a file no read may block on.
    pub(crate) fn make_fifo(path: impl AsRef<std::path::Path>) {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path.as_ref(),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
    }
}

pub use atomic::batch::Created;
#[cfg(feature = "testing")]
pub use backend::{IoBackend, RealIo, SharedIo, SyncOrder};
pub use error::{Classify, Error, ErrorKind, Result};
pub use escape::EscapeAlphabet;
pub use id::{AgentId, TaskId};
pub use lock::{Decision, LockGuard};
pub use log::{BadLine, JsonLog, LogContents};
pub use path::{Segment, StatePath};
pub use read::{CorruptReason, Corruption, Listing, ReadOutcome, Unsupported};
pub use repair::{Action, Defect, DoctorMode, Finding, Report};
pub use scratch::ScratchFile;
pub use sortable::SortableId;
pub use stat::Stat;
pub use state::{Channel, Folder, StateDir, StateOptions};
pub use time::{Clock, ManualClock, SystemClock, Timestamp};
pub use watch::{WatchConfig, WatchTarget, WatchWake, Watcher};

#[doc(hidden)]
pub mod __private {
    pub use serde;

    pub use crate::id::validate_segment;

    /// Seals [`Segment`](crate::Segment): only the store and its
    /// `define_id!` implement it.
    pub trait Sealed {}
}
