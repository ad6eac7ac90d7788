//! Publishing on the storage seam: one create per event, and for a keyed
//! publish the check, the create and the key's record under the key's
//! lock, which on PostgreSQL is a session advisory lock on the server, so
//! of many clients on many hosts publishing one key exactly one delivers.

use chipset_backend::{Backend, Created};

use super::seam::{key_path, seam_error};
use super::*;

impl Bus {
    /// [`Bus::publish`] of a built event to one recipient, on the seam.
    /// The event's `created_at` and the de-duplication judgement are the
    /// backend's clock (the server's); the id stays the caller's sortable id.
    pub(crate) fn seam_publish_built(
        &self,
        seam: &dyn Backend,
        agent: &AgentId,
        event: &NewEvent,
        mut built: Event,
    ) -> Result<Published> {
        let chosen = event.chosen_id().is_some();
        let Some(key) = event.key() else {
            if chosen && let Some(first) = self.seam_find_published(seam, agent, &built)? {
                return Ok(Published::Delivered(first));
            }
            built.created_at = self.seam_now(seam)?;
            return self
                .seam_create_event(seam, agent, built)
                .map(Published::Delivered);
        };
        let window = event.window().unwrap_or(self.config.dedup_window);
        let window_ms = u64::try_from(window.as_millis()).unwrap_or(u64::MAX);
        let record_key = self.seam_key(agent, Some(DEDUP), &name::dedup_file_name(key))?;
        // The key's lock: on a directory `.{name}.lock`, the lock the file
        // path's `StateDir::update` takes; on a server an advisory lock,
        // released by the server if this client dies holding it.
        let _guard = seam.lock(&record_key).map_err(seam_error)?;
        let (last, version) = loop {
            match self.seam_read::<DedupRecord>(seam, &record_key)? {
                (ReadOutcome::Corrupt(bad), _) => {
                    // Delivering a possible duplicate beats dropping an event.
                    tracing::warn!(path = %bad.path.display(), reason = %bad.reason, "corrupt de-duplication record");
                    self.seam_quarantine(seam, &record_key)?;
                }
                // A record this version cannot judge is neither overwritten nor guessed at.
                (ReadOutcome::Unsupported(u), _) => {
                    return Err(chipset_store::Error::from(u).into());
                }
                (ReadOutcome::Value(r), v) => break (Some(r), v),
                (ReadOutcome::Missing, _) => break (None, None),
            }
        };
        let write_record = |record: &DedupRecord| -> Result<()> {
            let bytes = chipset_store::StateDir::to_canonical_json(record).map_err(|source| {
                chipset_store::Error::Serialize {
                    path: key_path(&record_key),
                    source,
                }
            })?;
            // Under the key's lock nobody else writes the record: a swap
            // at the version read, or a create when there was none.
            match version {
                Some(v) => seam.replace(&record_key, v, &bytes).map(|_| ()),
                None => seam.create(&record_key, &bytes).map(|_| ()),
            }
            .map_err(seam_error)
        };
        // A retry of a publish that applied: return the first delivery,
        // and finish its follow-up (the key's record) if it is missing.
        if chosen && let Some(first) = self.seam_find_published(seam, agent, &built)? {
            if !matches!(&last, Some(r) if r.key == key) {
                write_record(&DedupRecord {
                    key: key.to_owned(),
                    accepted_at: first.created_at,
                    event_id: first.id.clone(),
                    window_ms,
                })?;
            }
            return Ok(Published::Delivered(first));
        }
        // Time is read under the lock, so racing publishers are judged in lock order.
        let now = self.seam_now(seam)?;
        match dedup::judge(last.as_ref(), key, now, window) {
            Verdict::Duplicate {
                original,
                accepted_at,
            } => Ok(Published::Duplicate {
                key: key.to_owned(),
                original,
                accepted_at,
            }),
            Verdict::Accept => {
                // Publish first, record second: a crash between the two
                // can let one duplicate through, never lose the event.
                built.created_at = now;
                let id = built.id.clone();
                let built = self.seam_create_event(seam, agent, built)?;
                let record = DedupRecord {
                    key: key.to_owned(),
                    accepted_at: now,
                    event_id: built.id.clone(),
                    window_ms,
                };
                write_record(&record).map_err(|e| {
                    // Published (its commit point passed), but the record
                    // was not written: say so with the id, whose retry
                    // returns the event and writes the record.
                    tracing::warn!(key = %record_key, id = %id, "published, but the de-duplication record was not written");
                    Error::OutcomeUnknown {
                        id,
                        source: Box::new(e),
                    }
                })?;
                Ok(Published::Delivered(built))
            }
        }
    }

    /// Publishes `built` into `agent`'s queue on the seam: one create, the
    /// commit point. A retry of the same id and content returns the first.
    fn seam_create_event(
        &self,
        seam: &dyn Backend,
        agent: &AgentId,
        built: Event,
    ) -> Result<Event> {
        let key = self.seam_key(agent, Some(QUEUE), &built.file_name())?;
        let bytes = chipset_store::StateDir::to_canonical_json(&built).map_err(|source| {
            chipset_store::Error::Serialize {
                path: key_path(&key),
                source,
            }
        })?;
        match seam.create(&key, &bytes) {
            Ok(Created::New(_)) => Ok(built),
            // Only a caller-chosen id can collide (generated ids are unique).
            Ok(Created::Existing(_)) => match self.seam_find_published(seam, agent, &built)? {
                Some(first) => Ok(first),
                None => Err(Error::IdConflict {
                    agent: agent.clone(),
                    id: built.id.clone(),
                    path: key_path(&key),
                }),
            },
            Err(e) if e.is_outcome_unknown() => Err(Error::OutcomeUnknown {
                id: built.id.clone(),
                source: Box::new(e),
            }),
            Err(e) => Err(seam_error(e)),
        }
    }
}
