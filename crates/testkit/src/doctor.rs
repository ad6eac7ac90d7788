//! The fault and power-cut sweeps of a channel's repair
//! (`doctor(DoctorMode::Fix)`): [`sweep_doctor`] and [`cut_doctor`].
//!
//! A repair is not retry-safe the way a transition is (a failed repair may
//! have made some of its fixes), so these sweeps ask what the project's
//! standard asks of it instead: at every failure and every power cut no
//! data is lost (the damaged bytes are at their path or in the
//! `.quarantine/` beside it, and every healthy record reads), the report
//! claims no fix that a check finds undone, and a later Fix finishes the
//! repair, after which a Check is clean.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chipset_store::{DoctorMode, RealIo, Report, SharedIo};

use crate::fault::{EIO, ENOSPC, Fault, FaultIo};
use crate::record::RecordIo;

/// One damaged state a doctor repairs, and its checks.
pub trait DoctorCase {
    /// An open channel on a state root.
    type World;
    /// The doctor's error.
    type Error: fmt::Display + fmt::Debug;

    /// The case's name, in every message.
    fn name(&self) -> &str;

    /// Plants the damaged state (and the healthy records beside it) at
    /// `root`, on a real backend.
    fn plant(&self, root: &Path);

    /// Opens the channel at `root` on `io`.
    fn open(&self, root: &Path, io: SharedIo) -> Self::World;

    /// Runs the channel's doctor.
    ///
    /// # Errors
    ///
    /// The doctor's failure.
    fn doctor(&self, world: &Self::World, mode: DoctorMode) -> Result<Report, Self::Error>;

    /// The damaged bytes that must survive every run: a file relative to
    /// the root, and bytes found whole in it or in a file of the
    /// `.quarantine/` folder beside it.
    fn damaged(&self) -> Vec<(PathBuf, Vec<u8>)>;

    /// Asserts that every healthy record still reads (`what` names the run).
    fn healthy(&self, world: &Self::World, what: &str);
}

/// How the faulted runs of a [`sweep_doctor`] ended.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DoctorTally {
    /// The calls a clean Fix made (each failed in turn, with each errno).
    pub calls: u64,
    /// Faulted runs that completed (returned a report).
    pub completed: u64,
    /// Faulted runs that failed with the doctor's error.
    pub failed: u64,
}

impl fmt::Display for DoctorTally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} calls, {} runs: completed {}, failed cleanly {}",
            self.calls,
            self.completed + self.failed,
            self.completed,
            self.failed
        )
    }
}

/// The (code, path, subject) of each finding a report says it fixed.
fn fixed(report: &Report) -> BTreeSet<(&'static str, Option<PathBuf>, Option<String>)> {
    report
        .findings
        .iter()
        .filter(|f| f.is_fixed())
        .map(|f| (f.code, f.path.clone(), f.subject.clone()))
        .collect()
}

