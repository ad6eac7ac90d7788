//! Status counts and the doctor for the files under `loop/`.

use std::fmt;
use std::path::{Path, PathBuf};

use chipset_store::{CorruptReason, JsonLog, ReadOutcome, StateDir};
use serde::de::DeserializeOwned;

use crate::error::Result;
use crate::files::Files;
use crate::format::{AgentBook, BeadState, Incident, LedgerEntry, Phase, RoundCheckpoint, Step};

/// Counts of the loops' persisted state, for a status screen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LoopCounts {
    /// Witness incidents in progress (checking, warned, escalating).
    pub open_incidents: usize,
    /// Incidents escalated to the dispatcher.
    pub escalated_incidents: usize,
    /// Work items waiting for an agent.
    pub queued: usize,
    /// Work items on an agent's hook (or being assigned).
    pub assigned: usize,
    /// Work items being taken away from a silent agent.
    pub reassigning: usize,
    /// Work items done.
    pub done: usize,
    /// Agents suspended by the dispatcher.
    pub suspended_agents: usize,
    /// Tasks whose rounds are in progress.
    pub rounds_active: usize,
    /// Tasks committed.
    pub rounds_committed: usize,
    /// Tasks escalated.
    pub rounds_escalated: usize,
    /// Loop files that could not be read (or, written by a newer version,
    /// hold values this one does not know).
    pub corrupt: usize,
}

/// Whether [`LoopState::doctor`] only reports or also repairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DoctorMode {
    /// Report problems; change nothing.
    #[default]
    Check,
    /// Report problems, quarantine corrupt files and cut torn log tails.
    Fix,
}

/// A problem the doctor found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// A loop file that cannot be read as what it should be.
    Corrupt(CorruptReason),
    /// A name that is not a loop file (left alone).
    Stray,
    /// An unterminated last line in a loop log (a crash mid-append).
    TornLog {
        /// Where it starts.
        offset: u64,
        /// Its length.
        len: u64,
    },
    /// A whole log line that is not a record (skipped by readers; with Fix,
    /// moved to `.quarantine/` by [`JsonLog::repair`](chipset_store::JsonLog::repair)).
    BadLogLine {
        /// Where it starts.
        offset: u64,
    },
}

/// One finding of the doctor.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Finding {
    /// The file.
    pub path: PathBuf,
    /// What is wrong.
    pub problem: Problem,
    /// Where the file was moved, when it was quarantined.
    pub quarantined: Option<PathBuf>,
    /// True when the problem was repaired.
    pub repaired: bool,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        match &self.problem {
            Problem::Corrupt(reason) => write!(f, "`{path}`: corrupt loop file ({reason})")?,
            Problem::Stray => write!(f, "`{path}`: not a loop file (left alone)")?,
            Problem::TornLog { offset, len } => {
                write!(f, "`{path}`: torn last line at byte {offset} ({len} bytes)")?;
            }
            Problem::BadLogLine { offset } => {
                write!(f, "`{path}`: unreadable line at byte {offset}")?
            }
        }
        if let Some(q) = &self.quarantined {
            write!(f, "; quarantined to `{}`", q.display())?;
        } else if self.repaired {
            write!(f, "; repaired")?;
        }
        Ok(())
    }
}

/// What the doctor found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DoctorReport {
    /// How many loop files were checked.
    pub scanned: usize,
    /// Every problem, in path order.
    pub findings: Vec<Finding>,
}

impl DoctorReport {
    /// Returns true when nothing is wrong.
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty()
    }

    /// Returns how many problems are still in place (not repaired, strays excluded).
    pub fn unrepaired(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| !f.repaired && f.problem != Problem::Stray)
            .count()
    }
}

/// The loops' persisted state under `loop/`, for status screens and repair.
#[derive(Debug, Clone)]
pub struct LoopState {
    files: Files,
}

