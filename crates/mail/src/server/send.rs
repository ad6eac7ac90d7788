//! Sending on a server: each send or batch one transaction.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use chipset_backend::{MAX_VALUE, Version};
use chipset_store::{SortableId, StateDir, Timestamp};

use super::{IdRecord, Op, Seam, Server, failure};
use crate::MessageId;
use crate::draft::{NewMessage, check_draft, check_parent, to_message};
use crate::error::{Error, Result};
use crate::format::{Kind, ManifestEvent, Message, ReplyMarker};
use crate::layout::{Location, marker_name};
use crate::mail::Found;

/// How often a batch is tried again after losing a race (a request it
/// answers moved meanwhile) before the failure is returned.
const ATTEMPTS: usize = 16;

/// A checked draft.
struct Prepared {
    message: Message,
    bytes: Vec<u8>,
    /// The request it replies to, where it was read, and its open row.
    parent: Option<Parent>,
    /// The id was chosen by the caller (so a retry can be recognised).
    chosen: bool,
}

struct Parent {
    found: Found,
    version: Version,
    open: Option<Version>,
}

impl Server<'_> {
    pub(crate) fn send(&self, draft: &NewMessage) -> Result<Message> {
        let mut sent = self.send_batch(std::slice::from_ref(draft))?;
        Ok(sent.remove(0))
    }

    /// Sends `drafts` in one transaction: all of them or none.
    pub(crate) fn send_batch(&self, drafts: &[NewMessage]) -> Result<Vec<Message>> {
        let now = self.now()?;
        let mut prepared = Vec::with_capacity(drafts.len());
        let mut chosen = BTreeSet::new();
        for draft in drafts {
            let p = self.prepare(draft, now)?;
            if draft.id.is_some() && !chosen.insert(p.message.id.clone()) {
                return Err(Error::IdTaken {
                    location: Location::Inbox(p.message.to.clone()),
                    id: p.message.id,
                });
            }
            prepared.push(p);
        }
        // First deliveries found for chosen ids: retries of sends that applied.
        let mut firsts: BTreeMap<usize, Message> = BTreeMap::new();
        // Whether a round applied, and why the last one did not.
        let (mut applied, mut last) = (false, None);
        for _ in 0..ATTEMPTS {
            let todo: Vec<usize> = (0..prepared.len())
                .filter(|i| !firsts.contains_key(i))
                .collect();
            if todo.is_empty() {
                break;
            }
            let ops = self.ops(&prepared, &todo, now)?;
            let ids = || {
                todo.iter()
                    .map(|&i| prepared[i].message.id.clone())
                    .collect()
            };
            match self.apply(&ops) {
                Ok(()) => {
                    tracing::debug!(count = todo.len(), "sent on the server");
                    applied = true;
                    break;
                }
                Err(chipset_backend::Error::Exists { key, current }) => {
                    let Some(i) = todo
                        .iter()
                        .copied()
                        .find(|&i| Self::id_key(&prepared[i].message.id).to_string() == key)
                    else {
                        // Another value under a new message's own key.
                        return Err(Error::IdCollision {
                            path: PathBuf::from(key),
                        });
                    };
                    if !prepared[i].chosen {
                        return Err(Error::IdCollision {
                            path: PathBuf::from(key),
                        });
                    }
                    // A retry (or a concurrent send of the same id): every
                    // chosen id already there is its first delivery. An id
                    // recorded whose message is nowhere (moved aside, or a
                    // directory's send cut after its first step) is none.
                    self.resolve_firsts(&prepared, &todo, &mut firsts)?;
                    last = Some(chipset_backend::Error::Exists { key, current });
                }
                Err(
                    e @ (chipset_backend::Error::Conflict { .. }
                    | chipset_backend::Error::NotFound { .. }),
                ) => {
                    // A request a response answers moved meanwhile: read
                    // the parents again and decide again.
                    for i in todo {
                        if let Some(pid) = &drafts[i].in_reply_to {
                            let parent = self.parent(pid)?;
                            check_parent(&drafts[i], &parent.found.message)?;
                            prepared[i].parent = Some(parent);
                        }
                    }
                    last = Some(e);
                }
                Err(e) => return Err(failure(e, ids())),
            }
        }
        // The attempts ran out with drafts neither sent nor found first
        // delivered: never report them sent.
        let undone: Vec<MessageId> = (0..prepared.len())
            .filter(|i| !firsts.contains_key(i))
            .map(|i| prepared[i].message.id.clone())
            .collect();
        // (Every round that neither applied nor finished left its failure.)
        if let Some(e) = last.filter(|_| !applied && !undone.is_empty()) {
            return Err(failure(e, undone));
        }
        Ok(prepared
            .into_iter()
            .enumerate()
            .map(|(i, p)| firsts.remove(&i).unwrap_or(p.message))
            .collect())
    }

    /// Finds, for every chosen id of `todo` already recorded, its first
    /// delivery: the same content, or [`Error::IdTaken`].
    fn resolve_firsts(
        &self,
        prepared: &[Prepared],
        todo: &[usize],
        firsts: &mut BTreeMap<usize, Message>,
    ) -> Result<()> {
        for &i in todo {
            let p = &prepared[i];
            if !p.chosen {
                continue;
            }
            if self.b.read(&Self::id_key(&p.message.id)).seam()?.is_none() {
                continue;
            }
            match self.find(&p.message.id)? {
                Some(found) if found.message.same_content(&p.message) => {
                    firsts.insert(i, found.message);
                }
                Some(found) => {
                    return Err(Error::IdTaken {
                        id: p.message.id.clone(),
                        location: found.location,
                    });
                }
                // Recorded, and moving: the next round finds it.
                None => {}
            }
        }
        Ok(())
    }

    /// The transaction of the drafts `todo`: for each, its id record
    /// first (so a retry is recognised), the message, its task and open
    /// rows, its reply index entry, the archive of the request a response
    /// answers; then the manifest events, last (the manifest's head row is
    /// locked from the append to the commit).
    fn ops(&self, prepared: &[Prepared], todo: &[usize], now: Timestamp) -> Result<Vec<Op>> {
        let mut ops = Vec::new();
        let mut events = Vec::new();
        let mut moved = BTreeSet::new();
        for &i in todo {
            let p = &prepared[i];
            let m = &p.message;
            let record = StateDir::to_canonical_json(&IdRecord {
                task: m.phase.clone(),
                to: m.to.clone(),
            })
            .map_err(|source| chipset_store::Error::Serialize {
                path: PathBuf::from(Self::id_key(&m.id).to_string()),
                source,
            })?;
            ops.push(Op::Create(Self::id_key(&m.id), record.clone()));
            ops.push(Op::Create(
                Self::file(&Location::Inbox(m.to.clone()), &m.id),
                p.bytes.clone(),
            ));
            let task_key = Self::task_dir(&m.phase)
                .key(&format!("{}.json", m.id))
                .seam()?;
            ops.push(Op::Create(task_key, record));
            if m.needs_reply() {
                ops.push(Op::Create(Self::open_key(&m.phase, &m.id), p.bytes.clone()));
            }
            events.push(ManifestEvent::sent(m, false));
            let Some(parent) = &p.parent else { continue };
            let marker = ReplyMarker {
                id: m.id.clone(),
                kind: m.kind,
                to: m.to.clone(),
                parent: parent.found.message.id.clone(),
            };
            let marker_key = Self::replies_dir(&marker.parent)
                .key(&marker_name(m.kind, &m.id))
                .seam()?;
            let marker_bytes = StateDir::to_canonical_json(&marker).map_err(|source| {
                chipset_store::Error::Serialize {
                    path: PathBuf::from(marker_key.to_string()),
                    source,
                }
            })?;
            ops.push(Op::Create(marker_key, marker_bytes));
            let request = &parent.found.message;
            if m.kind != Kind::Response || !moved.insert(request.id.clone()) {
                continue;
            }
            if let Location::Inbox(agent) = &parent.found.location {
                ops.push(Op::Move(
                    Self::file(&parent.found.location, &request.id),
                    parent.version,
                    Self::file(&Location::Archive, &request.id),
                ));
                events.push(ManifestEvent::Archived {
                    id: request.id.clone(),
                    agent: agent.clone(),
                    task: request.phase.clone(),
                    reply: Some(m.id.clone()),
                    at: now,
                    reconciled: false,
                });
            }
            if let Some(open) = parent.open {
                ops.push(Op::Remove(
                    Self::open_key(&request.phase, &request.id),
                    open,
                ));
            }
        }
        ops.push(Self::append_events(&events)?);
        Ok(ops)
    }

    /// The request (or other message) `pid` a reply answers, where it is
    /// and its open row.
    fn parent(&self, pid: &MessageId) -> Result<Parent> {
        let (found, version) = self
            .find_versioned(pid)?
            .ok_or_else(|| Error::ParentNotFound { id: pid.clone() })?;
        let open = self
            .b
            .read(&Self::open_key(&found.message.phase, pid))
            .seam()?
            .map(|v| v.version);
        Ok(Parent {
            found,
            version,
            open,
        })
    }

    fn prepare(&self, draft: &NewMessage, now: Timestamp) -> Result<Prepared> {
        check_draft(draft, &self.mail.config)?;
        let parent = match &draft.in_reply_to {
            Some(pid) => Some(self.parent(pid)?),
            None => None,
        };
        let task = match (&parent, &draft.task) {
            (Some(p), _) => check_parent(draft, &p.found.message)?,
            (None, Some(task)) => task.clone(),
            (None, None) => unreachable!("only responses lack a task, and they name their request"),
        };
        let id = match &draft.id {
            Some(id) => id.clone(),
            None => MessageId::from(SortableId::generate(self.mail.state.clock().as_ref())),
        };
        let message = to_message(draft, id, task, now);
        let key = Self::file(&Location::Inbox(message.to.clone()), &message.id);
        let bytes = StateDir::to_canonical_json(&message).map_err(|source| {
            chipset_store::Error::Serialize {
                path: PathBuf::from(key.to_string()),
                source,
            }
        })?;
        let cap = MAX_VALUE.min(usize::try_from(self.mail.state.read_cap()).unwrap_or(MAX_VALUE));
        if bytes.len() > cap {
            return Err(Error::MessageTooLarge {
                size: bytes.len(),
                cap: cap as u64,
            });
        }
        Ok(Prepared {
            message,
            bytes,
            parent,
            chosen: draft.id.is_some() && !draft.fresh,
        })
    }
}
