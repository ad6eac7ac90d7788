//! The JSON views of results: what `chipset --json` prints and what the MCP
//! tools return as `structuredContent`, one typed struct per kind of result,
//! so the command line and the server cannot drift apart.
//!
//! Library records (a [`Hook`], a [`Message`], an [`Event`], a [`Nudge`], a
//! [`Reminder`], a [`Brief`]) appear in their serde form, as they are on
//! disk. Each view also derives a JSON Schema (what the MCP tools publish as
//! their `outputSchema`); the records' schemas are written out by hand in
//! `records.rs`, since the libraries do not depend on `schemars`.
//!
//! Both front ends build these; none of them is read back, so they borrow
//! nothing and own what they show.

mod group;
mod records;

pub use group::{GroupCopy, GroupSentView, LEFT_OUT, ListMembers};

/// The `status` tool's schema (the view is the library's `chipset::AgentReport`).
pub(crate) use records::AgentReport;

pub use crate::ops::search::{SearchHit, SearchResults};

pub use crate::ops::lease::{
    LeaseBlocked, LeaseCheck, LeaseGranted, LeaseListing, LeaseRecord, LeaseReleased, LeaseRenewed,
};
pub use crate::ops::work::{
    WorkClaimed, WorkListing, WorkPosted, WorkRecord, WorkReleaseRecord, WorkSettled, filter,
};

use std::collections::BTreeMap;
use std::path::PathBuf;

use chipset::directory::AgentInfo;
use chipset_bus::{Event, EventId, Problem};
use chipset_hook::{Assignment, Hook, HookStatus};
use chipset_loop::Brief;
use chipset_mail::{Message, MessageId};
use chipset_nudge::{Nudge, Reminder};
use chipset_store::{AgentId, Listing, TaskId, Timestamp};
use schemars::JsonSchema;
use serde::Serialize;

/// What `hook_pickup` found on the agent's hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PickupOutcome {
    /// No work.
    Idle,
    /// Pending work, now active.
    Started,
    /// Active work, resumed after a restart.
    Resumed,
    /// Completed work the dispatcher has not cleared yet.
    AwaitingClear,
}

impl PickupOutcome {
    /// Returns its name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            PickupOutcome::Idle => "idle",
            PickupOutcome::Started => "started",
            PickupOutcome::Resumed => "resumed",
            PickupOutcome::AwaitingClear => "awaiting_clear",
        }
    }
}

/// `hook_pickup`: the outcome and the assignment it concerns.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Pickup {
    /// What happened.
    pub outcome: PickupOutcome,
    /// The work, unless idle.
    #[schemars(with = "Option<records::Assignment>")]
    pub assignment: Option<Assignment>,
}

/// `hook clear --reassign`, `hook_clear` with `reassign`: the work taken
/// away, the status it was taken from, and the hook now.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Reassigned {
    /// The assignment taken away.
    #[schemars(with = "records::Assignment")]
    pub taken: Assignment,
    /// The status it was taken from.
    #[schemars(with = "records::HookStatus")]
    pub was: HookStatus,
    /// The hook now.
    #[schemars(with = "records::Hook")]
    pub hook: Hook,
}

impl From<chipset_hook::Reassigned> for Reassigned {
    fn from(r: chipset_hook::Reassigned) -> Self {
        Reassigned {
            taken: r.taken,
            was: r.was,
            hook: r.hook,
        }
    }
}

/// `hook clear`, `hook_clear`: the hook cleared of completed work, or
/// with `reassign` the work taken away.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Cleared {
    /// Pending or active work taken away.
    Reassigned(Reassigned),
    /// The hook, empty now.
    Cleared(#[schemars(with = "records::Hook")] Hook),
}

/// Whether a nudge read was new to the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NudgeState {
    /// Not processed before this read (now it is).
    New,
    /// Processed already.
    Seen,
    /// No nudge.
    Empty,
}

