//! Latest-wins signals: sending, receiving, responding (the I/O shell).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use chipset_store::{
    AgentId, Corruption, Decision, DoctorMode, ReadOutcome, Report, SortableId, StateDir,
    StatePath, Timestamp, Unsupported,
};

use crate::doctor;
use crate::error::{Error, Result};
use crate::format::{Nudge, NudgeId, NudgeType, ProcessedRecord};
use crate::transition::{Verdict, precedence};

/// The file name of an agent's current nudge.
pub const LATEST_FILE: &str = "latest.json";
/// The file name of an agent's processed record.
pub const PROCESSED_FILE: &str = "processed.json";
/// The directory, beside `latest.json`, of per-responder answers.
pub const RESPONSES_DIR: &str = "responses";
/// The seed's default nudge interval: 60 seconds.
pub const DEFAULT_NUDGE_INTERVAL: Duration = Duration::from_secs(60);

/// How senders judge answers: the nudge interval, per agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NudgeConfig {
    /// How long a sender waits for an answer before it is overdue, unless
    /// `intervals` names the recipient. Default 60 s.
    pub default_interval: Duration,
    /// Per-recipient intervals.
    pub intervals: BTreeMap<AgentId, Duration>,
}

impl Default for NudgeConfig {
    fn default() -> Self {
        NudgeConfig {
            default_interval: DEFAULT_NUDGE_INTERVAL,
            intervals: BTreeMap::new(),
        }
    }
}

impl NudgeConfig {
    /// Returns this config with `agent`'s interval set to `interval`.
    #[must_use]
    pub fn with_interval(mut self, agent: AgentId, interval: Duration) -> Self {
        self.intervals.insert(agent, interval);
        self
    }

    /// Returns the nudge interval for `agent`.
    pub fn interval_for(&self, agent: &AgentId) -> Duration {
        self.intervals
            .get(agent)
            .copied()
            .unwrap_or(self.default_interval)
    }
}

/// A nudge to send: the fields the sender chooses. The timestamp and id are
/// filled in by [`Nudges::send`].
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
}

impl NewNudge {
    /// Returns a draft that does not require a response.
    pub fn new(from: AgentId, kind: NudgeType, message: impl Into<String>) -> Self {
        NewNudge {
            from,
            kind,
            message: message.into(),
            requires_response: false,
        }
    }

    /// Returns this draft, requiring a response.
    #[must_use]
    pub fn requiring_response(mut self) -> Self {
        self.requires_response = true;
        self
    }
}

/// What a send did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
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
    /// Returns what happened, as one word for output and logs:
    /// `delivered`, `replaced`, `held` or `repaired-corrupt`.
    pub fn outcome(&self) -> &'static str {
        match self {
            Delivery::Delivered { .. } => "delivered",
            Delivery::Replaced { .. } => "replaced",
            Delivery::Held { .. } => "held",
            Delivery::RepairedCorrupt { .. } => "repaired-corrupt",
        }
    }

    /// Returns the nudge written, or `None` when held.
    pub fn sent(&self) -> Option<&Nudge> {
        match self {
            Delivery::Delivered { sent }
            | Delivery::Replaced { sent, .. }
            | Delivery::RepairedCorrupt { sent, .. } => Some(sent),
            Delivery::Held { .. } => None,
        }
    }

    /// Returns true when the nudge was not written.
    pub fn is_held(&self) -> bool {
        matches!(self, Delivery::Held { .. })
    }
}

/// What an agent found in its `latest.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Received {
    /// No nudge was ever sent (no file).
    Empty,
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
    /// `latest.json` is there but unreadable: not the same as no nudge.
    Corrupt(Corruption),
    /// `latest.json` holds a value this version does not know (a newer nudge
    /// type or format): not the same as no nudge, and not corrupt.
    Unsupported(Unsupported),
}

