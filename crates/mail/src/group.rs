//! Group mail: one message to several agents, an ordinary copy in each
//! recipient's inbox, tied together by the `group` field; and the gate's
//! rule for a request to a group (every recipient answers, or any one).

use std::collections::{BTreeMap, BTreeSet};

use chipset_store::{AgentId, ReadOutcome, SortableId, TaskId};
use serde::{Deserialize, Serialize};

use crate::MessageId;
use crate::draft::NewMessage;
use crate::error::{Error, Result};
use crate::format::{Kind, Message};
use crate::layout::Location;
use crate::mail::{Mail, read_message};

/// The most recipients one group message has (after the sender is left out).
pub(crate) const MAX_GROUP: usize = 4096;

/// When a request to a group stops holding up its task.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ExpectsReply {
    /// Every recipient must answer its copy (the default): each copy is an
    /// ordinary request in the gate.
    #[default]
    All,
    /// One answer from any recipient answers the group: the other copies
    /// leave the gate (and may be archived without a reply) once a response
    /// to one copy exists.
    Any,
}

/// The group a message is one copy of ([`Message::group`]): the group's
/// id, every recipient (sorted), and for a request the gate's rule
/// ([`Group::answered_by_any`]).
///
/// Written as an object (`{"expects": "any", "id": …, "to": […]}`) that the
/// seed's other readers ignore, as they ignore every field they do not know.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Group {
    /// The group's id (what `--id` names; no file has it).
    pub id: MessageId,
    /// Every recipient, sorted.
    pub to: Vec<AgentId>,
    /// The gate's rule, for a request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) expects: Option<ExpectsReply>,
}

impl Group {
    /// Returns `Some(true)` for a request one answer from any recipient
    /// answers ([`NewMessage::answered_by_any`]), `Some(false)` for one
    /// every recipient must answer, `None` for a notification.
    pub fn answered_by_any(&self) -> Option<bool> {
        self.expects.map(|e| e == ExpectsReply::Any)
    }

    /// Returns the id of `agent`'s copy: the group id's millisecond part and
    /// a UUID (version 4 form) made from a hash of the group id and the
    /// agent, so a retry finds the copies it already delivered, and the id
    /// keeps the seed's `{unix-ms}-{uuid}` form that other readers require.
    pub(crate) fn copy_id(&self, agent: &AgentId) -> MessageId {
        copy_id(&self.id, agent)
    }

    /// Returns true when `message` is really this group's copy for its
    /// addressee (a `group` field that does not fit its message is ignored).
    fn holds(&self, message: &Message) -> bool {
        self.to.binary_search(&message.to).is_ok() && self.copy_id(&message.to) == message.id
    }
}

fn copy_id(group: &MessageId, agent: &AgentId) -> MessageId {
    let ms = group.as_str().split_once('-').map_or("0", |(ms, _)| ms);
    // FNV-1a, 128 bits: stable across versions and platforms, unlike std's hasher.
    let mut h: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    for b in group
        .as_str()
        .bytes()
        .chain([0])
        .chain(agent.as_str().bytes())
    {
        h ^= u128::from(b);
        h = h.wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b);
    }
    // FNV's last bytes reach only the low and the top bits: a finalizer
    // that mixes every bit into every other (murmur3's) spreads them.
    let (mut hi, mut lo) = ((h >> 64) as u64, h as u64);
    lo = fmix64(lo ^ hi.rotate_left(32));
    hi = fmix64(hi ^ lo);
    let h = (u128::from(hi) << 64) | u128::from(lo);
    let uuid = (h & !(0xf << 76) & !(0b11 << 62)) | (0x4 << 76) | (0b10 << 62);
    let text = format!(
        "{ms}-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        uuid >> 96,
        (uuid >> 80) & 0xffff,
        (uuid >> 64) & 0xffff,
        (uuid >> 48) & 0xffff,
        uuid & 0xffff_ffff_ffff
    );
    MessageId::new(text).expect("digits, hyphens and hex are one safe segment")
}

