//! [`StateDir`]'s reads and listings: opening a file beneath the root
//! without following a symlink, `stat`, typed reads, directory walks and the
//! quarantine folder's listing. Nothing here changes the state.

use super::*;
use crate::stat::none_if_not_found;

/// How a file is opened for reading: never through a symlink, and never
/// waiting (`O_NONBLOCK`: a FIFO planted at a state path does not hang the
/// open).
pub(super) const READ_FLAGS: rustix::fs::OFlags = rustix::fs::OFlags::RDONLY
    .union(rustix::fs::OFlags::NOFOLLOW)
    .union(rustix::fs::OFlags::NONBLOCK)
    .union(rustix::fs::OFlags::CLOEXEC);

/// Whether reads open files with `O_NOATIME`: a read then never writes
/// the file's access time. Under the default `relatime` mount option the
/// first read of every new file would, which makes the first listing of
/// new mail write (and, on a journalled filesystem, journal) one inode
/// per message, about a quarter of what that listing costs. Nothing in
/// the state uses access times.
///
/// The kernel allows the flag only to the file's owner (or a process with
/// `CAP_FOWNER`). The first open it refuses (`EPERM`) is made again
/// without it, and from then on no read of this state asks for it: a
/// state shared between users costs one refused open, not one per file.
/// Shared by a [`StateDir`], its clones and its [`Folder`]s.
#[derive(Debug, Clone)]
pub(super) struct Noatime(Arc<std::sync::atomic::AtomicBool>);

impl Default for Noatime {
    fn default() -> Self {
        Noatime(Arc::new(std::sync::atomic::AtomicBool::new(true)))
    }
}

impl Noatime {
    /// Opens with `open`, given [`READ_FLAGS`] and `O_NOATIME` while the
    /// flag is still asked for; on `EPERM` then, again without it, which it
    /// is never asked for again. `open` answers the open's errno inside a
    /// store result (a path's checks fail as typed errors first).
    pub(super) fn open<T>(
        &self,
        mut open: impl FnMut(rustix::fs::OFlags) -> Result<std::result::Result<T, rustix::io::Errno>>,
    ) -> Result<std::result::Result<T, rustix::io::Errno>> {
        use std::sync::atomic::Ordering::Relaxed;
        if self.0.load(Relaxed) {
            match open(READ_FLAGS | rustix::fs::OFlags::NOATIME)? {
                Err(rustix::io::Errno::PERM) => self.0.store(false, Relaxed),
                other => return Ok(other),
            }
        }
        open(READ_FLAGS)
    }

    /// Whether reads still ask for `O_NOATIME`.
    #[cfg(test)]
    pub(super) fn asked(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl StateDir {
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
            let meta = none_if_not_found(entry.metadata())
                .map_err(|e| Error::io("stat", dir.join(&name), e))?;
            out.push((name, meta.map(|m| Stat::from_metadata(&m))));
            Ok::<(), Error>(())
        })?;
        out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Opens `path` for reading with no symlink anywhere below the root.
    ///
    /// One `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` from the root's
    /// descriptor resolves the whole path, so a read costs what a plain open
    /// does. Where the kernel lacks `openat2` (before Linux 5.6, or a sandbox
    /// that filters it) the directories are checked one by one instead.
    pub(super) fn open_beneath(&self, path: &Path) -> Result<Option<File>> {
        let mode = rustix::fs::Mode::empty();
        self.inner
            .noatime
            .open(|flags| self.openat2_beneath(path, flags, mode, Self::open_checked))?
            .map_err(|e| Error::io("open", path, e.into()))
    }

