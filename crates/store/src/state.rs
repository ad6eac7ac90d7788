//! The state root and its channel directories.

use std::fs::{self, File};
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::Created;
use crate::atomic::{self, move_entry, sync_dir_with};
use crate::backend::{IoBackend, RealIo, SharedIo, SyncOrder};
use crate::error::{Classify, Error, Result};
use crate::lock::{Decision, Lock, LockGuard, update_locked_with};
use crate::log::JsonLog;
use crate::path::StatePath;
use crate::read::{DEFAULT_READ_CAP, ReadOutcome, open_nofollow, parse_json, read_open_file};
use crate::repair::DoctorMode;
use crate::scratch::ScratchFile;
use crate::stat::Stat;
use crate::time::{Clock, SharedClock, SystemClock, Timestamp};

mod channel;
mod folder;
mod reads;
mod writes;

pub use channel::Channel;
pub use folder::Folder;

/// The name of the folder that [`StateDir::quarantine`] moves bad files
/// into, beside them: a dot-name of the store's own.
pub(crate) const QUARANTINE_DIR: &str = ".quarantine";

/// How a [`StateDir`] is opened. Build it from the default
/// (`StateOptions { clock, ..StateOptions::default() }`): the `testing`
/// feature adds a field.
#[derive(Debug, Clone)]
pub struct StateOptions {
    /// Where time comes from.
    pub clock: Arc<dyn Clock>,
    /// The largest state file a typed read accepts. Default 1 MiB.
    pub read_cap: u64,
    /// Whether [`StateDir::open_with`] creates a missing root (true, the
    /// default). False for a reader, to which a mistyped root must not look
    /// like an empty, healthy one: a missing root is then
    /// [`Error::NotFound`].
    pub create: bool,
    /// The I/O seam every change goes through ([`RealIo`] by default): the
    /// hook for test doubles that fail the Nth call or record every call
    /// to replay power cuts (`chipset-testkit`). Only with the `testing`
    /// feature; without it the store makes the real calls.
    #[cfg(feature = "testing")]
    pub io: SharedIo,
}

