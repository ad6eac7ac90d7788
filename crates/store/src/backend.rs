//! The I/O seam: every change the store makes to the filesystem goes through one [`IoBackend`].
//! Public with the `testing` feature, for the test doubles in `chipset-testkit`.

#![cfg_attr(
    not(feature = "testing"),
    allow(
        unreachable_pub,
        reason = "the seam is public only with the `testing` feature"
    )
)]

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use rustix::fs::{CWD, RenameFlags};

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
}

/// The filesystem calls the store makes to change state, in the spirit of
/// redb's `StorageBackend`: [`StateDir`](crate::StateDir) holds one (chosen
/// through [`StateOptions::io`](crate::StateOptions)) and every write, sync,
/// rename, link, mkdir, truncate and remove of the store goes through it.
/// Reads, listings and lock files do not: they change nothing a reader sees.
///
/// [`RealIo`] makes the real system calls. The methods that make a call
/// (create, open, write, sync, truncate, rename, link, mkdir, remove)
/// default to the real one, so that a test backend overrides only what it
/// changes. The methods that choose a faster path
/// ([`IoBackend::sync_order`], [`IoBackend::concurrent_batch_writes`],
/// [`IoBackend::create_unnamed`], and the write-back and link calls that
/// go with them) default instead to the path every backend can take, as
/// one that counts or records calls needs; [`RealIo`] turns them on.
///
/// Tests substitute backends that fail the Nth call or record every call
/// to replay power cuts (`chipset-testkit`'s `FaultIo` and `RecordIo`).
/// Such a backend overrides every method and denies
/// `clippy::missing_trait_methods`, so that no call, not even one the
/// trait gains later, passes it by. Implementations must be thread-safe;
/// the store calls them from any thread.
pub trait IoBackend: fmt::Debug + Send + Sync {
    /// Creates `path` exclusively (`O_CREAT | O_EXCL`, mode 0644), opened for
    /// reading and writing; `append` opens it in append mode.
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
    /// Opens an existing `path` for reading and appending, without following
    /// a symlink and without blocking on a FIFO.
    fn open_append(&self, path: &Path) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .append(true)
            .custom_flags(crate::read::nofollow_flags())
            .open(path)
    }
    /// Writes all of `bytes` to `file` (at its position, or its end in append mode).
    fn write_all(&self, file: &File, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let _ = path;
        let mut file = file;
        file.write_all(bytes)
    }
    /// Syncs `file`'s data and metadata (`fsync`).
    fn sync_all(&self, file: &File, path: &Path) -> io::Result<()> {
        let _ = path;
        file.sync_all()
    }
    /// Syncs `file`'s data (`fdatasync`).
    fn sync_data(&self, file: &File, path: &Path) -> io::Result<()> {
        let _ = path;
        file.sync_data()
    }
    /// Writes `file`'s data back to the disk and waits for the writes, with
    /// no cache flush (`sync_file_range`); used only under
    /// [`SyncOrder::WriteBackThenDir`]. The default syncs the data, which
    /// is stronger.
    fn write_back(&self, file: &File, path: &Path) -> io::Result<()> {
        self.sync_data(file, path)
    }
    /// Starts writing `file`'s dirty data back to the disk without waiting
    /// for it (`sync_file_range(WRITE)`), so that a batch's writes are in
    /// flight together before [`IoBackend::write_back`] waits for each one.
    /// Used only under [`SyncOrder::WriteBackThenDir`], and only a hint:
    /// the default does nothing, and a failure is left for `write_back` to
    /// meet and report.
    fn start_write_back(&self, file: &File, path: &Path) {
        let _ = (file, path);
    }
    /// Whether a batch may make and write its new files' temps on two
    /// threads at once (under [`SyncOrder::WriteBackThenDir`], from 16
    /// files on): those [`IoBackend::create_unnamed`],
    /// [`IoBackend::create_new`], [`IoBackend::write_all`] and (for a
    /// failed write's named temp) [`IoBackend::remove_file`] calls then
    /// come in no fixed order, and after a failure the other thread may
    /// still make an item's temp (removed again before the batch
    /// returns). The default, `false`, keeps every call on the caller's
    /// thread in item order, as a backend that counts or records calls
    /// needs; [`RealIo`] answers `true`.
    fn concurrent_batch_writes(&self) -> bool {
        false
    }
    /// Says how new files under `root` are made durable (see [`SyncOrder`]).
    /// The default, [`SyncOrder::FileThenDir`], is right everywhere.
    fn sync_order(&self, root: &Path) -> SyncOrder {
        let _ = root;
        SyncOrder::FileThenDir
    }
    /// Truncates (or extends) `file` to `len` bytes.
    fn set_len(&self, file: &File, path: &Path, len: u64) -> io::Result<()> {
        let _ = path;
        file.set_len(len)
    }
    /// Syncs the directory `dir`, making its entries durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
    /// Renames `from` to `to`, replacing `to`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }
    /// Renames `from` to `to` unless `to` exists (`ErrorKind::AlreadyExists`).
    /// Filesystems without `RENAME_NOREPLACE` answer `ErrorKind::Unsupported`.
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
    /// Links `to` to the file at `from`, never replacing `to`.
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::hard_link(from, to)
    }
    /// Creates a file with no name in the directory `dir` (`O_TMPFILE`),
    /// opened for reading and writing (mode 0644), for a new file's bytes
    /// to be written and made durable before
    /// [`IoBackend::link_unnamed`] gives it its name: nothing to remove
    /// when a step before fails, and nothing left behind by a crash.
    /// `Ok(None)` where no such file can be made here (the filesystem has
    /// no `O_TMPFILE`, or `/proc/self/fd`, through which the link may have
    /// to go, is missing): the store then writes a named temp file and
    /// renames it. The default makes none.
    fn create_unnamed(&self, dir: &Path) -> io::Result<Option<File>> {
        let _ = dir;
        Ok(None)
    }
    /// Gives `file`, made by [`IoBackend::create_unnamed`], the name `to`,
    /// never replacing `to` (`ErrorKind::AlreadyExists`): the no-clobber
    /// publish of a new file.
    fn link_unnamed(&self, file: &File, to: &Path) -> io::Result<()> {
        let _ = (file, to);
        Err(io::ErrorKind::Unsupported.into())
    }
    /// Creates the directory `path` (its parent must exist).
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        fs::create_dir(path)
    }
    /// Removes the directory entry `path` (not a directory).
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }
    /// Removes the empty directory `path`.
    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        fs::remove_dir(path)
    }
}

