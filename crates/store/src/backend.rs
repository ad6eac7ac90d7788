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
    /// Writing a file's data back to the disk and waiting for it, without a
    /// cache flush (`sync_file_range`); see [`SyncOrder::WriteBackThenDir`].
    WriteBack,
    /// Syncing a directory's entries.
    SyncDir,
    /// Syncing a whole filesystem (`syncfs`): every file's written data.
    SyncFs,
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
    pub const ALL: [IoOp; 12] = [
        IoOp::Create,
        IoOp::Open,
        IoOp::Write,
        IoOp::Sync,
        IoOp::WriteBack,
        IoOp::SyncDir,
        IoOp::SyncFs,
        IoOp::Rename,
        IoOp::Link,
        IoOp::Mkdir,
        IoOp::Truncate,
        IoOp::Remove,
    ];
}

/// How a new file's data is made durable before its name: what a filesystem
/// lets the store skip. [`IoBackend::sync_order`] answers it for a state
/// root, once per [`StateDir`](crate::StateDir).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SyncOrder {
    /// `fsync` each file, publish it, `fsync` the directory: two cache
    /// flushes per publish. Right on every filesystem that honours `fsync`.
    FileThenDir,
    /// Write each file's data back and wait for it (`sync_file_range` with
    /// `WAIT_BEFORE | WRITE | WAIT_AFTER`: the blocks are allocated and
    /// written, the disk cache is not flushed), publish it, `fsync` the
    /// directory: one cache flush per publish. Right only on a journalling
    /// filesystem that commits its journal in order and flushes the disk
    /// cache before each commit (ext4 with a journal, XFS): the commit that
    /// makes the name durable comes after the data's writes completed, its
    /// flush makes them durable, and it commits the file's allocation and
    /// size too (journalled earlier, committed in order), so the name is
    /// never durable without the data.
    WriteBackThenDir,
    /// A single file as [`SyncOrder::FileThenDir`]; a batch
    /// ([`StateDir::create_new_batch`](crate::StateDir::create_new_batch))
    /// writes every temp, then makes all their data durable with one
    /// `syncfs` of the filesystem and one more cache flush (a directory
    /// `fsync`: on ext4 without a journal, `syncfs` writes the inode tables
    /// after its own flush), then names them, then `fsync`s each directory:
    /// three cache flushes for the batch. `syncfs` also waits for every
    /// other process's dirty data on the filesystem, and reports a
    /// write-back error of any file on it (the batch then fails, nothing
    /// published). Chosen only where [`IoBackend::sync_order`] says so.
    SyncFsThenDir,
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
    /// Writes `file`'s data back to the disk and waits for the writes, with
    /// no cache flush (`sync_file_range`); used only under
    /// [`SyncOrder::WriteBackThenDir`]. The default syncs the data, which
    /// is stronger.
    fn write_back(&self, file: &File, path: &Path) -> io::Result<()> {
        self.sync_data(file, path)
    }
    /// Says how new files under `root` are made durable (see [`SyncOrder`]).
    /// The default, [`SyncOrder::FileThenDir`], is right everywhere.
    fn sync_order(&self, root: &Path) -> SyncOrder {
        let _ = root;
        SyncOrder::FileThenDir
    }
    /// Syncs the whole filesystem holding `file` (`syncfs`): every file's
    /// data written before the call. Since Linux 5.8 it reports a
    /// write-back error of any file of the filesystem since `file` was
    /// opened. Used only under [`SyncOrder::SyncFsThenDir`]; `path` names
    /// the file for errors.
    fn sync_fs(&self, file: &File, path: &Path) -> io::Result<()> {
        let _ = path;
        rustix::fs::syncfs(file).map_err(Into::into)
    }
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

    fn write_back(&self, file: &File, _path: &Path) -> io::Result<()> {
        match sync_file_range(file) {
            // Not a Linux with sync_file_range, or a file it cannot take:
            // sync the data, which is stronger.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENOSYS | libc::EINVAL | libc::ESPIPE)
                ) =>
            {
                file.sync_data()
            }
            r => r,
        }
    }

    fn sync_order(&self, root: &Path) -> SyncOrder {
        detect_sync_order(root)
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

/// `sync_file_range(fd, 0, 0, WAIT_BEFORE | WRITE | WAIT_AFTER)`: writes
/// every dirty page of `file` (allocating delayed blocks) and waits until
/// the writes completed, without flushing the disk cache.
#[allow(unsafe_code)]
fn sync_file_range(file: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE
        | libc::SYNC_FILE_RANGE_WRITE
        | libc::SYNC_FILE_RANGE_WAIT_AFTER;
    // SAFETY: the call takes a file descriptor and integers, no pointers;
    // the descriptor is borrowed from `file`, which is open for the call.
    let r = unsafe { libc::sync_file_range(file.as_raw_fd(), 0, 0, flags) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `statfs` magic numbers (`linux/magic.h`).
const EXT4_SUPER_MAGIC: u64 = 0xEF53;
const XFS_SUPER_MAGIC: u64 = 0x5846_5342;

/// [`SyncOrder::WriteBackThenDir`] on XFS and on ext4 mounted with a
/// journal; [`SyncOrder::FileThenDir`] everywhere else, and whenever the
/// answer is not certain.
fn detect_sync_order(root: &Path) -> SyncOrder {
    let Ok(fs) = rustix::fs::statfs(root) else {
        return SyncOrder::FileThenDir;
    };
    #[allow(clippy::unnecessary_cast)]
    let magic = fs.f_type as u64;
    match magic {
        XFS_SUPER_MAGIC => SyncOrder::WriteBackThenDir,
        EXT4_SUPER_MAGIC if ext4_has_journal(root) => SyncOrder::WriteBackThenDir,
        _ => SyncOrder::FileThenDir,
    }
}

/// Whether the ext2/3/4 filesystem holding `root` runs a journal: ext4
/// names its journal thread in `/sys/fs/ext4/{device}/journal_task`, and
/// writes `<none>` there without one (`-O ^has_journal`, or ext2).
fn ext4_has_journal(root: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = fs::metadata(root) else {
        return false;
    };
    let dev = meta.dev();
    let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
    let Ok(device) = fs::read_link(format!("/sys/dev/block/{major}:{minor}")) else {
        return false;
    };
    let Some(name) = device.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    fs::read_to_string(format!("/sys/fs/ext4/{name}/journal_task"))
        .is_ok_and(|task| task.trim().parse::<u32>().is_ok())
}
