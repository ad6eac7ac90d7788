//! The agent's side of the bus on the storage seam: presence, the control
//! log and registry, and reminder state, each a compare-and-swap on one
//! value, judged on the backend's clock (the server's on PostgreSQL, so
//! agents on several hosts agree whether a presence is live).

use chipset_backend::{Backend, Created, Key, LogPos};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::seam::{key_path, seam_error};
use super::*;

impl Bus {
    /// Runs `decide` on the value at `key` and writes its decision with a
    /// compare-and-swap at the version read (a create when nothing was
    /// there); when another writer came first, reads and decides again. An
    /// unreadable value is moved aside before `decide` sees it as corrupt,
    /// so the write is then a create.
    pub(crate) fn seam_swap<T, R>(
        &self,
        seam: &dyn Backend,
        key: &Key,
        mut decide: impl FnMut(ReadOutcome<T>) -> Result<Decision<T, R>>,
    ) -> Result<R>
    where
        T: Serialize + DeserializeOwned,
    {
        loop {
            let (read, mut version) = self.seam_read::<T>(seam, key)?;
            if read.is_corrupt() {
                if !self.seam_quarantine(seam, key)? {
                    continue;
                }
                version = None;
            }
            let (value, r) = match decide(read)? {
                Decision::Keep(r) => return Ok(r),
                Decision::Write(value, r) => (value, r),
            };
            let bytes = chipset_store::StateDir::to_canonical_json(&value).map_err(|source| {
                chipset_store::Error::Serialize {
                    path: key_path(key),
                    source,
                }
            })?;
            let written = match version {
                None => match seam.create(key, &bytes) {
                    Ok(Created::New(_)) => true,
                    Ok(Created::Existing(_)) => false,
                    Err(e) => return Err(seam_error(e)),
                },
                Some(v) => match seam.replace(key, v, &bytes) {
                    Ok(_) => true,
                    Err(
                        chipset_backend::Error::Conflict { .. }
                        | chipset_backend::Error::NotFound { .. },
                    ) => false,
                    Err(e) => return Err(seam_error(e)),
                },
            };
            if written {
                return Ok(r);
            }
            tracing::debug!(%key, "bus value changed under us; deciding again");
        }
    }

    /// [`Bus::start`] on the seam.
    pub(crate) fn seam_start(
        &self,
        seam: &dyn Backend,
        agent: &AgentId,
        pid: u32,
    ) -> Result<Startup> {
        self.seam_ensure_queue(seam, agent)?;
        let pending = self.seam_pending(seam, agent)?;
        let key = self.seam_key(agent, None, PRESENCE)?;
        let (presence, previous) =
            self.seam_swap(seam, &key, |previous: ReadOutcome<Presence>| {
                let now = self.seam_now(seam)?;
                let presence = Presence {
                    pid,
                    started_at: now,
                    last_seen: now,
                    extra: serde_json::Map::new(),
                };
                Ok(Decision::Write(presence.clone(), (presence, previous)))
            })?;
        Ok(Startup {
            pending,
            presence,
            previous,
        })
    }

    /// [`Bus::heartbeat`] on the seam.
    pub(crate) fn seam_heartbeat(&self, seam: &dyn Backend, agent: &AgentId) -> Result<Presence> {
        let key = self.seam_key(agent, None, PRESENCE)?;
        let pid = std::process::id();
        self.seam_swap(seam, &key, |cur: ReadOutcome<Presence>| {
            let now = self.seam_now(seam)?;
            let presence = match cur {
                ReadOutcome::Value(p) if p.pid == pid => Presence {
                    last_seen: now,
                    ..p
                },
                ReadOutcome::Unsupported(u) => return Err(chipset_store::Error::from(u).into()),
                _ => Presence {
                    pid,
                    started_at: now,
                    last_seen: now,
                    extra: serde_json::Map::new(),
                },
            };
            Ok(Decision::Write(presence.clone(), presence))
        })
    }

    /// [`Bus::control`] on the seam: one append to the log.
    pub(crate) fn seam_control(
        &self,
        seam: &dyn Backend,
        agent: &AgentId,
        op: ControlOp,
        resource: &Resource,
    ) -> Result<()> {
        let key = self.seam_key(agent, None, CONTROL)?;
        let line = ControlLine {
            at: self.seam_now(seam)?,
            command: ControlCommand {
                op,
                resource: resource.clone(),
            },
        };
        let bytes =
            serde_json::to_vec(&line).map_err(|source| chipset_store::Error::Serialize {
                path: key_path(&key),
                source,
            })?;
        seam.append(&key, &[&bytes]).map_err(seam_error)
    }

    /// [`Bus::apply_control`] on the seam. A server's log positions are
    /// record counts, so the registry's `applied_offset` counts the records
    /// applied (on a directory it is a byte offset).
    pub(crate) fn seam_apply_control(
        &self,
        seam: &dyn Backend,
        agent: &AgentId,
    ) -> Result<Registry> {
        let log = self.seam_key(agent, None, CONTROL)?;
        let key = self.seam_key(agent, None, REGISTRY)?;
        self.seam_swap(seam, &key, |cur: ReadOutcome<Registry>| {
            let registry = match cur {
                ReadOutcome::Value(r) => r,
                ReadOutcome::Missing => Registry::default(),
                ReadOutcome::Corrupt(bad) => {
                    tracing::warn!(path = %bad.path.display(), reason = %bad.reason, "rebuilding corrupt registry");
                    Registry::default()
                }
                ReadOutcome::Unsupported(u) => return Err(chipset_store::Error::from(u).into()),
            };
            let read = seam.read_log(&log, LogPos::START).map_err(seam_error)?;
            let end = read.records.len() as u64;
            let mut lines = Vec::new();
            for (at, record) in read.records.iter().enumerate() {
                let at = at as u64;
                match serde_json::from_slice::<ControlLine>(record) {
                    Ok(line) if at >= registry.applied_offset => lines.push(line),
                    // Lines before the offset were applied (or warned of) before.
                    Ok(_) => {}
                    Err(_) if at < registry.applied_offset => {}
                    Err(e) => super::agent::skipped(
                        &key_path(&log),
                        at,
                        &CorruptReason::WrongShape(e.to_string()),
                    ),
                }
            }
            if end <= registry.applied_offset {
                return Ok(Decision::Keep(registry));
            }
            let next = control::apply(registry, &lines, end);
            Ok(Decision::Write(next.clone(), next))
        })
    }

    /// [`Bus::due_reminders`] on the seam.
    pub(crate) fn seam_due_reminders(
        &self,
        seam: &dyn Backend,
        agent: &AgentId,
        occasion: Occasion,
    ) -> Result<Vec<Event>> {
        let events = self.seam_pending(seam, agent)?.events;
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let key = self.seam_key(agent, None, NAG)?;
        let indices = self.seam_swap(seam, &key, |cur: ReadOutcome<NagState>| {
            let state = match cur {
                ReadOutcome::Value(s) => s,
                // Forgetting reminder times only makes reminders come early.
                ReadOutcome::Missing | ReadOutcome::Corrupt(_) => NagState::default(),
                ReadOutcome::Unsupported(u) => return Err(chipset_store::Error::from(u).into()),
            };
            let now = self.seam_now(seam)?;
            let (due, next) = nag::due(&events, &state, &NagPolicy::default(), occasion, now);
            if next == state {
                Ok(Decision::Keep(due))
            } else {
                Ok(Decision::Write(next, due))
            }
        })?;
        Ok(indices.into_iter().map(|i| events[i].clone()).collect())
    }
}