impl Received {
    /// For [`Received::Unsure`], a line for the reader: the processed record
    /// was unreadable (and is moved aside when the nudge is marked), so this
    /// nudge may have been seen before.
    pub fn doubt(&self) -> Option<String> {
        match self {
            Received::Unsure { record, .. } => Some(format!(
                "the processed record was unreadable ({}) and was moved aside; \
                 this nudge may have been seen before",
                record.reason
            )),
            _ => None,
        }
    }

    /// Returns the nudge to act on: [`Received::New`] or [`Received::Unsure`].
    pub fn to_process(&self) -> Option<&Nudge> {
        match self {
            Received::New(n) | Received::Unsure { nudge: n, .. } => Some(n),
            _ => None,
        }
    }
}

/// What [`Nudges::respond`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Responded {
    /// The response, as recorded in `responses/{responder}.json`.
    pub response: Nudge,
    /// What happened to its copy in the sender's `latest.json`.
    pub delivery: Delivery,
}

/// The answers a sender has received.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Responses {
    /// The latest answer of each responder, by responder id.
    pub answered: Vec<Nudge>,
    /// Response records that could not be read (a responder may be hidden behind each).
    pub corrupt: Vec<Corruption>,
    /// Response records holding values this version does not know (left in place).
    pub unsupported: Vec<Unsupported>,
}

impl Responses {
    /// Returns the responders' ids.
    pub fn responders(&self) -> impl Iterator<Item = &str> {
        self.answered.iter().map(|n| n.from.as_str())
    }
}

/// Whether a recipient answered a nudge sent at a given time.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResponseStatus {
    /// It answered at `at`.
    Answered {
        /// When the answer was written.
        at: Timestamp,
        /// The answer.
        response: Nudge,
    },
    /// No answer yet, and the interval has not run out.
    Waiting {
        /// When it will be overdue.
        deadline: Timestamp,
    },
    /// No answer, and the interval has run out: escalate.
    Overdue {
        /// When it became overdue.
        deadline: Timestamp,
    },
}

/// Cheap counts for a status screen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NudgeStatus {
    /// Agents with a nudge directory.
    pub agents: usize,
    /// Agents whose latest nudge is not processed yet.
    pub unprocessed: usize,
    /// Of those, how many are `abort`s.
    pub pending_aborts: usize,
    /// Unreadable `latest.json` or `processed.json` files.
    pub corrupt: usize,
    /// `latest.json` or `processed.json` files holding values this version
    /// does not know.
    pub unsupported: usize,
}

/// The signal channel: `nudge/{agent}/latest.json` and its companions.
///
/// Cheap to clone. See the crate docs for the protocol.
#[derive(Debug, Clone)]
pub struct Nudges {
    state: StateDir,
    config: NudgeConfig,
}

impl Nudges {
    /// Returns the channel on `state` with the default config.
    pub fn new(state: StateDir) -> Self {
        Self::with_config(state, NudgeConfig::default())
    }

    /// Returns the channel on `state` with `config`.
    pub fn with_config(state: StateDir, config: NudgeConfig) -> Self {
        Nudges { state, config }
    }

    /// Returns the state root.
    pub fn state(&self) -> &StateDir {
        &self.state
    }

    /// Returns the config.
    pub fn config(&self) -> &NudgeConfig {
        &self.config
    }

    /// Returns `nudge/{agent}/`.
    pub fn agent_dir(&self, agent: &AgentId) -> StatePath {
        self.state.channel(crate::NUDGE_CHANNEL).join_id(agent, "")
    }

    /// Returns `nudge/{agent}/latest.json`.
    pub fn latest_path(&self, agent: &AgentId) -> StatePath {
        self.agent_dir(agent).join_static(LATEST_FILE)
    }

    /// Returns `nudge/{agent}/processed.json`.
    pub fn processed_path(&self, agent: &AgentId) -> StatePath {
        self.agent_dir(agent).join_static(PROCESSED_FILE)
    }

