//! JSON Schemas of the library records as they serialize: schema-only
//! mirrors (never built), since the libraries do not depend on `schemars`.
//! Each names the fields that identify a record, with their types, and
//! allows the rest (a record has more, and keeps fields another program
//! wrote). The server's tests check real results against them; tools/list
//! publishes records as plain objects (see `schema::compact`).

#![allow(
    dead_code,
    reason = "schema-only types: derived for their JSON Schema, never built"
)]

use schemars::JsonSchema;

/// A hook's status.
#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum HookStatus {
    Empty,
    Pending,
    Active,
    Completed,
}

/// A hook file (seed 001).
#[derive(JsonSchema)]
pub(crate) struct Hook {
    agent_id: String,
    status: HookStatus,
    generation: u64,
}

/// An assignment: the work a hook holds, at a generation.
#[derive(JsonSchema)]
pub(crate) struct Assignment {
    agent: String,
    generation: u64,
    work: Work,
}

/// The work of an assignment.
#[derive(JsonSchema)]
pub(crate) struct Work {
    bead_id: String,
    title: String,
}

/// A nudge (seed 000).
#[derive(JsonSchema)]
pub(crate) struct Nudge {
    from: String,
    #[serde(rename = "type")]
    kind: String,
    message: String,
    timestamp: String,
}

/// A message (seed 002).
#[derive(JsonSchema)]
pub(crate) struct Message {
    id: String,
    from: String,
    to: String,
    kind: String,
    subject: String,
    body: String,
}

/// What `mail_send` returns: the message, or for several recipients the
/// group sent.
#[derive(JsonSchema)]
#[serde(untagged)]
pub(crate) enum Sent {
    One(Message),
    Group(super::GroupSentView),
}

/// A bus event.
#[derive(JsonSchema)]
pub(crate) struct Event {
    id: String,
    source: String,
    kind: String,
    priority: String,
}

/// A reminder (seed 003).
#[derive(JsonSchema)]
pub(crate) struct Reminder {
    id: String,
    kind: String,
    source_type: String,
    source_id: String,
    message: String,
    snooze_until: Option<String>,
    resolution: Option<String>,
}

/// One kind of work in a brief, with its most urgent item.
#[derive(JsonSchema)]
pub(crate) struct Entry {
    kind: String,
    count: usize,
    top: Item,
}

/// The most urgent item of a brief entry.
#[derive(JsonSchema)]
pub(crate) struct Item {
    id: String,
    summary: String,
}

/// What needs an agent.
#[derive(JsonSchema)]
pub(crate) struct Brief {
    agent: String,
    entries: Vec<Entry>,
}

/// The `status` tool's result, `chipset::AgentReport`: the agent's line of
/// `chipset status` with the open reminders beside it.
#[derive(JsonSchema)]
pub(crate) struct AgentReport {
    agent: String,
    hook: StatusHook,
    nudge: Option<StatusNudge>,
    inbox: usize,
    bus: Option<StatusBus>,
    reminders: ReminderCounts,
}

/// A status line's hook: `none`, `corrupt`, `unsupported` or a hook status.
#[derive(JsonSchema)]
pub(crate) struct StatusHook {
    status: String,
}

/// A status line's nudge: `pending` is null when it cannot be read.
#[derive(JsonSchema)]
pub(crate) struct StatusNudge {
    pending: Option<bool>,
}

/// A status line's bus queue.
#[derive(JsonSchema)]
pub(crate) struct StatusBus {
    pending: usize,
    by_priority: std::collections::BTreeMap<String, usize>,
    unreadable_names: usize,
    presence: String,
}

/// The open reminders, in total and per kind.
#[derive(JsonSchema)]
pub(crate) struct ReminderCounts {
    open: usize,
    by_kind: std::collections::BTreeMap<String, usize>,
}
