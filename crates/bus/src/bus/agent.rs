//! The agent's side of the bus: startup, heartbeat and presence, control
//! commands, the registry and due reminders.

use super::*;

impl Bus {
    /// Starts a session for `agent`, run by the process `pid`, as the
    /// seed's restart steps say: makes sure the queue exists, reads every
    /// pending event in order, then registers presence (`pid`, now).
    ///
    /// An agent starting itself passes `std::process::id()`; a short-lived
    /// command that starts the session of a longer-lived agent passes the
    /// agent's pid (the `chipset bus start` command line records its
    /// caller's). The agent's own [`Bus::heartbeat`] then keeps this
    /// presence.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the queue or presence cannot be read or written.
    pub fn start(&self, agent: &AgentId, pid: u32) -> Result<Startup> {
        if let Some(seam) = &self.seam {
            return self.seam_start(seam.as_ref(), agent, pid);
        }
        self.ensure_queue(agent)?;
        let pending = self.pending(agent)?;
        let path = self.agent_dir(agent).join_static(PRESENCE);
        let (presence, previous) = self.state.update(&path, |cur: ReadOutcome<Presence>| {
            let now = self.state.now();
            let previous = cur;
            if previous.is_corrupt() {
                self.state.quarantine(&path)?;
            }
            let presence = Presence {
                pid,
                started_at: now,
                last_seen: now,
                extra: serde_json::Map::new(),
            };
            Ok::<_, Error>(Decision::Write(presence.clone(), (presence, previous)))
        })?;
        Ok(Startup {
            pending,
            presence,
            previous,
        })
    }

    /// Records that `agent` (this process) is alive now. A process that never
    /// called [`Bus::start`], or whose presence another pid took over,
    /// registers afresh.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when presence cannot be written.
    pub fn heartbeat(&self, agent: &AgentId) -> Result<Presence> {
        if let Some(seam) = &self.seam {
            return self.seam_heartbeat(seam.as_ref(), agent);
        }
        let path = self.agent_dir(agent).join_static(PRESENCE);
        let pid = std::process::id();
        self.state.update(&path, |cur: ReadOutcome<Presence>| {
            let now = self.state.now();
            let presence = match cur {
                ReadOutcome::Value(p) if p.pid == pid => Presence {
                    last_seen: now,
                    ..p
                },
                ReadOutcome::Unsupported(u) => return Err(chipset_store::Error::from(u).into()),
                ReadOutcome::Corrupt(_) => {
                    self.state.quarantine(&path)?;
                    Presence {
                        pid,
                        started_at: now,
                        last_seen: now,
                        extra: serde_json::Map::new(),
                    }
                }
                _ => Presence {
                    pid,
                    started_at: now,
                    last_seen: now,
                    extra: serde_json::Map::new(),
                },
            };
            Ok::<_, Error>(Decision::Write(presence.clone(), presence))
        })
    }

    /// Reads `agent`'s presence file: missing (the agent never registered;
    /// its queue may still exist), corrupt, unsupported, or a presence
    /// that [`Bus::is_live`] judges.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when it cannot be read.
    pub fn presence(&self, agent: &AgentId) -> Result<ReadOutcome<Presence>> {
        if let Some(seam) = &self.seam {
            let key = self.seam_key(agent, None, PRESENCE)?;
            return Ok(self.seam_read::<Presence>(seam.as_ref(), &key)?.0);
        }
        let path = self.agent_dir(agent).join_static(PRESENCE);
        Ok(self.state.read_json::<Presence>(&path)?)
    }

