//! Latest-wins signals: sending and receiving (the I/O shell).

pub(crate) mod respond;
mod rows;
pub(crate) mod scan;
mod seam;

use std::path::PathBuf;
use std::sync::Arc;

use chipset_backend::{Backend, FsBackend};
use chipset_store::{AgentId, Corruption, Decision, ReadOutcome, SortableId, StateDir, StatePath};

use self::seam::Current;

use crate::error::{Error, Result};
use crate::format::{Nudge, NudgeId, NudgeType, ProcessedRecord};
use crate::transition::{Verdict, precedence};

/// The file name of an agent's current nudge.
pub(crate) const LATEST_FILE: &str = "latest.json";
/// The file name of an agent's processed record.
pub(crate) const PROCESSED_FILE: &str = "processed.json";
/// The directory, beside `latest.json`, of per-responder answers.
pub(crate) const RESPONSES_DIR: &str = "responses";
/// A nudge to send: the fields the sender chooses. The timestamp (and,
/// unless the caller chooses one, the id) are filled in by [`Nudges::send`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewNudge {
    /// The sender.
    pub from: AgentId,
    /// The type.
    pub kind: NudgeType,
    /// Human-readable content.
    pub message: String,
    /// Whether the recipient must answer.
    pub requires_response: bool,
    /// A caller-chosen id, which makes the send safe to retry (see
    /// [`Nudges::send`]); `None` for a fresh one.
    pub id: Option<NudgeId>,
}

impl NewNudge {
    /// Returns a draft that does not require a response.
    pub fn new(from: AgentId, kind: NudgeType, message: impl Into<String>) -> Self {
        NewNudge {
            from,
            kind,
            message: message.into(),
            requires_response: false,
            id: None,
        }
    }

    /// Returns this draft, requiring a response.
    #[must_use]
    pub fn requiring_response(mut self) -> Self {
        self.requires_response = true;
        self
    }

    /// Returns this draft with a caller-chosen id, which makes its send
    /// safe to retry.
    #[must_use]
    pub fn with_id(mut self, id: NudgeId) -> Self {
        self.id = Some(id);
        self
    }
}

/// What a send did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[must_use]
pub enum Delivery {
    /// Written; the recipient had no nudge, or had processed the one it had.
    Delivered {
        /// The nudge as written.
        sent: Nudge,
    },
    /// Written over a nudge the recipient had not processed yet (latest wins).
    Replaced {
        /// The nudge as written.
        sent: Nudge,
        /// The unprocessed nudge it replaced, now gone.
        previous: Nudge,
    },
    /// Not written: the recipient has an unprocessed `abort`, which only
    /// another `abort` replaces. The nudge is handed back.
    Held {
        /// The pending abort, still in place.
        pending: Nudge,
        /// The nudge that was not written.
        unsent: Nudge,
    },
    /// Written after moving a corrupt `latest.json` aside (it may have held
    /// anything, an abort included: the caller may want to say so).
    RepairedCorrupt {
        /// The nudge as written.
        sent: Nudge,
        /// Where the corrupt file went.
        quarantined: PathBuf,
    },
}

impl Delivery {
    /// Returns the nudge this send was about: the one written, or for
    /// [`Delivery::Held`] the one handed back.
    pub fn nudge(&self) -> &Nudge {
        match self {
            Delivery::Delivered { sent }
            | Delivery::Replaced { sent, .. }
            | Delivery::RepairedCorrupt { sent, .. } => sent,
            Delivery::Held { unsent, .. } => unsent,
        }
    }
}

/// Whether the nudge in an agent's `latest.json` was processed: the value
/// of [`Nudges::receive`]'s read outcome. A missing, corrupt or unsupported
/// `latest.json` is the read outcome's own [`ReadOutcome::Missing`],
/// [`ReadOutcome::Corrupt`] or [`ReadOutcome::Unsupported`]; this is the
/// judgement on a nudge that was read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Received {
    /// The nudge there was processed already.
    Seen(Nudge),
    /// A nudge not processed yet: act on it, then [`Nudges::mark_processed`].
    New(Nudge),
    /// A nudge, but the processed record is corrupt, so it may have been
    /// processed already. Act on it (at least once beats never) and mark it
    /// processed, which moves the bad record aside.
    Unsure {
        /// The nudge.
        nudge: Nudge,
        /// The unreadable record.
        record: Corruption,
    },
}

