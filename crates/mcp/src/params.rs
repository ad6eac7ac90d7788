//! The tools' inputs: serde types whose JSON Schemas (derived by
//! `schemars`) are the tools' `inputSchema`. None of them names the caller:
//! the server's agent is fixed at start (`--agent`).

use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};

/// A number or flag as JSON has it, or as text (`"5"`, `"true"`): some
/// clients (the MCP Inspector's `--tool-arg k=v`) send every argument as a
/// string. The schema still says number or boolean, and arguments are checked
/// against it first ([`crate::schema::parse`]), so a mismatch is refused
/// naming the field and the JSON type before these run.
#[derive(Deserialize)]
#[serde(untagged)]
enum Lenient<T> {
    Value(T),
    /// A number `T` does not take as written (`1e2`, which JavaScript
    /// writes for small and large numbers).
    Number(serde_json::Number),
    Text(String),
}

impl<T: FromStr> Lenient<T> {
    fn get<E: serde::de::Error>(self) -> Result<T, E> {
        let parse = |t: &str| t.trim().parse().ok();
        let got = match &self {
            Lenient::Value(_) => None,
            // `3e1` is the integer 30 too.
            Lenient::Number(n) => parse(&n.to_string()).or_else(|| {
                let f = n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9e15)?;
                parse(&format!("{f:.0}"))
            }),
            Lenient::Text(t) => parse(t),
        };
        match (self, got) {
            (Lenient::Value(v), _) | (_, Some(v)) => Ok(v),
            (Lenient::Number(n), None) => {
                Err(E::custom(format!("expected a number in range, got {n}")))
            }
            (Lenient::Text(t), None) => {
                Err(E::custom(format!("expected a number or a flag, got {t:?}")))
            }
        }
    }
}

fn lenient<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr + Deserialize<'de>,
{
    Lenient::<T>::deserialize(d)?.get()
}

pub(crate) fn lenient_opt<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr + Deserialize<'de>,
{
    Option::<Lenient<T>>::deserialize(d)?
        .map(Lenient::get)
        .transpose()
}

/// An id as the libraries take it: one path segment, no leading dot.
const ID: &str = r"^[^./\\][^/\\]*$";
/// An agent that mail can address: letters, digits, `_` and `-`.
/// `mail_send`'s `to`: agents and `@lists`, comma-separated.
const MAIL_TO: &str = "^@?[A-Za-z0-9_-]+( *, *@?[A-Za-z0-9_-]+)*$";
/// A kebab-case subject.
const SUBJECT: &str = "^[a-z0-9]+(-[a-z0-9]+)*$";

/// The most entries a listing shows by default.
pub(crate) const DEFAULT_LIMIT: usize = 20;
/// The most entries a listing shows.
pub(crate) const MAX_LIMIT: usize = 1000;

/// Returns the limit a listing tool asked for, refusing one out of range.
pub(crate) fn limit(asked: Option<u32>) -> Result<usize, chipset_failure::Failure> {
    let n = asked.map_or(DEFAULT_LIMIT, |n| n as usize);
    if (1..=MAX_LIMIT).contains(&n) {
        Ok(n)
    } else {
        Err(chipset_failure::Failure::usage(format!(
            "limit must be between 1 and {MAX_LIMIT}, not {n}"
        )))
    }
}

/// `hook_assign`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct HookAssign {
    /// The agent whose empty hook gets the work.
    #[schemars(pattern(ID), length(max = 128))]
    pub(crate) to: String,
    /// The bead (work item) id.
    #[schemars(pattern(ID), length(max = 128))]
    pub(crate) bead: String,
    /// The work's short description.
    pub(crate) title: String,
}

/// `hook_clear`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct HookClear {
    /// The agent whose hook is cleared.
    #[schemars(pattern(ID), length(max = 128))]
    pub(crate) to: String,
    /// Take pending or active work away instead of clearing completed work [default: false].
    #[serde(default, deserialize_with = "lenient_opt")]
    #[schemars(with = "bool")]
    pub(crate) reassign: Option<bool>,
    /// Only while the hook holds this bead: work taken away or replaced since is refused, nothing changed.
    #[schemars(pattern(ID), length(max = 128))]
    pub(crate) bead: Option<String>,
    /// Only for the assignment of this generation (hook_pickup gives it).
    #[serde(default, deserialize_with = "lenient_opt")]
    #[schemars(with = "u64", range(min = 1))]
    pub(crate) generation: Option<u64>,
}

