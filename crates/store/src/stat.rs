//! What is at a path, without reading it, and the two reads of files
//! outside the state root that chipset needs.
//!
//! Inside the root, [`StateDir::stat`](crate::StateDir::stat) answers "is
//! something there, and what" with the root and symlink checks of every
//! other method, and keeps "not there" (`Ok(None)`) apart from "could not
//! look" (an error). Outside it, [`StateDir::stat_outside`](crate::StateDir::stat_outside)
//! and [`StateDir::read_outside`](crate::StateDir::read_outside)
//! are for paths a user names (a body file, a token file, where to look
//! for a state root); they follow symlinks, as any program reading a
//! user's file does.

use std::fs::{self, File, Metadata};
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};

/// What kind of entry a path names (a symlink is not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub(crate) enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symlink (only from a stat that does not follow it).
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

/// What a stat found at a path: its kind ([`Stat::is_file`],
/// [`Stat::is_dir`]), size, identity, times and permission bits.
///
/// The times are `(seconds, nanoseconds)` since the Unix epoch, as the
/// kernel keeps them; a directory's mtime and ctime change with every
/// create, rename and unlink in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stat {
    kind: EntryKind,
    /// The size in bytes.
    pub len: u64,
    /// The device number.
    pub dev: u64,
    /// The inode number.
    pub ino: u64,
    /// The last modification time as `(seconds, nanoseconds)`.
    pub mtime: (i64, i64),
    /// The last status change time as `(seconds, nanoseconds)`.
    pub ctime: (i64, i64),
    /// The permission bits (`st_mode & 0o7777`).
    pub mode: u32,
}

