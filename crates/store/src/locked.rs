//! A JSON state file held under its lock, for a sequence of decisions and
//! durable writes with no other writer in between.

use serde::Serialize;

use crate::error::Result;
use crate::lock::LockGuard;
use crate::path::StatePath;
use crate::state::StateDir;

/// A JSON file held under its exclusive lock (see [`StateDir::lock_json`]):
/// the value read when the lock was taken, then each value written since.
///
/// Where [`StateDir::update`] is one read-modify-write, `Locked` is for a
/// caller that writes, does something else (sends mail, appends to a log),
/// and writes again, all under one lock so that no other writer of the
/// file interleaves. The lock is [`StateDir::lock`](crate::StateDir::lock),
/// the one [`StateDir::update`] takes, so the two exclude each other. It is
/// released when the `Locked` is dropped, or by the kernel when the process
/// dies.
///
/// **Crashes.** Each [`Locked::write`] is a durable replace (commit point:
/// the rename over the file), so at every moment the file holds, whole,
/// the value read or one of the values written; a crash between two writes
/// leaves the last write that returned `Ok`. A sequence of writes is not a
/// transaction: a caller whose later step can fail writes each step so that
/// the next holder of the lock can finish or undo it. Readers that do not
/// take the lock ([`StateDir::read_json`]) see each write as it lands.
///
/// ```
/// use chipset_store::{Channel, StateDir};
///
/// let tmp = tempfile::tempdir()?;
/// let state = StateDir::open(tmp.path())?;
/// let path = state.channel_dir(Channel::new("loop"))?.join("count.json")?;
/// let mut locked = state.lock_json::<u64>(&path)?;
/// assert_eq!(locked.current(), None);
/// locked.write(1)?;
/// let next = locked.current().copied().unwrap_or(0) + 1;
/// locked.write(next)?;
/// drop(locked);
/// assert_eq!(state.read_json::<u64>(&path)?.value(), Some(2));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
#[must_use = "the lock is released when the `Locked` is dropped"]
pub struct Locked<T> {
    state: StateDir,
    path: StatePath,
    current: Option<T>,
    _guard: LockGuard,
}

impl<T> Locked<T> {
    pub(crate) fn new(
        state: StateDir,
        path: StatePath,
        current: Option<T>,
        guard: LockGuard,
    ) -> Self {
        Locked {
            state,
            path,
            current,
            _guard: guard,
        }
    }

    /// Returns the file's value: as read when the lock was taken, or as last
    /// written; `None` when there was no file (or the value was taken).
    pub fn current(&self) -> Option<&T> {
        self.current.as_ref()
    }

    /// Takes the value out, leaving `None`, to change it and write it back.
    /// The file is unchanged until [`Locked::write`].
    pub fn take(&mut self) -> Option<T> {
        self.current.take()
    }
}

impl<T: Serialize> Locked<T> {
    /// Durably replaces the file with the canonical JSON of `value` and
    /// keeps it as the current value. **Commit point:** the rename.
    ///
    /// # Errors
    ///
    /// As [`StateDir::write_json`]; on an error the current value is
    /// unchanged ([`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown):
    /// the file may already hold `value`).
    pub fn write(&mut self, value: T) -> Result<()> {
        self.state.write_json(&self.path, &value)?;
        self.current = Some(value);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::state::Channel;

    #[test]
    fn holds_the_lock_until_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path()).unwrap();
        let path = state
            .channel_dir(Channel::new("loop"))
            .unwrap()
            .join_static("a.json");
        let mut locked = state.lock_json::<String>(&path).unwrap();
        locked.write("one".to_owned()).unwrap();
        let lock = state.lock_for(&path).unwrap();
        assert!(
            lock.try_exclusive().unwrap().is_none(),
            "held while Locked lives"
        );
        drop(locked);
        assert!(lock.try_exclusive().unwrap().is_some(), "released on drop");
        let again = state.lock_json::<String>(&path).unwrap();
        assert_eq!(again.current().map(String::as_str), Some("one"));
        assert_eq!(&again.path, &path);
    }

    #[test]
    fn take_leaves_the_file_until_written() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path()).unwrap();
        let path = state
            .channel_dir(Channel::new("loop"))
            .unwrap()
            .join_static("n.json");
        state.write_json(&path, &7u64).unwrap();
        let mut locked = state.lock_json::<u64>(&path).unwrap();
        assert_eq!(locked.take(), Some(7));
        assert_eq!(locked.current(), None);
        assert_eq!(state.read_json::<u64>(&path).unwrap().value(), Some(7));
        locked.write(8).unwrap();
        assert_eq!(locked.current(), Some(&8));
        assert_eq!(state.read_json::<u64>(&path).unwrap().value(), Some(8));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "8\n");
    }

    #[test]
    fn a_corrupt_file_is_an_error_not_none_and_is_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path()).unwrap();
        let path = state
            .channel_dir(Channel::new("loop"))
            .unwrap()
            .join_static("bad.json");
        std::fs::write(&path, "{").unwrap();
        assert!(matches!(
            state.lock_json::<u64>(&path),
            Err(Error::Corrupt(c)) if path == c.path
        ));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{");
        // The lock was released with the error.
        let lock = state.lock_for(&path).unwrap();
        assert!(lock.try_exclusive().unwrap().is_some());
    }

    #[test]
    fn excludes_update_on_the_same_file() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path()).unwrap();
        let path = state
            .channel_dir(Channel::new("loop"))
            .unwrap()
            .join_static("u.json");
        let locked = state.lock_json::<u64>(&path).unwrap();
        // `update` takes the same lock file.
        let lock = crate::lock::Lock::for_file(&path);
        assert!(lock.try_exclusive().unwrap().is_none());
        drop(locked);
        state
            .update(&path, |_: crate::ReadOutcome<u64>| {
                Ok::<_, Error>(crate::Decision::Write(3, ()))
            })
            .unwrap();
        assert_eq!(state.lock_json::<u64>(&path).unwrap().current(), Some(&3));
    }

    /// Two writes under one `Locked`, from several threads: no other
    /// writer lands between them, so no increment is lost and every pair
    /// is seen whole (odd only inside a holder).
    #[test]
    fn no_writer_interleaves_between_writes() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path()).unwrap();
        let path = state
            .channel_dir(Channel::new("loop"))
            .unwrap()
            .join_static("pairs.json");
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..25 {
                        let mut locked = state.lock_json::<u64>(&path).unwrap();
                        let start = locked.current().copied().unwrap_or(0);
                        assert_eq!(start % 2, 0, "another holder's pair was cut");
                        locked.write(start + 1).unwrap();
                        locked.write(start + 2).unwrap();
                    }
                });
            }
        });
        assert_eq!(state.read_json::<u64>(&path).unwrap().value(), Some(200));
    }

    #[test]
    fn a_symlink_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path()).unwrap();
        let dir = state.channel_dir(Channel::new("loop")).unwrap();
        std::fs::write(tmp.path().join("elsewhere.json"), "1\n").unwrap();
        let path = dir.join_static("link.json");
        std::os::unix::fs::symlink(tmp.path().join("elsewhere.json"), &path).unwrap();
        assert!(matches!(
            state.lock_json::<u64>(&path),
            Err(Error::Symlink { .. })
        ));
    }
}
