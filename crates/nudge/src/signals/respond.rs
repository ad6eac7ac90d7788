//! Answers: `nudge_response`s recorded per responder beside the sender's
//! `latest.json`, and whether a recipient answered in time.

use chipset_store::{AgentId, Decision, Listing, ReadOutcome, Timestamp};

use std::collections::BTreeMap;

use super::seam::Current;
use super::{Delivery, Nudges, RESPONSES_DIR};
use crate::error::{Error, Result};
use crate::format::{Nudge, NudgeType};

impl Nudges {
    /// Answers `incoming` as `responder`, per the seed: a `nudge_response`
    /// into the sender's `latest.json`. It is also recorded durably in
    /// `nudge/{sender}/responses/{responder}.json`, one file per responder,
    /// so many agents answering one sender at once lose nothing, even when
    /// their copies in `latest.json` replace each other (or are held behind
    /// an abort). The record is written first. Returns what happened to the
    /// copy in the sender's `latest.json`; [`Delivery::nudge`] is the
    /// response as recorded.
    ///
    /// **Commit point:** the rename of the response record. Responding again
    /// to the same nudge (it has an id) with the same message is a retry:
    /// the recorded response is reused (same id and time), and delivered
    /// only if the sender's `latest.json` does not hold it already and the
    /// sender has not processed it (see [`NewNudge::with_id`](crate::NewNudge::with_id)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidSender`] when `incoming.from` is not a valid agent
    /// id; [`Error::Store`] on I/O failure before the commit point (nothing
    /// visible changed, or the store's `OutcomeUnknown`);
    /// [`Error::ResponseNotDelivered`] when the delivery after it failed;
    /// [`Error::InvalidField`] for a message longer than 64 KiB (nothing
    /// is written).
    pub fn respond(
        &self,
        responder: &AgentId,
        incoming: &Nudge,
        message: impl Into<String>,
    ) -> Result<Delivery> {
        let sender = AgentId::new(incoming.from.as_str()).map_err(|_| Error::InvalidSender {
            from: incoming.from.clone(),
        })?;
        let message = message.into();
        crate::key::check_message("message", &message)?;
        let response = Nudge {
            from: responder.as_str().to_owned(),
            kind: NudgeType::NudgeResponse,
            message,
            timestamp: self.now()?,
            requires_response: false,
            id: Some(self.new_id()),
            in_reply_to: incoming.id.clone(),
            extra: serde_json::Map::new(),
        };
        let record = self.response_path(&sender, responder);
        let key = self.seam_key(&sender, &[RESPONSES_DIR], &format!("{responder}.json"));
        let response = self.swap(&key, &record, |current: Current<Nudge>| {
            match current {
                // A retry: this answer to this nudge is recorded already.
                Current::Value(old)
                    if incoming.id.is_some()
                        && old.in_reply_to == incoming.id
                        && old.message == response.message
                        && old.kind == NudgeType::NudgeResponse =>
                {
                    return Ok(Decision::Keep(old));
                }
                // A newer answer from another process of the same responder stays.
                Current::Value(old) if old.timestamp > response.timestamp => {
                    return Ok(Decision::Keep(response.clone()));
                }
                Current::Unsupported(u) => return Err(chipset_store::Error::from(u).into()),
                _ => {}
            }
            Ok(Decision::Write(response.clone(), response.clone()))
        })?;
        if response.id.is_some() {
            self.deliver_once(&sender, response)
        } else {
            self.deliver(&sender, response)
        }
        .map_err(|e| Error::ResponseNotDelivered {
            sender: sender.clone(),
            source: Box::new(e),
        })
    }

    /// Returns who answered `sender` at or after `since`: the latest answer of
    /// each responder, sorted by responder. Includes an answer that a seed
    /// program wrote only into `latest.json`.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] on I/O failure.
    pub fn responses_since(&self, sender: &AgentId, since: Timestamp) -> Result<Listing<Nudge>> {
        let dir = self.agent_dir(sender).join_static(RESPONSES_DIR);
        let seam_dir = self.seam_dir(sender, &[RESPONSES_DIR]);
        let mut newest: BTreeMap<String, Nudge> = BTreeMap::new();
        let mut out = Listing::default();
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
        for name in self.list_at(&seam_dir, &dir)? {
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
            let Ok(key) = seam_dir.key(&name) else {
                continue;
            };
            match self.read_value::<Nudge>(&key, &path)? {
                ReadOutcome::Value(n) => keep(n, &mut newest),
                other => out.push(other),
            }
        }
        if let ReadOutcome::Value(n) = self.read_latest(sender)?
            && n.kind == NudgeType::NudgeResponse
        {
            keep(n, &mut newest);
        }
        out.items = newest.into_values().collect();
        Ok(out)
    }

    /// Returns `responder`'s latest answer to `sender` at or after `since`
    /// (for a nudge sent at `since`: whether it was answered), from its
    /// response record or, for a seed program that wrote only there,
    /// `sender`'s `latest.json`. `None` while no answer came: how long to
    /// wait before escalating is the caller's nudge interval (the witness's
    /// [`WitnessConfig`](https://docs.rs/chipset-loop/latest/chipset_loop/struct.WitnessConfig.html)
    /// holds one per agent).
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] when `responder`'s response record is unreadable
    /// (it may hold the answer); [`Error::Store`] on I/O failure.
    pub fn response_from(
        &self,
        sender: &AgentId,
        responder: &AgentId,
        since: Timestamp,
    ) -> Result<Option<Nudge>> {
        let answered =
            |n: Nudge| (n.timestamp >= since && n.from == responder.as_str()).then_some(n);
        let key = self.seam_key(sender, &[RESPONSES_DIR], &format!("{responder}.json"));
        let mut found =
            match self.read_value::<Nudge>(&key, &self.response_path(sender, responder))? {
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
        Ok(found)
    }
}
