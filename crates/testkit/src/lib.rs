//! Test support for chipset: multi-process and crash tests, and the fixtures
//! every crate's tests share (one manual clock start time [`T0`], ids,
//! temporary state roots), and the test doubles for the store's I/O seam
//! ([`StateOptions::io`](chipset_store::StateOptions), with chipset-store's
//! `testing` feature):
//!
//! - [`FaultIo`] fails the Nth call (optionally of given [`IoOp`] kinds)
//!   with a chosen errno, once or from then on (a disk that stays full).
//! - [`RecordIo`] performs every call for real and records it, then yields
//!   the states a power cut could have left ([`RecordIo::crash_states`]),
//!   following the ordering rules in the store's Durability docs.
//! - [`NoSyncIo`] makes every change for real but skips the syncs, for
//!   model tests that run thousands of operations and never cut the power.
//! - [`visible`] snapshots what a reader of a state root sees, so a test can
//!   assert that a failed operation changed nothing.
//! - [`sweep_doctor`] and [`cut_doctor`] run a channel's repair with each
//!   of its I/O calls failing in turn, and cut at every power-cut state.
//! - [`sweep_faults`] runs one retry-safe operation (a [`FaultCase`]) with
//!   each of its I/O calls failing in turn, the sweep every channel's seam
//!   tests share.
//!
//! The dashboard's browser tests drive headless chromium with
//! [`browser::Browser`], a WebDriver client over a plain `TcpStream`.
//!
//! A test binary re-runs itself as a child process: [`spawn`] starts the
//! current executable with only one entry test selected and a role in the
//! environment, and that entry test calls [`child_role`] to learn what to do.
//! No extra binary has to be built or shipped.
//!
//! ```no_run
//! use chipset_testkit as kit;
//! #[test]
//! fn child_entry() {
//!     if let Some(role) = kit::child_role() {
//!         // act as the child named by role.name, with role.args
//!         return;
//!     }
//!     // not a child: run the roles in-process as a smoke check
//! }
//! ```

#![forbid(unsafe_code)]
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test support, never in a product: it waits for files and finds binaries as a test does"
)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use chipset_store::{
    AgentId, ManualClock, SharedIo, StateDir, StateOptions, StatePath, TaskId, Timestamp,
};

pub mod browser;
mod doctor;
mod fault;
mod nosync;
mod record;
pub mod scale;

pub use doctor::{DoctorCase, DoctorTally, cut_doctor, sweep_doctor};
pub use fault::{
    EEXIST, EIO, ENOENT, ENOSPC, EOPNOTSUPP, Fault, FaultCase, FaultIo, IoOp, Tally, Visible,
    forgive_lock_folders, sweep_each, sweep_faults,
};
pub use nosync::NoSyncIo;
pub use record::{CrashState, Entry, RecordIo};

/// The environment variable that names a child's role.
pub const ROLE_ENV: &str = "CHIPSET_TESTKIT_ROLE";
/// The environment variable that carries a child's arguments, as a JSON array of strings.
pub const ARGS_ENV: &str = "CHIPSET_TESTKIT_ARGS";

/// A child's role and arguments.
#[derive(Debug, Clone)]
pub struct Role {
    /// The role's name.
    pub name: String,
    /// Its arguments.
    pub args: Vec<String>,
}

impl Role {
    /// Returns argument `i`.
    ///
    /// # Panics
    ///
    /// When there is no such argument.
    pub fn arg(&self, i: usize) -> &str {
        &self.args[i]
    }

    /// Returns argument `i` parsed.
    ///
    /// # Panics
    ///
    /// When there is no such argument or it does not parse.
    pub fn parse<T: std::str::FromStr>(&self, i: usize) -> T
    where
        T::Err: std::fmt::Debug,
    {
        self.args[i].parse().expect("child argument parses")
    }
}

/// Returns the role when this process is a child started by [`spawn`].
pub fn child_role() -> Option<Role> {
    let name = std::env::var(ROLE_ENV).ok()?;
    let args = std::env::var(ARGS_ENV)
        .ok()
        .map(|a| serde_json::from_str(&a).expect("child args are a JSON array"))
        .unwrap_or_default();
    Some(Role { name, args })
}