/// murmur3's 64-bit finalizer.
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

impl NewMessage<Vec<AgentId>> {
    /// Returns the request to a group answered by one response from any
    /// recipient: once one copy has a response, the other copies leave
    /// [`Mail::pending_replies`] (and may be archived without a reply). A
    /// notification ignores it.
    #[must_use]
    pub fn answered_by_any(mut self) -> Self {
        self.expects = ExpectsReply::Any;
        self
    }
}

impl Mail {
    /// Sends a draft to a group: a copy, an ordinary seed message with
    /// its own id, in each recipient's inbox, every copy carrying the same
    /// [`Group`] (the group id, all recipients, and for a request the
    /// gate's rule). The sender is left out of its own group; duplicates
    /// count once. Returns each recipient's copy, by recipient name (first
    /// deliveries included on a retry); a copy's [`Message::group`] names
    /// the group.
    ///
    /// ```
    /// use chipset_mail::{Mail, NewMessage};
    /// use chipset_store::{AgentId, StateDir, TaskId};
    ///
    /// let tmp = tempfile::tempdir()?;
    /// let mail = Mail::new(StateDir::open(tmp.path())?);
    /// let lead = AgentId::new("lead")?;
    /// let team = ["ann", "bob", "lead"].map(|a| AgentId::new(a).unwrap()).to_vec();
    /// let draft = NewMessage::request(lead, team, TaskId::new("t1")?, "ship-it", "ok to ship?")
    ///     .answered_by_any();
    /// let copies = mail.send_group(&draft)?;
    /// assert_eq!(copies.len(), 2, "the sender is left out");
    /// assert_eq!(copies[0].group().unwrap().answered_by_any(), Some(true));
    /// assert_eq!(mail.pending_replies(&TaskId::new("t1")?)?.len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// The copies are sent as one [`Mail::send_batch`]: each copy's publish
    /// is its own commit point, and the batch shares the syncs. Each copy's
    /// id is derived from the group id and its recipient (the group id's
    /// millisecond and a hash of both), so with a chosen id ([`NewMessage::with_id`])
    /// a retry after a failure or a crash in the middle of the fan-out
    /// returns the copies already delivered, writes only the missing ones,
    /// and never a second copy. A retry adopts the recipients the first
    /// attempt recorded in a delivered copy, so a group resolved from a
    /// list that changed in between still completes as first sent.
    ///
    /// # Errors
    ///
    /// Refusals, with nothing written: [`Error::EmptyGroup`] (no recipient
    /// but the sender), [`Error::GroupTooLarge`], [`Error::InvalidGroupId`],
    /// [`Error::IdTaken`] for a chosen id a message to one of the
    /// recipients was sent under alone,
    /// and every refusal of [`Mail::send`] for any copy.
    /// [`Error::OutcomeUnknown`] names the **group** id when copies may
    /// have been delivered: send again with it. [`Error::PartlySent`]
    /// names the copies delivered when another copy's id was found taken
    /// at its publish (a concurrent send of the same group id to another
    /// list of recipients): a request's delivered copy holds the task's
    /// [`Mail::pending_replies`] gate all the same.
    pub fn send_group(&self, draft: &NewMessage<Vec<AgentId>>) -> Result<Vec<Message>> {
        let (to, expects) = (&draft.to, &draft.expects);
        let mut to: BTreeSet<AgentId> = to.iter().cloned().collect();
        to.remove(&draft.from);
        if to.is_empty() {
            return Err(Error::EmptyGroup);
        }
        if to.len() > MAX_GROUP {
            return Err(Error::GroupTooLarge {
                count: to.len(),
                max: MAX_GROUP,
            });
        }
        let (id, fresh) = match &draft.id {
            Some(id) if id.is_seed_form() => (id.clone(), false),
            Some(id) => return Err(Error::InvalidGroupId { id: id.clone() }),
            None => (
                MessageId::from(SortableId::generate(self.state.clock().as_ref())),
                true,
            ),
        };
        if !fresh {
            if let Some(first) = self.first_attempt(&id, &to)? {
                to = first.to.into_iter().collect();
            }
            // A message sent alone under the id to one of the recipients:
            // its copy would be a second message under the id for it.
            if let Some(found) = self.found(&id)?
                && to.contains(&found.message.to)
            {
                return Err(Error::IdTaken {
                    id,
                    location: found.location,
                });
            }
        }
        let group = Group {
            id,
            to: to.into_iter().collect(),
            expects: (draft.kind == Kind::Request).then_some(*expects),
        };
        let drafts: Vec<NewMessage> = group
            .to
            .iter()
            .map(|agent| NewMessage {
                kind: draft.kind,
                from: draft.from.clone(),
                to: agent.clone(),
                task: draft.task.clone(),
                subject: draft.subject.clone(),
                body: draft.body.clone(),
                round: draft.round,
                in_reply_to: draft.in_reply_to.clone(),
                priority: draft.priority,
                id: Some(group.copy_id(agent)),
                group: Some(group.clone()),
                fresh,
                expects: draft.expects,
            })
            .collect();
        match self.send_batch(&drafts) {
            Ok(messages) => {
                tracing::debug!(id = %group.id, copies = messages.len(), "sent to a group");
                Ok(messages)
            }
            Err(Error::OutcomeUnknown { source, .. }) => Err(Error::OutcomeUnknown {
                ids: vec![group.id],
                source,
            }),
            Err(e) => Err(e),
        }
    }