    /// Returns true when `presence` was seen within
    /// [`BusConfig::presence_stale_after`] of now. A stale agent may be
    /// busy, crashed or gone; presence never deletes or blocks its queue.
    ///
    /// Now is the backend's clock: on a server ([`Bus::with_backend`]) the
    /// server's, so hosts whose clocks differ agree. A server that cannot
    /// say the time makes every presence stale (a warning is logged):
    /// staleness only ever prompts a look, never a deletion.
    pub fn is_live(&self, presence: &Presence) -> bool {
        let now = match self.now() {
            Ok(now) => now,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the backend's clock; judging presence stale");
                return false;
            }
        };
        now.since(presence.last_seen) <= self.config.presence_stale_after
    }

    /// Returns the time every judgement of this bus uses: the state's
    /// clock on a directory, the server's clock on a server.
    ///
    /// # Errors
    ///
    /// [`Error::Backend`] when the server cannot be asked.
    pub fn now(&self) -> Result<Timestamp> {
        match &self.seam {
            Some(seam) => self.seam_now(seam.as_ref()),
            None => Ok(self.state.now()),
        }
    }

    /// Appends the command `op` on `resource` to `agent`'s control log
    /// (`bus/{agent}/control.jsonl`), durably. The log is never truncated;
    /// [`Bus::apply_control`] applies it to the registry.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidField`] for a bad resource; [`Error::Store`] when the append fails.
    pub fn control(&self, agent: &AgentId, op: ControlOp, resource: &Resource) -> Result<()> {
        resource.check()?;
        if let Some(seam) = &self.seam {
            return self.seam_control(seam.as_ref(), agent, op, resource);
        }
        let log = self
            .state
            .log(&self.agent_dir(agent).join_static(CONTROL))?;
        log.append(&ControlLine {
            at: self.state.now(),
            command: ControlCommand {
                op,
                resource: resource.clone(),
            },
        })?;
        Ok(())
    }

    /// Applies the control commands appended since the registry's offset to
    /// `agent`'s registry, and stores the registry and the new offset in one
    /// atomic replace. Concurrent callers are serialized; a crash leaves the
    /// old registry and offset, and applying again gives the same result.
    ///
    /// A corrupt registry is quarantined and rebuilt from the whole log.
    /// A line that is not a command is skipped (never applied, still in the
    /// log, logged as a warning); [`Bus::doctor`] reports and repairs it.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the log or registry cannot be read or written.
    pub fn apply_control(&self, agent: &AgentId) -> Result<Registry> {
        if let Some(seam) = &self.seam {
            return self.seam_apply_control(seam.as_ref(), agent);
        }
        let dir = self.agent_dir(agent);
        let log = self.state.log(&dir.join_static(CONTROL))?;
        let registry = dir.join_static(REGISTRY);
        self.state
            .update(&registry, |cur: ReadOutcome<Registry>| {
                let registry = match cur {
                    ReadOutcome::Value(r) => r,
                    ReadOutcome::Missing => Registry::default(),
                    ReadOutcome::Corrupt(bad) => {
                        tracing::warn!(path = %bad.path.display(), reason = %bad.reason, "rebuilding corrupt registry");
                        self.state.quarantine(&registry)?;
                        Registry::default()
                    }
                    ReadOutcome::Unsupported(u) => return Err(chipset_store::Error::from(u).into()),
                };
                let read: LogContents<ControlLine> = log.read_from(registry.applied_offset)?;
                for b in &read.bad_lines {
                    skipped(log.path(), b.offset, &b.reason);
                }
                if read.end_offset == registry.applied_offset {
                    return Ok::<_, Error>(Decision::Keep(registry));
                }
                let next = control::apply(registry, &read.records, read.end_offset);
                Ok(Decision::Write(next.clone(), next))
            })
    }

    /// Returns `agent`'s unacknowledged events that are due for a reminder
    /// now, in processing order, and records the reminder time of the timed
    /// ones (`bus/{agent}/nag.json`), so a restart does not repeat them early.
    ///
    /// The cadence is the seed's: critical every 30 s and high every 2 min
    /// (from publishing, then from each reminder), whatever the occasion;
    /// normal at every [`Occasion::Poll`]; low at a poll when nothing of
    /// another priority is pending.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the queue or the reminder state cannot be read or written.
    pub fn due_reminders(&self, agent: &AgentId, occasion: Occasion) -> Result<Vec<Event>> {
        if let Some(seam) = &self.seam {
            return self.seam_due_reminders(seam.as_ref(), agent, occasion);
        }
        let events = self.pending(agent)?.events;
        // Nothing pending, nothing due: and no lock or state file made in
        // the queue of an agent that may not exist (a mistyped name).
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let path = self.agent_dir(agent).join_static(NAG);
        let indices = self.state.update(&path, |cur: ReadOutcome<NagState>| {
            let state = match cur {
                ReadOutcome::Value(s) => s,
                ReadOutcome::Missing => NagState::default(),
                ReadOutcome::Corrupt(_) => {
                    // Forgetting reminder times only makes reminders come early.
                    self.state.quarantine(&path)?;
                    NagState::default()
                }
                ReadOutcome::Unsupported(u) => return Err(chipset_store::Error::from(u).into()),
            };
            let (due, next) = nag::due(
                &events,
                &state,
                &NagPolicy::default(),
                occasion,
                self.state.now(),
            );
            if next == state {
                Ok::<_, Error>(Decision::Keep(due))
            } else {
                Ok(Decision::Write(next, due))
            }
        })?;
        Ok(indices.into_iter().map(|i| events[i].clone()).collect())
    }
}

/// Warns of a control-log line that is not a command, skipped by an apply.
pub(crate) fn skipped(log: &std::path::Path, offset: u64, reason: &CorruptReason) {
    tracing::warn!(path = %log.display(), offset, %reason, "skipping a control line that is not a command; `doctor` repairs it");
}
