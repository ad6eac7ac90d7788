//! Advisory locks on dedicated lock files, and the locked read-modify-write.

use std::fs::{File, OpenOptions, TryLockError};

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::atomic::{to_json_bytes, write_atomic_with};
use crate::backend::IoBackend;
use crate::error::{Error, Result};
use crate::path::StatePath;
use crate::read::{ReadOutcome, read_json};

/// A lock file: an empty file that is only ever locked, never renamed,
/// replaced or removed, so every process locks the same inode.
///
/// Locks are `flock`-style advisory locks (std's `File::lock`): they belong to
/// the open file, so two handles in one process exclude each other too, and
/// the kernel releases them when the process dies. A crash never leaves a
/// lock behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lock {
    path: PathBuf,
}

/// A held lock, released on drop.
#[derive(Debug)]
#[must_use = "the lock is released when the guard is dropped"]
pub struct LockGuard {
    _file: File,
    path: PathBuf,
}

impl LockGuard {
    /// Returns the lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[derive(Clone, Copy)]
enum Mode {
    Exclusive,
    Shared,
}

impl Lock {
    /// Returns the lock that guards `data`: `.{name}.lock` in the same
    /// directory. [`StateDir::lock_for`](crate::StateDir::lock_for) returns
    /// the same lock and makes its directory first.
    pub fn for_file(data: &StatePath) -> Self {
        Self::beside(data)
    }

    /// [`Lock::for_file`] on a path the store checked or derived itself.
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

    /// Returns the lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
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

    fn acquire_timeout(&self, mode: Mode, timeout: Duration) -> Result<LockGuard> {
        let deadline = Instant::now() + timeout;
        let mut pause = Duration::from_micros(100);
        loop {
            if let Some(g) = self.try_acquire(mode)? {
                return Ok(g);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::LockTimeout {
                    path: self.path.clone(),
                    timeout,
                });
            }
            thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(Duration::from_millis(10));
        }
    }

    fn guard(&self, file: File) -> LockGuard {
        LockGuard {
            _file: file,
            path: self.path.clone(),
        }
    }

    /// Blocks until the lock is held exclusively.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the lock file cannot be opened or locked;
    /// [`Error::Symlink`] when it is a symlink.
    pub fn exclusive(&self) -> Result<LockGuard> {
        self.acquire(Mode::Exclusive)
    }

    /// Blocks until the lock is held shared.
    ///
    /// # Errors
    ///
    /// As [`Lock::exclusive`].
    pub fn shared(&self) -> Result<LockGuard> {
        self.acquire(Mode::Shared)
    }

    /// Takes the lock exclusively if it is free now.
    ///
    /// # Errors
    ///
    /// As [`Lock::exclusive`].
    pub fn try_exclusive(&self) -> Result<Option<LockGuard>> {
        self.try_acquire(Mode::Exclusive)
    }

    /// Takes the lock shared if no one holds it exclusively now.
    ///
    /// # Errors
    ///
    /// As [`Lock::exclusive`].
    pub fn try_shared(&self) -> Result<Option<LockGuard>> {
        self.try_acquire(Mode::Shared)
    }

    /// Waits at most `timeout` for the lock, exclusively.
    ///
    /// # Errors
    ///
    /// [`Error::LockTimeout`] when the time runs out; otherwise as [`Lock::exclusive`].
    pub fn exclusive_timeout(&self, timeout: Duration) -> Result<LockGuard> {
        self.acquire_timeout(Mode::Exclusive, timeout)
    }

    /// Waits at most `timeout` for the lock, shared.
    ///
    /// # Errors
    ///
    /// As [`Lock::exclusive_timeout`].
    pub fn shared_timeout(&self, timeout: Duration) -> Result<LockGuard> {
        self.acquire_timeout(Mode::Shared, timeout)
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
/// durably, all under the exclusive lock of [`Lock::for_file`]`(path)`.
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
