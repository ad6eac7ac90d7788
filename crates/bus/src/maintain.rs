//! Upkeep: status counts, retention, and the doctor.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use chipset_store::{AgentId, ReadOutcome, StateDir, Timestamp};

use crate::bus::{
    BadFile, Bus, CONTROL, EventRead, NAG, PRESENCE, PresenceState, Problem, REGISTRY, read_event,
    remove_acked_copy,
};
use crate::config::{Repair, Retention};
use crate::error::{Error, Result};
use crate::format::{ControlLine, DedupRecord, NagState, Presence, Priority, Registry};
use crate::name::QueueEntry;

/// Cheap counts for one agent, from directory listings alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Unacknowledged events per priority, indexed by [`Priority::digit`].
    pub pending: [usize; 4],
    /// Files in the queue whose names are not event names.
    pub foreign: usize,
    /// Acknowledged events kept in the processed area.
    pub processed: usize,
}

impl Counts {
    /// Returns the unacknowledged events of `priority`.
    pub fn pending_at(&self, priority: Priority) -> usize {
        self.pending[usize::from(priority.digit())]
    }

    /// Returns all unacknowledged events.
    pub fn pending_total(&self) -> usize {
        self.pending.iter().sum()
    }
}

/// One agent's line on a status screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentStatus {
    /// The agent.
    pub agent: AgentId,
    /// Its counts.
    pub counts: Counts,
    /// Its presence.
    pub presence: PresenceState,
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

/// What the doctor did about one finding.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action {
    /// Nothing (report only, or nothing safe to do).
    Reported,
    /// Moved aside to this path.
    Quarantined(PathBuf),
    /// Removed (a stale temp, or a queue copy of an acknowledged event).
    Removed,
    /// A torn log tail was cut.
    Truncated,
}

/// One thing the doctor found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The file and what is wrong with it.
    pub file: BadFile,
    /// What was done.
    pub action: Action,
}

/// What [`Bus::doctor`] found and did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DoctorReport {
    /// Agents scanned.
    pub agents: usize,
    /// Event files read (queued and processed).
    pub events_checked: usize,
    /// Everything wrong, with what was done.
    pub findings: Vec<Finding>,
}

impl DoctorReport {
    /// Returns true when nothing was found.
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty()
    }
}

impl Bus {
    /// Returns the agents that have a directory under `bus/`, sorted.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when `bus/` cannot be listed.
    pub fn agents(&self) -> Result<Vec<AgentId>> {
        let root = self.root();
        Ok(self
            .state()
            .list_dirs(&root)?
            .into_iter()
            .filter_map(|n| AgentId::new(n).ok())
            .collect())
    }

    /// Returns `agent`'s counts from two directory listings (no file is read).
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when a directory cannot be listed.
    pub fn counts(&self, agent: &AgentId) -> Result<Counts> {
        let mut counts = Counts::default();
        for name in self.state().list(&self.queue_dir(agent))? {
            match QueueEntry::parse(&name) {
                Some(e) => counts.pending[usize::from(e.priority().digit())] += 1,
                None => counts.foreign += 1,
            }
        }
        counts.processed = self.state().list(&self.processed_dir(agent))?.len();
        Ok(counts)
    }

    /// Returns every agent's counts and presence, for a status screen.
    ///
    /// # Errors
    ///
    /// As [`Bus::counts`] and [`Bus::presence`].
    pub fn status(&self) -> Result<Vec<AgentStatus>> {
        self.agents()?
            .into_iter()
            .map(|agent| {
                Ok(AgentStatus {
                    counts: self.counts(&agent)?,
                    presence: self.presence(&agent)?,
                    agent,
                })
            })
            .collect()
    }

