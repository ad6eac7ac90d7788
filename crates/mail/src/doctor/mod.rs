//! The doctor: a full scan of `mail/` that finds (and with
//! [`DoctorMode::Fix`] repairs) what crashes and other programs leave behind.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use crate::MessageId;
use chipset_store::{AgentId, CorruptReason, DoctorMode, ReadOutcome, StateDir, StatePath, TaskId};
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::format::{Kind, ManifestEvent, Message};
use crate::layout::{BY_TASK, Location, ORPHAN, id_of, parse_marker};
use crate::mail::{Mail, Moved, check_id, read_message};
use crate::spill::{self, Sorted, Sorter};

mod finding;
mod passes;
mod peer;
mod run;
mod walk;

pub use finding::OrphanReason;
pub(crate) use finding::{DoctorReport, Finding};

/// Names held once, referred to by index: the doctor's memory per message
/// must not hold a copy of its agents' and task's names.
struct Interner<T> {
    list: Vec<T>,
    index: BTreeMap<T, u32>,
}

impl<T> Default for Interner<T> {
    fn default() -> Self {
        Interner {
            list: Vec::new(),
            index: BTreeMap::new(),
        }
    }
}

impl<T: Clone + Ord> Interner<T> {
    fn intern(&mut self, name: &T) -> u32 {
        if let Some(i) = self.index.get(name) {
            return *i;
        }
        let i = u32::try_from(self.list.len()).expect("fewer than 2^32 names");
        self.list.push(name.clone());
        self.index.insert(name.clone(), i);
        i
    }

    fn get(&self, i: u32) -> &T {
        &self.list[i as usize]
    }
}

/// Where a message is, with its agent or task interned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loc {
    Inbox(u32),
    Archive,
    ByTask(u32),
    Orphan,
}

impl Loc {
    fn encode(self) -> String {
        match self {
            Loc::Inbox(a) => format!("i{a}"),
            Loc::Archive => "a".to_owned(),
            Loc::ByTask(t) => format!("t{t}"),
            Loc::Orphan => "o".to_owned(),
        }
    }

    fn decode(s: &str) -> Option<Loc> {
        match s.split_at_checked(1)? {
            ("i", a) => Some(Loc::Inbox(a.parse().ok()?)),
            ("a", "") => Some(Loc::Archive),
            ("t", t) => Some(Loc::ByTask(t.parse().ok()?)),
            ("o", "") => Some(Loc::Orphan),
            _ => None,
        }
    }
}

/// What the doctor keeps of one copy of a message while it looks at that
/// message's id: what its checks need, no body or subject, names interned.
/// A repair that needs the whole message reads it again.
#[derive(Debug, Clone)]
struct Seen {
    loc: Loc,
    kind: Kind,
    needs_reply: bool,
    from: u32,
    to: u32,
    phase: u32,
    in_reply_to: Option<MessageId>,
    created_at: chipset_store::Timestamp,
}

/// Everything one scan keeps in memory: names (agents and tasks, held once),
/// the swept tasks, what is wrong with files (only findings), and two
/// sorters that hold the rest on disk once it outgrows their budget
/// ([`crate::spill`]): by id, every copy of every message and the `sent`
/// and `archived` events of the manifest; by parent id, the reply index
/// (and, in the first pass over the ids, each reply and each request that
/// expects one). The doctor then walks both in id order, one id at a time,
/// so its memory does not grow with the number of messages.
struct Scan<'a> {
    corrupt: Vec<(BadEntry, CorruptReason)>,
    unsupported: Vec<chipset_store::Unsupported>,
    /// Bad entries the fix leaves where they are ([`Finding::Stray`],
    /// [`Finding::Oversized`], [`Finding::PeerListed`]).
    left: Vec<Finding>,
    /// Tasks with a by-task folder.
    swept: BTreeSet<u32>,
    agents: Interner<AgentId>,
    tasks: Interner<TaskId>,
    /// `{id}\tM\t{dir}\t…` per copy, `{id}\tS` and `{id}\tA` per event.
    by_id: Sorter<'a>,
    /// `{parent}\tR\t{kind}\t{child}` per reply-index entry, then
    /// `{parent}\tP\t…` per reply and `{id}\tK\t…` per request.
    by_parent: Sorter<'a>,
    /// The first pass's findings about manifest events (one per message at
    /// most two), held on disk beyond the budget like the rest: a state
    /// whose manifest was lost has one per message. See [`EventFinding`].
    events: Sorter<'a>,
    /// With [`DoctorMode::Fix`], the manifest events to reconcile, held on
    /// disk beyond the budget like the rest: see [`Reconcile`].
    repairs: Sorter<'a>,
    /// Whether the repairs will run: only then are the ids they need kept.
    mode: DoctorMode,
    /// Directories scanned so far: a copy's place in the scan order.
    dirs: u32,
}

