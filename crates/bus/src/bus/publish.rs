//! Publishing: one event, a batch, to a queue by name, with de-duplication
//! and the idempotent retry of a caller-chosen id.

use chipset_store::Classify;

use super::*;

impl Bus {
    /// Publishes `event` to `agent`'s queue and returns once it is durable, or
    /// reports a duplicate when its key was accepted within the window.
    ///
    /// Without a de-duplication key this is one no-clobber durable create.
    /// With a key, the check, the publish and the key's record happen under
    /// the key's lock: of many processes publishing one key at once, exactly
    /// one delivers.
    ///
    /// **Commit point:** the no-clobber create of the event's file in the
    /// queue. A failure before it leaves nothing visible (no event, no new
    /// queue directory). With a caller-chosen id ([`NewEvent::with_id`]),
    /// publishing again with the same content returns the first delivery
    /// (from the queue or, once acknowledged, the processed area) as
    /// [`Published::Delivered`]; other content is refused.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidField`] for a bad source, kind or key;
    /// [`Error::IdTaken`] for a chosen id already used with other content
    /// (an unreadable file under the id is the store's
    /// [`Corrupt`](chipset_store::Error::Corrupt) or
    /// [`Unsupported`](chipset_store::Error::Unsupported): what it holds is
    /// not known); [`Error::OutcomeUnknown`] (with the id) when the commit point passed
    /// but a sync after it failed: the event may be delivered, so retry with
    /// the same id; [`Error::Store`] when the event cannot be written.
    pub fn publish(&self, agent: &AgentId, event: &NewEvent) -> Result<Published> {
        let built = event.build(self.state.clock().as_ref())?;
        self.publish_built(agent, event, built)
    }

    /// Publishes `event` to every agent in `agents`, each getting its own
    /// copy (with the same id) in its own queue; acknowledging one copy
    /// leaves the others. Repeated agents get one copy. Returns each
    /// recipient's outcome in order.
    ///
    /// Without a key the copies share their directory syncs; with a key each
    /// recipient is de-duplicated on its own.
    ///
    /// # Errors
    ///
    /// As [`Bus::publish`]. Copies published before a failure stay
    /// published: [`Error::PartlyPublished`] (or [`Error::OutcomeUnknown`])
    /// says so, and a retry with the same id completes the rest.
    pub fn publish_to(
        &self,
        agents: &[AgentId],
        event: &NewEvent,
    ) -> Result<Vec<(AgentId, Published)>> {
        let mut unique: Vec<&AgentId> = Vec::with_capacity(agents.len());
        for a in agents {
            if !unique.contains(&a) {
                unique.push(a);
            }
        }
        let built = event.build(self.state.clock().as_ref())?;
        // On a server each copy is one statement; the shared syncs below
        // are the directory's.
        if event.key().is_some() || event.chosen_id().is_some() || self.seam.is_some() {
            let mut out: Vec<(AgentId, Published)> = Vec::with_capacity(unique.len());
            for a in unique {
                match self.publish_built(a, event, built.clone()) {
                    Ok(p) => out.push((a.clone(), p)),
                    Err(e) if out.is_empty() => return Err(e),
                    Err(e) => {
                        return Err(Error::PartlyPublished {
                            id: built.id.clone(),
                            delivered: out.into_iter().map(|(a, _)| a).collect(),
                            source: Box::new(e),
                        });
                    }
                }
            }
            return Ok(out);
        }
        let name = built.file_name();
        let mut items = Vec::with_capacity(unique.len());
        for a in &unique {
            let path = self.queue_dir(a).join(&name)?;
            let bytes = chipset_store::StateDir::to_canonical_json(&built).map_err(|source| {
                chipset_store::Error::Serialize {
                    path: path.clone().into_path_buf(),
                    source,
                }
            })?;
            items.push((path, bytes));
        }
        self.state.create_new_batch(&items).map_err(|e| match e {
            source @ chipset_store::Error::OutcomeUnknown { .. } => Error::OutcomeUnknown {
                id: built.id.clone(),
                source: Box::new(source),
            },
            e => e.into(),
        })?;
        Ok(unique
            .into_iter()
            .map(|a| (a.clone(), Published::Delivered(built.clone())))
            .collect())
    }

