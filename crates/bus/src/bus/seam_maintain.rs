//! Upkeep on a server (issue 30): the agents, retention and the doctor
//! when the bus was made with [`Bus::with_backend`]. The checks are the
//! directory's, made on the rows: `bus/{agent}/queue/…`,
//! `processed/…`, `dedup/…`, `presence.json`, `registry.json`,
//! `nag.json` and the log `control.jsonl`. A repair moves an unreadable
//! value into the folder `quarantine` beside it (never deletes it), with
//! a compare-and-swap at the version read, so a value rewritten since the
//! check is left alone.

use chipset_backend::{Backend, Dir, Key, LogPos};
use chipset_store::{Action, CorruptReason, DoctorMode, Report};

use super::seam::{key_path, seam_error};
use super::*;
use crate::config::Retention;
use crate::format::parse_event;
use crate::maintain::{Fault, Pruned, finding};

impl Bus {
    /// Returns the server the bus runs on, `None` on a directory.
    pub(crate) fn server(&self) -> Option<&dyn Backend> {
        self.seam.as_deref()
    }

    /// [`Bus::agents`] on a server: the agents with a row below `bus/`.
    pub(crate) fn seam_agents(&self, seam: &dyn Backend) -> Result<Vec<AgentId>> {
        Ok(seam
            .list_dirs(&bus_dir())
            .map_err(seam_error)?
            .into_iter()
            .filter_map(|n| AgentId::new(n).ok())
            .collect())
    }

    /// [`Bus::prune`] on a server: the same limits, each removal a
    /// compare-and-swap at the version read (a value changed since is
    /// left for the next prune).
    pub(crate) fn seam_prune(
        &self,
        seam: &dyn Backend,
        agent: &AgentId,
        retention: &Retention,
    ) -> Result<Pruned> {
        let now = self.seam_now(seam)?;
        let dir = self.seam_dir(agent, Some(PROCESSED));
        let mut entries = Vec::new();
        // Read one at a time: the processed area may hold many events.
        for entry in self.seam_entries(seam, agent, PROCESSED)? {
            let key = dir.key(entry.name()).map_err(seam_error)?;
            let v = match seam.read(&key) {
                Ok(Some(v)) => v,
                // Gone meanwhile, or unreadable: the doctor's, never pruned by age.
                Ok(None) | Err(chipset_backend::Error::Corrupt { .. }) => continue,
                Err(e) => return Err(seam_error(e)),
            };
            let created = match retention.max_age {
                Some(_) => match parse_event(&key_path(&key), &v.value) {
                    ReadOutcome::Value(e) => Some(e.created_at),
                    _ => None,
                },
                None => None,
            };
            entries.push((key, v.value.len() as u64, v.version, created));
        }
        // Newest first (names start with the priority, so sort by the id).
        entries.sort_by(|a, b| {
            let id = |k: &Key| QueueEntry::parse(k.name()).map(|e| e.id().clone());
            id(&b.0).cmp(&id(&a.0))
        });
        let mut pruned = Pruned::default();
        let mut kept_bytes = 0u64;
        for (i, (key, len, version, created)) in entries.iter().enumerate() {
            if retention.drops(i, kept_bytes, *len, *created, now) {
                match seam.remove(key, *version) {
                    Ok(()) => {
                        pruned.events += 1;
                        pruned.bytes += len;
                    }
                    Err(chipset_backend::Error::Conflict { .. }) => {}
                    Err(e) => return Err(seam_error(e)),
                }
            } else {
                kept_bytes += len;
            }
        }
        if let Some(age) = retention.dedup_max_age {
            let dir = self.seam_dir(agent, Some(DEDUP));
            for name in seam.list(&dir).map_err(seam_error)? {
                let key = dir.key(&name).map_err(seam_error)?;
                // Under the key's lock, so a publish judging this key is not undone.
                let _guard = seam.lock(&key).map_err(seam_error)?;
                let (read, version) = self.seam_read::<DedupRecord>(seam, &key)?;
                let old = matches!(&read, ReadOutcome::Value(r) if now.since(r.accepted_at) > age);
                if let (true, Some(version)) = (old, version) {
                    match seam.remove(&key, version) {
                        Ok(()) => pruned.dedup_records += 1,
                        Err(chipset_backend::Error::Conflict { .. }) => {}
                        Err(e) => return Err(seam_error(e)),
                    }
                }
            }
        }
        Ok(pruned)
    }

    /// [`Bus::doctor`] on a server: the directory's checks on the rows. A
    /// server has no temp files and no torn lines (the seam appends whole
    /// records), and it cannot cut or rewrite a log: a control-log record
    /// that is not a command is reported and left (the registry skips it).
    pub(crate) fn seam_doctor(&self, seam: &dyn Backend, mode: DoctorMode) -> Result<Report> {
        let mut report = Report::new(mode);
        let root = bus_dir();
        for name in seam.list(&root).map_err(seam_error)? {
            let key = root.key(&name).map_err(seam_error)?;
            report
                .findings
                .push(finding(&key_path(&key), Problem::ForeignName));
        }
        for name in seam.list_dirs(&root).map_err(seam_error)? {
            if AgentId::new(name.as_str()).is_err() {
                let at = std::path::PathBuf::from(format!("{root}/{name}"));
                report.findings.push(finding(&at, Problem::ForeignName));
            }
        }
        for agent in self.seam_agents(seam)? {
            self.seam_doctor_agent(seam, &agent, &mut report)?;
        }
        report.sort_by_path();
        Ok(report)
    }

