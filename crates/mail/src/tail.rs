//! The archive tail: which responses entered `archive/`, learnt from the
//! manifest instead of a listing, so that the reply fallback's cost follows
//! the responses, not the archive.
//!
//! # Why
//!
//! Whether a request is answered is decided by the response files that
//! exist (see [`Mail::has_reply`]). A response another program archived
//! (nubos-pilot archives responses like any read message) lands in
//! `archive/`, which at the scale of a busy project holds 100,000 files or
//! more; listing it on every miss of the reply index made an open request
//! cost a listing of the whole archive (167 ms at 100,000 messages against
//! 114 µs with none).
//!
//! # What it relies on
//!
//! The seed's contract: "Each archive() moves `inbox/<...>/<id>.json` to
//! `archive/<id>.json` and appends an `archived` event", and the manifest is
//! append-only. nubos-pilot does exactly that (under its manifest lock, with
//! the message's `kind`), and so does chipset ([`Mail::archive`], the archive
//! a response does, and the doctor's repairs). So every message that
//! entered `archive/` has an `archived` event after it, and the events since
//! a point name every message archived since then.
//!
//! The tail keeps, in `mail/.gate/archive-tail.json`, how far it has read the
//! manifest: when it began (its *origin*: reading starts at the manifest's
//! length then, and the time is taken after that length was measured) and
//! its *offset* (every `archived` event between the origin and the offset
//! has been looked at,
//! and each response among them that fits its request is in the reply
//! index). A miss of the index reads the events after the offset (nothing
//! at all when none were appended: one `stat` of the manifest), enters the
//! fitting responses in the index, and moves the offset on. A response to a
//! request sent after the origin (with [`MTIME_SLACK`] for clocks) can only
//! have entered `archive/` after the origin, so its `archived` event is in
//! the tail: for such a request `archive/` is never listed. A request sent
//! before the origin is looked for in `archive/` as before (a listing, which
//! the folder's mtime skips when nothing entered it since the request); such
//! requests age out as their tasks commit.
//!
//! The same reading also notes the `sent` events of responses (seed 002:
//! every send appends one, naming the addressee and the request answered).
//! A miss of the index for a request one of them names reads that file from
//! its addressee's inbox before listing anything; the file counts only when
//! it passes the checks a listed file passes, so a missing, moved or
//! unfitting file leaves the listing to decide, as without the event.
//!
//! # Where it would not hold, and what is done about it
//!
//! - **A writer that stops between its move and its event** (killed, or a
//!   power cut) leaves a message in `archive/` with no `archived` event. Until
//!   the doctor appends the missing event (which it does, reconciled; the
//!   tail then sees it), a response archived that way keeps its request
//!   pending: the safe side, never an open gate.
//! - **A writer that does not log** (not following the seed) is not seen in
//!   `archive/` either, for requests sent after the origin; the same as above.
//! - **A manifest replaced or truncated** (the doctor's repair of bad lines
//!   writes a new file; an operator may rotate it): the tail notices (another
//!   inode, shorter than the offset, or other bytes just before the offset:
//!   a new file can get a freed inode number back) and starts again from a
//!   new origin, so every request sent before then is looked for by listing
//!   again.
//! - **The tail file lost or corrupt** (it is written without a sync, like
//!   the gate cache): a new origin, as above. A stale file only makes a
//!   reader read events again (entering a response twice changes nothing).
//!
//! # How often the file is written
//!
//! Rewriting the tail file on every look would put a new inode and a rename
//! into the journal commit of every archive's move. The process keeps the
//! furthest tail it reached in memory ([`TailMemory`], shared by the clones
//! of a [`Mail`]), and uses it where it goes further than the file from the
//! same origin (same manifest, same `since`, its mark checked as the file's
//! is). The file is written when the tail begins, when the look entered
//! responses in the reply index (reading those events again would enter
//! them again), when the tail reached a settled end (so that the next
//! reader need not even open the manifest), and otherwise once it has moved
//! [`PERSIST_AFTER`] bytes past the file. So another process (a
//! command-line call) reads at most that many bytes of events again, and a
//! lost memory (a crash) costs the same: nothing is answered from it that
//! was not read and checked.
//!
//! Nothing here can answer a request that has no fitting response: the tail
//! only adds index entries for responses it has read and checked against
//! their request, as the fallback does.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use crate::MessageId;
use chipset_store::{AgentId, JsonLog, ReadOutcome, StatePath, Timestamp};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::format::{Kind, Message};
use crate::gate::Stamp;
use crate::layout::Location;
use crate::mail::{MTIME_SLACK, Mail, answers, read_message};

