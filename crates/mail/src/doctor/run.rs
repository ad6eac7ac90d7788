//! The doctor's run: the two sorted passes and the repairs they decide, within a memory budget.

use super::*;

impl Mail {
    /// Scans all of `mail/` and reports (with [`DoctorMode::Fix`], repairs)
    /// what is wrong: see [`Finding`] for each kind and its fix.
    ///
    /// An *orphan* is an inbox message whose task has been swept (it arrived
    /// after the commit), whose recipient is not in the recipient registry
    /// (when one is configured), or that is older than
    /// [`MailConfig::orphan_after`](crate::MailConfig::orphan_after) (when
    /// set). Messages younger than
    /// [`MailConfig::in_flight_grace`](crate::MailConfig::in_flight_grace) are not reported
    /// as missing a `sent` event (their sender may be about to append it) but
    /// as [`Finding::InFlight`], which no mode repairs and which keeps the
    /// report from being clean: right after a crash the doctor says "check
    /// again after T", never "clean" while a message still lacks its event.
    ///
    /// The same holds for a message in `archive/` without its `archived`
    /// event, which the doctor judges by the message's `created_at` too: the
    /// time of the move into `archive/` is not known to it (the store offers
    /// no file times, and the doctor does not stat files itself; a file's
    /// ctime would also not follow the state's clock). So a message archived
    /// within the grace of its sending is in flight, and one archived later
    /// is reported (and, with Fix, given a reconciled event) at once. The
    /// price: a doctor run with Fix in the instant between a live archive's
    /// move and its own append (microseconds, one write) can add a
    /// reconciled `archived` event beside the archiver's, a duplicate audit
    /// line that says `reconciled: true`; nothing is lost or moved by it.
    ///
    /// Nothing is deleted: bad files are quarantined, messages are moved.
    /// Safe to run while agents work; stale temp files are the store's
    /// business ([`StateDir::sweep_temps`](chipset_store::StateDir::sweep_temps)).
    ///
    /// Memory does not grow with the number of messages: the scan sorts
    /// what it needs by message id, spilling sorted runs to a nameless
    /// scratch file in `mail/` beyond a fixed budget, and then looks at one
    /// id at a time (see the crate docs, Repair and status). With Fix, the
    /// events it reconciles are spilled the same way, each message read
    /// again where the scan met it when its event is built, and appended
    /// [`REPAIR_CHUNK`] at a time: the chunks before the last without a
    /// data sync, the last one synced (so when the doctor returns every
    /// event is durable; a crash before may leave the first chunks, and the
    /// next run reconciles the rest).
    ///
    /// # Errors
    ///
    /// [`Error::Store`](crate::Error::Store) when a directory cannot
    /// be listed or a repair fails; findings already repaired stay repaired.
    ///
    /// Its findings are handed to `sink` one at a time, in the order
    /// [`Mail::doctor`] documents, once the scan (and with Fix, the
    /// repairs) are done; the returned report holds none of them. The
    /// findings about manifest events, one per message when the manifest
    /// was lost, are read back from the scan's scratch data, so they are
    /// never all in memory at once.
    pub(crate) fn scan_doctor(
        &self,
        mode: DoctorMode,
        sink: &mut dyn FnMut(Finding),
    ) -> Result<DoctorReport> {
        self.doctor_streaming(mode, spill::BUDGET, sink)
    }

    /// [`Mail::scan_doctor`] with the findings kept in the report, its
    /// sorters spilling beyond `budget` bytes each.
    #[cfg(test)]
    pub(super) fn doctor_within(&self, mode: DoctorMode, budget: usize) -> Result<DoctorReport> {
        let mut findings = Vec::new();
        let mut report = self.doctor_streaming(mode, budget, &mut |f| findings.push(f))?;
        report.findings = findings;
        Ok(report)
    }