impl<'a> Scan<'a> {
    fn new(mail: &'a Mail, mode: DoctorMode, budget: usize) -> Self {
        let dir = mail.layout.mail();
        Scan {
            events: Sorter::new(&mail.state, dir, budget),
            repairs: Sorter::new(&mail.state, dir, budget),
            mode,
            corrupt: Vec::new(),
            unsupported: Vec::new(),
            left: Vec::new(),
            swept: BTreeSet::new(),
            agents: Interner::default(),
            tasks: Interner::default(),
            by_id: Sorter::new(&mail.state, dir, budget),
            by_parent: Sorter::new(&mail.state, dir, budget),
            dirs: 0,
        }
    }

    fn loc(&mut self, location: &Location) -> Loc {
        match location {
            Location::Inbox(a) => Loc::Inbox(self.agents.intern(a)),
            Location::Archive => Loc::Archive,
            Location::ByTask(t) => Loc::ByTask(self.tasks.intern(t)),
            Location::Orphan => Loc::Orphan,
        }
    }

    fn location(&self, loc: Loc) -> Location {
        match loc {
            Loc::Inbox(a) => Location::Inbox(self.agents.get(a).clone()),
            Loc::Archive => Location::Archive,
            Loc::ByTask(t) => Location::ByTask(self.tasks.get(t).clone()),
            Loc::Orphan => Location::Orphan,
        }
    }

    /// Records one copy of `m`, found in the `dir`-th directory scanned.
    fn copy(&mut self, dir: u32, loc: Loc, m: &Message) -> Result<()> {
        let line = format!(
            "{}\tM\t{dir:08x}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
            m.id,
            loc.encode(),
            m.kind,
            u8::from(m.needs_reply()),
            self.agents.intern(&m.from),
            self.agents.intern(&m.to),
            self.tasks.intern(&m.phase),
            m.created_at.unix_ms(),
            m.in_reply_to.as_ref().map_or("", MessageId::as_str),
        );
        self.by_id.push(line.as_bytes())
    }
}

/// Decodes a copy's line (after its id and tag): its directory and what
/// the doctor keeps of it.
fn decode_copy(fields: &mut std::str::Split<'_, char>) -> Option<(u32, Seen)> {
    let dir = u32::from_str_radix(fields.next()?, 16).ok()?;
    let loc = Loc::decode(fields.next()?)?;
    let kind = Kind::from_name(fields.next()?)?;
    let needs_reply = fields.next()? == "1";
    let from = fields.next()?.parse().ok()?;
    let to = fields.next()?.parse().ok()?;
    let phase = fields.next()?.parse().ok()?;
    let created_at = chipset_store::Timestamp::from_unix_ms(fields.next()?.parse().ok()?);
    let in_reply_to = match fields.next()? {
        "" => None,
        p => Some(MessageId::new(p).ok()?),
    };
    Some((
        dir,
        Seen {
            loc,
            kind,
            needs_reply,
            from,
            to,
            phase,
            in_reply_to,
            created_at,
        },
    ))
}

