//! The I/O shell: the [`Mail`] handle applies the checks of `draft.rs` and
//! moves files through `chipset-store`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use crate::MessageId;
use chipset_store::{
    AgentId, BadLine, CorruptReason, Corruption, JsonLog, ReadOutcome, SortableId, StateDir,
    TaskId, TornTail, Unsupported, to_canonical_json,
};

use crate::draft::{Draft, InboxFilter, MailConfig, check_draft, check_parent, to_message};
use crate::error::{MailError, Result};
use crate::format::{Kind, ManifestEvent, Message, ReplyMarker, parse_message};
use crate::gate::Folder;
use crate::layout::{BY_TASK, Layout, Location, ORPHAN, file_name, id_of, parse_marker};
use crate::tail::Caught;
use crate::thread::causal_order;

/// The mail channel of one state root: send, list, archive, thread, gate, sweep, repair.
///
/// Cheap to clone. Every method is safe to call from many processes at once;
/// none takes a lock that serialises all senders (only the manifest append
/// holds the manifest's lock, for one write and one sync).
#[derive(Debug, Clone)]
pub struct Mail {
    pub(crate) state: StateDir,
    pub(crate) config: MailConfig,
    pub(crate) layout: Layout,
}

/// A message and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Where the file is.
    pub location: Location,
    /// The message.
    pub message: Message,
}

/// What [`Mail::archive`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum ArchiveOutcome {
    /// This call moved the message from its inbox into `archive/`.
    Archived(Message),
    /// The message had left its inbox already (archived by someone else, swept
    /// with its task, or orphaned); it is now at this location.
    AlreadyArchived(Location),
}

/// What [`Mail::sweep_task_on_commit`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepReport {
    /// Messages this run moved into `archive/by-task/{task}/`.
    pub moved: usize,
    /// Messages in `archive/by-task/{task}/` after the run.
    pub total: usize,
}

/// Cheap counts for a status screen: directory listings only, no file is read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MailCounts {
    /// Messages waiting in each agent's inbox (agents with an inbox directory).
    pub inbox: BTreeMap<AgentId, usize>,
    /// Messages in `archive/` (archived, task not yet swept).
    pub archived: usize,
    /// Messages in `archive/orphan/`.
    pub orphaned: usize,
    /// Tasks swept into `archive/by-task/`.
    pub swept_tasks: usize,
}

/// What [`Mail::read_manifest`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// The events this crate writes, in file order.
    pub events: Vec<ManifestEvent>,
    /// Whole JSON records of another shape (for example written by another
    /// implementation of the seed), in file order.
    pub foreign: Vec<serde_json::Value>,
    /// Whole lines that are not JSON.
    pub bad_lines: Vec<BadLine>,
    /// An unterminated last line (a crash mid-append).
    pub torn_tail: Option<TornTail>,
}

/// A file where a message belongs that cannot be used as one.
#[derive(Debug)]
pub(crate) enum Unreadable {
    /// Not a message.
    Corrupt(Corruption),
    /// A message holding a value this version does not know.
    Unsupported(Unsupported),
}

impl From<Corruption> for Unreadable {
    fn from(c: Corruption) -> Self {
        Unreadable::Corrupt(c)
    }
}

impl From<Unreadable> for MailError {
    fn from(u: Unreadable) -> Self {
        match u {
            Unreadable::Corrupt(c) => MailError::Corrupt(c),
            Unreadable::Unsupported(u) => MailError::Unsupported(u),
        }
    }
}

/// Reads and parses one message file (see [`parse_message`]).
pub(crate) fn read_message(state: &StateDir, path: &Path) -> Result<ReadOutcome<Message>> {
    Ok(state
        .read_bytes(path)?
        .and_then(|bytes| parse_message(path, &bytes)))
}

/// A checked draft, ready to publish.
struct Prepared {
    message: Message,
    parent: Option<Found>,
    bytes: Vec<u8>,
    /// The first delivery of a chosen id sent before with the same content.
    first: Option<Message>,
    /// The id was chosen by the caller.
    chosen: bool,
}

/// What happened to one move.
pub(crate) enum Moved {
    Done,
    /// The source was gone: someone else moved it first.
    Gone,
    /// The destination was taken; the source is still there.
    Taken,
}

/// Returns true when `response` is an answer `send` would have accepted for
/// `request`: a response naming it, from its addressee, of its task.
pub(crate) fn answers(response: &Message, request: &Message) -> bool {
    response.kind == Kind::Response
        && response.in_reply_to.as_ref() == Some(&request.id)
        && request.needs_reply()
        && response.from == request.to
        && response.phase == request.phase
}

/// How far a folder's mtime may lag a writer's clock before the reply
/// fallback trusts it (coarse kernel timestamps, clocks of other hosts).
pub(crate) const MTIME_SLACK: std::time::Duration = std::time::Duration::from_secs(2);