/// Starts the current test binary as a child that runs only the test named
/// `entry_test` (its full path, such as `procs::child_entry`), with `role` and
/// `args` in its environment. Its stdout is piped (read it with [`lines`]),
/// its stderr inherited.
///
/// # Panics
///
/// When the child cannot be started.
pub fn spawn(entry_test: &str, role: &str, args: &[String]) -> Child {
    Command::new(std::env::current_exe().expect("current exe"))
        .args([
            entry_test,
            "--exact",
            "--nocapture",
            "--test-threads=1",
            "-q",
        ])
        .env(ROLE_ENV, role)
        .env(ARGS_ENV, serde_json::to_string(args).expect("json"))
        .env_remove("RUST_TEST_THREADS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child test process")
}

/// Turns a child's stdout into a line iterator.
///
/// # Panics
///
/// When the child's stdout was not piped or was taken already.
pub fn lines(child: &mut Child) -> std::io::Lines<BufReader<ChildStdout>> {
    BufReader::new(child.stdout.take().expect("piped stdout")).lines()
}

/// Prints one of a child's own lines behind `mark`, flushed at once, so
/// that the parent ([`own_lines`]) can tell it from what the test harness
/// prints.
///
/// # Panics
///
/// When stdout cannot be written.
pub fn say(mark: &str, line: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{mark}{line}").expect("write to stdout");
    out.flush().expect("flush stdout");
}

/// Returns the lines a child printed with [`say`] behind `mark`, without
/// the mark; the harness's own lines are left out.
///
/// # Panics
///
/// As [`lines`].
pub fn own_lines(child: &mut Child, mark: &'static str) -> impl Iterator<Item = String> + use<> {
    lines(child)
        .map_while(Result::ok)
        .filter_map(move |l| l.strip_prefix(mark).map(str::to_owned))
}

/// Waits for a child to exit successfully, killing it after `timeout`.
///
/// # Panics
///
/// When it exits unsuccessfully or runs out of time.
pub fn wait_ok(child: &mut Child, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            assert!(status.success(), "child failed: {status}");
            return;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("child did not finish within {timeout:?}");
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// How long a test waits for what should come in milliseconds before it
/// fails: far longer than a wake-up or a call takes on a loaded machine,
/// and a third of the mutation harness's 60 s limit, so that a wait or a
/// loop that never ends fails its test instead of only stalling it.
pub const PATIENT: Duration = Duration::from_secs(20);

/// Runs `f` on a thread of its own and returns what it returns, or fails
/// the test when it has not returned within [`PATIENT`]: a call that never
/// ends (a wait that misses its deadline, a loop that never advances)
/// fails its test instead of stalling the run. Not a timing check: only a
/// call that never returns meets the limit. The thread of such a call is
/// left behind.
///
/// # Panics
///
/// When `f` panics, or has not returned within [`PATIENT`].
pub fn returns<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || tx.send(f()));
    match rx.recv_timeout(PATIENT) {
        Ok(value) => value,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what} has not returned within {PATIENT:?}")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("{what} panicked"),
    }
}

/// Kills a child with SIGKILL and reaps it.
///
/// # Panics
///
/// When the signal cannot be sent.
pub fn kill9(child: &mut Child) {
    let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("child pid");
    // The child may have exited already; that is fine.
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    let _ = child.wait();
}

/// Blocks until `path` exists: a start line for children that must act at once.
///
/// # Panics
///
/// After 60 seconds without it.
pub fn wait_for_file(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "start file {} never appeared",
            path.display()
        );
        thread::sleep(Duration::from_micros(200));
    }
}

/// A temporary state root, removed on drop.
pub struct TempState {
    /// The state root.
    pub state: StateDir,
    dir: tempfile::TempDir,
}

impl TempState {
    /// Makes a fresh state root on the system clock.
    ///
    /// # Panics
    ///
    /// When the temporary directory cannot be made.
    pub fn new() -> Self {
        Self::with_options(StateOptions::default())
    }

