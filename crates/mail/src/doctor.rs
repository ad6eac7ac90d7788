//! The doctor: a full scan of `mail/` that finds (and with
//! [`DoctorMode::Fix`] repairs) what crashes and other programs leave behind.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use crate::MessageId;
use chipset_store::{AgentId, CorruptReason, DoctorMode, ReadOutcome, StateDir, TaskId};
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::format::{Kind, ManifestEvent, Message};
use crate::layout::{BY_TASK, Location, ORPHAN, id_of, parse_marker};
use crate::mail::{Mail, Moved, check_id, read_message};
use crate::spill::{self, Sorted, Sorter};

/// Why an inbox message counts as an orphan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OrphanReason {
    /// Its task has been swept (committed): nobody will read it for that task.
    TaskSwept,
    /// Its recipient is not in the recipient registry.
    UnknownRecipient,
    /// It is older than [`MailConfig::orphan_after`](crate::MailConfig::orphan_after).
    Stale,
}

impl fmt::Display for OrphanReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OrphanReason::TaskSwept => "task-swept",
            OrphanReason::UnknownRecipient => "unknown-recipient",
            OrphanReason::Stale => "stale",
        })
    }
}

/// One thing the doctor found, as the scan sees it; the public report is
/// the store's one shape ([`chipset_store::Finding`], see `repair.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Finding {
    /// A file or directory where a message (or inbox, or index entry) belongs
    /// that cannot be read as one. Fix: quarantine it (`.quarantine/` beside it).
    Corrupt {
        /// The bad entry.
        path: PathBuf,
        /// Why.
        reason: CorruptReason,
    },
    /// A message file that is well-formed but holds a value this version
    /// does not know (a new kind, priority or schema), written by a newer or
    /// other program. Not repaired and never quarantined: the file is what it
    /// claims to be. The commit gate stays closed while one is in an inbox.
    Unsupported {
        /// The file.
        path: PathBuf,
        /// What is not supported ("message kind `question`").
        what: String,
    },
    /// The same message in two places (a crash between a move's two
    /// directory syncs). Fix: quarantine the copy at the earlier stage.
    Duplicate {
        /// The message.
        id: MessageId,
        /// The copy kept (the later stage).
        kept: Location,
        /// The extra copy.
        extra: Location,
    },
    /// A reply missing from the reply index (a crash after publishing it, or
    /// written by another program). Fix: add the index entry.
    MissingReplyMarker {
        /// The message replied to.
        parent: MessageId,
        /// The reply.
        child: MessageId,
        /// The reply's kind.
        kind: Kind,
    },
    /// A request still in its inbox although a response was sent (a crash
    /// before the response archived it). Fix: archive it.
    AnsweredRequest {
        /// The request.
        id: MessageId,
        /// Its inbox.
        agent: AgentId,
    },
    /// The seed's `messaging-orphan-inbox`: an inbox message nobody will
    /// act on. Fix: move it to `archive/orphan/` and append an `orphaned` event.
    Orphan {
        /// The message.
        id: MessageId,
        /// Its inbox.
        agent: AgentId,
        /// Its task.
        task: TaskId,
        /// Why it is an orphan.
        reason: OrphanReason,
    },
    /// A message with no `sent` event in the manifest (a crash between
    /// publishing and appending, or written by another program). Fix: append
    /// one with `reconciled: true`.
    MissingSentEvent {
        /// The message.
        id: MessageId,
        /// Where it is.
        location: Location,
    },
    /// A message in `archive/` (top level: not a by-task or the orphan
    /// archive) with no `archived` event in the manifest: the follow-up of
    /// [`Mail::archive`], or of a response's archiving of its request, failed
    /// after the move (its commit point), or another program archived it
    /// without one. Fix: append one with `reconciled: true`, naming the
    /// message's addressee as the inbox it left, no `reply`, and the
    /// doctor's time.
    MissingArchivedEvent {
        /// The message.
        id: MessageId,
        /// Where it is ([`Location::Archive`]).
        location: Location,
    },
    /// A task's by-task archive holds messages but the manifest has no
    /// `task-swept` event for the task: the sweep's event failed after its
    /// moves (their commit points), or another program swept without one.
    /// Fix: append one with `reconciled: true`, `count` 0 and `total` the
    /// number of messages found.
    MissingSweptEvent {
        /// The task.
        task: TaskId,
        /// How many messages its by-task archive holds.
        total: usize,
    },
    /// The manifest ends in an unterminated line (a crash mid-append). Fix:
    /// truncate it.
    TornManifestTail {
        /// Where the torn line starts.
        offset: u64,
        /// Its length.
        len: u64,
    },
    /// A whole manifest line that is not JSON. Fix: moved, byte for byte, to
    /// `mail/.quarantine/` by [`JsonLog::repair`](chipset_store::JsonLog::repair),
    /// which keeps every whole record in order (the one rewrite of the audit
    /// log there is).
    BadManifestLine {
        /// Where it starts.
        offset: u64,
        /// Why it is bad.
        reason: CorruptReason,
    },
    /// A message younger than
    /// [`MailConfig::in_flight_grace`](crate::MailConfig::in_flight_grace)
    /// without a `sent` event (or, in `archive/`, without an `archived`
    /// event): its sender (or archiver) may be appending it right now, or
    /// may have crashed before it could. Not repaired yet (a reconciled
    /// event now could duplicate the writer's), and not clean either: run
    /// the doctor again after `check_after`, when it is either settled or a
    /// [`Finding::MissingSentEvent`] (or [`Finding::MissingArchivedEvent`])
    /// that the fix appends. A message missing both is reported once, for
    /// its `sent` event.
    InFlight {
        /// The message.
        id: MessageId,
        /// Where it is.
        location: Location,
        /// How long until the grace period is over.
        check_after: std::time::Duration,
    },
    /// A response (written by another program; `send` refuses these) whose
    /// request is unknown, expects no reply, is addressed to someone else, or
    /// belongs to another task. It does not count as an answer: the request
    /// stays pending. Not repaired: a person decides.
    MismatchedResponse {
        /// The response.
        id: MessageId,
        /// The request it names.
        parent: MessageId,
    },
}

