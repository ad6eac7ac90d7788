//! Threads: the pure causal order, and [`Mail::thread`], which gathers a
//! thread through the reply index and the gate cache.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use chipset_store::{ReadOutcome, StatePath, TaskId};

use crate::MessageId;

use crate::error::{Error, Result};
use crate::format::Message;
use crate::gate::Folder;
use crate::layout::id_of;
use crate::mail::{Mail, check_id, read_message};

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

impl Mail {
    /// Returns the whole thread `id` belongs to, in causal order (every
    /// message after the one it replies to; otherwise send order): its
    /// ancestors up to the root and every reply below the root, wherever
    /// they are (inbox, archive, by-task or orphan archive).
    ///
    /// Replies are found through the reply index, and among the messages of
    /// the thread's tasks (the start message's and its ancestors') in the
    /// inboxes, `archive/` and the task's by-task archive (so a reply
    /// written or archived by another program, whatever its clock, is found
    /// before the doctor has indexed it). The inboxes and `archive/`
    /// are read through the gate cache: the cost is the task's own mail.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] when `id` does not exist; [`Error::Corrupt`]
    /// when a file on the way, or in an inbox, is unreadable.
    pub fn thread(&self, id: &MessageId) -> Result<Vec<Message>> {
        if let Some(server) = self.server() {
            return server.thread(id);
        }
        let start = self
            .found(id)?
            .ok_or_else(|| Error::NotFound { id: id.clone() })?;
        let task = start.message.phase.clone();
        let mut nodes: BTreeMap<MessageId, Message> = BTreeMap::new();
        let mut root = start.message;
        while let Some(parent) = root.in_reply_to.clone() {
            if nodes.contains_key(&parent) {
                break;
            }
            let Some(found) = self.find_with(&parent, Some(&task))? else {
                break;
            };
            nodes.insert(root.id.clone(), root);
            root = found.message;
        }
        nodes.insert(root.id.clone(), root.clone());

        // Replies the index may not know (another program wrote them, or a
        // sender crashed before its entry), among the messages of the
        // thread's tasks (the start's and its ancestors'): in the inboxes
        // and `archive/` through the gate cache, which lists only folders
        // changed since it last looked and keeps each file's parent, so only
        // the replies among the task's files are read.
        let tasks: BTreeSet<TaskId> = nodes
            .values()
            .chain([&root])
            .map(|m| m.phase.clone())
            .chain([task.clone()])
            .collect();
        let agents = self.agents()?;
        let mut unindexed: Vec<Message> = Vec::new();
        for task in &tasks {
            let mut walk = self.task_files(task);
            for agent in &agents {
                let folder = Folder::Inbox(agent.clone());
                let dir = self.layout.inbox(agent);
                // Fails closed on an unreadable file in an inbox, as before.
                for f in walk.folder(&folder, false)?.unwrap_or_default() {
                    if f.parent.is_none() {
                        continue;
                    }
                    let Some(id) = id_of(&f.name) else { continue };
                    let path = dir.join_id(&id, ".json");
                    match read_message(&self.state, &path)? {
                        ReadOutcome::Missing => {}
                        ReadOutcome::Corrupt(c) => return Err(c.into()),
                        ReadOutcome::Unsupported(u) => return Err(u.into()),
                        ReadOutcome::Value(m) => unindexed.push(check_id(&path, &id, m)?),
                    }
                }
            }
            // Replies another program archived, among the task's files
            // (another program's clock may run behind ours, so a reply's id
            // need not sort after the root's). Unreadable ones are the
            // doctor's to report. A folder the cache cannot take is listed
            // whole, and then only ids newer than the root are read.
            let archived: Option<Vec<String>> = match walk.folder(&Folder::Archive, false) {
                Ok(files) => Some(
                    files
                        .unwrap_or_default()
                        .into_iter()
                        .filter(|f| f.parent.is_some())
                        .map(|f| f.name)
                        .collect(),
                ),
                Err(Error::Corrupt(_) | Error::Unsupported(_)) => None,
                Err(e) => return Err(e),
            };
            walk.finish(&agents);
            let archive = self.layout.archive_root();
            let by_task = self.layout.by_task(task);
            let mut candidates: Vec<(StatePath, String)> = match archived {
                Some(names) => names.into_iter().map(|n| (archive.clone(), n)).collect(),
                None => self
                    .state
                    .list(&archive)?
                    .into_iter()
                    .filter(|n| id_of(n).is_some_and(|id| id > root.id))
                    .map(|n| (archive.clone(), n))
                    .collect(),
            };
            candidates.extend(
                self.state
                    .list(&by_task)?
                    .into_iter()
                    .map(|n| (by_task.clone(), n)),
            );
            for (dir, name) in candidates {
                let Some(id) = id_of(&name) else { continue };
                let path = dir.join_id(&id, ".json");
                if let Ok(ReadOutcome::Value(m)) = read_message(&self.state, &path)
                    && m.id == id
                    && m.in_reply_to.is_some()
                {
                    unindexed.push(m);
                }
            }
        }
        // Every node below the root is reached from the root downwards.
        let mut thread: BTreeMap<MessageId, Message> = BTreeMap::new();
        let mut queue = VecDeque::from([root]);
        while let Some(node) = queue.pop_front() {
            if thread.contains_key(&node.id) {
                continue;
            }
            let mut children: BTreeSet<MessageId> = self
                .replies_of(&node.id)?
                .into_iter()
                .map(|(_, c)| c)
                .collect();
            children.extend(
                unindexed
                    .iter()
                    .filter(|m| m.in_reply_to.as_ref() == Some(&node.id))
                    .map(|m| m.id.clone()),
            );
            for child in children {
                if thread.contains_key(&child) {
                    continue;
                }
                if let Some(m) = nodes.remove(&child) {
                    queue.push_back(m);
                } else if let Some(found) = self.find_with(&child, Some(&task))? {
                    queue.push_back(found.message);
                }
            }
            thread.insert(node.id.clone(), node);
        }
        // Ancestors are in the thread by construction; keep them even if an
        // index entry is missing.
        thread.extend(nodes);
        Ok(causal_order(thread.into_values().collect()))
    }
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
            group: None,
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
