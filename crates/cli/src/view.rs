//! The JSON views only the command line prints (what the MCP server has no
//! tool for: hook listings, doctor reports, metrics, presence, bus
//! prune). The views both print are in [`chipset_mcp::view`].

use std::collections::BTreeMap;

use chipset_bus::{Bus, Presence};
use chipset_hook::Hook;
use chipset_mcp::view::Events;
pub(crate) use chipset_mcp::view::{GroupSentView, LEFT_OUT};
use chipset_store::{AgentId, ReadOutcome, TaskId, Timestamp};
use serde::Serialize;

/// One entry of `hook list`: a hook, or a file that could not be read.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum HookEntry {
    /// A readable hook (a missing file reads as an empty hook).
    Hook(Hook),
    /// An unreadable or unsupported hook file.
    Unreadable {
        /// The agent.
        agent_id: AgentId,
        /// `corrupt` or `unsupported`.
        status: &'static str,
        /// Why.
        error: String,
    },
}

/// `mail sweep`.
#[derive(Debug, Serialize)]
pub(crate) struct Swept {
    pub(crate) task: TaskId,
    pub(crate) moved: usize,
    pub(crate) total: usize,
}

/// One finding of `mail doctor`.
#[derive(Debug, Serialize)]
pub(crate) struct MailFinding {
    pub(crate) code: &'static str,
    pub(crate) problem: String,
    pub(crate) repaired: bool,
}

/// `mail doctor`.
#[derive(Debug, Serialize)]
pub(crate) struct MailDoctor {
    pub(crate) messages: usize,
    pub(crate) findings: Vec<MailFinding>,
    pub(crate) remaining: usize,
}

/// One finding of `doctor`.
#[derive(Debug, Serialize)]
pub(crate) struct Finding {
    pub(crate) area: String,
    pub(crate) problem: String,
    pub(crate) action: Option<String>,
}

/// `doctor`.
#[derive(Debug, Serialize)]
pub(crate) struct DoctorReport {
    pub(crate) fix: bool,
    /// Files scanned per area (`null`: the area's doctor could not finish).
    pub(crate) scanned: BTreeMap<String, Option<usize>>,
    pub(crate) findings: Vec<Finding>,
    pub(crate) fixed: usize,
    pub(crate) remaining: usize,
    pub(crate) in_flight: usize,
}

/// `bus presence`, and the previous presence `bus start` found.
#[derive(Debug, Serialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub(crate) enum PresenceView {
    Absent,
    Live { presence: Presence },
    Stale { presence: Presence },
    Unreadable { problem: String },
    Unsupported { problem: String },
}

impl PresenceView {
    /// The view of a presence file as read, judged live or stale by `bus`.
    pub(crate) fn of(bus: &Bus, read: &ReadOutcome<Presence>) -> Self {
        match read {
            ReadOutcome::Missing => PresenceView::Absent,
            ReadOutcome::Value(p) if bus.is_live(p) => PresenceView::Live {
                presence: p.clone(),
            },
            ReadOutcome::Value(p) => PresenceView::Stale {
                presence: p.clone(),
            },
            ReadOutcome::Corrupt(c) => PresenceView::Unreadable {
                problem: c.to_string(),
            },
            ReadOutcome::Unsupported(u) => PresenceView::Unsupported {
                problem: u.to_string(),
            },
        }
    }
}

/// `bus start`: the pending events, the presence registered, the one before.
#[derive(Debug, Serialize)]
pub(crate) struct Started {
    #[serde(flatten)]
    pub(crate) events: Events,
    pub(crate) presence: Presence,
    pub(crate) previous: PresenceView,
}

/// `bus prune`: what was removed, an agent a line, in agent order, and
/// the agents whose prune failed.
#[derive(Debug, Serialize)]
pub(crate) struct BusPruned {
    pub(crate) agents: Vec<AgentPruned>,
    pub(crate) failed: Vec<AgentFailed>,
}

/// An agent `bus prune` could not prune: its failure, as a command's
/// `--json` failure gives it.
#[derive(Debug, Serialize)]
pub(crate) struct AgentFailed {
    pub(crate) agent: AgentId,
    #[serde(flatten)]
    pub(crate) failure: chipset_mcp::view::Refusal,
}

impl AgentFailed {
    /// The entry of `agent`, whose prune failed with `failure`.
    pub(crate) fn of(agent: AgentId, failure: &crate::error::CliError) -> Self {
        AgentFailed {
            agent,
            failure: chipset_mcp::view::Refusal::of(failure),
        }
    }
}

/// One agent's line of `bus prune`.
#[derive(Debug, Serialize)]
pub(crate) struct AgentPruned {
    pub(crate) agent: AgentId,
    /// Acknowledged events removed.
    pub(crate) events: usize,
    /// Their bytes.
    pub(crate) bytes: u64,
    /// De-duplication records removed.
    pub(crate) dedup_records: usize,
}

impl AgentPruned {
    /// The line of `agent`, which prune left as `pruned`.
    pub(crate) fn of(agent: AgentId, pruned: chipset_bus::Pruned) -> Self {
        AgentPruned {
            agent,
            events: pruned.events,
            bytes: pruned.bytes,
            dedup_records: pruned.dedup_records,
        }
    }
}

/// `remind clear` when nothing was open.
#[derive(Debug, Serialize)]
pub(crate) struct NothingOpen {
    /// Always `nothing-open`.
    pub(crate) outcome: &'static str,
}

/// One kind's line of `remind metrics`.
#[derive(Debug, Serialize)]
pub(crate) struct KindMetrics {
    pub(crate) opened: u64,
    pub(crate) resolved: BTreeMap<String, u64>,
    pub(crate) open: u64,
    pub(crate) median_open_age_ms: Option<u64>,
}

/// `remind metrics`.
#[derive(Debug, Serialize)]
pub(crate) struct Metrics {
    pub(crate) since: Option<Timestamp>,
    pub(crate) kinds: BTreeMap<String, KindMetrics>,
    /// Why each reminder record that could not be read (and is counted
    /// nowhere) could not be.
    pub(crate) unreadable: Vec<String>,
}

/// `--json serve`: where it listens (printed once it does), and, with
/// `stopped`, the document it ends with.
#[derive(Debug, Serialize)]
pub(crate) struct Serving {
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) stopped: bool,
    pub(crate) addr: Option<std::net::SocketAddr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) url: Option<String>,
}

/// The last line of `witness run`.
#[derive(Debug, Serialize)]
pub(crate) struct Stopped {
    pub(crate) stopped: bool,
    pub(crate) ticks: u64,
    pub(crate) actions: u64,
}

/// `migrate`: what was copied per channel, and whether the counts match.
#[derive(Debug, Serialize)]
pub(crate) struct Migrated {
    /// Every channel's count on the target equals the source's.
    pub(crate) verified: bool,
    /// Values and log records this run wrote (0: the target was complete).
    pub(crate) written: u64,
    /// The report: the two roots (without a password) and one line per
    /// channel.
    #[serde(flatten)]
    pub(crate) report: chipset::migrate::Report,
}

/// `top --once --json`: the one frame drawn, a line each.
#[derive(Debug, Serialize)]
pub(crate) struct TopFrame {
    /// The frame's width, in columns.
    pub(crate) width: u16,
    /// The frame's height, in lines.
    pub(crate) height: u16,
    /// The frame, top to bottom, as the terminal would show it.
    pub(crate) lines: Vec<String>,
}
