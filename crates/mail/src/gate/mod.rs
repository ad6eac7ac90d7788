//! The gate cache: what [`Mail::pending_replies`] needs from each inbox file
//! (and [`Mail::sweep_task_on_commit`] and [`Mail::thread`] from each inbox
//! and `archive/` file), kept under `mail/.gate/` so that they cost what the
//! task's own mail costs, not what all mail costs.
//!
//! # What is cached
//!
//! A message file never changes once published (the seed's contract: files
//! are written whole under a new name and then only moved), so what the gate
//! needs from it (task, kind, whether it needs a reply, what it answers, who
//! sent it) can be kept, keyed by the file's name *and inode number*, and is
//! never stale for a name that still holds that inode. Two kinds of file:
//!
//! - `.gate/inbox/{agent}.json`: every message file of one inbox (name,
//!   inode, size, times, task, parent, and for the gate's files, their
//!   facts), with the directory's stamp when it was listed;
//!   `.gate/archive.json` the same for the top level of `archive/`.
//! - `.gate/task/{task}.json`: per inbox and for `archive/`, the task's
//!   files there (its gate files, requests that need a reply and responses,
//!   with their facts; its other files with their parent), with the
//!   directory's stamp they hold for, and its open requests themselves
//!   (read under that stamp; written once, as messages, not again among
//!   the files); and when the task's last gate began. The
//!   sweep moves the task's files named there, the thread reads the
//!   replies among them, the gate returns the open requests (reading a
//!   request's file only when its inbox changed since it was kept).
//!
//! - `.gate/sent/{agent}.jsonl`: the sent journal (see `sent.rs`): each
//!   send appends the file it published (its identity, size and times
//!   after the publish, and its message), so that a listing right after
//!   the sends takes those files from their senders' records instead of
//!   reading them back; a file no record matches is read.
//!
//! # What the cache relies on (directory stamps)
//!
//! A directory's stamp is its device, inode number, mtime and ctime. Every
//! create, rename into or out of, link and unlink in a directory sets its
//! mtime and ctime to the current time, on every local Linux filesystem; a
//! program that sets the mtime back (`touch -d`, `utimensat`, an archiver
//! restoring times) still moves the ctime, which no program can set. So when
//! an inbox's stamp equals the stamp a cache entry was made at, the entries
//! in it are exactly what the listing then saw. The gate stats each inbox
//! (one `statx` relative to the open `inbox/` directory, from one listing of
//! `inbox/`; no listing of the inbox) and uses the cache only on equality;
//! otherwise it
//! lists that inbox, reuses the facts of files it already knows (same name,
//! same inode) and reads only the new ones, exactly as the uncached gate
//! reads them (an unreadable or unsupported file fails the gate closed,
//! but a message of a phase no task can be, which no gate asks for:
//! [`Message::foreign_task`]).
//!
//! Where it would not hold, and what is done about it:
//!
//! - **Coarse timestamps.** The kernel stamps with a clock that ticks every
//!   few milliseconds (and some filesystems keep whole seconds), so two
//!   changes in one tick leave the same stamp: a listing taken between them
//!   would be wrong under an unchanged stamp. A stamp younger than
//!   [`RACY`] (2 s) when it is read is *racy*: the cache is still used for
//!   the facts of known files, but the inbox is listed every time until its
//!   stamp is older than that.
//! - **Clock steps.** A stamp in the future of the system clock is racy too.
//!   A clock stepped back by more than [`RACY`] could, in principle, give a
//!   later change exactly an earlier stamp (to the nanosecond, mtime and
//!   ctime both); that is the one case the cache cannot see.
//! - **Files rewritten in place.** A program that rewrites a message file in
//!   place (same inode, `O_TRUNC`) changes no directory stamp. The seed
//!   forbids it (messages are immutable), and nubos-pilot writes new files.
//! - **Filesystems without directory timestamps** (some FUSE and network
//!   mounts): chipset does not support them (see the store's Durability).
//!
//! # What a file's entry relies on
//!
//! A file's entry in a folder cache is reused, at a listing of its changed
//! folder, only while the file is the one it was taken from: the same
//! inode, size, mtime and ctime as when it was stat-ed. A settled folder's
//! files are read without a stat (the scan's three calls per file, not
//! four): such an entry keeps the length read and when the read began,
//! and holds while the file has that length and both its times are
//! [`RACY`] older than the read. Any change to a file, and its entering a
//! folder, sets its ctime to the time of the change, which no program can
//! set back; so a file that old was not changed since it was read. A
//! clock stepped back by more than [`RACY`] after the read could hide a
//! change of the same length to such a file (the seed forbids changing a
//! message file at all); once seen at a listing, the entry holds by the
//! file's stamp instead.
//!
//! # What the sweep takes on trust
//!
//! The sweep ([`Look::Sweep`]) does not list an inbox whose slice held none
//! of the task's files when the task's last gate looked, if that gate
//! began less than [`SWEEP_TRUST`] (ten minutes) ago and the inbox is the
//! same directory (device and inode), even when its stamp changed since:
//! other tasks' sweeps and sends change most inboxes between a task's gate
//! and its sweep, and listing each would cost what all mail costs. What it
//! can miss: a message of the task that another program (or a late
//! sender) put into such an inbox after the gate looked at it. It stays in
//! its inbox, as a message sent after the sweep does, and [`Mail::doctor`]
//! reports it (`messaging-orphan-inbox`, its task swept). With no task
//! cache, an unreadable one, no gate time, or an older gate, the sweep
//! lists every changed inbox as before. The gate and the thread never take
//! this path.
//!
//! # Self-healing
//!
//! Cache files are written with `write_unsynced` (a temp renamed into place,
//! no sync; a folder's cache on a thread of its own while the walk goes
//! on, and a gate's task cache on one while the gate looks for the
//! requests' replies, both joined before the gate returns: `reads.rs`,
//! `encode.rs`): a reader sees a whole
//! file, and after a power cut a cache file may be missing, old, empty or
//! partly written. Every entry carries the
//! stamp it holds for and is used only when that stamp is the inbox's stamp
//! now, so an old file is simply not used; a file that does not parse (or
//! names another task, or another format version) is ignored and rebuilt.
//! Concurrent gates need no lock: each writes whole files whose every entry
//! is valid on its own; a lost update only costs the next gate a listing.
//! A stamp is always taken *before* the listing it labels, so a change during
//! the listing leaves an entry labelled with an older stamp, which no later
//! stat matches. Nothing here can make the gate open where the uncached gate
//! would not: at worst the cache is not used.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::MessageId;
use chipset_store::{AgentId, ReadOutcome, StateDir, StatePath, TaskId};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::format::{Kind, MESSAGE_SCHEMA, Message};
use crate::layout::{BY_TASK, ORPHAN, id_of, never_a_message};
use crate::mail::{Mail, message_cap, stray};