    /// Makes a fresh state root with `options`.
    ///
    /// # Panics
    ///
    /// When the temporary directory cannot be made.
    pub fn with_options(options: StateOptions) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = StateDir::open_with(dir.path().join("state"), options).expect("open state");
        TempState { state, dir }
    }

    /// Returns `rel` under the state root as a [`StatePath`] (see
    /// [`state_path`]).
    ///
    /// # Panics
    ///
    /// As [`state_path`].
    pub fn at(&self, rel: &str) -> StatePath {
        state_path(&self.state, rel)
    }

    /// Returns a path in the temporary directory outside the state root
    /// (for start files and such).
    pub fn scratch(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// Returns `rel`, `/`-separated names below the root of `state`
/// (`"mail/inbox/bob/1.json"`), as a [`StatePath`], each name checked as
/// [`StatePath::join`] checks it: for tests that name a file by its layout
/// when calling the store. Tests that plant or inspect files from outside
/// (with `std::fs`) use the plain path, `state.root().join(rel)`.
///
/// # Panics
///
/// When a name is not one safe path segment.
pub fn state_path(state: &StateDir, rel: &str) -> StatePath {
    rel.split('/').fold(state.root_path(), |path, name| {
        path.join(name)
            .unwrap_or_else(|e| panic!("state_path({rel:?}): {e}"))
    })
}

/// The start time of every manual clock in chipset's tests,
/// 2026-03-05T10:35:00.123Z, in Unix milliseconds: the seed examples' day,
/// with milliseconds that are not zero, so a format that drops or rounds
/// them shows in a snapshot.
pub const T0: i64 = 1_772_706_900_123;

/// Returns [`T0`] as a timestamp.
pub fn t0() -> Timestamp {
    Timestamp::from_unix_ms(T0)
}

/// Returns a manual clock stopped at [`T0`].
pub fn manual_clock() -> ManualClock {
    ManualClock::new(t0())
}

/// Opens the state root at `root` on the I/O backend `io`, with a manual
/// clock of its own stopped at [`T0`]: the state a seam sweep's case runs
/// on, faulted or recorded.
///
/// # Panics
///
/// When the root cannot be opened.
pub fn manual_state(root: &Path, io: SharedIo) -> StateDir {
    StateDir::open_with(
        root,
        StateOptions {
            io,
            clock: Arc::new(manual_clock()),
            ..StateOptions::default()
        },
    )
    .expect("open the state root")
}

/// Returns the agent id `name`.
///
/// # Panics
///
/// When `name` is not a valid id.
pub fn agent(name: &str) -> AgentId {
    AgentId::new(name).expect("valid agent id")
}

/// Returns the bead id `name`, as the type the hook crate declares
/// (`chipset_hook::BeadId`; the testkit sits below the hook, so it names
/// the type only through its `FromStr`).
///
/// # Panics
///
/// When `name` is not a valid id.
pub fn bead<T>(name: &str) -> T
where
    T: std::str::FromStr,
    T::Err: std::fmt::Debug,
{
    name.parse().expect("valid bead id")
}

/// Returns the task id `name`.
///
/// # Panics
///
/// When `name` is not a valid id.
pub fn task(name: &str) -> TaskId {
    TaskId::new(name).expect("valid task id")
}

impl TempState {
    /// Makes a fresh state root on a manual clock stopped at [`T0`], and
    /// returns the clock with it.
    ///
    /// # Panics
    ///
    /// When the temporary directory cannot be made.
    pub fn manual() -> (Self, ManualClock) {
        Self::manual_with(StateOptions::default())
    }

    /// Makes a fresh state root with `options`, but on a manual clock
    /// stopped at [`T0`] (which replaces `options.clock`), and returns the
    /// clock with it.
    ///
    /// # Panics
    ///
    /// When the temporary directory cannot be made.
    pub fn manual_with(options: StateOptions) -> (Self, ManualClock) {
        let clock = manual_clock();
        let state = Self::with_options(StateOptions {
            clock: Arc::new(clock.clone()),
            ..options
        });
        (state, clock)
    }

    /// Makes a fresh state root on a manual clock stopped at [`T0`] whose
    /// store skips every sync ([`NoSyncIo`]), and returns the clock with it:
    /// for model and property tests, which run thousands of operations and
    /// never cut the power. Crash and power-cut tests must not use it.
    ///
    /// # Panics
    ///
    /// When the temporary directory cannot be made.
    pub fn manual_no_sync() -> (Self, ManualClock) {
        Self::manual_with(StateOptions {
            io: NoSyncIo::shared(),
            ..StateOptions::default()
        })
    }
}

impl Default for TempState {
    fn default() -> Self {
        Self::new()
    }
}

/// A small deterministic pseudo-random generator (xorshift), for jitter in
/// crash tests where a seed should be printable and reproducible.
#[derive(Debug, Clone)]
pub struct Jitter(u64);

impl Jitter {
    /// Seeds the generator (zero is replaced).
    pub fn new(seed: u64) -> Self {
        Jitter(seed.max(1))
    }

    /// Returns a seed from the clock.
    pub fn seed_from_time() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    }

    /// Returns a number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x % n.max(1)
    }
}