/// A finding about a message's manifest events, as the first pass spills
/// it: `{id}\t{tag}\t{loc}\t{nanos}`, where the tag (`0` in flight, `1`
/// no `sent`, `2` no `archived` event) keeps a message's two findings in
/// the order they are reported, and the nanoseconds are the wait of one
/// in flight. Read back in id order, which is the order they were found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EventFinding {
    InFlight,
    NoSent,
    NoArchived,
}

impl EventFinding {
    fn tag(self) -> char {
        match self {
            EventFinding::InFlight => '0',
            EventFinding::NoSent => '1',
            EventFinding::NoArchived => '2',
        }
    }

    fn push(
        self,
        scan: &mut Scan<'_>,
        id: &MessageId,
        loc: Loc,
        check_after: std::time::Duration,
    ) -> Result<()> {
        let line = format!(
            "{id}\t{}\t{}\t{}",
            self.tag(),
            loc.encode(),
            check_after.as_nanos()
        );
        scan.events.push(line.as_bytes())
    }

    /// Decodes one spilled line into the finding it stands for.
    fn decode(scan: &Scan<'_>, line: &str) -> Option<Finding> {
        let mut fields = line.split('\t');
        let id = MessageId::new(fields.next()?).ok()?;
        let tag = fields.next()?;
        let location = scan.location(Loc::decode(fields.next()?)?);
        let nanos: u64 = fields.next()?.parse().ok()?;
        Some(match tag {
            "0" => Finding::InFlight {
                id,
                location,
                check_after: std::time::Duration::from_nanos(nanos),
                swept: false,
            },
            "1" => Finding::MissingSentEvent { id, location },
            "2" => Finding::MissingArchivedEvent { id, location },
            _ => return None,
        })
    }
}

/// A manifest event the fix reconciles, as the first pass spills it: `1`
/// then `{id}\t{loc}` for a message without its `sent` event (rebuilt from
/// the message, read again where the scan met it), `2` then
/// `{id}\t{to}\t{task}` for one in `archive/` without its `archived`
/// event. Read back sorted, every `sent` event comes before every
/// `archived` one and each kind is in id order: the order they are
/// appended in.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reconcile {
    Sent { id: MessageId, loc: Loc },
    Archived { id: MessageId, to: u32, task: u32 },
}

impl Reconcile {
    fn push(&self, scan: &mut Scan<'_>) -> Result<()> {
        let line = match self {
            Reconcile::Sent { id, loc } => format!("1\t{id}\t{}", loc.encode()),
            Reconcile::Archived { id, to, task } => format!("2\t{id}\t{to}\t{task}"),
        };
        scan.repairs.push(line.as_bytes())
    }

    /// Decodes one spilled line.
    fn decode(line: &str) -> Option<Reconcile> {
        let mut fields = line.split('\t');
        let tag = fields.next()?;
        let id = MessageId::new(fields.next()?).ok()?;
        let out = match tag {
            "1" => Reconcile::Sent {
                id,
                loc: Loc::decode(fields.next()?)?,
            },
            "2" => Reconcile::Archived {
                id,
                to: fields.next()?.parse().ok()?,
                task: fields.next()?.parse().ok()?,
            },
            _ => return None,
        };
        fields.next().is_none().then_some(out)
    }
}

/// Walks a sorted stream one key (the text before the first tab) at a time.
pub(crate) struct Groups {
    sorted: Sorted,
    next: Option<String>,
}

impl Groups {
    pub(crate) fn new(mut sorted: Sorted) -> Result<Self> {
        let next = sorted.next_line()?.map(scratch_text).transpose()?;
        Ok(Groups { sorted, next })
    }

    /// The next key and the rest of each of its lines, in order.
    pub(crate) fn next_group(&mut self) -> Result<Option<(String, Vec<String>)>> {
        let Some(first) = self.next.take() else {
            return Ok(None);
        };
        let (key, rest) = first.split_once('\t').unwrap_or((first.as_str(), ""));
        let (key, mut lines) = (key.to_owned(), vec![rest.to_owned()]);
        while let Some(line) = self.sorted.next_line()?.map(scratch_text).transpose()? {
            match line.split_once('\t') {
                Some((k, rest)) if k == key => lines.push(rest.to_owned()),
                None if line == key => lines.push(String::new()),
                _ => {
                    self.next = Some(line);
                    break;
                }
            }
        }
        Ok(Some((key, lines)))
    }
}

