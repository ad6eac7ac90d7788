//! A backend that fails the Nth call.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use chipset_store::{IoBackend, RealIo, SharedIo, SyncOrder};

/// Linux's "I/O error".
pub const EIO: i32 = 5;
/// Linux's "no space left on device".
pub const ENOSPC: i32 = 28;
/// Linux's "no such file or directory".
pub const ENOENT: i32 = 2;
/// Linux's "file exists".
pub const EEXIST: i32 = 17;
/// Linux's "operation not supported".
pub const EOPNOTSUPP: i32 = 95;

/// The kinds of call an [`IoBackend`] makes, as a [`FaultIo`] counts them.
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
    /// cache flush (`sync_file_range`); see `SyncOrder::WriteBackThenDir`.
    WriteBack,
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
    pub const ALL: [IoOp; 11] = [
        IoOp::Create,
        IoOp::Open,
        IoOp::Write,
        IoOp::Sync,
        IoOp::WriteBack,
        IoOp::SyncDir,
        IoOp::Rename,
        IoOp::Link,
        IoOp::Mkdir,
        IoOp::Truncate,
        IoOp::Remove,
    ];
}

/// Which calls a [`FaultIo`] fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// The 1-based number of the first call (counting only `kinds`) to fail;
    /// 0 never fails.
    pub nth: u64,
    /// The kinds of call counted and failed; empty counts every kind.
    pub kinds: Vec<IoOp>,
    /// The errno the failed call returns.
    pub errno: i32,
    /// Whether every counted call after the Nth fails too (a full disk), or only the Nth.
    pub sticky: bool,
}

impl Fault {
    /// Fails the `nth` call of any kind with `errno`, once.
    pub fn nth(nth: u64, errno: i32) -> Self {
        Fault {
            nth,
            kinds: Vec::new(),
            errno,
            sticky: false,
        }
    }

    /// Fails the first call of `kind` with `errno`, once (other kinds pass
    /// and are not counted).
    pub fn first(kind: IoOp, errno: i32) -> Self {
        Fault {
            kinds: vec![kind],
            ..Fault::nth(1, errno)
        }
    }
}

/// A backend that passes calls to [`RealIo`] and fails the ones its
/// [`Fault`] names. A failed write first writes half its bytes, as a write
/// cut short by a full disk does.
#[derive(Debug)]
pub struct FaultIo {
    inner: SharedIo,
    order: SyncOrder,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    fault: Fault,
    counted: u64,
    injected: u64,
    calls: Vec<IoOp>,
}

impl FaultIo {
    /// Returns a backend that fails as `fault` says. It answers
    /// [`SyncOrder::FileThenDir`] whatever the filesystem, so tests count
    /// the same calls on every machine; see [`FaultIo::with_order`].
    pub fn new(fault: Fault) -> Arc<Self> {
        Self::with_order(fault, SyncOrder::FileThenDir)
    }

    /// Returns a backend that fails as `fault` says and tells the store to
    /// publish new files in `order` (as [`RealIo`] does on a filesystem it
    /// knows commits in order, for [`SyncOrder::WriteBackThenDir`]).
    pub fn with_order(fault: Fault, order: SyncOrder) -> Arc<Self> {
        Arc::new(FaultIo {
            inner: RealIo::shared(),
            order,
            state: Mutex::new(State {
                fault,
                counted: 0,
                injected: 0,
                calls: Vec::new(),
            }),
        })
    }

