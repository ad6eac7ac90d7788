//! Upkeep: status counts, retention, and the doctor.

use std::fmt;
use std::path::Path;

use chipset_store::{
    Action, AgentId, CorruptReason, Defect, DoctorMode, Finding, LogContents, ReadOutcome, Report,
    StateDir, StatePath, Timestamp,
};

use crate::bus::{
    Bus, CONTROL, EventRead, NAG, PRESENCE, Problem, REGISTRY, listed, read_event,
    remove_acked_copy,
};
use crate::config::Retention;
use crate::control;
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::format::{ControlLine, DedupRecord, NagState, Presence, Priority, Registry};
use crate::name::QueueEntry;

/// One agent's line on a status screen: its counts, from directory
/// listings alone, and its presence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentStatus {
    /// The agent.
    pub agent: AgentId,
    /// Unacknowledged events per priority, in the order of [`Priority::ALL`]
    /// (critical first; see [`AgentStatus::pending_at`]).
    pub pending: [usize; 4],
    /// Files in the queue whose names are not event names.
    pub foreign: usize,
    /// Acknowledged events kept in the processed area.
    pub processed: usize,
    /// Its presence file, as read.
    pub presence: ReadOutcome<Presence>,
    /// Whether the presence was live ([`Bus::is_live`]) when the status
    /// was taken.
    pub live: bool,
}

impl AgentStatus {
    /// Returns the unacknowledged events of `priority`.
    pub fn pending_at(&self, priority: Priority) -> usize {
        self.pending[usize::from(priority.digit())]
    }

    /// Returns all unacknowledged events.
    pub fn pending_total(&self) -> usize {
        self.pending.iter().sum()
    }
}

/// What [`Bus::prune`] removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pruned {
    /// Processed events removed.
    pub events: usize,
    /// Their bytes.
    pub bytes: u64,
    /// De-duplication records removed.
    pub dedup_records: usize,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Corrupt(reason) => write!(f, "{reason}"),
            Problem::Unsupported(what) => {
                write!(
                    f,
                    "holds {what}, unsupported by this version (left in place)"
                )
            }
            Problem::ForeignName => f.write_str("not an event file name"),
            Problem::NameMismatch => f.write_str("its id or priority differs from its file name"),
        }
    }
}

/// What the doctor finds wrong with a bus file: a [`Problem`] a listing
/// reports too, or a fault only the doctor looks for.
pub(crate) enum Fault {
    /// What a listing reports.
    Read(Problem),
    /// An event in both the queue and the processed area (a crash between
    /// the two directory syncs of an acknowledgement).
    AckedCopyInQueue,
    /// A temp file left by a crashed writer.
    StaleTemp,
    /// An unterminated last line in the control log (a crashed append).
    TornLogTail {
        /// Where it starts.
        offset: u64,
        /// Its length.
        len: u64,
    },
    /// A whole line in the control log that is not a command; it is skipped.
    BadLogLine {
        /// Where it starts.
        offset: u64,
        /// Why it was refused.
        reason: CorruptReason,
    },
}

impl From<Problem> for Fault {
    fn from(problem: Problem) -> Self {
        Fault::Read(problem)
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Read(problem) => problem.fmt(f),
            Fault::AckedCopyInQueue => f.write_str("acknowledged, but a copy is still queued"),
            Fault::StaleTemp => f.write_str("stale temp file"),
            Fault::TornLogTail { offset, len } => {
                write!(f, "torn last line ({len} bytes at offset {offset})")
            }
            Fault::BadLogLine { offset, reason } => {
                write!(f, "bad line at offset {offset}: {reason}")
            }
        }
    }
}

/// Tells whether what is seen at a path (under the read cap) is corrupt.
type Judge = fn(&Path, &ReadOutcome<Vec<u8>>) -> bool;

fn is_corrupt<T: serde::de::DeserializeOwned>(path: &Path, seen: &ReadOutcome<Vec<u8>>) -> bool {
    seen.as_ref()
        .and_then(|b| ReadOutcome::<T>::from_json(path, b))
        .is_corrupt()
}