/// `nudge read`, `nudge_read`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct NudgeRead {
    /// New, seen or empty.
    pub state: NudgeState,
    /// The latest nudge, unless empty.
    #[schemars(with = "Option<records::Nudge>")]
    pub nudge: Option<Nudge>,
}

/// `nudge respond`, `nudge_respond`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct NudgeAnswered {
    /// The nudge answered.
    #[schemars(with = "records::Nudge")]
    pub answered: Nudge,
    /// The answer sent.
    #[schemars(with = "records::Nudge")]
    pub response: Nudge,
    /// How the answer was delivered (`delivered`, `replaced`, `held`, …).
    pub delivery: String,
}

/// `nudge send`, `nudge_send`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct NudgeSent {
    /// `delivered`, `replaced` or `repaired-corrupt`.
    pub outcome: String,
    /// The recipient.
    #[schemars(with = "String")]
    pub to: AgentId,
    /// The nudge written.
    #[schemars(with = "records::Nudge")]
    pub nudge: Nudge,
    /// The unprocessed nudge it replaced (outcome `replaced`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<records::Nudge>")]
    pub previous: Option<Nudge>,
    /// Where the unreadable file it replaced was moved (outcome `repaired-corrupt`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quarantined: Option<PathBuf>,
}

/// `mail archive`, `mail_archive`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Archived {
    /// Moved to the archive now.
    Archived {
        /// The message.
        #[schemars(with = "records::Message")]
        message: Message,
    },
    /// It was in the archive already.
    AlreadyArchived {
        /// Where it is.
        location: String,
    },
}

impl From<chipset_mail::ArchiveOutcome> for Archived {
    fn from(outcome: chipset_mail::ArchiveOutcome) -> Self {
        match outcome {
            chipset_mail::ArchiveOutcome::Archived(message) => Archived::Archived { message },
            chipset_mail::ArchiveOutcome::AlreadyArchived(location) => Archived::AlreadyArchived {
                location: location.to_string(),
            },
        }
    }
}

/// One message of an MCP listing: every field but the body, which is there
/// only when asked for (`bodies`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct MessageHead {
    /// The id.
    #[schemars(with = "String")]
    pub id: MessageId,
    /// request, response or notify.
    pub kind: String,
    /// The sender.
    #[schemars(with = "String")]
    pub from: AgentId,
    /// The addressee.
    #[schemars(with = "String")]
    pub to: AgentId,
    /// The task (the seed's `phase`).
    #[schemars(with = "String")]
    pub phase: TaskId,
    /// The round, if any.
    pub round: Option<u64>,
    /// urgent, normal or low.
    pub priority: String,
    /// The topic.
    pub subject: String,
    /// The request it answers, if any.
    #[schemars(with = "Option<String>")]
    pub in_reply_to: Option<MessageId>,
    /// When it was sent.
    #[schemars(with = "String")]
    pub created_at: Timestamp,
    /// The body's length in characters.
    pub body_chars: usize,
    /// The body, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

impl MessageHead {
    /// Returns the head of `m`, with its body when `body` is set.
    pub fn of(m: &Message, body: bool) -> Self {
        MessageHead {
            id: m.id.clone(),
            kind: m.kind.to_string(),
            from: m.from.clone(),
            to: m.to.clone(),
            phase: m.task().clone(),
            round: m.round,
            priority: m.priority.to_string(),
            subject: m.subject.to_owned(),
            in_reply_to: m.in_reply_to.clone(),
            created_at: m.created_at,
            body_chars: m.body.chars().count(),
            body: body.then(|| m.body.to_owned()),
        }
    }
}

/// An MCP mail listing (`mail_inbox`, `mail_thread`, `mail_pending`): at
/// most `limit` messages, and how many matched in all.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct MailListing {
    /// The messages shown, in the listing's order.
    pub messages: Vec<MessageHead>,
    /// How many matched; more than shown when the limit cut the listing.
    pub total: usize,
}

