//! The bus handle: publishing, reading, acknowledging, presence, control, reminders.

use std::path::PathBuf;
use std::sync::Arc;

use chipset_store::{
    AgentId, CorruptReason, Corruption, Decision, LogContents, ReadOutcome, StateDir, StatePath,
    Timestamp, Unsupported,
};

use crate::config::{BusConfig, Occasion};
use crate::control;
use crate::dedup::{self, Verdict};
use crate::error::{Error, Result};
use crate::format::{
    ControlCommand, ControlLine, DedupRecord, Event, EventId, NagState, NewEvent, Presence,
    Registry,
};
use crate::nag;
use crate::name::{self, QueueEntry};

pub(crate) const QUEUE: &str = "queue";
pub(crate) const PROCESSED: &str = "processed";
pub(crate) const DEDUP: &str = "dedup";
pub(crate) const PRESENCE: &str = "presence.json";
pub(crate) const CONTROL: &str = "control.jsonl";
pub(crate) const REGISTRY: &str = "registry.json";
pub(crate) const NAG: &str = "nag.json";

/// The event bus: per-agent queues under `bus/` in a state root.
///
/// Cheap to clone; clones share the root and the settings. Every method is
/// safe to call from many processes at once.
#[derive(Debug, Clone)]
pub struct Bus {
    state: StateDir,
    config: Arc<BusConfig>,
}

/// What a publish did for one recipient.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub enum Published {
    /// The event is durably in the recipient's queue.
    Delivered(Event),
    /// The key was accepted within the window; nothing was published.
    Duplicate {
        /// The de-duplication key.
        key: String,
        /// The event accepted for that key.
        original: EventId,
        /// When it was accepted.
        accepted_at: Timestamp,
    },
}

impl Published {
    /// Returns the delivered event, or `None` for a duplicate.
    pub fn delivered(&self) -> Option<&Event> {
        match self {
            Published::Delivered(e) => Some(e),
            Published::Duplicate { .. } => None,
        }
    }

    /// Returns true for a duplicate.
    pub fn is_duplicate(&self) -> bool {
        matches!(self, Published::Duplicate { .. })
    }
}

/// What an acknowledgement did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum AckOutcome {
    /// The event moved from the queue to the processed area.
    Acked,
    /// It was in the processed area already; nothing changed.
    AlreadyAcked,
}

/// Why a file in a bus directory is not usable.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// The file cannot be read as what it should be.
    Corrupt(CorruptReason),
    /// A well-formed file holding a value this version does not know; repair
    /// leaves it in place.
    Unsupported(String),
    /// A file in a queue or processed directory whose name is not an event name.
    ForeignName,
    /// An event whose id or priority differs from its file name's.
    NameMismatch,
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

/// A file that is there but unusable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadFile {
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub problem: Problem,
}

/// An agent's unacknowledged events, in processing order, and the queue
/// files that could not be read.
///
/// An unreadable file is never "nothing there": a caller gating on an empty
/// queue must check [`Pending::unreadable`] too ([`Pending::is_empty`] does).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Pending {
    events: Vec<Event>,
    unreadable: Vec<BadFile>,
}

impl Pending {
    /// Returns the events: critical first, oldest first within a priority.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Returns the events, consuming.
    pub fn into_events(self) -> Vec<Event> {
        self.events
    }

    /// Returns the queue files that could not be read (see [`Bus::doctor`]).
    pub fn unreadable(&self) -> &[BadFile] {
        &self.unreadable
    }

    /// Returns true when there are no events and no unreadable files.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty() && self.unreadable.is_empty()
    }

    /// Returns the number of events.
    pub fn len(&self) -> usize {
        self.events.len()
    }
}

/// An agent's presence as read now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PresenceState {
    /// No presence file: the agent never registered (its queue may still exist).
    Absent,
    /// Seen within [`BusConfig::presence_stale_after`].
    Live(Presence),
    /// Not seen for longer than that. The agent may be busy, crashed or gone.
    Stale(Presence),
    /// The presence file is unreadable.
    Unreadable(Corruption),
    /// The presence file holds a value this version does not know.
    Unsupported(Unsupported),
}