/// The entry `name` listed in `dir` as a path, or `None` once it is
/// reported: a name that is not one safe segment is foreign, and out of a
/// `StatePath`'s reach, so it is reported and left alone.
fn listed_or_reported(dir: &StatePath, name: &str, report: &mut Report) -> Option<StatePath> {
    listed(dir, name)
        .map_err(|shown| report.findings.push(finding(&shown, Problem::ForeignName)))
        .ok()
}

/// Returns the doctor's finding for a bad bus file: coded `bus-{kind}`,
/// worded "`{path}`: {problem}".
pub(crate) fn finding(path: &Path, fault: impl Into<Fault>) -> Finding {
    let fault = fault.into();
    let line = format!("`{}`: {fault}", path.display());
    let (code, fault) = match fault {
        Fault::Read(Problem::Corrupt(reason)) => ("bus-corrupt", Defect::Corrupt(reason)),
        Fault::Read(Problem::Unsupported(what)) => ("bus-unsupported", Defect::Unsupported(what)),
        Fault::Read(Problem::ForeignName) => ("bus-foreign-name", Defect::Stray),
        Fault::Read(Problem::NameMismatch) => (
            "bus-name-mismatch",
            Defect::Corrupt(CorruptReason::WrongShape(
                "its id or priority differs from its file name".to_owned(),
            )),
        ),
        Fault::AckedCopyInQueue => ("bus-acked-copy", Defect::Stale),
        Fault::StaleTemp => ("bus-stale-temp", Defect::Stale),
        Fault::TornLogTail { .. } => ("bus-torn-log", Defect::Unfinished),
        Fault::BadLogLine { reason, .. } => ("bus-bad-line", Defect::Corrupt(reason)),
    };
    Finding::new(code, fault, line).at(path)
}

impl Bus {
    /// Returns the agents that have a directory under `bus/` (on a server,
    /// a row below it), sorted.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when `bus/` cannot be listed; [`Error::Backend`] on
    /// a server.
    pub fn agents(&self) -> Result<Vec<AgentId>> {
        if let Some(seam) = self.server() {
            return self.seam_agents(seam);
        }
        let root = self.root();
        Ok(self
            .state()
            .list_dirs(&root)?
            .into_iter()
            .filter_map(|n| AgentId::new(n).ok())
            .collect())
    }

    /// Returns `agent`'s counts, from two directory listings (no event file
    /// is read), and its presence.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when a directory cannot be listed or the presence
    /// cannot be read.
    pub fn agent_status(&self, agent: &AgentId) -> Result<AgentStatus> {
        let mut pending = [0; 4];
        let mut foreign = 0;
        for name in self.folder_names(agent, crate::bus::QUEUE)? {
            match QueueEntry::parse(&name) {
                Some(e) => pending[usize::from(e.priority().digit())] += 1,
                None => foreign += 1,
            }
        }
        let processed = self.folder_names(agent, crate::bus::PROCESSED)?.len();
        let presence = self.presence(agent)?;
        Ok(AgentStatus {
            agent: agent.clone(),
            pending,
            foreign,
            processed,
            live: matches!(&presence, ReadOutcome::Value(p) if self.is_live(p)),
            presence,
        })
    }

    /// Returns every agent's [`Bus::agent_status`], for a status screen.
    ///
    /// # Errors
    ///
    /// As [`Bus::agent_status`].
    pub fn status(&self) -> Result<Vec<AgentStatus>> {
        self.agents()?
            .into_iter()
            .map(|agent| self.agent_status(&agent))
            .collect()
    }