/// `hook_touch` and `hook_complete`: the work they are meant for.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct HookWork {
    /// Only while the hook holds this bead: work taken away or replaced since is refused, nothing changed.
    #[schemars(pattern(ID), length(max = 128))]
    pub(crate) bead: Option<String>,
    /// Only for the assignment of this generation (hook_pickup gives it).
    #[serde(default, deserialize_with = "lenient_opt")]
    #[schemars(with = "u64", range(min = 1))]
    pub(crate) generation: Option<u64>,
}

/// `hook_pickup`: no arguments.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoArguments {}

/// `nudge_respond`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NudgeRespond {
    /// The answer [default: "Acknowledged"].
    #[schemars(length(max = 65536))]
    pub(crate) message: Option<String>,
}

/// `nudge_send`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NudgeSend {
    /// The recipient agent.
    #[schemars(pattern(ID), length(max = 128))]
    pub(crate) to: String,
    /// health_check, stall_warning, priority_change, abort, sync_request or
    /// nudge_response (other names are sent verbatim).
    #[serde(rename = "type")]
    #[schemars(length(min = 1, max = 64))]
    pub(crate) kind: String,
    /// Human-readable content.
    #[schemars(length(max = 65536))]
    pub(crate) message: String,
    /// Whether the recipient must answer (with `nudge_respond`) [default: false].
    #[serde(default, deserialize_with = "lenient_opt")]
    #[schemars(with = "bool")]
    pub(crate) requires_response: Option<bool>,
}

/// A mail kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum MailKind {
    Request,
    Response,
    Notify,
}

impl From<MailKind> for chipset_mail::Kind {
    fn from(k: MailKind) -> Self {
        match k {
            MailKind::Request => chipset_mail::Kind::Request,
            MailKind::Response => chipset_mail::Kind::Response,
            MailKind::Notify => chipset_mail::Kind::Notify,
        }
    }
}

/// When a request to a group is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum MailExpects {
    All,
    Any,
}

/// A mail priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum MailPriority {
    Urgent,
    Normal,
    Low,
}

impl From<MailPriority> for chipset_mail::MailPriority {
    fn from(p: MailPriority) -> Self {
        match p {
            MailPriority::Urgent => chipset_mail::MailPriority::Urgent,
            MailPriority::Normal => chipset_mail::MailPriority::Normal,
            MailPriority::Low => chipset_mail::MailPriority::Low,
        }
    }
}

/// `mail_send`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MailSend {
    /// The addressee agent, or a group: agents and lists comma-separated
    /// (`a,b`, `@list` for the agents on a list, `@all` for every registered
    /// agent but this one); each gets its own copy.
    #[schemars(pattern(MAIL_TO), length(max = 4096))]
    pub(crate) to: String,
    /// request (expects a reply), response (answers in_reply_to) or notify.
    pub(crate) kind: MailKind,
    /// For a request to a group: pending until `all` recipients answer
    /// [default] or until `any` one does.
    pub(crate) expects_reply: Option<MailExpects>,
    /// A kebab-case topic.
    #[schemars(pattern(SUBJECT), length(max = 128))]
    pub(crate) subject: String,
    /// The text.
    pub(crate) body: String,
    /// The task (required for request and notify; a response takes its request's).
    #[schemars(pattern(ID), length(max = 128))]
    pub(crate) task: Option<String>,
    /// The round within the task, 0 to 2^53 [default: none, written as null].
    #[serde(default, deserialize_with = "lenient_opt")]
    #[schemars(with = "u64")]
    pub(crate) round: Option<u64>,
    /// The message this one replies to (required for a response).
    #[schemars(pattern(ID), length(max = 128))]
    pub(crate) in_reply_to: Option<String>,
    /// urgent, normal or low [default: normal].
    pub(crate) priority: Option<MailPriority>,
    /// A chosen message id (`{unix-ms}-{uuid}`; for a group, the group's
    /// id), so that a retry after an unknown outcome is recognised: the
    /// same id and content again is the first delivery, never a second
    /// [default: a new one].
    #[schemars(pattern(ID), length(max = 128))]
    pub(crate) id: Option<String>,
}