    /// Opens `path` with one `openat2(flags, RESOLVE_BENEATH |
    /// RESOLVE_NO_SYMLINKS)` from the root's descriptor: `None` when it or a
    /// directory on the way is missing, a typed error for a symlink, a file
    /// where a directory should be or a path outside the root, and any
    /// other failure's errno for the caller to judge. Where the kernel lacks
    /// `openat2`, or on a race worth a retry, `fallback` opens it with the
    /// directories checked one by one.
    pub(super) fn openat2_beneath(
        &self,
        path: &Path,
        flags: rustix::fs::OFlags,
        mode: rustix::fs::Mode,
        fallback: fn(&Self, &Path) -> Result<Option<File>>,
    ) -> Result<std::result::Result<Option<File>, rustix::io::Errno>> {
        use rustix::fs::ResolveFlags;
        use rustix::io::Errno;
        let rel = self.beneath(path)?;
        let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS;
        match rustix::fs::openat2(&self.inner.root_fd, rel, flags, mode, resolve) {
            Ok(fd) => Ok(Ok(Some(File::from(fd)))),
            Err(Errno::NOENT) => Ok(Ok(None)),
            Err(Errno::LOOP) => Err(Error::Symlink {
                path: path.to_owned(),
            }),
            Err(Errno::NOTDIR) => Err(Error::NotADirectory {
                path: path.to_owned(),
            }),
            Err(Errno::XDEV) => Err(self.outside(path)),
            // Refused for `O_NOATIME` (not the file's owner): the caller
            // opens it again without (`Noatime::open`).
            Err(Errno::PERM) if flags.contains(rustix::fs::OFlags::NOATIME) => Ok(Err(Errno::PERM)),
            // No openat2 here, or a retry-worthy race: take the slow, checked path.
            Err(Errno::NOSYS | Errno::PERM | Errno::AGAIN | Errno::INVAL) => {
                fallback(self, path).map(Ok)
            }
            Err(e) => Ok(Err(e)),
        }
    }

    /// The fallback of [`StateDir::open_beneath`]: checks each directory with
    /// `lstat`, then opens the last component without following it.
    pub(super) fn open_checked(&self, path: &Path) -> Result<Option<File>> {
        if !self.parents_ok(path)? {
            return Ok(None);
        }
        open_nofollow(path)
    }