impl Received {
    /// Returns the nudge to act on: [`Received::New`] or [`Received::Unsure`].
    pub fn to_process(&self) -> Option<&Nudge> {
        match self {
            Received::New(n) | Received::Unsure { nudge: n, .. } => Some(n),
            Received::Seen(_) => None,
        }
    }
}

/// The signal channel: `nudge/{agent}/latest.json` and its companions.
///
/// Cheap to clone. See the crate docs for the protocol. Every read and
/// write of a signal goes through the storage seam
/// (`chipset_backend::Backend`, issue 30): on a directory the files are
/// what they always were; [`Nudges::with_backend`] puts them on PostgreSQL.
#[derive(Debug, Clone)]
pub struct Nudges {
    state: StateDir,
    seam: Arc<dyn Backend>,
    /// Whether the seam is the directory `state` (its corrupt files go to
    /// the store's `.quarantine/`).
    local: bool,
}

impl Nudges {
    /// Returns the channel on `state`.
    pub fn new(state: StateDir) -> Self {
        let seam = Arc::new(FsBackend::new(state.clone()));
        Nudges {
            state,
            seam,
            local: true,
        }
    }

    /// Returns the channel whose signals (`latest.json`, the processed
    /// record, the responses) live on `backend`, a PostgreSQL server
    /// (issue 30). The scan of the agents ([`Nudges::agents`]), the
    /// doctor and [`Nudges::watch`] go through it too; `state` gives the
    /// clock that makes nudge ids (the reminders have their own
    /// [`Reminders::with_backend`](crate::Reminders::with_backend)).
    pub fn with_backend(state: StateDir, backend: Arc<dyn Backend>) -> Self {
        Nudges {
            state,
            seam: backend,
            local: false,
        }
    }

    /// Returns `nudge/{agent}/`.
    pub fn agent_dir(&self, agent: &AgentId) -> StatePath {
        self.state.channel(crate::NUDGE_CHANNEL).join_id(agent, "")
    }

    /// Returns `nudge/{agent}/latest.json`.
    pub(crate) fn latest_path(&self, agent: &AgentId) -> StatePath {
        self.agent_dir(agent).join_static(LATEST_FILE)
    }

    /// Returns `nudge/{agent}/processed.json`.
    pub(crate) fn processed_path(&self, agent: &AgentId) -> StatePath {
        self.agent_dir(agent).join_static(PROCESSED_FILE)
    }

    /// Returns `nudge/{sender}/responses/{responder}.json`.
    pub(crate) fn response_path(&self, sender: &AgentId, responder: &AgentId) -> StatePath {
        self.agent_dir(sender)
            .join_static(RESPONSES_DIR)
            .join_id(responder, ".json")
    }

