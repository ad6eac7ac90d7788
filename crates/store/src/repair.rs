//! The repair framework every channel's doctor shares: one [`Finding`], one
//! [`Action`], one [`Report`] (what every doctor returns), one
//! [`DoctorMode`], and the one way a bad file is moved aside
//! ([`StateDir::quarantine_checked`]).

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::lock::Lock;
use crate::path::StatePath;
use crate::read::{CorruptReason, ReadOutcome};
use crate::state::StateDir;

/// Whether a doctor only reports or also repairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum DoctorMode {
    /// Report what is wrong; change nothing.
    #[default]
    Check,
    /// Report what is wrong and repair what can be repaired: bad files are
    /// moved aside (never deleted), interrupted transitions finished, missing
    /// records appended.
    Fix,
}

/// What is wrong, by class: what a reader of a report (or a test) matches on.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Defect {
    /// A file (or directory, FIFO, device) that cannot be read as what
    /// belongs at its path. Fixed by moving it aside.
    Corrupt(CorruptReason),
    /// A well-formed file holding a value this version does not know (what,
    /// as a noun phrase). Never moved: it is what it claims to be, only newer.
    Unsupported(String),
    /// A name that chipset does not write there. Left alone: a person decides.
    Stray,
    /// Something left behind that nobody will act on (a stale temp, a queue
    /// copy of an acknowledged event, an orphaned or answered message).
    Stale,
    /// A record that should exist and does not (an audit event, an index
    /// entry), or a second copy where one belongs.
    Missing,
    /// A transition interrupted between its durable steps.
    Unfinished,
    /// Too young to judge: its writer may be finishing it right now. Not
    /// fixable yet and not clean either: check again after this long.
    InFlight {
        /// How long until it can be judged.
        check_after: Duration,
    },
    /// Files that contradict each other in a way only a person can settle.
    Conflict,
}

impl Defect {
    /// Returns a stable kebab-case label (`corrupt`, `in-flight`, …).
    pub fn label(&self) -> &'static str {
        match self {
            Defect::Corrupt(_) => "corrupt",
            Defect::Unsupported(_) => "unsupported",
            Defect::Stray => "stray",
            Defect::Stale => "stale",
            Defect::Missing => "missing",
            Defect::Unfinished => "unfinished",
            Defect::InFlight { .. } => "in-flight",
            Defect::Conflict => "conflict",
        }
    }

    /// Returns whether a fix can repair this class of fault: not unsupported
    /// files, stray names, conflicts or things in flight.
    pub fn is_fixable(&self) -> bool {
        !matches!(
            self,
            Defect::Unsupported(_) | Defect::Stray | Defect::InFlight { .. } | Defect::Conflict
        )
    }
}

/// What a fix did about a finding (or, [`Action::LeftAlone`], why it did nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action {
    /// Moved aside into `.quarantine/` (nothing is deleted).
    Quarantined {
        /// What was moved, as the report says it ("quarantined", "extra copy quarantined").
        what: String,
        /// Where it went, when the doctor knows.
        to: Option<PathBuf>,
    },
    /// Rewrote a file in its place (a hook reset to empty, an index entry added).
    Rewrote(String),
    /// Appended records to a log (a reconciled event).
    Appended(String),
    /// Moved a file to where it belongs (an orphan to its archive).
    Moved(String),
    /// Removed a file that holds no state (a stale temp, a queue copy of an
    /// acknowledged event).
    Removed(String),
    /// Cut a torn last line off a log.
    Truncated(String),
    /// Finished an interrupted transition.
    Completed(String),
    /// Changed nothing, and why (the file changed or went away since it was
    /// checked, or nothing is safe to do).
    LeftAlone(String),
}

impl Action {
    /// Returns the action of moving a file to `to` in `.quarantine/`.
    pub fn quarantined(to: impl Into<PathBuf>) -> Self {
        Action::Quarantined {
            what: "quarantined".to_owned(),
            to: Some(to.into()),
        }
    }