    /// Returns `nudge/{sender}/responses/{responder}.json`.
    pub fn response_path(&self, sender: &AgentId, responder: &AgentId) -> StatePath {
        self.agent_dir(sender)
            .join_static(RESPONSES_DIR)
            .join_id(responder, ".json")
    }

    /// Sends a nudge to `to`: stamps it with the time and a fresh id and
    /// durably replaces `to`'s `latest.json`, unless an unprocessed `abort`
    /// is there and this is not an abort (see [`NudgeType::holds_against`]).
    ///
    /// The check and the replace happen under the recipient's lock, so of
    /// many concurrent senders each sees the one before it, and the reader
    /// always sees one whole nudge.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the lock, a read or the write fails (then
    /// nothing was written, unless only the final directory sync failed:
    /// the new nudge is then in place, so re-read before sending again).
    pub fn send(&self, to: &AgentId, draft: NewNudge) -> Result<Delivery> {
        let nudge = Nudge {
            from: draft.from.into_string(),
            kind: draft.kind,
            message: draft.message,
            timestamp: self.state.now(),
            requires_response: draft.requires_response,
            id: Some(self.new_id()),
            in_reply_to: None,
            extra: serde_json::Map::new(),
        };
        self.deliver(to, nudge)
    }

    /// Sends a nudge under a caller-chosen id, which makes the send safe to
    /// retry (the store's idempotent-retry rule): when `to`'s `latest.json`
    /// holds a nudge with this id, or it is the last one `to` processed, and
    /// its content is the same (every field but the timestamp), that first
    /// delivery is returned as [`Delivery::Delivered`] and nothing is
    /// written; other content is [`Error::IdConflict`]. A retry is
    /// recognised only while the first delivery is in one of those two
    /// places: a signal replaced by a later nudge before it was processed is
    /// gone, and sending again delivers it again.
    ///
    /// **Commit point** (of every send): the rename of the new `latest.json`
    /// under the recipient's lock; a failed sync after it is the store's
    /// [`OutcomeUnknown`](chipset_store::Error::OutcomeUnknown).
    ///
    /// # Errors
    ///
    /// As [`Nudges::send`], and [`Error::IdConflict`].
    pub fn send_with_id(&self, to: &AgentId, draft: NewNudge, id: NudgeId) -> Result<Delivery> {
        let nudge = Nudge {
            from: draft.from.into_string(),
            kind: draft.kind,
            message: draft.message,
            timestamp: self.state.now(),
            requires_response: draft.requires_response,
            id: Some(id),
            in_reply_to: None,
            extra: serde_json::Map::new(),
        };
        self.deliver_once(to, nudge)
    }

    /// As [`Nudges::deliver`], but a nudge whose id is already in `to`'s
    /// `latest.json` or processed record is not written again (see
    /// [`Nudges::send_with_id`]).
    fn deliver_once(&self, to: &AgentId, nudge: Nudge) -> Result<Delivery> {
        let same = |first: &Nudge| {
            first.from == nudge.from
                && first.kind == nudge.kind
                && first.message == nudge.message
                && first.requires_response == nudge.requires_response
                && first.in_reply_to == nudge.in_reply_to
        };
        let latest = self.latest_path(to);
        let processed = self.processed_path(to);
        let earlier = self.state.update(&latest, |current: ReadOutcome<Nudge>| {
            let first = match current {
                ReadOutcome::Value(n) if n.id == nudge.id => Some(n),
                _ => match self.state.read_json::<ProcessedRecord>(&processed)?.value() {
                    Some(r) if r.last.id == nudge.id => Some(r.last),
                    _ => None,
                },
            };
            Ok::<_, Error>(match first {
                Some(first) if same(&first) => Decision::Keep(Some(Ok(first))),
                Some(_) => Decision::Keep(Some(Err(()))),
                None => Decision::Keep(None),
            })
        })?;
        match earlier {
            Some(Ok(sent)) => Ok(Delivery::Delivered { sent }),
            Some(Err(())) => Err(Error::IdConflict {
                id: nudge.id.clone().expect("a chosen id"),
            }),
            // Not there: deliver it (the precedence rule decides, under the
            // lock again; a racing retry of the same id replaces it with itself).
            None => self.deliver(to, nudge),
        }
    }