    /// Publishes many events to `agent`'s queue sharing their syncs, and
    /// returns each one's outcome in order.
    ///
    /// The events without a de-duplication key cost a constant number of
    /// sync rounds together, however many there are: every file is written
    /// first, their data made durable in one round, each published with its
    /// own no-clobber create, and the queue directory synced once (the
    /// store's `create_new_batch`: concurrent fsyncs, or one cache flush
    /// for the whole batch on a filesystem that commits its journal in
    /// order; see the store's Durability docs). Events with a key are
    /// each judged under their key's lock, one after another, exactly as
    /// [`Bus::publish`] does.
    ///
    /// **Commit points:** each event's own no-clobber create. A chosen id
    /// ([`NewEvent::with_id`]) already published with the same content is
    /// returned as first delivered and not written again, so a retry of a
    /// batch that failed part way (every event given an id) publishes only
    /// the rest.
    ///
    /// # Errors
    ///
    /// As [`Bus::publish`]. A bad event refuses the batch before anything is
    /// written. A failure once events of the batch are in the queue, or
    /// may be (the events without a key are published first, then the
    /// keyed ones), is [`Error::BatchPartlyPublished`], naming each one's
    /// position and id: publish the batch again with ids
    /// ([`NewEvent::with_id`]), these for those events, and only the rest
    /// is published. Its source says what failed: an
    /// [`Error::OutcomeUnknown`] when a step's outcome is unknown.
    pub fn publish_batch(&self, agent: &AgentId, events: &[NewEvent]) -> Result<Vec<Published>> {
        let clock = self.state.clock().as_ref();
        let built: Vec<Event> = events
            .iter()
            .map(|e| e.build(clock))
            .collect::<Result<_>>()?;
        let ids: Vec<EventId> = built.iter().map(|b| b.id.clone()).collect();
        let mut batch = Batch {
            out: vec![None; events.len()],
            trying: Vec::new(),
        };
        let done = match &self.seam {
            // On a server the events without a key are one transaction.
            Some(seam) => self.seam_publish_batch(seam.as_ref(), agent, events, built, &mut batch),
            None => self.dir_publish_batch(agent, events, built, &mut batch),
        };
        match done {
            Ok(()) => Ok(batch.out.into_iter().flatten().collect()),
            Err(e) => Err(batch.cut(agent, &ids, e)),
        }
    }

    /// [`Bus::publish_batch`] on a directory, each outcome put in `batch`.
    fn dir_publish_batch(
        &self,
        agent: &AgentId,
        events: &[NewEvent],
        built: Vec<Event>,
        batch: &mut Batch,
    ) -> Result<()> {
        let mut fresh: Vec<usize> = Vec::new();
        for (i, (event, b)) in events.iter().zip(&built).enumerate() {
            if event.key().is_some() {
                continue;
            }
            if event.chosen_id().is_some()
                && let Some(first) = self.find_published(agent, b)?
            {
                batch.out[i] = Some(Published::Delivered(first));
                continue;
            }
            fresh.push(i);
        }
        let dir = self.queue_dir(agent);
        let mut items = Vec::with_capacity(fresh.len());
        for &i in &fresh {
            let path = dir.join(built[i].file_name())?;
            let bytes =
                chipset_store::StateDir::to_canonical_json(&built[i]).map_err(|source| {
                    chipset_store::Error::Serialize {
                        path: path.clone().into_path_buf(),
                        source,
                    }
                })?;
            items.push((path, bytes));
        }
        if !items.is_empty() {
            batch.trying.clone_from(&fresh);
            let outcomes = self.state.create_new_batch(&items).map_err(|e| match e {
                source @ chipset_store::Error::OutcomeUnknown { .. } => Error::OutcomeUnknown {
                    id: built[fresh[0]].id.clone(),
                    source: Box::new(source),
                },
                e => e.into(),
            })?;
            batch.trying.clear();
            // Every new one first: a failure below names them.
            let mut taken = Vec::new();
            for (k, (&i, outcome)) in fresh.iter().zip(outcomes).enumerate() {
                match outcome {
                    chipset_store::Created::New => {
                        batch.out[i] = Some(Published::Delivered(built[i].clone()));
                    }
                    chipset_store::Created::AlreadyExists => taken.push((k, i)),
                }
            }
            // Only a chosen id can collide: a concurrent publish of it.
            for (k, i) in taken {
                let Some(first) = self.find_published(agent, &built[i])? else {
                    return Err(Error::IdTaken {
                        agent: agent.clone(),
                        id: built[i].id.clone(),
                        path: items[k].0.clone().into_path_buf(),
                    });
                };
                batch.out[i] = Some(Published::Delivered(first));
            }
        }
        for (i, (event, b)) in events.iter().zip(built).enumerate() {
            if event.key().is_some() {
                batch.trying = vec![i];
                batch.out[i] = Some(self.publish_built(agent, event, b)?);
            }
        }
        Ok(())
    }