/// `mail_inbox`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MailInbox {
    /// Only this kind.
    pub(crate) kind: Option<MailKind>,
    /// Only this task's messages.
    #[schemars(pattern(ID), length(max = 128))]
    pub(crate) task: Option<String>,
    /// Only messages after this one: a message id (`{unix-ms}-{uuid}`, the last one seen) or an RFC 3339 time with its offset.
    pub(crate) since: Option<String>,
    /// At most this many, oldest first [default: 20, at most 1000].
    #[serde(default, deserialize_with = "lenient_opt")]
    #[schemars(with = "u32", range(min = 1, max = 1000))]
    pub(crate) limit: Option<u32>,
    /// Include the bodies (else `mail_read` gives one message whole) [default: false].
    #[serde(default, deserialize_with = "lenient_opt")]
    #[schemars(with = "bool")]
    pub(crate) bodies: Option<bool>,
}

/// `mail_read`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MailRead {
    /// The message id.
    #[schemars(pattern(ID), length(max = 128))]
    pub(crate) id: String,
}

/// `mail_archive`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MailArchive {
    /// The id of a message addressed to this agent (a request only after it was answered).
    #[schemars(pattern(ID), length(max = 128))]
    pub(crate) id: String,
}

/// `mail_thread`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MailThread {
    /// Any message id of the thread.
    #[schemars(pattern(ID), length(max = 128))]
    pub(crate) id: String,
    /// At most this many, in causal order [default: 20, at most 1000].
    #[serde(default, deserialize_with = "lenient_opt")]
    #[schemars(with = "u32", range(min = 1, max = 1000))]
    pub(crate) limit: Option<u32>,
    /// Include the bodies [default: false].
    #[serde(default, deserialize_with = "lenient_opt")]
    #[schemars(with = "bool")]
    pub(crate) bodies: Option<bool>,
}

/// `mail_pending`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MailPending {
    /// The task whose requests still wait for a reply (the commit gate).
    #[schemars(pattern(ID), length(max = 128))]
    pub(crate) task: String,
    /// At most this many [default: 20, at most 1000]; `total` counts them all.
    #[serde(default, deserialize_with = "lenient_opt")]
    #[schemars(with = "u32", range(min = 1, max = 1000))]
    pub(crate) limit: Option<u32>,
}

/// An event priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum EventPriority {
    Critical,
    High,
    Normal,
    Low,
}

impl From<EventPriority> for chipset_bus::Priority {
    fn from(p: EventPriority) -> Self {
        match p {
            EventPriority::Critical => chipset_bus::Priority::Critical,
            EventPriority::High => chipset_bus::Priority::High,
            EventPriority::Normal => chipset_bus::Priority::Normal,
            EventPriority::Low => chipset_bus::Priority::Low,
        }
    }
}

/// `bus_publish`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BusPublish {
    /// The recipient agent.
    #[schemars(pattern(ID), length(max = 128))]
    pub(crate) to: String,
    /// What kind of event it is (the source is this agent).
    pub(crate) kind: String,
    /// critical, high, normal or low [default: normal].
    pub(crate) priority: Option<EventPriority>,
    /// Drop this publish if the key was accepted for the recipient within the window.
    pub(crate) dedup_key: Option<String>,
    /// Any JSON payload.
    pub(crate) payload: Option<serde_json::Value>,
    /// A chosen event id (`{unix-ms}-{uuid}`), so that a retry after an
    /// unknown outcome is recognised: the same id and content again is
    /// the first delivery, never a second [default: a new one].
    #[schemars(pattern(ID), length(max = 128))]
    pub(crate) id: Option<String>,
}

/// `bus_ack`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BusAck {
    /// The id of an event in this agent's queue.
    #[schemars(pattern(ID), length(max = 128))]
    pub(crate) event_id: String,
}

/// `bus_pending`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BusPending {
    /// At most this many, critical first [default: 20, at most 1000].
    #[serde(default, deserialize_with = "lenient_opt")]
    #[schemars(with = "u32", range(min = 1, max = 1000))]
    pub(crate) limit: Option<u32>,
}