/// The cache's folder under `mail/` (a dot-name: listings skip it).
pub(crate) const GATE_DIR: &str = ".gate";
/// The format version of the folder cache files; any other version is
/// ignored. Version 2 added, per file, its parent (`in_reply_to`) and, per
/// task, every file of the task (not only the gate's) and `archive/`.
const VERSION: u32 = 2;
/// The format version of the task cache files. Version 3 added, per inbox,
/// the task's open requests ([`Slice::requests`], their file's bytes as a
/// string) and the time of the task's last gate ([`TaskCache::gated`]);
/// version 4 keeps each open request as the message itself (an object,
/// written and read in one pass, not a string to escape, unescape and
/// parse again); version 5 leaves out of a slice's `files` the open
/// requests its `requests` keep (their facts are their messages': put
/// back when the file is read, [`Slice::restore_files`]). A version 4
/// file is read as it is, and a version 2 file as one without requests
/// (its requests are read from their files, and the sweep lists what it
/// cannot trust). Any other is ignored (and rebuilt).
const TASK_VERSION: u32 = 5;
/// How long after a task's gate the sweep trusts that an inbox which held
/// none of the task's files then still holds none ([`Look::Sweep`]).
pub(crate) const SWEEP_TRUST: Duration = Duration::from_secs(10 * 60);
/// How old a directory stamp must be before the cache trusts it.
pub(crate) const RACY: Duration = Duration::from_secs(2);
/// How many entries new since a task's slice was listed are read directly
/// ([`TaskFiles::since`]); with more, the folder cache is used.
const SINCE_READS: usize = 32;
/// A cache file larger than this is ignored (and rebuilt).
const MAX_CACHE_FILE: u64 = 256 * 1024 * 1024;

