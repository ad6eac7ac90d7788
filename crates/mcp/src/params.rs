//! The tools' inputs: serde types whose JSON Schemas (derived by
//! `schemars`) are the tools' `inputSchema`. None of them names the caller:
//! the server's agent is fixed at start (`--agent`).

use schemars::JsonSchema;
use serde::Deserialize;

/// `nudge_respond`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NudgeRespond {
    /// The answer [default: "Acknowledged"].
    pub(crate) message: Option<String>,
}

/// `nudge_send`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NudgeSend {
    /// The recipient agent.
    pub(crate) to: String,
    /// health_check, stall_warning, priority_change, abort, sync_request or
    /// nudge_response (other names are sent verbatim).
    #[serde(rename = "type")]
    pub(crate) kind: String,
    /// Human-readable content.
    pub(crate) message: String,
    /// Whether the recipient must answer (with `nudge_respond`) [default: false].
    pub(crate) requires_response: Option<bool>,
}

/// A mail kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum MailKind {
    /// Expects a reply.
    Request,
    /// Answers a request.
    Response,
    /// Expects no reply.
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

/// A mail priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum MailPriority {
    /// Before anything else.
    Urgent,
    /// The default.
    Normal,
    /// Whenever convenient.
    Low,
}

impl From<MailPriority> for chipset_mail::Priority {
    fn from(p: MailPriority) -> Self {
        match p {
            MailPriority::Urgent => chipset_mail::Priority::Urgent,
            MailPriority::Normal => chipset_mail::Priority::Normal,
            MailPriority::Low => chipset_mail::Priority::Low,
        }
    }
}

/// `mail_send`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MailSend {
    /// The addressee agent.
    pub(crate) to: String,
    /// request (expects a reply), response (answers in_reply_to) or notify.
    pub(crate) kind: MailKind,
    /// A kebab-case topic.
    pub(crate) subject: String,
    /// The text.
    pub(crate) body: String,
    /// The task (required for request and notify; a response takes its request's).
    pub(crate) task: Option<String>,
    /// The round within the task [default: 0].
    pub(crate) round: Option<u32>,
    /// The message this one replies to (required for a response).
    pub(crate) in_reply_to: Option<String>,
    /// urgent, normal or low [default: normal].
    pub(crate) priority: Option<MailPriority>,
}

/// `mail_inbox`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MailInbox {
    /// Only this kind.
    pub(crate) kind: Option<MailKind>,
    /// Only this task's messages.
    pub(crate) task: Option<String>,
}

/// `mail_archive`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MailArchive {
    /// The id of a message addressed to this agent (a request only after it was answered).
    pub(crate) id: String,
}

/// `mail_thread`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MailThread {
    /// Any message id of the thread.
    pub(crate) id: String,
}

/// `mail_pending`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MailPending {
    /// The task whose requests still wait for a reply (the commit gate).
    pub(crate) task: String,
}

/// An event priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum EventPriority {
    /// Before anything else.
    Critical,
    /// Soon.
    High,
    /// The default.
    Normal,
    /// Whenever convenient.
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
    pub(crate) to: String,
    /// What kind of event it is (the source is this agent).
    pub(crate) kind: String,
    /// critical, high, normal or low [default: normal].
    pub(crate) priority: Option<EventPriority>,
    /// Drop this publish if the key was accepted for the recipient within the window.
    pub(crate) dedup_key: Option<String>,
    /// Any JSON payload.
    pub(crate) payload: Option<serde_json::Value>,
}

/// `bus_ack`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BusAck {
    /// The id of an event in this agent's queue.
    pub(crate) event_id: String,
}

/// `bus_wait`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BusWait {
    /// Give up after this many seconds, at most 3600 [default: 60]; a
    /// timeout is not an error (`timed_out: true`).
    pub(crate) timeout_seconds: Option<f64>,
}

/// `wait`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Wait {
    /// Give up after this many seconds, at most 3600 [default: 60]; a
    /// timeout is not an error (`timed_out: true`, no entries).
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
    pub(crate) message: String,
    /// The agent the reminder is for (its brief and `wait` show it)
    /// [default: this agent].
    pub(crate) to: Option<String>,
}

/// `remind_list`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RemindList {
    /// Only this kind.
    pub(crate) kind: Option<String>,
}

/// A manual resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Resolution {
    /// Done.
    Completed,
    /// Dismissed.
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
    pub(crate) note: Option<String>,
}

/// `remind_snooze`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RemindSnooze {
    /// The reminder id.
    pub(crate) id: String,
    /// How many hours (at least 1).
    pub(crate) hours: u32,
}