    fn seam_doctor_agent(
        &self,
        seam: &dyn Backend,
        agent: &AgentId,
        report: &mut Report,
    ) -> Result<()> {
        let fix = report.mode == DoctorMode::Fix;
        let processed = self.seam_dir(agent, Some(PROCESSED));
        for folder in [QUEUE, PROCESSED] {
            let dir = self.seam_dir(agent, Some(folder));
            // One value at a time: memory does not grow with the queue.
            for name in seam.list(&dir).map_err(seam_error)? {
                report.scanned += 1;
                let key = dir.key(&name).map_err(seam_error)?;
                match self.seam_read_event(seam, &key)? {
                    EventRead::Gone => {}
                    EventRead::Bad(problem) => {
                        let unsupported = matches!(problem, Problem::Unsupported(_));
                        let mut f = finding(&key_path(&key), problem);
                        if !unsupported {
                            f = f.fixable(true);
                            if fix {
                                f = f.with(self.seam_move_aside(seam, &key, |bus| {
                                    matches!(bus.seam_read_event(seam, &key), Ok(EventRead::Bad(p))
                                        if !matches!(p, Problem::Unsupported(_)))
                                })?);
                            }
                        }
                        report.findings.push(f);
                    }
                    EventRead::Event(_) if folder == QUEUE => {
                        let done = processed.key(&name).map_err(seam_error)?;
                        if seam.read(&done).map_err(seam_error)?.is_none() {
                            continue;
                        }
                        let mut f = finding(&key_path(&key), Fault::AckedCopyInQueue);
                        if fix && self.seam_remove_acked_copy(seam, &key, &done)? {
                            f = f.with(Action::Removed("removed".to_owned()));
                        }
                        report.findings.push(f);
                    }
                    EventRead::Event(_) => {}
                }
            }
        }
        let dedup = self.seam_dir(agent, Some(DEDUP));
        for name in seam.list(&dedup).map_err(seam_error)? {
            let key = dedup.key(&name).map_err(seam_error)?;
            self.seam_state_finding::<DedupRecord>(seam, &key, report)?;
        }
        let presence = self.seam_key(agent, None, PRESENCE)?;
        self.seam_state_finding::<Presence>(seam, &presence, report)?;
        let registry = self.seam_key(agent, None, REGISTRY)?;
        self.seam_state_finding::<Registry>(seam, &registry, report)?;
        let nag = self.seam_key(agent, None, NAG)?;
        self.seam_state_finding::<NagState>(seam, &nag, report)?;
        let control = self.seam_key(agent, None, CONTROL)?;
        let read = seam.read_log(&control, LogPos::START).map_err(seam_error)?;
        for (at, record) in read.records.iter().enumerate() {
            if let Err(e) = serde_json::from_slice::<ControlLine>(record) {
                let problem = Fault::BadLogLine {
                    offset: at as u64,
                    reason: CorruptReason::WrongShape(e.to_string()),
                };
                // A server's log is never rewritten: the registry skips it.
                report
                    .findings
                    .push(finding(&key_path(&control), problem).fixable(false));
            }
        }
        Ok(())
    }

    /// Reports a value written with a compare-and-swap (presence, registry,
    /// nag state, a de-duplication record) that does not parse as a `T`
    /// (with Fix, moved aside if it still does not) or is newer (left).
    fn seam_state_finding<T: serde::de::DeserializeOwned>(
        &self,
        seam: &dyn Backend,
        key: &Key,
        report: &mut Report,
    ) -> Result<()> {
        match self.seam_read::<T>(seam, key)?.0 {
            ReadOutcome::Missing | ReadOutcome::Value(_) => {}
            ReadOutcome::Corrupt(c) => {
                let mut f = finding(&c.path, Problem::Corrupt(c.reason));
                if report.mode == DoctorMode::Fix {
                    f = f.with(self.seam_move_aside(seam, key, |bus| {
                        bus.seam_read::<T>(seam, key)
                            .is_ok_and(|(r, _)| r.is_corrupt())
                    })?);
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

    /// Moves the value at `key` aside when `still_bad` says it still is,
    /// and returns what was done.
    fn seam_move_aside(
        &self,
        seam: &dyn Backend,
        key: &Key,
        still_bad: impl Fn(&Bus) -> bool,
    ) -> Result<Action> {
        if !still_bad(self) {
            return Ok(Action::LeftAlone("changed since the check".to_owned()));
        }
        let now = self.seam_now(seam)?;
        let Some(found) = seam.read(key).map_err(seam_error)? else {
            return Ok(Action::LeftAlone("gone since the check".to_owned()));
        };
        Ok(
            match seam
                .quarantine(key, found.version, now)
                .map_err(seam_error)?
            {
                Some(to) => Action::quarantined(key_path(&to)),
                None => Action::LeftAlone("changed since the check".to_owned()),
            },
        )
    }

    /// Removes the queued copy of an event already processed when it holds
    /// the processed copy's bytes; false when it does not (left alone).
    fn seam_remove_acked_copy(&self, seam: &dyn Backend, queued: &Key, done: &Key) -> Result<bool> {
        let (Some(q), Some(d)) = (
            seam.read(queued).map_err(seam_error)?,
            seam.read(done).map_err(seam_error)?,
        ) else {
            return Ok(false);
        };
        if q.value != d.value {
            tracing::warn!(key = %queued, "event in queue and processed with different contents; left for a person");
            return Ok(false);
        }
        match seam.remove(queued, q.version) {
            Ok(()) => Ok(true),
            Err(chipset_backend::Error::Conflict { .. }) => Ok(false),
            Err(e) => Err(seam_error(e)),
        }
    }
}

/// The bus's folder on the seam, `bus`.
fn bus_dir() -> Dir {
    Dir::new(Bus::CHANNEL.as_str()).expect("`bus` is a valid channel")
}