/// A directory's identity and last change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Stamp {
    dev: u64,
    ino: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    /// Stats `dir`: its stamp and whether it is old enough to trust, or
    /// `None` when it is missing.
    pub(crate) fn of(state: &StateDir, dir: &StatePath) -> Result<Option<(Stamp, bool)>> {
        let Some(meta) = state.stat(dir)? else {
            return Ok(None);
        };
        let stamp = Stamp::from(&meta);
        Ok(Some((stamp, stamp.settled(SystemTime::now()))))
    }

    /// True when both times are at least [`RACY`] before `now`.
    pub(crate) fn settled(&self, now: SystemTime) -> bool {
        self.settled_at(time_of(now))
    }

    /// True when both times are at least [`RACY`] before `at` (a time as
    /// [`time_of`] gives it).
    fn settled_at(&self, at: (i64, i64)) -> bool {
        let ns = |(s, n): (i64, i64)| i128::from(s) * 1_000_000_000 + i128::from(n);
        let newest = ns(self.mtime).max(ns(self.ctime));
        at != NEVER && ns(at) - newest >= RACY.as_nanos() as i128
    }
}

/// A time no stamp is ever settled at (nor any file's times equal).
const NEVER: (i64, i64) = (i64::MIN, 0);

/// `t` as seconds and nanoseconds since the Unix epoch, as a stamp's times
/// are kept ([`NEVER`] before the epoch).
fn time_of(t: SystemTime) -> (i64, i64) {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (
            i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            i64::from(d.subsec_nanos()),
        ),
        Err(_) => NEVER,
    }
}

impl From<&chipset_store::Stat> for Stamp {
    fn from(meta: &chipset_store::Stat) -> Self {
        Stamp {
            dev: meta.dev,
            ino: meta.ino,
            mtime: meta.mtime,
            ctime: meta.ctime,
        }
    }
}

/// What the gate needs from a request or a response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Facts {
    pub(crate) kind: Kind,
    pub(crate) needs_reply: bool,
    pub(crate) in_reply_to: Option<MessageId>,
    pub(crate) from: AgentId,
}

impl Facts {
    /// The facts of `m` when the gate needs them (a request that needs a
    /// reply, or a response), else `None`.
    fn of(m: &Message) -> Option<Facts> {
        (m.needs_reply() || m.kind == Kind::Response).then(|| Facts {
            kind: m.kind,
            needs_reply: m.needs_reply(),
            in_reply_to: m.in_reply_to.clone(),
            from: m.from.clone(),
        })
    }
}

/// One message file of an inbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct FileEntry {
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    task: TaskId,
    /// For an entry taken from a read without a stat (the first read of a
    /// folder): when (system clock) the read began; its stamp is then
    /// unknown ([`FileEntry::still`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    read: Option<(i64, i64)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    facts: Option<Facts>,
    /// The message's `in_reply_to`, for every kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    parent: Option<MessageId>,
}

/// What is known of the file a message was taken from.
pub(super) enum Known {
    /// Its stamp and size, from a `statx` of it.
    Stat { stamp: Stamp, size: u64 },
    /// Its length, as read from it after `at` (no stat taken).
    Read { len: u64, at: SystemTime },
}

impl FileEntry {
    /// This entry, when it still holds for the file now under its name,
    /// whose stamp is `file` and size `size`:
    ///
    /// - an entry taken with a stat holds while the file has the same
    ///   inode, size, mtime and ctime;
    /// - one taken from a read without a stat ([`FileEntry::read`]) holds
    ///   when the file has the same size and both its times are at least
    ///   [`RACY`] before the read began. Any change to a file, and its
    ///   entering the folder (a create, rename or link), sets its ctime to
    ///   the time of the change, which no program can set back: a file
    ///   whose ctime is that much older than the read was not changed
    ///   since it was read. The entry comes back with the file's stamp,
    ///   held from then on as one taken with a stat.
    fn still(&self, file: Stamp, size: u64) -> Option<FileEntry> {
        if self.size != size {
            return None;
        }
        match self.read {
            None => (self.ino == file.ino && self.mtime == file.mtime && self.ctime == file.ctime)
                .then(|| self.clone()),
            Some(read) => file.settled_at(read).then(|| FileEntry {
                ino: file.ino,
                mtime: file.mtime,
                ctime: file.ctime,
                read: None,
                ..self.clone()
            }),
        }
    }
}