impl LoopState {
    /// Returns the loop state of `state`.
    pub fn new(state: StateDir) -> Self {
        LoopState {
            files: Files::new(state),
        }
    }

    /// Counts incidents, ledger entries and rounds by state. Reads each loop
    /// file once (they are small); unreadable ones are counted as corrupt.
    ///
    /// # Errors
    ///
    /// [`Error::Store`](crate::Error::Store) when a directory cannot be listed.
    pub fn counts(&self) -> Result<LoopCounts> {
        let mut c = LoopCounts::default();
        for (_, read) in self.read_dir::<Incident>(&self.files.incidents_dir())? {
            match read {
                ReadOutcome::Value(i) => match i.step {
                    Step::Escalated { .. } => c.escalated_incidents += 1,
                    s if s.is_open() => c.open_incidents += 1,
                    _ => {}
                },
                ReadOutcome::Corrupt(_) | ReadOutcome::Unsupported(_) => c.corrupt += 1,
                ReadOutcome::Missing => {}
            }
        }
        for (_, read) in self.read_dir::<LedgerEntry>(&self.files.beads_dir())? {
            match read {
                ReadOutcome::Value(e) => match e.state {
                    BeadState::Queued => c.queued += 1,
                    BeadState::Assigning { .. } | BeadState::Assigned { .. } => c.assigned += 1,
                    BeadState::Reassigning { .. } => c.reassigning += 1,
                    BeadState::Done { .. } => c.done += 1,
                },
                ReadOutcome::Corrupt(_) | ReadOutcome::Unsupported(_) => c.corrupt += 1,
                ReadOutcome::Missing => {}
            }
        }
        match self
            .files
            .state
            .read_json::<AgentBook>(&self.files.agents())?
        {
            ReadOutcome::Value(b) => c.suspended_agents = b.suspended.len(),
            ReadOutcome::Corrupt(_) | ReadOutcome::Unsupported(_) => c.corrupt += 1,
            ReadOutcome::Missing => {}
        }
        for (_, read) in self.read_dir::<RoundCheckpoint>(&self.files.rounds_dir())? {
            match read {
                ReadOutcome::Value(r) => match r.phase {
                    Phase::Committed => c.rounds_committed += 1,
                    Phase::Escalated => c.rounds_escalated += 1,
                    _ => c.rounds_active += 1,
                },
                ReadOutcome::Corrupt(_) | ReadOutcome::Unsupported(_) => c.corrupt += 1,
                ReadOutcome::Missing => {}
            }
        }
        Ok(c)
    }

    /// Checks every loop file and log; with [`DoctorMode::Fix`], moves corrupt
    /// files into `.quarantine/` beside them (under their lock; nothing is
    /// deleted) and cuts torn log tails. A quarantined file is as if it never
    /// was: an incident is judged afresh, a ledger entry's bead may be
    /// submitted again, a round starts over; the report names each.
    ///
    /// # Errors
    ///
    /// [`Error::Store`](crate::Error::Store) when a directory cannot be listed
    /// or a repair step fails.
    pub fn doctor(&self, mode: DoctorMode) -> Result<DoctorReport> {
        let mut report = DoctorReport::default();
        self.check_dir::<Incident>(&self.files.incidents_dir(), mode, &mut report)?;
        self.check_dir::<LedgerEntry>(&self.files.beads_dir(), mode, &mut report)?;
        self.check_file::<AgentBook>(&self.files.agents(), mode, &mut report)?;
        self.check_dir::<RoundCheckpoint>(&self.files.rounds_dir(), mode, &mut report)?;
        for log in [self.files.witness_log(), self.files.dispatcher_log()] {
            self.check_log(&log, mode, &mut report)?;
        }
        report.findings.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(report)
    }

    fn read_dir<T: DeserializeOwned>(&self, dir: &Path) -> Result<Vec<(PathBuf, ReadOutcome<T>)>> {
        let mut out = Vec::new();
        for name in self.files.state.list(dir)? {
            if !name.ends_with(".json") {
                continue;
            }
            let path = dir.join(&name);
            let read = self.files.state.read_json::<T>(&path)?;
            out.push((path, read));
        }
        Ok(out)
    }

