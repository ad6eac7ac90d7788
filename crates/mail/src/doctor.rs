//! The doctor: a full scan of `mail/` that finds (and with
//! [`DoctorMode::Fix`] repairs) what crashes and other programs leave behind.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use chipset_store::{AgentId, CorruptReason, DoctorMode, MessageId, ReadOutcome, StateDir, TaskId};
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::format::{Kind, ManifestEvent, Message};
use crate::layout::{BY_TASK, Location, ORPHAN, id_of, parse_marker};
use crate::mail::{Mail, Moved, check_id, read_message};

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

/// What the doctor keeps of a message: what its checks need, no body or
/// subject, names interned. A repair that needs the whole message reads it
/// again.
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

/// Everything one scan saw.
#[derive(Default)]
struct Scan {
    /// One copy per id: the one furthest along its lifecycle (kept as the
    /// scan goes, so no list of every copy is ever held).
    unique: BTreeMap<MessageId, Seen>,
    /// The other copies, as findings, in the order they were seen.
    duplicates: Vec<Finding>,
    corrupt: Vec<(PathBuf, CorruptReason)>,
    unsupported: Vec<chipset_store::Unsupported>,
    markers: BTreeSet<(MessageId, Kind, MessageId)>,
    swept: BTreeSet<TaskId>,
    agents: Interner<AgentId>,
    tasks: Interner<TaskId>,
}

impl Scan {
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

