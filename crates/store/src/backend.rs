//! The I/O seam: every change the store makes to the filesystem goes through one [`IoBackend`].

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;

use rustix::fs::{CWD, RenameFlags};

/// The kinds of call an [`IoBackend`] makes, for fault injectors and recorders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum IoOp {
    /// Creating a new file exclusively (a temp file, a new log).
    Create,
    /// Opening an existing file for appending or truncating.
    Open,
    /// Writing bytes to an open file.
    Write,
    /// Syncing a file's data (`fsync` or `fdatasync`).
    Sync,
    /// Syncing a directory's entries.
    SyncDir,
    /// Renaming, replacing or not ([`IoBackend::rename`], [`IoBackend::rename_noreplace`]).
    Rename,
    /// Linking a second name to a file.
    Link,
    /// Creating a directory.
    Mkdir,
    /// Truncating an open file.
    Truncate,
    /// Removing a file or an empty directory.
    Remove,
}

impl IoOp {
    /// Every kind.
    pub const ALL: [IoOp; 10] = [
        IoOp::Create,
        IoOp::Open,
        IoOp::Write,
        IoOp::Sync,
        IoOp::SyncDir,
        IoOp::Rename,
        IoOp::Link,
        IoOp::Mkdir,
        IoOp::Truncate,
        IoOp::Remove,
    ];
}

/// The filesystem calls the store makes to change state, in the spirit of
/// redb's `StorageBackend`: [`StateDir`](crate::StateDir) holds one (chosen
/// through [`StateOptions::io`](crate::StateOptions)) and every write, sync,
/// rename, link, mkdir, truncate and remove of the store goes through it.
/// Reads, listings and lock files do not: they change nothing a reader sees.
///
/// [`RealIo`] makes the real system calls. Tests substitute backends that
/// fail the Nth call or record every call to replay power cuts (the
/// `testing` feature's `chipset_store::testing`). Implementations must be
/// thread-safe; the store calls them from any thread.
pub trait IoBackend: fmt::Debug + Send + Sync {
    /// Creates `path` exclusively (`O_CREAT | O_EXCL`, mode 0644), opened for
    /// reading and writing; `append` opens it in append mode.
    fn create_new(&self, path: &Path, append: bool) -> io::Result<File>;
    /// Opens an existing `path` for reading and appending, without following
    /// a symlink and without blocking on a FIFO.
    fn open_append(&self, path: &Path) -> io::Result<File>;
    /// Writes all of `bytes` to `file` (at its position, or its end in append mode).
    fn write_all(&self, file: &File, path: &Path, bytes: &[u8]) -> io::Result<()>;
    /// Syncs `file`'s data and metadata (`fsync`).
    fn sync_all(&self, file: &File, path: &Path) -> io::Result<()>;
    /// Syncs `file`'s data (`fdatasync`).
    fn sync_data(&self, file: &File, path: &Path) -> io::Result<()>;
    /// Truncates (or extends) `file` to `len` bytes.
    fn set_len(&self, file: &File, path: &Path, len: u64) -> io::Result<()>;
    /// Syncs the directory `dir`, making its entries durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Renames `from` to `to`, replacing `to`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Renames `from` to `to` unless `to` exists (`ErrorKind::AlreadyExists`).
    /// Filesystems without `RENAME_NOREPLACE` answer `ErrorKind::Unsupported`.
    fn rename_noreplace(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Links `to` to the file at `from`, never replacing `to`.
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Creates the directory `path` (its parent must exist).
    fn create_dir(&self, path: &Path) -> io::Result<()>;
    /// Removes the directory entry `path` (not a directory).
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Removes the empty directory `path`.
    fn remove_dir(&self, path: &Path) -> io::Result<()>;
}

/// A shared [`IoBackend`], as [`StateOptions`](crate::StateOptions) holds it.
pub type SharedIo = Arc<dyn IoBackend>;

/// The real system calls: what every [`StateDir`](crate::StateDir) uses unless told otherwise.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealIo;

impl RealIo {
    /// Returns the real backend, shared.
    pub fn shared() -> SharedIo {
        Arc::new(RealIo)
    }
}

impl IoBackend for RealIo {
    fn create_new(&self, path: &Path, append: bool) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .append(append)
            .create_new(true)
            .mode(0o644)
            .custom_flags(crate::read::nofollow_flags())
            .open(path)
    }

    fn open_append(&self, path: &Path) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .append(true)
            .custom_flags(crate::read::nofollow_flags())
            .open(path)
    }

    fn write_all(&self, mut file: &File, _path: &Path, bytes: &[u8]) -> io::Result<()> {
        file.write_all(bytes)
    }

    fn sync_all(&self, file: &File, _path: &Path) -> io::Result<()> {
        file.sync_all()
    }

    fn sync_data(&self, file: &File, _path: &Path) -> io::Result<()> {
        file.sync_data()
    }

    fn set_len(&self, file: &File, _path: &Path, len: u64) -> io::Result<()> {
        file.set_len(len)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn rename_noreplace(&self, from: &Path, to: &Path) -> io::Result<()> {
        use rustix::io::Errno;
        match rustix::fs::renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
            Ok(()) => Ok(()),
            Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => {
                Err(io::Error::from(io::ErrorKind::Unsupported))
            }
            Err(e) => Err(e.into()),
        }
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::hard_link(from, to)
    }

    fn create_dir(&self, path: &Path) -> io::Result<()> {
        fs::create_dir(path)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        fs::remove_dir(path)
    }
}