/// A folder's message files with their entries, sorted by name (each name
/// once): what a listing found, shared with the thread that writes it as
/// the folder's cache.
type Listing = Arc<Vec<(String, FileEntry)>>;

/// `.gate/inbox/{agent}.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct InboxCache {
    v: u32,
    stamp: Stamp,
    settled: bool,
    files: BTreeMap<String, FileEntry>,
}

/// [`InboxCache`] as it is written, borrowing its files from a listing
/// sorted by name (the same JSON).
#[derive(Serialize)]
struct InboxCacheRef<'a> {
    v: u32,
    stamp: Stamp,
    settled: bool,
    files: folder::Sorted<'a>,
}

/// One inbox's part of a task's cache.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Slice {
    stamp: Option<Stamp>,
    /// Whether `.quarantine/` was in the inbox (creating or removing it
    /// changes the inbox's stamp; files moved into it do not, so while it
    /// is there it is looked at every time).
    quarantine: bool,
    files: BTreeMap<String, Facts>,
    /// The task's other files (notifies, requests that need no reply),
    /// with their parent: what the sweep and the thread need.
    #[serde(default)]
    others: BTreeMap<String, Option<MessageId>>,
    /// The folder's stamp taken before the listing these files come from
    /// (settled or not): every entry whose ctime is older was listed then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    listed: Option<Stamp>,
    /// The task's open requests among `files` (those that need a reply),
    /// by name, as read from their files (or vouched for by their senders'
    /// records) while `stamp` held: the gate returns them without reading
    /// the files again while it holds.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    requests: BTreeMap<String, Message>,
}

impl Slice {
    /// Puts back into `files` the open requests that `requests` keeps, with
    /// their messages' facts (a task cache file leaves them out of `files`
    /// since version 5). False when one is not a request that needs a
    /// reply under its own name: its facts cannot be taken from it, and
    /// without them the gate would not see its file, so the whole cache is
    /// not used (a gate that lists and reads can only stay closed).
    #[must_use]
    fn restore_files(&mut self) -> bool {
        for (name, message) in &self.requests {
            // Its own name is `{its id}.json` (compared as text: no id is
            // parsed again for each of thousands).
            if !message.needs_reply() || name.strip_suffix(".json") != Some(message.id.as_str()) {
                return false;
            }
            if !self.files.contains_key(name)
                && let Some(facts) = Facts::of(message)
            {
                self.files.insert(name.clone(), facts);
            }
        }
        true
    }
}

/// `.gate/task/{task}.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct TaskCache {
    v: u32,
    task: TaskId,
    inboxes: BTreeMap<AgentId, Slice>,
    /// The task's files in `archive/` (its top level).
    #[serde(default)]
    archive: Option<Slice>,
    /// When (Unix milliseconds, system clock) the walk of a gate that
    /// looked at every inbox began: every inbox slice held at least then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gated: Option<u64>,
}

/// Who walks a task's folders, and so what [`TaskFiles::folder_at`] may
/// take on trust.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Look {
    /// The commit gate: never misses a file; fails on a quarantined inbox.
    Gate,
    /// The sweep: may skip an inbox that held none of the task's files at
    /// the task's last gate, within [`SWEEP_TRUST`] of it (see
    /// [`TaskFiles::folder_at`]).
    Sweep,
    /// The thread: as the gate, without the quarantine check.
    Read,
}

/// A file of a task in a folder (an inbox or `archive/`).
#[derive(Debug, Clone)]
pub(crate) struct TaskFile {
    pub(crate) name: String,
    /// What the gate needs, for a request that needs a reply or a response.
    pub(crate) facts: Option<Facts>,
    /// Its `in_reply_to`.
    pub(crate) parent: Option<MessageId>,
    /// For a request that needs a reply which this walk read while listing
    /// the folder (from its file or its sender's record): the message,
    /// checked as the gate checks it, so that the gate does not read it a
    /// second time.
    pub(crate) message: Option<Box<Message>>,
}