    fn check_dir<T: DeserializeOwned>(
        &self,
        dir: &Path,
        mode: DoctorMode,
        report: &mut DoctorReport,
    ) -> Result<()> {
        for name in self.files.state.list(dir)? {
            let path = dir.join(&name);
            let valid_name = name
                .strip_suffix(".json")
                .is_some_and(|stem| chipset_store::validate_segment("loop file", stem).is_ok());
            let regular = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file());
            if !valid_name || !regular {
                report.findings.push(Finding {
                    path,
                    problem: Problem::Stray,
                    quarantined: None,
                    repaired: false,
                });
                continue;
            }
            self.check_file::<T>(&path, mode, report)?;
        }
        Ok(())
    }

    fn check_file<T: DeserializeOwned>(
        &self,
        path: &Path,
        mode: DoctorMode,
        report: &mut DoctorReport,
    ) -> Result<()> {
        let ReadOutcome::Corrupt(bad) = self.files.state.read_json::<T>(path)? else {
            if std::fs::symlink_metadata(path).is_ok() {
                report.scanned += 1;
            }
            return Ok(());
        };
        report.scanned += 1;
        let mut finding = Finding {
            path: path.to_owned(),
            problem: Problem::Corrupt(bad.reason),
            quarantined: None,
            repaired: false,
        };
        if mode == DoctorMode::Fix {
            let _guard = self.files.state.lock_for(path)?.exclusive()?;
            // Re-check under the lock: a writer may have replaced it meanwhile.
            if self.files.state.read_json::<T>(path)?.is_corrupt() {
                finding.quarantined = Some(self.files.state.quarantine(path)?);
                finding.repaired = true;
            }
        }
        report.findings.push(finding);
        Ok(())
    }

    fn check_log(&self, path: &Path, mode: DoctorMode, report: &mut DoctorReport) -> Result<()> {
        if std::fs::symlink_metadata(path).is_err() {
            return Ok(());
        }
        report.scanned += 1;
        let log = JsonLog::with_io(path, self.files.state.io().clone());
        // Streamed: only the bad lines and the torn tail are kept, never
        // the records (memory stays flat however long the log grows).
        let read = match log.for_each::<serde_json::Value>(drop) {
            Ok(read) => read,
            // A directory, FIFO or device where the log belongs: reported and,
            // with Fix, moved aside, without stopping the doctor.
            Err(chipset_store::Error::Corrupt(bad)) => {
                let quarantined = match mode {
                    DoctorMode::Fix => Some(self.files.state.quarantine(path)?),
                    DoctorMode::Check => None,
                };
                report.findings.push(Finding {
                    path: path.to_owned(),
                    problem: Problem::Corrupt(bad.reason),
                    repaired: quarantined.is_some(),
                    quarantined,
                });
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        // Bad lines move, byte for byte, to `.quarantine/` (every whole
        // record kept, in order; a torn tail goes with them).
        let moved = match mode {
            DoctorMode::Fix if !read.bad_lines.is_empty() => {
                log.repair::<serde_json::Value>()?.map(|r| r.quarantined)
            }
            _ => None,
        };
        for bad in read.bad_lines {
            report.findings.push(Finding {
                path: path.to_owned(),
                problem: Problem::BadLogLine { offset: bad.offset },
                repaired: moved.is_some(),
                quarantined: moved.clone(),
            });
        }
        if let Some(torn) = read.torn_tail {
            let repaired = moved.is_some() || (mode == DoctorMode::Fix && log.recover()?.is_some());
            report.findings.push(Finding {
                path: path.to_owned(),
                problem: Problem::TornLog {
                    offset: torn.offset,
                    len: torn.len,
                },
                quarantined: None,
                repaired,
            });
        }
        Ok(())
    }
}