    /// Removes processed events of `agent` beyond `retention` (the oldest by
    /// publish time go first) and de-duplication records older than its
    /// limit. Unacknowledged events are never touched. On a server the
    /// rows are judged the same way, on the server's clock, and each is
    /// removed with a compare-and-swap at the version read.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when a directory cannot be listed; [`Error::Io`] when
    /// a file cannot be removed; [`Error::Backend`] on a server.
    pub fn prune(&self, agent: &AgentId, retention: &Retention) -> Result<Pruned> {
        if let Some(seam) = self.server() {
            return self.seam_prune(seam, agent, retention);
        }
        let now = self.state().now();
        let dir = self.processed_dir(agent);
        let mut entries: Vec<(QueueEntry, u64, Option<Timestamp>)> = Vec::new();
        for entry in self.entries(&self.processed_dir(agent))? {
            let path = dir.join(entry.name())?;
            let Some(len) = self.state().stat(&path)?.map(|m| m.len) else {
                continue;
            };
            // Age is the event's created_at on the bus clock, so the file is
            // read only when an age limit applies.
            let created = match retention.max_age {
                Some(_) => match read_event(self.state(), &path, entry.name())? {
                    EventRead::Event(e) => Some(e.created_at),
                    // Unreadable files are the doctor's; they are not pruned by age.
                    EventRead::Bad(_) | EventRead::Gone => None,
                },
                None => None,
            };
            entries.push((entry, len, created));
        }
        // Newest first; keep a prefix that fits every limit.
        entries.sort_by(|a, b| b.0.id().cmp(a.0.id()));
        let mut pruned = Pruned::default();
        let mut kept_bytes = 0u64;
        for (i, (entry, len, created)) in entries.iter().enumerate() {
            if retention.drops(i, kept_bytes, *len, *created, now) {
                if remove(self.state(), &dir.join(entry.name())?)? {
                    pruned.events += 1;
                    pruned.bytes += len;
                }
            } else {
                kept_bytes += len;
            }
        }
        if let Some(age) = retention.dedup_max_age {
            pruned.dedup_records = self.prune_dedup(agent, now, age)?;
        }
        Ok(pruned)
    }

