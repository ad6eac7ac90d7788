//! `chipset bus ...`: the bus commands' arguments.

use std::time::Duration;

use chipset_bus::EventId;
use chipset_store::AgentId;
use clap::{Args, Subcommand};

use super::{Who, parse_duration, parse_seconds};

/// `chipset bus ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum BusCommand {
    /// Publish an event to an agent's queue; prints the new id.
    Publish {
        /// The recipient.
        #[arg(long, value_name = "A")]
        to: AgentId,
        /// Who caused the event.
        #[arg(long, value_name = "S")]
        source: String,
        /// What kind of event it is.
        #[arg(long, value_name = "K")]
        kind: String,
        /// critical, high, normal or low [default: normal].
        #[arg(long, value_name = "P")]
        priority: Option<chipset_bus::Priority>,
        /// Drop this publish if the key was accepted for the recipient within the window.
        #[arg(long, value_name = "K")]
        dedup_key: Option<String>,
        /// A JSON payload (kept exactly, numbers of any size included).
        #[arg(long, value_name = "JSON", value_parser = parse_json)]
        payload: Option<serde_json::Value>,
        /// The event's id (`{unix-ms}-{uuid-v4}`), to make a retry safe:
        /// publishing again with the same id and content prints the first
        /// delivery's id and changes nothing; other content is refused.
        #[arg(long, value_name = "ID")]
        id: Option<EventId>,
    },
    /// List an agent's unacknowledged events, critical first.
    Pending {
        #[command(flatten)]
        who: Who,
    },
    /// Acknowledge an event: `bus ack [AGENT] EVENT_ID`; without AGENT,
    /// the agent is `--agent` or $CHIPSET_AGENT.
    #[command(override_usage = "chipset bus ack [OPTIONS] [AGENT] <EVENT_ID>")]
    Ack {
        /// The agent, then the event id; or the event id alone.
        #[arg(value_name = "AGENT|EVENT_ID")]
        first: String,
        /// The event id, after the agent.
        #[arg(value_name = "EVENT_ID")]
        event_id: Option<String>,
        /// The agent, as an option (instead of AGENT).
        #[arg(long = "agent", value_name = "AGENT")]
        agent_opt: Option<AgentId>,
    },
    /// Block until the agent has pending events, then list them (nothing on timeout).
    Wait {
        #[command(flatten)]
        who: Who,
        /// Give up after this many seconds (exit 0, empty output) [default: wait forever].
        #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
        timeout: Option<Duration>,
    },
    /// Start a session (restart semantics): make the queue, list every
    /// pending event in processing order, register presence.
    Start {
        #[command(flatten)]
        who: Who,
        /// The agent's process id, recorded as its presence [default: the
        /// process that ran this command, such as the agent's shell].
        #[arg(long, value_name = "PID")]
        pid: Option<u32>,
    },
    /// Show an agent's presence: live, stale, absent or unreadable.
    Presence {
        #[command(flatten)]
        who: Who,
    },
    /// The control inbox: register or unregister resources to watch.
    #[command(subcommand)]
    Control(ControlCommand),
    /// List the pending events due for a reminder now, by the priority
    /// schedule (timed reminders are recorded, so they are not repeated early).
    Nag {
        #[command(flatten)]
        who: Who,
        /// A regular poll cycle (poll rules fire too) rather than a natural pause.
        #[arg(long)]
        poll: bool,
    },
    /// Remove old acknowledged events and de-duplication records (never a
    /// queued event).
    ///
    /// Each limit applies per agent to its acknowledged events
    /// (`processed/`), newest kept; an event goes when any limit says so.
    /// Give at least one limit. Safe to run again, from cron say.
    Prune(PruneArgs),
}

/// The arguments of `bus prune`: the limits of [`chipset_bus::Retention`].
#[derive(Debug, Args)]
pub(crate) struct PruneArgs {
    /// Prune this agent only [default: every agent with a bus folder;
    /// $CHIPSET_AGENT is not used].
    #[arg(long, value_name = "A")]
    pub(crate) agent: Option<AgentId>,
    /// Keep at most N acknowledged events per agent (the newest).
    #[arg(long, value_name = "N")]
    pub(crate) keep: Option<usize>,
    /// Keep at most BYTES of acknowledged events per agent (the newest).
    #[arg(long, value_name = "BYTES")]
    pub(crate) max_bytes: Option<u64>,
    /// Remove acknowledged events published longer ago than DUR (a number
    /// with ms, s, m, h or d, such as 7d).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub(crate) older_than: Option<Duration>,
    /// Remove de-duplication records accepted longer ago than DUR; choose
    /// it longer than any --dedup-key window in use, or a key is accepted
    /// again early.
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub(crate) dedup_older_than: Option<Duration>,
}

impl PruneArgs {
    /// Returns the limits given, `None` when none is.
    pub(crate) fn retention(&self) -> Option<chipset_bus::Retention> {
        if self.keep.is_none()
            && self.max_bytes.is_none()
            && self.older_than.is_none()
            && self.dedup_older_than.is_none()
        {
            return None;
        }
        let mut retention = chipset_bus::Retention::default();
        retention.max_count = self.keep;
        retention.max_bytes = self.max_bytes;
        retention.max_age = self.older_than;
        retention.dedup_max_age = self.dedup_older_than;
        Some(retention)
    }
}

/// `chipset bus control ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum ControlCommand {
    /// Ask for a resource to be watched for the agent; prints the registry.
    Register(ControlArgs),
    /// Stop watching a resource for the agent; prints the registry.
    Unregister(ControlArgs),
}

/// The arguments of `bus control register|unregister`.
#[derive(Debug, Args)]
pub(crate) struct ControlArgs {
    #[command(flatten)]
    pub(crate) who: Who,
    /// What sort of resource (chat, queue, hub, ...).
    #[arg(long, value_name = "K")]
    pub(crate) kind: String,
    /// Where it is (a path, an agent id, ...).
    #[arg(long, value_name = "T")]
    pub(crate) target: String,
}

fn parse_json(text: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))
}
