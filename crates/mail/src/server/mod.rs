//! Mail on a server (issue 30): the same operations and guarantees, built
//! on the storage seam's operations (`chipset_backend::Backend`) rather
//! than on files.
//!
//! A directory keeps its own tuned paths (the gate cache, the sent
//! journal, the archive tail, shared syncs), which exist because a
//! directory has no index and no transaction. A server has both, so mail
//! on it keeps a few small index rows instead, each written in the same
//! transaction as the message it describes:
//!
//! ```text
//! mail/inbox/{agent}/{id}.json          the message, as on a directory
//! mail/archive/{id}.json                archived
//! mail/archive/by-task/{task}/{id}.json swept with its task
//! mail/replies/{parent}/{kind}-{id}.json the reply index, as on a directory
//! mail/ids/{id}.json                    {"task","to"}: where the message can be; created
//!                                       first, so a retry of a send that applied is known
//! mail/task/{task}/{id}.json            {"task","to"}: the task's messages, for the sweep
//! mail/open/{task}/{id}.json            a request not yet answered (its bytes): the gate
//! mail/manifest.jsonl                   the manifest, a log
//! ```
//!
//! A send is one transaction: the id record, the message, the task and
//! open rows, the reply index entry, for a response the move of the
//! request into `archive/` and the removal of its open row, and the
//! manifest events. So when `send` returns, all of it is committed and
//! every client's [`Mail::pending_replies`] (one read of `open/{task}/`)
//! sees the request: the gate fails closed across hosts. A send whose
//! commit's answer was lost is [`Error::Backend`] with an unknown outcome;
//! retried with the same id, its first step (the id record) finds the
//! first attempt's and the first delivery is returned.

mod doctor;
mod gate;
mod repair;
mod scan;
mod send;

pub(crate) use scan::watch_failure;

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;

use chipset_backend::{Backend, Dir, Key, LogPos, Step, Version};
use chipset_store::{AgentId, Corruption, Listing, ReadOutcome, StateDir, TaskId, Timestamp};
use serde::{Deserialize, Serialize};

use crate::MessageId;
use crate::draft::MailConfig;
use crate::error::{Error, Result};
use crate::format::{Kind, ManifestEvent, Message, ReplyMarker, parse_message};
use crate::layout::{Location, id_of, marker_name, parse_marker};
use crate::mail::{Found, Mail, check_id};
use crate::thread::causal_order;

/// Mail's operations on a server.
pub(crate) struct Server<'a> {
    pub(crate) mail: &'a Mail,
    pub(crate) b: &'a dyn Backend,
}

/// What `ids/{id}.json` and `task/{task}/{id}.json` hold: where the
/// message can be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct IdRecord {
    task: TaskId,
    to: AgentId,
}

/// A change of a send, an archive or a sweep, owned until it becomes a
/// [`Step`].
pub(crate) enum Op {
    Create(Key, Vec<u8>),
    Move(Key, Version, Key),
    Remove(Key, Version),
    Append(Key, Vec<Vec<u8>>),
}

impl Mail {
    /// Returns the mail channel on `backend` (a PostgreSQL server, issue
    /// 30), with `state` as the local root whose clock makes message ids.
    ///
    /// Sending (one, a batch, a group), replying, [`Mail::inbox`],
    /// [`Mail::find`], [`Mail::thread`], [`Mail::has_reply`],
    /// [`Mail::archive`], [`Mail::sweep_task_on_commit`],
    /// [`Mail::read_manifest`] and the commit gate
    /// [`Mail::pending_replies`] keep their contracts; each change is one
    /// transaction, so "acknowledged" means committed and a request is
    /// visible to every client's gate when its send returns. Times
    /// (`created_at`, events) come from the server's clock.
    /// [`Mail::inbox_counts`] counts the rows, [`Mail::doctor`] checks them and
    /// reports (never changes) what is wrong, and [`Mail::watch_inbox`]
    /// waits on an inbox through the server's notifications.
    ///
    /// This is for servers: on a directory use [`Mail::new`], whose files
    /// are the seed's (a backend on a directory would hold mail in the
    /// server's layout, which the seed's other programs do not read).
    pub fn with_backend(state: StateDir, config: MailConfig, backend: Arc<dyn Backend>) -> Self {
        let mut mail = Mail::with_config(state, config);
        mail.seam = Some(backend);
        mail
    }

    /// Returns the server's operations when mail is on one.
    pub(crate) fn server(&self) -> Option<Server<'_>> {
        self.seam.as_deref().map(|b| Server { mail: self, b })
    }
}