/// A shared [`IoBackend`], as [`StateOptions`](crate::StateOptions) holds it.
pub type SharedIo = Arc<dyn IoBackend>;

/// The real system calls: what every [`StateDir`](crate::StateDir) uses unless told otherwise.
/// [`IoBackend`]'s defaults, with the faster paths they leave off turned
/// on: the detected [`SyncOrder`], write-back, files made with no name,
/// and a batch's writes on two threads.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealIo;

impl IoBackend for RealIo {
    fn write_back(&self, file: &File, _path: &Path) -> io::Result<()> {
        match sync_file_range(file, WRITE_AND_WAIT) {
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

    fn start_write_back(&self, file: &File, _path: &Path) {
        // A failure here is met again, and reported, by `write_back`.
        let _ = sync_file_range(file, libc::SYNC_FILE_RANGE_WRITE);
    }

    fn concurrent_batch_writes(&self) -> bool {
        true
    }

    fn sync_order(&self, root: &Path) -> SyncOrder {
        detect_sync_order(root)
    }

    fn create_unnamed(&self, dir: &Path) -> io::Result<Option<File>> {
        use rustix::fs::{Mode, OFlags};
        if !proc_fds() {
            return Ok(None);
        }
        let flags = OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC;
        match rustix::fs::openat(CWD, dir, flags, Mode::from_raw_mode(0o644)) {
            Ok(fd) => Ok(Some(File::from(fd))),
            Err(e) if tmpfile_unsupported(e) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn link_unnamed(&self, file: &File, to: &Path) -> io::Result<()> {
        /// What this process learnt of `AT_EMPTY_PATH` ([`Flink`]).
        static FLINK: AtomicU8 = AtomicU8::new(Flink::UNKNOWN);
        link_learning(&FLINK, file, to, link_fd)
    }
}

/// Whether an `O_TMPFILE` open failed because this filesystem has none
/// (`EOPNOTSUPP`), or the kernel predates it and takes the directory
/// (`EISDIR`, `EINVAL`).
pub(crate) fn tmpfile_unsupported(e: rustix::io::Errno) -> bool {
    use rustix::io::Errno;
    e == Errno::OPNOTSUPP || e == Errno::ISDIR || e == Errno::INVAL
}

/// Whether `linkat(AT_EMPTY_PATH)` names a file for this process: not
/// asked yet, yes, or refused (it needs `CAP_DAC_READ_SEARCH` on kernels
/// before 6.10, and answers `ENOENT` without it).
struct Flink;

impl Flink {
    const UNKNOWN: u8 = 0;
    const WORKS: u8 = 1;
    const REFUSED: u8 = 2;
}

/// Names `file` `to` with `link`: through `AT_EMPTY_PATH` unless `flink`
/// says the kernel refuses it, else through the magic link; the first
/// answer is kept in `flink`. An `ENOENT` before anything is known may be
/// the refusal or `to`'s directory gone: the magic link tells them apart.
fn link_learning(
    flink: &AtomicU8,
    file: &File,
    to: &Path,
    link: impl Fn(&File, &Path, Link) -> io::Result<()>,
) -> io::Result<()> {
    let known = flink.load(Ordering::Relaxed);
    if known != Flink::REFUSED {
        match link(file, to, Link::EmptyPath) {
            Ok(()) => {
                flink.store(Flink::WORKS, Ordering::Relaxed);
                return Ok(());
            }
            Err(e) if known == Flink::UNKNOWN && e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    link(file, to, Link::ProcFd)?;
    if known == Flink::UNKNOWN {
        flink.store(Flink::REFUSED, Ordering::Relaxed);
    }
    Ok(())
}

/// How [`link_fd`] reaches the file it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    /// `linkat(fd, "", .., AT_EMPTY_PATH)`: one call with no path walk,
    /// for a process the kernel lets do it.
    EmptyPath,
    /// `linkat` of `/proc/self/fd/N`, following the descriptor's magic
    /// link: open to every process.
    ProcFd,
}

/// Gives the file open as `file` (made with `O_TMPFILE`) the name `to`,
/// never replacing one.
fn link_fd(file: &File, to: &Path, how: Link) -> io::Result<()> {
    use rustix::fs::AtFlags;
    use std::os::fd::AsRawFd;
    match how {
        Link::EmptyPath => rustix::fs::linkat(file, "", CWD, to, AtFlags::EMPTY_PATH)?,
        Link::ProcFd => {
            let link = format!("/proc/self/fd/{}", file.as_raw_fd());
            rustix::fs::linkat(CWD, link.as_str(), CWD, to, AtFlags::SYMLINK_FOLLOW)?;
        }
    }
    Ok(())
}

/// Whether `/proc/self/fd` is there, through which
/// [`RealIo::link_unnamed`] names an unnamed file where `AT_EMPTY_PATH`
/// is refused (asked once).
fn proc_fds() -> bool {
    static THERE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *THERE.get_or_init(|| Path::new("/proc/self/fd").is_dir())
}

/// `sync_file_range`'s flags that write every dirty page and wait for the
/// writes: `WB_SYNC_ALL` in the kernel, which skips no page (`WRITE` alone
/// is `WB_SYNC_NONE`, which may).
const WRITE_AND_WAIT: libc::c_uint = libc::SYNC_FILE_RANGE_WAIT_BEFORE
    | libc::SYNC_FILE_RANGE_WRITE
    | libc::SYNC_FILE_RANGE_WAIT_AFTER;

/// `sync_file_range(fd, 0, 0, flags)` over the whole file, without
/// flushing the disk cache. With `WAIT_BEFORE | WRITE | WAIT_AFTER` it
/// writes every dirty page of `file` (allocating delayed blocks) and waits
/// until the writes completed; with `WRITE` alone it starts them.
#[allow(unsafe_code)]
fn sync_file_range(file: &File, flags: libc::c_uint) -> io::Result<()> {
    use std::os::fd::AsRawFd;
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
    let Some(magic) = fs_magic(root) else {
        return SyncOrder::FileThenDir;
    };
    order_for(magic, || ext4_has_journal(Path::new("/sys"), root))
}

/// The `statfs` type of the filesystem holding `path`, if it can be read.
fn fs_magic(path: &Path) -> Option<u64> {
    let fs = rustix::fs::statfs(path).ok()?;
    #[allow(clippy::unnecessary_cast)]
    Some(fs.f_type as u64)
}

/// The order for a filesystem of type `magic` (`statfs`); `journal` says
/// whether an ext4 one runs a journal, and is asked only for ext4.
fn order_for(magic: u64, journal: impl FnOnce() -> bool) -> SyncOrder {
    match magic {
        XFS_SUPER_MAGIC => SyncOrder::WriteBackThenDir,
        EXT4_SUPER_MAGIC if journal() => SyncOrder::WriteBackThenDir,
        _ => SyncOrder::FileThenDir,
    }
}

/// Whether the ext2/3/4 filesystem holding `root` runs a journal: ext4
/// names its journal thread in `{sys}/fs/ext4/{device}/journal_task`, and
/// writes `<none>` there without one (`-O ^has_journal`, or ext2). `sys` is
/// where sysfs is mounted (`/sys`).
fn ext4_has_journal(sys: &Path, root: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = fs::metadata(root) else {
        return false;
    };
    let dev = meta.dev();
    let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
    let Ok(device) = fs::read_link(sys.join(format!("dev/block/{major}:{minor}"))) else {
        return false;
    };
    let Some(name) = device.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    fs::read_to_string(sys.join(format!("fs/ext4/{name}/journal_task")))
        .is_ok_and(|task| task.trim().parse::<u32>().is_ok())
}

#[cfg(test)]
mod tests;
