//! The real backend's calls, the unnamed files' links and the sync
//! order's detection, against the kernel.

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

/// An unnamed file gets its name with its bytes, through the real
/// backend (`AT_EMPTY_PATH` where the kernel lets this process, else
/// the magic link) and through the magic link alone, which every
/// process may use; neither replaces a name that is taken, and a
/// missing directory is `NotFound`.
#[test]
fn an_unnamed_file_is_named_with_its_bytes_and_never_over_a_name() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let unnamed = |bytes: &[u8]| {
        let file = RealIo
            .create_unnamed(dir)
            .unwrap()
            .expect("the test's disk has O_TMPFILE");
        RealIo.write_all(&file, dir, bytes).unwrap();
        file
    };
    type Namer<'a> = &'a dyn Fn(&File, &Path) -> io::Result<()>;
    let named: [(&str, Namer); 2] = [
        ("backend", &|f, to| RealIo.link_unnamed(f, to)),
        ("magic link", &|f, to| link_fd(f, to, Link::ProcFd)),
    ];
    for (k, (how, link)) in named.into_iter().enumerate() {
        let to = dir.join(format!("{k}.json"));
        link(&unnamed(b"first"), &to).unwrap();
        assert_eq!(fs::read(&to).unwrap(), b"first", "{how}");
        assert_eq!(fs::metadata(&to).unwrap().nlink(), 1, "{how}");
        let taken = link(&unnamed(b"second"), &to).unwrap_err();
        assert_eq!(taken.kind(), io::ErrorKind::AlreadyExists, "{how}");
        assert_eq!(fs::read(&to).unwrap(), b"first", "{how}");
        let gone = link(&unnamed(b"third"), &dir.join("gone/x.json")).unwrap_err();
        assert_eq!(gone.kind(), io::ErrorKind::NotFound, "{how}");
    }
    let mut names: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["0.json", "1.json"]);
}

/// Where the kernel refuses `AT_EMPTY_PATH` (`ENOENT`), the first link
/// is made through the magic link and every later one goes there at
/// once; where it takes it, the magic link is never used; a missing
/// directory, before anything is known, is an error that teaches
/// nothing.
#[test]
fn the_first_link_learns_whether_the_kernel_takes_an_empty_path() {
    let tmp = tempfile::tempdir().unwrap();
    let file = File::open(tmp.path()).unwrap();
    let to = tmp.path().join("a.json");
    let calls = std::cell::RefCell::new(Vec::new());
    let fake = |refuse: bool, gone: bool| {
        let calls = &calls;
        move |_: &File, _: &Path, how: Link| -> io::Result<()> {
            calls.borrow_mut().push(how);
            if gone || (refuse && how == Link::EmptyPath) {
                Err(io::ErrorKind::NotFound.into())
            } else {
                Ok(())
            }
        }
    };
    let taken = |calls: &std::cell::RefCell<Vec<Link>>| std::mem::take(&mut *calls.borrow_mut());

    let flink = AtomicU8::new(Flink::UNKNOWN);
    let gone = link_learning(&flink, &file, &to, fake(true, true)).unwrap_err();
    assert_eq!(gone.kind(), io::ErrorKind::NotFound);
    assert_eq!(taken(&calls), [Link::EmptyPath, Link::ProcFd]);
    assert_eq!(flink.load(Ordering::Relaxed), Flink::UNKNOWN);
    link_learning(&flink, &file, &to, fake(true, false)).unwrap();
    assert_eq!(taken(&calls), [Link::EmptyPath, Link::ProcFd]);
    assert_eq!(flink.load(Ordering::Relaxed), Flink::REFUSED);
    link_learning(&flink, &file, &to, fake(true, false)).unwrap();
    assert_eq!(taken(&calls), [Link::ProcFd]);

    let flink = AtomicU8::new(Flink::UNKNOWN);
    link_learning(&flink, &file, &to, fake(false, false)).unwrap();
    link_learning(&flink, &file, &to, fake(false, false)).unwrap();
    assert_eq!(taken(&calls), [Link::EmptyPath, Link::EmptyPath]);
    assert_eq!(flink.load(Ordering::Relaxed), Flink::WORKS);
    // Known to work: a missing directory is the error, at once.
    let gone = link_learning(&flink, &file, &to, fake(false, true)).unwrap_err();
    assert_eq!(gone.kind(), io::ErrorKind::NotFound);
    assert_eq!(taken(&calls), [Link::EmptyPath]);
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