/// Returns when `dir`'s entries last changed, or `None` when it is missing.
fn modified(state: &StateDir, dir: &Path) -> Result<Option<chipset_store::Timestamp>> {
    let Some(meta) = state.stat(dir)? else {
        return Ok(None);
    };
    let ms = meta
        .modified()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    // A filesystem without mtimes: treat the folder as changed just now.
    Ok(Some(chipset_store::Timestamp::from_unix_ms(
        ms.unwrap_or(i64::MAX),
    )))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

pub(crate) fn stray(path: PathBuf, what: &str) -> Corruption {
    Corruption {
        path,
        reason: CorruptReason::WrongShape(what.to_owned()),
    }
}

pub(crate) fn exists(state: &StateDir, path: &Path) -> Result<bool> {
    Ok(state.exists(path)?)
}

/// Checks that a parsed message is the one its file name says.
pub(crate) fn check_id(
    path: &Path,
    id: &MessageId,
    message: Message,
) -> Result<Message, Corruption> {
    if message.id == *id {
        Ok(message)
    } else {
        Err(stray(
            path.to_owned(),
            &format!("the id field `{}` does not match the file name", message.id),
        ))
    }
}

impl Mail {
    /// Returns the mail channel of `state` with the default [`MailConfig`].
    /// Nothing is created until something is sent.
    pub fn new(state: StateDir) -> Self {
        Self::with_config(state, MailConfig::default())
    }

    /// Returns the mail channel of `state` with `config`.
    pub fn with_config(state: StateDir, config: MailConfig) -> Self {
        let layout = Layout::new(state.channel_path(crate::MAIL_CHANNEL));
        Mail {
            state,
            config,
            layout,
        }
    }

    /// Returns the mail channel of a folder that has the seed's layout itself
    /// (`inbox/`, `archive/`, `manifest.jsonl` directly inside), such as a
    /// nubos-pilot project's `.nubos-pilot/messages`: open `state` at that
    /// folder. Everything else is as with [`Mail::new`]; chipset's own
    /// additions (`replies/`, `.quarantine/` folders, temp files) are
    /// dot-named or ignored by the seed's other programs.
    ///
    /// ```
    /// use chipset_mail::{Draft, Mail};
    /// use chipset_store::StateDir;
    ///
    /// let project = tempfile::tempdir()?;
    /// let folder = project.path().join(".nubos-pilot/messages");
    /// let mail = Mail::in_folder(StateDir::open(&folder)?);
    /// let sent = mail.send(&Draft::notify("np-orchestrator".parse()?, "np-executor".parse()?,
    ///     "M005-S007-T0002".parse()?, "round-started", "go"))?;
    /// assert!(folder.join("inbox/np-executor").join(format!("{}.json", sent.id())).is_file());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn in_folder(state: StateDir) -> Self {
        Self::in_folder_with_config(state, MailConfig::default())
    }

    /// As [`Mail::in_folder`], with `config`.
    pub fn in_folder_with_config(state: StateDir, config: MailConfig) -> Self {
        let layout = Layout::new(state.root().to_owned());
        Mail {
            state,
            config,
            layout,
        }
    }

    /// Returns the state root.
    pub fn state(&self) -> &StateDir {
        &self.state
    }

    /// Returns the configuration.
    pub fn config(&self) -> &MailConfig {
        &self.config
    }

    /// Returns the `mail/` directory.
    pub fn dir(&self) -> &Path {
        self.layout.mail()
    }

    /// Returns `agent`'s inbox directory, `inbox/{agent}/` (for watchers).
    pub fn inbox_dir(&self, agent: &AgentId) -> PathBuf {
        self.layout.inbox(agent)
    }

    /// Returns the path a message with `id` has at `location`.
    pub fn path_of(&self, id: &MessageId, location: &Location) -> PathBuf {
        self.layout.file(location, id)
    }

    /// Returns the path of `manifest.jsonl`.
    pub fn manifest_path(&self) -> PathBuf {
        self.layout.manifest()
    }

    pub(crate) fn manifest(&self) -> Result<JsonLog> {
        Ok(self.state.log(&self.layout.manifest())?)
    }

    // ---- sending -------------------------------------------------------

    /// Sends one message and returns it as written.
    ///
    /// **Commit point:** the no-clobber publish of the message file into
    /// `inbox/{to}/{id}.json` (written to a synced temp file first; the
    /// directory is synced after). A failure before it leaves nothing a
    /// reader can see. After it the message is sent, and the follow-up work
    /// is done as well as it can be: a message with `in_reply_to` is entered
    /// in the reply index (after it is published, so the index never claims
    /// a reply that does not exist), a response archives the request it
    /// answers, and a `sent` event is appended to the manifest (not synced
    /// on its own: see the crate docs, Durability). A failure of
    /// the follow-up does not fail the send (that would invite a duplicate):
    /// it is logged (`tracing`), and [`Mail::doctor`] with
    /// [`DoctorMode::Fix`](chipset_store::DoctorMode::Fix) completes it (a missing
    /// `sent` event, index entry, archive of an answered request, or its
    /// `archived` event); the
    /// gate and [`Mail::has_reply`] do not wait for it.
    ///
    /// With a caller-chosen id ([`Draft::with_id`]), sending again follows
    /// the store's idempotent-retry rule: when a message with the id exists
    /// anywhere (an inbox, `archive/`, a by-task or the orphan archive) and
    /// has the same content ([`Message::same_content`]), the first delivery
    /// is returned as success, nothing is written but the missing follow-up
    /// (reply index entry, archive of the answered request); other content is
    /// [`MailError::IdTaken`].
    ///
    /// # Errors
    ///
    /// Refusals, with nothing written: [`MailError::InvalidSubject`],
    /// [`MailError::BodyTooLarge`], [`MailError::MessageTooLarge`],
    /// [`MailError::UnknownRecipient`], [`MailError::IdTaken`], and for replies
    /// [`MailError::ParentNotFound`], [`MailError::NotARequest`],
    /// [`MailError::NotAddressee`], [`MailError::TaskMismatch`]; a corrupt
    /// parent is [`MailError::Corrupt`]. [`MailError::Store`] when a
    /// filesystem step before the commit point fails: nothing is visible.
    /// [`MailError::OutcomeUnknown`], carrying the id, when the publish
    /// happened but its directory sync failed: the message may be delivered,
    /// so retry with the same id.
    pub fn send(&self, draft: &Draft) -> Result<Message> {
        let p = self.prepare(draft)?;
        if let Some(first) = p.first {
            // A retry of a send that applied: finish its follow-up, if missing.
            self.follow_up(&[(first.clone(), p.parent)], false);
            return Ok(first);
        }
        let message = p.message;
        let path = self
            .layout
            .file(&Location::Inbox(message.to.clone()), &message.id);
        match self.state.create_new(&path, &p.bytes) {
            Ok(()) => {}
            Err(chipset_store::Error::AlreadyExists { path }) => {
                if draft.id.is_none() {
                    return Err(MailError::IdCollision { path });
                }
                // A concurrent send of the same chosen id won the race.
                return match self.find(&message.id)? {
                    Some(found) if found.message.same_content(&message) => Ok(found.message),
                    Some(found) => Err(MailError::IdTaken {
                        id: message.id,
                        location: found.location,
                    }),
                    None => Err(MailError::IdCollision { path }),
                };
            }
            Err(source @ chipset_store::Error::OutcomeUnknown { .. }) => {
                return Err(MailError::OutcomeUnknown {
                    ids: vec![message.id],
                    source,
                });
            }
            Err(e) => return Err(e.into()),
        }
        tracing::debug!(id = %message.id, to = %message.to, kind = %message.kind, "sent message");
        self.follow_up(&[(message.clone(), p.parent)], true);
        Ok(message)
    }

    /// Sends many messages sharing syncs: every file is synced once, each
    /// inbox directory once, and the manifest once for all the `sent` events.
    /// Returns the messages in draft order.
    ///
    /// Every draft is checked before anything is written; a reply's parent
    /// must exist before the batch (not be in it).
    ///
    /// **Commit points:** each message's own no-clobber publish; the batch
    /// has none of its own. The follow-up is as for [`Mail::send`], done once
    /// for the batch, and its failure does not fail the batch. Drafts with
    /// a chosen id whose message exists with the same content are returned
    /// as first delivered and not written again, so a retry of a batch that
    /// failed part way (with every draft given an id) sends only the rest.
    ///
    /// # Errors
    ///
    /// As [`Mail::send`]. A refusal of any draft writes nothing; a filesystem
    /// failure before any file is published leaves nothing visible; a failure
    /// after one is [`MailError::OutcomeUnknown`] naming the batch's new ids.
    pub fn send_batch(&self, drafts: &[Draft]) -> Result<Vec<Message>> {
        let mut prepared = Vec::with_capacity(drafts.len());
        let mut chosen = std::collections::BTreeSet::new();
        for draft in drafts {
            let p = self.prepare(draft)?;
            if draft.id.is_some() && !chosen.insert(p.message.id.clone()) {
                return Err(MailError::IdTaken {
                    location: Location::Inbox(p.message.to.clone()),
                    id: p.message.id,
                });
            }
            prepared.push(p);
        }
        let fresh: Vec<&Prepared> = prepared.iter().filter(|p| p.first.is_none()).collect();
        let items: Vec<(PathBuf, Vec<u8>)> = fresh
            .iter()
            .map(|p| {
                let m = &p.message;
                let path = self.layout.file(&Location::Inbox(m.to.clone()), &m.id);
                (path, p.bytes.clone())
            })
            .collect();
        let outcomes = match self.state.create_new_batch(&items) {
            Ok(outcomes) => outcomes,
            Err(source @ chipset_store::Error::OutcomeUnknown { .. }) => {
                return Err(MailError::OutcomeUnknown {
                    ids: fresh.iter().map(|p| p.message.id.clone()).collect(),
                    source,
                });
            }
            Err(e) => return Err(e.into()),
        };
        let mut sent = Vec::with_capacity(fresh.len());
        let mut collision = None;
        let mut raced = Vec::new();
        for ((p, outcome), (path, _)) in fresh.iter().zip(&outcomes).zip(&items) {
            if *outcome == chipset_store::Created::New {
                sent.push((p.message.clone(), p.parent.clone()));
            } else if p.chosen {
                raced.push(p.message.clone());
            } else {
                collision.get_or_insert_with(|| path.clone());
            }
        }
        self.follow_up(&sent, true);
        if let Some(path) = collision {
            return Err(MailError::IdCollision { path });
        }
        // A concurrent send of the same chosen id won the race: it is the
        // first delivery when its content is the same.
        let mut firsts: BTreeMap<MessageId, Message> = BTreeMap::new();
        for m in raced {
            match self.find(&m.id)? {
                Some(found) if found.message.same_content(&m) => {
                    firsts.insert(m.id.clone(), found.message);
                }
                Some(found) => {
                    return Err(MailError::IdTaken {
                        id: m.id,
                        location: found.location,
                    });
                }
                None => {
                    return Err(MailError::IdCollision {
                        path: self.layout.file(&Location::Inbox(m.to.clone()), &m.id),
                    });
                }
            }
        }
        let mut retried = Vec::new();
        let out = prepared
            .into_iter()
            .map(|p| match p.first {
                Some(first) => {
                    retried.push((first.clone(), p.parent));
                    first
                }
                None => firsts.remove(&p.message.id).unwrap_or(p.message),
            })
            .collect();
        self.follow_up(&retried, false);
        Ok(out)
    }

    /// The follow-up of sends past their commit point: the reply index, the
    /// archive of answered requests and (for `append`) the `sent` events.
    /// Failures are logged, not returned: the sends happened, and
    /// [`Mail::doctor`] completes what is missing.
    fn follow_up(&self, sent: &[(Message, Option<Found>)], append: bool) {
        if sent.is_empty() {
            return;
        }
        let mut events: Vec<ManifestEvent> = if append {
            sent.iter()
                .map(|(m, _)| ManifestEvent::sent(m, false))
                .collect()
        } else {
            Vec::new()
        };
        let replies: Vec<Message> = sent
            .iter()
            .filter(|(_, parent)| parent.is_some())
            .map(|(m, _)| m.clone())
            .collect();
        if let Err(e) = self.link_replies(&replies) {
            tracing::warn!(error = %e, "sent, but the reply index was not updated (the doctor completes it)");
        }
        for (message, parent) in sent {
            let Some(parent) = parent else { continue };
            match self.archive_answered(parent, message) {
                Ok(event) => events.extend(event),
                Err(e) => tracing::warn!(
                    id = %message.id, error = %e,
                    "sent, but the answered request was not archived (the doctor completes it)"
                ),
            }
        }
        if events.is_empty() {
            return;
        }
        if let Err(e) = self.append_send_events(&events) {
            tracing::warn!(error = %e, "the manifest append after a commit point failed (the doctor completes it)");
        }
    }

    /// Appends a send's manifest events. `sent` events alone are written
    /// without a data sync: the message files they describe are durable
    /// already, and [`Mail::doctor`] rebuilds a `sent` event a power cut
    /// lost from its file, so the sync is left to the next synced append
    /// (or the kernel's writeback). Any other event (a response's
    /// `archived`) is synced before `send` returns.
    fn append_send_events(&self, events: &[ManifestEvent]) -> Result<()> {
        let log = self.manifest()?;
        if events
            .iter()
            .all(|e| matches!(e, ManifestEvent::Sent { .. }))
        {
            log.append_batch_unsynced(events)?;
        } else {
            log.append_batch(events)?;
        }
        Ok(())
    }

    /// Checks a draft and turns it into a message, its parent and its bytes;
    /// for a chosen id already sent with the same content, also the first
    /// delivery.
    fn prepare(&self, draft: &Draft) -> Result<Prepared> {
        check_draft(draft, &self.config)?;
        let parent = match &draft.in_reply_to {
            Some(pid) => Some(
                self.find_with(pid, draft.task.as_ref())?
                    .ok_or_else(|| MailError::ParentNotFound { id: pid.clone() })?,
            ),
            None => None,
        };
        let task = match (&parent, &draft.task) {
            (Some(p), _) => check_parent(draft, &p.message)?,
            (None, Some(task)) => task.clone(),
            (None, None) => unreachable!("only responses lack a task, and they name their request"),
        };
        let id = match &draft.id {
            Some(id) => id.clone(),
            None => MessageId::from(SortableId::generate(self.state.clock().as_ref())),
        };
        let message = to_message(draft, id, task, self.state.now());
        let mut first = None;
        if draft.id.is_some()
            && let Some(found) = self.find(&message.id)?
        {
            if !found.message.same_content(&message) {
                return Err(MailError::IdTaken {
                    id: message.id,
                    location: found.location,
                });
            }
            first = Some(found.message);
        }
        let bytes = self.encode(&message)?;
        Ok(Prepared {
            message,
            parent,
            bytes,
            first,
            chosen: draft.id.is_some(),
        })
    }

    fn encode(&self, message: &Message) -> Result<Vec<u8>> {
        let bytes =
            to_canonical_json(message).map_err(|source| chipset_store::Error::Serialize {
                path: self
                    .layout
                    .file(&Location::Inbox(message.to.clone()), &message.id),
                source,
            })?;
        if bytes.len() as u64 > self.state.read_cap() {
            return Err(MailError::MessageTooLarge {
                size: bytes.len(),
                cap: self.state.read_cap(),
            });
        }
        Ok(bytes)
    }

    /// Enters published replies in the reply index (no-clobber: a marker that
    /// exists already is left alone).
    pub(crate) fn link_replies(&self, replies: &[Message]) -> Result<()> {
        let mut items = Vec::new();
        for m in replies {
            let Some(parent) = &m.in_reply_to else {
                continue;
            };
            let marker = ReplyMarker {
                id: m.id.clone(),
                kind: m.kind,
                to: m.to.clone(),
                parent: parent.clone(),
            };
            let path = self.layout.reply_marker(parent, m.kind, &m.id);
            let bytes =
                to_canonical_json(&marker).map_err(|source| chipset_store::Error::Serialize {
                    path: path.clone(),
                    source,
                })?;
            items.push((path, bytes));
        }
        match items.len() {
            0 => {}
            1 => match self.state.create_new(&items[0].0, &items[0].1) {
                Ok(()) | Err(chipset_store::Error::AlreadyExists { .. }) => {}
                Err(e) => return Err(e.into()),
            },
            _ => {
                self.state.create_new_batch(&items)?;
            }
        }
        Ok(())
    }

    /// The seed's side effect of a response: archive the request it answers.
    fn archive_answered(
        &self,
        parent: &Found,
        response: &Message,
    ) -> Result<Option<ManifestEvent>> {
        if response.kind != Kind::Response {
            return Ok(None);
        }
        let Location::Inbox(agent) = &parent.location else {
            return Ok(None);
        };
        let request = &parent.message;
        match self.move_message(&request.id, &parent.location, &Location::Archive)? {
            Moved::Done => Ok(Some(ManifestEvent::Archived {
                id: request.id.clone(),
                agent: agent.clone(),
                task: request.phase.clone(),
                reply: Some(response.id.clone()),
                at: self.state.now(),
                reconciled: false,
            })),
            Moved::Gone | Moved::Taken => Ok(None),
        }
    }

    pub(crate) fn move_message(
        &self,
        id: &MessageId,
        from: &Location,
        to: &Location,
    ) -> Result<Moved> {
        let src = self.layout.file(from, id);
        let dst = self.layout.file(to, id);
        match self.state.move_noclobber(&src, &dst) {
            Ok(()) => {
                tracing::debug!(%id, from = %from, to = %to, "moved message");
                Ok(Moved::Done)
            }
            Err(chipset_store::Error::NotFound { .. }) => Ok(Moved::Gone),
            Err(chipset_store::Error::AlreadyExists { .. }) => Ok(Moved::Taken),
            Err(e) => Err(e.into()),
        }
    }

    // ---- finding -------------------------------------------------------

    /// Returns the agents that have an inbox directory, sorted.
    ///
    /// # Errors
    ///
    /// [`MailError::Store`] when `inbox/` cannot be listed; [`MailError::Corrupt`]
    /// for an entry in it that is not a valid agent id.
    pub fn agents(&self) -> Result<Vec<AgentId>> {
        let root = self.layout.inbox_root();
        self.state
            .list(&root)?
            .into_iter()
            .map(|name| {
                AgentId::new(name.as_str())
                    .map_err(|_| stray(root.join(&name), "not an agent inbox directory").into())
            })
            .collect()
    }

    /// Returns where the message `id` is, or `None` when it is nowhere.
    ///
    /// Looks in the inboxes (one stat per agent), `archive/`, `archive/orphan/`
    /// and then the by-task folders (one stat per swept task), in the order
    /// messages move, so a message moving at the same time is not missed. The
    /// cost does not grow with the number of messages.
    ///
    /// # Errors
    ///
    /// [`MailError::Store`] when a directory cannot be listed or stat fails.
    pub fn locate(&self, id: &MessageId) -> Result<Option<Location>> {
        self.locate_with(id, None)
    }

    fn locate_with(&self, id: &MessageId, task: Option<&TaskId>) -> Result<Option<Location>> {
        let name = file_name(id);
        for agent in self.agents()? {
            if exists(&self.state, &self.layout.inbox(&agent).join(&name))? {
                return Ok(Some(Location::Inbox(agent)));
            }
        }
        for loc in [Location::Archive, Location::Orphan] {
            if exists(&self.state, &self.layout.dir_of(&loc).join(&name))? {
                return Ok(Some(loc));
            }
        }
        if let Some(task) = task
            && exists(&self.state, &self.layout.by_task(task).join(&name))?
        {
            return Ok(Some(Location::ByTask(task.clone())));
        }
        for dir in self.state.list(&self.layout.by_task_root())? {
            if let Ok(task) = TaskId::new(dir.as_str())
                && exists(&self.state, &self.layout.by_task(&task).join(&name))?
            {
                return Ok(Some(Location::ByTask(task)));
            }
        }
        Ok(None)
    }

    /// Returns the message `id` and where it is, or `None` when it is nowhere.
    ///
    /// # Errors
    ///
    /// [`MailError::Corrupt`] when its file is unreadable; as [`Mail::locate`].
    pub fn find(&self, id: &MessageId) -> Result<Option<Found>> {
        self.find_with(id, None)
    }

    fn find_with(&self, id: &MessageId, task: Option<&TaskId>) -> Result<Option<Found>> {
        // A message moves at most twice, so it settles within a few rounds.
        for _ in 0..4 {
            let Some(location) = self.locate_with(id, task)? else {
                return Ok(None);
            };
            let path = self.layout.file(&location, id);
            let read = self
                .state
                .read_bytes(&path)?
                .and_then(|bytes| parse_message(&path, &bytes));
            match read {
                ReadOutcome::Missing => continue,
                ReadOutcome::Corrupt(c) => return Err(c.into()),
                ReadOutcome::Unsupported(u) => return Err(u.into()),
                ReadOutcome::Value(m) => {
                    let message = check_id(&path, id, m)?;
                    return Ok(Some(Found { location, message }));
                }
            }
        }
        Ok(None)
    }

    /// Reads every message in `dir`, sorted by id. Entries that are not
    /// message files, and files that do not parse, come back as corruptions.
    /// Files that vanish between listing and reading (moved on) are skipped.
    pub(crate) fn scan(
        &self,
        dir: &Path,
        skip: &[&str],
    ) -> Result<Vec<std::result::Result<(MessageId, Message), Unreadable>>> {
        let names = self.state.list(dir)?;
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            if skip.contains(&name.as_str()) {
                continue;
            }
            let path = dir.join(&name);
            let Some(id) = id_of(&name) else {
                out.push(Err(
                    stray(path, "not a message file: expected `{id}.json`").into()
                ));
                continue;
            };
            // The directory's parents were checked by the listing; the file
            // itself is opened without following a symlink.
            match read_message(&self.state, &path)? {
                ReadOutcome::Missing => {}
                ReadOutcome::Corrupt(c) => out.push(Err(c.into())),
                ReadOutcome::Unsupported(u) => out.push(Err(Unreadable::Unsupported(u))),
                ReadOutcome::Value(m) => out.push(
                    check_id(&path, &id, m)
                        .map(|m| (id, m))
                        .map_err(Unreadable::from),
                ),
            }
        }
        Ok(out)
    }

    /// As [`Mail::scan`], failing on the first corruption.
    fn scan_strict(&self, dir: &Path) -> Result<Vec<Message>> {
        self.scan(dir, &[])?
            .into_iter()
            .map(|r| r.map(|(_, m)| m).map_err(MailError::from))
            .collect()
    }

    // ---- reading -------------------------------------------------------

    /// Returns the messages in `agent`'s inbox that pass `filter`, in id order
    /// (send order). Reads only that inbox.
    ///
    /// # Errors
    ///
    /// [`MailError::Corrupt`] naming the first file in the inbox that is not a
    /// readable message: a bad file is never skipped. [`MailError::Store`] when
    /// the inbox cannot be listed.
    pub fn inbox(&self, agent: &AgentId, filter: &InboxFilter) -> Result<Vec<Message>> {
        let mut out: Vec<Message> = self
            .scan_strict(&self.layout.inbox(agent))?
            .into_iter()
            .filter(|m| filter.matches(m))
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    /// Returns how many message files `agent`'s inbox holds, from the listing alone.
    ///
    /// # Errors
    ///
    /// [`MailError::Store`] when the inbox cannot be listed.
    pub fn inbox_len(&self, agent: &AgentId) -> Result<usize> {
        self.count_messages(&self.layout.inbox(agent))
    }

    /// Counts the message files in `dir` without holding its listing.
    fn count_messages(&self, dir: &Path) -> Result<usize> {
        let mut n = 0;
        self.state.for_each_name(dir, |name| -> Result<()> {
            n += usize::from(id_of(&name).is_some());
            Ok(())
        })?;
        Ok(n)
    }

    /// Returns true when a response to `id` exists.
    ///
    /// Decided by the response files that exist, not only by chipset's reply
    /// index. The fast path is one listing of the index (`replies/{id}/`),
    /// which holds an entry for every response chipset sent. On a miss, the
    /// request is located and its responses are looked for where they can
    /// be: a response is addressed to the request's sender, so in
    /// `inbox/{sender}/`, and in `archive/` and `archive/by-task/{task}/`
    /// once archived. What entered `archive/` is learnt from the manifest's
    /// `archived` events since the last look (the archive tail, see the
    /// crate docs), so `archive/` is listed only for a request older than
    /// the tail. A folder whose mtime shows nothing entered it since
    /// the request was sent is not listed; of the others only files whose
    /// names sort after the request's id are read (a response is sent after
    /// its request), and a file counts
    /// only when it is a response that names the request, comes from its
    /// addressee and belongs to its task (what [`Mail::send`] would accept).
    /// So a response written by another program, or by a chipset sender that
    /// crashed before its index entry, counts at once, without
    /// [`Mail::doctor`].
    ///
    /// # Errors
    ///
    /// [`MailError::Store`] when a directory cannot be listed;
    /// [`MailError::Corrupt`] when the request's own file is unreadable.
    /// Unreadable files among the candidates are passed over: they can only
    /// make a request look unanswered (the safe side; the doctor reports them).
    pub fn has_reply(&self, id: &MessageId) -> Result<bool> {
        if self.indexed_reply(id)? {
            return Ok(true);
        }
        match self.find(id)? {
            Some(found) => Ok(self.unindexed_reply(&found.message)?.is_some()),
            None => Ok(false),
        }
    }

    /// Returns true when the reply index holds a response to `id`.
    fn indexed_reply(&self, id: &MessageId) -> Result<bool> {
        Ok(self
            .replies_of(id)?
            .iter()
            .any(|(k, _)| *k == Kind::Response))
    }

    /// Returns a response to `request` that the reply index does not know:
    /// the fallback of [`Mail::has_reply`].
    fn unindexed_reply(&self, request: &Message) -> Result<Option<Message>> {
        // Responses archived since the tail last looked enter the index.
        let mut caught = self.catch_up_archive()?;
        if let Some(response) = caught.responses.remove(&request.id) {
            return Ok(Some(response));
        }
        // Another reader may have caught up since this one looked at the index.
        if self.indexed_reply(&request.id)? {
            return self.indexed_response(request);
        }
        let mut dirs = vec![
            self.layout.inbox(&request.from),
            self.layout.by_task(&request.phase),
        ];
        if !caught.covers(request.created_at) {
            dirs.push(self.layout.archive_root());
        }
        let mut found = self.responses_among(std::slice::from_ref(request), &dirs)?;
        Ok(found.pop_first().map(|(_, response)| response))
    }

    /// Returns a response to `request` that the reply index holds (the
    /// message itself, wherever it is now).
    fn indexed_response(&self, request: &Message) -> Result<Option<Message>> {
        for (kind, id) in self.replies_of(&request.id)? {
            if kind == Kind::Response
                && let Some(found) = self.find_with(&id, Some(&request.phase))?
            {
                return Ok(Some(found.message));
            }
        }
        Ok(None)
    }

    /// Reads the files of `dirs` whose names sort after the oldest of
    /// `requests` and returns, per answered request, one response that fits
    /// it. A file is parsed only when it mentions one of the requests' ids.
    fn responses_among(
        &self,
        requests: &[Message],
        dirs: &[PathBuf],
    ) -> Result<BTreeMap<MessageId, Message>> {
        let mut answered = BTreeMap::new();
        let Some(oldest) = requests.iter().map(|r| &r.id).min() else {
            return Ok(answered);
        };
        let wanted: BTreeMap<&MessageId, &Message> = requests.iter().map(|r| (&r.id, r)).collect();
        let sent = requests.iter().map(|r| r.created_at).min();
        for dir in dirs {
            // A response is put into a folder after its request was sent,
            // which sets the folder's mtime; a folder unchanged since (with
            // slack for clocks) cannot hold one, and is not listed. A wrong
            // skip could only keep a request pending, never open the gate.
            if let (Some(sent), Some(changed)) = (sent, modified(&self.state, dir)?)
                && changed.add(MTIME_SLACK) < sent
            {
                continue;
            }
            for name in self.state.list(dir)? {
                let Some(id) = id_of(&name) else { continue };
                if id <= *oldest {
                    continue;
                }
                let path = dir.join(&name);
                let bytes = match self.state.read_bytes(&path) {
                    Ok(ReadOutcome::Value(bytes)) => bytes,
                    // Moved on, unreadable, or not a regular file: not an answer.
                    Ok(_) | Err(chipset_store::Error::Symlink { .. }) => continue,
                    Err(e) => return Err(e.into()),
                };
                if !wanted
                    .keys()
                    .any(|w| contains(&bytes, w.as_str().as_bytes()))
                {
                    continue;
                }
                let ReadOutcome::Value(m) = parse_message(&path, &bytes) else {
                    continue;
                };
                if m.id != id {
                    continue;
                }
                if let Some(parent) = m.in_reply_to.as_ref().and_then(|p| wanted.get(p))
                    && answers(&m, parent)
                {
                    answered.entry(parent.id.clone()).or_insert(m);
                }
            }
        }
        Ok(answered)
    }

    /// Returns the replies the index knows for `parent`: kind and id, by id.
    pub(crate) fn replies_of(&self, parent: &MessageId) -> Result<Vec<(Kind, MessageId)>> {
        Ok(self
            .state
            .list(&self.layout.replies(parent))?
            .iter()
            .filter_map(|n| parse_marker(n))
            .collect())
    }

    /// Returns the requests of `task` that expect a reply, are not archived
    /// and have no response, in id order: the commit gate (the task may
    /// commit when the list is empty).
    ///
    /// Looks at every inbox (archived messages are never pending), through the
    /// gate cache (see the crate docs): only the task's entries are read, and
    /// an inbox changed since the cache saw it is listed again. A request
    /// still in its inbox counts as answered when a response that fits it
    /// exists: in an inbox, in the reply index, or (looked for only when the
    /// first two do not answer) in `archive/` (through the archive tail, as
    /// [`Mail::has_reply`] does) or the task's by-task archive,
    /// among the files newer than the oldest such request. So a response
    /// another program wrote (nubos-pilot does not move the request when it
    /// sends one) takes the request off this list at once.
    ///
    /// # Errors
    ///
    /// Fails closed: [`MailError::Corrupt`] naming the file when any inbox
    /// holds a file that is not a readable message (it could be one of this
    /// task's requests); [`MailError::QuarantinedInbox`] when the doctor has
    /// moved such a file aside and no person has dealt with it yet (repair
    /// must not turn a blocked gate into an open one); and
    /// [`MailError::Store`] when an inbox cannot be read. Never a shorter list.
    pub fn pending_replies(&self, task: &TaskId) -> Result<Vec<Message>> {
        let files = self.gate_files(task)?;
        // A request whose response exists is answered, whoever wrote the
        // response and whether or not the request was moved yet.
        let mut out = Vec::new();
        for f in files.iter().filter(|f| f.facts.needs_reply) {
            let Some(id) = id_of(&f.name) else { continue };
            let path = self.layout.inbox(&f.agent).join(&f.name);
            match read_message(&self.state, &path)? {
                // Archived since the listing: archived requests are never pending.
                ReadOutcome::Missing => {}
                ReadOutcome::Corrupt(c) => return Err(c.into()),
                ReadOutcome::Unsupported(u) => return Err(u.into()),
                ReadOutcome::Value(m) => out.push(check_id(&path, &id, m)?),
            }
        }
        // What `answers` checks, from the cached facts of the task's responses.
        let mut answered: BTreeSet<MessageId> = out
            .iter()
            .filter(|q| {
                files.iter().any(|r| {
                    r.facts.kind == Kind::Response
                        && r.facts.in_reply_to.as_ref() == Some(&q.id)
                        && r.facts.from == q.to
                })
            })
            .map(|q| q.id.clone())
            .collect();
        for q in &out {
            if !answered.contains(&q.id) && self.indexed_reply(&q.id)? {
                answered.insert(q.id.clone());
            }
        }
        out.retain(|q| !answered.contains(&q.id));
        let mut caught = Caught::default();
        if !out.is_empty() {
            // Responses archived since the tail last looked enter the index.
            caught = self.catch_up_archive()?;
            let mut still = Vec::with_capacity(out.len());
            for q in out {
                // Found now, or by another reader that caught up since the
                // index was looked at above.
                if !caught.responses.contains_key(&q.id) && !self.indexed_reply(&q.id)? {
                    still.push(q);
                }
            }
            out = still;
        }
        if !out.is_empty() {
            let found = self.responses_among(&out, &[self.layout.by_task(task)])?;
            out.retain(|q| !found.contains_key(&q.id));
            // Only requests older than the tail can have a response in
            // `archive/` that the tail did not see.
            let old: Vec<Message> = out
                .iter()
                .filter(|q| !caught.covers(q.created_at))
                .cloned()
                .collect();
            if !old.is_empty() {
                let found = self.responses_among(&old, &[self.layout.archive_root()])?;
                out.retain(|q| !found.contains_key(&q.id));
            }
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    /// Returns the whole thread `id` belongs to, in causal order (every
    /// message after the one it replies to; otherwise send order): its
    /// ancestors up to the root and every reply below the root, wherever
    /// they are (inbox, archive, by-task or orphan archive).
    ///
    /// Replies are found through the reply index, and among the messages of
    /// the thread's tasks (the start message's and its ancestors') in the
    /// inboxes, and those newer than the root in `archive/` and the task's
    /// by-task archive (so a reply written or archived by another program is
    /// found before the doctor has indexed it). The inboxes and `archive/`
    /// are read through the gate cache: the cost is the task's own mail.
    ///
    /// # Errors
    ///
    /// [`MailError::NotFound`] when `id` does not exist; [`MailError::Corrupt`]
    /// when a file on the way, or in an inbox, is unreadable.
    pub fn thread(&self, id: &MessageId) -> Result<Vec<Message>> {
        let start = self
            .find(id)?
            .ok_or_else(|| MailError::NotFound { id: id.clone() })?;
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
                    let path = dir.join(&f.name);
                    match read_message(&self.state, &path)? {
                        ReadOutcome::Missing => {}
                        ReadOutcome::Corrupt(c) => return Err(c.into()),
                        ReadOutcome::Unsupported(u) => return Err(u.into()),
                        ReadOutcome::Value(m) => unindexed.push(check_id(&path, &id, m)?),
                    }
                }
            }
            // Replies another program archived: only files newer than the
            // root can be below it. Unreadable ones are the doctor's to
            // report (a folder the cache cannot take is read whole).
            let archived: Option<Vec<String>> = match walk.folder(&Folder::Archive, false) {
                Ok(files) => Some(
                    files
                        .unwrap_or_default()
                        .into_iter()
                        .filter(|f| f.parent.is_some())
                        .map(|f| f.name)
                        .collect(),
                ),
                Err(MailError::Corrupt(_) | MailError::Unsupported(_)) => None,
                Err(e) => return Err(e),
            };
            walk.finish(&agents);
            let archive = self.layout.archive_root();
            let by_task = self.layout.by_task(task);
            let mut candidates: Vec<(PathBuf, String)> = match archived {
                Some(names) => names.into_iter().map(|n| (archive.clone(), n)).collect(),
                None => self
                    .state
                    .list(&archive)?
                    .into_iter()
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
                let Some(id) = id_of(&name).filter(|id| *id > root.id) else {
                    continue;
                };
                let path = dir.join(&name);
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

    // ---- changing ------------------------------------------------------

    /// Archives a message: moves it from its inbox to `archive/{id}.json`
    /// and appends an `archived` event.
    ///
    /// **Commit point:** the no-clobber move into `archive/`. A failure
    /// before it leaves nothing visible. After it the message is archived;
    /// the follow-up (entering an unindexed response in the reply index,
    /// the `archived` event) is done as well as it can be, and its failure
    /// is logged, not returned (the doctor completes a missing index entry
    /// and a missing `archived` event).
    ///
    /// Of two processes archiving the same message, exactly one gets
    /// [`ArchiveOutcome::Archived`]; the other gets
    /// [`ArchiveOutcome::AlreadyArchived`], as does archiving a message that
    /// has left its inbox in any other way, which makes archiving again (a
    /// retry) a success that changes nothing. Whether a request has a reply is
    /// answered as [`Mail::has_reply`] answers it: from the reply index, and
    /// on a miss from the response files that exist (a response found that
    /// way is entered in the index). For replies chipset sent the cost does
    /// not grow with the archive.
    ///
    /// # Errors
    ///
    /// [`MailError::ArchiveWithoutReply`] for a message that needs a reply
    /// ([`Message::needs_reply`]) and has none; [`MailError::NotFound`] when
    /// no message has this id; [`MailError::Corrupt`] when its file is
    /// unreadable (it might be a request); [`MailError::Store`] when a step
    /// before the commit point fails, or, with
    /// [`chipset_store::Error::OutcomeUnknown`], when the move's sync failed
    /// (the message may be archived: archive again).
    pub fn archive(&self, id: &MessageId) -> Result<ArchiveOutcome> {
        let found = self
            .find(id)?
            .ok_or_else(|| MailError::NotFound { id: id.clone() })?;
        let Location::Inbox(agent) = &found.location else {
            return Ok(ArchiveOutcome::AlreadyArchived(found.location));
        };
        let message = found.message;
        let mut unindexed = None;
        if message.needs_reply() && !self.indexed_reply(id)? {
            match self.unindexed_reply(&message)? {
                Some(response) => unindexed = Some(response),
                None => return Err(MailError::ArchiveWithoutReply { id: id.clone() }),
            }
        }
        match self.move_message(id, &found.location, &Location::Archive)? {
            Moved::Done => {
                // Enter the response in the index, so the next look is the fast one.
                if let Some(response) = unindexed
                    && let Err(e) = self.link_replies(&[response])
                {
                    tracing::warn!(%id, error = %e, "archived, but the reply index was not updated");
                }
                let event = ManifestEvent::Archived {
                    id: id.clone(),
                    agent: agent.clone(),
                    task: message.phase.clone(),
                    reply: None,
                    at: self.state.now(),
                    reconciled: false,
                };
                if let Err(e) = self.manifest().and_then(|log| Ok(log.append(&event)?)) {
                    tracing::warn!(%id, error = %e, "archived, but the `archived` event was not appended");
                }
                Ok(ArchiveOutcome::Archived(message))
            }
            Moved::Gone | Moved::Taken => Ok(ArchiveOutcome::AlreadyArchived(
                self.locate(id)?.unwrap_or(Location::Archive),
            )),
        }
    }

    /// Moves every message of `task` from the inboxes and `archive/` into
    /// `archive/by-task/{task}/`, then appends a `task-swept` event. Call it
    /// after the task commits.
    ///
    /// **Commit points:** each message's no-clobber move is its own; the
    /// folder `archive/by-task/{task}/` existing is what marks the task swept
    /// (made by the first move, or by the sweep itself when there is nothing
    /// to move). The `task-swept` event is follow-up: its failure is logged,
    /// not returned. Each move is atomic and never overwrites, so a crash or
    /// failure in the middle loses nothing, and running it again (a retry)
    /// moves the rest. Messages sent to the task afterwards stay in their
    /// inboxes (the doctor treats them as orphans). Finds the task's
    /// messages in the inboxes and `archive/` through the gate cache (see
    /// the crate docs): a folder unchanged since the cache saw it is not
    /// listed, and files without a cache entry (another program's) are read.
    ///
    /// # Errors
    ///
    /// [`MailError::Corrupt`] naming a file it could not read (after moving
    /// every message it could; no event is written, so a run after the doctor
    /// completes the sweep); [`MailError::PartlySwept`] when a filesystem step
    /// fails after some messages moved (run it again); [`MailError::Store`]
    /// when one fails before any moved (nothing visible changed, or, with
    /// [`chipset_store::Error::OutcomeUnknown`], the first move may have
    /// happened).
    pub fn sweep_task_on_commit(&self, task: &TaskId) -> Result<SweepReport> {
        let mut moved = 0;
        let partly = |moved: usize, e: MailError| {
            if moved == 0 {
                e
            } else {
                MailError::PartlySwept {
                    task: task.clone(),
                    moved,
                    source: Box::new(e),
                }
            }
        };
        let corrupt = self
            .sweep_moves(task, &mut moved)
            .map_err(|e| partly(moved, e))?;
        if let Some(c) = corrupt {
            return Err(c.into());
        }
        let dir = self.layout.by_task(task);
        let total = (|| -> Result<usize> {
            self.state.ensure_dir(&dir)?;
            self.count_messages(&dir)
        })()
        .map_err(|e| partly(moved, e))?;
        let event = ManifestEvent::TaskSwept {
            task: task.clone(),
            count: moved,
            total,
            at: self.state.now(),
            reconciled: false,
        };
        if let Err(e) = self.manifest().and_then(|log| Ok(log.append(&event)?)) {
            tracing::warn!(%task, error = %e, "swept, but the `task-swept` event was not appended");
        }
        Ok(SweepReport { moved, total })
    }

    /// The moves of a sweep; counts them in `moved` and returns the first
    /// unreadable file met.
    ///
    /// The task's files in each inbox and in `archive/` come from the gate
    /// cache (see the crate docs): a folder unchanged since the cache saw it
    /// is not listed, a changed one is listed and only its new files read.
    /// A folder the cache cannot take (it holds a file that is not a
    /// readable, supported message) is read whole, as without the cache, so
    /// every other message of the task still moves.
    fn sweep_moves(&self, task: &TaskId, moved: &mut usize) -> Result<Option<Unreadable>> {
        let dest = Location::ByTask(task.clone());
        let agents = self.agents()?;
        let mut folders: Vec<Folder> = agents.iter().cloned().map(Folder::Inbox).collect();
        folders.push(Folder::Archive);
        let mut walk = self.task_files(task);
        let mut corrupt: Option<Unreadable> = None;
        for folder in &folders {
            let source = match folder {
                Folder::Inbox(agent) => Location::Inbox(agent.clone()),
                Folder::Archive => Location::Archive,
            };
            let ids: Vec<MessageId> = match walk.folder(folder, false) {
                Ok(files) => files
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|f| id_of(&f.name))
                    .collect(),
                Err(MailError::Corrupt(_) | MailError::Unsupported(_)) => {
                    let mut ids = Vec::new();
                    for entry in self.scan(&self.layout.dir_of(&source), &[BY_TASK, ORPHAN])? {
                        match entry {
                            Err(c) => {
                                corrupt.get_or_insert(c);
                            }
                            Ok((id, m)) if m.phase == *task => ids.push(id),
                            Ok(_) => {}
                        }
                    }
                    ids
                }
                Err(e) => return Err(e),
            };
            for id in ids {
                match self.move_message(&id, &source, &dest)? {
                    Moved::Done => *moved += 1,
                    Moved::Gone => {}
                    Moved::Taken => {
                        tracing::warn!(%id, "message is in the by-task archive and in {source}");
                    }
                }
            }
        }
        walk.finish(&agents);
        Ok(corrupt)
    }

    // ---- status --------------------------------------------------------

    /// Returns counts for a status screen, from directory listings only.
    ///
    /// # Errors
    ///
    /// [`MailError::Store`] when a directory cannot be listed;
    /// [`MailError::Corrupt`] for a stray entry in `inbox/`.
    pub fn counts(&self) -> Result<MailCounts> {
        let mut inbox = BTreeMap::new();
        for agent in self.agents()? {
            let n = self.inbox_len(&agent)?;
            inbox.insert(agent, n);
        }
        Ok(MailCounts {
            inbox,
            archived: self.count_messages(&self.layout.archive_root())?,
            orphaned: self.count_messages(&self.layout.orphan_root())?,
            swept_tasks: {
                let mut n = 0;
                self.state
                    .for_each_name(&self.layout.by_task_root(), |_| -> Result<()> {
                        n += 1;
                        Ok(())
                    })?;
                n
            },
        })
    }

    /// Reads the manifest: every whole record, whatever a crash left.
    ///
    /// # Errors
    ///
    /// [`MailError::Store`] when it cannot be read.
    pub fn read_manifest(&self) -> Result<Manifest> {
        let contents = self
            .state
            .log_reader(&self.layout.manifest())?
            .read::<serde_json::Value>()?;
        let mut events = Vec::with_capacity(contents.records.len());
        let mut foreign = Vec::new();
        for record in contents.records {
            match serde_json::from_value::<ManifestEvent>(record.clone()) {
                Ok(e) => events.push(e),
                Err(_) => foreign.push(record),
            }
        }
        Ok(Manifest {
            events,
            foreign,
            bad_lines: contents.bad_lines,
            torn_tail: contents.torn_tail,
        })
    }
}
