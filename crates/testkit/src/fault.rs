//! A backend that fails the Nth call, and the fault sweep every
//! channel's seam tests run on it ([`sweep_faults`]).

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io;
use std::ops::AddAssign;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use chipset_store::{Classify, IoBackend, RealIo, SharedIo, SyncOrder};

use crate::visible;

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

/// The kinds of call an [`IoBackend`] makes, as a [`FaultIo`] records them
/// (every kind but [`IoOp::StartWriteBack`] is also counted for a fault).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum IoOp {
    /// Creating a new file exclusively (a temp file, a new log), or one with
    /// no name (`O_TMPFILE`) for a new file's bytes.
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
    /// Starting a file's write-back without waiting for it (a hint that
    /// cannot fail): recorded among the calls, never counted for a fault.
    StartWriteBack,
    /// Syncing a directory's entries.
    SyncDir,
    /// Renaming, replacing or not ([`IoBackend::rename`], [`IoBackend::rename_noreplace`]).
    Rename,
    /// Linking a second name to a file, or its name to a file that has none.
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
        IoOp::StartWriteBack,
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
    /// [`IoOp::StartWriteBack`] is never counted, so naming it alone never
    /// fails a call.
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
            inner: std::sync::Arc::new(RealIo),
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

    /// Counts a call of `op`: its injected error, or what `call` (the
    /// inner backend's call) returns.
    fn checked<T>(&self, op: IoOp, call: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        match self.check(op) {
            Some(e) => Err(e),
            None => call(),
        }
    }
}

#[deny(
    clippy::missing_trait_methods,
    reason = "every call is counted and may fail: a call the trait gains must not pass by"
)]
impl IoBackend for FaultIo {
    fn create_new(&self, path: &Path, append: bool) -> io::Result<File> {
        self.checked(IoOp::Create, || self.inner.create_new(path, append))
    }

    fn open_append(&self, path: &Path) -> io::Result<File> {
        self.checked(IoOp::Open, || self.inner.open_append(path))
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
        self.checked(IoOp::Sync, || self.inner.sync_all(file, path))
    }

    fn sync_data(&self, file: &File, path: &Path) -> io::Result<()> {
        self.checked(IoOp::Sync, || self.inner.sync_data(file, path))
    }

    fn write_back(&self, file: &File, path: &Path) -> io::Result<()> {
        self.checked(IoOp::WriteBack, || self.inner.write_back(file, path))
    }

    fn start_write_back(&self, file: &File, path: &Path) {
        self.lock().calls.push(IoOp::StartWriteBack);
        self.inner.start_write_back(file, path);
    }

    /// No: the calls come on the caller's thread in item order, so that
    /// the Nth call is the same one on every run.
    fn concurrent_batch_writes(&self) -> bool {
        false
    }

    fn sync_order(&self, _root: &Path) -> SyncOrder {
        self.order
    }

    fn set_len(&self, file: &File, path: &Path, len: u64) -> io::Result<()> {
        self.checked(IoOp::Truncate, || self.inner.set_len(file, path, len))
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.checked(IoOp::SyncDir, || self.inner.sync_dir(dir))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.checked(IoOp::Rename, || self.inner.rename(from, to))
    }

    fn rename_noreplace(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.checked(IoOp::Rename, || self.inner.rename_noreplace(from, to))
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.checked(IoOp::Link, || self.inner.hard_link(from, to))
    }

    fn create_unnamed(&self, dir: &Path) -> io::Result<Option<File>> {
        self.checked(IoOp::Create, || self.inner.create_unnamed(dir))
    }

    fn link_unnamed(&self, file: &File, to: &Path) -> io::Result<()> {
        self.checked(IoOp::Link, || self.inner.link_unnamed(file, to))
    }

    fn create_dir(&self, path: &Path) -> io::Result<()> {
        self.checked(IoOp::Mkdir, || self.inner.create_dir(path))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.checked(IoOp::Remove, || self.inner.remove_file(path))
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        self.checked(IoOp::Remove, || self.inner.remove_dir(path))
    }
}

/// What a reader of a state root sees, as [`visible`] returns it.
pub type Visible = BTreeMap<PathBuf, Option<Vec<u8>>>;

/// What a [`sweep_faults`] counted, for the test's report.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// The faults injected: one a run.
    pub injected: u64,
    /// Runs that succeeded anyway (the failed call was one the operation
    /// may do without, such as a best-effort cleanup).
    pub ok: u64,
    /// Runs that failed and changed nothing a reader sees.
    pub unchanged: u64,
    /// Runs that failed with an outcome the caller cannot know.
    pub outcome_unknown: u64,
}

impl AddAssign for Tally {
    fn add_assign(&mut self, other: Tally) {
        self.injected += other.injected;
        self.ok += other.ok;
        self.unchanged += other.unchanged;
        self.outcome_unknown += other.outcome_unknown;
    }
}

impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "injected {}, ok {}, unchanged {}, outcome unknown {}",
            self.injected, self.ok, self.unchanged, self.outcome_unknown
        )
    }
}

/// One retry-safe operation that [`sweep_faults`] runs, and its checks.
pub trait FaultCase {
    /// A fresh state with the case's setup done, and whatever the checks
    /// need (a clock, what the setup returned).
    type World;
    /// The operation's error.
    type Error: fmt::Display + Classify;

