//! The bus handle: publishing, reading, acknowledging, presence, control, reminders.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use chipset_backend::Backend;

use chipset_store::{
    AgentId, CorruptReason, Corruption, Decision, LogContents, ReadOutcome, StateDir, StatePath,
    Timestamp, Unsupported,
};

use crate::config::{BusConfig, NagPolicy, Occasion};
use crate::control;
use crate::dedup::{self, Verdict};
use crate::error::{Error, Result};
use crate::format::{
    ControlCommand, ControlLine, ControlOp, DedupRecord, Event, EventId, NagState, NewEvent,
    Presence, Registry, Resource,
};
use crate::nag;
use crate::name::{self, QueueEntry};

mod agent;
mod publish;
mod seam;
mod seam_agent;
mod seam_maintain;
mod seam_publish;

pub(crate) use seam::seam_error;

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
///
/// [`Bus::with_backend`] puts the queues, de-duplication records, presence,
/// control log, registry and reminder state on a storage backend (a
/// PostgreSQL server, issue 30) instead of files under the root.
#[derive(Debug, Clone)]
pub struct Bus {
    state: StateDir,
    pub(crate) config: Arc<BusConfig>,
    /// The backend the agents' state lives on, when it is not the
    /// directory `state` (whose tuned file code is kept as it was).
    seam: Option<Arc<dyn Backend>>,
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
}

/// Why a file in a queue is not an event that can be read
/// ([`Pending::unreadable`]). [`Bus::doctor`] reports these and the other
/// faults of the bus's files as the store's findings.
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
}

impl Problem {
    /// Returns the error of an operation that needs the event file at
    /// `path` readable and found it with this problem: the store's
    /// [`Corrupt`](chipset_store::Error::Corrupt) or
    /// [`Unsupported`](chipset_store::Error::Unsupported).
    pub(crate) fn error(self, path: PathBuf) -> Error {
        let reason = match self {
            Problem::Unsupported(what) => {
                return chipset_store::Error::Unsupported(Unsupported::new(path, what)).into();
            }
            Problem::Corrupt(reason) => reason,
            other => CorruptReason::WrongShape(other.to_string()),
        };
        chipset_store::Error::Corrupt(Corruption { path, reason }).into()
    }
}

/// An agent's unacknowledged events, in processing order, and the queue
/// files that could not be read.
///
/// An unreadable file is never "nothing there": a caller gating on an empty
/// queue must check [`Pending::unreadable`] too ([`Pending::is_empty`] does).
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Pending {
    /// The events: critical first, oldest first within a priority.
    pub events: Vec<Event>,
    /// The queue files that could not be read, by path, and why (see
    /// [`Bus::doctor`]).
    pub unreadable: BTreeMap<PathBuf, Problem>,
}

impl Pending {
    /// Returns true when there are no events and no unreadable files.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty() && self.unreadable.is_empty()
    }
}