    /// Refuses a draft sent alone under a chosen id that a group was sent
    /// under (the group's copy to the draft's addressee exists): it would
    /// be a second copy. [`Error::IdTaken`], naming where that copy is.
    /// Checked before the send, not with it: a group and a message alone
    /// sent under one id at the same moment can both be delivered.
    pub(crate) fn refuse_group_ids(&self, drafts: &[NewMessage]) -> Result<()> {
        for d in drafts {
            // Only a seed-form id names a group ([`Error::InvalidGroupId`]).
            let Some(id) =
                d.id.as_ref()
                    .filter(|id| d.group.is_none() && id.is_seed_form())
            else {
                continue;
            };
            if let Some(location) = self.group_copy(id, d)? {
                return Err(Error::IdTaken {
                    id: id.clone(),
                    location,
                });
            }
        }
        Ok(())
    }

    /// Where the copy of group `id` to `draft`'s addressee is, if it is
    /// (wherever it moved: any task's by-task archive included). In a
    /// directory only where a copy to that addressee can be: its inbox,
    /// then `archive/`, the orphans and the by-task archives, in the order
    /// a message moves (so a moving copy is not missed), not every inbox.
    fn group_copy(&self, id: &MessageId, draft: &NewMessage) -> Result<Option<Location>> {
        let copy = copy_id(id, &draft.to);
        let of_group = |m: &Message| m.group.as_ref().is_some_and(|g| g.id == *id);
        if self.server().is_some() {
            let found = self.found(&copy)?;
            return Ok(found.filter(|f| of_group(&f.message)).map(|f| f.location));
        }
        let mut places = vec![
            Location::Inbox(draft.to.clone()),
            Location::Archive,
            Location::Orphan,
        ];
        places.extend(draft.task.clone().map(Location::ByTask));
        for dir in self.state.list(&self.layout.by_task_root())? {
            if let Ok(task) = TaskId::new(dir.as_str())
                && draft.task.as_ref() != Some(&task)
            {
                places.push(Location::ByTask(task));
            }
        }
        for location in places {
            let path = self.layout.file(&location, &copy);
            if let ReadOutcome::Value(m) = read_message(&self.state, &path)?
                && of_group(&m)
            {
                return Ok(Some(location));
            }
        }
        Ok(None)
    }

    /// Returns the group a first attempt with this id recorded in a copy it
    /// delivered to one of `to`, if any.
    fn first_attempt(&self, id: &MessageId, to: &BTreeSet<AgentId>) -> Result<Option<Group>> {
        for agent in to {
            if let Some(found) = self.found(&copy_id(id, agent))?
                && let Some(group) = found.message.group
                && group.id == *id
            {
                return Ok(Some(*group));
            }
        }
        Ok(None)
    }