    /// [`Mail::scan_doctor`], its sorters spilling beyond `budget` bytes each.
    pub(super) fn doctor_streaming(
        &self,
        mode: DoctorMode,
        budget: usize,
        sink: &mut dyn FnMut(Finding),
    ) -> Result<DoctorReport> {
        let mut scan = Scan::new(self, mode, budget);
        self.scan_all(&mut scan)?;
        let manifest = self.manifest_status(&mut scan.by_id)?;
        let now = self.state.now();
        let by_id = self.by_id_pass(&mut scan, now)?;
        let by_parent = self.by_parent_pass(&mut scan)?;

        let mut findings: Vec<Finding> = scan
            .corrupt
            .iter()
            .map(|(bad, reason)| Finding::Corrupt {
                path: bad.shown().to_owned(),
                reason: reason.clone(),
            })
            .collect();
        findings.extend(scan.left.iter().cloned());
        findings.extend(scan.unsupported.iter().map(|u| Finding::Unsupported {
            path: u.path.clone(),
            what: u.what.clone(),
        }));
        // In the order the scan met the extra copies.
        let mut duplicates = by_id.duplicates;
        duplicates.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        findings.extend(duplicates.into_iter().map(|(_, _, f)| f));
        // The reply checks, in the replies' id order.
        let mut replies = by_parent.replies;
        replies.sort_by(|a, b| a.0.cmp(&b.0));
        findings.extend(replies.into_iter().map(|(_, f)| f));
        let mut unlinked = by_parent.unlinked;
        unlinked.sort();
        // Orphans and answered requests, in id order.
        let mut inbox = by_id.inbox;
        inbox.sort_by(|a, b| a.0.cmp(&b.0));
        findings.extend(inbox.into_iter().map(|(_, f)| f));
        let orphans = by_id.orphans;
        let answered_requests = by_parent.answered_requests;

        if let Some(c) = &manifest.not_a_file {
            // A directory, FIFO or device where the manifest belongs: reported,
            // and with Fix moved aside; a new manifest is then reconciled.
            findings.push(Finding::Corrupt {
                path: c.path.clone(),
                reason: c.reason.clone(),
            });
        }
        if let Some((offset, len)) = manifest.torn {
            findings.push(Finding::TornManifestTail { offset, len });
        }
        for bad in &manifest.bad {
            findings.push(Finding::BadManifestLine {
                offset: bad.offset,
                reason: bad.reason.clone(),
            });
        }
        // Then the findings about manifest events (in id order), then the
        // by-task folders': the events' are held on disk, not here.
        let event_findings = std::mem::replace(
            &mut scan.events,
            Sorter::new(&self.state, self.layout.mail(), 0),
        );
        // With Fix, the events to reconcile: also on disk beyond the budget.
        let repairs = std::mem::replace(
            &mut scan.repairs,
            Sorter::new(&self.state, self.layout.mail(), 0),
        );
        let mut tail: Vec<Finding> = Vec::new();
        let messages = by_id.messages;

        // A by-task folder without a `task-swept` event: judged by its
        // newest message, like the per-message events (a sweep running now
        // appends its event right after its moves).
        let mut by_task: Vec<(TaskId, (usize, MessageId, Seen))> = by_id
            .by_task
            .into_iter()
            .map(|(t, v)| (scan.tasks.get(t).clone(), v))
            .collect();
        by_task.sort_by(|a, b| a.0.cmp(&b.0));
        let mut unswept: Vec<(TaskId, usize)> = Vec::new();
        for (task, (total, newest_id, newest)) in by_task {
            if manifest.swept.contains(task.as_str()) {
                continue;
            }
            let age = now.since(newest.created_at);
            if age >= self.config.in_flight_grace {
                tail.push(Finding::MissingSweptEvent {
                    task: task.clone(),
                    total,
                });
                unswept.push((task, total));
            } else {
                tail.push(Finding::InFlight {
                    id: newest_id,
                    location: scan.location(newest.loc),
                    check_after: self.config.in_flight_grace - age,
                    swept: true,
                });
            }
        }

        // Hands every finding over, in order, and returns the report.
        let event_findings = event_findings.finish()?;
        let mut report = |findings: Vec<Finding>, tail: Vec<Finding>, mut events: spill::Sorted| {
            let held = findings.len() + tail.len();
            let mut count = 0;
            let mut emit = |f| {
                count += 1;
                sink(f);
            };
            findings.into_iter().for_each(&mut emit);
            while let Some(line) = events.next_line()? {
                let line = scratch_text(line)?;
                emit(EventFinding::decode(&scan, &line).ok_or_else(bad_scratch)?);
            }
            tail.into_iter().for_each(&mut emit);
            if mode == DoctorMode::Fix && count > 0 {
                tracing::info!(findings = count, "mail doctor repaired");
            }
            Ok(DoctorReport {
                mode,
                messages,
                findings: Vec::new(),
                held,
            })
        };
        if mode == DoctorMode::Check {
            return report(findings, tail, event_findings);
        }

        // Repairs, in an order where each one finds what the previous left.
        for (bad, _) in &scan.corrupt {
            if let BadEntry::At(path) = bad {
                self.quarantine(path)?;
            }
        }
        for f in &findings {
            if let Finding::Duplicate { id, extra, .. } = f {
                self.quarantine(&self.layout.file(extra, id))?;
            }
        }
        if manifest.not_a_file.is_some() {
            self.quarantine(&self.layout.manifest())?;
        }
        let log = self.manifest()?;
        if !manifest.bad.is_empty() {
            log.repair::<serde_json::Value>()?;
        } else if manifest.torn.is_some() {
            log.recover()?;
        }
        // The scan kept no whole messages: read again the ones a repair
        // needs, a chunk at a time.
        for chunk in unlinked.chunks(REPAIR_CHUNK) {
            let mut replies = Vec::with_capacity(chunk.len());
            for id in chunk {
                if let Some(found) = self.found(id)? {
                    replies.push(found.message);
                }
            }
            self.link_replies(&replies)?;
        }
        let mut moves = Vec::new();
        for (agent, id, task, reason) in orphans {
            let from = Location::Inbox(agent.clone());
            if let Moved::Done = self.move_message(&id, &from, &Location::Orphan)? {
                moves.push(ManifestEvent::Orphaned {
                    id,
                    agent,
                    task,
                    reason,
                    at: now,
                });
            }
        }
        for (agent, id, task) in answered_requests {
            let from = Location::Inbox(agent.clone());
            if let Moved::Done = self.move_message(&id, &from, &Location::Archive)? {
                moves.push(ManifestEvent::Archived {
                    id,
                    agent,
                    task,
                    reply: None,
                    at: now,
                    reconciled: false,
                });
            }
        }
        // Reconciled `sent` events go first in time order of the messages,
        // then the `archived` events of messages found in `archive/`
        // without one (after their `sent`, as they were written): read
        // back from the scan's scratch data, never all in memory.
        let mut out = Appender::new(&log);
        let mut repairs = repairs.finish()?;
        while let Some(line) = repairs.next_line()? {
            let line = scratch_text(line)?;
            let event = match Reconcile::decode(&line).ok_or_else(bad_scratch)? {
                Reconcile::Sent { id, loc } => match self.reread(&id, &scan.location(loc))? {
                    Some(m) => ManifestEvent::sent(&m, true),
                    None => continue,
                },
                Reconcile::Archived { id, to, task } => ManifestEvent::Archived {
                    id,
                    agent: scan.agents.get(to).clone(),
                    task: scan.tasks.get(task).clone(),
                    reply: None,
                    at: now,
                    reconciled: true,
                },
            };
            out.push(event)?;
        }
        drop(repairs);
        for (task, total) in unswept {
            out.push(ManifestEvent::TaskSwept {
                task,
                count: 0,
                total,
                at: now,
                reconciled: true,
            })?;
        }
        for event in moves {
            out.push(event)?;
        }
        out.finish()?;
        report(findings, tail, event_findings)
    }

