//! [`StateDir`]'s changes: durable writes and publishes, moves, locked
//! read-modify-write, logs, the lock-free cache append, quarantine, removal
//! and the stale-temp sweep.
//! Every one goes through the I/O seam and the root and symlink checks.

use super::*;

impl StateDir {
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
    /// Missing parent directories are created without a sync as well: after
    /// a power cut they may be gone, with the file. A durable write that
    /// later finds such a directory takes it as it is (see the crate docs,
    /// Durability: keep durable files out of directories only caches make,
    /// or accept that they share its fate).
    ///
    /// # Errors
    ///
    /// As [`StateDir::ensure_dir`]; [`Error::Symlink`] when `path` is a
    /// symlink; [`Error::Io`] or [`Error::Rename`] when a step fails (`path` is
    /// unchanged).
    pub fn write_unsynced(&self, path: &StatePath, bytes: &[u8]) -> Result<()> {
        let path = path.as_path();
        self.with_parent_as(path, false, |io| {
            atomic::write_unsynced_with(io, path, bytes)
        })
    }

    /// As [`StateDir::write_unsynced`], with the compact JSON of `value`
    /// (as `serde_json` writes it, not the canonical form of
    /// [`StateDir::write_json`]: a cache only its writer reads back),
    /// encoded straight into the temp file through a buffer, never whole in
    /// memory (a cache of megabytes).
    ///
    /// # Errors
    ///
    /// As [`StateDir::write_unsynced`], plus [`Error::Serialize`] when
    /// `value` fails to encode (`path` is unchanged).
    pub fn write_cache_json<T: Serialize + ?Sized>(
        &self,
        path: &StatePath,
        value: &T,
    ) -> Result<()> {
        let path = path.as_path();
        self.with_parent_as(path, false, |io| {
            atomic::write_cache_json_with(io, path, value)
        })
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

    /// Durably publishes `bytes` under `path`, which must not exist: the file
    /// written and synced, renamed (or linked) into place without replacing
    /// anything, then the directory synced.
    /// **Commit point:** the no-replace rename (or link, see the crate docs,
    /// Publish orders) to `path`; a failure before it leaves nothing
    /// visible: no file, no temp a reader sees, no new directory.
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

    /// Publishes many new files sharing the directory syncs: every file
    /// written (from 16 files on, on journalled ext4 or XFS with the real
    /// backend, on the caller's thread and one helper),
    /// synced together, each renamed (or linked) into place in item order
    /// without replacing, each directory synced once (see the crate docs,
    /// Batches); **commit point:** each file's own no-replace publish.
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
        let made = self.ensure_batch_dirs(items)?;
        atomic::create_new_batch_with(&self.inner.io, self.inner.sync_order, items).inspect_err(
            |e| {
                if !e.is_outcome_unknown() {
                    self.roll_back_dirs(&made);
                }
            },
        )
    }

    /// [`StateDir::create_new`], and the published file's [`Stat`] as the
    /// publish left it: an `fstat` of the file's open descriptor after the
    /// no-replace publish (one system call, no path walk), for a caller that
    /// records what it published. `None` when that `fstat` failed: the file
    /// is published all the same.
    ///
    /// # Errors
    ///
    /// As [`StateDir::create_new`].
    pub fn create_new_stat(&self, path: &StatePath, bytes: &[u8]) -> Result<Option<Stat>> {
        let path = path.as_path();
        let order = self.inner.sync_order;
        self.with_parent(path, |io| {
            atomic::create_new_stat_with(io, order, path, bytes, true)
        })
    }

    /// [`StateDir::create_new_batch`], and each published file's [`Stat`]
    /// as [`StateDir::create_new_stat`] takes it (`None` for a file that
    /// existed, or whose `fstat` failed).
    ///
    /// # Errors
    ///
    /// As [`StateDir::create_new_batch`].
    pub fn create_new_batch_stat(
        &self,
        items: &[(StatePath, Vec<u8>)],
    ) -> Result<Vec<(Created, Option<Stat>)>> {
        let made = self.ensure_batch_dirs(items)?;
        atomic::create_new_batch_stat_with(&self.inner.io, self.inner.sync_order, items, true)
            .inspect_err(|e| {
                if !e.is_outcome_unknown() {
                    self.roll_back_dirs(&made);
                }
            })
    }

