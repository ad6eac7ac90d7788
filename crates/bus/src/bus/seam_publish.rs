//! Publishing on the storage seam: one create per event, and for a keyed
//! publish the check under the key's lock (on PostgreSQL a session
//! advisory lock on the server), then the event and the key's record in
//! one transaction whose record step is a swap at the version judged: of
//! many clients on many hosts publishing one key exactly one delivers,
//! and a publish is never half done.

use chipset_backend::{Backend, Created, Step};
use chipset_store::Classify;

use super::publish::Batch;
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
        let record_bytes = |record: &DedupRecord| -> Result<Vec<u8>> {
            Ok(
                chipset_store::StateDir::to_canonical_json(record).map_err(|source| {
                    chipset_store::Error::Serialize {
                        path: key_path(&record_key),
                        source,
                    }
                })?,
            )
        };
        loop {
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
            // A retry of a publish that applied: return the first delivery,
            // and finish its record if it is missing (only an event
            // published before its key's record existed lacks one).
            if chosen && let Some(first) = self.seam_find_published(seam, agent, &built)? {
                if !matches!(&last, Some(r) if r.key == key) {
                    let bytes = record_bytes(&DedupRecord {
                        key: key.to_owned(),
                        accepted_at: first.created_at,
                        event_id: first.id.clone(),
                        window_ms,
                    })?;
                    match version {
                        Some(v) => seam.replace(&record_key, v, &bytes).map(|_| ()),
                        None => seam.create(&record_key, &bytes).map(|_| ()),
                    }
                    .map_err(seam_error)?;
                }
                return Ok(Published::Delivered(first));
            }
            // Time is read under the lock, so racing publishers are judged in lock order.
            let now = self.seam_now(seam)?;
            if let Verdict::Duplicate {
                original,
                accepted_at,
            } = dedup::judge(last.as_ref(), key, now, window)
            {
                return Ok(Published::Duplicate {
                    key: key.to_owned(),
                    original,
                    accepted_at,
                });
            }
            built.created_at = now;
            let record = record_bytes(&DedupRecord {
                key: key.to_owned(),
                accepted_at: now,
                event_id: built.id.clone(),
                window_ms,
            })?;
            let event_key = self.seam_key(agent, Some(QUEUE), &built.file_name())?;
            let event_bytes = self.event_bytes(&event_key, &built)?;
            let record_step = match version {
                Some(expected) => Step::Replace {
                    key: &record_key,
                    expected,
                    value: &record,
                },
                None => Step::Create {
                    key: &record_key,
                    value: &record,
                },
            };
            let steps = [
                Step::Create {
                    key: &event_key,
                    value: &event_bytes,
                },
                record_step,
            ];
            match seam.transact(&steps) {
                Ok(_) => return Ok(Published::Delivered(built)),
                // The event's id is taken: only a caller-chosen id can collide.
                Err(chipset_backend::Error::Exists { key: taken, .. })
                    if taken == event_key.to_string() =>
                {
                    return match self.seam_find_published(seam, agent, &built)? {
                        Some(first) => Ok(Published::Delivered(first)),
                        None => Err(Error::IdTaken {
                            agent: agent.clone(),
                            id: built.id.clone(),
                            path: key_path(&event_key),
                        }),
                    };
                }
                // The record changed since it was judged (a publish whose
                // commit landed after its client let the lock go): nothing
                // was applied; judge again.
                Err(
                    chipset_backend::Error::Conflict { .. }
                    | chipset_backend::Error::Exists { .. }
                    | chipset_backend::Error::NotFound { .. },
                ) => {
                    tracing::debug!(key = %record_key, "de-duplication record changed; judging again");
                }
                Err(e) if e.is_outcome_unknown() => {
                    return Err(Error::OutcomeUnknown {
                        id: built.id.clone(),
                        source: Box::new(e),
                    });
                }
                Err(e) => return Err(seam_error(e)),
            }
        }
    }

    /// [`Bus::publish_batch`] on the seam: the events without a key that
    /// are not already published are created in one transaction (one
    /// commit, all or none); the keyed ones follow, one by one, as
    /// [`Bus::publish`] judges them. Each outcome is put in `batch`.
    pub(crate) fn seam_publish_batch(
        &self,
        seam: &dyn Backend,
        agent: &AgentId,
        events: &[NewEvent],
        built: Vec<Event>,
        batch: &mut Batch,
    ) -> Result<()> {
        let now = self.seam_now(seam)?;
        let mut fresh: Vec<(usize, Event, chipset_backend::Key, Vec<u8>)> = Vec::new();
        for (i, (event, b)) in events.iter().zip(&built).enumerate() {
            if event.key().is_some() {
                continue;
            }
            if event.chosen_id().is_some()
                && let Some(first) = self.seam_find_published(seam, agent, b)?
            {
                batch.out[i] = Some(Published::Delivered(first));
                continue;
            }
            let mut b = b.clone();
            b.created_at = now;
            let key = self.seam_key(agent, Some(QUEUE), &b.file_name())?;
            let bytes = self.event_bytes(&key, &b)?;
            fresh.push((i, b, key, bytes));
        }
        if !fresh.is_empty() {
            let steps: Vec<Step<'_>> = fresh
                .iter()
                .map(|(_, _, key, value)| Step::Create { key, value })
                .collect();
            batch.trying = fresh.iter().map(|(i, ..)| *i).collect();
            match seam.transact(&steps) {
                Ok(_) => {
                    for (i, b, _, _) in &fresh {
                        batch.out[*i] = Some(Published::Delivered(b.clone()));
                    }
                }
                // A chosen id published meanwhile: nothing was applied;
                // each is published on its own, the taken one recognised.
                Err(chipset_backend::Error::Exists { .. }) => {
                    for (i, b, _, _) in &fresh {
                        batch.trying = vec![*i];
                        let first = self.seam_create_event(seam, agent, b.clone())?;
                        batch.out[*i] = Some(Published::Delivered(first));
                    }
                }
                Err(e) if e.is_outcome_unknown() => {
                    return Err(Error::OutcomeUnknown {
                        id: fresh[0].1.id.clone(),
                        source: Box::new(e),
                    });
                }
                Err(e) => return Err(seam_error(e)),
            }
            batch.trying.clear();
        }
        for (i, (event, b)) in events.iter().zip(built).enumerate() {
            if event.key().is_some() {
                batch.trying = vec![i];
                batch.out[i] = Some(self.seam_publish_built(seam, agent, event, b)?);
            }
        }
        Ok(())
    }

    /// The bytes of `built` as its file holds them.
    fn event_bytes(&self, key: &chipset_backend::Key, built: &Event) -> Result<Vec<u8>> {
        Ok(
            chipset_store::StateDir::to_canonical_json(built).map_err(|source| {
                chipset_store::Error::Serialize {
                    path: key_path(key),
                    source,
                }
            })?,
        )
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
        let bytes = self.event_bytes(&key, &built)?;
        match seam.create(&key, &bytes) {
            Ok(Created::New(_)) => Ok(built),
            // Only a caller-chosen id can collide (generated ids are unique).
            Ok(Created::Existing(_)) => match self.seam_find_published(seam, agent, &built)? {
                Some(first) => Ok(first),
                None => Err(Error::IdTaken {
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