    /// Returns true when `request` is a copy of a request answered by any
    /// one recipient ([`NewMessage::answered_by_any`]) and another
    /// copy has a response. Fails closed: only a response found counts,
    /// never a copy that is missing.
    pub(crate) fn answered_by_group(&self, request: &Message) -> Result<bool> {
        self.group_answered(request, &BTreeSet::new())
    }

    fn group_answered(&self, request: &Message, open: &BTreeSet<&MessageId>) -> Result<bool> {
        let Some(group) = &request.group else {
            return Ok(false);
        };
        if group.expects != Some(ExpectsReply::Any) || !group.holds(request) {
            return Ok(false);
        }
        for agent in &group.to {
            let sibling = group.copy_id(agent);
            // A copy still open has no response (the gate just looked).
            if sibling == request.id || open.contains(&sibling) {
                continue;
            }
            if self.has_reply(&sibling)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The gate's group rule: takes off `pending` each copy of a request
    /// answered by any one recipient once another of its copies has a
    /// response. Looks once per group, at the copies not themselves
    /// pending.
    pub(crate) fn settle_groups(&self, pending: &mut Vec<Message>) -> Result<()> {
        if pending.iter().all(|q| q.group.is_none()) {
            return Ok(());
        }
        let open: BTreeSet<&MessageId> = pending.iter().map(|q| &q.id).collect();
        let mut answered: BTreeMap<MessageId, bool> = BTreeMap::new();
        for q in pending.iter() {
            let Some(group) = &q.group else { continue };
            if answered.contains_key(&group.id) {
                continue;
            }
            let verdict = self.group_answered(q, &open)?;
            if verdict || group.holds(q) {
                answered.insert(group.id.clone(), verdict);
            }
        }
        pending.retain(|q| {
            !matches!(&q.group, Some(g) if g.expects == Some(ExpectsReply::Any)
                && g.holds(q)
                && answered.get(&g.id).copied().unwrap_or(false))
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy's id keeps the seed's form (nubos-pilot's `ID_RE`) and the
    /// group's millisecond, differs per agent, and never changes.
    #[test]
    fn copy_ids_are_stable_seed_ids() {
        let g = MessageId::new("1795408569000-7a703292-f1d1-4900-b635-8fd9f1df7f88").unwrap();
        let a = copy_id(&g, &AgentId::new("ann").unwrap());
        let b = copy_id(&g, &AgentId::new("bob").unwrap());
        assert_ne!(a, b);
        assert_eq!(a, copy_id(&g, &AgentId::new("ann").unwrap()));
        for id in [&a, &b] {
            let s = id.as_str().parse::<SortableId>().unwrap();
            assert_eq!(s.unix_ms(), 1_795_408_569_000);
            let uuid = id.as_str().split_once('-').unwrap().1;
            assert!(
                uuid.bytes()
                    .all(|c| c == b'-' || c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
            );
            assert_eq!(uuid.as_bytes()[14], b'4', "version 4 form: {uuid}");
        }
        // Every part of the UUID depends on the agent (a weak hash left
        // the middle groups equal across a group's copies).
        let parts: Vec<Vec<String>> = ["a1", "a2", "a3", "a4"]
            .iter()
            .map(|n| {
                let id = copy_id(&g, &AgentId::new(*n).unwrap());
                id.as_str().split('-').map(str::to_owned).collect()
            })
            .collect();
        for i in 1..6 {
            let distinct: BTreeSet<&String> = parts.iter().map(|p| &p[i]).collect();
            assert!(distinct.len() > 1, "part {i} is the same for every agent");
        }
        // Pinned: another derivation would make a retry after an upgrade
        // send second copies.
        assert_eq!(
            a.as_str(),
            "1795408569000-a6b9f848-aa9c-427b-ad1e-e9b77866bea9"
        );
    }
}
