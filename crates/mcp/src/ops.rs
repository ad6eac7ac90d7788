//! The operations behind the tools: each one a synchronous call (or a few)
//! into the libraries, acting as the server's agent, returning a [`Reply`]
//! (a text rendering and a typed view from [`crate::view`]) or the
//! [`Failure`] the command line would print.
//!
//! These run on tokio's blocking pool: every library call is file I/O.

mod attention;
mod bus;
mod hook;
mod mail;
mod nudge;
mod remind;

use std::collections::BTreeMap;
use std::time::Duration;

use chipset_bus::Bus;
use chipset_failure::{Failure, plural};
use chipset_hook::{HookRead, Hooks};
use chipset_mail::Mail;
use chipset_nudge::{KindRegistry, Nudges, Received, Reminders};
use chipset_store::{AgentId, ReadOutcome, StateDir};
use serde::Serialize;
use serde_json::{Value, json};

pub(crate) use self::attention::{brief, wait};
pub(crate) use self::bus::{bus_ack, bus_pending, bus_publish, bus_wait};
pub(crate) use self::hook::{hook_assign, hook_clear, hook_complete, hook_pickup, hook_touch};
pub(crate) use self::mail::{
    mail_archive, mail_inbox, mail_pending, mail_read, mail_send, mail_thread,
};
pub(crate) use self::nudge::{nudge_read, nudge_respond, nudge_send};
pub(crate) use self::remind::{remind_list, remind_open, remind_resolve, remind_snooze};
use crate::view::Noted;

/// The tenant reminders belong to, as on the command line (one state root
/// is one organisation).
pub(crate) const TENANT: &str = "default";

/// The longest single wait handed to the bus waiter, so a cancelled call is
/// noticed soon.
const WAIT_SLICE: Duration = Duration::from_millis(250);

/// The longest `bus_wait` a caller may ask for, in seconds.
pub(crate) const MAX_WAIT_SECS: f64 = 3600.0;

/// What a tool returns: a short text rendering, the structured result (a
/// view serialized), and an optional failure that still comes with a result
/// (a listing that met unreadable files).
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) text: String,
    pub(crate) json: Value,
    pub(crate) failure: Option<Failure>,
}

impl Reply {
    /// Returns a reply of `text` and `view`.
    pub(crate) fn new(text: impl Into<String>, view: impl Serialize) -> Self {
        Reply {
            text: text.into(),
            json: to_json(&view),
            failure: None,
        }
    }

    /// Returns a reply of `text` and `view` with a note, which is added to
    /// both (`note` in the structured result).
    pub(crate) fn noted<T: Serialize>(text: String, view: T, note: Option<String>) -> Self {
        let mut text = text;
        if let Some(note) = &note {
            text.push_str(&format!(
                "note: {note}
"
            ));
        }
        Reply::new(text, Noted { result: view, note })
    }
}

/// A tool's outcome.
pub(crate) type Outcome = Result<Reply, Failure>;

/// Who the tools act as, and where.
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    pub(crate) state: StateDir,
    pub(crate) agent: AgentId,
}

fn to_json<T: Serialize + ?Sized>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn id<T: std::str::FromStr<Err = chipset_store::Error>>(text: &str) -> Result<T, Failure> {
    text.parse().map_err(Failure::from)
}

/// Returns the timeout a waiting tool asked for, refusing one out of range.
fn timeout(secs: Option<f64>) -> Result<Duration, Failure> {
    let secs = secs.unwrap_or(60.0);
    if !(0.0..=MAX_WAIT_SECS).contains(&secs) {
        return Err(Failure::usage(format!(
            "timeout_seconds must be between 0 and {MAX_WAIT_SECS}, not {secs}"
        )));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn reminders(ctx: &Ctx) -> Reminders {
    Reminders::new(ctx.state.clone(), KindRegistry::preset())
}

// --- status ---

/// The agent's own line of `chipset status`: its hook, whether a nudge is
/// waiting, its inbox and bus counts, and the open reminders.
pub(crate) fn status(ctx: &Ctx) -> Outcome {
    let agent = &ctx.agent;
    let hook = match Hooks::new(ctx.state.clone()).read(agent)? {
        HookRead::Missing => json!({"status": "none"}),
        HookRead::Corrupt(c) => json!({"status": "corrupt", "error": c.to_string()}),
        HookRead::Unsupported(u) => json!({"status": "unsupported", "error": u.to_string()}),
        HookRead::Value(h) => json!({
            "status": h.status(),
            "bead_id": h.work().map(|w| w.bead_id()),
            "title": h.work().map(|w| w.title()),
            "last_activity": h.last_activity(),
            "generation": h.generation(),
        }),
    };
    let nudge = match Nudges::new(ctx.state.clone()).receive(agent)? {
        ReadOutcome::Value(Received::New(n) | Received::Unsure { nudge: n, .. }) => {
            json!({"pending": true, "type": n.kind, "from": n.from})
        }
        ReadOutcome::Corrupt(c) => json!({"pending": null, "error": c.to_string()}),
        ReadOutcome::Unsupported(u) => json!({"pending": null, "error": u.to_string()}),
        _ => json!({"pending": false}),
    };
    let inbox = Mail::new(ctx.state.clone()).inbox_len(agent)?;
    let counts = Bus::new(ctx.state.clone()).counts(agent)?;
    let by_priority: BTreeMap<&str, usize> = chipset_bus::Priority::ALL
        .iter()
        .map(|p| (p.as_str(), counts.pending_at(*p)))
        .collect();
    let open = reminders(ctx).open_counts()?;
    let total: usize = open.values().sum();
    let hook_text = match (hook["status"].as_str(), hook["bead_id"].as_str()) {
        (Some(s), Some(bead)) => format!("{s} {bead}"),
        (Some(s), None) => s.to_owned(),
        _ => "unknown".to_owned(),
    };
    let nudge_text = match nudge["pending"].as_bool() {
        Some(true) => format!("new {}", nudge["type"].as_str().unwrap_or("nudge")),
        Some(false) => "none".to_owned(),
        None => "unreadable".to_owned(),
    };
    let text = format!(
        "agent {agent}\nhook: {hook_text}\nnudge: {nudge_text}\ninbox: {}\nbus: {} pending\nreminders: {total} open\n",
        plural(inbox, "message"),
        counts.pending_total(),
    );
    let doc = json!({
        "agent": agent,
        "hook": hook,
        "nudge": nudge,
        "inbox": inbox,
        "bus": {"pending": counts.pending_total(), "by_priority": by_priority},
        "reminders": {"open": total, "by_kind": open},
    });
    Ok(Reply::new(text, doc))
}