/// What [`Bus::start`] found and did.
#[derive(Debug, Clone, PartialEq)]
pub struct Startup {
    /// The events waiting for the agent, in processing order.
    pub pending: Pending,
    /// The presence this session registered.
    pub presence: Presence,
    /// The presence file found before registering: missing, unreadable
    /// (it was moved aside), unsupported, or a presence, which
    /// [`Bus::is_live`] judges (a live one from another pid means two
    /// sessions may be running as this agent).
    pub previous: ReadOutcome<Presence>,
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
            seam: None,
        }
    }

    /// Returns a bus whose agents' state lives on `backend`, a PostgreSQL
    /// server (issue 30): publishing (de-duplicated exactly once across
    /// hosts, under the key's lock on the server), reading, acknowledging,
    /// presence, control, the registry, reminders and wake-ups
    /// ([`Bus::waiter`] listens for the server's notifications, with the
    /// rescan kept), and the upkeep ([`Bus::status`], [`Bus::prune`],
    /// [`Bus::doctor`]). Times are the server's clock. `state` is the
    /// local root ([`Bus::state`]).
    pub fn with_backend(state: StateDir, config: BusConfig, backend: Arc<dyn Backend>) -> Self {
        Bus {
            state,
            config: Arc::new(config),
            seam: Some(backend),
        }
    }

    /// Returns the state root.
    pub fn state(&self) -> &StateDir {
        &self.state
    }

    /// Returns the backend of [`Bus::with_backend`], if any.
    pub(crate) fn seam(&self) -> Option<&dyn Backend> {
        self.seam.as_deref()
    }

    pub(crate) fn root(&self) -> StatePath {
        self.state.channel(crate::Bus::CHANNEL)
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

    // ----- reading -----

    pub(crate) fn entries(&self, dir: &StatePath) -> Result<Vec<QueueEntry>> {
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
        if let Some(seam) = &self.seam {
            return self.seam_pending(seam.as_ref(), agent);
        }
        let dir = self.queue_dir(agent);
        let mut pending = Pending::default();
        for name in self.state.list(&dir)? {
            let path = match listed(&dir, &name) {
                Ok(path) => path,
                Err(path) => {
                    pending.unreadable.insert(path, Problem::ForeignName);
                    continue;
                }
            };
            match read_event(&self.state, &path, &name)? {
                // Acknowledged between the listing and the read.
                EventRead::Gone => {}
                EventRead::Event(e) => pending.events.push(e),
                EventRead::Bad(problem) => {
                    pending.unreadable.insert(path.into_path_buf(), problem);
                }
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
        if let Some(seam) = &self.seam {
            return self.seam_is_available(seam.as_ref(), agent);
        }
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
        if let Some(seam) = &self.seam {
            self.seam_ensure_queue(seam.as_ref(), agent)?;
            return Ok(dir);
        }
        self.state.ensure_dir(&dir)?;
        Ok(dir)
    }

    // ----- acknowledging -----

    /// Acknowledges `agent`'s event `id`: moves it from the queue to the
    /// processed area, and returns true; returns false when it was there
    /// already (acknowledging twice is harmless and changes nothing).
    /// Other recipients' copies are untouched.
    ///
    /// This lists the queue to find the file; [`Bus::ack_event`] does not.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownEvent`] when the event is in neither place;
    /// [`Error::Store`] when the move fails.
    pub fn ack(&self, agent: &AgentId, id: &EventId) -> Result<bool> {
        if let Some(seam) = &self.seam {
            return self.seam_ack(seam.as_ref(), agent, id);
        }
        let find = |entries: Vec<QueueEntry>| {
            entries
                .into_iter()
                .find(|e| e.id() == id)
                .map(|e| e.name().to_owned())
        };
        if let Some(name) = find(self.entries(&self.queue_dir(agent))?)
            && let Some(outcome) = self.ack_name(agent, &name)?
        {
            return Ok(outcome);
        }
        if find(self.entries(&self.processed_dir(agent))?).is_some() {
            return Ok(false);
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
    pub fn ack_event(&self, agent: &AgentId, event: &Event) -> Result<bool> {
        if let Some(seam) = &self.seam {
            return match self.seam_ack_name(seam.as_ref(), agent, &event.file_name())? {
                Some(outcome) => Ok(outcome),
                None => self.seam_ack(seam.as_ref(), agent, &event.id),
            };
        }
        match self.ack_name(agent, &event.file_name())? {
            Some(outcome) => Ok(outcome),
            None => self.ack(agent, &event.id),
        }
    }

    /// Moves `name` from the queue to processed: whether it moved now,
    /// `None` when it is in neither place.
    fn ack_name(&self, agent: &AgentId, name: &str) -> Result<Option<bool>> {
        let from = self.queue_dir(agent).join(name)?;
        let to = self.processed_dir(agent).join(name)?;
        match self.state.move_noclobber(&from, &to) {
            Ok(()) => Ok(Some(true)),
            Err(chipset_store::Error::NotFound { .. }) => {
                let done = self.state.stat(&to)?.is_some();
                Ok(done.then_some(false))
            }
            Err(chipset_store::Error::AlreadyExists { .. }) => {
                remove_acked_copy(&self.state, &from, &to)?;
                Ok(Some(false))
            }
            Err(e) => Err(e.into()),
        }
    }

    // ----- presence -----

    // ----- control inbox and registry -----

    // ----- reminders -----

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
        ReadOutcome::Value(e) if e.id != *entry.id() || e.priority != entry.priority() => {
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