/// `bus publish`, `bus_publish`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Published {
    /// The event was queued.
    Delivered {
        /// The event.
        #[schemars(with = "records::Event")]
        event: Event,
    },
    /// Its dedup key was accepted within the window: nothing was published.
    Duplicate {
        /// The key.
        key: String,
        /// The event first accepted with it.
        #[schemars(with = "String")]
        original: EventId,
        /// When.
        #[schemars(with = "String")]
        accepted_at: Timestamp,
    },
}

impl From<chipset_bus::Published> for Published {
    fn from(p: chipset_bus::Published) -> Self {
        match p {
            chipset_bus::Published::Delivered(event) => Published::Delivered { event },
            chipset_bus::Published::Duplicate {
                key,
                original,
                accepted_at,
            } => Published::Duplicate {
                key,
                original,
                accepted_at,
            },
        }
    }
}

/// `bus ack`, `bus_ack`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Acked {
    /// `acked` or `already-acked`.
    pub outcome: String,
    /// Whose queue.
    #[schemars(with = "String")]
    pub agent: AgentId,
    /// The event.
    #[schemars(with = "String")]
    pub id: EventId,
}

impl Acked {
    /// Returns the view of an acknowledgement of `id` in `agent`'s queue,
    /// `acked` now or already.
    pub fn of(agent: &AgentId, id: &EventId, acked: bool) -> Self {
        Acked {
            outcome: match acked {
                true => "acked",
                false => "already-acked",
            }
            .to_owned(),
            agent: agent.clone(),
            id: id.clone(),
        }
    }
}

/// A queue file that could not be read.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct BadEntry {
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub problem: String,
}

impl From<(&PathBuf, &Problem)> for BadEntry {
    fn from((path, problem): (&PathBuf, &Problem)) -> Self {
        BadEntry {
            path: path.clone(),
            problem: problem.to_string(),
        }
    }
}

/// Pending events (`bus pending`, `bus wait`, `bus_pending`, `bus_wait`),
/// critical first, and the queue files that could not be read.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Events {
    /// The events shown.
    #[schemars(with = "Vec<records::Event>")]
    pub events: Vec<Event>,
    /// Unreadable queue files.
    pub unreadable: Vec<BadEntry>,
    /// How many are pending in all (MCP, where a limit applies).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<usize>,
    /// Whether a wait gave up (the waits only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timed_out: Option<bool>,
}

/// `remind open`, `remind_open`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ReminderOpened {
    /// `opened`, `existing` or `snoozed`.
    pub outcome: String,
    /// The reminder.
    #[schemars(with = "records::Reminder")]
    pub reminder: Reminder,
}

impl ReminderOpened {
    /// Returns the view of an opening and its note (open already, snoozed).
    pub fn of(opened: chipset_nudge::Opened) -> (Self, Option<&'static str>) {
        use chipset_nudge::Opened;
        let (outcome, note) = match &opened {
            Opened::New(_) => ("opened", None),
            Opened::Existing(_) => ("existing", Some("a reminder was open for this key already")),
            Opened::Snoozed(_) => (
                "snoozed",
                Some("the reminder for this key is snoozed; it reopens when due"),
            ),
            _ => ("existing", None),
        };
        let reminder = opened.reminder().clone();
        let view = ReminderOpened {
            outcome: outcome.to_owned(),
            reminder,
        };
        (view, note)
    }
}

/// Open reminders (`remind list`, `remind history`, `remind_list`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Reminders {
    /// The reminders shown, oldest first.
    #[schemars(with = "Vec<records::Reminder>")]
    pub reminders: Vec<Reminder>,
    /// Why each unreadable reminder file could not be read.
    pub unreadable: Vec<String>,
    /// How many matched in all (MCP, where a limit applies).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<usize>,
}

impl Reminders {
    /// Returns the view of `listing`: every reminder, or (MCP) at most
    /// `limit` of them and how many there are.
    pub fn of(listing: &Listing<Reminder>, limit: Option<usize>) -> Self {
        let all = &listing.items;
        Reminders {
            reminders: all[..limit.map_or(all.len(), |l| l.min(all.len()))].to_vec(),
            unreadable: unreadable(listing),
            total: limit.map(|_| all.len()),
        }
    }
}