impl Stat {
    pub(crate) fn from_metadata(meta: &Metadata) -> Self {
        let ft = meta.file_type();
        let kind = if ft.is_symlink() {
            EntryKind::Symlink
        } else if ft.is_dir() {
            EntryKind::Dir
        } else if ft.is_file() {
            EntryKind::File
        } else {
            EntryKind::Other
        };
        Stat {
            kind,
            len: meta.len(),
            dev: meta.dev(),
            ino: meta.ino(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            mode: meta.mode() & 0o7777,
        }
    }

    /// Returns the kind of entry.
    #[cfg(test)]
    pub(crate) fn kind(&self) -> EntryKind {
        self.kind
    }

    /// Returns true for a regular file.
    pub fn is_file(&self) -> bool {
        self.kind == EntryKind::File
    }

    /// Returns true for a directory.
    pub fn is_dir(&self) -> bool {
        self.kind == EntryKind::Dir
    }

    /// Returns the last modification time, or `None` when it is before the
    /// Unix epoch (a filesystem without mtimes, a clock set wrong).
    pub fn modified(&self) -> Option<SystemTime> {
        let (secs, nanos) = self.mtime;
        let secs = u64::try_from(secs).ok()?;
        let nanos = u32::try_from(nanos).ok()?;
        UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
    }
}

/// True for the errors that mean "nothing can be at this path": no entry,
/// or a file where a directory on the way should be.
pub(crate) fn is_absent(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

/// `Ok(None)` for "not found", the value or any other error as it is: the
/// one mapping by which "not there" stays apart from "could not look" (an
/// entry gone between a listing and its stat, a path stat-ed by the fallback,
/// a temp another sweeper removed).
pub(crate) fn none_if_not_found<T>(result: io::Result<T>) -> io::Result<Option<T>> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

impl crate::StateDir {
    /// Stats `path`, a path outside the state root that a user named,
    /// following symlinks. Returns `None` when nothing is there (or a file
    /// stands where a directory on the way should be).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the path cannot be looked at (permission denied, an
    /// I/O error): "unreadable" is never "absent".
    pub fn stat_outside(path: &Path) -> Result<Option<Stat>> {
        match fs::metadata(path) {
            Ok(meta) => Ok(Some(Stat::from_metadata(&meta))),
            Err(e) if is_absent(&e) => Ok(None),
            Err(e) => Err(Error::io("stat", path, e)),
        }
    }

    /// Reads at most `cap` bytes of a file outside the state root that a user
    /// named (a message body, a token), following symlinks. Anything readable
    /// is accepted, a FIFO or `/dev/stdin` included, since such a file is the
    /// user's input, not state.
    ///
    /// Returns a plain [`io::Error`] so the caller can say which of its inputs
    /// failed: a missing file is [`io::ErrorKind::NotFound`], one over the cap
    /// [`io::ErrorKind::FileTooLarge`].
    ///
    /// # Errors
    ///
    /// As above, and whatever opening or reading the file returns.
    pub fn read_outside(path: &Path, cap: u64) -> io::Result<Vec<u8>> {
        let file = File::open(path)?;
        let mut buf = Vec::new();
        file.take(cap.saturating_add(1)).read_to_end(&mut buf)?;
        if buf.len() as u64 > cap {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                format!("larger than the {cap}-byte limit"),
            ));
        }
        Ok(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StateDir;

    /// "Not found" is `None`; every other failure stays an error of its
    /// own kind, so "could not look" is never taken for "not there".
    #[test]
    fn only_not_found_is_none() {
        assert_eq!(none_if_not_found(Ok(7)).unwrap(), Some(7));
        let gone = io::Error::from(io::ErrorKind::NotFound);
        assert_eq!(none_if_not_found::<u8>(Err(gone)).unwrap(), None);
        for kind in [
            io::ErrorKind::PermissionDenied,
            io::ErrorKind::InvalidFilename,
        ] {
            let err = none_if_not_found::<u8>(Err(io::Error::from(kind))).unwrap_err();
            assert_eq!(err.kind(), kind);
        }
    }

    #[test]
    fn stat_outside_tells_missing_from_present() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        fs::write(&file, "abc").unwrap();
        let s = StateDir::stat_outside(&file).unwrap().unwrap();
        assert!(s.is_file() && !s.is_dir());
        assert_eq!(s.len, 3);
        {
            use std::os::unix::fs::PermissionsExt as _;
            fs::set_permissions(&file, fs::Permissions::from_mode(0o640)).unwrap();
        }
        assert_eq!(StateDir::stat_outside(&file).unwrap().unwrap().mode, 0o640);
        assert!(
            StateDir::stat_outside(tmp.path())
                .unwrap()
                .unwrap()
                .is_dir()
        );
        assert_eq!(
            StateDir::stat_outside(&tmp.path().join("none")).unwrap(),
            None
        );
        // A file where a directory should be: nothing can be there.
        assert_eq!(StateDir::stat_outside(&file.join("below")).unwrap(), None);
    }

    #[test]
    fn read_outside_is_bounded() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        fs::write(&file, "abcd").unwrap();
        assert_eq!(StateDir::read_outside(&file, 4).unwrap(), b"abcd");
        let over = StateDir::read_outside(&file, 3).unwrap_err();
        assert_eq!(over.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(over.to_string(), "larger than the 3-byte limit");
        let missing = StateDir::read_outside(&tmp.path().join("none"), 3).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
    }

    /// `stat` finds an entry of every kind, a dangling symlink included (it
    /// is there; it is not followed), tells the kinds apart, and is `None`
    /// only when nothing is there.
    #[test]
    fn stat_sees_every_kind_of_entry() {
        use crate::{Channel, StateDir};
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path().join("state")).unwrap();
        let dir = state.channel_dir(Channel::new("hooks")).unwrap();
        fs::write(dir.join_static("file"), "{}").unwrap();
        fs::create_dir(dir.join_static("dir")).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("nowhere"), dir.join_static("dangling"))
            .unwrap();
        crate::test_support::make_fifo(dir.join_static("fifo"));
        for (name, kind) in [
            ("file", EntryKind::File),
            ("dir", EntryKind::Dir),
            ("dangling", EntryKind::Symlink),
            ("fifo", EntryKind::Other),
        ] {
            let path = dir.join(name).unwrap();
            assert!(state.stat(&path).unwrap().is_some(), "{name}");
            assert_eq!(state.stat(&path).unwrap().map(|s| s.kind()), Some(kind));
        }
        assert!(state.stat(&dir.join_static("missing")).unwrap().is_none());
        assert_eq!(state.stat(&dir.join_static("missing")).unwrap(), None);
    }

    /// Every field of a [`Stat`] is the one the kernel reports for that
    /// entry: identity (device, inode), size and emptiness, and both times
    /// to the nanosecond.
    #[test]
    fn a_stat_carries_what_the_kernel_reports() {
        use std::fs::FileTimes;
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        fs::write(&file, "abc").unwrap();
        let when = UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789);
        File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_times(FileTimes::new().set_modified(when))
            .unwrap();
        let meta = fs::symlink_metadata(&file).unwrap();
        let s = StateDir::stat_outside(&file).unwrap().unwrap();
        assert_eq!((s.kind(), s.len, s.len == 0), (EntryKind::File, 3, false));
        assert_eq!((s.dev, s.ino), (meta.dev(), meta.ino()));
        assert_eq!(s.mtime, (1_700_000_000, 123_456_789));
        assert_eq!(s.modified(), Some(when));
        assert_eq!(s.ctime, (meta.ctime(), meta.ctime_nsec()));
        assert!(s.ctime.0 > 1_700_000_000, "{:?}", s.ctime);

        let empty = tmp.path().join("e");
        fs::write(&empty, "").unwrap();
        let e = StateDir::stat_outside(&empty).unwrap().unwrap();
        assert_eq!((e.len, e.len == 0), (0, true));
        // Two entries on one filesystem: same device, different inodes.
        assert_eq!(e.dev, s.dev);
        assert_ne!(e.ino, s.ino);
    }

    /// A mtime before the Unix epoch has no `SystemTime` here: `None`, not
    /// a wrapped or clamped time.
    #[test]
    fn a_mtime_before_the_epoch_is_not_a_time() {
        use std::fs::FileTimes;
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        fs::write(&file, "").unwrap();
        let before = UNIX_EPOCH - Duration::from_secs(86_400);
        File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_times(FileTimes::new().set_modified(before))
            .unwrap();
        let s = StateDir::stat_outside(&file).unwrap().unwrap();
        assert_eq!(s.mtime, (-86_400, 0));
        assert_eq!(s.modified(), None);
    }

    /// A path that cannot be looked at (a name over the 255-byte NAME_MAX)
    /// is an error naming it, never "absent".
    #[test]
    fn stat_outside_tells_unreadable_from_absent() {
        let tmp = tempfile::tempdir().unwrap();
        let long = tmp.path().join("n".repeat(256));
        match StateDir::stat_outside(&long) {
            Err(Error::Io { op, path, source }) => {
                assert_eq!((op, &path), ("stat", &long));
                assert_eq!(
                    source.raw_os_error(),
                    Some(rustix::io::Errno::NAMETOOLONG.raw_os_error())
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn modified_is_the_mtime() {
        let tmp = tempfile::tempdir().unwrap();
        let s = StateDir::stat_outside(tmp.path()).unwrap().unwrap();
        let m = s.modified().unwrap();
        let d = m.duration_since(UNIX_EPOCH).unwrap();
        assert_eq!(d.as_secs() as i64, s.mtime.0);
        assert_eq!(i64::from(d.subsec_nanos()), s.mtime.1);
    }
}