impl Default for StateOptions {
    fn default() -> Self {
        StateOptions {
            clock: Arc::new(SystemClock),
            read_cap: DEFAULT_READ_CAP,
            create: true,
            #[cfg(feature = "testing")]
            io: Arc::new(RealIo),
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
    /// Whether reads still open files with `O_NOATIME` (see
    /// [`reads::Noatime`]); shared with every [`Folder`] opened here.
    noatime: reads::Noatime,
}

impl StateDir {
    /// The default state root, relative to the working directory.
    pub const DEFAULT_ROOT: &str = ".chipset/state";

    /// Opens (creating if needed) the state root at `root`, on the system clock.
    ///
    /// # Errors
    ///
    /// As [`StateDir::open_with`]: [`Error::InvalidId`] for an empty
    /// `root`, [`Error::NotADirectory`] when a file stands there,
    /// [`Error::Io`] when the root cannot be created or resolved.
    pub fn open(root: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(root, StateOptions::default())
    }

    /// Opens the state root at `root` with `options`, creating it first
    /// when it is missing and [`StateOptions::create`] is true.
    /// The root itself may be reached through a symlink; nothing below it is.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidId`] when `root` is empty (it names no directory;
    /// `.` is the working directory); [`Error::NotFound`] when there is no
    /// directory at `root` (and `options.create` is false);
    /// [`Error::NotADirectory`] when something else is there, whether or
    /// not `options.create` is set; [`Error::Io`] when the root cannot be
    /// created or resolved.
    ///
    /// ```
    /// use chipset_store::{Error, StateDir};
    ///
    /// let tmp = tempfile::tempdir()?;
    /// let file = tmp.path().join("state");
    /// std::fs::write(&file, "not a directory")?;
    /// assert!(matches!(StateDir::open(&file), Err(Error::NotADirectory { .. })));
    /// assert!(matches!(StateDir::open(""), Err(Error::InvalidId { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_with(root: impl AsRef<Path>, options: StateOptions) -> Result<Self> {
        let root = root.as_ref();
        if root.as_os_str().is_empty() {
            return Err(Error::InvalidId {
                kind: "state root",
                value: String::new(),
                rule: "must not be empty: name a directory (`.` is the working directory)",
            });
        }
        if options.create
            && let Err(e) = fs::create_dir_all(root)
        {
            // A file where the root should be: the same answer as without
            // `create`, rather than the creation's bare I/O failure.
            if fs::metadata(root).is_ok_and(|m| !m.is_dir()) {
                return Err(Error::NotADirectory {
                    path: root.to_owned(),
                });
            }
            return Err(Error::io("create state root", root, e));
        }
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
        #[cfg(feature = "testing")]
        let io = options.io;
        #[cfg(not(feature = "testing"))]
        let io = Arc::new(RealIo);
        let sync_order = io.sync_order(&root);
        Ok(StateDir {
            inner: Arc::new(Inner {
                root,
                root_fd,
                clock: options.clock,
                read_cap: options.read_cap,
                io,
                sync_order,
                noatime: reads::Noatime::default(),
            }),
        })
    }

    /// Returns the (resolved) root.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// Returns the clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    /// Returns the current time on the clock.
    pub fn now(&self) -> Timestamp {
        self.inner.clock.now()
    }

    fn backend(&self) -> &dyn IoBackend {
        &*self.inner.io
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

    /// `path` relative to the root, as the path argument of a call on the
    /// root's descriptor: `.` for the root itself (an empty path is
    /// `ENOENT` to the kernel).
    pub(crate) fn beneath<'a>(&self, path: &'a Path) -> Result<&'a Path> {
        let rel = self.relative(path)?;
        Ok(if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        })
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
        self.make_dirs(dir, true)
    }

    /// Creates `dir` and its missing parents below the root as
    /// [`StateDir::ensure_dir_tracked`] does; with `sync` false it syncs
    /// nothing (for [`StateDir::write_unsynced`]: a directory only caches
    /// live in, which a power cut may take away with them).
    fn make_dirs(&self, dir: &Path, sync: bool) -> Result<Vec<PathBuf>> {
        let sync_dir = |io: &dyn IoBackend, parent: &Path| {
            if sync {
                sync_dir_with(io, parent)
            } else {
                Ok(())
            }
        };
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
                        sync_dir(io, &parent)
                    }
                    // Another process made it first: check what it made, and sync
                    // the parent in case that process died before it could.
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => match is_real_dir(&cur) {
                        Ok(true) => sync_dir(io, &parent),
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
        self.with_parent_as(path, true, op)
    }

    /// [`StateDir::with_parent`], creating the missing directories without a
    /// sync when `sync` is false.
    fn with_parent_as<R>(
        &self,
        path: &Path,
        sync: bool,
        op: impl FnOnce(&dyn IoBackend) -> Result<R>,
    ) -> Result<R> {
        let parent = path.parent().ok_or_else(|| self.outside(path))?;
        let made = self.make_dirs(parent, sync)?;
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

    /// True when `dir` is a real directory with real directories above it;
    /// false when it or one above is missing. A symlink or something else
    /// on the way is an error (see [`StateDir::check_parents`]).
    pub(crate) fn dir_there(&self, dir: &Path) -> Result<bool> {
        Ok(self.parents_ok(dir)? && is_real_dir(dir)?)
    }

    fn ensure_parent(&self, path: &Path) -> Result<()> {
        match path.parent() {
            Some(p) => self.ensure_dir_tracked(p).map(drop),
            None => Err(self.outside(path)),
        }
    }
}