/// `bus_wait`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BusWait {
    /// Give up after this many seconds, at most 3600 [default: 60]; a
    /// timeout is not an error (`timed_out: true`).
    #[serde(default, deserialize_with = "lenient_opt")]
    #[schemars(with = "f64", range(min = 0, max = 3600))]
    pub(crate) timeout_seconds: Option<f64>,
    /// At most this many events [default: 20, at most 1000].
    #[serde(default, deserialize_with = "lenient_opt")]
    #[schemars(with = "u32", range(min = 1, max = 1000))]
    pub(crate) limit: Option<u32>,
}

/// `wait`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Wait {
    /// Give up after this many seconds, at most 3600 [default: 60]; a
    /// timeout is not an error (`timed_out: true`, no entries).
    #[serde(default, deserialize_with = "lenient_opt")]
    #[schemars(with = "f64", range(min = 0, max = 3600))]
    pub(crate) timeout_seconds: Option<f64>,
}

/// `remind_open`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RemindOpen {
    /// A registered kind: wrap_session, spec_draft, adr_proposed,
    /// wip_unsealed, invite_pending, handoff_pending.
    pub(crate) kind: String,
    /// The kind's source type: session, spec, adr, wip_state, invite, handoff.
    pub(crate) source_type: String,
    /// The entity it refers to.
    pub(crate) source_id: String,
    /// The prompt.
    #[schemars(length(max = 65536))]
    pub(crate) message: String,
    /// The agent the reminder is for (its brief and `wait` show it)
    /// [default: this agent].
    #[schemars(pattern(ID), length(max = 128))]
    pub(crate) to: Option<String>,
}

/// `remind_list`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RemindList {
    /// Only this kind.
    pub(crate) kind: Option<String>,
    /// Only reminders opened after this time (RFC 3339).
    pub(crate) since: Option<String>,
    /// At most this many, oldest first [default: 20, at most 1000].
    #[serde(default, deserialize_with = "lenient_opt")]
    #[schemars(with = "u32", range(min = 1, max = 1000))]
    pub(crate) limit: Option<u32>,
}

/// A manual resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Resolution {
    Completed,
    Ignored,
}

impl From<Resolution> for chipset_nudge::ManualResolution {
    fn from(r: Resolution) -> Self {
        match r {
            Resolution::Completed => chipset_nudge::ManualResolution::Completed,
            Resolution::Ignored => chipset_nudge::ManualResolution::Ignored,
        }
    }
}

/// `remind_resolve`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RemindResolve {
    /// The reminder id.
    pub(crate) id: String,
    /// completed or ignored.
    pub(crate) resolution: Resolution,
    /// A note recorded with the resolution.
    #[schemars(length(max = 65536))]
    pub(crate) note: Option<String>,
}

/// `remind_snooze`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RemindSnooze {
    /// The reminder id.
    pub(crate) id: String,
    /// How many hours (at least 1).
    #[serde(deserialize_with = "lenient")]
    #[schemars(with = "u32", range(min = 1))]
    pub(crate) hours: u32,
}

/// `lease_acquire`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LeaseAcquire {
    /// Paths or globs relative to the project root (1 to 256; `src/auth/**`).
    #[schemars(length(min = 1, max = 256))]
    pub(crate) paths: Vec<String>,
    /// A shared lease (others may share it) [default: exclusive].
    #[serde(default, deserialize_with = "lenient_opt")]
    #[schemars(with = "bool")]
    pub(crate) shared: Option<bool>,
    /// How long it lasts, in minutes [default: 30; at least 1 second, at most 7 days].
    #[serde(default, deserialize_with = "lenient_opt")]
    #[schemars(with = "f64", range(min = 0.0167, max = 10080))]
    pub(crate) ttl_minutes: Option<f64>,
    /// Why (shown to agents it blocks).
    #[serde(default)]
    #[schemars(length(max = 1024))]
    pub(crate) reason: Option<String>,
}

/// `lease_renew`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LeaseRenew {
    /// The lease's fencing token.
    #[serde(deserialize_with = "lenient")]
    #[schemars(with = "u64", range(min = 1))]
    pub(crate) token: u64,
    /// The new TTL from now, in minutes [default: 30].
    #[serde(default, deserialize_with = "lenient_opt")]
    #[schemars(with = "f64", range(min = 0.0167, max = 10080))]
    pub(crate) ttl_minutes: Option<f64>,
}