    fn publish_built(&self, agent: &AgentId, event: &NewEvent, built: Event) -> Result<Published> {
        if let Some(seam) = &self.seam {
            return self.seam_publish_built(seam.as_ref(), agent, event, built);
        }
        let chosen = event.chosen_id().is_some();
        let Some(key) = event.key() else {
            if chosen && let Some(first) = self.find_published(agent, &built)? {
                return Ok(Published::Delivered(first));
            }
            return self.create_event(agent, built).map(Published::Delivered);
        };
        let window = event.window().unwrap_or(self.config.dedup_window);
        let id = built.id.clone();
        // Set once the event is published (the commit point): after that, a
        // failure to write the key's record does not fail the publish.
        let published: std::cell::RefCell<Option<Event>> = std::cell::RefCell::new(None);
        let record_path = self
            .agent_dir(agent)
            .join_static(DEDUP)
            .join(name::dedup_file_name(key))?;
        self.state
            .update(&record_path, |last: ReadOutcome<DedupRecord>| {
                // Time is read under the lock, so racing publishers are judged in lock order.
                let now = self.state.now();
                let last = match last {
                    ReadOutcome::Value(r) => Some(r),
                    ReadOutcome::Missing => None,
                    ReadOutcome::Corrupt(bad) => {
                        // Delivering a possible duplicate beats dropping an event.
                        tracing::warn!(path = %bad.path.display(), reason = %bad.reason, "corrupt de-duplication record");
                        self.state.quarantine(&record_path)?;
                        None
                    }
                    // A record this version cannot judge is neither overwritten nor guessed at.
                    ReadOutcome::Unsupported(u) => return Err(chipset_store::Error::from(u).into()),
                };
                let window_ms = u64::try_from(window.as_millis()).unwrap_or(u64::MAX);
                // A retry of a publish that applied: return the first delivery,
                // and finish its follow-up (the key's record) if it is missing.
                if chosen && let Some(first) = self.find_published(agent, &built)? {
                    return Ok(match last {
                        Some(r) if r.key == key => Decision::Keep(Published::Delivered(first)),
                        _ => Decision::Write(
                            DedupRecord {
                                key: key.to_owned(),
                                accepted_at: first.created_at,
                                event_id: first.id.clone(),
                                window_ms,
                            },
                            Published::Delivered(first),
                        ),
                    });
                }
                match dedup::judge(last.as_ref(), key, now, window) {
                    Verdict::Duplicate {
                        original,
                        accepted_at,
                    } => Ok(Decision::Keep(Published::Duplicate {
                        key: key.to_owned(),
                        original,
                        accepted_at,
                    })),
                    Verdict::Accept => {
                        // Publish first, record second: a crash between the two
                        // can let one duplicate through, never lose the event.
                        let built = self.create_event(agent, built)?;
                        *published.borrow_mut() = Some(built.clone());
                        let record = DedupRecord {
                            key: key.to_owned(),
                            accepted_at: now,
                            event_id: built.id.clone(),
                            window_ms,
                        };
                        Ok(Decision::Write(record, Published::Delivered(built)))
                    }
                }
            })
            .map_err(|e| match (published.into_inner(), e) {
                // The event is published (its commit point passed), but the
                // key's record was not written: the publish happened, yet a
                // later publish with the key could pass the check. Say so, with
                // the id: a retry with it returns the event and writes the record.
                (Some(_), Error::Store(source)) => {
                    tracing::warn!(path = %record_path.display(), id = %id, "published, but the de-duplication record was not written");
                    Error::OutcomeUnknown {
                        id,
                        source: Box::new(source),
                    }
                }
                (_, e) => e,
            })
    }