    /// The case's name, in every message.
    fn name(&self) -> &str;

    /// Opens a fresh state at `root` on `io` and does the case's setup.
    fn open(&self, root: &Path, io: SharedIo) -> Self::World;

    /// Runs the operation.
    ///
    /// # Errors
    ///
    /// The operation's failure.
    fn run(&self, world: &Self::World) -> Result<(), Self::Error>;

    /// Returns whether the operation applied, exactly once.
    fn applied(&self, world: &Self::World) -> bool;

    /// Returns whether `error` says the outcome is unknown (a case may also
    /// assert what such an error carries; `what` names the run). By
    /// default, what the error says of itself ([`Classify`]).
    fn is_outcome_unknown(&self, error: &Self::Error, what: &str) -> bool {
        let _ = what;
        error.is_outcome_unknown()
    }

    /// Takes out of `after` (what a reader sees under `root`) what a plain
    /// failure may leave that changes nothing a reader sees (a folder
    /// holding only a lock). By default nothing.
    fn forgive(&self, root: &Path, before: &Visible, after: &mut Visible, what: &str) {
        let _ = (root, before, after, what);
    }

    /// Runs between a faulted run and its retry. By default nothing.
    fn before_retry(&self, world: &Self::World) {
        let _ = world;
    }

    /// Checks the state after a retry applied. By default nothing.
    fn after_retry(&self, world: &Self::World, what: &str) {
        let _ = (world, what);
    }
}

/// Runs `case` once on a clean [`FaultIo`] to count its calls, then, for
/// EIO and ENOSPC and every call `n`, on a fresh state with the `n`th call
/// failing. Each run must succeed having applied, fail with an unknown
/// outcome, or fail having changed nothing a reader sees ([`visible`]);
/// then the retry must succeed and apply exactly once.
///
/// # Panics
///
/// When a check fails: it is for tests.
pub fn sweep_faults<C: FaultCase>(case: &C) -> Tally {
    let name = case.name();
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let fault = FaultIo::passthrough();
    let world = case.open(tmp.path(), fault.clone());
    fault.set(Fault::nth(0, EIO));
    case.run(&world)
        .unwrap_or_else(|e| panic!("{name}: a clean run failed: {e}"));
    assert!(case.applied(&world), "{name}: a clean run did not apply");
    let calls = fault.counted();
    assert!(calls > 2, "{name}: only {calls} calls");
    let mut tally = Tally::default();
    for errno in [EIO, ENOSPC] {
        for n in 1..=calls {
            let tmp = tempfile::tempdir().expect("a temporary directory");
            let fault = FaultIo::passthrough();
            let world = case.open(tmp.path(), fault.clone());
            let before = visible(tmp.path());
            fault.set(Fault::nth(n, errno));
            let what = format!("{name} with errno {errno} at call {n}");
            match case.run(&world) {
                Ok(()) => {
                    tally.ok += 1;
                    assert!(case.applied(&world), "{what}: Ok but not applied");
                }
                Err(e) if case.is_outcome_unknown(&e, &what) => tally.outcome_unknown += 1,
                Err(e) => {
                    tally.unchanged += 1;
                    let mut after = visible(tmp.path());
                    case.forgive(tmp.path(), &before, &mut after, &what);
                    assert_eq!(
                        after, before,
                        "{what}: failed ({e}) but changed what readers see"
                    );
                }
            }
            tally.injected += fault.injected();
            fault.disarm();
            case.before_retry(&world);
            case.run(&world)
                .unwrap_or_else(|e| panic!("{what}: retry: {e}"));
            assert!(
                case.applied(&world),
                "{what}: the retry did not apply exactly once"
            );
            case.after_retry(&world, &what);
        }
    }
    assert_eq!(tally.injected, 2 * calls, "{name}");
    tally
}

/// Runs [`sweep_faults`] on every case, prints each case's tally and the
/// total on stderr (`{label} fault {case}: …`, shown with `--nocapture`),
/// and returns the total.
///
/// # Panics
///
/// As [`sweep_faults`].
#[allow(
    clippy::print_stderr,
    reason = "prints the figures for the report (shown with --nocapture)"
)]
pub fn sweep_each<C: FaultCase>(label: &str, cases: impl IntoIterator<Item = C>) -> Tally {
    let mut total = Tally::default();
    for case in cases {
        let t = sweep_faults(&case);
        eprintln!("{label} fault {}: {t}", case.name());
        total += t;
    }
    eprintln!("{label} fault total: {total}");
    total
}

/// Takes out of `after` the folders that a failed run made and that hold
/// nothing but dot-named entries, at any depth: a lock file is never
/// removed, and a folder holding only locks changes nothing a reader sees.
/// For [`FaultCase::forgive`].
pub fn forgive_lock_folders(root: &Path, before: &Visible, after: &mut Visible) {
    after.retain(|p, entry| before.contains_key(p) || !(entry.is_none() && lock_only(root, p)));
}

/// Whether the folder `rel` under `root` holds only dot-named entries, or
/// folders that do.
fn lock_only(root: &Path, rel: &Path) -> bool {
    std::fs::read_dir(root.join(rel)).is_ok_and(|entries| {
        entries.flatten().all(|e| {
            e.file_name().to_string_lossy().starts_with('.')
                || lock_only(root, &rel.join(e.file_name()))
        })
    })
}