impl Finding {
    /// Returns a stable kebab-case code for the finding (`messaging-orphan-inbox`, …).
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Finding::Corrupt { .. } => "messaging-corrupt-file",
            Finding::Unsupported { .. } => "messaging-unsupported-file",
            Finding::Duplicate { .. } => "messaging-duplicate-message",
            Finding::MissingReplyMarker { .. } => "messaging-missing-reply-index",
            Finding::AnsweredRequest { .. } => "messaging-answered-request-in-inbox",
            Finding::Orphan { .. } => "messaging-orphan-inbox",
            Finding::MissingSentEvent { .. } => "messaging-missing-sent-event",
            Finding::MissingArchivedEvent { .. } => "messaging-missing-archived-event",
            Finding::MissingSweptEvent { .. } => "messaging-missing-swept-event",
            Finding::TornManifestTail { .. } => "messaging-torn-manifest",
            Finding::BadManifestLine { .. } => "messaging-bad-manifest-line",
            Finding::MismatchedResponse { .. } => "messaging-mismatched-response",
            Finding::InFlight { .. } => "messaging-in-flight",
        }
    }

    /// Returns true when [`DoctorMode::Fix`] repairs it.
    pub(crate) fn is_fixable(&self) -> bool {
        !matches!(
            self,
            Finding::MismatchedResponse { .. }
                | Finding::Unsupported { .. }
                | Finding::InFlight { .. }
        )
    }

    /// Returns how long to wait before checking again, for
    /// [`Finding::InFlight`]: the finding is not a problem yet, and not clean.
    pub(crate) fn check_after(&self) -> Option<std::time::Duration> {
        match self {
            Finding::InFlight { check_after, .. } => Some(*check_after),
            _ => None,
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.code())?;
        match self {
            Finding::Corrupt { path, reason } => write!(f, "`{}`: {reason}", path.display()),
            Finding::Unsupported { path, what } => write!(
                f,
                "`{}` holds {what}, which this version does not support (left in place)",
                path.display()
            ),
            Finding::Duplicate { id, kept, extra } => {
                write!(f, "message `{id}` is in {kept} and {extra}")
            }
            Finding::MissingReplyMarker {
                parent,
                child,
                kind,
            } => write!(
                f,
                "{kind} `{child}` to `{parent}` is not in the reply index"
            ),
            Finding::AnsweredRequest { id, agent } => {
                write!(
                    f,
                    "request `{id}` in inbox/{agent} has a response but is not archived"
                )
            }
            Finding::Orphan {
                id,
                agent,
                task,
                reason,
            } => write!(
                f,
                "message `{id}` of task `{task}` in inbox/{agent} ({reason})"
            ),
            Finding::MissingSentEvent { id, location } => {
                write!(f, "message `{id}` in {location} has no `sent` event")
            }
            Finding::MissingArchivedEvent { id, location } => {
                write!(f, "message `{id}` in {location} has no `archived` event")
            }
            Finding::MissingSweptEvent { task, total } => write!(
                f,
                "archive/by-task/{task} holds {total} message(s) but the manifest has no \
                 `task-swept` event for it"
            ),
            Finding::TornManifestTail { offset, len } => {
                write!(f, "{len} bytes of an unterminated line at offset {offset}")
            }
            Finding::BadManifestLine { offset, reason } => {
                write!(f, "line at offset {offset}: {reason}")
            }
            Finding::InFlight {
                id,
                location,
                check_after,
            } => write!(
                f,
                "message `{id}` in {location} has no {} event yet: in flight (its {} \
                 may still be appending it), check again after {}s",
                if *location == Location::Archive {
                    "`sent` or `archived`"
                } else {
                    "`sent`"
                },
                if *location == Location::Archive {
                    "sender or archiver"
                } else {
                    "sender"
                },
                check_after.as_secs().max(1)
            ),
            Finding::MismatchedResponse { id, parent } => write!(
                f,
                "response `{id}` does not fit request `{parent}` (unknown, not a request, \
                 another addressee or another task); it is not counted as an answer"
            ),
        }
    }
}