/// Returns true when `path` is a real directory and false when nothing is
/// there; a symlink or anything else in its place is an error.
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

    /// The state both ways of opening (and of stat-ing, `reads.rs`) are
    /// checked against: `hooks/a.json` (2 bytes), `hooks/link.json` a
    /// symlink to a file outside the root, `mail` a symlink to a directory,
    /// and `outside` beside the root.
    pub(super) fn two_ways_fixture() -> (tempfile::TempDir, StateDir, StatePath) {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path().join("state")).unwrap();
        let hooks = state.channel_dir(Channel::new("hooks")).unwrap();
        fs::write(hooks.join_static("a.json"), "{}").unwrap();
        fs::write(tmp.path().join("outside"), "x").unwrap();
        symlink(tmp.path().join("outside"), hooks.join_static("link.json")).unwrap();
        symlink(tmp.path(), state.root().join("mail")).unwrap();
        (tmp, state, hooks)
    }

    /// Both ways of opening agree: the one-call `openat2` and the checked fallback.
    #[test]
    fn open_beneath_and_its_fallback_agree() {
        let (tmp, state, hooks) = two_ways_fixture();

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

    /// The root's descriptor is an `O_PATH` directory handle, closed on
    /// exec: a child process never inherits it. (Read from the kernel's
    /// `/proc/self/fdinfo`: `O_PATH` is 0o10000000, `O_CLOEXEC` 0o2000000.)
    #[test]
    fn the_root_descriptor_is_a_path_handle_closed_on_exec() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path().join("state")).unwrap();
        let ours: Vec<u32> = fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| {
                let e = e.ok()?;
                let target = fs::read_link(e.path()).ok()?;
                let fd = e.file_name().to_str()?.parse().ok()?;
                (target == state.root()).then_some(fd)
            })
            .collect();
        let [fd] = ours[..] else {
            panic!("descriptors on the root: {ours:?}")
        };
        let info = fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).unwrap();
        let flags = info
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .map(|f| u32::from_str_radix(f.trim(), 8).unwrap())
            .unwrap();
        assert_ne!(flags & 0o10_000_000, 0, "not O_PATH: {flags:o}");
        assert_ne!(flags & 0o2_000_000, 0, "not O_CLOEXEC: {flags:o}");
    }

    /// Options that open an existing root only.
    fn existing() -> StateOptions {
        StateOptions {
            create: false,
            ..StateOptions::default()
        }
    }

    /// A root that cannot be examined for another reason than "not there"
    /// (here: a file where a parent directory should be) is an I/O error,
    /// not "not found": the CLI tells a typo from a broken path by it.
    #[test]
    fn a_root_under_a_file_is_an_io_error_not_not_found() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("file"), "x").unwrap();
        let err = StateDir::open_with(tmp.path().join("file/state"), existing()).unwrap_err();
        assert!(
            matches!(&err, Error::Io { op: "open state root", source, .. }
                if source.raw_os_error() == Some(rustix::io::Errno::NOTDIR.raw_os_error())),
            "{err:?}"
        );
        assert!(matches!(
            StateDir::open_with(tmp.path().join("missing"), existing()),
            Err(Error::NotFound { .. })
        ));
    }

    #[test]
    fn read_cap_is_the_one_given() {
        let tmp = tempfile::tempdir().unwrap();
        let options = StateOptions {
            read_cap: 12_345,
            ..StateOptions::default()
        };
        let state = StateDir::open_with(tmp.path(), options).unwrap();
        assert_eq!(state.read_cap(), 12_345);
        let default = StateDir::open(tmp.path()).unwrap();
        assert_eq!(default.read_cap(), DEFAULT_READ_CAP);
    }

    /// `is_real_dir` says "not there" only for a missing path; a path that
    /// cannot be examined (longer than PATH_MAX) is an error naming it.
    #[test]
    fn a_path_that_cannot_be_examined_is_not_taken_for_missing() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(!is_real_dir(&tmp.path().join("missing")).unwrap());
        assert!(is_real_dir(tmp.path()).unwrap());
        let long = tmp.path().join("d/".repeat(2100));
        let err = is_real_dir(&long).unwrap_err();
        assert!(
            matches!(&err, Error::Io { op: "stat", path, source }
                if *path == long
                    && source.raw_os_error() == Some(rustix::io::Errno::NAMETOOLONG.raw_os_error())),
            "{err:?}"
        );
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

    /// A root that names nothing, or a file, is refused with its own
    /// typed error whether or not the root is to be created, and nothing
    /// is created.
    #[test]
    fn a_root_that_is_no_directory_is_refused_by_name() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("state");
        fs::write(&file, "x").unwrap();
        for create in [true, false] {
            let options = StateOptions {
                create,
                ..StateOptions::default()
            };
            match StateDir::open_with(&file, options.clone()) {
                Err(Error::NotADirectory { path }) => assert_eq!(path, file),
                other => panic!("create {create}: {other:?}"),
            }
            match StateDir::open_with("", options) {
                Err(e @ Error::InvalidId { .. }) => {
                    assert_eq!(e.kind(), crate::ErrorKind::Invalid);
                    assert!(e.to_string().contains("state root"), "{e}");
                }
                other => panic!("create {create}: {other:?}"),
            }
        }
        assert_eq!(fs::read_to_string(&file).unwrap(), "x");
    }
}
