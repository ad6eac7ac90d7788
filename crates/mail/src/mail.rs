//! The I/O shell: the [`Mail`] handle applies the checks of `draft.rs` and
//! moves files through `chipset-store`. Here: the handle, its result types
//! and finding messages; sending is in `send.rs`, reading and status in
//! `read.rs`, replies and the gate in `replies.rs`, the thread in
//! `thread.rs`, archive and sweep in `archive.rs`.

use std::path::{Path, PathBuf};

use chipset_store::{
    AgentId, CorruptReason, Corruption, JsonLog, ReadOutcome, StateDir, StatePath, TaskId,
};

use crate::MessageId;

use crate::draft::MailConfig;
use crate::error::Result;
use crate::format::{Kind, Message, parse_message};
use crate::layout::{Layout, Location, message_stem};

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
    /// The server mail lives on ([`Mail::with_backend`]); `None` on a
    /// directory, which keeps its own tuned paths.
    pub(crate) seam: Option<std::sync::Arc<dyn chipset_backend::Backend>>,
    /// How far this process has read the manifest for the archive tail.
    pub(crate) tail: crate::tail::TailMemory,
}

/// A message and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    /// Where the file is.
    pub(crate) location: Location,
    /// The message.
    pub(crate) message: Message,
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

/// The largest message file mail reads: 16 MiB, or the state root's read
/// cap when that is larger (so every file [`Mail::send`] writes reads back).
///
/// The seed sets no size limit. nubos-pilot caps a body at 256 KiB of
/// UTF-8, and JSON escapes a control character as six bytes (`\u0001`), so
/// its largest valid message file is about 1.5 MiB: the cap is ten times
/// that, and only bounds what a hostile or broken file can make a reader
/// hold in memory. A file over it is skipped by [`Mail::inbox`] (with a
/// warning), reported by the doctor and never moved, and fails the commit
/// gate closed.
pub(crate) const MESSAGE_READ_CAP: u64 = 16 * 1024 * 1024;

/// The cap message files are read under: [`MESSAGE_READ_CAP`], or the
/// state's read cap when larger.
pub(crate) fn message_cap(state: &StateDir) -> u64 {
    state.read_cap().max(MESSAGE_READ_CAP)
}

/// Reads a message file's bytes, bounded by [`message_cap`].
pub(crate) fn read_message_bytes(
    state: &StateDir,
    path: &StatePath,
) -> Result<ReadOutcome<Vec<u8>>> {
    Ok(state
        .read_bytes_capped(path, message_cap(state))?
        .map(|(bytes, _)| bytes))
}

/// As [`read_message_bytes`], with the read file's [`chipset_store::Stat`]
/// (from the `statx` the read takes anyway).
pub(crate) fn read_message_bytes_stat(
    state: &StateDir,
    path: &StatePath,
) -> Result<ReadOutcome<(Vec<u8>, chipset_store::Stat)>> {
    Ok(state.read_bytes_capped(path, message_cap(state))?)
}

/// Returns true for a file that is over [`MESSAGE_READ_CAP`].
pub(crate) fn is_too_large(c: &Corruption) -> bool {
    matches!(c.reason, CorruptReason::TooLarge { .. })
}

/// Reads and parses one message file (see [`parse_message`]).
pub(crate) fn read_message(state: &StateDir, path: &StatePath) -> Result<ReadOutcome<Message>> {
    Ok(read_message_bytes(state, path)?.and_then(|bytes| parse_message(path, &bytes)))
}