    /// Keeps the copy of `m` furthest along its lifecycle; the other is a duplicate.
    fn keep(&mut self, location: &Location, m: Message) {
        let loc = self.loc(location);
        let seen = Seen {
            loc,
            kind: m.kind,
            needs_reply: m.needs_reply(),
            from: self.agents.intern(&m.from),
            to: self.agents.intern(&m.to),
            phase: self.tasks.intern(&m.phase),
            in_reply_to: m.in_reply_to,
            created_at: m.created_at,
        };
        match self.unique.get(&m.id).map(|k| k.loc) {
            Some(kept) if self.location(kept).stage() >= location.stage() => {
                self.duplicates.push(Finding::Duplicate {
                    id: m.id,
                    kept: self.location(kept),
                    extra: location.clone(),
                })
            }
            Some(kept) => {
                self.duplicates.push(Finding::Duplicate {
                    id: m.id.clone(),
                    kept: location.clone(),
                    extra: self.location(kept),
                });
                self.unique.insert(m.id, seen);
            }
            None => {
                self.unique.insert(m.id, seen);
            }
        }
    }
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
    /// # Errors
    ///
    /// [`MailError::Store`](crate::MailError::Store) when a directory cannot
    /// be listed or a repair fails; findings already repaired stay repaired.
    pub(crate) fn scan_doctor(&self, mode: DoctorMode) -> Result<DoctorReport> {
        let mut scan = self.scan_all()?;
        let now = self.state.now();
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

        // One copy per id: the one furthest along its lifecycle.
        let unique = std::mem::take(&mut scan.unique);
        findings.extend(std::mem::take(&mut scan.duplicates));

        let mut answered: BTreeSet<MessageId> = scan
            .markers
            .iter()
            .filter(|(_, k, _)| *k == Kind::Response)
            .map(|(p, _, _)| p.clone())
            .collect();
        let mut unlinked: Vec<MessageId> = Vec::new();
        for (id, m) in &unique {
            let Some(parent) = &m.in_reply_to else {
                continue;
            };
            if m.kind == Kind::Response {
                // Only what `send` would accept answers a request: the request
                // exists, expects a reply, is addressed to the responder, and
                // is of the same task.
                let fits = unique
                    .get(parent)
                    .is_some_and(|p| p.needs_reply && p.to == m.from && p.phase == m.phase);
                if !fits {
                    findings.push(Finding::MismatchedResponse {
                        id: id.clone(),
                        parent: parent.clone(),
                    });
                    continue;
                }
                answered.insert(parent.clone());
            }
            if !scan.markers.contains(&(parent.clone(), m.kind, id.clone())) {
                findings.push(Finding::MissingReplyMarker {
                    parent: parent.clone(),
                    child: id.clone(),
                    kind: m.kind,
                });
                unlinked.push(id.clone());
            }
        }

        let mut orphans = Vec::new();
        let mut answered_requests = Vec::new();
        for (id, m) in &unique {
            let Loc::Inbox(agent) = m.loc else {
                continue;
            };
            let agent = scan.agents.get(agent);
            let phase = scan.tasks.get(m.phase);
            let reason = if scan.swept.contains(phase) {
                Some(OrphanReason::TaskSwept)
            } else if self
                .config
                .recipients
                .as_ref()
                .is_some_and(|r| !r.contains(agent))
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
            if let Some(reason) = reason {
                findings.push(Finding::Orphan {
                    id: id.clone(),
                    agent: agent.clone(),
                    task: phase.clone(),
                    reason,
                });
                orphans.push((agent.clone(), id, phase.clone(), reason));
            } else if m.needs_reply && answered.contains(id) {
                findings.push(Finding::AnsweredRequest {
                    id: id.clone(),
                    agent: agent.clone(),
                });
                answered_requests.push((agent.clone(), id, phase.clone()));
            }
        }

        let manifest = self.manifest_status()?;
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
        let mut unsent: Vec<&MessageId> = Vec::new();
        let mut unarchived: Vec<(&MessageId, &Seen)> = Vec::new();
        for (id, m) in &unique {
            let sent = manifest.sent.contains(id.as_str());
            // Only top-level `archive/`: by-task messages were archived (or
            // taken from an inbox) by a sweep, whose event is `task-swept`;
            // orphans have `orphaned`.
            let archived = m.loc != Loc::Archive || manifest.archived.contains(id.as_str());
            if sent && archived {
                continue;
            }
            let age = now.since(m.created_at);
            if sent {
                if age >= self.config.in_flight_grace {
                    findings.push(Finding::MissingArchivedEvent {
                        id: id.clone(),
                        location: scan.location(m.loc),
                    });
                    unarchived.push((id, m));
                } else {
                    findings.push(Finding::InFlight {
                        id: id.clone(),
                        location: scan.location(m.loc),
                        check_after: self.config.in_flight_grace - age,
                    });
                }
                continue;
            }
            if age >= self.config.in_flight_grace {
                findings.push(Finding::MissingSentEvent {
                    id: id.clone(),
                    location: scan.location(m.loc),
                });
                unsent.push(id);
                if !archived {
                    findings.push(Finding::MissingArchivedEvent {
                        id: id.clone(),
                        location: scan.location(m.loc),
                    });
                    unarchived.push((id, m));
                }
            } else {
                findings.push(Finding::InFlight {
                    id: id.clone(),
                    location: scan.location(m.loc),
                    check_after: self.config.in_flight_grace - age,
                });
            }
        }

        // A by-task folder without a `task-swept` event: judged by its
        // newest message, like the per-message events (a sweep running now
        // appends its event right after its moves).
        let mut by_task: BTreeMap<u32, (usize, &MessageId, &Seen)> = BTreeMap::new();
        for (id, m) in &unique {
            if let Loc::ByTask(t) = m.loc {
                let e = by_task.entry(t).or_insert((0, id, m));
                e.0 += 1;
                if m.created_at > e.2.created_at {
                    (e.1, e.2) = (id, m);
                }
            }
        }
        let mut unswept: Vec<(TaskId, usize)> = Vec::new();
        for (t, (total, newest_id, newest)) in by_task {
            let task = scan.tasks.get(t).clone();
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
                    id: newest_id.clone(),
                    location: scan.location(newest.loc),
                    check_after: self.config.in_flight_grace - age,
                });
            }
        }

        let report = |findings| DoctorReport {
            mode,
            messages: unique.len(),
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
        let unsent = whole(&mut unsent.into_iter())?;
        for (agent, id, task, reason) in orphans {
            let from = Location::Inbox(agent.clone());
            if let Moved::Done = self.move_message(id, &from, &Location::Orphan)? {
                events.push(ManifestEvent::Orphaned {
                    id: id.clone(),
                    agent,
                    task,
                    reason,
                    at: now,
                });
            }
        }
        for (agent, id, task) in answered_requests {
            let from = Location::Inbox(agent.clone());
            if let Moved::Done = self.move_message(id, &from, &Location::Archive)? {
                events.push(ManifestEvent::Archived {
                    id: id.clone(),
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
        reconciled.extend(unarchived.iter().map(|(id, m)| ManifestEvent::Archived {
            id: (*id).clone(),
            agent: scan.agents.get(m.to).clone(),
            task: scan.tasks.get(m.phase).clone(),
            reply: None,
            at: now,
            reconciled: true,
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

    fn scan_all(&self) -> Result<Scan> {
        let mut scan = Scan::default();
        let inbox_root = self.layout.inbox_root();
        for name in self.state.list(&inbox_root)? {
            let path = inbox_root.join(&name);
            match AgentId::new(name.as_str()) {
                Ok(agent) if is_dir(&self.state, &path)? => {
                    self.scan_messages(&mut scan, &Location::Inbox(agent), &[])?;
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
        self.scan_messages(&mut scan, &Location::Archive, &[BY_TASK, ORPHAN])?;
        self.scan_messages(&mut scan, &Location::Orphan, &[])?;
        let by_task_root = self.layout.by_task_root();
        if is_dir(&self.state, &by_task_root)? {
            for name in self.state.list(&by_task_root)? {
                let path = by_task_root.join(&name);
                match TaskId::new(name.as_str()) {
                    Ok(task) if is_dir(&self.state, &path)? => {
                        scan.swept.insert(task.clone());
                        self.scan_messages(&mut scan, &Location::ByTask(task), &[])?;
                    }
                    _ => scan.corrupt.push((path, not("a task directory"))),
                }
            }
        }
        let replies_root = self.layout.replies_root();
        for name in self.state.list(&replies_root)? {
            let path = replies_root.join(&name);
            match MessageId::new(name.as_str()) {
                Ok(parent) if is_dir(&self.state, &path)? => {
                    for marker in self.state.list(&path)? {
                        match parse_marker(&marker) {
                            Some((kind, child)) => {
                                scan.markers.insert((parent.clone(), kind, child));
                            }
                            None => scan
                                .corrupt
                                .push((path.join(&marker), not("a reply-index entry"))),
                        }
                    }
                }
                _ => scan.corrupt.push((path, not("a reply-index directory"))),
            }
        }
        Ok(scan)
    }

    fn scan_messages(&self, scan: &mut Scan, location: &Location, skip: &[&str]) -> Result<()> {
        let dir = self.layout.dir_of(location);
        if !crate::mail::exists(&self.state, &dir)? {
            return Ok(());
        }
        if !is_dir(&self.state, &dir)? {
            return Ok(()); // reported by the caller
        }
        for name in self.state.list(&dir)? {
            if skip.contains(&name.as_str()) {
                continue;
            }
            let path = dir.join(&name);
            let Some(id) = id_of(&name) else {
                scan.corrupt
                    .push((path, not("a message file (`{id}.json`)")));
                continue;
            };
            let read = match read_message(&self.state, &path) {
                Err(crate::MailError::Store(chipset_store::Error::Symlink { path })) => {
                    scan.corrupt.push((path, CorruptReason::NotARegularFile));
                    continue;
                }
                other => other?,
            };
            match read {
                ReadOutcome::Missing => {}
                ReadOutcome::Corrupt(c) => scan.corrupt.push((c.path, c.reason)),
                ReadOutcome::Unsupported(u) => scan.unsupported.push(u),
                ReadOutcome::Value(m) => match check_id(&path, &id, m) {
                    Ok(m) => scan.keep(location, m),
                    Err(c) => scan.corrupt.push((c.path, c.reason)),
                },
            }
        }
        Ok(())
    }

    fn manifest_status(&self) -> Result<ManifestStatus> {
        let log = chipset_store::JsonLog::new(self.layout.manifest());
        // Only the tag and id of each record are kept: the doctor's memory
        // must not hold every manifest record as a JSON tree.
        let contents = match log.read::<ManifestTag>() {
            Ok(c) => c,
            Err(chipset_store::Error::Corrupt(c)) => {
                return Ok(ManifestStatus {
                    sent: BTreeSet::new(),
                    archived: BTreeSet::new(),
                    swept: BTreeSet::new(),
                    torn: None,
                    bad: Vec::new(),
                    not_a_file: Some(c),
                });
            }
            Err(e) => return Err(e.into()),
        };
        // Of `sent` and `archived` events only the ids are kept, each in its
        // set.
        let mut sent = BTreeSet::new();
        let mut archived = BTreeSet::new();
        let mut swept = BTreeSet::new();
        let text = |v: Option<serde_json::Value>| v.and_then(|v| v.as_str().map(str::to_owned));
        for r in contents.records {
            let ManifestTag::Record {
                event,
                kind,
                id,
                task,
                task_id,
            } = r
            else {
                continue;
            };
            match (text(event.or(kind)).as_deref(), text(id)) {
                (Some("sent"), Some(id)) => {
                    sent.insert(id);
                }
                (Some("archived"), Some(id)) => {
                    archived.insert(id);
                }
                // chipset writes `task`, nubos-pilot `task_id`.
                (Some("task-swept"), _) => {
                    swept.extend(text(task.or(task_id)));
                }
                _ => {}
            }
        }
        Ok(ManifestStatus {
            sent,
            archived,
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
    sent: BTreeSet<String>,
    /// Ids of `archived` events.
    archived: BTreeSet<String>,
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