    /// Returns true when the action changed something (all but [`Action::LeftAlone`]).
    pub(crate) fn is_change(&self) -> bool {
        !matches!(self, Action::LeftAlone(_))
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Quarantined { what, to } => {
                f.write_str(what)?;
                if let Some(to) = to {
                    write!(f, " to `{}`", to.display())?;
                }
                Ok(())
            }
            Action::Rewrote(what)
            | Action::Appended(what)
            | Action::Moved(what)
            | Action::Removed(what)
            | Action::Truncated(what)
            | Action::Completed(what) => f.write_str(what),
            Action::LeftAlone(why) => write!(f, "left alone: {why}"),
        }
    }
}

/// One thing a doctor found, and what its fix did about it.
///
/// Built with [`Finding::new`] and the `at`, `about`, `unfixable` and `with`
/// methods; read through the fields.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Finding {
    /// A stable kebab-case code naming the kind of finding
    /// (`hook-corrupt`, `messaging-orphan-inbox`, …).
    pub code: &'static str,
    /// What is wrong, by class.
    pub fault: Defect,
    /// The file or directory concerned, when there is one.
    pub path: Option<PathBuf>,
    /// The id the finding is about (a message, a task, an agent), when it
    /// is about one rather than (only) a file.
    pub subject: Option<String>,
    /// Whether [`DoctorMode::Fix`] repairs it.
    pub fixable: bool,
    /// The human line, as a report prints it.
    pub message: String,
    /// What the fix did, in order (empty when checking, or when nothing was done).
    pub actions: Vec<Action>,
}

impl Finding {
    /// Returns a finding of `fault` with the stable `code` and the human
    /// line `message`; fixable as its fault's class is ([`Defect::is_fixable`]).
    pub fn new(code: &'static str, fault: Defect, message: impl Into<String>) -> Self {
        Finding {
            code,
            fixable: fault.is_fixable(),
            fault,
            path: None,
            subject: None,
            message: message.into(),
            actions: Vec::new(),
        }
    }

    /// Returns the finding with the file it is about.
    #[must_use]
    pub fn at(mut self, path: impl Into<PathBuf>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// Returns the finding with the id it is about.
    #[must_use]
    pub fn about(mut self, subject: impl fmt::Display) -> Self {
        self.subject = Some(subject.to_string());
        self
    }

    /// Returns the finding marked as one no fix repairs, though its class could be.
    #[must_use]
    pub fn unfixable(mut self) -> Self {
        self.fixable = false;
        self
    }

    /// Returns the finding marked as one a fix repairs, though its class
    /// is not one that usually is (a foreign name in a bus queue is moved aside).
    #[must_use]
    pub fn fixable(mut self) -> Self {
        self.fixable = true;
        self
    }

    /// Returns the finding with one more thing its fix did.
    #[must_use]
    pub fn with(mut self, action: Action) -> Self {
        self.actions.push(action);
        self
    }

    /// Returns true when a fix changed something about it.
    pub fn is_fixed(&self) -> bool {
        self.actions.iter().any(Action::is_change)
    }

    /// Returns how long to wait before checking again, for [`Defect::InFlight`].
    pub fn check_after(&self) -> Option<Duration> {
        match self.fault {
            Defect::InFlight { check_after } => Some(check_after),
            _ => None,
        }
    }

    /// Returns what the fix did, as one line ("quarantined to `…`, reset to
    /// empty"), or `None` when it changed nothing.
    pub fn fix_line(&self) -> Option<String> {
        let done: Vec<String> = self
            .actions
            .iter()
            .filter(|a| a.is_change())
            .map(ToString::to_string)
            .collect();
        (!done.is_empty()).then(|| done.join(", "))
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(done) = self.fix_line() {
            write!(f, "; {done}")?;
        }
        Ok(())
    }
}

/// What one doctor found and did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Report {
    /// The mode it ran in.
    pub mode: DoctorMode,
    /// How many things it checked (files, or for mail, messages).
    pub scanned: usize,
    /// Everything it found, in the order the doctor documents.
    pub findings: Vec<Finding>,
}

impl Report {
    /// Returns an empty report of a run in `mode`.
    pub fn new(mode: DoctorMode) -> Self {
        Report {
            mode,
            scanned: 0,
            findings: Vec::new(),
        }
    }