    /// Sends a nudge to `to`: stamps it with the time and, unless the draft
    /// has one ([`NewNudge::with_id`]), a fresh id, and durably replaces
    /// `to`'s `latest.json`, unless an unprocessed `abort` is there and this
    /// is not an abort (see the crate docs' abort precedence).
    ///
    /// The check and the replace happen under the recipient's lock, so of
    /// many concurrent senders each sees the one before it, and the reader
    /// always sees one whole nudge.
    ///
    /// A caller-chosen id makes the send safe to retry (the store's
    /// idempotent-retry rule): when `to`'s `latest.json` holds a nudge with
    /// this id, or it is the last one `to` processed, and its content is the
    /// same (every field but the timestamp), that first delivery is returned
    /// as [`Delivery::Delivered`] and nothing is written; other content is
    /// [`Error::IdTaken`]. A retry is recognised only while the first
    /// delivery is in one of those two places: a signal replaced by a later
    /// nudge before it was processed is gone, and sending again delivers it
    /// again.
    ///
    /// The draft is borrowed, so a caller keeps it, with its chosen id, and
    /// sends the same draft again to retry:
    ///
    /// ```
    /// use chipset_nudge::{NewNudge, NudgeId, NudgeType, Nudges};
    /// use chipset_store::{AgentId, StateDir};
    ///
    /// let tmp = tempfile::tempdir()?;
    /// let nudges = Nudges::new(StateDir::open(tmp.path())?);
    /// let (witness, polecat) = (AgentId::new("witness")?, AgentId::new("polecat-alpha")?);
    /// let draft = NewNudge::new(witness, NudgeType::HealthCheck, "Are you working?")
    ///     .with_id(NudgeId::new("check-1")?);
    /// let first = nudges.send(&polecat, &draft)?;
    /// // The answer was lost (a timeout, a crash): send the same draft again.
    /// let retry = nudges.send(&polecat, &draft)?;
    /// assert_eq!(retry, first, "the first delivery, nothing written again");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// **Commit point:** the rename of the new `latest.json` under the
    /// recipient's lock; a failed sync after it is the store's
    /// [`OutcomeUnknown`](chipset_store::Error::OutcomeUnknown).
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the lock, a read or the write fails (then
    /// nothing was written, unless only the final directory sync failed:
    /// the new nudge is then in place, so re-read before sending again);
    /// [`Error::IdTaken`] for a chosen id already used with other content;
    /// [`Error::InvalidField`] for a type of another name than the known
    /// ones that is empty, longer than 64 bytes or holds a control
    /// character, or a message longer than 64 KiB (nothing is written).
    pub fn send(&self, to: &AgentId, draft: &NewNudge) -> Result<Delivery> {
        if let NudgeType::Unknown(name) = &draft.kind {
            crate::key::check_text("nudge type", name, 64)?;
        }
        crate::key::check_message("message", &draft.message)?;
        let chosen = draft.id.is_some();
        let nudge = Nudge {
            from: String::from(draft.from.clone()),
            kind: draft.kind.clone(),
            message: draft.message.clone(),
            timestamp: self.now()?,
            requires_response: draft.requires_response,
            id: Some(draft.id.clone().unwrap_or_else(|| self.new_id())),
            in_reply_to: None,
            extra: serde_json::Map::new(),
        };
        if chosen {
            self.deliver_once(to, nudge)
        } else {
            self.deliver(to, nudge)
        }
    }

    /// As [`Nudges::deliver`], but a nudge whose id is already in `to`'s
    /// `latest.json` or processed record is not written again (see
    /// [`Nudges::send`]).
    fn deliver_once(&self, to: &AgentId, nudge: Nudge) -> Result<Delivery> {
        let same = |first: &Nudge| {
            first.from == nudge.from
                && first.kind == nudge.kind
                && first.message == nudge.message
                && first.requires_response == nudge.requires_response
                && first.in_reply_to == nudge.in_reply_to
        };
        let latest = self.latest_path(to);
        let first = match self.read_value::<Nudge>(&self.seam_key(to, &[], LATEST_FILE), &latest)? {
            ReadOutcome::Value(n) if n.id == nudge.id => Some(n),
            _ => match self.read_processed(to)?.value() {
                Some(r) if r.last.id == nudge.id => Some(r.last),
                _ => None,
            },
        };
        let earlier = match first {
            Some(first) if same(&first) => Some(Ok(first)),
            Some(_) => Some(Err(())),
            None => None,
        };
        match earlier {
            Some(Ok(sent)) => Ok(Delivery::Delivered { sent }),
            Some(Err(())) => Err(Error::IdTaken {
                id: nudge.id.clone().expect("a chosen id"),
            }),
            // Not there: deliver it (the precedence rule decides, with a
            // swap; a racing retry of the same id replaces it with itself).
            None => self.deliver(to, nudge),
        }
    }

    /// Writes an already stamped nudge to `to`'s `latest.json`, with the same
    /// precedence rule as [`Nudges::send`].
    pub(crate) fn deliver(&self, to: &AgentId, nudge: Nudge) -> Result<Delivery> {
        let latest = self.latest_path(to);
        let key = self.seam_key(to, &[], LATEST_FILE);
        self.swap(&key, &latest, |current: Current<Nudge>| {
            let pending = match current {
                Current::Missing => None,
                Current::Value(n) => Some(n),
                // A nudge this version cannot rank is not replaced blindly.
                Current::Unsupported(u) => return Err(chipset_store::Error::from(u).into()),
                Current::Quarantined(quarantined) => {
                    let sent = nudge.clone();
                    return Ok(Decision::Write(
                        nudge.clone(),
                        Delivery::RepairedCorrupt { sent, quarantined },
                    ));
                }
            };
            let record = match &pending {
                Some(_) => self.read_processed(to)?.value(),
                None => None,
            };
            Ok(match precedence(pending, record.as_ref(), &nudge.kind) {
                Verdict::Deliver => {
                    let sent = nudge.clone();
                    Decision::Write(nudge.clone(), Delivery::Delivered { sent })
                }
                Verdict::Replace(previous) => {
                    let sent = nudge.clone();
                    Decision::Write(nudge.clone(), Delivery::Replaced { sent, previous })
                }
                Verdict::Hold(pending) => Decision::Keep(Delivery::Held {
                    pending,
                    unsent: nudge.clone(),
                }),
            })
        })
    }

    /// Reads `agent`'s `latest.json` as it is: missing, corrupt or a nudge.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] on I/O failure.
    pub fn read_latest(&self, agent: &AgentId) -> Result<ReadOutcome<Nudge>> {
        self.read_value(
            &self.seam_key(agent, &[], LATEST_FILE),
            &self.latest_path(agent),
        )
    }

    /// Reads `agent`'s processed record.
    pub(super) fn read_processed(&self, agent: &AgentId) -> Result<ReadOutcome<ProcessedRecord>> {
        self.read_value(
            &self.seam_key(agent, &[], PROCESSED_FILE),
            &self.processed_path(agent),
        )
    }

    /// Polls `agent`'s nudge: what is there, and whether it was processed.
    /// A missing `latest.json` (no nudge was ever sent) is
    /// [`ReadOutcome::Missing`]; an unreadable one is
    /// [`ReadOutcome::Corrupt`], never "no nudge".
    ///
    /// A nudge counts as processed when it is the one in the processed record
    /// (same id; for id-less seed nudges, same fields). Timestamps are never
    /// used to skip a nudge, so a second nudge within one timestamp is seen.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] on I/O failure.
    pub fn receive(&self, agent: &AgentId) -> Result<ReadOutcome<Received>> {
        let nudge = match self.read_latest(agent)? {
            ReadOutcome::Value(n) => n,
            // No nudge, or `latest.json` is unreadable: not the same thing.
            ReadOutcome::Missing => return Ok(ReadOutcome::Missing),
            ReadOutcome::Corrupt(c) => return Ok(ReadOutcome::Corrupt(c)),
            ReadOutcome::Unsupported(u) => return Ok(ReadOutcome::Unsupported(u)),
        };
        Ok(ReadOutcome::Value(match self.read_processed(agent)? {
            ReadOutcome::Value(r) if r.last.is_same(&nudge) => Received::Seen(nudge),
            ReadOutcome::Value(_) | ReadOutcome::Missing => Received::New(nudge),
            ReadOutcome::Corrupt(record) => Received::Unsure { nudge, record },
            // Whether it was processed cannot be told, and the record is not ours to replace.
            ReadOutcome::Unsupported(u) => return Err(chipset_store::Error::from(u).into()),
        }))
    }

    /// Reads `agent`'s nudge the way a person or an agent reads it at a
    /// prompt: [`Nudges::receive`], then [`Nudges::mark_processed`] for a nudge
    /// to act on ([`Received::to_process`]), so it is shown as new once.
    /// Returns what [`Nudges::receive`] found; for [`Received::Unsure`]
    /// tell the reader the nudge may have been seen before.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] on I/O failure (the nudge may then be shown as new
    /// again: at least once beats never).
    pub fn read_and_mark(&self, agent: &AgentId) -> Result<ReadOutcome<Received>> {
        let received = self.receive(agent)?;
        if let ReadOutcome::Value(r) = &received
            && let Some(nudge) = r.to_process()
        {
            self.mark_processed(agent, nudge)?;
        }
        Ok(received)
    }

    /// Durably records that `agent` has processed `nudge`, so neither this
    /// process nor a restarted one processes it again. Marking the nudge
    /// already recorded is a no-op. A corrupt record is moved aside first.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] on I/O failure.
    pub fn mark_processed(&self, agent: &AgentId, nudge: &Nudge) -> Result<()> {
        let path = self.processed_path(agent);
        let key = self.seam_key(agent, &[], PROCESSED_FILE);
        let now = self.now()?;
        self.swap(&key, &path, |current: Current<ProcessedRecord>| {
            // The record's own fields from another writer stay with it.
            let (count, extra) = match current {
                Current::Value(r) if r.last.is_same(nudge) => {
                    return Ok(Decision::Keep(()));
                }
                Current::Value(r) => (r.count + 1, r.extra),
                Current::Missing | Current::Quarantined(_) => (1, serde_json::Map::new()),
                Current::Unsupported(u) => return Err(chipset_store::Error::from(u).into()),
            };
            let record = ProcessedRecord {
                last: nudge.clone(),
                processed_at: now,
                count,
                extra,
            };
            Ok(Decision::Write(record, ()))
        })
    }

    fn new_id(&self) -> NudgeId {
        NudgeId::new(String::from(SortableId::generate(
            self.state.clock().as_ref(),
        )))
        .expect("a sortable id is a valid segment")
    }
}