    /// Returns a backend that never fails, to count calls.
    pub fn passthrough() -> Arc<Self> {
        Self::new(Fault::nth(0, EIO))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Replaces the fault and resets the counters.
    pub fn set(&self, fault: Fault) {
        let mut s = self.lock();
        s.fault = fault;
        s.counted = 0;
        s.injected = 0;
        s.calls.clear();
    }

    /// Stops failing (the disk has space again); the counters stay.
    pub fn disarm(&self) {
        self.lock().fault.nth = 0;
    }

    /// Returns how many calls were counted (of the fault's kinds).
    pub fn counted(&self) -> u64 {
        self.lock().counted
    }

    /// Returns how many calls were failed.
    pub fn injected(&self) -> u64 {
        self.lock().injected
    }

    /// Returns every call made, in order, of any kind.
    pub fn calls(&self) -> Vec<IoOp> {
        self.lock().calls.clone()
    }

    /// Counts a call and decides whether it fails.
    fn check(&self, op: IoOp) -> Option<io::Error> {
        let mut s = self.lock();
        s.calls.push(op);
        if !s.fault.kinds.is_empty() && !s.fault.kinds.contains(&op) {
            return None;
        }
        s.counted += 1;
        let n = s.fault.nth;
        let fail = n != 0 && (s.counted == n || (s.fault.sticky && s.counted > n));
        if fail {
            s.injected += 1;
            Some(io::Error::from_raw_os_error(s.fault.errno))
        } else {
            None
        }
    }
}

impl IoBackend for FaultIo {
    fn create_new(&self, path: &Path, append: bool) -> io::Result<File> {
        match self.check(IoOp::Create) {
            Some(e) => Err(e),
            None => self.inner.create_new(path, append),
        }
    }

    fn open_append(&self, path: &Path) -> io::Result<File> {
        match self.check(IoOp::Open) {
            Some(e) => Err(e),
            None => self.inner.open_append(path),
        }
    }

    fn write_all(&self, file: &File, path: &Path, bytes: &[u8]) -> io::Result<()> {
        match self.check(IoOp::Write) {
            Some(e) => {
                let _ = self.inner.write_all(file, path, &bytes[..bytes.len() / 2]);
                Err(e)
            }
            None => self.inner.write_all(file, path, bytes),
        }
    }

    fn sync_all(&self, file: &File, path: &Path) -> io::Result<()> {
        match self.check(IoOp::Sync) {
            Some(e) => Err(e),
            None => self.inner.sync_all(file, path),
        }
    }

    fn sync_data(&self, file: &File, path: &Path) -> io::Result<()> {
        match self.check(IoOp::Sync) {
            Some(e) => Err(e),
            None => self.inner.sync_data(file, path),
        }
    }

    fn write_back(&self, file: &File, path: &Path) -> io::Result<()> {
        match self.check(IoOp::WriteBack) {
            Some(e) => Err(e),
            None => self.inner.write_back(file, path),
        }
    }

    fn sync_order(&self, _root: &Path) -> SyncOrder {
        self.order
    }

    fn set_len(&self, file: &File, path: &Path, len: u64) -> io::Result<()> {
        match self.check(IoOp::Truncate) {
            Some(e) => Err(e),
            None => self.inner.set_len(file, path, len),
        }
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        match self.check(IoOp::SyncDir) {
            Some(e) => Err(e),
            None => self.inner.sync_dir(dir),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        match self.check(IoOp::Rename) {
            Some(e) => Err(e),
            None => self.inner.rename(from, to),
        }
    }

    fn rename_noreplace(&self, from: &Path, to: &Path) -> io::Result<()> {
        match self.check(IoOp::Rename) {
            Some(e) => Err(e),
            None => self.inner.rename_noreplace(from, to),
        }
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        match self.check(IoOp::Link) {
            Some(e) => Err(e),
            None => self.inner.hard_link(from, to),
        }
    }

    fn create_dir(&self, path: &Path) -> io::Result<()> {
        match self.check(IoOp::Mkdir) {
            Some(e) => Err(e),
            None => self.inner.create_dir(path),
        }
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        match self.check(IoOp::Remove) {
            Some(e) => Err(e),
            None => self.inner.remove_file(path),
        }
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        match self.check(IoOp::Remove) {
            Some(e) => Err(e),
            None => self.inner.remove_dir(path),
        }
    }
}
