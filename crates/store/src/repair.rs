//! The repair framework every channel's doctor shares: one [`Finding`], one
//! [`Action`], one [`Report`] (what every doctor returns, with the counts
//! of the findings it handed over), one [`DoctorMode`]. The one
//! way a bad file is moved aside is
//! [`StateDir::quarantine_checked`](crate::StateDir::quarantine_checked).

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::read::CorruptReason;

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
    #[cfg(test)]
    pub(crate) fn label(&self) -> &'static str {
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
    pub(crate) fn is_fixable(&self) -> bool {
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
/// Built with [`Finding::new`] and the `at`, `about`, `fixable` and `with`
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
    /// line `message`; fixable unless its fault is unsupported, stray, in
    /// flight or a conflict.
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

    /// Returns the finding with whether [`DoctorMode::Fix`] repairs it set
    /// against its class: `false` for one no fix repairs though its class
    /// could be, `true` for one a fix repairs though its class usually is
    /// not (a foreign name in a bus queue is moved aside).
    #[must_use]
    pub fn fixable(mut self, fixable: bool) -> Self {
        self.fixable = fixable;
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
    fn check_after(&self) -> Option<Duration> {
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
///
/// A doctor either holds its findings (`findings`) or, run with a sink
/// (say [`Report::pass_on`]), hands each one over as it goes and keeps
/// only their counts, so that its memory does not grow with
/// the number of findings. The counting methods (`is_clean`, `open`, …)
/// cover both.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Report {
    /// The mode it ran in.
    pub mode: DoctorMode,
    /// How many things it checked (files, or for mail, messages).
    pub scanned: usize,
    /// Everything it found and kept, in the order the doctor documents.
    pub findings: Vec<Finding>,
    /// What it found and handed to a sink instead of keeping, counted.
    pub(crate) passed_on: Tally,
}

/// Counts of findings a doctor handed over instead of keeping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Tally {
    /// How many.
    found: usize,
    /// How many a fix changed nothing about (still there).
    open: usize,
    /// How many are in flight.
    in_flight: usize,
    /// The longest wait among those in flight.
    wait: Duration,
}

impl Tally {
    /// Counts one more finding.
    fn add(&mut self, finding: &Finding) {
        let fixed = finding.is_fixed();
        self.found += 1;
        self.open += usize::from(!fixed);
        if let Some(after) = finding.check_after() {
            self.in_flight += 1;
            self.wait = self.wait.max(after);
        }
    }

    #[cfg(test)]
    fn merge(&mut self, other: Tally) {
        self.found += other.found;
        self.open += other.open;
        self.in_flight += other.in_flight;
        self.wait = self.wait.max(other.wait);
    }
}

impl Report {
    /// Returns an empty report of a run in `mode`.
    pub fn new(mode: DoctorMode) -> Self {
        Report {
            mode,
            scanned: 0,
            findings: Vec::new(),
            passed_on: Tally::default(),
        }
    }

    /// Counts `finding` and hands it to `sink` instead of keeping it.
    pub fn pass_on(&mut self, finding: Finding, sink: &mut dyn FnMut(Finding)) {
        self.passed_on.add(&finding);
        sink(finding);
    }

    /// Returns true when nothing was found (a finding that was fixed still
    /// counts: the state was not clean when the doctor looked).
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty() && self.passed_on.found == 0
    }

    /// Returns the findings a fix changed nothing about (still there).
    pub fn open(&self) -> usize {
        self.findings.iter().filter(|f| !f.is_fixed()).count() + self.passed_on.open
    }

    /// Returns the findings in flight and the longest wait among them.
    pub fn in_flight(&self) -> (usize, Duration) {
        self.findings.iter().filter_map(Finding::check_after).fold(
            (self.passed_on.in_flight, self.passed_on.wait),
            |(n, w), after| (n + 1, w.max(after)),
        )
    }

    /// Appends another report's count and findings.
    #[cfg(test)]
    pub(crate) fn merge(&mut self, other: Report) {
        self.scanned += other.scanned;
        self.findings.extend(other.findings);
        self.passed_on.merge(other.passed_on);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The fixable findings a fix changed nothing about.
    fn unrepaired(report: &Report) -> usize {
        report
            .findings
            .iter()
            .filter(|f| f.fixable && !f.is_fixed())
            .count()
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
        assert_eq!(unrepaired(&report), 0);
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
    fn findings_passed_on_count_as_kept_ones_do() {
        let found = || {
            vec![
                Finding::new("x-stray", Defect::Stray, "stray"),
                Finding::new("x-missing", Defect::Missing, "no event")
                    .with(Action::Appended("appended".to_owned())),
                Finding::new(
                    "x-flight",
                    Defect::InFlight {
                        check_after: Duration::from_secs(4),
                    },
                    "young",
                ),
                Finding::new("x-stale", Defect::Stale, "old"),
            ]
        };
        let mut kept = Report::new(DoctorMode::Fix);
        kept.findings = found();
        let mut passed = Report::new(DoctorMode::Fix);
        let mut got = Vec::new();
        for f in found() {
            passed.pass_on(f, &mut |f| got.push(f));
        }
        assert_eq!(got, found());
        assert!(passed.findings.is_empty());
        assert!(!passed.is_clean());
        assert_eq!(passed.open(), kept.open());
        assert_eq!(passed.in_flight(), kept.in_flight());
        let mut again = Vec::new();
        for f in std::mem::take(&mut kept.findings) {
            kept.pass_on(f, &mut |f| again.push(f));
        }
        assert_eq!(again, found());
        assert_eq!(kept, passed);
        let mut both = Report::new(DoctorMode::Fix);
        both.findings = found();
        both.merge(passed);
        assert_eq!(both.open(), 6);
        assert_eq!(both.in_flight(), (2, Duration::from_secs(4)));
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
        assert!(!Finding::new("c", Defect::Stale, "m").fixable(false).fixable);
        assert!(Finding::new("c", Defect::Stray, "m").fixable(true).fixable);
        let mut report = Report::new(DoctorMode::Check);
        report.findings.push(Finding::new(
            "c",
            Defect::Corrupt(CorruptReason::NotARegularFile),
            "m",
        ));
        report.findings.push(Finding::new("s", Defect::Stray, "m"));
        assert_eq!(unrepaired(&report), 1);
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