/// Returns `shared/fixtures/peers/`, the files written by the real programs
/// that implement the seed contracts (see its README).
///
/// It sits beside the checkout (`<workspace>/../shared`); a worktree nested
/// one level deeper finds it further up, so every ancestor of the workspace
/// is tried, nearest first. `CHIPSET_PEER_FIXTURES` overrides the search.
///
/// # Panics
///
/// When the folder is not found: tests built on it fail loudly rather than
/// pass without their data.
pub fn peer_fixtures() -> PathBuf {
    if let Some(dir) = std::env::var_os("CHIPSET_PEER_FIXTURES") {
        let dir = PathBuf::from(dir);
        assert!(
            dir.is_dir(),
            "CHIPSET_PEER_FIXTURES={} is not a directory",
            dir.display()
        );
        return dir;
    }
    // This crate is `<workspace>/crates/testkit`.
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let workspace = workspace.canonicalize().unwrap_or(workspace);
    workspace
        .ancestors()
        .skip(1)
        .map(|dir| dir.join("shared/fixtures/peers"))
        .find(|dir| dir.is_dir())
        .unwrap_or_else(|| {
            panic!(
                "peer fixtures not found: expected `shared/fixtures/peers` beside the checkout \
                 ({}/../shared) or set CHIPSET_PEER_FIXTURES",
                workspace.display()
            )
        })
}

/// Makes `project` a nubos-pilot project holding the peer fixture's mail:
/// copies the fixture's messages to `project/.nubos-pilot/messages`, and
/// returns that folder.
///
/// # Panics
///
/// As [`peer_fixtures`] and [`copy_dir`].
pub fn nubos_messages(project: &Path) -> PathBuf {
    let folder = project.join(".nubos-pilot/messages");
    copy_dir(&peer_fixtures().join("nubos-pilot/messages"), &folder);
    folder
}

/// Copies the folder `from` to `to` with everything below it (say a peer
/// fixture into a test's project), making `to` and its parents.
///
/// # Panics
///
/// When anything cannot be listed, made or copied: it is for tests.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("make the copy's folder");
    for entry in std::fs::read_dir(from).expect("list the folder to copy") {
        let entry = entry.expect("read a directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("stat an entry").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a file");
        }
    }
}

/// Returns everything a reader sees under `root`: every path whose names do
/// not start with a dot (temps, locks and quarantine are the store's), with
/// a file's bytes or `None` for a directory.
///
/// # Panics
///
/// When `root` or anything under it cannot be listed or read: it is for tests.
pub fn visible(root: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("list a directory under the root") {
            let e = e.expect("read a directory entry");
            if e.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let p = e.path();
            let rel = p.strip_prefix(root).expect("under the root").to_owned();
            if e.file_type().expect("stat a directory entry").is_dir() {
                out.insert(rel, None);
                stack.push(p);
            } else {
                out.insert(rel, Some(std::fs::read(&p).expect("read a file")));
            }
        }
    }
    out
}

/// Returns how many of `report`'s fixable findings a fix changed nothing
/// about (every fixable one, for a check).
pub fn unrepaired(report: &chipset_store::Report) -> usize {
    report
        .findings
        .iter()
        .filter(|f| f.fixable && !f.is_fixed())
        .count()
}