    fn prune_dedup(
        &self,
        agent: &AgentId,
        now: Timestamp,
        age: std::time::Duration,
    ) -> Result<usize> {
        let dir = self.dedup_dir(agent);
        let mut removed = 0;
        for name in self.state().list(&dir)? {
            // A name that is not one safe segment is no key's record: the
            // doctor reports it.
            let Ok(path) = dir.join(&name) else { continue };
            // Under the key's lock, so a publish judging this key is not undone.
            let _guard = self.state().lock(&path)?;
            let old = match self.state().read_json::<DedupRecord>(&path)? {
                ReadOutcome::Value(r) => now.since(r.accepted_at) > age,
                // Corrupt records are the doctor's; missing ones are gone already.
                _ => false,
            };
            if old && remove(self.state(), &path)? {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Scans every agent's bus files and reports what is wrong; with
    /// [`DoctorMode::Fix`] it also repairs: corrupt or misnamed files are
    /// quarantined (moved into `.quarantine/` beside them, never deleted,
    /// through the store's checked quarantine: presence, registry, nag state
    /// and de-duplication records are read again under the lock their
    /// writers take, and a file rewritten since the check is left alone),
    /// stale temps removed, queue copies of acknowledged events removed,
    /// torn control-log tails cut, bad control-log lines moved aside by the
    /// store's log repair. Findings are coded `bus-corrupt`,
    /// `bus-unsupported`, `bus-foreign-name`, `bus-name-mismatch`,
    /// `bus-acked-copy`, `bus-stale-temp`, `bus-torn-log` and `bus-bad-line`;
    /// `scanned` counts the event files read.
    ///
    /// On a server the rows get the same checks, read one at a time: a
    /// repair moves a bad value into the folder `quarantine` beside it
    /// (with a compare-and-swap at the version read, so a value rewritten
    /// since is left alone) and removes an acknowledged event's queued copy
    /// holding the same bytes. A server has no temp files or torn lines,
    /// and its control log is never rewritten: a record there that is not
    /// a command is reported, not fixable (the registry skips it).
    ///
    /// # Errors
    ///
    /// [`Error::Store`] or [`Error::Io`] when a scan or repair step fails;
    /// [`Error::Backend`] on a server.
    pub fn doctor(&self, mode: DoctorMode) -> Result<Report> {
        if let Some(seam) = self.server() {
            return self.seam_doctor(seam, mode);
        }
        let mut report = Report::new(mode);
        let root = self.root();
        let dirs = self.state().list_dirs(&root)?;
        for name in self.state().list(&root)? {
            let is_dir = dirs.binary_search(&name).is_ok();
            if !is_dir || AgentId::new(name.as_str()).is_err() {
                // Not written by chipset: a person decides.
                report
                    .findings
                    .push(finding(&root.as_path().join(&name), Problem::ForeignName));
            }
        }
        for agent in self.agents()? {
            self.doctor_agent(&agent, &mut report)?;
        }
        self.doctor_temps(&root, &mut report)?;
        Ok(report)
    }

    fn doctor_agent(&self, agent: &AgentId, report: &mut Report) -> Result<()> {
        let fix = report.mode == DoctorMode::Fix;
        let processed = self.processed_dir(agent);
        for dir in [self.queue_dir(agent), processed.clone()] {
            let is_queue = dir != processed;
            for name in self.state().list(&dir)? {
                report.scanned += 1;
                let Some(path) = listed_or_reported(&dir, &name, report) else {
                    continue;
                };
                match read_event(self.state(), &path, &name)? {
                    EventRead::Gone => {}
                    EventRead::Bad(problem) => {
                        // An unsupported event is what it claims to be: reported, never moved.
                        let unsupported = matches!(problem, Problem::Unsupported(_));
                        let mut f = finding(&path, problem);
                        if !unsupported {
                            // A foreign name in a queue is moved aside like a bad event.
                            f = f.fixable(true);
                            if fix {
                                // Event files are never rewritten (published
                                // no-clobber, acknowledged by a move): no lock.
                                let action = self.state().quarantine_checked(&path, None, |_| {
                                    matches!(read_event(self.state(), &path, &name), Ok(EventRead::Bad(p))
                                        if !matches!(p, Problem::Unsupported(_)))
                                })?;
                                f = f.with(action);
                            }
                        }
                        report.findings.push(f);
                    }
                    EventRead::Event(_) => {
                        let done = processed.join(&name)?;
                        if is_queue && self.state().stat(&done)?.is_some() {
                            let mut f = finding(&path, Fault::AckedCopyInQueue);
                            if fix && remove_acked_copy(self.state(), &path, &done)? {
                                f = f.with(Action::Removed("removed".to_owned()));
                            }
                            report.findings.push(f);
                        }
                    }
                }
            }
        }
        let dedup = self.dedup_dir(agent);
        for name in self.state().list(&dedup)? {
            let Some(path) = listed_or_reported(&dedup, &name, report) else {
                continue;
            };
            let read = self.state().read_json::<DedupRecord>(&path)?.map(drop);
            self.state_finding(&path, read, is_corrupt::<DedupRecord>, report)?;
        }
        let dir = self.agent_dir(agent);
        let state = self.state();
        // All three are read before any is repaired, so a repair finds each
        // as a writer may have left it since (and leaves it alone if so).
        let (presence, registry, nag) = (
            dir.join_static(PRESENCE),
            dir.join_static(REGISTRY),
            dir.join_static(NAG),
        );
        let reads = [
            state.read_json::<Presence>(&presence)?.map(drop),
            state.read_json::<Registry>(&registry)?.map(drop),
            state.read_json::<NagState>(&nag)?.map(drop),
        ];
        let judges: [Judge; 3] = [
            is_corrupt::<Presence>,
            is_corrupt::<Registry>,
            is_corrupt::<NagState>,
        ];
        for ((path, read), judge) in [&presence, &registry, &nag]
            .into_iter()
            .zip(reads)
            .zip(judges)
        {
            self.state_finding(path, read, judge, report)?;
        }
        let control = dir.join_static(CONTROL);
        let log = state.log(&control)?;
        // Streamed: only the bad lines and the torn tail are kept.
        let contents = match log.for_each::<ControlLine>(drop) {
            Ok(c) => c,
            // A directory, FIFO or device where the log belongs: report it
            // and (with Fix) move it aside, without stopping the doctor.
            Err(chipset_store::Error::Corrupt(c)) => {
                let mut f = finding(&c.path, Problem::Corrupt(c.reason));
                if fix {
                    f = f.with(state.quarantine_checked(&control, Some(&control), |seen| {
                        matches!(seen, ReadOutcome::Corrupt(c)
                            if c.reason == CorruptReason::NotARegularFile)
                    })?);
                }
                report.findings.push(f);
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        // Bad lines are moved, byte for byte, to `.quarantine/` by the store's
        // repair, which keeps every whole command in order (a torn tail goes
        // with them).
        let repaired = match fix {
            true if !contents.bad_lines.is_empty() => {
                // The repair moves lines, so the registry's applied offset
                // will no longer point into the log: under the registry's
                // lock (which every apply takes, so none runs in between),
                // it is reset to the start (the registry is derived from
                // the whole log) BEFORE the log shrinks, so a failure or
                // power cut after the repair never leaves an offset past
                // the log's end (from which later commands would be
                // skipped, and which no later Fix would see); then it is
                // rebuilt from the repaired log.
                let _held = state.lock(&registry)?;
                state.write_json(&registry, &Registry::default())?;
                let done = log.repair::<ControlLine>()?;
                if done.is_some() {
                    let read: LogContents<ControlLine> = log.read_from(0)?;
                    let rebuilt =
                        control::apply(Registry::default(), &read.records, read.end_offset);
                    state.write_json(&registry, &rebuilt)?;
                }
                done
            }
            _ => None,
        };
        for bad in contents.bad_lines {
            let mut f = finding(
                log.path(),
                Fault::BadLogLine {
                    offset: bad.offset,
                    reason: bad.reason,
                },
            );
            if let Some(to) = &repaired {
                f = f.with(Action::quarantined(to));
            }
            report.findings.push(f);
        }
        if let Some(len) = contents.torn_tail {
            let mut f = finding(
                log.path(),
                Fault::TornLogTail {
                    offset: contents.end_offset,
                    len,
                },
            );
            if let Some(to) = &repaired {
                f = f.with(Action::quarantined(to));
            } else if fix {
                log.recover()?;
                f = f.with(Action::Truncated("truncated".to_owned()));
            }
            report.findings.push(f);
        }
        Ok(())
    }

    /// Reports a state file written under its lock (presence, registry, nag
    /// state, a de-duplication record) that `read` found corrupt (with Fix,
    /// moved aside if under the lock it is still the bytes `judge` finds
    /// corrupt) or unsupported (left in place); a missing or good file is no
    /// finding.
    fn state_finding(
        &self,
        path: &StatePath,
        read: ReadOutcome<()>,
        judge: Judge,
        report: &mut Report,
    ) -> Result<()> {
        let state = self.state();
        match read {
            ReadOutcome::Missing | ReadOutcome::Value(()) => {}
            ReadOutcome::Corrupt(c) => {
                let mut f = finding(&c.path, Problem::Corrupt(c.reason));
                if report.mode == DoctorMode::Fix {
                    f = f.with(
                        state.quarantine_checked(path, Some(path), |seen| judge(path, seen))?,
                    );
                }
                report.findings.push(f);
            }
            ReadOutcome::Unsupported(u) => {
                report
                    .findings
                    .push(finding(&u.path, Problem::Unsupported(u.what)));
            }
        }
        Ok(())
    }

    fn doctor_temps(&self, root: &StatePath, report: &mut Report) -> Result<()> {
        let age = self.config.stale_temp_age;
        // A temp is a dot-name, the store's own, so the store removes them:
        // with Fix each finding is a temp it removed (one that vanished
        // meanwhile is no longer there to report).
        for path in self.state().sweep_temps(root, age, report.mode)? {
            let mut f = finding(&path, Fault::StaleTemp);
            if report.mode == DoctorMode::Fix {
                f = f.with(Action::Removed("removed".to_owned()));
            }
            report.findings.push(f);
        }
        Ok(())
    }
}

/// Removes a file; false when it was gone already. Removal needs no sync:
/// a pruned file that comes back after a power cut is pruned again.
fn remove(state: &StateDir, path: &StatePath) -> Result<bool> {
    Ok(state.remove_file(path)?)
}