    /// Writes an already stamped nudge to `to`'s `latest.json`, with the same
    /// precedence rule as [`Nudges::send`]. For relaying nudges made elsewhere.
    ///
    /// # Errors
    ///
    /// As [`Nudges::send`].
    pub fn deliver(&self, to: &AgentId, nudge: Nudge) -> Result<Delivery> {
        let latest = self.latest_path(to);
        let processed = self.processed_path(to);
        self.state.update(&latest, |current: ReadOutcome<Nudge>| {
            let pending = match current {
                ReadOutcome::Missing => None,
                ReadOutcome::Value(n) => Some(n),
                // A nudge this version cannot rank is not replaced blindly.
                ReadOutcome::Unsupported(u) => return Err(chipset_store::Error::from(u).into()),
                ReadOutcome::Corrupt(_) => {
                    let quarantined = self.state.quarantine(&latest)?;
                    let sent = nudge.clone();
                    return Ok(Decision::Write(
                        nudge,
                        Delivery::RepairedCorrupt { sent, quarantined },
                    ));
                }
            };
            let record = match &pending {
                Some(_) => self.state.read_json::<ProcessedRecord>(&processed)?.value(),
                None => None,
            };
            Ok::<_, Error>(match precedence(pending, record.as_ref(), &nudge.kind) {
                Verdict::Deliver => {
                    let sent = nudge.clone();
                    Decision::Write(nudge, Delivery::Delivered { sent })
                }
                Verdict::Replace(previous) => {
                    let sent = nudge.clone();
                    Decision::Write(nudge, Delivery::Replaced { sent, previous })
                }
                Verdict::Hold(pending) => Decision::Keep(Delivery::Held {
                    pending,
                    unsent: nudge,
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
        Ok(self.state.read_json(&self.latest_path(agent))?)
    }

    /// Reads `agent`'s processed record.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] on I/O failure.
    pub fn processed(&self, agent: &AgentId) -> Result<ReadOutcome<ProcessedRecord>> {
        Ok(self.state.read_json(&self.processed_path(agent))?)
    }

    /// Polls `agent`'s nudge: what is there, and whether it was processed.
    ///
    /// A nudge counts as processed when it is the one in the processed record
    /// (same id; for id-less seed nudges, same fields). Timestamps are never
    /// used to skip a nudge, so a second nudge within one timestamp is seen.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] on I/O failure.
    pub fn receive(&self, agent: &AgentId) -> Result<Received> {
        let nudge = match self.read_latest(agent)? {
            ReadOutcome::Missing => return Ok(Received::Empty),
            ReadOutcome::Corrupt(c) => return Ok(Received::Corrupt(c)),
            ReadOutcome::Unsupported(u) => return Ok(Received::Unsupported(u)),
            ReadOutcome::Value(n) => n,
        };
        Ok(match self.processed(agent)? {
            ReadOutcome::Value(r) if r.last.is_same(&nudge) => Received::Seen(nudge),
            ReadOutcome::Value(_) | ReadOutcome::Missing => Received::New(nudge),
            ReadOutcome::Corrupt(record) => Received::Unsure { nudge, record },
            // Whether it was processed cannot be told, and the record is not ours to replace.
            ReadOutcome::Unsupported(u) => return Err(chipset_store::Error::from(u).into()),
        })
    }

    /// Reads `agent`'s nudge the way a person or an agent reads it at a
    /// prompt: [`Nudges::receive`], then [`Nudges::mark_processed`] for a nudge
    /// to act on ([`Received::to_process`]), so it is shown as new once.
    /// Returns what [`Nudges::receive`] found; for [`Received::Unsure`]
    /// [`Received::doubt`] says what to tell the reader.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] on I/O failure (the nudge may then be shown as new
    /// again: at least once beats never).
    pub fn read_and_mark(&self, agent: &AgentId) -> Result<Received> {
        let received = self.receive(agent)?;
        if let Some(nudge) = received.to_process() {
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
        let now = self.state.now();
        self.state
            .update(&path, |current: ReadOutcome<ProcessedRecord>| {
                // The record's own fields from another writer stay with it.
                let (count, extra) = match current {
                    ReadOutcome::Value(r) if r.last.is_same(nudge) => {
                        return Ok(Decision::Keep(()));
                    }
                    ReadOutcome::Value(r) => (r.count + 1, r.extra),
                    ReadOutcome::Missing => (1, serde_json::Map::new()),
                    ReadOutcome::Corrupt(_) => {
                        self.state.quarantine(&path)?;
                        (1, serde_json::Map::new())
                    }
                    ReadOutcome::Unsupported(u) => return Err(chipset_store::Error::from(u).into()),
                };
                let record = ProcessedRecord {
                    last: nudge.clone(),
                    processed_at: now,
                    count,
                    extra,
                };
                Ok::<_, Error>(Decision::Write(record, ()))
            })
    }

    /// Answers `incoming` as `responder`, per the seed: a `nudge_response`
    /// into the sender's `latest.json`. It is also recorded durably in
    /// `nudge/{sender}/responses/{responder}.json`, one file per responder,
    /// so many agents answering one sender at once lose nothing, even when
    /// their copies in `latest.json` replace each other (or are held behind
    /// an abort). The record is written first.
    ///
    /// **Commit point:** the rename of the response record. Responding again
    /// to the same nudge (it has an id) with the same message is a retry:
    /// the recorded response is reused (same id and time), and delivered
    /// only if the sender's `latest.json` does not hold it already and the
    /// sender has not processed it (see [`Nudges::send_with_id`]).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidSender`] when `incoming.from` is not a valid agent
    /// id; [`Error::Store`] on I/O failure before the commit point (nothing
    /// visible changed, or the store's `OutcomeUnknown`);
    /// [`Error::ResponseNotDelivered`] when the delivery after it failed.
    pub fn respond(
        &self,
        responder: &AgentId,
        incoming: &Nudge,
        message: impl Into<String>,
    ) -> Result<Responded> {
        let sender = AgentId::new(incoming.from.as_str()).map_err(|_| Error::InvalidSender {
            from: incoming.from.clone(),
        })?;
        let response = Nudge {
            from: responder.as_str().to_owned(),
            kind: NudgeType::NudgeResponse,
            message: message.into(),
            timestamp: self.state.now(),
            requires_response: false,
            id: Some(self.new_id()),
            in_reply_to: incoming.id.clone(),
            extra: serde_json::Map::new(),
        };
        let record = self.response_path(&sender, responder);
        let response = self.state.update(&record, |current: ReadOutcome<Nudge>| {
            match current {
                // A retry: this answer to this nudge is recorded already.
                ReadOutcome::Value(old)
                    if incoming.id.is_some()
                        && old.in_reply_to == incoming.id
                        && old.message == response.message
                        && old.kind == NudgeType::NudgeResponse =>
                {
                    return Ok(Decision::Keep(old));
                }
                // A newer answer from another process of the same responder stays.
                ReadOutcome::Value(old) if old.timestamp > response.timestamp => {
                    return Ok(Decision::Keep(response.clone()));
                }
                ReadOutcome::Corrupt(_) => {
                    self.state.quarantine(&record)?;
                }
                ReadOutcome::Unsupported(u) => return Err(chipset_store::Error::from(u).into()),
                _ => {}
            }
            Ok::<_, Error>(Decision::Write(response.clone(), response.clone()))
        })?;
        let delivery = if response.id.is_some() {
            self.deliver_once(&sender, response.clone())
        } else {
            self.deliver(&sender, response.clone())
        }
        .map_err(|e| Error::ResponseNotDelivered {
            sender: sender.clone(),
            source: Box::new(e),
        })?;
        Ok(Responded { response, delivery })
    }

    /// Returns who answered `sender` at or after `since`: the latest answer of
    /// each responder, sorted by responder. Includes an answer that a seed
    /// program wrote only into `latest.json`.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] on I/O failure.
    pub fn responses_since(&self, sender: &AgentId, since: Timestamp) -> Result<Responses> {
        let dir = self.agent_dir(sender).join_static(RESPONSES_DIR);
        let mut newest: BTreeMap<String, Nudge> = BTreeMap::new();
        let mut out = Responses::default();
        let keep = |n: Nudge, newest: &mut BTreeMap<String, Nudge>| {
            if n.timestamp < since {
                return;
            }
            match newest.get(&n.from) {
                Some(old) if old.timestamp >= n.timestamp => {}
                _ => {
                    newest.insert(n.from.clone(), n);
                }
            }
        };
        for name in self.state.list(&dir)? {
            // A name that is not one safe segment was not written by a
            // responder (whose file is named by its id): skipped, as a
            // name without `.json` is.
            let Some(path) = name
                .ends_with(".json")
                .then(|| dir.join(&name).ok())
                .flatten()
            else {
                continue;
            };
            match self.state.read_json::<Nudge>(&path)? {
                ReadOutcome::Value(n) => keep(n, &mut newest),
                ReadOutcome::Corrupt(c) => out.corrupt.push(c),
                ReadOutcome::Unsupported(u) => out.unsupported.push(u),
                ReadOutcome::Missing => {}
            }
        }
        if let ReadOutcome::Value(n) = self.read_latest(sender)?
            && n.kind == NudgeType::NudgeResponse
        {
            keep(n, &mut newest);
        }
        out.answered = newest.into_values().collect();
        Ok(out)
    }

    /// For a nudge that `sender` sent to `recipient` at `sent_at`: answered
    /// (an answer from `recipient` at or after `sent_at`), still waiting, or
    /// overdue once the recipient's nudge interval
    /// ([`NudgeConfig::interval_for`]) has passed on the clock.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] when `recipient`'s response record is unreadable
    /// (it may hold the answer); [`Error::Store`] on I/O failure.
    pub fn response_status(
        &self,
        sender: &AgentId,
        recipient: &AgentId,
        sent_at: Timestamp,
    ) -> Result<ResponseStatus> {
        let answered =
            |n: Nudge| (n.timestamp >= sent_at && n.from == recipient.as_str()).then_some(n);
        let mut found = match self
            .state
            .read_json::<Nudge>(&self.response_path(sender, recipient))?
        {
            ReadOutcome::Value(n) => answered(n),
            ReadOutcome::Missing => None,
            ReadOutcome::Corrupt(c) => return Err(Error::Corrupt(c)),
            ReadOutcome::Unsupported(u) => return Err(chipset_store::Error::from(u).into()),
        };
        if found.is_none()
            && let ReadOutcome::Value(n) = self.read_latest(sender)?
            && n.kind == NudgeType::NudgeResponse
        {
            found = answered(n);
        }
        let deadline = sent_at.add(self.config.interval_for(recipient));
        Ok(match found {
            Some(response) => ResponseStatus::Answered {
                at: response.timestamp,
                response,
            },
            None if self.state.now() >= deadline => ResponseStatus::Overdue { deadline },
            None => ResponseStatus::Waiting { deadline },
        })
    }

    /// Returns the agents that have a nudge directory, sorted. Plain files and
    /// names that are not valid agent ids are skipped (the doctor reports them).
    ///
    /// # Errors
    ///
    /// [`Error::Store`] on I/O failure.
    pub fn agents(&self) -> Result<Vec<AgentId>> {
        let dir = self.state.channel(crate::NUDGE_CHANNEL);
        Ok(self
            .state
            .list_dirs(&dir)?
            .into_iter()
            .filter_map(|name| AgentId::new(name).ok())
            .collect())
    }

    /// Returns counts for a status screen; reads two small files per agent.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] on I/O failure.
    pub fn status(&self) -> Result<NudgeStatus> {
        let mut s = NudgeStatus::default();
        for agent in self.agents()? {
            s.agents += 1;
            match self.receive(&agent) {
                Ok(Received::New(n) | Received::Unsure { nudge: n, .. }) => {
                    s.unprocessed += 1;
                    if n.kind.urgency() == crate::Urgency::Terminal {
                        s.pending_aborts += 1;
                    }
                }
                Ok(Received::Corrupt(_)) => s.corrupt += 1,
                Ok(Received::Unsupported(_)) => s.unsupported += 1,
                Ok(Received::Empty | Received::Seen(_)) => {}
                // An unsupported processed record: counted below.
                Err(Error::Store(chipset_store::Error::Unsupported(_))) => {}
                Err(e) => return Err(e),
            }
            match self.processed(&agent)? {
                ReadOutcome::Corrupt(_) => s.corrupt += 1,
                ReadOutcome::Unsupported(_) => s.unsupported += 1,
                ReadOutcome::Missing | ReadOutcome::Value(_) => {}
            }
        }
        Ok(s)
    }

    /// Scans every agent's `latest.json`, `processed.json` and response
    /// records; reports unreadable files and stray names, and with
    /// [`DoctorMode::Fix`] quarantines the unreadable ones (through the
    /// store's checked quarantine, under their locks). Findings are coded
    /// `nudge-corrupt`, `nudge-unsupported` and `nudge-stray`.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] on I/O failure.
    pub fn doctor(&self, mode: DoctorMode) -> Result<Report> {
        let mut report = Report::new(mode);
        let area = doctor::Area::Nudge;
        let root = self.state.channel(crate::NUDGE_CHANNEL);
        // Real directories only: a symlink (or a file) in their place is a
        // stray to report, not a directory to follow.
        let dirs = self.state.list_dirs(&root)?;
        for name in self.state.list(&root)? {
            let Ok(agent) = AgentId::new(name.as_str()) else {
                report
                    .findings
                    .push(area.stray(&root.as_path().join(&name)));
                continue;
            };
            let dir = self.agent_dir(&agent);
            if dirs.binary_search(&name).is_err() {
                report.findings.push(area.stray(&dir));
                continue;
            }
            for file in [LATEST_FILE, PROCESSED_FILE] {
                let path = dir.join_static(file);
                let lock = self.state.lock_for(&path)?;
                if file == LATEST_FILE {
                    doctor::check_file::<Nudge>(&self.state, area, &path, &lock, &mut report)?;
                } else {
                    doctor::check_file::<ProcessedRecord>(
                        &self.state,
                        area,
                        &path,
                        &lock,
                        &mut report,
                    )?;
                }
            }
            let responses = dir.join_static(RESPONSES_DIR);
            for name in self.state.list(&responses)? {
                let Ok(path) = responses.join(&name) else {
                    report
                        .findings
                        .push(area.stray(&responses.as_path().join(&name)));
                    continue;
                };
                if !name.ends_with(".json") || self.state.stat(&path)?.is_some_and(|m| m.is_dir()) {
                    report.findings.push(area.stray(&path));
                    continue;
                }
                let lock = self.state.lock_for(&path)?;
                doctor::check_file::<Nudge>(&self.state, area, &path, &lock, &mut report)?;
            }
        }
        Ok(report)
    }

    fn new_id(&self) -> NudgeId {
        NudgeId::new(SortableId::generate(self.state.clock().as_ref()).into_string())
            .expect("a sortable id is a valid segment")
    }
}
