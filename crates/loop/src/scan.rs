//! Status counts and the doctor for the files under `loop/`.

use std::path::Path;

use chipset_store::{
    Action, CorruptReason, Defect, DoctorMode, Finding, ReadOutcome, Report, StatePath,
};
use serde::de::DeserializeOwned;

use crate::channels::Channels;
use crate::error::Result;
use crate::files::Files;
use crate::format::{AgentBook, BeadState, Incident, LedgerEntry, Phase, RoundCheckpoint, Step};
use crate::worker::PendingReport;

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

/// The loops' persisted state under `loop/`, for status screens and repair.
#[derive(Debug, Clone)]
pub struct LoopState {
    files: Files,
}

impl LoopState {
    /// Returns the records of the loops working through `channels`: a
    /// [`StateDir`](chipset_store::StateDir)'s files, or, for
    /// [`Channels::with_backend`](crate::Channels::with_backend), the
    /// records the loops keep on that server (issue 30).
    pub fn new(channels: impl Into<Channels>) -> Self {
        LoopState {
            files: channels.into().files(),
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
        match self.files.read_outcome::<AgentBook>(&self.files.agents())? {
            ReadOutcome::Value(b) => c.suspended_agents = b.suspended.len(),
            ReadOutcome::Corrupt(_) | ReadOutcome::Unsupported(_) => c.corrupt += 1,
            ReadOutcome::Missing => {}
        }
        for (_, read) in self.read_dir::<PendingReport>(&self.files.reports_dir())? {
            if matches!(read, ReadOutcome::Corrupt(_) | ReadOutcome::Unsupported(_)) {
                c.corrupt += 1;
            }
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
    /// files into `.quarantine/` beside them (through the store's checked
    /// quarantine, under their lock; nothing is deleted) and cuts torn log
    /// tails. A quarantined file is as if it never was: an incident is judged
    /// afresh, a ledger entry's bead may be submitted again, a round starts
    /// over, a worker's undelivered report is not sent (its bytes stay in
    /// the quarantine); the report names each. Findings are coded `loop-corrupt`,
    /// `loop-stray`, `loop-torn-log` and `loop-bad-line`, in path order.
    ///
    /// On a server the records' rows are checked (`loop-corrupt`), and a
    /// fix moves a corrupt one into `quarantine/` beside it at the version
    /// read; the logs there hold whole records only.
    ///
    /// # Errors
    ///
    /// [`Error::Store`](crate::Error::Store) when a directory cannot be listed
    /// or a repair step fails; [`Error::Backend`](crate::Error::Backend)
    /// when a server's rows cannot be read or moved.
    pub fn doctor(&self, mode: DoctorMode) -> Result<Report> {
        if self.files.on_server() {
            return self.server_doctor(mode);
        }
        let mut report = Report::new(mode);
        self.check_dir::<Incident>(&self.files.incidents_dir(), &mut report)?;
        self.check_dir::<LedgerEntry>(&self.files.beads_dir(), &mut report)?;
        let agents = self.files.agents();
        let seen = self.files.state.observe(&agents)?;
        self.check_file::<AgentBook>(&agents, &seen, &mut report)?;
        self.check_dir::<RoundCheckpoint>(&self.files.rounds_dir(), &mut report)?;
        self.check_dir::<PendingReport>(&self.files.reports_dir(), &mut report)?;
        for log in [self.files.witness_log(), self.files.dispatcher_log()] {
            self.check_log(&log, &mut report)?;
        }
        report.sort_by_path();
        Ok(report)
    }

    /// The doctor on a server: the records (incidents, the ledger, the
    /// dispatcher's book, round checkpoints, undelivered reports) are rows, and one that does
    /// not parse is reported and, with [`DoctorMode::Fix`], moved into
    /// `quarantine/` beside it at the version read (nothing is deleted).
    /// The logs are the server's, whose appends are whole records.
    fn server_doctor(&self, mode: DoctorMode) -> Result<Report> {
        let mut report = Report::new(mode);
        self.check_rows::<Incident>(&self.files.incidents_dir(), None, &mut report)?;
        self.check_rows::<LedgerEntry>(&self.files.beads_dir(), None, &mut report)?;
        self.check_rows::<AgentBook>(
            &self.files.dispatcher_dir(),
            Some("agents.json"),
            &mut report,
        )?;
        self.check_rows::<RoundCheckpoint>(&self.files.rounds_dir(), None, &mut report)?;
        self.check_rows::<PendingReport>(&self.files.reports_dir(), None, &mut report)?;
        report.sort_by_path();
        Ok(report)
    }

    /// Checks the rows of `dir` on a server (only `only` when given).
    fn check_rows<T: DeserializeOwned>(
        &self,
        dir: &StatePath,
        only: Option<&str>,
        report: &mut Report,
    ) -> Result<()> {
        for (name, row) in self.files.server_values(dir)?.unwrap_or_default() {
            if only.is_some_and(|only| only != name) {
                continue;
            }
            // The seam's names are safe segments.
            let path = dir.join(&name)?;
            report.scanned += 1;
            let ReadOutcome::Corrupt(bad) = ReadOutcome::<T>::from_json(&path, &row.value) else {
                continue;
            };
            let line = format!("`{}`: corrupt loop file ({})", path.display(), bad.reason);
            let mut finding =
                Finding::new("loop-corrupt", Defect::Corrupt(bad.reason), line).at(&path);
            if report.mode == DoctorMode::Fix {
                finding = finding.with(self.files.quarantine_row(&path, row.version)?);
            }
            report.findings.push(finding);
        }
        Ok(())
    }

    fn read_dir<T: DeserializeOwned>(
        &self,
        dir: &StatePath,
    ) -> Result<Vec<(StatePath, ReadOutcome<T>)>> {
        let mut out = Vec::new();
        for name in self.files.list(dir)? {
            // A name chipset cannot have written is the doctor's (a stray).
            let Some(path) = name
                .ends_with(".json")
                .then(|| dir.join(&name).ok())
                .flatten()
            else {
                continue;
            };
            let read = self.files.read_outcome::<T>(&path)?;
            out.push((path, read));
        }
        Ok(out)
    }

    fn check_dir<T: DeserializeOwned>(&self, dir: &StatePath, report: &mut Report) -> Result<()> {
        let stray = |report: &mut Report, path: &Path| {
            let line = format!("`{}`: not a loop file (left alone)", path.display());
            report
                .findings
                .push(Finding::new("loop-stray", Defect::Stray, line).at(path));
        };
        for name in self.files.state.list(dir)? {
            let valid_name = name
                .strip_suffix(".json")
                .is_some_and(|stem| chipset_store::TaskId::new(stem).is_ok());
            // A valid loop file name (its stem passes the id rules, the
            // same for every id type) is always one safe segment; any other
            // name is a stray, reported by its display path.
            let path = match dir.join(&name) {
                Ok(path) if valid_name => path,
                _ => {
                    stray(report, &dir.as_path().join(&name));
                    continue;
                }
            };
            // One read: what is seen is both the stray check and the file.
            let seen = self.files.state.observe(&path)?;
            let regular = match &seen {
                ReadOutcome::Value(_) => true,
                ReadOutcome::Corrupt(c) => matches!(c.reason, CorruptReason::TooLarge { .. }),
                _ => false,
            };
            if !regular {
                stray(report, &path);
                continue;
            }
            self.check_file::<T>(&path, &seen, report)?;
        }
        Ok(())
    }

    fn check_file<T: DeserializeOwned>(
        &self,
        path: &StatePath,
        seen: &ReadOutcome<Vec<u8>>,
        report: &mut Report,
    ) -> Result<()> {
        let state = &self.files.state;
        let parse = |seen: &ReadOutcome<Vec<u8>>| {
            seen.as_ref()
                .and_then(|b| ReadOutcome::<T>::from_json(path, b))
        };
        if *seen == ReadOutcome::Missing {
            return Ok(());
        }
        report.scanned += 1;
        let ReadOutcome::Corrupt(bad) = parse(seen) else {
            return Ok(());
        };
        let line = format!("`{}`: corrupt loop file ({})", path.display(), bad.reason);
        let mut finding = Finding::new("loop-corrupt", Defect::Corrupt(bad.reason), line).at(path);
        if report.mode == DoctorMode::Fix {
            // Re-checked under the lock: a writer may have replaced it meanwhile.
            finding = finding
                .with(state.quarantine_checked(path, Some(path), |s| parse(s).is_corrupt())?);
        }
        report.findings.push(finding);
        Ok(())
    }

    fn check_log(&self, path: &StatePath, report: &mut Report) -> Result<()> {
        let state = &self.files.state;
        if state.stat(path)?.is_none() {
            return Ok(());
        }
        report.scanned += 1;
        let fix = report.mode == DoctorMode::Fix;
        let log = state.log_reader(path)?;
        // Streamed: only the bad lines and the torn tail are kept, never
        // the records (memory stays flat however long the log grows).
        let read = match log.for_each::<serde_json::Value>(drop) {
            Ok(read) => read,
            // A directory, FIFO or device where the log belongs: reported and,
            // with Fix, moved aside, without stopping the doctor.
            Err(chipset_store::Error::Corrupt(bad)) => {
                let line = format!("`{}`: corrupt loop file ({})", path.display(), bad.reason);
                let mut finding =
                    Finding::new("loop-corrupt", Defect::Corrupt(bad.reason), line).at(path);
                if fix {
                    finding = finding.with(state.quarantine_checked(path, Some(path), |s| {
                        matches!(s, ReadOutcome::Corrupt(c)
                            if c.reason == CorruptReason::NotARegularFile)
                    })?);
                }
                report.findings.push(finding);
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        // Bad lines move, byte for byte, to `.quarantine/` (every whole
        // record kept, in order; a torn tail goes with them).
        let moved = match fix {
            true if !read.bad_lines.is_empty() => log.repair::<serde_json::Value>()?,
            _ => None,
        };
        for bad in read.bad_lines {
            let line = format!(
                "`{}`: unreadable line at byte {}",
                path.display(),
                bad.offset
            );
            let mut finding =
                Finding::new("loop-bad-line", Defect::Corrupt(bad.reason), line).at(path);
            if let Some(to) = &moved {
                finding = finding.with(Action::quarantined(to));
            }
            report.findings.push(finding);
        }
        if let Some(len) = read.torn_tail {
            let line = format!(
                "`{}`: torn last line at byte {} ({} bytes)",
                path.display(),
                read.end_offset,
                len
            );
            let mut finding = Finding::new("loop-torn-log", Defect::Unfinished, line).at(path);
            if moved.is_some() || (fix && log.recover()?.is_some()) {
                finding = finding.with(Action::Truncated("repaired".to_owned()));
            }
            report.findings.push(finding);
        }
        Ok(())
    }
}