impl PresenceState {
    /// Returns the presence when live or stale.
    pub fn presence(&self) -> Option<&Presence> {
        match self {
            PresenceState::Live(p) | PresenceState::Stale(p) => Some(p),
            _ => None,
        }
    }

    /// Returns true when live.
    pub fn is_live(&self) -> bool {
        matches!(self, PresenceState::Live(_))
    }
}

/// What [`Bus::start`] found and did.
#[derive(Debug, Clone, PartialEq)]
pub struct Startup {
    /// The events waiting for the agent, in processing order.
    pub pending: Pending,
    /// The presence this session registered.
    pub presence: Presence,
    /// The presence found before registering (a live one from another pid
    /// means two sessions may be running as this agent).
    pub previous: PresenceState,
}

/// What [`Bus::apply_control`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The registry after applying.
    pub registry: Registry,
    /// How many commands were applied now.
    pub applied: usize,
    /// Lines that were not commands (skipped, never applied, still in the log).
    pub bad_lines: Vec<BadFile>,
}

impl Bus {
    /// Returns a bus on `state` with the default settings.
    pub fn new(state: StateDir) -> Self {
        Bus::with_config(state, BusConfig::default())
    }

    /// Returns a bus on `state` with `config`.
    pub fn with_config(state: StateDir, config: BusConfig) -> Self {
        Bus {
            state,
            config: Arc::new(config),
        }
    }

    /// Returns the state root.
    pub fn state(&self) -> &StateDir {
        &self.state
    }

    /// Returns the settings.
    pub fn config(&self) -> &BusConfig {
        &self.config
    }

    pub(crate) fn root(&self) -> StatePath {
        self.state.channel(crate::BUS_CHANNEL)
    }

    pub(crate) fn agent_dir(&self, agent: &AgentId) -> StatePath {
        self.root().join_id(agent, "")
    }

    /// Returns the path of `agent`'s queue directory (`bus/{agent}/queue`).
    pub fn queue_dir(&self, agent: &AgentId) -> StatePath {
        self.agent_dir(agent).join_static(QUEUE)
    }

    /// Returns the path of `agent`'s processed directory (`bus/{agent}/processed`).
    pub fn processed_dir(&self, agent: &AgentId) -> StatePath {
        self.agent_dir(agent).join_static(PROCESSED)
    }