fn scratch_text(bytes: Vec<u8>) -> Result<String> {
    String::from_utf8(bytes).map_err(|_| bad_scratch())
}

/// The doctor's own scratch data did not read back as written.
pub(crate) fn bad_scratch() -> crate::Error {
    chipset_store::Error::Io {
        op: "read scratch file",
        path: PathBuf::from("(scratch)"),
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "a scratch record did not read back as written",
        ),
    }
    .into()
}

/// What the first pass (over message ids) leaves for the report and repairs.
#[derive(Default)]
struct ById {
    messages: usize,
    /// Duplicates with their place in the scan order (directory, id).
    duplicates: Vec<(u32, MessageId, Finding)>,
    /// Orphans and answered requests, by id (answered ones come from the
    /// second pass).
    inbox: Vec<(MessageId, Finding)>,
    orphans: Vec<(AgentId, MessageId, TaskId, OrphanReason)>,
    /// Per by-task folder: its messages, and its newest one.
    by_task: BTreeMap<u32, (usize, MessageId, Seen)>,
}

/// What the second pass (over parent ids) leaves.
#[derive(Default)]
struct ByParent {
    /// Mismatched responses and missing index entries, with the reply's id.
    replies: Vec<(MessageId, Finding)>,
    unlinked: Vec<MessageId>,
    answered_requests: Vec<(AgentId, MessageId, TaskId)>,
}

/// What the doctor reads of a manifest record: any JSON value is a record
/// (as it was when read as a `serde_json::Value`), and of an object only its
/// `event` (or `type`) and `id` are kept.
#[derive(Deserialize)]
#[serde(untagged)]
enum ManifestTag {
    Record {
        #[serde(default)]
        event: Option<serde_json::Value>,
        #[serde(default, rename = "type")]
        kind: Option<serde_json::Value>,
        #[serde(default)]
        id: Option<serde_json::Value>,
        #[serde(default)]
        task: Option<serde_json::Value>,
        #[serde(default)]
        task_id: Option<serde_json::Value>,
    },
    Other(serde::de::IgnoredAny),
}

struct ManifestStatus {
    /// Tasks of `task-swept` events.
    swept: BTreeSet<String>,
    /// A torn last line: where it starts and its length.
    torn: Option<(u64, u64)>,
    bad: Vec<chipset_store::BadLine>,
    not_a_file: Option<chipset_store::Corruption>,
}

fn not(what: &str) -> CorruptReason {
    CorruptReason::WrongShape(format!("not {what}"))
}

/// A bad entry the scan met: at a [`StatePath`] the fix can move aside,
/// or, for a listed name that is not one safe path segment (no chipset
/// writer makes one, and no `StatePath` can name it), only at a path to
/// show: reported, and left for a person.
#[derive(Debug, Clone)]
enum BadEntry {
    At(StatePath),
    Unnamable(PathBuf),
}

impl BadEntry {
    /// The entry `name` listed in `dir`.
    fn listed(dir: &StatePath, name: &str) -> BadEntry {
        match dir.join(name) {
            Ok(path) => BadEntry::At(path),
            Err(_) => BadEntry::Unnamable(dir.as_path().join(name)),
        }
    }

    /// The path to show.
    fn shown(&self) -> &Path {
        match self {
            BadEntry::At(path) => path,
            BadEntry::Unnamable(path) => path,
        }
    }
}

fn is_dir(state: &StateDir, path: &StatePath) -> Result<bool> {
    Ok(state.stat(path)?.is_some_and(|m| m.is_dir()))
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "the test plants and inspects files as another program would, outside the store's API"
)]
mod tests;