    /// Returns true when nothing was found (a finding that was fixed still
    /// counts: the state was not clean when the doctor looked).
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty()
    }

    /// Returns the findings a fix changed nothing about (still there).
    pub fn open(&self) -> usize {
        self.findings.iter().filter(|f| !f.is_fixed()).count()
    }

    /// Returns the fixable findings a fix changed nothing about.
    pub fn unrepaired(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| f.fixable && !f.is_fixed())
            .count()
    }

    /// Returns the findings in flight and the longest wait among them.
    pub fn in_flight(&self) -> (usize, Duration) {
        self.findings
            .iter()
            .filter_map(Finding::check_after)
            .fold((0, Duration::ZERO), |(n, w), after| (n + 1, w.max(after)))
    }

    /// Appends another report's count and findings.
    pub fn merge(&mut self, other: Report) {
        self.scanned += other.scanned;
        self.findings.extend(other.findings);
    }

    /// Sorts the findings by path (those without one last, in their order).
    pub fn sort_by_path(&mut self) {
        self.findings.sort_by(|a, b| match (&a.path, &b.path) {
            (Some(a), Some(b)) => a.cmp(b),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        });
    }
}

/// What [`StateDir::observe`] saw at a path: enough to tell, under the
/// writers' lock, whether it is still the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// Nothing at the path.
    Missing,
    /// A directory, FIFO, socket, device or symlink: never opened.
    NotARegularFile,
    /// A regular file over the read cap, of this size (not read).
    TooLarge {
        /// Its size in bytes.
        size: u64,
    },
    /// A regular file's bytes.
    Bytes(Vec<u8>),
}

impl Observed {
    /// Returns what a typed read of `path` makes of it: missing, corrupt
    /// (not a regular file, too large for `cap`, or not what `parse` takes),
    /// unsupported, or a value.
    pub fn read<T>(
        &self,
        path: &Path,
        cap: u64,
        parse: impl FnOnce(&[u8]) -> ReadOutcome<T>,
    ) -> ReadOutcome<T> {
        let corrupt = |reason| {
            ReadOutcome::Corrupt(crate::read::Corruption {
                path: path.to_owned(),
                reason,
            })
        };
        match self {
            Observed::Missing => ReadOutcome::Missing,
            Observed::NotARegularFile => corrupt(CorruptReason::NotARegularFile),
            Observed::TooLarge { size } => corrupt(CorruptReason::TooLarge { size: *size, cap }),
            Observed::Bytes(b) => parse(b),
        }
    }
}

