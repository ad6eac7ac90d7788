//! What a brief is: per kind of work, how much needs the agent and the
//! most urgent item.

use std::fmt;

use chipset_store::{AgentId, Timestamp};
use serde::Serialize;

/// A kind of work that can need an agent, in the order a brief lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum WorkKind {
    /// Pending work on the agent's hook, to pick up (active work is work in
    /// progress, not attention).
    Hook,
    /// A nudge in `nudge/{agent}/latest.json` not processed yet.
    Nudge,
    /// Messages in the agent's inbox (unread = not archived).
    Mail,
    /// Unacknowledged events in the agent's bus queue.
    Bus,
    /// Open reminders (or snoozed ones now due) naming the agent in
    /// `metadata.agent` ([`Attention::REMINDER_AGENT_FIELD`](crate::Attention::REMINDER_AGENT_FIELD)).
    Reminder,
    /// The agent's own live leases that expire within five minutes: renew
    /// or release them.
    Lease,
    /// Ready items in the work pool the agent could claim now: its hook is
    /// free (missing, empty, or holding a completed pool item) and they are
    /// for no role or for one of its roles in the directory.
    Pool,
}

impl WorkKind {
    /// Returns the name, as in JSON (and as displayed).
    fn as_str(self) -> &'static str {
        match self {
            WorkKind::Hook => "hook",
            WorkKind::Nudge => "nudge",
            WorkKind::Mail => "mail",
            WorkKind::Bus => "bus",
            WorkKind::Reminder => "reminder",
            WorkKind::Lease => "lease",
            WorkKind::Pool => "pool",
        }
    }
}

impl fmt::Display for WorkKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One piece of work: the most urgent of its kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BriefItem {
    /// Its id: bead, nudge, message, event or reminder id; the file's path
    /// when the file is unreadable.
    pub id: String,
    /// Who sent or assigned it, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Its priority, type or severity, as its channel names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    /// When it was made, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<Timestamp>,
    /// One line saying what it is.
    pub summary: String,
    /// True when the file is there but unreadable: it needs a look (or
    /// `chipset doctor`), and is never counted as nothing.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unreadable: bool,
}

/// Puts every summary of `entries` on one line ([`one_line`]): a summary
/// quotes text others wrote (a title, a message, a type), whose line
/// breaks would forge lines of the brief.
pub(super) fn flatten(entries: &mut [BriefEntry]) {
    for entry in entries {
        for item in std::iter::once(&mut entry.top).chain(&mut entry.more) {
            item.summary = one_line(&item.summary);
        }
    }
}

/// Returns `text` on one line: each control character (a line break, a
/// tab, an escape) written as its Rust escape (`\n`), the rest kept.
fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// One kind of work that needs the agent: how much, and the most urgent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BriefEntry {
    /// The kind.
    pub kind: WorkKind,
    /// How many items of this kind need the agent.
    pub count: usize,
    /// The most urgent of them.
    pub top: BriefItem,
    /// The next most urgent after `top`, for a kind that names a few (the
    /// pool: three items in all).
    /// Left out of the JSON when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub more: Vec<BriefItem>,
}

impl fmt::Display for BriefEntry {
    /// One line: `mail (2): urgent request from mayor: review-plan [id]`,
    /// then one indented line for each of [`BriefEntry::more`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}): {} [{}]",
            self.kind.as_str(),
            self.count,
            self.top.summary,
            self.top.id
        )?;
        for item in &self.more {
            write!(f, "\n  {} [{}]", item.summary, item.id)?;
        }
        Ok(())
    }
}

/// What needs one agent now: at most one [`BriefEntry`] per [`WorkKind`], in
/// the order of the kinds. Empty when nothing does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Brief {
    /// The agent.
    pub agent: AgentId,
    /// One entry per kind of work that needs the agent.
    pub entries: Vec<BriefEntry>,
}

impl Brief {
    /// Returns an empty brief for `agent`.
    pub fn empty(agent: AgentId) -> Self {
        Brief {
            agent,
            entries: Vec::new(),
        }
    }

    /// Returns true when nothing needs the agent.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Returns the kinds that need the agent.
    pub fn kinds(&self) -> Vec<WorkKind> {
        self.entries.iter().map(|e| e.kind).collect()
    }
}

impl fmt::Display for Brief {
    /// One line per entry; nothing at all when empty.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in &self.entries {
            writeln!(f, "{e}")?;
        }
        Ok(())
    }
}
