//! What the doctor finds: each kind of finding, how it reads, and whether a repair fixes it.

use super::*;

/// Why an inbox message counts as an orphan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
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
    /// A name in a message folder that is not `{id}.json` (`notes.txt`, an
    /// editor's swap file): no program of the seed writes it. Listings skip
    /// it; not repaired: a person decides.
    Stray {
        /// The entry.
        path: PathBuf,
    },
    /// A message file over the read cap (16 MiB, far above any message the
    /// seed's programs write). Listings skip it and the commit gate fails
    /// closed on it; not repaired, since another program may still read it.
    Oversized {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// The cap.
        cap: u64,
    },
    /// A file chipset cannot read as a message (its id is not its name, a
    /// name is not a valid id, ...) that the seed's own reader (nubos-pilot)
    /// lists as a valid message: not moved aside, a person decides.
    PeerListed {
        /// The file.
        path: PathBuf,
        /// Why chipset cannot use it.
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
    /// written by another program). Not a finding in another program's
    /// folder ([`Mail::in_folder`](crate::Mail::in_folder)), where the index
    /// is chipset's cache and that program's replies are never in it. Fix:
    /// add the index entry.
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
    /// its `sent` event. The newest message of a by-task folder without its
    /// `task-swept` event is reported so too, with `swept` set: its sweeper
    /// may be appending that event.
    InFlight {
        /// The message.
        id: MessageId,
        /// Where it is.
        location: Location,
        /// How long until the grace period is over.
        check_after: std::time::Duration,
        /// True when the event awaited is its by-task folder's
        /// `task-swept`, not the message's own.
        swept: bool,
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
            Finding::Corrupt { .. } | Finding::PeerListed { .. } => "messaging-corrupt-file",
            Finding::Stray { .. } => "messaging-stray-file",
            Finding::Oversized { .. } => "messaging-oversized-file",
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
                | Finding::Stray { .. }
                | Finding::Oversized { .. }
                | Finding::PeerListed { .. }
        )
    }

    /// The file a finding about one file is about, for ordering.
    pub(crate) fn path(&self) -> Option<&Path> {
        match self {
            Finding::Corrupt { path, .. }
            | Finding::Stray { path }
            | Finding::Oversized { path, .. }
            | Finding::PeerListed { path, .. }
            | Finding::Unsupported { path, .. } => Some(path),
            _ => None,
        }
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
            Finding::Stray { path } => write!(
                f,
                "`{}` is not a message file (`{{id}}.json`): listings skip it (left in place)",
                path.display()
            ),
            Finding::Oversized { path, size, cap } => write!(
                f,
                "`{}`: {size} bytes is over the {cap}-byte message read cap: listings skip it \
                 and the commit gate stays closed (left in place: other programs may read it)",
                path.display()
            ),
            Finding::PeerListed { path, reason } => write!(
                f,
                "`{}`: {reason}; the seed's reader (nubos-pilot) lists it as a message, \
                 so it is left in place",
                path.display()
            ),
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
                swept,
            } => {
                let secs = check_after.as_secs().max(1);
                if *swept {
                    return write!(
                        f,
                        "{location} has no `task-swept` event yet, and its newest message \
                         `{id}` is young: in flight (its sweeper may still be appending \
                         it), check again after {secs}s"
                    );
                }
                let (event, writer) = if *location == Location::Archive {
                    ("`sent` or `archived`", "sender or archiver")
                } else {
                    ("`sent`", "sender")
                };
                write!(
                    f,
                    "message `{id}` in {location} has no {event} event yet: in flight \
                     (its {writer} may still be appending it), check again after {secs}s"
                )
            }
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
    /// What it found, in the order it was found (empty when they were
    /// handed to a sink).
    pub(crate) findings: Vec<Finding>,
    /// How many findings it held in memory at once before handing them
    /// over: not those about manifest events, which it reads back from its
    /// scratch data.
    pub(crate) held: usize,
}