impl StateDir {
    /// Returns what is at `path` without following a symlink and without
    /// opening anything but a regular file: a FIFO, device or directory is
    /// [`Observed::NotARegularFile`] (opening a FIFO or a device can block or
    /// act), a file over the read cap is [`Observed::TooLarge`] (not read).
    ///
    /// # Errors
    ///
    /// [`Error::OutsideRoot`], [`Error::Symlink`] for a symlinked directory on
    /// the way, [`Error::Io`] when `path` cannot be examined or read.
    pub fn observe(&self, path: &StatePath) -> Result<Observed> {
        let at = path.as_path();
        if !self.parents_ok(at)? {
            return Ok(Observed::Missing);
        }
        match fs::symlink_metadata(at) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Observed::Missing),
            Err(e) => return Err(Error::io("stat", at, e)),
            Ok(m) if !m.file_type().is_file() => return Ok(Observed::NotARegularFile),
            Ok(_) => {}
        }
        match self.read_bytes(path) {
            Ok(ReadOutcome::Value(bytes)) => Ok(Observed::Bytes(bytes)),
            Ok(ReadOutcome::Missing) => Ok(Observed::Missing),
            Ok(ReadOutcome::Corrupt(c)) => Ok(match c.reason {
                CorruptReason::TooLarge { size, .. } => Observed::TooLarge { size },
                _ => Observed::NotARegularFile,
            }),
            Ok(ReadOutcome::Unsupported(_)) => unreachable!("a byte read is never unsupported"),
            // Replaced by a symlink since the stat.
            Err(Error::Symlink { .. }) => Ok(Observed::NotARegularFile),
            Err(e) => Err(e),
        }
    }

    /// Returns whether there is an entry (of any kind) at `path`, without
    /// following a symlink or opening it: for a doctor that counts what it
    /// scans. "Not there" is `false`; "there but not examinable" is an error.
    ///
    /// # Errors
    ///
    /// [`Error::OutsideRoot`], [`Error::Symlink`] for a symlinked directory on
    /// the way, [`Error::Io`] when `path` cannot be examined.
    pub fn entry_exists(&self, path: &StatePath) -> Result<bool> {
        let path = path.as_path();
        if !self.parents_ok(path)? {
            return Ok(false);
        }
        match fs::symlink_metadata(path) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io("stat", path, e)),
        }
    }

    /// Moves `path` aside into `.quarantine/` beside it if it is still bad:
    /// reads it (without opening anything but a regular file), asks `is_bad`,
    /// takes `lock` (the lock its writers take; `None` for files no writer
    /// ever rewrites, such as no-clobber messages), reads it again, and moves
    /// it only if it is byte for byte what was judged bad. A file that a
    /// writer rewrote, or that went away, between the check and the fix is
    /// left alone, and the returned [`Action::LeftAlone`] says so.
    ///
    /// This is the one way a doctor moves a file aside; nothing is deleted.
    ///
    /// # Errors
    ///
    /// As [`StateDir::observe`], [`Lock::exclusive`] and [`StateDir::quarantine`].
    pub fn quarantine_checked(
        &self,
        path: &StatePath,
        lock: Option<&Lock>,
        is_bad: impl FnOnce(&Observed) -> bool,
    ) -> Result<Action> {
        let seen = self.observe(path)?;
        if seen == Observed::Missing {
            return Ok(Action::LeftAlone("gone before the fix".to_owned()));
        }
        if !is_bad(&seen) {
            return Ok(Action::LeftAlone("no longer bad".to_owned()));
        }
        let _guard = lock.map(Lock::exclusive).transpose()?;
        self.quarantine_unchanged(path, &seen)
    }

    /// Moves `path` aside if it is still exactly `seen` (the caller holds the
    /// lock its writers take, or no writer rewrites it). The second half of
    /// [`StateDir::quarantine_checked`], for a caller that does more under
    /// the same lock (a hook is reset to empty in the same critical section).
    ///
    /// # Errors
    ///
    /// As [`StateDir::observe`] and [`StateDir::quarantine`].
    pub fn quarantine_unchanged(&self, path: &StatePath, seen: &Observed) -> Result<Action> {
        let now = self.observe(path)?;
        if now == Observed::Missing {
            return Ok(Action::LeftAlone("gone before the fix".to_owned()));
        }
        if &now != seen {
            return Ok(Action::LeftAlone(
                "rewritten since it was checked".to_owned(),
            ));
        }
        match self.quarantine(path) {
            Ok(to) => Ok(Action::quarantined(to)),
            Err(Error::NotFound { .. }) => Ok(Action::LeftAlone("gone before the fix".to_owned())),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::at;
    use crate::read::parse_json;

    fn temp() -> (tempfile::TempDir, StateDir) {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path()).unwrap();
        (dir, state)
    }

    fn corrupt_json(o: &Observed) -> bool {
        o.read(Path::new("x"), 1024, |b| {
            parse_json::<serde_json::Value>(Path::new("x"), b)
        })
        .is_corrupt()
    }

    #[test]
    fn quarantines_a_file_that_is_still_bad() {
        let (_d, state) = temp();
        let path = at(&state, "hooks/a.json");
        state.write_bytes(&path, b"{").unwrap();
        let lock = state.lock_for(&path).unwrap();
        let action = state
            .quarantine_checked(&path, Some(&lock), corrupt_json)
            .unwrap();
        let Action::Quarantined { to: Some(to), .. } = &action else {
            panic!("{action:?}");
        };
        assert_eq!(std::fs::read(to).unwrap(), b"{");
        assert_eq!(state.observe(&path).unwrap(), Observed::Missing);
        assert!(action.to_string().starts_with("quarantined to `"));
    }

    /// Regression (bus): a file rewritten by its writer between the check and
    /// the fix was moved aside; now it is left alone.
    #[test]
    fn leaves_alone_a_file_rewritten_between_check_and_fix() {
        let (_d, state) = temp();
        let path = at(&state, "bus/a/presence.json");
        state.write_bytes(&path, b"{").unwrap();
        let lock = state.lock_for(&path).unwrap();
        let action = state
            .quarantine_checked(&path, Some(&lock), |seen| {
                // A heartbeat rewrites the file after the check, before the lock.
                state.write_bytes(&path, b"{}").unwrap();
                corrupt_json(seen)
            })
            .unwrap();
        assert_eq!(
            action,
            Action::LeftAlone("rewritten since it was checked".to_owned())
        );
        assert!(!action.is_change());
        assert_eq!(
            state.observe(&path).unwrap(),
            Observed::Bytes(b"{}".to_vec())
        );
    }

    #[test]
    fn leaves_alone_a_file_that_is_good_or_gone() {
        let (_d, state) = temp();
        let path = at(&state, "hooks/a.json");
        state.write_bytes(&path, b"{}").unwrap();
        assert_eq!(
            state.quarantine_checked(&path, None, corrupt_json).unwrap(),
            Action::LeftAlone("no longer bad".to_owned())
        );
        let gone = at(&state, "hooks/b.json");
        assert_eq!(
            state.quarantine_checked(&gone, None, |_| true).unwrap(),
            Action::LeftAlone("gone before the fix".to_owned())
        );
        assert_eq!(
            state.observe(&path).unwrap(),
            Observed::Bytes(b"{}".to_vec())
        );
    }

    /// A FIFO or a directory is observed without being opened (a blocking
    /// open of a FIFO would hang the doctor) and can be moved aside.
    #[test]
    fn observes_and_moves_non_regular_files_without_opening_them() {
        let (_d, state) = temp();
        let dir = at(&state, "loop/witness.jsonl");
        state.ensure_dir(&dir).unwrap();
        assert_eq!(state.observe(&dir).unwrap(), Observed::NotARegularFile);
        let fifo = at(&state, "loop/agents.json");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            fifo.as_path(),
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        assert_eq!(state.observe(&fifo).unwrap(), Observed::NotARegularFile);
        let read = Observed::NotARegularFile.read(&fifo, 10, |_| ReadOutcome::Value(()));
        assert!(read.is_corrupt());
        for path in [&dir, &fifo] {
            let action = state
                .quarantine_checked(path, None, |o| *o == Observed::NotARegularFile)
                .unwrap();
            assert!(
                matches!(action, Action::Quarantined { to: Some(_), .. }),
                "{action:?}"
            );
            assert_eq!(state.observe(path).unwrap(), Observed::Missing);
        }
    }

    /// "There but not examinable" is an error, never "not there": a doctor
    /// must not take a file it cannot stat for a missing one.
    #[test]
    fn observe_reports_a_failed_stat_instead_of_missing() {
        let (_d, state) = temp();
        // Too long a name for the kernel: a `StatePath` made past its checks.
        let path = StatePath::from_checked(state.root().join("hooks").join("x".repeat(300)));
        state.ensure_dir(&at(&state, "hooks")).unwrap();
        for err in [
            state.observe(&path).unwrap_err(),
            state.entry_exists(&path).unwrap_err(),
        ] {
            assert!(
                matches!(&err, Error::Io { op: "stat", path: p, .. } if *p == *path),
                "{err:?}"
            );
        }
    }

    #[test]
    fn entry_exists_tells_there_from_not_there() {
        let (_d, state) = temp();
        let path = at(&state, "loop/dispatcher/log.jsonl");
        assert!(!state.entry_exists(&path).unwrap());
        // Its directory there, the log not yet.
        state.ensure_dir(&at(&state, "loop/dispatcher")).unwrap();
        assert!(!state.entry_exists(&path).unwrap());
        state.write_bytes(&path, b"").unwrap();
        assert!(state.entry_exists(&path).unwrap());
        let dir = at(&state, "loop/dispatcher");
        assert!(state.entry_exists(&dir).unwrap());
    }

    #[test]
    fn observes_an_oversized_file_without_reading_it() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open_with(
            dir.path(),
            crate::StateOptions {
                read_cap: 4,
                ..Default::default()
            },
        )
        .unwrap();
        let path = at(&state, "hooks/a.json");
        state.write_bytes(&path, b"123456").unwrap();
        assert_eq!(
            state.observe(&path).unwrap(),
            Observed::TooLarge { size: 6 }
        );
        let read = state
            .observe(&path)
            .unwrap()
            .read(&path, 4, |_| ReadOutcome::Value(()));
        assert_eq!(
            read,
            ReadOutcome::Corrupt(crate::read::Corruption {
                path: path.clone().into_path_buf(),
                reason: CorruptReason::TooLarge { size: 6, cap: 4 }
            })
        );
    }

    #[test]
    fn a_report_counts_open_fixed_and_in_flight_findings() {
        let mut report = Report::new(DoctorMode::Fix);
        assert!(report.is_clean());
        report.findings.push(
            Finding::new(
                "x-corrupt",
                Defect::Corrupt(CorruptReason::NotARegularFile),
                "bad",
            )
            .at("b")
            .with(Action::quarantined("q"))
            .with(Action::Rewrote("reset to empty".to_owned())),
        );
        report
            .findings
            .push(Finding::new("x-stray", Defect::Stray, "stray").at("a"));
        report.findings.push(
            Finding::new(
                "x-flight",
                Defect::InFlight {
                    check_after: Duration::from_secs(3),
                },
                "young",
            )
            .about("m1"),
        );
        report.findings.push(
            Finding::new(
                "x-flight",
                Defect::InFlight {
                    check_after: Duration::from_secs(7),
                },
                "younger",
            )
            .with(Action::LeftAlone("in flight".to_owned())),
        );
        let mut other = Report::new(DoctorMode::Fix);
        other.scanned = 4;
        other.findings.push(
            Finding::new("x-missing", Defect::Missing, "no event")
                .with(Action::Appended("appended".to_owned())),
        );
        report.merge(other);
        assert!(!report.is_clean());
        assert_eq!(report.scanned, 4);
        assert_eq!(report.open(), 3);
        assert_eq!(report.unrepaired(), 0);
        assert_eq!(report.in_flight(), (2, Duration::from_secs(7)));
        assert_eq!(
            report.findings[0].fix_line().as_deref(),
            Some("quarantined to `q`, reset to empty")
        );
        assert_eq!(
            report.findings[0].to_string(),
            "bad; quarantined to `q`, reset to empty"
        );
        assert_eq!(report.findings[3].fix_line(), None);
        assert_eq!(report.findings[2].subject.as_deref(), Some("m1"));
        report.sort_by_path();
        let order: Vec<_> = report.findings.iter().map(|f| f.code).collect();
        assert_eq!(
            order,
            ["x-stray", "x-corrupt", "x-flight", "x-flight", "x-missing"]
        );
    }

    #[test]
    fn fixable_follows_the_class_unless_marked() {
        let fixable = |f: Defect| Finding::new("c", f, "m").fixable;
        assert!(fixable(Defect::Corrupt(CorruptReason::NotARegularFile)));
        assert!(fixable(Defect::Stale));
        assert!(fixable(Defect::Missing));
        assert!(fixable(Defect::Unfinished));
        assert!(!fixable(Defect::Unsupported("v2".into())));
        assert!(!fixable(Defect::Stray));
        assert!(!fixable(Defect::Conflict));
        assert!(!fixable(Defect::InFlight {
            check_after: Duration::ZERO
        }));
        assert!(!Finding::new("c", Defect::Stale, "m").unfixable().fixable);
        assert!(Finding::new("c", Defect::Stray, "m").fixable().fixable);
        let mut report = Report::new(DoctorMode::Check);
        report.findings.push(Finding::new(
            "c",
            Defect::Corrupt(CorruptReason::NotARegularFile),
            "m",
        ));
        report.findings.push(Finding::new("s", Defect::Stray, "m"));
        assert_eq!(report.unrepaired(), 1);
        assert_eq!(report.open(), 2);
        assert_eq!(
            Defect::InFlight {
                check_after: Duration::ZERO
            }
            .label(),
            "in-flight"
        );
    }
}