/// The format version of the tail file. Version 2 added
/// [`TailFile::at_end`]; a version 1 file is read as one without it, any
/// other version starts afresh.
const VERSION: u32 = 2;

/// How far past the tail file the tail may move before the file is
/// written again (see the module docs): about ten answered archives'
/// events (a request's `sent`, its response's, and the `archived`).
const PERSIST_AFTER: u64 = 8 * 1024;

/// The furthest tail this process reached, which the file may lag (see
/// the module docs), and the messages this process archived that are not
/// responses (an `archived` event naming one needs no read of its file).
/// Shared by the clones of a [`Mail`].
#[derive(Debug, Default, Clone)]
pub(crate) struct TailMemory(Arc<Mutex<Memory>>);

#[derive(Debug, Default)]
struct Memory {
    tail: Option<TailFile>,
    /// The last [`OWN`] messages this process archived that are not
    /// responses, oldest first.
    archived: VecDeque<MessageId>,
}

/// How many of its own archived messages a process remembers: more than
/// one look ever reads past in a busy process.
const OWN: usize = 64;

impl TailMemory {
    fn lock(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Returns what the process reached past `stored` from the same origin
    /// (the same manifest inode and `since`, not past `len`), or `stored`.
    fn further(&self, stored: TailFile, len: u64) -> TailFile {
        match &self.lock().tail {
            Some(m)
                if (m.dev, m.ino, m.since) == (stored.dev, stored.ino, stored.since)
                    && m.offset > stored.offset
                    && m.offset <= len =>
            {
                m.clone()
            }
            _ => stored,
        }
    }

    fn remember(&self, tail: &TailFile) {
        self.lock().tail = Some(tail.clone());
    }

    /// Notes that this process moved `id`, a message that is not a
    /// response, into `archive/` ([`Mail::archive`]).
    pub(crate) fn archived(&self, id: &MessageId) {
        let mut memory = self.lock();
        if memory.archived.len() == OWN {
            memory.archived.pop_front();
        }
        memory.archived.push_back(id.clone());
    }

    /// True when this process archived `id` and it is not a response: a
    /// message keeps its kind, so its file in `archive/` answers nothing.
    fn archived_here(&self, id: &MessageId) -> bool {
        self.lock().archived.contains(id)
    }
}

/// What `mail/.gate/archive-tail.json` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct TailFile {
    v: u32,
    /// The manifest's device and inode number.
    dev: u64,
    ino: u64,
    /// When the tail began (taken after the manifest's length, where the
    /// offset started, was measured).
    since: Timestamp,
    /// Every `archived` event from where the tail began up to here has
    /// been looked at.
    offset: u64,
    /// The manifest's last bytes before `offset`, in hex: an inode number
    /// can be reused by a new file, its bytes are not.
    mark: String,
    /// The manifest's mtime and ctime when the tail was found at its end
    /// (`offset` its length) with the mark checked, at least [`RACY`] after
    /// its last change: while the manifest has exactly this length and
    /// these times, no byte of it changed (every write and truncate sets
    /// both), so the mark is not read again.
    ///
    /// [`RACY`]: crate::gate::RACY
    #[serde(default, skip_serializing_if = "Option::is_none")]
    at_end: Option<((i64, i64), (i64, i64))>,
}

/// One manifest line, as loosely as the tail needs it (any writer's events:
/// chipset's and nubos-pilot's differ in their other fields).
#[derive(Debug, PartialEq, Eq, Deserialize)]
struct Event {
    event: String,
    id: Option<String>,
    /// nubos-pilot names the kind of what it archived.
    kind: Option<String>,
    /// chipset names the response whose sending archived a request.
    reply: Option<String>,
    /// A `sent` event's addressee (its inbox).
    to: Option<String>,
    /// A `sent` event's parent: what a response answers.
    in_reply_to: Option<String>,
}

/// What [`Mail::catch_up_archive`] found.
#[derive(Debug, Default)]
pub(crate) struct Caught {
    /// When the tail began, if it has.
    pub(crate) since: Option<Timestamp>,
    /// The responses found this time, by the request they answer.
    pub(crate) responses: BTreeMap<MessageId, Message>,
    /// The responses whose `sent` events the tail read this time (seed
    /// 002: every send appends one), by the request they name: the
    /// addressee (whose inbox the file was published in) and the id. Only
    /// where to look: a file is taken as an answer once it is read and
    /// checked ([`Mail::sent_response`]).
    pub(crate) sent: BTreeMap<MessageId, Vec<(AgentId, MessageId)>>,
}