    /// Reads the message `id` again where the scan met it, or, when a
    /// repair (or an agent) moved it since, wherever it is now; `None` when
    /// it is gone. One read where the scan saw it, not a search of every
    /// inbox per message.
    fn reread(&self, id: &MessageId, location: &Location) -> Result<Option<Message>> {
        let path = self.layout.file(location, id);
        match read_message(&self.state, &path)? {
            ReadOutcome::Value(m) => Ok(Some(check_id(&path, id, m)?)),
            ReadOutcome::Missing => Ok(self.found(id)?.map(|found| found.message)),
            ReadOutcome::Corrupt(c) => Err(c.into()),
            ReadOutcome::Unsupported(u) => Err(u.into()),
        }
    }

    fn quarantine(&self, path: &StatePath) -> Result<()> {
        // Message files are never rewritten (published no-clobber, moved
        // whole), so no writer's lock: the store moves it if it is still
        // what it read, and leaves it if it went away meanwhile.
        self.state.quarantine_checked(path, None, |_| true)?;
        Ok(())
    }
}

/// How many messages a repair reads again, or manifest events it appends,
/// at a time.
const REPAIR_CHUNK: usize = 512;

/// Appends the fix's manifest events a chunk at a time: every chunk but
/// the last without a data sync (the events are reconciled from the
/// message files, which a later doctor run reconciles again if a power
/// cut loses them), the last one synced, which makes the whole log
/// durable. The lines are the ones one batch of them all would write, in
/// the same order.
struct Appender<'a> {
    log: &'a chipset_store::JsonLog,
    chunk: Vec<ManifestEvent>,
}

impl<'a> Appender<'a> {
    fn new(log: &'a chipset_store::JsonLog) -> Self {
        Appender {
            log,
            chunk: Vec::new(),
        }
    }

    /// Adds one event, first appending the chunk when it is full (so that
    /// the last chunk is never empty when anything was appended).
    fn push(&mut self, event: ManifestEvent) -> Result<()> {
        if self.chunk.len() >= REPAIR_CHUNK {
            self.log.append_batch_unsynced(&self.chunk)?;
            self.chunk.clear();
        }
        self.chunk.push(event);
        Ok(())
    }

    /// Appends the last chunk, with a data sync that covers the chunks
    /// before it.
    fn finish(self) -> Result<()> {
        self.log.append_batch(&self.chunk)?;
        Ok(())
    }
}