/// Where a task's files were looked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Folder {
    Inbox(AgentId),
    Archive,
}

/// The task cache of one task, loaded once for a walk over its folders.
pub(crate) struct TaskFiles<'m> {
    mail: &'m Mail,
    path: StatePath,
    cache: TaskCache,
    dirty: bool,
    /// The folder caches this walk is writing on threads of their own
    /// (joined when the walk ends).
    writing: Vec<reads::Writing>,
    /// Slices this walk listed whose files are still to be taken from the
    /// folder's listing, shared with the thread writing its folder cache
    /// ([`TaskFiles::fill`]): their `files` and `others` are empty until
    /// then.
    unfilled: Vec<(Folder, Listing)>,
}

/// Reads a cache file; anything but a whole, parsable file (missing, over
/// the size limit, not a regular file, unreadable) is no cache, rebuilt.
pub(crate) fn load<T: for<'de> Deserialize<'de>>(state: &StateDir, path: &StatePath) -> Option<T> {
    let bytes = match state.read_bytes_capped(path, MAX_CACHE_FILE) {
        Ok(ReadOutcome::Value((bytes, _))) => bytes,
        Ok(_) => return None,
        Err(e) => {
            tracing::debug!(path = %path.display(), error = %e, "ignoring an unreadable gate cache file");
            return None;
        }
    };
    match serde_json::from_slice(&bytes) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::debug!(path = %path.display(), error = %e, "ignoring an unreadable gate cache file");
            None
        }
    }
}

/// Writes a cache file of `state`; a failure only costs the next reader a
/// listing.
pub(crate) fn store_cache_in<T: Serialize>(state: &StateDir, path: &StatePath, value: &T) {
    // Encoded straight into the file: a cache of megabytes is never whole
    // in memory (nor copied as its buffer grows).
    if let Err(error) = state.write_cache_json(path, value) {
        tracing::debug!(path = %path.display(), %error, "could not write a gate cache file");
    }
}

impl Mail {
    pub(crate) fn gate_dir(&self) -> StatePath {
        self.layout.mail().join_static(GATE_DIR)
    }

    fn inbox_cache_path(&self, agent: &AgentId) -> StatePath {
        self.gate_dir().join_static("inbox").join_id(agent, ".json")
    }

    fn archive_cache_path(&self) -> StatePath {
        self.gate_dir().join_static("archive.json")
    }

    fn task_cache_path(&self, task: &TaskId) -> StatePath {
        self.gate_dir().join_static("task").join_id(task, ".json")
    }

    /// Writes a cache file; a failure only costs the next reader a listing.
    pub(crate) fn store_cache<T: Serialize>(&self, path: &StatePath, value: &T) {
        store_cache_in(&self.state, path, value);
    }