/// Returns a nudge's id, or its timestamp when it has none (seed
/// nudges): how the command line and the tools name a nudge.
pub fn nudge_id(nudge: &Nudge) -> String {
    nudge
        .id
        .as_ref()
        .map_or_else(|| nudge.timestamp.to_string(), ToString::to_string)
}

/// Returns `text` on one line: each control character (a line break a
/// peer wrote in a subject) as its escape (`\n`), so it forges no line.
pub fn one_line(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains(char::is_control) {
        return text.into();
    }
    let escape = |c: char| c.escape_debug().collect::<String>();
    let one = |c: char| if c.is_control() { escape(c) } else { c.into() };
    text.chars().map(one).collect::<String>().into()
}

/// Returns why each file of `listing` could not be read, corrupt first.
pub fn unreadable<T>(listing: &Listing<T>) -> Vec<String> {
    listing.unreadable().map(ToString::to_string).collect()
}

/// `wait`: the brief, and whether the wait gave up first.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Waited {
    /// The brief (no entries when timed out).
    #[serde(flatten)]
    #[schemars(with = "records::Brief")]
    pub brief: Brief,
    /// True when the timeout passed with nothing needing the agent.
    pub timed_out: bool,
}

/// A result with a note: something the caller should know although it
/// is not an error (a nudge that replaced another, a reminder open already).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Noted<T> {
    /// The result.
    #[serde(flatten)]
    pub result: T,
    /// The note, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A refused operation: the line the command line prints after
/// `chipset: error: `, whether the input was at fault, and what kind of
/// failure it is.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Refusal {
    /// The message.
    pub error: String,
    /// As the command line's exit status: `usage` (it exits 2),
    /// `outcome_unknown` (3: the change may have been made; retry the same
    /// request) or `refused` (1).
    pub class: String,
    /// The failure's kind (`chipset_store::ErrorKind`): `invalid`,
    /// `not_found`, `refused`, `stale` (the work or lease was taken away:
    /// read again), `corrupt` (`doctor` repairs it), `unsupported`,
    /// `outcome_unknown` (the change may have been made: retry the same
    /// request, with the same ids) or `io`.
    pub kind: String,
}

impl NudgeState {
    /// Returns its name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            NudgeState::New => "new",
            NudgeState::Seen => "seen",
            NudgeState::Empty => "empty",
        }
    }
}

impl Refusal {
    /// Returns the refusal for `failure`.
    pub fn of(failure: &chipset_failure::Failure) -> Self {
        Refusal {
            error: failure.to_string(),
            class: match failure.class() {
                chipset_failure::Class::Usage => "usage",
                chipset_failure::Class::OutcomeUnknown => "outcome_unknown",
                _ => "refused",
            }
            .to_owned(),
            kind: failure.kind().to_string(),
        }
    }
}

/// A result that still failed (a listing that met unreadable files): the
/// result's fields and the refusal's.
#[derive(Debug, Clone, Serialize)]
pub struct Partial<T> {
    /// What could be read.
    #[serde(flatten)]
    pub result: T,
    /// Why it still failed.
    #[serde(flatten)]
    pub refusal: Refusal,
}

/// `chipset init`: the root and the MCP configuration that serves it.
#[derive(Debug, Clone, Serialize)]
pub struct Initialized {
    /// The state root.
    pub root: PathBuf,
    /// False when it existed already.
    pub created: bool,
    /// Where mail is kept when not under the root: `--mail-dir`, or the
    /// nubos-pilot project's `.nubos-pilot/messages` the root belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mail_dir: Option<PathBuf>,
    /// What to put in a project's `.mcp.json`.
    pub mcp_json: McpJson,
}

/// A `.mcp.json` document, as agent hosts read it.
#[derive(Debug, Clone, Serialize)]
pub struct McpJson {
    /// The servers by name.
    #[serde(rename = "mcpServers")]
    pub mcp_servers: BTreeMap<String, McpServer>,
}