    /// Makes every directory a batch publishes into (each once); returns the
    /// directories it made, for a rollback. On failure those made are
    /// removed again.
    fn ensure_batch_dirs(&self, items: &[(StatePath, Vec<u8>)]) -> Result<Vec<PathBuf>> {
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
        Ok(made)
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

    /// Blocks until the exclusive lock guarding `path` is held, and returns
    /// it, released on drop. The lock is `.{name}.lock` beside `path`, an
    /// empty file that is never renamed or removed, so every process locks
    /// the same inode; its directory is created first. It is the lock
    /// [`StateDir::update`] and [`StateDir::quarantine_checked`] take: a
    /// writer that holds it can read `path` and change it in several steps
    /// ([`StateDir::write_json`] each) with no other writer in between.
    ///
    /// Locks are `flock`-style advisory locks (std's `File::lock`): they
    /// belong to the open file, so two holders in one process exclude each
    /// other too, and the kernel releases them when the process dies. A
    /// crash never leaves a lock behind.
    ///
    /// # Errors
    ///
    /// As [`StateDir::ensure_dir`]; [`Error::Io`] when the lock file cannot
    /// be opened or locked; [`Error::Symlink`] when it is a symlink.
    pub fn lock(&self, path: &StatePath) -> Result<LockGuard> {
        self.lock_for(path)?.exclusive()
    }

    /// Returns the lock guarding `path` (`.{name}.lock` beside it), not yet
    /// taken, creating its directory.
    pub(crate) fn lock_for(&self, path: &StatePath) -> Result<Lock> {
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
    /// under the exclusive lock of [`StateDir::lock`],
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
        self.aside(path, "quarantined file", |target| {
            move_entry(self.backend(), path, target)
        })
    }

    /// Copies the regular file at `path` durably into `.quarantine/` in its
    /// directory, named as [`StateDir::quarantine`] names a moved file,
    /// and returns the copy's path; the file stays where it is. For a
    /// repair that then replaces the bad file with one atomic write: the
    /// bad bytes are kept whether or not that write happens, and readers
    /// never find the path empty between a move and the write. `cap` is
    /// the most the caller's own reads take (a file up to it is copied,
    /// whatever the store's read cap); anything but a readable regular
    /// file (a FIFO, a directory, one over `cap`) is moved aside as
    /// [`StateDir::quarantine`] moves it.
    ///
    /// # Errors
    ///
    /// As [`StateDir::observe`] and [`StateDir::quarantine`];
    /// [`Error::OutcomeUnknown`] when the sync after the copy's publish fails.
    pub fn quarantine_copy(&self, path: &StatePath, cap: u64) -> Result<PathBuf> {
        let ReadOutcome::Value(bytes) = self.observe_capped(path, cap)? else {
            return self.quarantine(path);
        };
        let order = self.inner.sync_order;
        self.aside(path.as_path(), "quarantined a copy", |target| {
            atomic::create_new_with(self.backend(), order, target, &bytes)
        })
    }

    /// Puts `path`'s bytes aside with `place` at `.quarantine/{timestamp}-{name}`
    /// in its directory (with a numeric suffix if that is taken), and
    /// returns where.
    fn aside(
        &self,
        path: &Path,
        what: &str,
        place: impl Fn(&Path) -> Result<()>,
    ) -> Result<PathBuf> {
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
            match place(&target) {
                Ok(()) => {
                    tracing::warn!(from = %path.display(), to = %target.display(), "{what}");
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

    /// Returns the stale temp files (older than `max_age`) under `dir`, a
    /// directory inside the root ([`StateDir::root_path`] for the whole
    /// tree; a channel's doctor looks at its own tree only). With
    /// [`DoctorMode::Check`] it changes nothing: the temps a fix would
    /// remove. With [`DoctorMode::Fix`] it removes them and returns those
    /// it removed (one that vanished meanwhile is not among them). The
    /// paths are for showing: a temp is a dot-name, the store's own, which
    /// no [`StatePath`] can name.
    ///
    /// # Errors
    ///
    /// [`Error::OutsideRoot`], [`Error::Symlink`] or [`Error::NotADirectory`]
    /// for a bad path to `dir`; otherwise [`Error::Io`] when a directory cannot
    /// be listed, an entry examined or (with Fix) a temp removed.
    pub fn sweep_temps(
        &self,
        dir: &StatePath,
        max_age: Duration,
        mode: DoctorMode,
    ) -> Result<Vec<PathBuf>> {
        let dir = dir.as_path();
        if !self.dir_there(dir)? {
            return Ok(Vec::new());
        }
        let stale = atomic::stale_temps(dir, max_age)?;
        if mode == DoctorMode::Check {
            return Ok(stale);
        }
        let mut removed = Vec::new();
        for path in stale {
            if atomic::remove_file_with(self.backend(), &path)? {
                tracing::debug!(path = %path.display(), "swept stale temp file");
                removed.push(path);
            }
        }
        Ok(removed)
    }

    /// Appends `bytes` (whole lines) to the cache file at `path` with one
    /// `write` in append mode, **taking no lock and syncing nothing**, and
    /// returns whether it did: nothing is written (`false`) when the file
    /// already holds `max_len` bytes or more. For journals that a reader
    /// checks record by record and skips when they do not parse or do not
    /// match (mail's sent journal), never for a log of record
    /// ([`StateDir::log`] locks, cuts torn tails and syncs).
    ///
    /// The file is opened with one `openat2(O_WRONLY | O_APPEND | O_CREAT |
    /// O_NOFOLLOW, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` from the root's
    /// descriptor (the root and symlink checks in the one call; where the
    /// kernel lacks `openat2`, the directories are checked one by one), and
    /// created when missing, with its directories (unsynced, as
    /// [`StateDir::write_unsynced`] makes them). One `write` is not
    /// interleaved with other writers' appends on a local filesystem; a
    /// write cut short (a full disk, a power cut) may leave a partial line,
    /// and the rest of a short write may land after another writer's
    /// append. Either makes bad lines, never a wrong record that parses:
    /// readers must skip lines that do not parse.
    ///
    /// # Errors
    ///
    /// [`Error::OutsideRoot`], [`Error::Symlink`] or
    /// [`Error::NotADirectory`] for a bad path; [`Error::Corrupt`] when
    /// something other than a regular file is at `path` (nothing written);
    /// [`Error::Io`] when a step fails.
    pub fn append_cache(&self, path: &StatePath, bytes: &[u8], max_len: u64) -> Result<bool> {
        let path = path.as_path();
        let file = match self.open_cache_append(path)? {
            Some(file) => file,
            None => {
                let parent = path.parent().ok_or_else(|| self.outside(path))?;
                self.make_dirs(parent, false)?;
                self.open_cache_append(path)?
                    .ok_or_else(|| Error::io("open", path, io::ErrorKind::NotFound.into()))?
            }
        };
        let meta = file.metadata().map_err(|e| Error::io("stat", path, e))?;
        if !meta.is_file() {
            return Err(Error::Corrupt(crate::read::Corruption {
                path: path.to_owned(),
                reason: crate::read::CorruptReason::NotARegularFile,
            }));
        }
        if meta.len() >= max_len {
            return Ok(false);
        }
        self.backend()
            .write_all(&file, path, bytes)
            .map_err(|e| Error::io("append to", path, e))?;
        Ok(true)
    }

    /// Opens `path` for appending, creating it; `None` when its directory
    /// is missing.
    fn open_cache_append(&self, path: &Path) -> Result<Option<File>> {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::WRONLY
            | OFlags::APPEND
            | OFlags::CREATE
            | OFlags::NOFOLLOW
            | OFlags::NONBLOCK
            | OFlags::CLOEXEC;
        // The mode every file the store creates gets.
        let mode = Mode::from_raw_mode(0o644);
        match self.openat2_beneath(path, flags, mode, Self::open_cache_append_checked)? {
            Ok(file) => Ok(file),
            Err(rustix::io::Errno::ISDIR | rustix::io::Errno::NXIO) => {
                Err(Error::Corrupt(crate::read::Corruption {
                    path: path.to_owned(),
                    reason: crate::read::CorruptReason::NotARegularFile,
                }))
            }
            Err(e) => Err(Error::io("open", path, e.into())),
        }
    }

    /// The fallback of [`StateDir::open_cache_append`]: checks each
    /// directory, then opens the file without following a symlink there.
    fn open_cache_append_checked(&self, path: &Path) -> Result<Option<File>> {
        if !self.parents_ok(path)? {
            return Ok(None);
        }
        let io = self.backend();
        let opened = match io.open_append(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => match io.create_new(path, true) {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => io.open_append(path),
                other => other,
            },
            other => other,
        };
        match opened {
            Ok(file) => Ok(Some(file)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::open_nofollow("open", path, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn loop_file(name: &'static str) -> (tempfile::TempDir, StateDir, StatePath) {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path()).unwrap();
        let path = state
            .channel_dir(Channel::new("loop"))
            .unwrap()
            .join_static(name);
        (tmp, state, path)
    }

    /// The guard of [`StateDir::lock`] holds the lock `update` takes until
    /// it is dropped.
    #[test]
    fn a_held_lock_excludes_update_until_dropped() {
        let (_tmp, state, path) = loop_file("u.json");
        let guard = state.lock(&path).unwrap();
        state.write_json(&path, &1u64).unwrap();
        let lock = state.lock_for(&path).unwrap();
        assert!(lock.try_exclusive().unwrap().is_none(), "held");
        drop(guard);
        assert!(lock.try_exclusive().unwrap().is_some(), "released on drop");
        state
            .update(&path, |_: ReadOutcome<u64>| {
                Ok::<_, Error>(Decision::Write(3, ()))
            })
            .unwrap();
        assert_eq!(state.read_json::<u64>(&path).unwrap().value(), Some(3));
        assert_eq!(fs::read_to_string(&path).unwrap(), "3\n");
    }

    /// Two writes under one held lock, from several threads: no other
    /// writer lands between them, so no increment is lost and every pair
    /// is seen whole (odd only inside a holder).
    #[test]
    fn no_writer_interleaves_between_writes_under_the_lock() {
        let (_tmp, state, path) = loop_file("pairs.json");
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..25 {
                        let _guard = state.lock(&path).unwrap();
                        let read = state.read_json::<u64>(&path).unwrap();
                        let start = read.into_result().unwrap().unwrap_or(0);
                        assert_eq!(start % 2, 0, "another holder's pair was cut");
                        state.write_json(&path, &(start + 1)).unwrap();
                        state.write_json(&path, &(start + 2)).unwrap();
                    }
                });
            }
        });
        assert_eq!(state.read_json::<u64>(&path).unwrap().value(), Some(200));
    }

    /// Under the lock a corrupt file reads as corrupt (never as nothing
    /// there) and is left as it is; a symlink is refused.
    #[test]
    fn a_locked_read_refuses_corrupt_files_and_symlinks() {
        let (tmp, state, path) = loop_file("bad.json");
        fs::write(&path, "{").unwrap();
        {
            let _guard = state.lock(&path).unwrap();
            assert!(matches!(
                state.read_json::<u64>(&path).unwrap().into_result(),
                Err(Error::Corrupt(c)) if path == c.path
            ));
        }
        assert_eq!(fs::read_to_string(&path).unwrap(), "{");
        fs::write(tmp.path().join("elsewhere.json"), "1\n").unwrap();
        let link = path.parent().unwrap().join("link.json");
        symlink(tmp.path().join("elsewhere.json"), &link).unwrap();
        let link = state.channel(Channel::new("loop")).join_static("link.json");
        let _guard = state.lock(&link).unwrap();
        assert!(matches!(
            state.read_json::<u64>(&link),
            Err(Error::Symlink { .. })
        ));
    }

    /// Where the kernel lacks `openat2`: the file is created or opened for
    /// appending, a missing directory is `None`, a symlink is refused.
    #[test]
    fn the_checked_fallback_opens_as_openat2_does() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path()).unwrap();
        let dir = state.root().join("gate");
        let path = dir.join("a.jsonl");
        assert!(state.open_cache_append_checked(&path).unwrap().is_none());
        fs::create_dir(&dir).unwrap();
        for line in ["1\n", "2\n"] {
            let file = state.open_cache_append_checked(&path).unwrap().unwrap();
            state
                .backend()
                .write_all(&file, &path, line.as_bytes())
                .unwrap();
        }
        assert_eq!(fs::read_to_string(&path).unwrap(), "1\n2\n");
        symlink(&path, dir.join("link.jsonl")).unwrap();
        assert!(matches!(
            state.open_cache_append_checked(&dir.join("link.jsonl")),
            Err(Error::Symlink { .. })
        ));
    }
}
