//! The operations behind the tools: each one a synchronous call (or a few)
//! into the libraries, acting as the server's agent, returning a [`Reply`]
//! (a text rendering and a typed view from [`crate::view`]) or the
//! [`Failure`] the command line would print.
//!
//! These run on tokio's blocking pool: every library call is file I/O.

mod agent;
mod attention;
mod bus;
mod hook;
pub(crate) mod lease;
mod mail;
mod nudge;
mod remind;
pub(crate) mod search;
pub(crate) mod work;

use std::time::Duration;

use chipset::bus::Bus;
use chipset::directory::Directory;
use chipset::hook::Hooks;
use chipset::lease::Leases;
use chipset::r#loop::Attention;
use chipset::mail::Mail;
use chipset::nudge::Nudges;
use chipset::pool::Pool;
use chipset::{Chipset, HookLine, NudgeLine};
use chipset_failure::{Failure, plural};
use chipset_nudge::Reminders;
use chipset_store::{AgentId, StateDir};
use serde::Serialize;
use serde_json::Value;

pub(crate) use self::agent::{agent_list, agent_list_add, agent_list_remove, agent_whois};
pub(crate) use self::attention::{brief, waited};
pub(crate) use self::bus::{bus_ack, bus_pending, bus_publish, events};
pub(crate) use self::hook::{hook_assign, hook_clear, hook_complete, hook_pickup, hook_touch};
pub(crate) use self::lease::{lease_acquire, lease_list, lease_release, lease_renew};
pub(crate) use self::mail::{
    mail_archive, mail_inbox, mail_pending, mail_read, mail_send, mail_thread,
};
pub(crate) use self::nudge::{nudge_read, nudge_respond, nudge_send};
pub(crate) use self::remind::{remind_list, remind_open, remind_resolve, remind_snooze};
pub(crate) use self::search::search;
pub(crate) use self::work::{work_claim, work_ready, work_release};
use crate::view::Noted;

/// The tenant reminders belong to, as on the command line (one state root
/// is one organisation).
pub(crate) const TENANT: &str = "default";

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
    /// The state root; on a server, its local folder (what is local by
    /// nature: the clock's fallback, caches).
    pub(crate) state: StateDir,
    pub(crate) agent: AgentId,
    /// Every channel, on a directory or a server: a tool takes its channel
    /// from here.
    pub(crate) chipset: Chipset,
}

impl Ctx {
    pub(crate) fn new(chipset: Chipset, agent: AgentId) -> Self {
        Ctx {
            state: chipset.state().clone(),
            agent,
            chipset,
        }
    }

    pub(crate) fn hooks(&self) -> &Hooks {
        self.chipset.hooks()
    }

    pub(crate) fn nudges(&self) -> &Nudges {
        self.chipset.nudges()
    }

    pub(crate) fn mail(&self) -> &Mail {
        self.chipset.mail()
    }

    pub(crate) fn bus(&self) -> &Bus {
        self.chipset.bus()
    }

    pub(crate) fn reminders(&self) -> &Reminders {
        self.chipset.reminders()
    }

    pub(crate) fn attention(&self) -> &Attention {
        self.chipset.attention()
    }

    pub(crate) fn directory(&self) -> &Directory {
        self.chipset.directory()
    }

    pub(crate) fn leases(&self) -> &Leases {
        self.chipset.leases()
    }

    pub(crate) fn pool(&self) -> &Pool {
        self.chipset.pool()
    }
}

fn to_json<T: Serialize + ?Sized>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn id<T: std::str::FromStr<Err = chipset_store::Error>>(text: &str) -> Result<T, Failure> {
    text.parse().map_err(Failure::from)
}

/// Returns the timeout a waiting tool asked for, refusing one out of range.
pub(crate) fn timeout(secs: Option<f64>) -> Result<Duration, Failure> {
    let secs = secs.unwrap_or(60.0);
    if !(0.0..=MAX_WAIT_SECS).contains(&secs) {
        return Err(Failure::usage(format!(
            "timeout_seconds must be between 0 and {MAX_WAIT_SECS}, not {secs}"
        )));
    }
    Ok(Duration::from_secs_f64(secs))
}

// --- status ---

/// The agent's own line of `chipset status` ([`Chipset::agent_status`]):
/// its hook, whether a nudge is waiting, its inbox and bus counts, and the
/// open reminders.
pub(crate) fn status(ctx: &Ctx) -> Outcome {
    let report = ctx.chipset.agent_status(&ctx.agent)?;
    let line = &report.line;
    let hook_text = match &line.hook {
        HookLine::Held {
            status,
            bead_id: Some(bead),
            ..
        } => format!("{status} {bead}"),
        HookLine::Held { status, .. } => status.to_string(),
        HookLine::None => "none".to_owned(),
        HookLine::Corrupt(_) => "corrupt".to_owned(),
        HookLine::Unsupported(_) => "unsupported".to_owned(),
        _ => "unknown".to_owned(),
    };
    let nudge_text = match &line.nudge {
        Some(NudgeLine::Pending { kind, .. }) => format!("new {kind}"),
        Some(NudgeLine::None) | None => "none".to_owned(),
        Some(_) => "unreadable".to_owned(),
    };
    let text = format!(
        "agent {}\nhook: {hook_text}\nnudge: {nudge_text}\ninbox: {}\nbus: {} pending\nreminders: {} open\n",
        line.agent,
        plural(line.inbox, "message"),
        line.bus.as_ref().map_or(0, |b| b.pending),
        report.reminders.open,
    );
    Ok(Reply::new(text, &report))
}