    // ----- publishing -----

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
    /// [`Error::IdConflict`] for a chosen id already used with other content;
    /// [`Error::OutcomeUnknown`] (with the id) when the commit point passed
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
        if event.key().is_some() || event.chosen_id().is_some() {
            let mut out: Vec<(AgentId, Published)> = Vec::with_capacity(unique.len());
            for a in unique {
                match self.publish_built(a, event, built.clone()) {
                    Ok(p) => out.push((a.clone(), p)),
                    Err(e) if out.is_empty() => return Err(e),
                    Err(e) => {
                        return Err(Error::PartlyPublished {
                            id: built.id().clone(),
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
            let bytes = chipset_store::to_canonical_json(&built).map_err(|source| {
                chipset_store::Error::Serialize {
                    path: path.clone().into_path_buf(),
                    source,
                }
            })?;
            items.push((path, bytes));
        }
        self.state.create_new_batch(&items).map_err(|e| match e {
            source @ chipset_store::Error::OutcomeUnknown { .. } => Error::OutcomeUnknown {
                id: built.id().clone(),
                source,
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
    /// order, or one `syncfs` and two flushes under
    /// `SyncOrder::SyncFsThenDir`; see the store's Durability docs). Events with a key are
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
    /// written; a failure after some events were published is
    /// [`Error::OutcomeUnknown`] (with the first new event's id): retry with
    /// the same ids.
    pub fn publish_batch(&self, agent: &AgentId, events: &[NewEvent]) -> Result<Vec<Published>> {
        let clock = self.state.clock().as_ref();
        let built: Vec<Event> = events
            .iter()
            .map(|e| e.build(clock))
            .collect::<Result<_>>()?;
        let mut out: Vec<Option<Published>> = vec![None; events.len()];
        let mut fresh: Vec<usize> = Vec::new();
        for (i, (event, b)) in events.iter().zip(&built).enumerate() {
            if event.key().is_some() {
                continue;
            }
            if event.chosen_id().is_some()
                && let Some(first) = self.find_published(agent, b)?
            {
                out[i] = Some(Published::Delivered(first));
                continue;
            }
            fresh.push(i);
        }
        let dir = self.queue_dir(agent);
        let mut items = Vec::with_capacity(fresh.len());
        for &i in &fresh {
            let path = dir.join(built[i].file_name())?;
            let bytes = chipset_store::to_canonical_json(&built[i]).map_err(|source| {
                chipset_store::Error::Serialize {
                    path: path.clone().into_path_buf(),
                    source,
                }
            })?;
            items.push((path, bytes));
        }
        if !items.is_empty() {
            let outcomes = self.state.create_new_batch(&items).map_err(|e| match e {
                source @ chipset_store::Error::OutcomeUnknown { .. } => Error::OutcomeUnknown {
                    id: built[fresh[0]].id().clone(),
                    source,
                },
                e => e.into(),
            })?;
            for (&i, outcome) in fresh.iter().zip(outcomes) {
                out[i] = Some(match outcome {
                    chipset_store::Created::New => Published::Delivered(built[i].clone()),
                    // Only a chosen id can collide: a concurrent publish of it.
                    chipset_store::Created::AlreadyExists => {
                        match self.find_published(agent, &built[i])? {
                            Some(first) => Published::Delivered(first),
                            None => {
                                return Err(Error::IdConflict {
                                    agent: agent.clone(),
                                    id: built[i].id().clone(),
                                    path: items[fresh.iter().position(|f| *f == i).unwrap_or(0)]
                                        .0
                                        .clone()
                                        .into_path_buf(),
                                });
                            }
                        }
                    }
                });
            }
        }
        for (i, (event, b)) in events.iter().zip(built).enumerate() {
            if event.key().is_some() {
                out[i] = Some(self.publish_built(agent, event, b)?);
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    fn publish_built(&self, agent: &AgentId, event: &NewEvent, built: Event) -> Result<Published> {
        let chosen = event.chosen_id().is_some();
        let Some(key) = event.key() else {
            if chosen && let Some(first) = self.find_published(agent, &built)? {
                return Ok(Published::Delivered(first));
            }
            return self.create_event(agent, built).map(Published::Delivered);
        };
        let window = event.window().unwrap_or(self.config.dedup_window);
        let id = built.id().clone();
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
                                accepted_at: first.created_at(),
                                event_id: first.id().clone(),
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
                            event_id: built.id().clone(),
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
                    Error::OutcomeUnknown { id, source }
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
                    None => Err(Error::IdConflict {
                        agent: agent.clone(),
                        id: built.id().clone(),
                        path: target.into_path_buf(),
                    }),
                }
            }
            Err(source @ chipset_store::Error::OutcomeUnknown { .. }) => {
                Err(Error::OutcomeUnknown {
                    id: built.id().clone(),
                    source,
                })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Finds an event with `built`'s id in `agent`'s queue or processed
    /// area. Returns it when its content is the same; fails with
    /// [`Error::IdConflict`] when it is not; `None` when there is none.
    fn find_published(&self, agent: &AgentId, built: &Event) -> Result<Option<Event>> {
        for dir in [self.queue_dir(agent), self.processed_dir(agent)] {
            for entry in self.entries(&dir)? {
                if entry.id() != built.id() {
                    continue;
                }
                let path = dir.join(entry.name())?;
                match read_event(&self.state, &path, entry.name())? {
                    EventRead::Event(first) if built.same_content(&first) => {
                        return Ok(Some(first));
                    }
                    // Acknowledged between the listing and the read: look in processed.
                    EventRead::Gone => continue,
                    _ => {
                        return Err(Error::IdConflict {
                            agent: agent.clone(),
                            id: built.id().clone(),
                            path: path.into_path_buf(),
                        });
                    }
                }
            }
        }
        Ok(None)
    }

    // ----- reading -----

    /// Returns `agent`'s queue by name alone (nothing is read): in processing
    /// order, skipping names that are not event names.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the directory cannot be listed.
    pub fn queued(&self, agent: &AgentId) -> Result<Vec<QueueEntry>> {
        self.entries(&self.queue_dir(agent))
    }

    /// Returns `agent`'s processed area by name alone, in name order.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the directory cannot be listed.
    pub fn processed(&self, agent: &AgentId) -> Result<Vec<QueueEntry>> {
        self.entries(&self.processed_dir(agent))
    }

    fn entries(&self, dir: &StatePath) -> Result<Vec<QueueEntry>> {
        Ok(self
            .state
            .list(dir)?
            .iter()
            .filter_map(|n| QueueEntry::parse(n))
            .collect())
    }

    /// Returns every unacknowledged event for `agent`: critical first, oldest
    /// first within a priority (a sorted listing of the queue), with no cap.
    /// Reading never acknowledges.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the queue cannot be listed or a file cannot be
    /// read. A corrupt file is not an error: it is in [`Pending::unreadable`].
    pub fn pending(&self, agent: &AgentId) -> Result<Pending> {
        let dir = self.queue_dir(agent);
        let mut pending = Pending::default();
        for name in self.state.list(&dir)? {
            let path = match listed(&dir, &name) {
                Ok(path) => path,
                Err(path) => {
                    pending.unreadable.push(BadFile {
                        path,
                        problem: Problem::ForeignName,
                    });
                    continue;
                }
            };
            match read_event(&self.state, &path, &name)? {
                // Acknowledged between the listing and the read.
                EventRead::Gone => {}
                EventRead::Event(e) => pending.events.push(e),
                EventRead::Bad(problem) => pending.unreadable.push(BadFile {
                    path: path.into_path_buf(),
                    problem,
                }),
            }
        }
        Ok(pending)
    }

    /// Returns true when `agent`'s queue exists (availability). An agent that
    /// is not running still has a queue and still receives events.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when a directory on the way is a symlink or unreadable.
    pub fn is_available(&self, agent: &AgentId) -> Result<bool> {
        let dir = self.queue_dir(agent);
        if !self.state.check_parents(&dir)? {
            return Ok(false);
        }
        Ok(self.state.stat(&dir)?.is_some_and(|m| m.is_dir()))
    }

    /// Creates `agent`'s queue if needed, so events can be published to it
    /// and waited for.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when it cannot be created.
    pub fn ensure_queue(&self, agent: &AgentId) -> Result<StatePath> {
        let dir = self.queue_dir(agent);
        self.state.ensure_dir(&dir)?;
        Ok(dir)
    }

    // ----- acknowledging -----

    /// Acknowledges `agent`'s event `id`: moves it from the queue to the
    /// processed area. Acknowledging twice is harmless. Other recipients'
    /// copies are untouched.
    ///
    /// This lists the queue to find the file; [`Bus::ack_event`] does not.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownEvent`] when the event is in neither place;
    /// [`Error::Store`] when the move fails.
    pub fn ack(&self, agent: &AgentId, id: &EventId) -> Result<AckOutcome> {
        let find = |entries: Vec<QueueEntry>| {
            entries
                .into_iter()
                .find(|e| e.id() == id)
                .map(|e| e.name().to_owned())
        };
        if let Some(name) = find(self.queued(agent)?)
            && let Some(outcome) = self.ack_name(agent, &name)?
        {
            return Ok(outcome);
        }
        if find(self.processed(agent)?).is_some() {
            return Ok(AckOutcome::AlreadyAcked);
        }
        Err(Error::UnknownEvent {
            agent: agent.clone(),
            id: id.clone(),
        })
    }

    /// Acknowledges an event read from `agent`'s queue, by its file name
    /// (no listing). Falls back to [`Bus::ack`] for files another writer
    /// named differently.
    ///
    /// # Errors
    ///
    /// As [`Bus::ack`].
    pub fn ack_event(&self, agent: &AgentId, event: &Event) -> Result<AckOutcome> {
        match self.ack_name(agent, &event.file_name())? {
            Some(outcome) => Ok(outcome),
            None => self.ack(agent, event.id()),
        }
    }

    /// Moves `name` from the queue to processed; `None` when it is in neither.
    fn ack_name(&self, agent: &AgentId, name: &str) -> Result<Option<AckOutcome>> {
        let from = self.queue_dir(agent).join(name)?;
        let to = self.processed_dir(agent).join(name)?;
        match self.state.move_noclobber(&from, &to) {
            Ok(()) => Ok(Some(AckOutcome::Acked)),
            Err(chipset_store::Error::NotFound { .. }) => {
                let done = self.state.exists(&to)?;
                Ok(done.then_some(AckOutcome::AlreadyAcked))
            }
            Err(chipset_store::Error::AlreadyExists { .. }) => {
                remove_acked_copy(&self.state, &from, &to)?;
                Ok(Some(AckOutcome::AlreadyAcked))
            }
            Err(e) => Err(e.into()),
        }
    }

    // ----- presence -----

    /// Starts a session for `agent`, as the seed's restart steps say: makes
    /// sure the queue exists, reads every pending event in order, then
    /// registers presence (this process's pid, now).
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the queue or presence cannot be read or written.
    pub fn start(&self, agent: &AgentId) -> Result<Startup> {
        self.ensure_queue(agent)?;
        let pending = self.pending(agent)?;
        let path = self.agent_dir(agent).join_static(PRESENCE);
        let pid = std::process::id();
        let (presence, previous) = self.state.update(&path, |cur: ReadOutcome<Presence>| {
            let now = self.state.now();
            let previous = self.classify_presence(cur, now);
            if let PresenceState::Unreadable(_) = &previous {
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

    /// Returns `agent`'s presence: absent, live, stale or unreadable.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when it cannot be read.
    pub fn presence(&self, agent: &AgentId) -> Result<PresenceState> {
        let path = self.agent_dir(agent).join_static(PRESENCE);
        let read = self.state.read_json::<Presence>(&path)?;
        Ok(self.classify_presence(read, self.state.now()))
    }

    fn classify_presence(&self, read: ReadOutcome<Presence>, now: Timestamp) -> PresenceState {
        match read {
            ReadOutcome::Missing => PresenceState::Absent,
            ReadOutcome::Corrupt(c) => PresenceState::Unreadable(c),
            ReadOutcome::Unsupported(u) => PresenceState::Unsupported(u),
            ReadOutcome::Value(p) => {
                if now.since(p.last_seen) > self.config.presence_stale_after {
                    PresenceState::Stale(p)
                } else {
                    PresenceState::Live(p)
                }
            }
        }
    }

    // ----- control inbox and registry -----

    /// Appends `command` to `agent`'s control log (`bus/{agent}/control.jsonl`),
    /// durably. The log is never truncated.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidField`] for a bad resource; [`Error::Store`] when the append fails.
    pub fn control(&self, agent: &AgentId, command: &ControlCommand) -> Result<()> {
        command.resource.check()?;
        let log = self
            .state
            .log(&self.agent_dir(agent).join_static(CONTROL))?;
        log.append(&ControlLine {
            at: self.state.now(),
            command: command.clone(),
        })?;
        Ok(())
    }

    /// Applies the control commands appended since the registry's offset to
    /// `agent`'s registry, and stores the registry and the new offset in one
    /// atomic replace. Concurrent callers are serialized; a crash leaves the
    /// old registry and offset, and applying again gives the same result.
    ///
    /// A corrupt registry is quarantined and rebuilt from the whole log.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the log or registry cannot be read or written.
    pub fn apply_control(&self, agent: &AgentId) -> Result<Applied> {
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
                let bad_lines = read
                    .bad_lines
                    .iter()
                    .map(|b| BadFile {
                        path: log.path().to_owned(),
                        problem: Problem::BadLogLine {
                            offset: b.offset,
                            reason: b.reason.clone(),
                        },
                    })
                    .collect();
                if read.end_offset == registry.applied_offset {
                    return Ok::<_, Error>(Decision::Keep(Applied {
                        registry,
                        applied: 0,
                        bad_lines,
                    }));
                }
                let applied = read.records.len();
                let next = control::apply(registry, &read.records, read.end_offset);
                Ok(Decision::Write(
                    next.clone(),
                    Applied {
                        registry: next,
                        applied,
                        bad_lines,
                    },
                ))
            })
    }

    /// Returns `agent`'s registry as last applied (empty when never applied).
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when it cannot be read or is corrupt.
    pub fn registry(&self, agent: &AgentId) -> Result<Registry> {
        let path = self.agent_dir(agent).join_static(REGISTRY);
        Ok(self
            .state
            .read_json::<Registry>(&path)?
            .into_result()?
            .unwrap_or_default())
    }

    // ----- reminders -----

    /// Returns `agent`'s unacknowledged events that are due for a reminder
    /// now, in processing order, and records the reminder time of the timed
    /// ones (`bus/{agent}/nag.json`), so a restart does not repeat them early.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the queue or the reminder state cannot be read or written.
    pub fn due_reminders(&self, agent: &AgentId, occasion: Occasion) -> Result<Vec<Event>> {
        let events = self.pending(agent)?.into_events();
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
                &self.config.nag,
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

    pub(crate) fn dedup_dir(&self, agent: &AgentId) -> StatePath {
        self.agent_dir(agent).join_static(DEDUP)
    }
}

/// Returns `dir/name` for a name read from a listing of `dir`, or, for a
/// name that is not one safe path segment, the path to show it by: no
/// chipset writer makes such a name (an event's or a key's file name is
/// always a safe segment), so it is foreign, and no `StatePath` can name it.
pub(crate) fn listed(dir: &StatePath, name: &str) -> std::result::Result<StatePath, PathBuf> {
    dir.join(name).map_err(|_| dir.as_path().join(name))
}

/// What reading one queue file gave.
pub(crate) enum EventRead {
    Gone,
    Event(Event),
    Bad(Problem),
}

/// Reads an event file and checks it against its name.
pub(crate) fn read_event(state: &StateDir, path: &StatePath, name: &str) -> Result<EventRead> {
    let Some(entry) = QueueEntry::parse(name) else {
        return Ok(EventRead::Bad(Problem::ForeignName));
    };
    Ok(match crate::format::read_event_json(state, path)? {
        ReadOutcome::Missing => EventRead::Gone,
        ReadOutcome::Corrupt(c) => EventRead::Bad(Problem::Corrupt(c.reason)),
        ReadOutcome::Unsupported(u) => EventRead::Bad(Problem::Unsupported(u.what)),
        ReadOutcome::Value(e) if e.id() != entry.id() || e.priority() != entry.priority() => {
            EventRead::Bad(Problem::NameMismatch)
        }
        ReadOutcome::Value(e) => EventRead::Event(e),
    })
}

/// Removes the queue copy of an event that is also in the processed area,
/// when both hold the same bytes. Such a pair can only come from a crash
/// between the two directory syncs of a move; the processed copy stays.
pub(crate) fn remove_acked_copy(
    state: &StateDir,
    queued: &StatePath,
    processed: &StatePath,
) -> Result<bool> {
    let queued_bytes = state.read_bytes(queued)?;
    let same = match (queued_bytes, state.read_bytes(processed)?) {
        (ReadOutcome::Value(a), ReadOutcome::Value(b)) => a == b,
        _ => false,
    };
    if !same {
        tracing::warn!(path = %queued.display(), "event in queue and processed with different contents; left for doctor");
        return Ok(false);
    }
    Ok(state.remove_file(queued)?)
}