impl Caught {
    fn since(since: Timestamp) -> Self {
        Caught {
            since: Some(since),
            ..Caught::default()
        }
    }

    /// True when a request sent at `sent` can only have been answered from
    /// `archive/` after the tail began.
    pub(crate) fn covers(&self, sent: Timestamp) -> bool {
        self.since.is_some_and(|since| since + MTIME_SLACK < sent)
    }
}

impl Mail {
    fn tail_path(&self) -> StatePath {
        self.gate_dir().join_static("archive-tail.json")
    }

    /// Brings the reply index up to date with the responses archived since
    /// the tail last looked, and returns when the tail began: a request sent
    /// after that (with [`MTIME_SLACK`]) needs no listing of `archive/`.
    ///
    /// `since` is `None` when there is no manifest yet (then nothing was
    /// ever archived by a program that follows the seed, and a request sent
    /// from now on is covered once the tail has begun). The responses it
    /// found this time are returned too, so that a reader without the right
    /// to write the index (a read-only mount) still counts them; then the
    /// tail does not move on, and the next reader reads them again.
    pub(crate) fn catch_up_archive(&self) -> Result<Caught> {
        let manifest = self.layout.manifest();
        let Some(meta) = self.state.stat(&manifest)? else {
            return Ok(Caught::default());
        };
        if !meta.is_file() {
            // Not a regular file (the doctor reports it): list as before.
            return Ok(Caught::default());
        }
        let (dev, ino, len) = (meta.dev, meta.ino, meta.len);
        let path = self.tail_path();
        let log = self.manifest()?;
        let times = (meta.mtime, meta.ctime);
        let stored = crate::gate::load::<TailFile>(&self.state, &path).filter(|t| {
            (t.v == 1 || t.v == VERSION) && t.dev == dev && t.ino == ino && t.offset <= len
        });
        // Where the file stands: the tail is written again when it has moved
        // on enough from there (see the module docs).
        let written = stored.as_ref().map(|t| (t.offset, t.at_end));
        let candidate = stored.map(|t| self.tail.further(t, len));
        // Unchanged since the tail was last at its end.
        if let Some(t) = &candidate
            && t.offset == len
            && t.at_end == Some(times)
        {
            if written != Some((len, Some(times))) {
                // Reached in memory: the next reader need not open the
                // manifest either.
                self.store_cache(&path, t);
            }
            return Ok(Caught::since(t.since));
        }
        let found = match candidate {
            Some(t) => unseen(&log, &t, len)?.map(|u| (t, u)),
            None => None,
        };
        let Some((mut tail, unseen)) = found else {
            // Begin only at the end of a line. Inside a torn last line, the
            // next append may cut it and write an event whose first bytes
            // match the torn ones: the mark would pass and the rest of the
            // event be read as a bad line. Until a writer completes or cuts
            // the line, requests are looked for by listing, as without a tail.
            let end = mark(&log, len)?;
            if !(end.is_empty() || end.ends_with("0a")) {
                return Ok(Caught::default());
            }
            // Begin: the length first, then the time, so that every event
            // past the offset was appended after `since`.
            let tail = TailFile {
                v: VERSION,
                dev,
                ino,
                since: self.state.now(),
                offset: len,
                mark: end,
                at_end: Stamp::from(&meta)
                    .settled(SystemTime::now())
                    .then_some(times),
            };
            self.store_cache(&path, &tail);
            self.tail.remember(&tail);
            return Ok(Caught::since(tail.since));
        };
        tail.v = VERSION;
        let mut caught = Caught::since(tail.since);
        if tail.offset == len {
            if Stamp::from(&meta).settled(SystemTime::now()) {
                tail.at_end = Some(times);
                self.store_cache(&path, &tail);
                self.tail.remember(&tail);
            }
            return Ok(caught);
        }
        let mut replies = Vec::new();
        let mut sent: BTreeMap<MessageId, Vec<(AgentId, MessageId)>> = BTreeMap::new();
        for event in &unseen.events {
            if let Some(response) = self.archived_response(event)? {
                replies.push(response);
            } else if let Some((parent, to, id)) = sent_response_event(event) {
                sent.entry(parent).or_default().push((to, id));
            }
        }
        let linked = match self.link_replies(&replies) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(error = %e, "responses archived by others were not entered in the reply index");
                false
            }
        };
        if linked {
            tail.offset = unseen.end;
            tail.mark = unseen.mark;
            // The times were taken before the read: a write since has moved them.
            tail.at_end = (tail.offset == len && Stamp::from(&meta).settled(SystemTime::now()))
                .then_some(times);
            let behind = written.map_or(u64::MAX, |(offset, _)| tail.offset.saturating_sub(offset));
            if !replies.is_empty() || tail.at_end.is_some() || behind >= PERSIST_AFTER {
                self.store_cache(&path, &tail);
            }
            self.tail.remember(&tail);
        }
        for response in replies {
            if let Some(parent) = response.in_reply_to.clone() {
                caught.responses.entry(parent).or_insert(response);
            }
        }
        caught.sent = sent;
        Ok(caught)
    }

    /// Returns a response to `request` among the responses whose `sent`
    /// events the tail just read ([`Caught::sent`]): the file named by the
    /// event, read from its addressee's inbox and checked as the listing
    /// checks a file (the id of its name, a response that fits the request:
    /// [`answers`]). `None` when no event names the request or no file it
    /// names is there and fits (the caller then lists the folders as
    /// before), so an event can save a listing, never answer a request on
    /// its own.
    pub(crate) fn sent_response(
        &self,
        caught: &Caught,
        request: &Message,
    ) -> Result<Option<Message>> {
        let Some(named) = caught.sent.get(&request.id) else {
            return Ok(None);
        };
        for (to, id) in named {
            if *to != request.from {
                continue;
            }
            let path = self.layout.file(&Location::Inbox(to.clone()), id);
            match read_message(&self.state, &path) {
                Ok(ReadOutcome::Value(m)) if m.id == *id && answers(&m, request) => {
                    return Ok(Some(m));
                }
                // Moved on, unreadable or not an answer: the listing decides.
                Ok(_) | Err(Error::Store(chipset_store::Error::Symlink { .. })) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// Returns the response an `archived` event moved into `archive/`, when
    /// it is one that fits its request.
    fn archived_response(&self, event: &Event) -> Result<Option<Message>> {
        let wanted = event.event == "archived"
            && event.reply.is_none()
            && event.kind.as_deref().is_none_or(|k| k == "response");
        let Some(id) = event.id.as_deref().filter(|_| wanted) else {
            return Ok(None);
        };
        let Ok(id) = MessageId::new(id) else {
            return Ok(None);
        };
        if self.tail.archived_here(&id) {
            return Ok(None);
        }
        let path = self.layout.file(&Location::Archive, &id);
        // Moved on (swept with its task: the by-task folder is looked at),
        // unreadable or not a response: not an answer from here.
        let response = match read_message(&self.state, &path) {
            Ok(ReadOutcome::Value(m)) if m.kind == Kind::Response && m.id == id => m,
            Ok(_) | Err(Error::Store(chipset_store::Error::Symlink { .. })) => {
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let Some(parent) = response.in_reply_to.clone() else {
            return Ok(None);
        };
        Ok(match self.found(&parent)? {
            Some(found) if answers(&response, &found.message) => Some(response),
            _ => None,
        })
    }
}

/// The request, addressee and id a `sent` event of a response names (any
/// writer's: chipset's and nubos-pilot's both carry `to`, `kind` and
/// `in_reply_to`), or `None` for any other event or a malformed one.
fn sent_response_event(event: &Event) -> Option<(MessageId, AgentId, MessageId)> {
    if event.event != "sent" || event.kind.as_deref() != Some("response") {
        return None;
    }
    let parent = MessageId::new(event.in_reply_to.as_deref()?).ok()?;
    let to = AgentId::new(event.to.as_deref()?).ok()?;
    let id = MessageId::new(event.id.as_deref()?).ok()?;
    Some((parent, to, id))
}

/// How many bytes before a tail's offset its mark holds.
const MARK_LEN: u64 = 64;

/// Up to how many unread bytes the tail reads the manifest in one `pread`
/// (its mark and the events after it); more is read line by line.
const READ_AT_ONCE: u64 = 256 * 1024;

/// What a look finds past the tail's offset.
struct Unseen {
    /// The events of the complete lines (lines that are not events of
    /// this shape, bad lines and a torn last line, are passed over: the
    /// doctor reports them).
    events: Vec<Event>,
    /// Where the last complete line ends.
    end: u64,
    /// The mark at `end`.
    mark: String,
}

/// Reads the manifest past `tail`'s offset, up to `len`; `None` when the
/// bytes before the offset are not the tail's mark (another manifest).
/// Up to [`READ_AT_ONCE`] bytes are read in one go: the mark's bytes,
/// the events and the new mark's bytes at once.
fn unseen(log: &JsonLog, tail: &TailFile, len: u64) -> Result<Option<Unseen>> {
    if len.saturating_sub(tail.offset) > READ_AT_ONCE {
        unseen_by_lines(log, tail)
    } else {
        unseen_at_once(log, tail, len)
    }
}

/// [`unseen`] through the log's line reader (memory bounded by a line).
fn unseen_by_lines(log: &JsonLog, tail: &TailFile) -> Result<Option<Unseen>> {
    if mark(log, tail.offset)? != tail.mark {
        return Ok(None);
    }
    let read = log.read_from::<Event>(tail.offset)?;
    Ok(Some(Unseen {
        mark: mark(log, read.end_offset)?,
        events: read.records,
        end: read.end_offset,
    }))
}

/// [`unseen`] in one read of the bytes from the mark's start to `len`.
fn unseen_at_once(log: &JsonLog, tail: &TailFile, len: u64) -> Result<Option<Unseen>> {
    let offset = tail.offset;
    let start = offset.saturating_sub(MARK_LEN);
    let bytes = log.bytes_at(start, len)?.unwrap_or_default();
    let before = usize::try_from(offset - start).unwrap_or(usize::MAX);
    if bytes.get(..before).is_none_or(|b| hex(b) != tail.mark) {
        return Ok(None);
    }
    let mut events = Vec::new();
    let mut at = before;
    while let Some(n) = bytes[at..].iter().position(|&b| b == b'\n') {
        let line = &bytes[at..at + n];
        if let Ok(event) = serde_json::from_slice::<Event>(line) {
            events.push(event);
        }
        at += n + 1;
    }
    let from = at.saturating_sub(usize::try_from(MARK_LEN).unwrap_or(usize::MAX));
    Ok(Some(Unseen {
        events,
        end: start + at as u64,
        mark: hex(&bytes[from..at]),
    }))
}

/// Returns the manifest's bytes before `offset` (at most [`MARK_LEN`]), in
/// hex; empty when the manifest is gone (which no mark of a tail matches,
/// but the empty one of an empty manifest).
fn mark(log: &JsonLog, offset: u64) -> Result<String> {
    let bytes = log
        .bytes_at(offset.saturating_sub(MARK_LEN), offset)?
        .unwrap_or_default();
    Ok(hex(&bytes))
}

/// `bytes` in hex, as a mark holds them.
fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(id: &str) -> String {
        format!("{{\"event\":\"archived\",\"id\":\"{id}\"}}\n")
    }

    /// Both ways of reading past the tail find the same events, end and
    /// mark: complete lines only (a blank line and a bad one passed over, a
    /// torn last line left for later), after a mark that matches.
    #[test]
    fn a_look_at_once_reads_what_the_line_reader_reads() {
        let dir = tempfile::tempdir().unwrap();
        let state = chipset_store::StateDir::open(dir.path()).unwrap();
        let path = state.root_path().join("manifest.jsonl").unwrap();
        let first = event("a");
        state.write_bytes(&path, first.as_bytes()).unwrap();
        let log = state.log(&path).unwrap();
        let offset = first.len() as u64;
        let tail = TailFile {
            v: VERSION,
            dev: 0,
            ino: 0,
            since: Timestamp::EPOCH,
            offset,
            mark: mark(&log, offset).unwrap(),
            at_end: None,
        };
        let mut more = String::from("\nnot json\n");
        for n in 0..100 {
            more.push_str(&event(&format!("b{n}")));
        }
        more.push_str("{\"event\":\"sent\"");
        let mut all = first.clone().into_bytes();
        all.extend_from_slice(more.as_bytes());
        state.write_bytes(&path, &all).unwrap();
        let len = all.len() as u64;
        let once = unseen_at_once(&log, &tail, len).unwrap().unwrap();
        let lines = unseen_by_lines(&log, &tail).unwrap().unwrap();
        assert_eq!(once.events.len(), 100);
        assert_eq!(once.events[99].id.as_deref(), Some("b99"));
        assert_eq!(once.end, len - "{\"event\":\"sent\"".len() as u64);
        assert_eq!(once.mark, mark(&log, once.end).unwrap());
        assert_eq!(
            (&once.events, once.end, &once.mark),
            (&lines.events, lines.end, &lines.mark)
        );
        // Nothing past the offset: the mark is checked, nothing read.
        let none = unseen_at_once(&log, &tail, offset).unwrap().unwrap();
        assert!(none.events.is_empty());
        assert_eq!((none.end, &none.mark), (offset, &tail.mark));
        // Another manifest (other bytes before the offset): no look.
        let other = TailFile {
            mark: "00".repeat(first.len()),
            ..tail
        };
        assert!(unseen_at_once(&log, &other, len).unwrap().is_none());
        assert!(unseen_by_lines(&log, &other).unwrap().is_none());
    }
}