/// `lease_release`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LeaseRelease {
    /// The lease's fencing token.
    #[serde(deserialize_with = "lenient")]
    #[schemars(with = "u64", range(min = 1))]
    pub(crate) token: u64,
    /// Release another agent's lease, as for one abandoned (nothing checks
    /// that its holder is gone); needs a reason, and its holder is mailed.
    #[serde(default, deserialize_with = "lenient_opt")]
    #[schemars(with = "bool")]
    pub(crate) force: Option<bool>,
    /// Why (required with force).
    #[serde(default)]
    #[schemars(length(max = 1024))]
    pub(crate) reason: Option<String>,
}

/// `lease_list`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LeaseList {
    /// Include expired leases still recorded [default: live ones only].
    #[serde(default, deserialize_with = "lenient_opt")]
    #[schemars(with = "bool")]
    pub(crate) all: Option<bool>,
    /// At most this many, oldest token first [default: 20, at most 1000].
    #[serde(default, deserialize_with = "lenient_opt")]
    #[schemars(with = "u32", range(min = 1, max = 1000))]
    pub(crate) limit: Option<u32>,
}

#[cfg(test)]
mod tests;

/// A role name: lower case letters, digits, `-` and `_`.
const ROLE: &str = "^[a-z0-9][a-z0-9_-]*$";
const LIST: &str = "^@?[a-z0-9][a-z0-9_-]*$";

/// `agent_whois`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AgentWhois {
    /// The agent to describe [default: this agent].
    #[schemars(pattern(ID), length(max = 128))]
    pub(crate) name: Option<String>,
}

/// `agent_list_add` and `agent_list_remove`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AgentListChange {
    /// The list (a role: a-z, 0-9, `-`, `_`; not `all`), with or without
    /// its `@`.
    #[schemars(pattern(LIST), length(min = 1, max = 65))]
    pub(crate) list: String,
    /// The agents to put on it or take off it (registered ones).
    #[schemars(length(min = 1, max = 256))]
    pub(crate) agents: Vec<String>,
}

/// `agent_list`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AgentList {
    /// Only agents holding this role.
    #[schemars(pattern(ROLE), length(min = 1, max = 64))]
    pub(crate) role: Option<String>,
    /// Only agents seen within this many seconds.
    #[serde(default, deserialize_with = "lenient_opt")]
    #[schemars(with = "f64", range(min = 0))]
    pub(crate) seen_within_seconds: Option<f64>,
    /// At most this many, by name [default: 20, at most 1000]; `total` counts them all.
    #[serde(default, deserialize_with = "lenient_opt")]
    #[schemars(with = "u32", range(min = 1, max = 1000))]
    pub(crate) limit: Option<u32>,
}

/// `work_ready`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WorkReady {
    /// Only items carrying this label.
    #[schemars(length(min = 1, max = 64))]
    pub(crate) label: Option<String>,
    /// Items for this role and items for no role [default: every item].
    #[schemars(length(min = 1, max = 64))]
    pub(crate) role: Option<String>,
    /// At most this many, most urgent then oldest first [default: 20, at most 1000].
    #[serde(default, deserialize_with = "lenient_opt")]
    #[schemars(with = "u32", range(min = 1, max = 1000))]
    pub(crate) limit: Option<u32>,
}

/// `work_claim`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WorkClaim {
    /// The item to claim [default: the most urgent, oldest ready one].
    #[schemars(pattern(ID), length(max = 128))]
    pub(crate) id: Option<String>,
    /// Without id: only items carrying this label.
    #[schemars(length(min = 1, max = 64))]
    pub(crate) label: Option<String>,
    /// Without id: items for this role and items for no role.
    #[schemars(length(min = 1, max = 64))]
    pub(crate) role: Option<String>,
}

/// `work_release`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WorkRelease {
    /// The item on this agent's hook.
    #[schemars(pattern(ID), length(max = 128))]
    pub(crate) id: String,
    /// Why it goes back to the pool.
    #[schemars(length(min = 1, max = 1024))]
    pub(crate) reason: String,
}