/// One stdio server of a `.mcp.json`.
#[derive(Debug, Clone, Serialize)]
pub struct McpServer {
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
}

pub(crate) use records::{
    Assignment as AssignmentRecord, Brief as BriefRecord, Hook as HookRecord,
    Message as MessageRecord, Reminder as ReminderRecord, Sent as SentRecord,
};

/// One agent of the directory: `agent whois`, `agent register`,
/// `agent_whois`, and each entry of `agent list` and `agent_list`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AgentProfile {
    /// The agent.
    #[schemars(with = "String")]
    pub name: AgentId,
    /// Its roles, sorted.
    pub roles: Vec<String>,
    /// The program driving it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    /// The model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The host it runs on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// What it says it works on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// Free text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// When it first registered.
    #[schemars(with = "String")]
    pub registered_at: Timestamp,
    /// When its profile last changed.
    #[schemars(with = "String")]
    pub updated_at: Timestamp,
    /// Its latest activity chipset saw (not shown by `agent register`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_seen: Option<LastSeen>,
}

/// When an agent was last seen, and which file told.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LastSeen {
    /// When.
    #[schemars(with = "String")]
    pub at: Timestamp,
    /// `registered`, `presence`, `hook`, `ack`, `sent` or `archived`.
    pub source: String,
}

impl AgentProfile {
    /// Returns the view of `profile`, with `seen` when known.
    pub fn of(
        profile: &chipset::directory::Profile,
        seen: Option<chipset::directory::Seen>,
    ) -> Self {
        AgentProfile {
            name: profile.name.clone(),
            roles: profile.roles.iter().map(|r| r.to_string()).collect(),
            program: profile.program.clone(),
            model: profile.model.clone(),
            host: profile.host.clone(),
            task: profile.task.clone(),
            note: profile.note.clone(),
            registered_at: profile.registered_at,
            updated_at: profile.updated_at,
            last_seen: seen.map(|s| LastSeen {
                at: s.at,
                source: s.source.as_str().to_owned(),
            }),
        }
    }
}

/// `agent list`, `agent_list`: the matching agents by name, how many
/// matched, and the profile files that could not be read.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AgentListing {
    /// The agents shown.
    pub agents: Vec<AgentProfile>,
    /// How many matched; more than shown when the limit cut the listing.
    pub total: usize,
    /// Why each unreadable profile could not be read.
    pub unreadable: Vec<String>,
}

impl AgentListing {
    /// Returns the view of `roster`, at most `limit` agents.
    pub fn of(roster: &Listing<AgentInfo>, limit: usize) -> Self {
        AgentListing {
            agents: roster
                .items
                .iter()
                .take(limit)
                .map(|i| AgentProfile::of(&i.profile, Some(i.last_seen)))
                .collect(),
            total: roster.items.len(),
            unreadable: unreadable(roster),
        }
    }
}

#[cfg(test)]
mod tests {
    use chipset_failure::Failure;
    use chipset_store::ErrorKind;

    use super::Refusal;

    /// A refusal's class is the command line's exit status by name, so a
    /// client knows an unknown outcome (retry the same request) from a
    /// refusal (nothing was done) without reading the finer kind.
    #[test]
    fn a_refusals_class_is_the_command_lines_exit_status() {
        let class = |kind| Refusal::of(&Failure::new(kind, "m")).class;
        assert_eq!(class(ErrorKind::Invalid), "usage");
        assert_eq!(class(ErrorKind::OutcomeUnknown), "outcome_unknown");
        for kind in [
            ErrorKind::NotFound,
            ErrorKind::Stale,
            ErrorKind::Corrupt,
            ErrorKind::Io,
        ] {
            assert_eq!(class(kind), "refused", "{kind}");
        }
        let unknown = Refusal::of(&Failure::new(ErrorKind::OutcomeUnknown, "m"));
        assert_eq!(unknown.kind, "outcome_unknown");
    }
}