    /// Publishes `built` into `agent`'s queue: the commit point of a publish
    /// is this no-clobber create. Returns the event delivered, which for a
    /// retry of the same id and content is the first one.
    fn create_event(&self, agent: &AgentId, built: Event) -> Result<Event> {
        let target = self.queue_dir(agent).join(built.file_name())?;
        match self.state.create_new_json(&target, &built) {
            Ok(()) => Ok(built),
            Err(chipset_store::Error::AlreadyExists { .. }) => {
                // Only a caller-chosen id can collide (generated ids are unique).
                match self.find_published(agent, &built)? {
                    Some(first) => Ok(first),
                    None => Err(Error::IdTaken {
                        agent: agent.clone(),
                        id: built.id.clone(),
                        path: target.into_path_buf(),
                    }),
                }
            }
            Err(source @ chipset_store::Error::OutcomeUnknown { .. }) => {
                Err(Error::OutcomeUnknown {
                    id: built.id.clone(),
                    source: Box::new(source),
                })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Finds an event with `built`'s id in `agent`'s queue or processed
    /// area. Returns it when its content is the same; fails with
    /// [`Error::IdTaken`] when it is not; `None` when there is none.
    fn find_published(&self, agent: &AgentId, built: &Event) -> Result<Option<Event>> {
        for dir in [self.queue_dir(agent), self.processed_dir(agent)] {
            for entry in self.entries(&dir)? {
                if *entry.id() != built.id {
                    continue;
                }
                let path = dir.join(entry.name())?;
                match read_event(&self.state, &path, entry.name())? {
                    EventRead::Event(first) if built.same_content(&first) => {
                        return Ok(Some(first));
                    }
                    // Acknowledged between the listing and the read: look in processed.
                    EventRead::Gone => continue,
                    // Unreadable: never taken for other content (a caller
                    // that treats a taken id as "published before" would
                    // lose its event when the doctor moves this aside).
                    EventRead::Bad(problem) => return Err(problem.error(path.into_path_buf())),
                    EventRead::Event(_) => {
                        return Err(Error::IdTaken {
                            agent: agent.clone(),
                            id: built.id.clone(),
                            path: path.into_path_buf(),
                        });
                    }
                }
            }
        }
        Ok(None)
    }
}

/// What a batch did so far: each event's outcome once known, and the
/// events of the step under way (a failure whose outcome is unknown may
/// have published them).
pub(crate) struct Batch {
    pub(crate) out: Vec<Option<Published>>,
    pub(crate) trying: Vec<usize>,
}

impl Batch {
    /// `e`, or when events of the batch are in the queue or may be,
    /// [`Error::BatchPartlyPublished`] naming them (`ids`: every event's
    /// id): a retry without their ids would publish them twice.
    fn cut(self, agent: &AgentId, ids: &[EventId], e: Error) -> Error {
        let maybe = if e.is_outcome_unknown() {
            self.trying
        } else {
            Vec::new()
        };
        let published: Vec<(usize, EventId)> = self
            .out
            .iter()
            .enumerate()
            .filter(|(i, p)| {
                p.as_ref().is_some_and(|p| p.delivered().is_some()) || maybe.contains(i)
            })
            .map(|(i, _)| (i, ids[i].clone()))
            .collect();
        if published.is_empty() {
            return e;
        }
        Error::BatchPartlyPublished {
            agent: agent.clone(),
            published,
            source: Box::new(e),
        }
    }
}