    /// Removes processed events of `agent` beyond `retention` (the oldest by
    /// publish time go first) and de-duplication records older than its
    /// limit. Unacknowledged events are never touched.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when a directory cannot be listed; [`Error::Io`] when
    /// a file cannot be removed.
    pub fn prune(&self, agent: &AgentId, retention: &Retention) -> Result<Pruned> {
        let now = self.state().now();
        let dir = self.processed_dir(agent);
        let cap = self.state().read_cap();
        let mut entries: Vec<(QueueEntry, u64, Option<Timestamp>)> = Vec::new();
        for entry in self.processed(agent)? {
            let path = dir.join(entry.name());
            let len = match fs::symlink_metadata(&path) {
                Ok(m) => m.len(),
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_error("stat", path, e)),
            };
            // Age is the event's created_at on the bus clock, so the file is
            // read only when an age limit applies.
            let created = match retention.max_age {
                Some(_) => match read_event(&path, entry.name(), cap)? {
                    EventRead::Event(e) => Some(e.created_at()),
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
            let too_many = retention.max_count.is_some_and(|n| i >= n);
            let too_big = retention
                .max_bytes
                .is_some_and(|b| kept_bytes.saturating_add(*len) > b);
            let too_old = retention
                .max_age
                .zip(*created)
                .is_some_and(|(age, at)| now.since(at) > age);
            if too_many || too_big || too_old {
                if remove(self.state(), &dir.join(entry.name()))? {
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
            let path = dir.join(&name);
            // Under the key's lock, so a publish judging this key is not undone.
            let _guard = self.state().lock_for(&path)?.exclusive()?;
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
    /// [`Repair::Fix`] it also repairs: corrupt or misnamed files are
    /// quarantined (moved into `.quarantine/` beside them, never deleted),
    /// stale temps removed, queue copies of acknowledged events removed, torn
    /// control-log tails cut. Bad control-log lines are only reported (the
    /// log is append-only).
    ///
    /// # Errors
    ///
    /// [`Error::Store`] or [`Error::Io`] when a scan or repair step fails.
    pub fn doctor(&self, repair: Repair) -> Result<DoctorReport> {
        let mut report = DoctorReport::default();
        let root = self.root();
        for name in self.state().list(&root)? {
            let path = root.join(&name);
            let is_dir = fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
            if !is_dir || AgentId::new(name.as_str()).is_err() {
                report.findings.push(Finding {
                    file: BadFile {
                        path,
                        problem: Problem::ForeignName,
                    },
                    action: Action::Reported,
                });
            }
        }
        for agent in self.agents()? {
            report.agents += 1;
            self.doctor_agent(&agent, repair, &mut report)?;
        }
        self.doctor_temps(&root, repair, &mut report)?;
        Ok(report)
    }

    fn doctor_agent(
        &self,
        agent: &AgentId,
        repair: Repair,
        report: &mut DoctorReport,
    ) -> Result<()> {
        let cap = self.state().read_cap();
        let processed = self.processed_dir(agent);
        for dir in [self.queue_dir(agent), processed.clone()] {
            let is_queue = dir != processed;
            for name in self.state().list(&dir)? {
                let path = dir.join(&name);
                report.events_checked += 1;
                match read_event(&path, &name, cap)? {
                    EventRead::Gone => {}
                    EventRead::Bad(problem) => {
                        // An unsupported event is what it claims to be: reported, never moved.
                        let action = if matches!(problem, Problem::Unsupported(_)) {
                            Action::Reported
                        } else {
                            self.quarantine(&path, repair)?
                        };
                        report.findings.push(Finding {
                            file: BadFile { path, problem },
                            action,
                        });
                    }
                    EventRead::Event(_) => {
                        let done = processed.join(&name);
                        if is_queue && fs::symlink_metadata(&done).is_ok() {
                            let action = match repair {
                                Repair::Fix if remove_acked_copy(self.state(), &path, &done)? => {
                                    Action::Removed
                                }
                                _ => Action::Reported,
                            };
                            report.findings.push(Finding {
                                file: BadFile {
                                    path,
                                    problem: Problem::AckedCopyInQueue,
                                },
                                action,
                            });
                        }
                    }
                }
            }
        }
        let dedup = self.dedup_dir(agent);
        for name in self.state().list(&dedup)? {
            let path = dedup.join(name);
            let read = self.state().read_json::<DedupRecord>(&path)?;
            self.read_finding(read.map(drop), repair, report)?;
        }
        let dir = self.agent_dir(agent);
        let state = self.state();
        let reads = [
            state.read_json::<Presence>(&dir.join(PRESENCE))?.map(drop),
            state.read_json::<Registry>(&dir.join(REGISTRY))?.map(drop),
            state.read_json::<NagState>(&dir.join(NAG))?.map(drop),
        ];
        for read in reads {
            self.read_finding(read, repair, report)?;
        }
        let log = state.log(&dir.join(CONTROL))?;
        // Streamed: only the bad lines and the torn tail are kept.
        let contents = match log.for_each::<ControlLine>(drop) {
            Ok(c) => c,
            // A directory, FIFO or device where the log belongs: report it
            // and (with Fix) move it aside, without stopping the doctor.
            Err(chipset_store::Error::Corrupt(c)) => {
                return self.read_finding(ReadOutcome::Corrupt(c), repair, report);
            }
            Err(e) => return Err(e.into()),
        };
        // Bad lines are moved, byte for byte, to `.quarantine/` by the store's
        // repair, which keeps every whole command in order (a torn tail goes
        // with them).
        let repaired = match repair {
            Repair::Fix if !contents.bad_lines.is_empty() => {
                let done = log.repair::<ControlLine>()?.map(|r| r.quarantined);
                if done.is_some() {
                    // The repair moved lines, so the registry's applied offset
                    // no longer points into the log: rebuild it from the start
                    // (the registry is derived from the whole log).
                    state.update(&dir.join(REGISTRY), |_: ReadOutcome<Registry>| {
                        Ok::<_, Error>(chipset_store::Decision::Write(Registry::default(), ()))
                    })?;
                    let _ = self.apply_control(agent)?;
                }
                done
            }
            _ => None,
        };
        for bad in contents.bad_lines {
            let action = match &repaired {
                Some(to) => Action::Quarantined(to.clone()),
                None => Action::Reported,
            };
            report.findings.push(Finding {
                file: BadFile {
                    path: log.path().to_owned(),
                    problem: Problem::BadLogLine {
                        offset: bad.offset,
                        reason: bad.reason,
                    },
                },
                action,
            });
        }
        if let Some(torn) = contents.torn_tail {
            let action = match (&repaired, repair) {
                (Some(to), _) => Action::Quarantined(to.clone()),
                (None, Repair::Fix) => {
                    log.recover()?;
                    Action::Truncated
                }
                (None, Repair::ReportOnly) => Action::Reported,
            };
            report.findings.push(Finding {
                file: BadFile {
                    path: log.path().to_owned(),
                    problem: Problem::TornLogTail {
                        offset: torn.offset,
                        len: torn.len,
                    },
                },
                action,
            });
        }
        Ok(())
    }

    /// Reports a corrupt file (quarantined with `Repair::Fix`) or an
    /// unsupported one (left in place); a missing or good file is no finding.
    fn read_finding(
        &self,
        read: ReadOutcome<()>,
        repair: Repair,
        report: &mut DoctorReport,
    ) -> Result<()> {
        let (file, action) = match read {
            ReadOutcome::Missing | ReadOutcome::Value(()) => return Ok(()),
            ReadOutcome::Corrupt(c) => {
                let action = self.quarantine(&c.path, repair)?;
                let file = BadFile {
                    path: c.path,
                    problem: Problem::Corrupt(c.reason),
                };
                (file, action)
            }
            ReadOutcome::Unsupported(u) => {
                let file = BadFile {
                    path: u.path,
                    problem: Problem::Unsupported(u.what),
                };
                (file, Action::Reported)
            }
        };
        report.findings.push(Finding { file, action });
        Ok(())
    }

    fn quarantine(&self, path: &Path, repair: Repair) -> Result<Action> {
        match repair {
            Repair::ReportOnly => Ok(Action::Reported),
            Repair::Fix => match self.state().quarantine(path) {
                Ok(to) => Ok(Action::Quarantined(to)),
                // Acknowledged or repaired by someone else meanwhile.
                Err(chipset_store::Error::NotFound { .. }) => Ok(Action::Reported),
                Err(e) => Err(e.into()),
            },
        }
    }

    fn doctor_temps(&self, root: &Path, repair: Repair, report: &mut DoctorReport) -> Result<()> {
        for path in chipset_store::stale_temps(root, self.config().stale_temp_age)? {
            let action = match repair {
                Repair::Fix if remove(self.state(), &path)? => Action::Removed,
                _ => Action::Reported,
            };
            report.findings.push(Finding {
                file: BadFile {
                    path,
                    problem: Problem::StaleTemp,
                },
                action,
            });
        }
        Ok(())
    }
}

fn io_error(op: &'static str, path: PathBuf, source: io::Error) -> Error {
    Error::Io { op, path, source }
}

/// Removes a file; false when it was gone already. Removal needs no sync:
/// a pruned file that comes back after a power cut is pruned again.
fn remove(state: &StateDir, path: &Path) -> Result<bool> {
    Ok(state.remove_file(path)?)
}
