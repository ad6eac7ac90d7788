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
/// [`RealIo`] makes the real system calls. Tests substitute backends that
/// fail the Nth call or record every call to replay power cuts
/// (`chipset-testkit`'s `FaultIo` and `RecordIo`). Implementations must be
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
    /// Starts writing `file`'s dirty data back to the disk without waiting
    /// for it (`sync_file_range(WRITE)`), so that a batch's writes are in
    /// flight together before [`IoBackend::write_back`] waits for each one.
    /// Used only under [`SyncOrder::WriteBackThenDir`], and only a hint:
    /// the default does nothing, and a failure is left for `write_back` to
    /// meet and report.
    fn start_write_back(&self, file: &File, path: &Path) {
        let _ = (file, path);
    }
    /// Says how new files under `root` are made durable (see [`SyncOrder`]).
    /// The default, [`SyncOrder::FileThenDir`], is right everywhere.
    fn sync_order(&self, root: &Path) -> SyncOrder {
        let _ = root;
        SyncOrder::FileThenDir
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
    /// Creates a file with no name in the directory `dir` (`O_TMPFILE`),
    /// opened for reading and writing (mode 0644), for a new file's bytes
    /// to be written and made durable before
    /// [`IoBackend::link_unnamed`] gives it its name: nothing to remove
    /// when a step before fails, and nothing left behind by a crash.
    /// `Ok(None)` where no such file can be made here (the filesystem, or
    /// `/proc/self/fd`, which the link goes through, is missing): the
    /// store then writes a named temp file and renames it. The default
    /// makes none.
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
        use rustix::fs::AtFlags;
        use std::os::fd::AsRawFd;
        // The descriptor's magic link: `linkat` follows it to the unnamed
        // file (`AT_EMPTY_PATH` would need `CAP_DAC_READ_SEARCH`).
        let link = format!("/proc/self/fd/{}", file.as_raw_fd());
        rustix::fs::linkat(CWD, link.as_str(), CWD, to, AtFlags::SYMLINK_FOLLOW)?;
        Ok(())
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

/// Whether an `O_TMPFILE` open failed because this filesystem has none
/// (`EOPNOTSUPP`), or the kernel predates it and takes the directory
/// (`EISDIR`, `EINVAL`).
pub(crate) fn tmpfile_unsupported(e: rustix::io::Errno) -> bool {
    use rustix::io::Errno;
    e == Errno::OPNOTSUPP || e == Errno::ISDIR || e == Errno::INVAL
}

/// Whether `/proc/self/fd` is there, through which
/// [`RealIo::link_unnamed`] names an unnamed file (asked once).
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
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    /// A descriptor the kernel refuses for I/O (`O_PATH`): every call on it
    /// fails with `EBADF`.
    fn path_only(path: &Path) -> File {
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH)
            .open(path)
            .unwrap()
    }

    /// The real backend makes its calls: a descriptor the kernel refuses
    /// is reported, never taken as synced.
    #[test]
    fn the_real_calls_report_what_the_kernel_refuses() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("a.json");
        fs::write(&path, b"{}").unwrap();
        let file = path_only(&path);
        let ebadf = |r: io::Result<()>, call: &str| {
            assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::EBADF), "{call}");
        };
        ebadf(RealIo.sync_all(&file, &path), "sync_all");
        ebadf(RealIo.sync_data(&file, &path), "sync_data");
        ebadf(RealIo.write_back(&file, &path), "write_back");
        ebadf(RealIo.set_len(&file, &path, 0), "set_len");
        // And on a good descriptor they succeed.
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        RealIo.sync_all(&file, &path).unwrap();
        RealIo.sync_data(&file, &path).unwrap();
        RealIo.write_back(&file, &path).unwrap();
        RealIo.sync_dir(tmp.path()).unwrap();
        let gone = tmp.path().join("gone");
        assert_eq!(
            RealIo.sync_dir(&gone).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }

    /// A file `sync_file_range` cannot take (a FIFO: `ESPIPE`) is synced
    /// with `fdatasync` instead, and the answer is `fdatasync`'s (which
    /// refuses a FIFO with `EINVAL`).
    #[test]
    fn a_write_back_the_kernel_cannot_do_falls_back_to_a_data_sync() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("fifo");
        crate::test_support::make_fifo(&fifo);
        // Read and write: opening a FIFO so does not wait for a peer.
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fifo)
            .unwrap();
        assert_eq!(
            sync_file_range(&file, WRITE_AND_WAIT)
                .unwrap_err()
                .raw_os_error(),
            Some(libc::ESPIPE)
        );
        assert_eq!(
            file.sync_data().unwrap_err().raw_os_error(),
            Some(libc::EINVAL)
        );
        assert_eq!(
            RealIo.write_back(&file, &fifo).unwrap_err().raw_os_error(),
            Some(libc::EINVAL)
        );
    }

    /// `write_back` writes the file's dirty pages to the disk and waits for
    /// them: afterwards the page cache holds none dirty or under write-back
    /// (read with `cachestat`, Linux 6.5).
    #[test]
    fn a_write_back_leaves_no_dirty_page() {
        let tmp = on_disk();
        let path = tmp.path().join("data");
        let file = dirty_file(&path);
        RealIo.write_back(&file, &path).unwrap();
        let after = cachestat(&file);
        assert_eq!((after.nr_dirty, after.nr_writeback), (0, 0), "{after:?}");
        assert!(after.nr_cache > 0, "the pages are still cached: {after:?}");
    }

    /// `start_write_back` starts the writes of the file's dirty pages and
    /// does not wait for them: afterwards none is dirty (each is written or
    /// under write-back).
    #[test]
    fn a_started_write_back_leaves_no_page_dirty() {
        let tmp = on_disk();
        let path = tmp.path().join("data");
        let file = dirty_file(&path);
        RealIo.start_write_back(&file, &path);
        let after = cachestat(&file);
        assert_eq!(after.nr_dirty, 0, "{after:?}");
    }

    /// A new file at `path` with pages in the page cache that are dirty.
    /// The kernel's flusher may write pages back on its own at any moment
    /// (a busy machine): it writes again until some are seen dirty.
    fn dirty_file(path: &Path) -> File {
        let mut file = File::create_new(path).unwrap();
        let mut before = CacheStat::default();
        for _ in 0..20 {
            file.write_all(&vec![7u8; 1 << 20]).unwrap();
            before = cachestat(&file);
            if before.nr_dirty > 0 {
                break;
            }
        }
        assert!(
            before.nr_dirty > 0,
            "written, not yet written back: {before:?}"
        );
        file
    }

    /// A temporary directory on a filesystem whose pages are written back:
    /// not tmpfs or ramfs, whose pages are never dirty. The system's
    /// temporary directory (often a tmpfs), else the test binary's own,
    /// else `/var/tmp`.
    fn on_disk() -> tempfile::TempDir {
        const TMPFS_MAGIC: u64 = 0x0102_1994;
        const RAMFS_MAGIC: u64 = 0x8584_58f6;
        let exe = std::env::current_exe().unwrap();
        let candidates = [
            std::env::temp_dir(),
            exe.parent().unwrap().to_owned(),
            std::path::PathBuf::from("/var/tmp"),
        ];
        for dir in &candidates {
            if fs_magic(dir).is_some_and(|m| m != TMPFS_MAGIC && m != RAMFS_MAGIC) {
                return tempfile::tempdir_in(dir).unwrap();
            }
        }
        panic!("no directory on a disk to write in: {candidates:?} are all in memory");
    }

    /// `struct cachestat` (`linux/mman.h`).
    #[repr(C)]
    #[derive(Debug, Default)]
    struct CacheStat {
        nr_cache: u64,
        nr_dirty: u64,
        nr_writeback: u64,
        nr_evicted: u64,
        nr_recently_evicted: u64,
    }

    /// The page cache's counts for the whole of `file`.
    #[allow(unsafe_code)]
    fn cachestat(file: &File) -> CacheStat {
        use std::os::fd::AsRawFd;
        /// `cachestat`'s number, the same on every architecture (new calls
        /// share one table since Linux 5.1).
        const SYS_CACHESTAT: libc::c_long = 451;
        // `struct cachestat_range`: offset 0, length 0 (to the end).
        let range = [0u64; 2];
        let mut stat = CacheStat::default();
        // SAFETY: both pointers are to live, properly sized `repr(C)`
        // values for the duration of the call; the descriptor is borrowed
        // from `file`, open for the call.
        let r = unsafe {
            libc::syscall(
                SYS_CACHESTAT,
                file.as_raw_fd(),
                range.as_ptr(),
                &raw mut stat,
                0,
            )
        };
        assert_eq!(r, 0, "cachestat: {}", io::Error::last_os_error());
        stat
    }

    #[test]
    fn xfs_and_journalled_ext4_write_back_everything_else_syncs_each_file() {
        let asked = std::cell::Cell::new(0);
        let journal = |has: bool| {
            let asked = &asked;
            move || {
                asked.set(asked.get() + 1);
                has
            }
        };
        assert_eq!(
            order_for(XFS_SUPER_MAGIC, journal(false)),
            SyncOrder::WriteBackThenDir
        );
        assert_eq!(
            order_for(EXT4_SUPER_MAGIC, journal(true)),
            SyncOrder::WriteBackThenDir
        );
        assert_eq!(
            order_for(EXT4_SUPER_MAGIC, journal(false)),
            SyncOrder::FileThenDir
        );
        // tmpfs and btrfs: each file synced.
        for magic in [0x0102_1994, 0x9123_683E] {
            assert_eq!(order_for(magic, journal(true)), SyncOrder::FileThenDir);
        }
        // The journal is asked about for ext4 alone.
        assert_eq!(asked.get(), 2);
    }

    /// The journal is read from sysfs, laid out here in a directory: the
    /// device's block entry names it, and its `journal_task` holds the
    /// journal thread's pid, or `<none>`.
    #[test]
    fn an_ext4_journal_is_running_when_sysfs_names_its_thread() {
        let tmp = tempfile::tempdir().unwrap();
        let sys = tmp.path().join("sys");
        let root = tmp.path().join("root");
        fs::create_dir_all(sys.join("dev/block")).unwrap();
        fs::create_dir_all(sys.join("fs/ext4/vdz")).unwrap();
        fs::create_dir(&root).unwrap();
        let dev = fs::metadata(&root).unwrap().dev();
        let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
        let task = sys.join("fs/ext4/vdz/journal_task");
        // No block entry for the device: not known, so no.
        fs::write(&task, "412\n").unwrap();
        assert!(!ext4_has_journal(&sys, &root));
        std::os::unix::fs::symlink(
            "../../devices/virtual/block/vdz",
            sys.join(format!("dev/block/{major}:{minor}")),
        )
        .unwrap();
        assert!(ext4_has_journal(&sys, &root));
        fs::write(&task, "<none>\n").unwrap();
        assert!(!ext4_has_journal(&sys, &root));
        fs::remove_file(&task).unwrap();
        assert!(!ext4_has_journal(&sys, &root));
    }
}