    /// Returns what is at `path` without following a symlink there (a
    /// symlink is neither a file nor a directory), or
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
        let rel = self.beneath(path)?;
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
        let meta = none_if_not_found(fs::symlink_metadata(path))
            .map_err(|e| Error::io("stat", path, e))?;
        Ok(meta.map(|m| Stat::from_metadata(&m)))
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
    /// instead of the read cap (for files that are larger by design: a
    /// cache, an index, a message), and returns the file's [`Stat`] with
    /// its bytes: from the `statx` of the open file that the read takes
    /// anyway (before its bytes are read), the identity of the very file
    /// read, at no extra system call.
    ///
    /// # Errors
    ///
    /// As [`StateDir::read_bytes`].
    pub fn read_bytes_capped(
        &self,
        path: &StatePath,
        cap: u64,
    ) -> Result<ReadOutcome<(Vec<u8>, Stat)>> {
        let path = path.as_path();
        match self.open_beneath(path)? {
            Some(file) => crate::read::read_open_file_stat(file, path, cap),
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

    /// Lists what [`StateDir::quarantine`] moved aside in `dir` (the files
    /// in its `.quarantine/` folder, which no [`StatePath`] can name), as
    /// paths for showing, sorted, or `None` when there is no such folder:
    /// for a reader that must not pass while a repair left something there
    /// (mail's commit gate).
    ///
    /// # Errors
    ///
    /// As [`StateDir::list`]: [`Error::Symlink`] or [`Error::NotADirectory`]
    /// when `.quarantine` is a symlink or not a directory.
    pub fn list_quarantine(&self, dir: &StatePath) -> Result<Option<Vec<PathBuf>>> {
        let qdir = dir.as_path().join(QUARANTINE_DIR);
        if self.stat_at(&qdir)?.is_none() {
            return Ok(None);
        }
        let names = self.list_where(&qdir, |_| true)?;
        Ok(Some(names.into_iter().map(|n| qdir.join(n)).collect()))
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
        use rustix::fs::{Mode, OFlags};
        self.scratch_file_with(dir.as_path(), |dir| {
            rustix::fs::open(
                dir,
                OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600),
            )
        })
    }

    /// [`StateDir::scratch_file`] with its `O_TMPFILE` open passed in: the
    /// seam through which the tests take the fallback, which every
    /// filesystem they can reach would otherwise never ask for.
    fn scratch_file_with(
        &self,
        dir: &Path,
        open_tmpfile: impl FnOnce(&Path) -> rustix::io::Result<OwnedFd>,
    ) -> Result<ScratchFile> {
        self.parents_ok(dir)?;
        atomic::refuse_symlink(dir)?;
        match open_tmpfile(dir) {
            Ok(fd) => return Ok(ScratchFile::new(File::from(fd), dir)),
            // Not supported here: fall back to a named temp, unlinked at once.
            Err(e) if crate::backend::tmpfile_unsupported(e) => {}
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
    /// [`StateDir::list`], `list_stats` and `for_each_name`.
    /// A missing directory, or a path that is not a real directory, has no
    /// entries; a symlink on the way is an error.
    fn walk<E: From<Error>>(
        &self,
        dir: &Path,
        mut each: impl FnMut(String, &fs::DirEntry) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        if !self.dir_there(dir)? {
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
}

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

#[cfg(test)]
mod tests {
    use rustix::io::Errno;

    use super::*;

    /// Both ways of stat-ing agree, as `open_beneath` and `open_checked`
    /// do: the one-call `openat2` and the checked fallback that a kernel
    /// without `openat2` takes. A path that cannot be looked at (a last
    /// component over the 255-byte NAME_MAX) is an error, never "absent".
    #[test]
    fn stat_and_its_fallback_agree() {
        let (tmp, state, hooks) = crate::state::tests::two_ways_fixture();
        let long = hooks.as_path().join("n".repeat(256));

        for stat in [StateDir::stat_at, StateDir::stat_checked] {
            let file = stat(&state, &hooks.join_static("a.json")).unwrap().unwrap();
            assert!(file.is_file() && file.len == 2, "{file:?}");
            assert!(stat(&state, &hooks).unwrap().unwrap().is_dir());
            // A symlink is there (and not followed): its own kind.
            let link = stat(&state, &hooks.join_static("link.json")).unwrap();
            assert_eq!(
                link.map(|s| s.kind()),
                Some(crate::stat::EntryKind::Symlink)
            );
            assert_eq!(
                stat(&state, &hooks.join_static("missing.json")).unwrap(),
                None
            );
            assert_eq!(stat(&state, &state.root().join("nudge/x")).unwrap(), None);
            assert!(matches!(
                stat(&state, &state.root().join("mail").join("outside")),
                Err(Error::Symlink { .. })
            ));
            assert!(matches!(
                stat(&state, &hooks.as_path().join("a.json/below")),
                Err(Error::NotADirectory { .. })
            ));
            assert!(matches!(
                stat(&state, &tmp.path().join("outside")),
                Err(Error::OutsideRoot { .. })
            ));
            match stat(&state, &long) {
                Err(Error::Io { op, path, source }) => {
                    assert_eq!((op, &path), ("stat", &long));
                    assert_eq!(
                        source.raw_os_error(),
                        Some(Errno::NAMETOOLONG.raw_os_error())
                    );
                }
                other => panic!("{other:?}"),
            }
        }
    }

    /// A file the store opens to read is non-blocking (a FIFO planted at a
    /// state path cannot hang the open) and closed on exec (a child process
    /// the caller spawns never inherits it).
    #[test]
    fn a_read_descriptor_is_non_blocking_and_closed_on_exec() {
        use rustix::fs::OFlags;
        use rustix::io::FdFlags;
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path()).unwrap();
        let hooks = state.channel_dir(Channel::new("hooks")).unwrap();
        fs::write(hooks.join_static("a.json"), "{}").unwrap();
        for open in [StateDir::open_beneath, StateDir::open_checked] {
            let file = open(&state, &hooks.join_static("a.json")).unwrap().unwrap();
            let status = rustix::fs::fcntl_getfl(&file).unwrap();
            assert!(status.contains(OFlags::NONBLOCK), "{status:?}");
            let fd = rustix::io::fcntl_getfd(&file).unwrap();
            assert!(fd.contains(FdFlags::CLOEXEC), "{fd:?}");
        }
    }

    /// Where `O_TMPFILE` is not supported (the three errors by which a
    /// kernel or filesystem says so), the scratch file is a named temp
    /// unlinked at once: it works the same and leaves no name. Any other
    /// failure is an error naming the directory, not a second try.
    #[test]
    fn scratch_falls_back_only_where_tmpfile_is_unsupported() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path()).unwrap();
        let dir = state.channel_dir(Channel::new("mail")).unwrap();
        let dir = dir.as_path();
        for errno in [Errno::OPNOTSUPP, Errno::ISDIR, Errno::INVAL] {
            let file = state.scratch_file_with(dir, |_| Err(errno)).unwrap();
            file.write_all_at(b"run", 0).unwrap();
            let mut back = [0; 3];
            file.read_exact_at(&mut back, 0).unwrap();
            assert_eq!(&back, b"run", "{errno:?}");
            let names: Vec<_> = fs::read_dir(dir).unwrap().collect();
            assert!(names.is_empty(), "{errno:?}: {names:?}");
        }
        for errno in [Errno::NOENT, Errno::ACCESS, Errno::NOSPC] {
            match state.scratch_file_with(dir, |_| Err(errno)) {
                Err(Error::Io { op, path, source }) => {
                    assert_eq!((op, path.as_path()), ("create scratch file", dir));
                    assert_eq!(source.raw_os_error(), Some(errno.raw_os_error()));
                }
                other => panic!("{errno:?}: {other:?}"),
            }
            assert_eq!(fs::read_dir(dir).unwrap().count(), 0, "{errno:?}");
        }
    }

    /// Reads, by path and through a folder, open files with `O_NOATIME`
    /// and leave their access time where it was. A plain read of a twin
    /// file moves its access time (the mount updates access times, so the
    /// check could fail).
    #[test]
    fn reads_leave_access_times_alone() {
        use std::time::{Duration, UNIX_EPOCH};
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path()).unwrap();
        let dir = state.channel_dir(Channel::new("mail")).unwrap();
        let long_ago = UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        let atime = |name: &str| {
            let meta = fs::metadata(dir.as_path().join(name)).unwrap();
            meta.accessed().unwrap()
        };
        for name in ["ours.json", "plain.json"] {
            let path = dir.as_path().join(name);
            fs::write(&path, "{}").unwrap();
            // Last read long before it was written: `relatime` would set
            // the access time on the next read.
            let times = fs::FileTimes::new().set_accessed(long_ago);
            File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_times(times)
                .unwrap();
            assert_eq!(atime(name), long_ago);
        }
        fs::read(dir.as_path().join("plain.json")).unwrap();
        assert_ne!(
            atime("plain.json"),
            long_ago,
            "a plain read set no access time here (a noatime mount?): nothing to tell apart"
        );

        let ours = dir.join_static("ours.json");
        let file = state.open_beneath(ours.as_path()).unwrap().unwrap();
        let flags = rustix::fs::fcntl_getfl(&file).unwrap();
        assert!(flags.contains(rustix::fs::OFlags::NOATIME), "{flags:?}");
        assert!(
            state
                .read_bytes_capped(&ours, 64)
                .unwrap()
                .value()
                .is_some()
        );
        assert_eq!(atime("ours.json"), long_ago, "a read by path");
        let folder = state.folder(&dir).unwrap().unwrap();
        assert!(
            folder
                .read_bytes_capped("ours.json", 64)
                .unwrap()
                .value()
                .is_some()
        );
        assert_eq!(atime("ours.json"), long_ago, "a read through a folder");
        let mut buf = Vec::new();
        assert!(
            folder
                .read_into("ours.json", 64, &mut buf)
                .unwrap()
                .value()
                .is_some()
        );
        assert_eq!(atime("ours.json"), long_ago, "a read into a buffer");
        assert!(state.inner.noatime.asked());
    }

    /// An open refused for `O_NOATIME` (`EPERM`: the file is not the
    /// reader's own) is made again without it, and no later open asks for
    /// it; any other failure is the open's, and the flag is still asked for.
    #[test]
    fn an_open_refused_for_noatime_is_made_again_without_it() {
        use rustix::fs::OFlags;
        let noatime = Noatime::default();
        let twin = noatime.clone();
        let mut asked = Vec::new();
        let mut open = |flags: OFlags, refuse: Errno| {
            asked.push(flags.contains(OFlags::NOATIME));
            assert_eq!(flags - OFlags::NOATIME, READ_FLAGS);
            Ok(if flags.contains(OFlags::NOATIME) {
                Err(refuse)
            } else {
                Ok(())
            })
        };
        let symlink = || Error::Symlink { path: "x".into() };
        // A typed failure of the path's checks is the open's, not retried.
        let typed = noatime.open(|_| Err::<std::result::Result<(), Errno>, _>(symlink()));
        assert!(matches!(typed, Err(Error::Symlink { .. })), "{typed:?}");
        assert!(twin.asked());
        let said = noatime.open(|f| open(f, Errno::NOENT)).unwrap();
        assert_eq!(said, Err(Errno::NOENT));
        assert!(twin.asked());
        assert_eq!(noatime.open(|f| open(f, Errno::PERM)).unwrap(), Ok(()));
        assert!(
            !twin.asked(),
            "its clones (a state's folders) stop asking too"
        );
        assert_eq!(noatime.open(|f| open(f, Errno::PERM)).unwrap(), Ok(()));
        assert_eq!(asked, [true, true, false, false]);
    }
}