/// Whether `needle` occurs whole in `hay`.
fn holds(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// Asserts that each of the case's damaged bytes is at its path or in the
/// `.quarantine/` folder beside it.
fn assert_kept<C: DoctorCase>(case: &C, root: &Path, what: &str) {
    for (rel, bytes) in case.damaged() {
        let at = root.join(&rel);
        if std::fs::read(&at).is_ok_and(|b| holds(&b, &bytes)) {
            continue;
        }
        let qdir = at.parent().expect("a parent").join(".quarantine");
        let found = std::fs::read_dir(&qdir).is_ok_and(|entries| {
            entries
                .flatten()
                .any(|e| std::fs::read(e.path()).is_ok_and(|b| holds(&b, &bytes)))
        });
        assert!(
            found,
            "{what}: the damaged bytes of `{}` are neither at their path nor in `{}`",
            rel.display(),
            qdir.display()
        );
    }
}

/// Asserts what every run must leave: the damaged bytes kept, every
/// healthy record readable.
fn assert_no_loss<C: DoctorCase>(case: &C, root: &Path, world: &C::World, what: &str) {
    assert_kept(case, root, what);
    case.healthy(world, what);
}

/// Runs a Fix then a Check on `world` with no fault: the Fix must succeed
/// and the Check be clean.
fn assert_finishes<C: DoctorCase>(case: &C, root: &Path, world: &C::World, what: &str) {
    let fix = case
        .doctor(world, DoctorMode::Fix)
        .unwrap_or_else(|e| panic!("{what}: the later Fix failed: {e}"));
    assert_no_loss(case, root, world, what);
    let check = case
        .doctor(world, DoctorMode::Check)
        .unwrap_or_else(|e| panic!("{what}: the final Check failed: {e}"));
    assert!(
        check.is_clean(),
        "{what}: not clean after a later Fix ({fix:?}): {check:?}"
    );
}

/// Runs the case's Fix once with no fault to count its calls (it must fix
/// something, and a Check after it be clean), then, for EIO and ENOSPC and
/// every call `n`, on a freshly planted state with the `n`th call failing.
/// Each run must keep every damaged byte and healthy record; a report it
/// returns must claim no fix that a Check then finds undone; and a Fix
/// with no fault must then finish the repair, after which a Check is clean.
///
/// # Panics
///
/// When a check fails: it is for tests.
#[allow(
    clippy::print_stderr,
    reason = "prints the figures for the report (shown with --nocapture)"
)]
pub fn sweep_doctor<C: DoctorCase>(case: &C) -> DoctorTally {
    let name = case.name();
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let root = tmp.path().join("state");
    case.plant(&root);
    let fault = FaultIo::passthrough();
    let world = case.open(&root, fault.clone());
    let check = case
        .doctor(&world, DoctorMode::Check)
        .unwrap_or_else(|e| panic!("{name}: a clean Check failed: {e}"));
    assert!(!check.is_clean(), "{name}: nothing planted to repair");
    fault.set(Fault::nth(0, EIO));
    let report = case
        .doctor(&world, DoctorMode::Fix)
        .unwrap_or_else(|e| panic!("{name}: a clean Fix failed: {e}"));
    assert!(
        !fixed(&report).is_empty(),
        "{name}: fixed nothing: {report:?}"
    );
    let calls = fault.counted();
    assert!(calls > 2, "{name}: only {calls} calls");
    assert_no_loss(case, &root, &world, name);
    let after = case.doctor(&world, DoctorMode::Check).unwrap();
    assert!(after.is_clean(), "{name}: a clean Fix left {after:?}");
    let mut tally = DoctorTally {
        calls,
        ..DoctorTally::default()
    };
    for errno in [EIO, ENOSPC] {
        for n in 1..=calls {
            let what = format!("{name} with errno {errno} at call {n}");
            let tmp = tempfile::tempdir().expect("a temporary directory");
            let root = tmp.path().join("state");
            case.plant(&root);
            let fault = FaultIo::new(Fault::nth(n, errno));
            let world = case.open(&root, fault.clone());
            let got = case.doctor(&world, DoctorMode::Fix);
            assert_eq!(fault.injected(), 1, "{what}: the fault was not injected");
            fault.disarm();
            assert_no_loss(case, &root, &world, &what);
            match got {
                Ok(report) => {
                    tally.completed += 1;
                    let claimed = fixed(&report);
                    let check = case
                        .doctor(&world, DoctorMode::Check)
                        .unwrap_or_else(|e| panic!("{what}: a Check failed: {e}"));
                    let open: BTreeSet<_> = check
                        .findings
                        .iter()
                        .map(|f| (f.code, f.path.clone(), f.subject.clone()))
                        .collect();
                    let undone: Vec<_> = claimed.intersection(&open).collect();
                    assert!(
                        undone.is_empty(),
                        "{what}: the report claims fixes a Check finds undone: {undone:?}"
                    );
                }
                Err(e) => {
                    tally.failed += 1;
                    assert!(
                        !e.to_string().is_empty(),
                        "{what}: an error without a message"
                    );
                }
            }
            assert_finishes(case, &root, &world, &what);
        }
    }
    eprintln!("{name} doctor fault: {tally}");
    tally
}

/// Records the case's Fix with [`RecordIo`] on a freshly planted state and
/// replays every state a power cut during it could leave: each keeps every
/// damaged byte and healthy record, and a Fix there finishes the repair,
/// after which a Check is clean. Returns how many states it replayed.
///
/// # Panics
///
/// When a check fails: it is for tests.
#[allow(
    clippy::print_stderr,
    reason = "prints the figures for the report (shown with --nocapture)"
)]
pub fn cut_doctor<C: DoctorCase>(case: &C) -> usize {
    let name = case.name();
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let root = tmp.path().join("state");
    case.plant(&root);
    let rec = RecordIo::start(&root).expect("start recording");
    let world = case.open(&root, rec.clone());
    case.doctor(&world, DoctorMode::Fix)
        .unwrap_or_else(|e| panic!("{name}: the recorded Fix failed: {e}"));
    rec.mark("fix");
    let states = rec.crash_states();
    assert!(states.len() > 1, "{name}: {} states", states.len());
    for (i, cut) in states.iter().enumerate() {
        let what = format!("{name}: cut {i}");
        let dir = tmp.path().join(format!("cut{i}"));
        cut.materialize(&dir).expect("materialize a cut state");
        let world = case.open(&dir, Arc::new(RealIo));
        assert_no_loss(case, &dir, &world, &what);
        assert_finishes(case, &dir, &world, &what);
    }
    eprintln!("{name} doctor power cut: {} states", states.len());
    states.len()
}
