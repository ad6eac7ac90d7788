//! Causal order of a thread: pure.

use std::collections::{BTreeMap, BTreeSet};

use crate::MessageId;

use crate::format::Message;

/// Orders messages so that every message comes after the one it replies to,
/// and otherwise by id (which is send order for chipset's ids). Parent links
/// that form a cycle (only a hand-edited file can make one) are broken by id order.
pub(crate) fn causal_order(messages: Vec<Message>) -> Vec<Message> {
    let mut by_id: BTreeMap<MessageId, Message> =
        messages.into_iter().map(|m| (m.id.clone(), m)).collect();
    let mut children: BTreeMap<MessageId, Vec<MessageId>> = BTreeMap::new();
    let mut ready = BTreeSet::new();
    for m in by_id.values() {
        match m.in_reply_to.as_ref().filter(|p| by_id.contains_key(*p)) {
            Some(p) => children.entry(p.clone()).or_default().push(m.id.clone()),
            None => {
                ready.insert(m.id.clone());
            }
        }
    }
    let mut out = Vec::with_capacity(by_id.len());
    loop {
        let next = match ready.pop_first() {
            Some(id) => id,
            // Only a cycle is left: take its smallest id.
            None => match by_id.keys().next() {
                Some(id) => id.clone(),
                None => break,
            },
        };
        let Some(m) = by_id.remove(&next) else {
            continue;
        };
        for child in children.remove(&next).unwrap_or_default() {
            if by_id.contains_key(&child) {
                ready.insert(child);
            }
        }
        out.push(m);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Kind, MailPriority};
    use chipset_store::{AgentId, TaskId, Timestamp};

    fn msg(id: &str, parent: Option<&str>) -> Message {
        Message {
            id: MessageId::new(id).unwrap(),
            from: AgentId::new("a").unwrap(),
            to: AgentId::new("b").unwrap(),
            phase: TaskId::new("t").unwrap(),
            round: None,
            kind: Kind::Notify,
            subject: "s".into(),
            body: String::new(),
            expects_reply: false,
            in_reply_to: parent.map(|p| MessageId::new(p).unwrap()),
            created_at: Timestamp::EPOCH,
            priority: MailPriority::Normal,
            schema: None,
        }
    }

    fn ids(v: &[Message]) -> Vec<&str> {
        v.iter().map(|m| m.id.as_str()).collect()
    }

    #[test]
    fn parents_come_first_even_when_ids_disagree() {
        // A reply from a process whose clock ran behind has a smaller id.
        let order = causal_order(vec![
            msg("3", None),
            msg("1", Some("3")),
            msg("2", Some("1")),
        ]);
        assert_eq!(ids(&order), ["3", "1", "2"]);
    }

    #[test]
    fn siblings_by_id_and_cycles_terminate() {
        let order = causal_order(vec![
            msg("1", None),
            msg("5", Some("1")),
            msg("4", Some("1")),
            msg("7", Some("8")),
            msg("8", Some("7")),
        ]);
        assert_eq!(ids(&order), ["1", "4", "5", "7", "8"]);
    }
}