/// What the scan found (and, in fix mode, repaired), before it becomes the
/// store's [`Report`](chipset_store::Report).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DoctorReport {
    /// The mode it ran in.
    pub(crate) mode: DoctorMode,
    /// Readable messages seen.
    pub(crate) messages: usize,
    /// What it found, in the order it was found.
    pub(crate) findings: Vec<Finding>,
}

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
    corrupt: Vec<(PathBuf, CorruptReason)>,
    unsupported: Vec<chipset_store::Unsupported>,
    /// Tasks with a by-task folder.
    swept: BTreeSet<u32>,
    agents: Interner<AgentId>,
    tasks: Interner<TaskId>,
    /// `{id}\tM\t{dir}\t…` per copy, `{id}\tS` and `{id}\tA` per event.
    by_id: Sorter<'a>,
    /// `{parent}\tR\t{kind}\t{child}` per reply-index entry, then
    /// `{parent}\tP\t…` per reply and `{id}\tK\t…` per request.
    by_parent: Sorter<'a>,
    /// Directories scanned so far: a copy's place in the scan order.
    dirs: u32,
}

impl<'a> Scan<'a> {
    fn new(mail: &'a Mail, budget: usize) -> Self {
        let dir = mail.layout.mail();
        Scan {
            corrupt: Vec::new(),
            unsupported: Vec::new(),
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

/// Walks a sorted stream one key (the text before the first tab) at a time.
struct Groups {
    sorted: Sorted,
    next: Option<String>,
}

impl Groups {
    fn new(mut sorted: Sorted) -> Result<Self> {
        let next = sorted.next_line()?.map(scratch_text).transpose()?;
        Ok(Groups { sorted, next })
    }

    /// The next key and the rest of each of its lines, in order.
    fn next_group(&mut self) -> Result<Option<(String, Vec<String>)>> {
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
fn bad_scratch() -> crate::MailError {
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
    /// Missing and in-flight events, in id order.
    events: Vec<Finding>,
    unsent: Vec<MessageId>,
    unarchived: Vec<(MessageId, AgentId, TaskId)>,
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

impl Mail {
    /// Scans all of `mail/` and reports (with [`DoctorMode::Fix`], repairs)
    /// what is wrong: see [`Finding`] for each kind and its fix.
    ///
    /// An *orphan* is an inbox message whose task has been swept (it arrived
    /// after the commit), whose recipient is not in the recipient registry
    /// (when one is configured), or that is older than
    /// [`MailConfig::orphan_after`](crate::MailConfig::orphan_after) (when
    /// set). Messages younger than
    /// [`MailConfig::in_flight_grace`](crate::MailConfig::in_flight_grace) are not reported
    /// as missing a `sent` event (their sender may be about to append it) but
    /// as [`Finding::InFlight`], which no mode repairs and which keeps the
    /// report from being clean: right after a crash the doctor says "check
    /// again after T", never "clean" while a message still lacks its event.
    ///
    /// The same holds for a message in `archive/` without its `archived`
    /// event, which the doctor judges by the message's `created_at` too: the
    /// time of the move into `archive/` is not known to it (the store offers
    /// no file times, and the doctor does not stat files itself; a file's
    /// ctime would also not follow the state's clock). So a message archived
    /// within the grace of its sending is in flight, and one archived later
    /// is reported (and, with Fix, given a reconciled event) at once. The
    /// price: a doctor run with Fix in the instant between a live archive's
    /// move and its own append (microseconds, one write) can add a
    /// reconciled `archived` event beside the archiver's, a duplicate audit
    /// line that says `reconciled: true`; nothing is lost or moved by it.
    ///
    /// Nothing is deleted: bad files are quarantined, messages are moved.
    /// Safe to run while agents work; stale temp files are the store's
    /// business ([`StateDir::sweep_temps`](chipset_store::StateDir::sweep_temps)).
    ///
    /// Memory does not grow with the number of messages: the scan sorts
    /// what it needs by message id, spilling sorted runs to a nameless
    /// scratch file in `mail/` beyond a fixed budget, and then looks at one
    /// id at a time (see the crate docs, Repair and status).
    ///
    /// # Errors
    ///
    /// [`MailError::Store`](crate::MailError::Store) when a directory cannot
    /// be listed or a repair fails; findings already repaired stay repaired.
    pub(crate) fn scan_doctor(&self, mode: DoctorMode) -> Result<DoctorReport> {
        self.doctor_within(mode, spill::BUDGET)
    }

    /// [`Mail::doctor`], its sorters spilling beyond `budget` bytes each.
    fn doctor_within(&self, mode: DoctorMode, budget: usize) -> Result<DoctorReport> {
        let mut scan = Scan::new(self, budget);
        self.scan_all(&mut scan)?;
        let manifest = self.manifest_status(&mut scan.by_id)?;
        let now = self.state.now();
        let by_id = self.by_id_pass(&mut scan, now)?;
        let by_parent = self.by_parent_pass(&mut scan)?;

        let mut findings: Vec<Finding> = scan
            .corrupt
            .iter()
            .map(|(path, reason)| Finding::Corrupt {
                path: path.clone(),
                reason: reason.clone(),
            })
            .collect();
        findings.extend(scan.unsupported.iter().map(|u| Finding::Unsupported {
            path: u.path.clone(),
            what: u.what.clone(),
        }));
        // In the order the scan met the extra copies.
        let mut duplicates = by_id.duplicates;
        duplicates.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        findings.extend(duplicates.into_iter().map(|(_, _, f)| f));
        // The reply checks, in the replies' id order.
        let mut replies = by_parent.replies;
        replies.sort_by(|a, b| a.0.cmp(&b.0));
        findings.extend(replies.into_iter().map(|(_, f)| f));
        let mut unlinked = by_parent.unlinked;
        unlinked.sort();
        // Orphans and answered requests, in id order.
        let mut inbox = by_id.inbox;
        inbox.sort_by(|a, b| a.0.cmp(&b.0));
        findings.extend(inbox.into_iter().map(|(_, f)| f));
        let orphans = by_id.orphans;
        let answered_requests = by_parent.answered_requests;

        if let Some(c) = &manifest.not_a_file {
            // A directory, FIFO or device where the manifest belongs: reported,
            // and with Fix moved aside; a new manifest is then reconciled.
            findings.push(Finding::Corrupt {
                path: c.path.clone(),
                reason: c.reason.clone(),
            });
        }
        if let Some(torn) = manifest.torn {
            findings.push(Finding::TornManifestTail {
                offset: torn.offset,
                len: torn.len,
            });
        }
        for bad in &manifest.bad {
            findings.push(Finding::BadManifestLine {
                offset: bad.offset,
                reason: bad.reason.clone(),
            });
        }
        findings.extend(by_id.events);
        let unsent = by_id.unsent;
        let unarchived = by_id.unarchived;
        let messages = by_id.messages;

        // A by-task folder without a `task-swept` event: judged by its
        // newest message, like the per-message events (a sweep running now
        // appends its event right after its moves).
        let mut by_task: Vec<(TaskId, (usize, MessageId, Seen))> = by_id
            .by_task
            .into_iter()
            .map(|(t, v)| (scan.tasks.get(t).clone(), v))
            .collect();
        by_task.sort_by(|a, b| a.0.cmp(&b.0));
        let mut unswept: Vec<(TaskId, usize)> = Vec::new();
        for (task, (total, newest_id, newest)) in by_task {
            if manifest.swept.contains(task.as_str()) {
                continue;
            }
            let age = now.since(newest.created_at);
            if age >= self.config.in_flight_grace {
                findings.push(Finding::MissingSweptEvent {
                    task: task.clone(),
                    total,
                });
                unswept.push((task, total));
            } else {
                findings.push(Finding::InFlight {
                    id: newest_id,
                    location: scan.location(newest.loc),
                    check_after: self.config.in_flight_grace - age,
                });
            }
        }

        let report = |findings| DoctorReport {
            mode,
            messages,
            findings,
        };
        if mode == DoctorMode::Check {
            return Ok(report(findings));
        }

        // Repairs, in an order where each one finds what the previous left.
        for (path, _) in &scan.corrupt {
            self.quarantine(path)?;
        }
        for f in &findings {
            if let Finding::Duplicate { id, extra, .. } = f {
                self.quarantine(&self.layout.file(extra, id))?;
            }
        }
        if let Some(c) = &manifest.not_a_file {
            self.quarantine(&c.path)?;
        }
        let log = self.manifest()?;
        if !manifest.bad.is_empty() {
            log.repair::<serde_json::Value>()?;
        } else if manifest.torn.is_some() {
            log.recover()?;
        }
        // The scan kept no whole messages: read again the few a repair needs.
        let whole = |ids: &mut dyn Iterator<Item = &MessageId>| -> Result<Vec<Message>> {
            let mut out = Vec::new();
            for id in ids {
                if let Some(found) = self.find(id)? {
                    out.push(found.message);
                }
            }
            Ok(out)
        };
        self.link_replies(&whole(&mut unlinked.iter())?)?;
        let mut events = Vec::new();
        let unsent = whole(&mut unsent.iter())?;
        for (agent, id, task, reason) in orphans {
            let from = Location::Inbox(agent.clone());
            if let Moved::Done = self.move_message(&id, &from, &Location::Orphan)? {
                events.push(ManifestEvent::Orphaned {
                    id,
                    agent,
                    task,
                    reason,
                    at: now,
                });
            }
        }
        for (agent, id, task) in answered_requests {
            let from = Location::Inbox(agent.clone());
            if let Moved::Done = self.move_message(&id, &from, &Location::Archive)? {
                events.push(ManifestEvent::Archived {
                    id,
                    agent,
                    task,
                    reply: None,
                    at: now,
                    reconciled: false,
                });
            }
        }
        // Reconciled `sent` events go first in time order of the messages.
        let mut reconciled: Vec<ManifestEvent> = unsent
            .iter()
            .map(|m| ManifestEvent::sent(m, true))
            .collect();
        // Then the `archived` events of messages found in `archive/`
        // without one (after their `sent`, as they were written).
        reconciled.extend(unarchived.into_iter().map(|(id, agent, task)| {
            ManifestEvent::Archived {
                id,
                agent,
                task,
                reply: None,
                at: now,
                reconciled: true,
            }
        }));
        reconciled.extend(
            unswept
                .into_iter()
                .map(|(task, total)| ManifestEvent::TaskSwept {
                    task,
                    count: 0,
                    total,
                    at: now,
                    reconciled: true,
                }),
        );
        reconciled.append(&mut events);
        log.append_batch(&reconciled)?;
        if !findings.is_empty() {
            tracing::info!(findings = findings.len(), "mail doctor repaired");
        }
        Ok(report(findings))
    }

    fn quarantine(&self, path: &Path) -> Result<()> {
        // Message files are never rewritten (published no-clobber, moved
        // whole), so no writer's lock: the store moves it if it is still
        // what it read, and leaves it if it went away meanwhile.
        self.state.quarantine_checked(path, None, |_| true)?;
        Ok(())
    }

    /// The first pass, one message id at a time: duplicates, orphans, the
    /// `sent` and `archived` events, the by-task folders; and for the second
    /// pass each reply (`P`, under its parent's id) and each request that
    /// expects a reply (`K`).
    fn by_id_pass<'a>(
        &'a self,
        scan: &mut Scan<'a>,
        now: chipset_store::Timestamp,
    ) -> Result<ById> {
        let sorter = std::mem::replace(
            &mut scan.by_id,
            Sorter::new(&self.state, self.layout.mail(), 0),
        );
        let mut groups = Groups::new(sorter.finish()?)?;
        let mut out = ById::default();
        while let Some((key, lines)) = groups.next_group()? {
            let mut copies: Vec<(u32, Seen)> = Vec::new();
            let (mut sent, mut archived_event) = (false, false);
            for line in &lines {
                let mut fields = line.split('\t');
                match fields.next() {
                    Some("M") => copies.push(decode_copy(&mut fields).ok_or_else(bad_scratch)?),
                    Some("S") => sent = true,
                    Some("A") => archived_event = true,
                    _ => return Err(bad_scratch()),
                }
            }
            if copies.is_empty() {
                continue;
            }
            let id = MessageId::new(key.as_str()).map_err(|_| bad_scratch())?;
            // One copy per id, the one furthest along its lifecycle, chosen
            // in the scan's order as the copies were met.
            let mut kept: Option<Seen> = None;
            for (dir, seen) in copies {
                match &kept {
                    Some(k) if scan.location(k.loc).stage() >= scan.location(seen.loc).stage() => {
                        let f = Finding::Duplicate {
                            id: id.clone(),
                            kept: scan.location(k.loc),
                            extra: scan.location(seen.loc),
                        };
                        out.duplicates.push((dir, id.clone(), f));
                    }
                    Some(k) => {
                        let f = Finding::Duplicate {
                            id: id.clone(),
                            kept: scan.location(seen.loc),
                            extra: scan.location(k.loc),
                        };
                        out.duplicates.push((dir, id.clone(), f));
                        kept = Some(seen);
                    }
                    None => kept = Some(seen),
                }
            }
            let m = kept.expect("one copy at least");
            out.messages += 1;
            if let Some(parent) = &m.in_reply_to {
                let line = format!("{parent}\tP\t{id}\t{}\t{}\t{}", m.kind, m.from, m.phase);
                scan.by_parent.push(line.as_bytes())?;
            }

            // Orphans, and the requests in an inbox that a response may have answered.
            let mut answerable = None;
            if let Loc::Inbox(agent) = m.loc {
                let reason = if scan.swept.contains(&m.phase) {
                    Some(OrphanReason::TaskSwept)
                } else if self
                    .config
                    .recipients
                    .as_ref()
                    .is_some_and(|r| !r.contains(scan.agents.get(agent)))
                {
                    Some(OrphanReason::UnknownRecipient)
                } else if self
                    .config
                    .orphan_after
                    .is_some_and(|age| now.since(m.created_at) > age)
                {
                    Some(OrphanReason::Stale)
                } else {
                    None
                };
                let (agent_id, task) = (scan.agents.get(agent), scan.tasks.get(m.phase));
                if let Some(reason) = reason {
                    out.inbox.push((
                        id.clone(),
                        Finding::Orphan {
                            id: id.clone(),
                            agent: agent_id.clone(),
                            task: task.clone(),
                            reason,
                        },
                    ));
                    out.orphans
                        .push((agent_id.clone(), id.clone(), task.clone(), reason));
                } else {
                    answerable = Some(agent);
                }
            }
            if m.needs_reply {
                let line = format!(
                    "{id}\tK\t{}\t{}\t{}",
                    m.to,
                    m.phase,
                    answerable.map(|a| a.to_string()).unwrap_or_default()
                );
                scan.by_parent.push(line.as_bytes())?;
            }

            // The manifest's events.
            let archived = m.loc != Loc::Archive || archived_event;
            if !(sent && archived) {
                let age = now.since(m.created_at);
                let location = scan.location(m.loc);
                if age < self.config.in_flight_grace {
                    out.events.push(Finding::InFlight {
                        id: id.clone(),
                        location,
                        check_after: self.config.in_flight_grace - age,
                    });
                } else {
                    if !sent {
                        out.events.push(Finding::MissingSentEvent {
                            id: id.clone(),
                            location: location.clone(),
                        });
                        out.unsent.push(id.clone());
                    }
                    if !archived {
                        out.events.push(Finding::MissingArchivedEvent {
                            id: id.clone(),
                            location,
                        });
                        out.unarchived.push((
                            id.clone(),
                            scan.agents.get(m.to).clone(),
                            scan.tasks.get(m.phase).clone(),
                        ));
                    }
                }
            }

            if let Loc::ByTask(t) = m.loc {
                match out.by_task.get_mut(&t) {
                    Some(e) => {
                        e.0 += 1;
                        if m.created_at > e.2.created_at {
                            (e.1, e.2) = (id, m);
                        }
                    }
                    None => {
                        out.by_task.insert(t, (1, id, m));
                    }
                }
            }
        }
        Ok(out)
    }

    /// The second pass, one parent id at a time: which replies fit their
    /// request, which are missing from the reply index, and which requests
    /// still in an inbox have a response.
    fn by_parent_pass<'a>(&'a self, scan: &mut Scan<'a>) -> Result<ByParent> {
        let sorter = std::mem::replace(
            &mut scan.by_parent,
            Sorter::new(&self.state, self.layout.mail(), 0),
        );
        let mut groups = Groups::new(sorter.finish()?)?;
        let mut out = ByParent::default();
        while let Some((key, lines)) = groups.next_group()? {
            let parent = MessageId::new(key.as_str()).map_err(|_| bad_scratch())?;
            // The request (`to`, task, inbox it may be archived from).
            let mut request: Option<(u32, u32, Option<u32>)> = None;
            let mut replies: Vec<(MessageId, Kind, u32, u32)> = Vec::new();
            let mut markers: BTreeSet<(Kind, MessageId)> = BTreeSet::new();
            for line in &lines {
                let f: Vec<&str> = line.split('\t').collect();
                match f.as_slice() {
                    ["K", to, phase, agent] => {
                        let agent = match *agent {
                            "" => None,
                            a => Some(a.parse().map_err(|_| bad_scratch())?),
                        };
                        request = Some((
                            to.parse().map_err(|_| bad_scratch())?,
                            phase.parse().map_err(|_| bad_scratch())?,
                            agent,
                        ));
                    }
                    ["P", child, kind, from, phase] => replies.push((
                        MessageId::new(*child).map_err(|_| bad_scratch())?,
                        Kind::from_name(kind).ok_or_else(bad_scratch)?,
                        from.parse().map_err(|_| bad_scratch())?,
                        phase.parse().map_err(|_| bad_scratch())?,
                    )),
                    ["R", kind, child] => {
                        markers.insert((
                            Kind::from_name(kind).ok_or_else(bad_scratch)?,
                            MessageId::new(*child).map_err(|_| bad_scratch())?,
                        ));
                    }
                    _ => return Err(bad_scratch()),
                }
            }
            let mut answered = markers.iter().any(|(k, _)| *k == Kind::Response);
            for (child, kind, from, phase) in replies {
                if kind == Kind::Response {
                    // Only what `send` would accept answers a request: the
                    // request exists, expects a reply, is addressed to the
                    // responder, and is of the same task.
                    let fits = request.is_some_and(|(to, p, _)| to == from && p == phase);
                    if !fits {
                        let f = Finding::MismatchedResponse {
                            id: child.clone(),
                            parent: parent.clone(),
                        };
                        out.replies.push((child, f));
                        continue;
                    }
                    answered = true;
                }
                if !markers.contains(&(kind, child.clone())) {
                    let f = Finding::MissingReplyMarker {
                        parent: parent.clone(),
                        child: child.clone(),
                        kind,
                    };
                    out.replies.push((child.clone(), f));
                    out.unlinked.push(child);
                }
            }
            if let Some((_, phase, Some(agent))) = request
                && answered
            {
                let agent = scan.agents.get(agent).clone();
                let f = Finding::AnsweredRequest {
                    id: parent.clone(),
                    agent: agent.clone(),
                };
                out.answered_requests
                    .push((agent, parent.clone(), scan.tasks.get(phase).clone()));
                out.replies.push((parent, f));
            }
        }
        Ok(out)
    }

    fn scan_all(&self, scan: &mut Scan<'_>) -> Result<()> {
        let inbox_root = self.layout.inbox_root();
        for name in self.state.list(&inbox_root)? {
            let path = inbox_root.join(&name);
            match AgentId::new(name.as_str()) {
                Ok(agent) if is_dir(&self.state, &path)? => {
                    self.scan_messages(scan, &Location::Inbox(agent), &[])?;
                }
                _ => scan.corrupt.push((path, not("an agent inbox directory"))),
            }
        }
        let archive_root = self.layout.archive_root();
        for sub in [BY_TASK, ORPHAN] {
            let path = archive_root.join(sub);
            if crate::mail::exists(&self.state, &path)? && !is_dir(&self.state, &path)? {
                scan.corrupt.push((path, not("a directory")));
            }
        }
        self.scan_messages(scan, &Location::Archive, &[BY_TASK, ORPHAN])?;
        self.scan_messages(scan, &Location::Orphan, &[])?;
        let by_task_root = self.layout.by_task_root();
        if is_dir(&self.state, &by_task_root)? {
            for name in self.state.list(&by_task_root)? {
                let path = by_task_root.join(&name);
                match TaskId::new(name.as_str()) {
                    Ok(task) if is_dir(&self.state, &path)? => {
                        let t = scan.tasks.intern(&task);
                        scan.swept.insert(t);
                        self.scan_messages(scan, &Location::ByTask(task), &[])?;
                    }
                    _ => scan.corrupt.push((path, not("a task directory"))),
                }
            }
        }
        // The reply index: one folder per parent, so as many as there are
        // answered messages; walked without listing it whole.
        let replies_root = self.layout.replies_root();
        let mut corrupt = Vec::new();
        self.state
            .for_each_name(&replies_root, |name| -> Result<()> {
                let path = replies_root.join(&name);
                match MessageId::new(name.as_str()) {
                    Ok(parent) if is_dir(&self.state, &path)? => {
                        for marker in self.state.list(&path)? {
                            match parse_marker(&marker) {
                                Some((kind, child)) => {
                                    let line = format!("{parent}\tR\t{kind}\t{child}");
                                    scan.by_parent.push(line.as_bytes())?;
                                }
                                None => {
                                    corrupt.push((path.join(&marker), not("a reply-index entry")));
                                }
                            }
                        }
                    }
                    _ => corrupt.push((path, not("a reply-index directory"))),
                }
                Ok(())
            })?;
        corrupt.sort_by(|a, b| a.0.cmp(&b.0));
        scan.corrupt.extend(corrupt);
        Ok(())
    }

    /// Reads every message file of one directory, without listing it whole:
    /// each readable one goes to the sorter, each bad one to the findings
    /// (in name order, as a sorted listing would meet them).
    fn scan_messages(&self, scan: &mut Scan<'_>, location: &Location, skip: &[&str]) -> Result<()> {
        let dir = self.layout.dir_of(location);
        if !crate::mail::exists(&self.state, &dir)? {
            return Ok(());
        }
        if !is_dir(&self.state, &dir)? {
            return Ok(()); // reported by the caller
        }
        let index = scan.dirs;
        scan.dirs += 1;
        let loc = scan.loc(location);
        let mut corrupt = Vec::new();
        let mut unsupported = Vec::new();
        self.state.for_each_name(&dir, |name| -> Result<()> {
            if skip.contains(&name.as_str()) {
                return Ok(());
            }
            let path = dir.join(&name);
            let Some(id) = id_of(&name) else {
                corrupt.push((path, not("a message file (`{id}.json`)")));
                return Ok(());
            };
            let read = match read_message(&self.state, &path) {
                Err(crate::MailError::Store(chipset_store::Error::Symlink { path })) => {
                    corrupt.push((path, CorruptReason::NotARegularFile));
                    return Ok(());
                }
                other => other?,
            };
            match read {
                ReadOutcome::Missing => {}
                ReadOutcome::Corrupt(c) => corrupt.push((c.path, c.reason)),
                ReadOutcome::Unsupported(u) => unsupported.push(u),
                ReadOutcome::Value(m) => match check_id(&path, &id, m) {
                    Ok(m) => scan.copy(index, loc, &m)?,
                    Err(c) => corrupt.push((c.path, c.reason)),
                },
            }
            Ok(())
        })?;
        corrupt.sort_by(|a, b| a.0.cmp(&b.0));
        unsupported.sort_by(|a, b| a.path.cmp(&b.path));
        scan.corrupt.extend(corrupt);
        scan.unsupported.extend(unsupported);
        Ok(())
    }

    /// Reads the manifest one record at a time: the ids of its `sent` and
    /// `archived` events go to `by_id` (never into a set in memory), the
    /// tasks of its `task-swept` events into the result.
    fn manifest_status(&self, by_id: &mut Sorter<'_>) -> Result<ManifestStatus> {
        let log = self.state.log_reader(&self.layout.manifest())?;
        let mut swept = BTreeSet::new();
        let mut failed: Option<crate::MailError> = None;
        let text = |v: Option<serde_json::Value>| v.and_then(|v| v.as_str().map(str::to_owned));
        let read = log.for_each::<ManifestTag>(|r| {
            let ManifestTag::Record {
                event,
                kind,
                id,
                task,
                task_id,
            } = r
            else {
                return;
            };
            let tag = match (text(event.or(kind)).as_deref(), text(id)) {
                (Some("sent"), Some(id)) => Some(("S", id)),
                (Some("archived"), Some(id)) => Some(("A", id)),
                // chipset writes `task`, nubos-pilot `task_id`.
                (Some("task-swept"), _) => {
                    swept.extend(text(task.or(task_id)));
                    None
                }
                _ => None,
            };
            // An id with a control character names no message file.
            if let Some((tag, id)) = tag
                && !id.chars().any(char::is_control)
                && failed.is_none()
                && let Err(e) = by_id.push(format!("{id}\t{tag}").as_bytes())
            {
                failed = Some(e);
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
        let contents = match read {
            Ok(c) => c,
            Err(chipset_store::Error::Corrupt(c)) => {
                return Ok(ManifestStatus {
                    swept: BTreeSet::new(),
                    torn: None,
                    bad: Vec::new(),
                    not_a_file: Some(c),
                });
            }
            Err(e) => return Err(e.into()),
        };
        Ok(ManifestStatus {
            swept,
            torn: contents.torn_tail,
            bad: contents.bad_lines,
            not_a_file: None,
        })
    }
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
    torn: Option<chipset_store::TornTail>,
    bad: Vec<chipset_store::BadLine>,
    not_a_file: Option<chipset_store::Corruption>,
}

fn not(what: &str) -> CorruptReason {
    CorruptReason::WrongShape(format!("not {what}"))
}

fn is_dir(state: &StateDir, path: &Path) -> Result<bool> {
    Ok(state.stat(path)?.is_some_and(|m| m.is_dir()))
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "the test plants and inspects files as another program would, outside the store's API"
)]
mod tests {
    use std::time::Duration;

    use chipset_store::{AgentId, StateDir, TaskId};

    use super::*;
    use crate::{Draft, MailConfig};

    /// A state with one of nearly every finding, among enough messages that
    /// a small budget spills many runs.
    fn troubled(root: &Path) -> Mail {
        let config = MailConfig {
            in_flight_grace: Duration::ZERO,
            ..MailConfig::default()
        };
        let mail = Mail::with_config(StateDir::open(root).unwrap(), config);
        let (c, e) = (AgentId::new("c").unwrap(), AgentId::new("e").unwrap());
        let (t, done) = (TaskId::new("t").unwrap(), TaskId::new("done").unwrap());
        let mut requests = Vec::new();
        for i in 0..40 {
            let q = mail
                .send(&Draft::request(
                    c.clone(),
                    e.clone(),
                    t.clone(),
                    "q",
                    format!("{i}"),
                ))
                .unwrap();
            if i % 2 == 0 {
                mail.send(&Draft::response(
                    e.clone(),
                    c.clone(),
                    q.id().clone(),
                    "a",
                    "",
                ))
                .unwrap();
            }
            requests.push(q);
        }
        mail.send(&Draft::notify(c.clone(), e.clone(), done.clone(), "n", ""))
            .unwrap();
        mail.sweep_task_on_commit(&done).unwrap();
        // An orphan: sent to a swept task.
        mail.send(&Draft::notify(c.clone(), e.clone(), done, "late", ""))
            .unwrap();
        let inbox_e = mail.inbox_dir(&e);
        let archive = mail.dir().join("archive");
        // A duplicate: an archived request copied back into its inbox.
        let answered = requests[0].id();
        std::fs::copy(
            archive.join(format!("{answered}.json")),
            inbox_e.join(format!("{answered}.json")),
        )
        .unwrap();
        // Reply-index entries lost.
        std::fs::remove_dir_all(mail.dir().join("replies").join(requests[2].id().as_str()))
            .unwrap();
        // A manifest without its first lines: messages without `sent` events.
        let manifest = std::fs::read_to_string(mail.manifest_path()).unwrap();
        let rest: Vec<&str> = manifest.lines().skip(5).collect();
        std::fs::write(mail.manifest_path(), rest.join("\n") + "\n{\"torn").unwrap();
        // Corrupt files.
        std::fs::write(inbox_e.join("not-a-message.txt"), b"x").unwrap();
        std::fs::write(inbox_e.join("1-broken.json"), b"{").unwrap();
        mail
    }

    #[test]
    fn a_spilled_scan_finds_what_one_in_memory_finds() {
        let tmp = tempfile::tempdir().unwrap();
        let mail = troubled(tmp.path());
        let in_memory = mail
            .doctor_within(DoctorMode::Check, spill::BUDGET)
            .unwrap();
        let codes: BTreeSet<&str> = in_memory.findings.iter().map(Finding::code).collect();
        for code in [
            "messaging-corrupt-file",
            "messaging-duplicate-message",
            "messaging-missing-reply-index",
            "messaging-orphan-inbox",
            "messaging-missing-sent-event",
            "messaging-torn-manifest",
        ] {
            assert!(codes.contains(code), "{code} not in {codes:?}");
        }
        assert_eq!(in_memory.messages, 40 + 20 + 2);
        // A few hundred bytes: every few records spill a run.
        let spilled = mail.doctor_within(DoctorMode::Check, 300).unwrap();
        assert_eq!(spilled, in_memory);
        // The scratch files have no names: nothing is left in `mail/`.
        let left: Vec<_> = std::fs::read_dir(mail.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(
            left.iter()
                .all(|n| !n.starts_with(".scratch") && !n.contains(".tmp")),
            "{left:?}"
        );
        // And with Fix, the repairs leave a clean state either way.
        mail.doctor_within(DoctorMode::Fix, 300).unwrap();
        let after = mail.doctor_within(DoctorMode::Check, 300).unwrap();
        assert!(after.findings.is_empty(), "{:?}", after.findings);
    }
}
