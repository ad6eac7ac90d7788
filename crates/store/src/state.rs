//! The state root and its channel directories.

use std::fs::{self, File};
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::atomic::{self, Created, move_entry, sync_dir_with};
use crate::backend::{IoBackend, RealIo, SharedIo, SyncOrder};
use crate::error::{Error, Result};
use crate::lock::{Decision, Lock, update_locked_with};
use crate::locked::Locked;
use crate::log::JsonLog;
use crate::path::StatePath;
use crate::read::{DEFAULT_READ_CAP, ReadOutcome, open_nofollow, parse_json, read_open_file};
use crate::scratch::ScratchFile;
use crate::stat::Stat;
use crate::time::{SharedClock, SystemClock, Timestamp};

/// The default state root, relative to the working directory.
pub const DEFAULT_ROOT: &str = ".chipset/state";

/// The name of the folder that [`StateDir::quarantine`] moves bad files into.
pub const QUARANTINE_DIR: &str = ".quarantine";

/// A channel's subdirectory of the state root: an opaque, validated name.
///
/// The store does not know which channels exist: each channel crate owns
/// its constant (`chipset_hook::HOOK_CHANNEL`, `chipset_mail::MAIL_CHANNEL`,
/// …), and whoever needs every channel (the facade's `chipset::CHANNELS`)
/// lists them. A name is 1 to [`Channel::MAX_LEN`] bytes of lowercase ASCII
/// letters, digits, `-` and `_`, starting with a letter: always one safe
/// directory name.
///
/// ```
/// use chipset_store::Channel;
/// const REVIEWS: Channel = Channel::new("reviews");
/// assert_eq!(REVIEWS.as_str(), "reviews");
/// assert!(Channel::try_new("../etc").is_err());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Channel(&'static str);

impl Channel {
    /// The longest channel name accepted, in bytes.
    pub const MAX_LEN: usize = 32;

    /// The kind of name, as named in errors.
    pub const KIND: &'static str = "channel name";

    /// Wraps `name`, checked at compile time when used in a `const`.
    ///
    /// # Panics
    ///
    /// When `name` breaks the rule (see [`Channel`]); in a `const` item that
    /// is a compile error. For a name not known when compiling, use
    /// [`Channel::try_new`].
    pub const fn new(name: &'static str) -> Channel {
        match channel_rule(name) {
            None => Channel(name),
            Some(_) => panic!("invalid channel name: see chipset_store::Channel for the rule"),
        }
    }

    /// Wraps `name` if it is a valid channel name.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidId`] naming the value and the broken rule.
    pub fn try_new(name: &'static str) -> Result<Channel> {
        match channel_rule(name) {
            None => Ok(Channel(name)),
            Some(rule) => Err(Error::InvalidId {
                kind: Self::KIND,
                value: name.to_owned(),
                rule,
            }),
        }
    }

    /// Returns the name, which is also the directory's name.
    pub const fn as_str(self) -> &'static str {
        self.0
    }
}

impl std::fmt::Display for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Channel({:?})", self.0)
    }
}

/// The rule a channel name breaks, if any.
const fn channel_rule(name: &str) -> Option<&'static str> {
    let bytes = name.as_bytes();
    if bytes.is_empty() {
        return Some("must not be empty");
    }
    if bytes.len() > Channel::MAX_LEN {
        return Some("must be at most 32 bytes");
    }
    if !bytes[0].is_ascii_lowercase() {
        return Some("must start with a lowercase ASCII letter");
    }
    let mut i = 1;
    while i < bytes.len() {
        let b = bytes[i];
        if !(b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_') {
            return Some("must be lowercase ASCII letters, digits, `-` and `_`");
        }
        i += 1;
    }
    None
}

/// How a [`StateDir`] is opened.
#[derive(Debug, Clone)]
pub struct StateOptions {
    /// Where time comes from.
    pub clock: SharedClock,
    /// The largest state file a typed read accepts.
    pub read_cap: u64,
    /// The I/O seam every change goes through ([`RealIo`] by default).
    pub io: SharedIo,
}

impl Default for StateOptions {
    fn default() -> Self {
        StateOptions {
            clock: Arc::new(SystemClock),
            read_cap: DEFAULT_READ_CAP,
            io: RealIo::shared(),
        }
    }
}

/// The state root: every channel's files live below it, and every
/// filesystem change goes through it.
///
/// Cheap to clone (the clones share one root and clock). Its methods check
/// that paths lie inside the root and that no directory on the way is a
/// symlink, create directories on demand (syncing their parents, so a new
/// directory survives a crash with the file in it), and apply the read cap.
///
/// ```
/// use chipset_store::{Channel, StateDir};
/// const HOOKS: Channel = Channel::new("hooks");
/// let tmp = tempfile::tempdir()?;
/// let state = StateDir::open(tmp.path().join("state"))?;
/// let hooks = state.channel_dir(HOOKS)?;
/// state.write_json(&hooks.join_static("polecat-alpha.json"), &serde_json::json!({"status": "empty"}))?;
/// let read = state.read_json::<serde_json::Value>(&hooks.join_static("polecat-alpha.json"))?;
/// assert_eq!(read.value().unwrap()["status"], "empty");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct StateDir {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    root: PathBuf,
    /// The root, opened once, for reads that resolve beneath it in one call.
    root_fd: OwnedFd,
    clock: SharedClock,
    read_cap: u64,
    io: SharedIo,
    /// How new files under the root are made durable, asked of `io` once.
    sync_order: SyncOrder,
}

impl StateDir {
    /// Opens (creating if needed) the state root at `root`, on the system clock.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the root cannot be created or resolved.
    pub fn open(root: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(root, StateOptions::default())
    }

