//! Advisory locks on dedicated lock files, and the locked read-modify-write.

#[cfg(test)]
use std::fs::TryLockError;
use std::fs::{File, OpenOptions};

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::atomic::{to_json_bytes, write_atomic_with};
use crate::backend::IoBackend;
use crate::error::{Error, Result};
use crate::read::{ReadOutcome, read_json};

/// A lock file: an empty file that is only ever locked, never renamed,
/// replaced or removed, so every process locks the same inode.
///
/// Locks are `flock`-style advisory locks (std's `File::lock`): they belong to
/// the open file, so two handles in one process exclude each other too, and
/// the kernel releases them when the process dies. A crash never leaves a
/// lock behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lock {
    path: PathBuf,
}

/// A held exclusive lock ([`StateDir::lock`](crate::StateDir::lock)),
/// released on drop.
#[derive(Debug)]
#[must_use = "the lock is released when the guard is dropped"]
pub struct LockGuard {
    _file: File,
}

#[derive(Clone, Copy)]
enum Mode {
    Exclusive,
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "no caller takes a shared lock yet; the tests do")
    )]
    Shared,
}

impl Lock {
    /// Returns the lock that guards `data`, a path the store checked or
    /// derived itself: `.{name}.lock` in the same directory.
    /// [`StateDir::lock_for`](crate::StateDir::lock_for) returns the same
    /// lock and makes its directory first.
    pub(crate) fn beside(data: &Path) -> Self {
        let name = data
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let dir = data.parent().unwrap_or(Path::new("."));
        Lock {
            path: dir.join(format!(".{name}.lock")),
        }
    }

    fn open(&self) -> Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .custom_flags(crate::read::nofollow_flags())
            .open(&self.path)
            .map_err(|e| {
                if e.raw_os_error() == Some(rustix::io::Errno::ISDIR.raw_os_error()) {
                    // A directory where the lock file belongs: report it as
                    // such, so a doctor can move it aside.
                    Error::Corrupt(crate::read::Corruption {
                        path: self.path.clone(),
                        reason: crate::read::CorruptReason::NotARegularFile,
                    })
                } else {
                    Error::open_nofollow("open lock file", &self.path, e)
                }
            })
    }

    fn acquire(&self, mode: Mode) -> Result<LockGuard> {
        let file = self.open()?;
        let locked = match mode {
            Mode::Exclusive => file.lock(),
            Mode::Shared => file.lock_shared(),
        };
        locked.map_err(|e| Error::io("lock", &self.path, e))?;
        Ok(self.guard(file))
    }

    #[cfg(test)]
    fn try_acquire(&self, mode: Mode) -> Result<Option<LockGuard>> {
        let file = self.open()?;
        let tried = match mode {
            Mode::Exclusive => file.try_lock(),
            Mode::Shared => file.try_lock_shared(),
        };
        match tried {
            Ok(()) => Ok(Some(self.guard(file))),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(Error::io("lock", &self.path, e)),
        }
    }

    fn guard(&self, file: File) -> LockGuard {
        LockGuard { _file: file }
    }

    /// Blocks until the lock is held exclusively.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the lock file cannot be opened or locked;
    /// [`Error::Symlink`] when it is a symlink.
    pub(crate) fn exclusive(&self) -> Result<LockGuard> {
        self.acquire(Mode::Exclusive)
    }

    /// Blocks until the lock is held shared.
    #[cfg(test)]
    fn shared(&self) -> Result<LockGuard> {
        self.acquire(Mode::Shared)
    }

    /// Takes the lock exclusively if it is free now.
    #[cfg(test)]
    pub(crate) fn try_exclusive(&self) -> Result<Option<LockGuard>> {
        self.try_acquire(Mode::Exclusive)
    }
}

/// What a read-modify-write decided.
#[derive(Debug)]
pub enum Decision<T, R> {
    /// Write this value durably, then return `R`.
    Write(T, R),
    /// Write nothing and return `R`.
    Keep(R),
}

/// Reads `path` as a `T`, lets `decide` choose, and writes the new value
/// durably, all under the exclusive lock of [`Lock::beside`]`(path)`.
///
/// Every process that changes `path` through this function is serialized, so
/// no update is lost. `decide` sees missing and corrupt files as such.
///
/// # Errors
///
/// Whatever `decide` returns, or a store error (converted) from the lock,
/// the read or the write. When `decide` fails nothing is written. The
/// commit point is the write's rename (see [`write_atomic_with`](crate::atomic::write_atomic_with)):
/// [`Error::OutcomeUnknown`] when the sync after it fails.
pub(crate) fn update_locked_with<T, R, E, F>(
    io: &dyn IoBackend,
    path: &Path,
    cap: u64,
    decide: F,
) -> Result<R, E>
where
    T: Serialize + DeserializeOwned,
    E: From<Error>,
    F: FnOnce(ReadOutcome<T>) -> Result<Decision<T, R>, E>,
{
    let _guard = Lock::beside(path).exclusive()?;
    let current = read_json(path, cap)?;
    match decide(current)? {
        Decision::Write(value, out) => {
            write_atomic_with(io, path, &to_json_bytes(path, &value)?)?;
            Ok(out)
        }
        Decision::Keep(out) => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Channel, StateDir};

    /// An exclusive holder keeps everyone out; shared holders let each
    /// other in and keep an exclusive taker out. The lock file stays.
    #[test]
    fn exclusive_excludes_all_and_shared_locks_coexist() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path()).unwrap();
        let dir = state.channel_dir(Channel::new("loop")).unwrap();
        let lock = state.lock_for(&dir.join_static("state.json")).unwrap();
        assert_eq!(lock.path, dir.as_path().join(".state.json.lock"));
        let held = lock.exclusive().unwrap();
        assert!(lock.try_acquire(Mode::Exclusive).unwrap().is_none());
        assert!(lock.try_acquire(Mode::Shared).unwrap().is_none());
        drop(held);

        let r1 = lock.shared().unwrap();
        let r2 = lock.try_acquire(Mode::Shared).unwrap();
        assert!(r2.is_some(), "shared locks coexist");
        assert!(lock.try_acquire(Mode::Exclusive).unwrap().is_none());
        drop((r1, r2));
        assert!(lock.try_acquire(Mode::Exclusive).unwrap().is_some());
        // The lock file is never removed or replaced.
        assert!(lock.path.exists());
    }
}