    /// Opens the cache of `task` for a walk over its folders
    /// ([`TaskFiles::folder`]); [`TaskFiles::finish`] writes it back.
    pub(crate) fn task_files(&self, task: &TaskId) -> TaskFiles<'_> {
        let path = self.task_cache_path(task);
        let cache = load::<TaskCache>(&self.state, &path)
            .filter(|c| matches!(c.v, VERSION | 4 | TASK_VERSION) && c.task == *task)
            .and_then(|mut c| {
                c.inboxes
                    .values_mut()
                    .chain(c.archive.as_mut())
                    .all(Slice::restore_files)
                    .then_some(TaskCache {
                        v: TASK_VERSION,
                        ..c
                    })
            })
            .unwrap_or_else(|| TaskCache {
                v: TASK_VERSION,
                task: task.clone(),
                inboxes: BTreeMap::new(),
                archive: None,
                gated: None,
            });
        TaskFiles {
            mail: self,
            path,
            cache,
            dirty: false,
            writing: Vec::new(),
            unfilled: Vec::new(),
        }
    }

    /// Returns the open requests of `task` in every inbox (those that need
    /// a reply), with what `check` made of them and of the task's responses
    /// in the inboxes (what each answers, and who sent it), using the cache
    /// where an inbox's stamp says it holds and listing (and reading the
    /// new files of) the others. `check` is handed the requests in the
    /// order they are returned in.
    ///
    /// Fails closed as the uncached scan did: an inbox holding a file that
    /// is not a readable, supported message fails, whatever its task.
    ///
    /// The open requests come with their message: from the task cache while
    /// their inbox's stamp is the one they were read under, else read from
    /// their files (and kept in the cache for the next gate). The task
    /// cache, when it changed, is written on a thread of its own while
    /// `check` runs.
    pub(crate) fn gate_files<R>(
        &self,
        task: &TaskId,
        check: impl FnOnce(&[&Message], &[(MessageId, AgentId)]) -> Result<R>,
    ) -> Result<(Vec<Message>, R)> {
        let started = unix_ms(SystemTime::now());
        let inboxes = self.inbox_stats()?;
        let mut walk = self.task_files(task);
        let mut open: Vec<task::Open> = Vec::new();
        let mut responses: Vec<(MessageId, AgentId)> = Vec::new();
        for (at, (agent, stat)) in inboxes.iter().enumerate() {
            let Some(files) = walk.folder_at(&Folder::Inbox(agent.clone()), Look::Gate, *stat)?
            else {
                continue;
            };
            for f in files {
                let Some(facts) = f.facts else {
                    continue;
                };
                if facts.needs_reply {
                    walk.request(at, agent, f.name, f.message, &mut open)?;
                }
                if facts.kind == Kind::Response
                    && let Some(parent) = facts.in_reply_to
                {
                    responses.push((parent, facts.from));
                }
            }
        }
        walk.gated(started);
        let agents: Vec<AgentId> = inboxes.into_iter().map(|(a, _)| a).collect();
        walk.take_kept(&agents, &mut open)?;
        walk.prune(&agents);
        // Every request has its message now.
        let requests: Vec<&Message> = open.iter().filter_map(|o| o.message.as_deref()).collect();
        let checked = if walk.dirty() {
            let new: Vec<(&AgentId, &str, &Message)> = open
                .iter()
                .filter(|o| o.keep)
                .filter_map(|o| Some((&agents[o.inbox], o.name.as_str(), o.message.as_deref()?)))
                .collect();
            // The walk goes with the write (letting it go joins the folder
            // caches it is writing).
            let new = &new;
            let ((), checked) = reads::beside(
                requests.len(),
                move || walk.write(new),
                || check(&requests, &responses),
            );
            checked
        } else {
            let checked = check(&requests, &responses);
            // The folder caches being written are joined here.
            drop(walk);
            checked
        };
        drop(requests);
        let requests = open.into_iter().filter_map(|o| o.message.map(|m| *m));
        Ok((requests.collect(), checked?))
    }

    /// The agents with an inbox (as [`Mail::agents`]), each with the stat
    /// of its inbox taken relative to the open `inbox/` directory (`None`
    /// when it went away since the listing): one listing and a `statx` per
    /// inbox, no path resolved again.
    pub(crate) fn inbox_stats(&self) -> Result<Vec<(AgentId, Option<chipset_store::Stat>)>> {
        let root = self.layout.inbox_root();
        self.state
            .list_stats(&root)?
            .into_iter()
            .map(|(name, stat)| {
                let agent = AgentId::new(name.as_str()).map_err(|_| {
                    stray(root.as_path().join(&name), "not an agent inbox directory")
                })?;
                Ok((agent, stat))
            })
            .collect()
    }

    /// Fails with [`Error::QuarantinedInbox`] when `inbox/.quarantine/`
    /// holds a file (repair must not open the gate); returns whether the
    /// folder exists.
    fn check_quarantine(&self, inbox: &StatePath) -> Result<bool> {
        let Some(moved) = self.state.list_quarantine(inbox)? else {
            return Ok(false);
        };
        if let Some(path) = moved.into_iter().next() {
            return Err(Error::QuarantinedInbox { path });
        }
        Ok(true)
    }
}

/// `t` as Unix milliseconds (0 before the epoch).
fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

mod encode;
mod entry;
mod folder;
mod reads;
mod sent;
mod task;

use entry::{read_entry, read_entry_in};

#[cfg(test)]
mod reads_tests;
#[cfg(test)]
mod tests;