    /// Opens (creating if needed) the state root at `root` with `options`.
    /// The root itself may be reached through a symlink; nothing below it is.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the root cannot be created or resolved.
    pub fn open_with(root: impl AsRef<Path>, options: StateOptions) -> Result<Self> {
        let root = root.as_ref();
        fs::create_dir_all(root).map_err(|e| Error::io("create state root", root, e))?;
        Self::open_existing_with(root, options)
    }

    /// Opens the state root at `root` only if it exists: for readers, to
    /// which a mistyped root must not look like an empty, healthy one.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] when there is no directory at `root`;
    /// [`Error::NotADirectory`] when something else is there; [`Error::Io`].
    pub fn open_existing_with(root: impl AsRef<Path>, options: StateOptions) -> Result<Self> {
        let root = root.as_ref();
        match fs::metadata(root) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(Error::NotADirectory {
                    path: root.to_owned(),
                });
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(Error::NotFound {
                    path: root.to_owned(),
                });
            }
            Err(e) => return Err(Error::io("open state root", root, e)),
        }
        let root = fs::canonicalize(root).map_err(|e| Error::io("resolve state root", root, e))?;
        let root_fd = rustix::fs::open(
            &root,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(|e| Error::io("open state root", &root, e.into()))?;
        let sync_order = options.io.sync_order(&root);
        Ok(StateDir {
            inner: Arc::new(Inner {
                root,
                root_fd,
                clock: options.clock,
                read_cap: options.read_cap,
                io: options.io,
                sync_order,
            }),
        })
    }

    /// Returns the (resolved) root.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// Returns the clock.
    pub fn clock(&self) -> &SharedClock {
        &self.inner.clock
    }

    /// Returns the current time on the clock.
    pub fn now(&self) -> Timestamp {
        self.inner.clock.now()
    }

    /// Returns the I/O backend every change goes through.
    pub fn io(&self) -> &SharedIo {
        &self.inner.io
    }

    fn backend(&self) -> &dyn IoBackend {
        &*self.inner.io
    }

    /// Returns how new files under the root are made durable: what the I/O
    /// backend said of the root's filesystem when it was opened (see
    /// [`SyncOrder`] and the crate docs, Durability).
    pub fn sync_order(&self) -> SyncOrder {
        self.inner.sync_order
    }

    /// Returns the read cap.
    pub fn read_cap(&self) -> u64 {
        self.inner.read_cap
    }

    /// Returns a channel's directory, without creating it, as a
    /// [`StatePath`]: the one way to start one, and so the one way to name
    /// a path under the root that cannot be outside it.
    pub fn channel(&self, channel: Channel) -> StatePath {
        StatePath::from_checked(self.inner.root.join(channel.as_str()))
    }

    /// Returns the root itself as a [`StatePath`]: for a folder that has a
    /// channel's layout at its top rather than in a channel's directory
    /// (mail's seed folder, `chipset_mail::Mail::in_folder`). Names joined to
    /// it are checked like any other, so it reaches nothing outside the
    /// root; the root itself is no file to write (a write to it is
    /// [`Error::OutsideRoot`]).
    pub fn root_path(&self) -> StatePath {
        StatePath::from_checked(self.inner.root.clone())
    }

    /// Returns a channel's directory ([`StateDir::channel`]), creating it
    /// if needed: for a writer that wants the directory there before it
    /// joins names to it. A reader uses [`StateDir::channel`], which creates
    /// nothing.
    ///
    /// # Errors
    ///
    /// As [`StateDir::ensure_dir`].
    pub fn channel_dir(&self, channel: Channel) -> Result<StatePath> {
        let dir = self.channel(channel);
        self.ensure_dir(&dir)?;
        Ok(dir)
    }

    fn relative<'a>(&self, path: &'a Path) -> Result<&'a Path> {
        let rel = path
            .strip_prefix(&self.inner.root)
            .map_err(|_| self.outside(path))?;
        if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
            return Err(self.outside(path));
        }
        Ok(rel)
    }

    fn outside(&self, path: &Path) -> Error {
        Error::OutsideRoot {
            path: path.to_owned(),
            root: self.inner.root.clone(),
        }
    }

    /// Creates `dir` and any missing parents below the root, refusing symlinks
    /// and non-directories on the way. Each directory it creates is made durable
    /// by syncing its parent. On failure, the directories this call created
    /// are removed again.
    ///
    /// # Errors
    ///
    /// [`Error::OutsideRoot`], [`Error::Symlink`], [`Error::NotADirectory`], or [`Error::Io`].
    pub fn ensure_dir(&self, dir: &StatePath) -> Result<()> {
        let dir = dir.as_path();
        self.ensure_dir_tracked(dir).map(drop)
    }

    /// As [`StateDir::ensure_dir`], returning the directories it created, top down.
    fn ensure_dir_tracked(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        let rel = self.relative(dir)?;
        let io = self.backend();
        let mut made = Vec::new();
        let mut cur = self.inner.root.clone();
        for part in rel.components() {
            let parent = cur.clone();
            cur.push(part);
            let step = match is_real_dir(&cur) {
                Ok(true) => continue,
                Ok(false) => match io.create_dir(&cur) {
                    Ok(()) => {
                        made.push(cur.clone());
                        sync_dir_with(io, &parent)
                    }
                    // Another process made it first: check what it made, and sync
                    // the parent in case that process died before it could.
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => match is_real_dir(&cur) {
                        Ok(true) => sync_dir_with(io, &parent),
                        // Made and removed again meanwhile: not ours to guess at.
                        Ok(false) => Err(Error::NotADirectory { path: cur.clone() }),
                        Err(e) => Err(e),
                    },
                    Err(e) => Err(Error::io("create directory", &cur, e)),
                },
                Err(e) => Err(e),
            };
            if let Err(e) = step {
                self.roll_back_dirs(&made);
                return Err(e);
            }
        }
        Ok(made)
    }

    /// Removes directories [`StateDir::ensure_dir_tracked`] made for an
    /// operation that then failed before its commit point, deepest first, so a
    /// failure leaves no new empty directory. One that is not empty (another
    /// process already put something there) stays.
    fn roll_back_dirs(&self, made: &[PathBuf]) {
        for dir in made.iter().rev() {
            if self.backend().remove_dir(dir).is_err() {
                break;
            }
        }
    }

    /// Runs `op` after creating `path`'s parent; if `op` fails before its
    /// commit point, removes the directories made for it.
    fn with_parent<R>(
        &self,
        path: &Path,
        op: impl FnOnce(&dyn IoBackend) -> Result<R>,
    ) -> Result<R> {
        let parent = path.parent().ok_or_else(|| self.outside(path))?;
        let made = self.ensure_dir_tracked(parent)?;
        op(self.backend()).inspect_err(|e| {
            if !e.is_outcome_unknown() {
                self.roll_back_dirs(&made);
            }
        })
    }

    /// Checks that the directories from the root down to `path`'s parent are
    /// real directories (or missing), not symlinks. Returns false when one is missing.
    ///
    /// # Errors
    ///
    /// [`Error::OutsideRoot`], [`Error::Symlink`], [`Error::NotADirectory`], or [`Error::Io`].
    pub fn check_parents(&self, path: &StatePath) -> Result<bool> {
        self.parents_ok(path.as_path())
    }

    /// [`StateDir::check_parents`] on a path the store derived itself (a
    /// parent, a quarantine folder).
    pub(crate) fn parents_ok(&self, path: &Path) -> Result<bool> {
        let rel = self.relative(path)?;
        let mut cur = self.inner.root.clone();
        let parts: Vec<_> = rel.components().collect();
        for part in parts.iter().take(parts.len().saturating_sub(1)) {
            cur.push(part);
            if !is_real_dir(&cur)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn ensure_parent(&self, path: &Path) -> Result<()> {
        match path.parent() {
            Some(p) => self.ensure_dir_tracked(p).map(drop),
            None => Err(self.outside(path)),
        }
    }

    /// Durably replaces `path` with `bytes`: a synced temp beside it, renamed
    /// over it, then the directory synced;
    /// a reader sees the old contents or the new, never a mix.
    /// **Commit point:** the rename over `path`; a failure before it leaves
    /// no new directory either.
    ///
    /// # Errors
    ///
    /// As [`StateDir::ensure_dir`]; [`Error::Symlink`] when `path` is a symlink
    /// (it is left alone); [`Error::Io`] or [`Error::Rename`] when a step
    /// before the commit point fails, leaving `path` unchanged;
    /// [`Error::OutcomeUnknown`] when the final directory sync fails: the new
    /// contents are in place but not known to be durable.
    pub fn write_bytes(&self, path: &StatePath, bytes: &[u8]) -> Result<()> {
        let path = path.as_path();
        self.with_parent(path, |io| atomic::write_atomic_with(io, path, bytes))
    }

    /// Replaces `path` with `bytes` **without syncing anything**: for caches
    /// that validate themselves and are rebuilt when wrong (a temp
    /// renamed over it). A reader sees the old
    /// file or the whole new one; after a power cut the file may be old,
    /// missing, empty or partly written.
    ///
    /// # Errors
    ///
    /// As [`StateDir::ensure_dir`]; [`Error::Symlink`] when `path` is a
    /// symlink; [`Error::Io`] or [`Error::Rename`] when a step fails (`path` is
    /// unchanged).
    pub fn write_unsynced(&self, path: &StatePath, bytes: &[u8]) -> Result<()> {
        let path = path.as_path();
        self.with_parent(path, |io| atomic::write_unsynced_with(io, path, bytes))
    }

    /// Lists the names in `dir` with their inode numbers, as
    /// [`StateDir::list`] would list them (dot-names skipped, sorted by
    /// name), entries of every type. The inode number comes from the
    /// directory listing itself (no `stat` per entry): a name replaced by a
    /// rename gets a new one. A missing directory lists as empty.
    ///
    /// # Errors
    ///
    /// As [`StateDir::list`].
    pub fn list_inodes(&self, dir: &StatePath) -> Result<Vec<(String, u64)>> {
        use std::os::unix::fs::DirEntryExt;
        let mut out = Vec::new();
        self.walk(dir.as_path(), |name, entry| {
            out.push((name, entry.ino()));
            Ok::<(), Error>(())
        })?;
        out.sort_unstable();
        Ok(out)
    }

    /// Lists the names in `dir` with each entry's [`Stat`], as
    /// [`StateDir::list`] would list them (dot-names skipped, sorted by
    /// name), entries of every type. Each entry is stat-ed relative to the
    /// open directory, without following a symlink: one `statx` per entry,
    /// no path resolved again (a third of what [`StateDir::stat`] costs per
    /// file). An entry gone between the listing and its stat comes with
    /// `None`. A missing directory lists as empty.
    ///
    /// # Errors
    ///
    /// As [`StateDir::list`], and [`Error::Io`] when an entry cannot be
    /// stat-ed for another reason than being gone.
    pub fn list_stats(&self, dir: &StatePath) -> Result<Vec<(String, Option<Stat>)>> {
        let dir = dir.as_path();
        let mut out = Vec::new();
        self.walk(dir, |name, entry| {
            // `DirEntry::metadata` is `statx(dirfd, name, AT_SYMLINK_NOFOLLOW)`.
            let stat = match entry.metadata() {
                Ok(meta) => Some(Stat::from_metadata(&meta)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                Err(e) => return Err(Error::io("stat", dir.join(&name), e)),
            };
            out.push((name, stat));
            Ok(())
        })?;
        out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Durably replaces `path` with the canonical JSON of `value`.
    ///
    /// # Errors
    ///
    /// As [`StateDir::write_bytes`], plus [`Error::Serialize`].
    pub fn write_json<T: Serialize + ?Sized>(&self, path: &StatePath, value: &T) -> Result<()> {
        let bytes = atomic::to_json_bytes(path.as_path(), value)?;
        self.write_bytes(path, &bytes)
    }

    /// Durably publishes `bytes` under `path`, which must not exist: a synced temp,
    /// renamed into place without replacing anything, then the directory synced.
    /// **Commit point:** the no-replace rename to `path`; a failure before it
    /// leaves nothing visible: no file, no temp a reader sees, no new directory.
    ///
    /// # Errors
    ///
    /// [`Error::AlreadyExists`] when it does; [`Error::OutcomeUnknown`] when
    /// the sync after the commit point fails; otherwise as [`StateDir::write_bytes`].
    pub fn create_new(&self, path: &StatePath, bytes: &[u8]) -> Result<()> {
        let path = path.as_path();
        let order = self.inner.sync_order;
        self.with_parent(path, |io| atomic::create_new_with(io, order, path, bytes))
    }

    /// Durably publishes the canonical JSON of `value` under `path`, which must not exist.
    ///
    /// # Errors
    ///
    /// As [`StateDir::create_new`], plus [`Error::Serialize`].
    pub fn create_new_json<T: Serialize + ?Sized>(
        &self,
        path: &StatePath,
        value: &T,
    ) -> Result<()> {
        let bytes = atomic::to_json_bytes(path.as_path(), value)?;
        self.create_new(path, &bytes)
    }

    /// Publishes many new files sharing the directory syncs: every temp
    /// written, synced together, each renamed into place without replacing,
    /// each directory synced once (see the crate docs, Batches); **commit
    /// point:** each file's own no-replace rename.
    /// A failure before any file is published leaves no new directory.
    ///
    /// # Errors
    ///
    /// As [`StateDir::ensure_dir`]; [`Error::Io`] or [`Error::Rename`] when a
    /// step fails before any file was published (nothing is visible, every temp
    /// is removed); [`Error::OutcomeUnknown`] when a step fails after at least
    /// one file was published: those stay published, each whole, and a retry of
    /// the same batch reports them [`Created::AlreadyExists`] and publishes the
    /// rest.
    pub fn create_new_batch(&self, items: &[(StatePath, Vec<u8>)]) -> Result<Vec<Created>> {
        let mut seen: Vec<&Path> = Vec::new();
        let mut made = Vec::new();
        for (path, _) in items {
            let path = path.as_path();
            let parent = path.parent().ok_or_else(|| self.outside(path))?;
            if !seen.contains(&parent) {
                match self.ensure_dir_tracked(parent) {
                    Ok(m) => made.extend(m),
                    Err(e) => {
                        self.roll_back_dirs(&made);
                        return Err(e);
                    }
                }
                seen.push(parent);
            }
        }
        atomic::create_new_batch_with(self.backend(), self.inner.sync_order, items).inspect_err(
            |e| {
                if !e.is_outcome_unknown() {
                    self.roll_back_dirs(&made);
                }
            },
        )
    }

    /// Durably moves `from` to `to` without replacing: both directories synced, the
    /// destination's first; of two racing movers exactly one succeeds,
    /// creating `to`'s directory if needed. **Commit point:** the rename.
    ///
    /// # Errors
    ///
    /// As [`StateDir::ensure_dir`]; [`Error::NotFound`] when `from` does not
    /// exist; [`Error::AlreadyExists`] when `to` does; [`Error::Symlink`] when
    /// `from` is a symlink; [`Error::Rename`] for other failures before the
    /// commit point (nothing moved); [`Error::OutcomeUnknown`] when a directory
    /// sync after it fails.
    pub fn move_noclobber(&self, from: &StatePath, to: &StatePath) -> Result<()> {
        let from = from.as_path();
        let to = to.as_path();
        self.parents_ok(from)?;
        self.with_parent(to, |io| atomic::move_noclobber_with(io, from, to))
    }

    /// Opens `path` for reading with no symlink anywhere below the root.
    ///
    /// One `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` from the root's
    /// descriptor resolves the whole path, so a read costs what a plain open
    /// does. Where the kernel lacks `openat2` (before Linux 5.6, or a sandbox
    /// that filters it) the directories are checked one by one instead.
    fn open_beneath(&self, path: &Path) -> Result<Option<File>> {
        use rustix::fs::{Mode, OFlags, ResolveFlags};
        use rustix::io::Errno;
        let rel = self.relative(path)?;
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS;
        match rustix::fs::openat2(&self.inner.root_fd, rel, flags, Mode::empty(), resolve) {
            Ok(fd) => Ok(Some(File::from(fd))),
            Err(Errno::NOENT) => Ok(None),
            Err(Errno::LOOP) => Err(Error::Symlink {
                path: path.to_owned(),
            }),
            Err(Errno::NOTDIR) => Err(Error::NotADirectory {
                path: path.to_owned(),
            }),
            Err(Errno::XDEV) => Err(self.outside(path)),
            // No openat2 here, or a retry-worthy race: take the slow, checked path.
            Err(Errno::NOSYS | Errno::PERM | Errno::AGAIN | Errno::INVAL) => {
                self.open_checked(path)
            }
            Err(e) => Err(Error::io("open", path, e.into())),
        }
    }

    /// The fallback of [`StateDir::open_beneath`]: checks each directory with
    /// `lstat`, then opens the last component without following it.
    fn open_checked(&self, path: &Path) -> Result<Option<File>> {
        if !self.parents_ok(path)? {
            return Ok(None);
        }
        open_nofollow(path)
    }

    /// Returns what is at `path` without following a symlink there (a
    /// symlink is [`EntryKind::Symlink`](crate::EntryKind::Symlink)), or
    /// `None` when nothing is: a stat with the root and symlink checks of
    /// every other method, for existence checks, directory stamps and sizes.
    ///
    /// One `openat2(O_PATH | O_NOFOLLOW, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`
    /// from the root's descriptor and an `fstat`; where the kernel lacks
    /// `openat2`, the directories are checked one by one and the entry is
    /// `lstat`ed.
    ///
    /// # Errors
    ///
    /// [`Error::Symlink`] when a directory below the root on the way is a
    /// symlink; [`Error::NotADirectory`] when a file stands where one is;
    /// [`Error::OutsideRoot`]; [`Error::Io`] when it cannot be looked at
    /// (permission denied is an error, never "not there").
    pub fn stat(&self, path: &StatePath) -> Result<Option<Stat>> {
        self.stat_at(path.as_path())
    }

    /// [`StateDir::stat`] on a path the store derived itself.
    fn stat_at(&self, path: &Path) -> Result<Option<Stat>> {
        use rustix::fs::{Mode, OFlags, ResolveFlags};
        use rustix::io::Errno;
        let rel = self.relative(path)?;
        let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS;
        let fd = match rustix::fs::openat2(&self.inner.root_fd, rel, flags, Mode::empty(), resolve)
        {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(Errno::LOOP) => {
                return Err(Error::Symlink {
                    path: path.to_owned(),
                });
            }
            Err(Errno::NOTDIR) => {
                return Err(Error::NotADirectory {
                    path: path.to_owned(),
                });
            }
            Err(Errno::XDEV) => return Err(self.outside(path)),
            Err(Errno::NOSYS | Errno::PERM | Errno::AGAIN | Errno::INVAL) => {
                return self.stat_checked(path);
            }
            Err(e) => return Err(Error::io("stat", path, e.into())),
        };
        let meta = File::from(fd)
            .metadata()
            .map_err(|e| Error::io("stat", path, e))?;
        Ok(Some(Stat::from_metadata(&meta)))
    }

    /// The fallback of [`StateDir::stat`]: checks each directory, then
    /// `lstat`s the entry.
    fn stat_checked(&self, path: &Path) -> Result<Option<Stat>> {
        if !self.parents_ok(path)? {
            return Ok(None);
        }
        match fs::symlink_metadata(path) {
            Ok(meta) => Ok(Some(Stat::from_metadata(&meta))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("stat", path, e)),
        }
    }

    /// Returns true when something (of any kind, a symlink included) is at
    /// `path`, false when nothing is.
    ///
    /// # Errors
    ///
    /// As [`StateDir::stat`]: a path that cannot be looked at is an error,
    /// never "not there".
    pub fn exists(&self, path: &StatePath) -> Result<bool> {
        Ok(self.stat(path)?.is_some())
    }

    /// Reads `path` (bounded by the read cap). `path` is a [`StatePath`];
    /// a bare path does not compile:
    ///
    /// ```compile_fail
    /// # use chipset_store::StateDir;
    /// # let tmp = tempfile::tempdir().unwrap();
    /// # let state = StateDir::open(tmp.path()).unwrap();
    /// let outside = std::path::Path::new("/etc/passwd");
    /// let _ = state.read_bytes(outside);
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Symlink`] when `path` or a directory below the root on the way
    /// is a symlink; [`Error::OutsideRoot`]; [`Error::Io`]. An oversized or
    /// non-regular file is `Ok(ReadOutcome::Corrupt(..))`.
    pub fn read_bytes(&self, path: &StatePath) -> Result<ReadOutcome<Vec<u8>>> {
        let path = path.as_path();
        match self.open_beneath(path)? {
            Some(file) => read_open_file(file, path, self.inner.read_cap),
            None => Ok(ReadOutcome::Missing),
        }
    }

    /// Reads `path` as [`StateDir::read_bytes`] does, bounded by `cap`
    /// instead of the read cap: for files that are larger by design (a
    /// cache, an index).
    ///
    /// # Errors
    ///
    /// As [`StateDir::read_bytes`].
    pub fn read_bytes_capped(&self, path: &StatePath, cap: u64) -> Result<ReadOutcome<Vec<u8>>> {
        let path = path.as_path();
        match self.open_beneath(path)? {
            Some(file) => read_open_file(file, path, cap),
            None => Ok(ReadOutcome::Missing),
        }
    }

    /// Reads and parses `path` as JSON (bounded by the read cap).
    ///
    /// # Errors
    ///
    /// As [`StateDir::read_bytes`]; unparsable JSON or the wrong shape is
    /// `Ok(ReadOutcome::Corrupt(..))`.
    pub fn read_json<T: DeserializeOwned>(&self, path: &StatePath) -> Result<ReadOutcome<T>> {
        Ok(self
            .read_bytes(path)?
            .and_then(|bytes| parse_json(path.as_path(), &bytes)))
    }

    /// Lists the names in `dir` that do not start with a dot (temp, lock and
    /// quarantine entries do), sorted. A missing directory lists as empty.
    ///
    /// # Errors
    ///
    /// [`Error::Symlink`] when `dir` or a parent is a symlink; [`Error::Io`].
    pub fn list(&self, dir: &StatePath) -> Result<Vec<String>> {
        let dir = dir.as_path();
        self.list_where(dir, |_| true)
    }

    /// Lists the real subdirectories of `dir` (not symlinks, not files) whose
    /// names do not start with a dot, sorted. A missing directory lists as empty.
    ///
    /// # Errors
    ///
    /// As [`StateDir::list`].
    pub fn list_dirs(&self, dir: &StatePath) -> Result<Vec<String>> {
        let dir = dir.as_path();
        self.list_where(dir, |ft| ft.is_dir())
    }

    /// Returns whether anything (of any kind) is at `.quarantine` in `dir`,
    /// the folder [`StateDir::quarantine`] moves bad files into, which no
    /// [`StatePath`] can name.
    ///
    /// # Errors
    ///
    /// As [`StateDir::stat`].
    pub fn has_quarantine(&self, dir: &StatePath) -> Result<bool> {
        Ok(self.stat_at(&dir.as_path().join(QUARANTINE_DIR))?.is_some())
    }

    /// Lists what [`StateDir::quarantine`] moved aside in `dir` (the names
    /// in its `.quarantine/` folder, which no [`StatePath`] can name),
    /// sorted, or `None` when there is no such folder: for a reader that
    /// must not pass while a repair left something there (mail's commit
    /// gate).
    ///
    /// # Errors
    ///
    /// As [`StateDir::list`]: [`Error::Symlink`] or [`Error::NotADirectory`]
    /// when `.quarantine` is a symlink or not a directory.
    pub fn list_quarantine(&self, dir: &StatePath) -> Result<Option<Vec<String>>> {
        let qdir = dir.as_path().join(QUARANTINE_DIR);
        if self.stat_at(&qdir)?.is_none() {
            return Ok(None);
        }
        self.list_where(&qdir, |_| true).map(Some)
    }

    /// Hands each name in `dir` that [`StateDir::list`] would list to
    /// `each`, in the directory's own order (not sorted), without collecting
    /// them: memory stays flat however many entries the directory holds. A
    /// missing directory has no names. An error from `each` stops the walk
    /// and is returned.
    ///
    /// # Errors
    ///
    /// As [`StateDir::list`], and whatever `each` returns.
    pub fn for_each_name<E: From<Error>>(
        &self,
        dir: &StatePath,
        mut each: impl FnMut(String) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        self.walk(dir.as_path(), |name, _| each(name))
    }

    /// Returns a new scratch file in `dir` for a reader's working data (the
    /// sorted runs of a doctor's scan, say), open for reading and writing.
    /// It has no name (`O_TMPFILE`; where the filesystem lacks it, a temp
    /// name unlinked at once), so it is gone when its last handle closes,
    /// crash or not, and is never synced: scratch data, not state.
    ///
    /// # Errors
    ///
    /// [`Error::Symlink`] when `dir` or a parent is a symlink; [`Error::Io`]
    /// when the file cannot be created.
    pub fn scratch_file(&self, dir: &StatePath) -> Result<ScratchFile> {
        let dir = dir.as_path();
        use rustix::fs::{Mode, OFlags};
        self.parents_ok(dir)?;
        atomic::refuse_symlink(dir)?;
        match rustix::fs::open(
            dir,
            OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        ) {
            Ok(fd) => return Ok(ScratchFile::new(File::from(fd), dir)),
            // Not supported here: fall back to a named temp, unlinked at once.
            Err(e)
                if e == rustix::io::Errno::OPNOTSUPP
                    || e == rustix::io::Errno::ISDIR
                    || e == rustix::io::Errno::INVAL => {}
            Err(e) => return Err(Error::io("create scratch file", dir, e.into())),
        }
        let (tmp, file) = atomic::create_temp(self.backend(), &dir.join("scratch"))?;
        self.backend()
            .remove_file(&tmp)
            .map_err(|e| Error::io("remove", &tmp, e))?;
        Ok(ScratchFile::new(file, dir))
    }

    fn list_where(&self, dir: &Path, keep: impl Fn(&fs::FileType) -> bool) -> Result<Vec<String>> {
        let mut names = Vec::new();
        self.walk(dir, |name, entry| {
            let ft = entry
                .file_type()
                .map_err(|e| Error::io("stat", entry.path(), e))?;
            if keep(&ft) {
                names.push(name);
            }
            Ok::<(), Error>(())
        })?;
        names.sort_unstable();
        Ok(names)
    }

    /// Hands `each` every visible entry of `dir` (dot-names skipped), in
    /// the directory's order, holding no listing: the one walk behind
    /// [`StateDir::list`], `list_inodes`, `list_stats` and `for_each_name`.
    /// A missing directory, or a path that is not a real directory, has no
    /// entries; a symlink on the way is an error.
    fn walk<E: From<Error>>(
        &self,
        dir: &Path,
        mut each: impl FnMut(String, &fs::DirEntry) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        if !self.parents_ok(dir)? || !is_real_dir(dir)? {
            return Ok(());
        }
        let entries = fs::read_dir(dir).map_err(|e| Error::io("list directory", dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("list directory", dir, e))?;
            if let Some(name) = visible_name(&entry) {
                each(name, &entry)?;
            }
        }
        Ok(())
    }

    /// Returns the lock guarding `path` ([`Lock::for_file`]), creating its directory.
    ///
    /// # Errors
    ///
    /// As [`StateDir::ensure_dir`].
    pub fn lock_for(&self, path: &StatePath) -> Result<Lock> {
        let path = path.as_path();
        self.ensure_parent(path)?;
        Ok(Lock::beside(path))
    }

    /// Returns the append-only log at `path`, creating its directory.
    ///
    /// # Errors
    ///
    /// As [`StateDir::ensure_dir`].
    pub fn log(&self, path: &StatePath) -> Result<JsonLog> {
        let path = path.as_path();
        self.ensure_parent(path)?;
        Ok(JsonLog::with_io(path, self.inner.io.clone()))
    }

    /// Returns the append-only log at `path` for reading, creating nothing:
    /// a reader (a doctor in check mode, a status) must not make the
    /// directory it looks in. Appends through it work once the directory
    /// exists.
    ///
    /// # Errors
    ///
    /// As [`StateDir::check_parents`]: [`Error::OutsideRoot`] when `path` is
    /// not inside the root, [`Error::Symlink`] when a directory on the way
    /// is a symlink.
    pub fn log_reader(&self, path: &StatePath) -> Result<JsonLog> {
        let path = path.as_path();
        self.parents_ok(path)?;
        if path == self.inner.root {
            return Err(self.outside(path));
        }
        Ok(JsonLog::with_io(path, self.inner.io.clone()))
    }

    /// Locked read-modify-write of `path`: `path` read as a `T`
    /// under the exclusive lock of [`Lock::for_file`](crate::Lock::for_file),
    /// `decide` chooses, and the new
    /// value is written durably. When `decide` fails nothing is written.
    ///
    /// # Errors
    ///
    /// Whatever `decide` returns, or a store error converted into `E`.
    pub fn update<T, R, E, F>(&self, path: &StatePath, decide: F) -> Result<R, E>
    where
        T: Serialize + DeserializeOwned,
        E: From<Error>,
        F: FnOnce(ReadOutcome<T>) -> Result<Decision<T, R>, E>,
    {
        let path = path.as_path();
        self.ensure_parent(path)?;
        update_locked_with(self.backend(), path, self.inner.read_cap, decide)
    }

    /// Takes the exclusive lock of `path` ([`Lock::for_file`], the one
    /// [`StateDir::update`] takes), blocking until it is free, and reads
    /// `path` as a `T` under it: a [`Locked`] for a sequence of decisions
    /// and durable writes with no other writer in between. A missing file
    /// is `current() == None`.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] when the file is there but unreadable as a `T`
    /// (it is left as it is, for a doctor to move aside); otherwise as
    /// [`StateDir::read_bytes`] and [`Lock::exclusive`]. On an error the
    /// lock is released.
    pub fn lock_json<T: DeserializeOwned>(&self, path: &StatePath) -> Result<Locked<T>> {
        let guard = self.lock_for(path)?.exclusive()?;
        let current = match self.read_json::<T>(path)? {
            ReadOutcome::Missing => None,
            ReadOutcome::Value(value) => Some(value),
            ReadOutcome::Corrupt(bad) => return Err(Error::Corrupt(bad)),
            ReadOutcome::Unsupported(newer) => return Err(Error::Unsupported(newer)),
        };
        Ok(Locked::new(self.clone(), path.clone(), current, guard))
    }

    /// Moves a bad file (or symlink, or anything else) aside into
    /// `.quarantine/` in its directory, named `{timestamp}-{name}` (with a
    /// numeric suffix if that is taken), and returns the new path. Nothing is
    /// deleted.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] when there is nothing at `path`; otherwise as
    /// [`StateDir::move_noclobber`].
    pub fn quarantine(&self, path: &StatePath) -> Result<PathBuf> {
        let path = path.as_path();
        self.parents_ok(path)?;
        let dir = path.parent().ok_or_else(|| self.outside(path))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| self.outside(path))?;
        let qdir = dir.join(QUARANTINE_DIR);
        self.ensure_dir_tracked(&qdir)?;
        let stamp = self.now().to_string().replace(':', "");
        for n in 0u32.. {
            let target = if n == 0 {
                qdir.join(format!("{stamp}-{name}"))
            } else {
                qdir.join(format!("{stamp}-{name}.{n}"))
            };
            match move_entry(self.backend(), path, &target) {
                Ok(()) => {
                    tracing::warn!(from = %path.display(), to = %target.display(), "quarantined file");
                    return Ok(target);
                }
                Err(Error::AlreadyExists { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        unreachable!("u32 suffixes exhausted")
    }

    /// Removes the entry at `path` inside the root, unsynced (only where a removed file
    /// that comes back after a power cut is harmless and removed again), and
    /// returns whether there was one.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the entry exists but cannot be removed.
    /// [`Error::Symlink`] or [`Error::OutsideRoot`] for a bad path to it.
    pub fn remove_file(&self, path: &StatePath) -> Result<bool> {
        let path = path.as_path();
        if !self.parents_ok(path)? {
            return Ok(false);
        }
        atomic::remove_file_with(self.backend(), path)
    }

    /// Returns the stale temp files (older than `max_age`) anywhere under the
    /// root, changing nothing: what [`StateDir::sweep_temps`] would remove.
    /// The paths are for showing: a temp is a dot-name, the store's own,
    /// which no [`StatePath`] can name; [`StateDir::sweep_temps`] removes them.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when a directory cannot be listed or an entry examined.
    pub fn stale_temps(&self, max_age: Duration) -> Result<Vec<PathBuf>> {
        atomic::stale_temps(&self.inner.root, max_age)
    }

    /// Returns the stale temp files (older than `max_age`) under `dir`, a
    /// directory inside the root, changing nothing: a channel's doctor
    /// looks at its own tree only. The paths are for showing;
    /// [`StateDir::sweep_temps_in`] removes them.
    ///
    /// # Errors
    ///
    /// [`Error::OutsideRoot`], [`Error::Symlink`] or [`Error::NotADirectory`]
    /// for a bad path to `dir`; otherwise [`Error::Io`] when a directory cannot
    /// be listed or an entry examined.
    pub fn stale_temps_in(&self, dir: &StatePath, max_age: Duration) -> Result<Vec<PathBuf>> {
        let dir = dir.as_path();
        if !self.parents_ok(dir)? || !is_real_dir(dir)? {
            return Ok(Vec::new());
        }
        atomic::stale_temps(dir, max_age)
    }

    /// Removes the stale temp files (older than `max_age`) under `dir`, a
    /// directory inside the root, and returns the paths it removed (for
    /// showing; one that vanished meanwhile is not among them): a channel's
    /// doctor repairs its own tree only.
    ///
    /// # Errors
    ///
    /// As [`StateDir::stale_temps_in`], and [`Error::Io`] when a temp
    /// cannot be removed.
    pub fn sweep_temps_in(&self, dir: &StatePath, max_age: Duration) -> Result<Vec<PathBuf>> {
        let mut removed = Vec::new();
        for path in self.stale_temps_in(dir, max_age)? {
            if atomic::remove_file_with(self.backend(), &path)? {
                tracing::debug!(path = %path.display(), "swept stale temp file");
                removed.push(path);
            }
        }
        Ok(removed)
    }

    /// Removes stale temp files (older than `max_age`) anywhere under the root.
    ///
    /// # Errors
    ///
    /// As [`StateDir::stale_temps`], and [`Error::Io`] when a temp cannot be removed.
    pub fn sweep_temps(&self, max_age: Duration) -> Result<usize> {
        atomic::sweep_temps_with(self.backend(), &self.inner.root, max_age)
    }
}

/// Returns true when `path` is a real directory and false when nothing is
/// there; a symlink or anything else in its place is an error.
/// A listed entry's name, or `None` for a dot-name (hidden: locks, temps'
/// folders, quarantine). A name that is not UTF-8 was not written by
/// chipset; it is surfaced, lossily, rather than skipped.
fn visible_name(entry: &fs::DirEntry) -> Option<String> {
    match entry.file_name().into_string() {
        Ok(name) if name.starts_with('.') => None,
        Ok(name) => Some(name),
        Err(name) => Some(name.to_string_lossy().into_owned()),
    }
}

fn is_real_dir(path: &Path) -> Result<bool> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(Error::Symlink {
            path: path.to_owned(),
        }),
        Ok(m) if m.is_dir() => Ok(true),
        Ok(_) => Err(Error::NotADirectory {
            path: path.to_owned(),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io("stat", path, e)),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    /// Both ways of opening agree: the one-call `openat2` and the checked fallback.
    #[test]
    fn open_beneath_and_its_fallback_agree() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path().join("state")).unwrap();
        let hooks = state.channel_dir(Channel::new("hooks")).unwrap();
        fs::write(hooks.join_static("a.json"), "{}").unwrap();
        fs::write(tmp.path().join("outside"), "x").unwrap();
        symlink(tmp.path().join("outside"), hooks.join_static("link.json")).unwrap();
        symlink(tmp.path(), state.root().join("mail")).unwrap();

        for open in [StateDir::open_beneath, StateDir::open_checked] {
            assert!(
                open(&state, &hooks.join_static("a.json"))
                    .unwrap()
                    .is_some()
            );
            assert!(
                open(&state, &hooks.join_static("missing.json"))
                    .unwrap()
                    .is_none()
            );
            assert!(
                open(&state, &state.root().join("nudge").join("x"))
                    .unwrap()
                    .is_none()
            );
            assert!(matches!(
                open(&state, &hooks.join_static("link.json")),
                Err(Error::Symlink { .. })
            ));
            assert!(matches!(
                open(&state, &state.root().join("mail").join("outside")),
                Err(Error::Symlink { .. })
            ));
            assert!(matches!(
                open(&state, &tmp.path().join("outside")),
                Err(Error::OutsideRoot { .. })
            ));
        }
    }

    #[test]
    fn channel_names_follow_the_rule() {
        let longest: &'static str = "abcdefghijklmnopqrstuvwxyz012345";
        for good in ["hooks", "loop", "a", "mail-2", "x_y", longest] {
            assert_eq!(Channel::try_new(good).unwrap().as_str(), good);
        }
        for (bad, rule) in [
            ("", "must not be empty"),
            (
                "abcdefghijklmnopqrstuvwxyz0123456",
                "must be at most 32 bytes",
            ),
            ("Mail", "must start with a lowercase ASCII letter"),
            ("1mail", "must start with a lowercase ASCII letter"),
            (".quarantine", "must start with a lowercase ASCII letter"),
            ("../etc", "must start with a lowercase ASCII letter"),
            (
                "a/b",
                "must be lowercase ASCII letters, digits, `-` and `_`",
            ),
            (
                "a.b",
                "must be lowercase ASCII letters, digits, `-` and `_`",
            ),
            ("aB", "must be lowercase ASCII letters, digits, `-` and `_`"),
        ] {
            match Channel::try_new(bad) {
                Err(Error::InvalidId {
                    kind,
                    value,
                    rule: got,
                }) => {
                    assert_eq!((kind, value.as_str(), got), ("channel name", bad, rule));
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        const MAIL: Channel = Channel::new("mail");
        assert_eq!(MAIL, Channel::try_new("mail").unwrap());
        assert_eq!(MAIL.to_string(), "mail");
        assert_eq!(format!("{MAIL:?}"), "Channel(\"mail\")");
    }
}