/// Reads and parses the message file `name` of `folder` (at `path`, for
/// reports), bounded by `cap` ([`message_cap`]), through `buf`: for a walk
/// that reads every file of one folder, reusing one buffer.
pub(crate) fn read_message_in(
    folder: &chipset_store::Folder,
    cap: u64,
    name: &str,
    path: &StatePath,
    buf: &mut Vec<u8>,
) -> Result<ReadOutcome<Message>> {
    Ok(folder
        .read_into(name, cap, buf)?
        .and_then(|()| parse_message(path, buf)))
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
pub(crate) fn modified(
    state: &StateDir,
    dir: &StatePath,
) -> Result<Option<chipset_store::Timestamp>> {
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

pub(crate) fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

pub(crate) fn stray(path: PathBuf, what: &str) -> Corruption {
    Corruption {
        path,
        reason: CorruptReason::WrongShape(what.to_owned()),
    }
}

pub(crate) fn exists(state: &StateDir, path: &StatePath) -> Result<bool> {
    Ok(state.stat(path)?.is_some())
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

/// What the file `name` of the folder `dir`, whose id part is `stem`
/// ([`message_stem`](crate::layout::message_stem)), holds, from what
/// reading it found: the message its name says (its `id` is `stem`), or
/// why it is not. The file's path is made only for a file that is not the
/// message its name says: a folder of thousands of messages costs no path
/// (nor id) per file.
pub(crate) fn named_message(
    dir: &Path,
    name: &str,
    stem: &str,
    read: ReadOutcome<&[u8]>,
) -> ReadOutcome<Message> {
    // Reports name the file's path, set below (not made for every file).
    let read = read.and_then(|bytes| parse_message(Path::new(""), bytes));
    let path = || dir.join(name);
    match read {
        // Its id was checked as it was parsed.
        ReadOutcome::Value(m) if m.id.as_str() == stem => ReadOutcome::Value(m),
        ReadOutcome::Value(m) => ReadOutcome::Corrupt(stray(
            path(),
            &format!("the id field `{}` does not match the file name", m.id),
        )),
        ReadOutcome::Corrupt(mut c) => {
            c.path = path();
            ReadOutcome::Corrupt(c)
        }
        ReadOutcome::Unsupported(mut u) => {
            u.path = path();
            ReadOutcome::Unsupported(u)
        }
        ReadOutcome::Missing => ReadOutcome::Missing,
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
        let layout = Layout::new(state.channel(crate::MAIL_CHANNEL));
        Mail {
            state,
            config,
            layout,
            seam: None,
            tail: crate::tail::TailMemory::default(),
        }
    }

    /// Returns the mail channel, with `config`, of a folder that has the
    /// seed's layout itself (`inbox/`, `archive/`, `manifest.jsonl` directly
    /// inside), such as a nubos-pilot project's `.nubos-pilot/messages`:
    /// open `state` at that folder. Everything else is as with
    /// [`Mail::with_config`]; chipset's own
    /// additions (`replies/`, `.quarantine/` folders, temp files) are
    /// dot-named or ignored by the seed's other programs.
    ///
    /// ```
    /// use chipset_mail::{Mail, MailConfig, NewMessage};
    /// use chipset_store::StateDir;
    ///
    /// let project = tempfile::tempdir()?;
    /// let folder = project.path().join(".nubos-pilot/messages");
    /// let mail = Mail::in_folder(StateDir::open(&folder)?, MailConfig::default());
    /// let sent = mail.send(&NewMessage::notify("np-orchestrator".parse()?, "np-executor".parse()?,
    ///     "M005-S007-T0002".parse()?, "round-started", "go"))?;
    /// assert!(folder.join("inbox/np-executor").join(format!("{}.json", sent.id)).is_file());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn in_folder(state: StateDir, config: MailConfig) -> Self {
        let layout = Layout::new(state.root_path());
        Mail {
            state,
            config,
            layout,
            seam: None,
            tail: crate::tail::TailMemory::default(),
        }
    }

    /// Whether this works in place on a folder of the seed's layout
    /// ([`Mail::in_folder`]) rather than on `mail/` of a state root.
    pub(crate) fn in_place(&self) -> bool {
        *self.layout.mail() == self.state.root_path()
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
    pub fn dir(&self) -> &StatePath {
        self.layout.mail()
    }

    /// Returns `agent`'s inbox directory, `inbox/{agent}/` (for watchers).
    pub fn inbox_dir(&self, agent: &AgentId) -> StatePath {
        self.layout.inbox(agent)
    }

    /// Returns the path a message with `id` has at `location`.
    pub fn path_of(&self, id: &MessageId, location: &Location) -> StatePath {
        self.layout.file(location, id)
    }

    /// Returns the path of `manifest.jsonl`.
    pub fn manifest_path(&self) -> StatePath {
        self.layout.manifest()
    }

    pub(crate) fn manifest(&self) -> Result<JsonLog> {
        Ok(self.state.log(&self.layout.manifest())?)
    }

    // ---- finding -------------------------------------------------------

    /// Returns the agents that have an inbox directory, sorted.
    ///
    /// # Errors
    ///
    /// [`Error::Store`](crate::Error::Store) when `inbox/` cannot be listed; [`Error::Corrupt`](crate::Error::Corrupt)
    /// for an entry in it that is not a valid agent id.
    pub(crate) fn agents(&self) -> Result<Vec<AgentId>> {
        let root = self.layout.inbox_root();
        self.state
            .list(&root)?
            .into_iter()
            .map(|name| {
                AgentId::new(name.as_str()).map_err(|_| {
                    stray(root.as_path().join(&name), "not an agent inbox directory").into()
                })
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
    /// [`Error::Store`](crate::Error::Store) when a directory cannot be listed or stat fails.
    pub fn locate(&self, id: &MessageId) -> Result<Option<Location>> {
        if let Some(server) = self.server() {
            return Ok(server.find(id)?.map(|f| f.location));
        }
        self.locate_with(id, None)
    }

    fn locate_with(&self, id: &MessageId, task: Option<&TaskId>) -> Result<Option<Location>> {
        for agent in self.agents()? {
            if exists(
                &self.state,
                &self.layout.file(&Location::Inbox(agent.clone()), id),
            )? {
                return Ok(Some(Location::Inbox(agent)));
            }
        }
        for loc in [Location::Archive, Location::Orphan] {
            if exists(&self.state, &self.layout.file(&loc, id))? {
                return Ok(Some(loc));
            }
        }
        if let Some(task) = task
            && exists(&self.state, &self.layout.by_task(task).join_id(id, ".json"))?
        {
            return Ok(Some(Location::ByTask(task.clone())));
        }
        for dir in self.state.list(&self.layout.by_task_root())? {
            if let Ok(task) = TaskId::new(dir.as_str())
                && exists(
                    &self.state,
                    &self.layout.by_task(&task).join_id(id, ".json"),
                )?
            {
                return Ok(Some(Location::ByTask(task)));
            }
        }
        Ok(None)
    }

    /// Returns the message `id` wherever it is, or `None` when it is
    /// nowhere. It looks where [`Mail::locate`] looks, in the same order.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`](crate::Error::Corrupt) when its file is unreadable; as [`Mail::locate`].
    pub fn find(&self, id: &MessageId) -> Result<Option<Message>> {
        Ok(self.found(id)?.map(|found| found.message))
    }

    /// As [`Mail::find`], with where the message is.
    pub(crate) fn found(&self, id: &MessageId) -> Result<Option<Found>> {
        self.find_with(id, None)
    }

    pub(crate) fn find_with(&self, id: &MessageId, task: Option<&TaskId>) -> Result<Option<Found>> {
        if let Some(server) = self.server() {
            return server.find(id);
        }
        // A message moves at most twice, so it settles within a few rounds.
        for _ in 0..4 {
            let Some(location) = self.locate_with(id, task)? else {
                return Ok(None);
            };
            let path = self.layout.file(&location, id);
            match read_message(&self.state, &path)? {
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

    /// Reads every message in `dir`, in id order: what reading each file
    /// found (never [`ReadOutcome::Missing`]: a file that vanished between
    /// listing and reading moved on, and is left out). Names that are not
    /// `{id}.json` cannot be the seed's messages: they are skipped with a
    /// warning (the doctor reports them).
    pub(crate) fn scan(&self, dir: &StatePath, skip: &[&str]) -> Result<Vec<ReadOutcome<Message>>> {
        let names = self.state.list(dir)?;
        let mut out = Vec::with_capacity(names.len());
        if names.is_empty() {
            return Ok(out);
        }
        // Gone since the listing: so is every file in it.
        let Some(folder) = self.state.folder(dir)? else {
            return Ok(out);
        };
        let cap = message_cap(&self.state);
        let mut buf = Vec::new();
        for name in names {
            if skip.contains(&name.as_str()) {
                continue;
            }
            // Never read: no program of the seed wrote it.
            let Some(stem) = message_stem(&name) else {
                let path = dir.as_path().join(&name);
                tracing::warn!(path = %path.display(), "skipping a file that is not a message (`{{id}}.json`)");
                continue;
            };
            let read = folder.read_into(&name, cap, &mut buf)?;
            let read =
                match named_message(dir.as_path(), &name, stem, read.map(|()| buf.as_slice())) {
                    ReadOutcome::Missing => continue,
                    read => read,
                };
            out.push(read);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::contains;

    #[test]
    fn contains_finds_a_needle_anywhere_and_never_an_empty_one() {
        assert!(contains(b"in_reply_to: 17-ab", b"17-ab"));
        assert!(contains(b"17-ab, then more", b"17-ab"));
        assert!(contains(b"17-ab", b"17-ab"));
        assert!(!contains(b"in_reply_to: 17-ac", b"17-ab"));
        assert!(!contains(b"17-a", b"17-ab"));
        assert!(!contains(b"anything", b""));
        assert!(!contains(b"", b""));
    }
}