/// Turns the seam's results into mail's.
pub(crate) trait Seam<T> {
    fn seam(self) -> Result<T>;
}

impl<T> Seam<T> for chipset_backend::Result<T> {
    fn seam(self) -> Result<T> {
        self.map_err(|e| failure(e, Vec::new()))
    }
}

/// A seam error as mail's: an unreadable value is corrupt (named by its
/// key), anything else the backend's error, carrying the ids a send was
/// writing.
pub(crate) fn failure(e: chipset_backend::Error, ids: Vec<MessageId>) -> Error {
    match e {
        chipset_backend::Error::Corrupt { key, reason } => Error::Corrupt(Corruption {
            path: PathBuf::from(key),
            reason,
        }),
        other => Error::Backend {
            ids,
            source: Box::new(other),
        },
    }
}

fn dir(segments: &[&str]) -> Dir {
    let mut d = Dir::new(crate::MAIL_CHANNEL.as_str()).expect("`mail` is a valid name");
    for s in segments {
        d = d.join(s).expect("checked ids and names are valid segments");
    }
    d
}

fn json_name(id: &MessageId) -> String {
    format!("{id}.json")
}

impl Server<'_> {
    // ---- keys ----------------------------------------------------------

    pub(crate) fn dir_of(location: &Location) -> Dir {
        match location {
            Location::Inbox(agent) => dir(&["inbox", agent.as_str()]),
            Location::Archive => dir(&["archive"]),
            Location::ByTask(task) => dir(&["archive", "by-task", task.as_str()]),
            Location::Orphan => dir(&["archive", "orphan"]),
        }
    }

    pub(crate) fn file(location: &Location, id: &MessageId) -> Key {
        Self::dir_of(location)
            .key(&json_name(id))
            .expect("a message id is a valid name")
    }

    fn id_key(id: &MessageId) -> Key {
        dir(&["ids"]).key(&json_name(id)).expect("a valid name")
    }

    fn task_dir(task: &TaskId) -> Dir {
        dir(&["task", task.as_str()])
    }

    fn open_dir(task: &TaskId) -> Dir {
        dir(&["open", task.as_str()])
    }

    fn open_key(task: &TaskId, id: &MessageId) -> Key {
        Self::open_dir(task)
            .key(&json_name(id))
            .expect("a valid name")
    }

    fn replies_dir(parent: &MessageId) -> Dir {
        dir(&["replies", parent.as_str()])
    }

    fn manifest() -> Key {
        Dir::new(crate::MAIL_CHANNEL.as_str())
            .and_then(|d| d.key(crate::layout::MANIFEST))
            .expect("a valid name")
    }

    // ---- reading -------------------------------------------------------

    /// The server's clock.
    pub(crate) fn now(&self) -> Result<Timestamp> {
        self.b.now().seam()
    }

    /// Parses a message value; what is not one fails closed.
    fn parse(key: &Key, bytes: &[u8]) -> Result<Message> {
        let path = PathBuf::from(key.to_string());
        match parse_message(&path, bytes) {
            ReadOutcome::Value(m) => Ok(m),
            ReadOutcome::Unsupported(u) => Err(u.into()),
            ReadOutcome::Corrupt(c) => Err(c.into()),
            ReadOutcome::Missing => Err(crate::mail::stray(path, "an empty value").into()),
        }
    }

    /// Parses the message `name` of a folder, checking its id.
    fn parse_named(folder: &Dir, name: &str, bytes: &[u8]) -> Result<Option<Message>> {
        let Some(id) = id_of(name) else {
            return Ok(None);
        };
        let key = folder.key(name).seam()?;
        let m = Self::parse(&key, bytes)?;
        Ok(Some(check_id(&PathBuf::from(key.to_string()), &id, m)?))
    }

    /// Finds the message `id`, with the version it was read at.
    pub(crate) fn find_versioned(&self, id: &MessageId) -> Result<Option<(Found, Version)>> {
        let key = Self::id_key(id);
        let Some(record) = self.b.read(&key).seam()? else {
            return Ok(None);
        };
        let record: IdRecord = serde_json::from_slice(&record.value).map_err(|e| {
            Error::Corrupt(crate::mail::stray(
                PathBuf::from(key.to_string()),
                &format!("not an id record: {e}"),
            ))
        })?;
        // A message moves forward only (inbox, archive or the doctor's
        // orphans, by-task), and it is looked for in that order, so one
        // moving meanwhile is not missed; a few rounds settle a message
        // that moved twice.
        for _ in 0..4 {
            for location in [
                Location::Inbox(record.to.clone()),
                Location::Archive,
                Location::Orphan,
                Location::ByTask(record.task.clone()),
            ] {
                let key = Self::file(&location, id);
                if let Some(v) = self.b.read(&key).seam()? {
                    let m = Self::parse(&key, &v.value)?;
                    let message = check_id(&PathBuf::from(key.to_string()), id, m)?;
                    return Ok(Some((Found { location, message }, v.version)));
                }
            }
        }
        Ok(None)
    }

    pub(crate) fn find(&self, id: &MessageId) -> Result<Option<Found>> {
        Ok(self.find_versioned(id)?.map(|(f, _)| f))
    }

    pub(crate) fn inbox_listing(&self, agent: &AgentId) -> Result<Listing<Message>> {
        let folder = Self::dir_of(&Location::Inbox(agent.clone()));
        let mut out = Listing::default();
        for (name, v) in self.b.read_all(&folder).seam()? {
            match Self::parse_named(&folder, &name, &v.value) {
                Ok(m) => out.items.extend(m),
                Err(Error::Corrupt(c)) => out.corrupt.push(c),
                Err(Error::Unsupported(u)) => out.unsupported.push(u),
                Err(e) => return Err(e),
            }
        }
        out.items.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    pub(crate) fn inbox_len(&self, agent: &AgentId) -> Result<usize> {
        let folder = Self::dir_of(&Location::Inbox(agent.clone()));
        let names = self.b.list(&folder).seam()?;
        Ok(names.iter().filter(|n| id_of(n).is_some()).count())
    }

    /// The reply index of `parent`.
    fn replies_of(&self, parent: &MessageId) -> Result<Vec<(Kind, MessageId)>> {
        let names = self.b.list(&Self::replies_dir(parent)).seam()?;
        Ok(names.iter().filter_map(|n| parse_marker(n)).collect())
    }

    pub(crate) fn has_reply(&self, id: &MessageId) -> Result<bool> {
        Ok(self
            .replies_of(id)?
            .iter()
            .any(|(k, _)| *k == Kind::Response))
    }

    /// The thread `id` is in: up through `in_reply_to`, down through the
    /// reply index (every reply on a server was sent through it).
    pub(crate) fn thread(&self, id: &MessageId) -> Result<Vec<Message>> {
        let start = self
            .find(id)?
            .ok_or_else(|| Error::NotFound { id: id.clone() })?;
        let mut nodes: BTreeMap<MessageId, Message> = BTreeMap::new();
        let mut root = start.message;
        while let Some(parent) = root.in_reply_to.clone() {
            if nodes.contains_key(&parent) {
                break;
            }
            let Some(found) = self.find(&parent)? else {
                break;
            };
            nodes.insert(root.id.clone(), root);
            root = found.message;
        }
        nodes.insert(root.id.clone(), root.clone());
        let mut thread: BTreeMap<MessageId, Message> = BTreeMap::new();
        let mut queue = VecDeque::from([nodes.remove(&root.id).unwrap_or(root)]);
        while let Some(node) = queue.pop_front() {
            for (_, child) in self.replies_of(&node.id)? {
                if thread.contains_key(&child) || queue.iter().any(|m| m.id == child) {
                    continue;
                }
                if let Some(m) = nodes.remove(&child) {
                    queue.push_back(m);
                } else if let Some(found) = self.find(&child)? {
                    queue.push_back(found.message);
                }
            }
            thread.insert(node.id.clone(), node);
        }
        thread.extend(nodes);
        Ok(causal_order(thread.into_values().collect()))
    }

    pub(crate) fn read_manifest(&self) -> Result<Vec<ManifestEvent>> {
        let read = self.b.read_log(&Self::manifest(), LogPos::START).seam()?;
        Ok(read
            .records
            .iter()
            // Every record is one JSON value (the seam checks it).
            .map(|record| crate::read::event_of(serde_json::from_slice(record).unwrap_or_default()))
            .collect())
    }

    // ---- changing ------------------------------------------------------

    /// Applies `ops` as one transaction.
    pub(crate) fn apply(&self, ops: &[Op]) -> chipset_backend::Result<()> {
        let records: Vec<Vec<&[u8]>> = ops
            .iter()
            .map(|op| match op {
                Op::Append(_, r) => r.iter().map(Vec::as_slice).collect(),
                _ => Vec::new(),
            })
            .collect();
        let steps: Vec<Step<'_>> = ops
            .iter()
            .zip(&records)
            .map(|(op, records)| match op {
                Op::Create(key, value) => Step::Create { key, value },
                Op::Move(from, expected, to) => Step::MoveNew {
                    from,
                    expected: *expected,
                    to,
                },
                Op::Remove(key, expected) => Step::Remove {
                    key,
                    expected: *expected,
                },
                Op::Append(log, _) => Step::Append { log, records },
            })
            .collect();
        self.b.transact(&steps).map(drop)
    }

    /// The manifest append of `events`.
    pub(crate) fn append_events(events: &[ManifestEvent]) -> Result<Op> {
        let records = events
            .iter()
            .map(|e| {
                serde_json::to_vec(e).map_err(|source| chipset_store::Error::Serialize {
                    path: PathBuf::from(Self::manifest().to_string()),
                    source,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Op::Append(Self::manifest(), records))
    }
}

// ---- importing (`chipset migrate`): a message another state holds, its
// bytes as they are, with the index rows a send would write beside it.

impl Mail {
    /// Puts on the server a message that another state holds at
    /// `location`, its bytes exactly as given, with the rows a send writes
    /// beside it (where it is, its task's row, its reply index entry when
    /// it replies and the entry is missing, and, when `open`, its row in the
    /// commit gate), all in one transaction. No manifest event is written:
    /// the manifest is copied as a log. `open` is kept only for a message
    /// in an inbox that needs a reply.
    ///
    /// Returns true when it wrote the message, false when the message was
    /// already there with these bytes (then nothing is written): a
    /// migration killed at any point can be run again.
    ///
    /// # Errors
    ///
    /// [`Error::ServerOnly`] on a directory; [`Error::Corrupt`] when the
    /// bytes are not a message or its id is not the one given;
    /// [`Error::IdTaken`] when the id is on the server with other bytes or
    /// elsewhere; [`Error::IdCollision`] when one of its rows holds
    /// another value; [`Error::Backend`].
    pub fn import(
        &self,
        location: &Location,
        id: &crate::MessageId,
        bytes: &[u8],
        open: bool,
    ) -> Result<bool> {
        match self.server() {
            Some(server) => server.import(location, id, bytes, open),
            None => Err(Error::ServerOnly { op: "import" }),
        }
    }
}

impl Server<'_> {
    fn import(
        &self,
        location: &Location,
        id: &crate::MessageId,
        bytes: &[u8],
        open: bool,
    ) -> Result<bool> {
        let key = Self::file(location, id);
        let path = PathBuf::from(key.to_string());
        let m = check_id(&path, id, Self::parse(&key, bytes)?)?;
        let record = IdRecord {
            task: m.phase.clone(),
            to: m.to.clone(),
        };
        let id_key = Self::id_key(id);
        let record = serialize(&id_key, &record)?;
        let mut ops = vec![
            Op::Create(id_key.clone(), record.clone()),
            Op::Create(key.clone(), bytes.to_vec()),
            Op::Create(
                Self::task_dir(&m.phase).key(&format!("{id}.json")).seam()?,
                record,
            ),
        ];
        if open && m.needs_reply() && matches!(location, Location::Inbox(_)) {
            ops.push(Op::Create(Self::open_key(&m.phase, id), bytes.to_vec()));
        }
        if let Some(parent) = &m.in_reply_to {
            let marker_key = Self::replies_dir(parent)
                .key(&marker_name(m.kind, id))
                .seam()?;
            if self.b.read(&marker_key).seam()?.is_none() {
                let marker = ReplyMarker {
                    id: id.clone(),
                    kind: m.kind,
                    to: m.to.clone(),
                    parent: parent.clone(),
                };
                let marker = serialize(&marker_key, &marker)?;
                ops.push(Op::Create(marker_key, marker));
            }
        }
        match self.apply(&ops) {
            Ok(()) => Ok(true),
            Err(chipset_backend::Error::Exists { key: at, .. }) if at == id_key.to_string() => {
                match self.b.read(&key).seam()? {
                    Some(v) if v.value == bytes => Ok(false),
                    _ => Err(Error::IdTaken {
                        id: id.clone(),
                        location: self
                            .find(id)?
                            .map_or_else(|| location.clone(), |f| f.location),
                    }),
                }
            }
            Err(chipset_backend::Error::Exists { key: at, .. }) => Err(Error::IdCollision {
                path: PathBuf::from(at),
            }),
            Err(e) => Err(failure(e, vec![id.clone()])),
        }
    }
}

/// The canonical JSON of a row, its serialization error naming `key`.
fn serialize<T: serde::Serialize>(key: &chipset_backend::Key, value: &T) -> Result<Vec<u8>> {
    StateDir::to_canonical_json(value).map_err(|source| {
        chipset_store::Error::Serialize {
            path: PathBuf::from(key.to_string()),
            source,
        }
        .into()
    })
}
