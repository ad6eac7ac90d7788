//! `chipset remind ...`: the reminder commands' arguments.

use chipset_nudge::ReminderId;
use chipset_store::AgentId;
use clap::{Subcommand, ValueEnum};

/// `chipset remind ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum RemindCommand {
    /// Open a reminder (idempotent per kind, source type and source id).
    Open {
        /// A registered kind (wrap_session, spec_draft, adr_proposed, wip_unsealed,
        /// invite_pending, handoff_pending).
        #[arg(long, value_name = "K")]
        kind: String,
        /// The kind's source type (session, spec, adr, wip_state, invite, handoff).
        #[arg(long, value_name = "T")]
        source_type: String,
        /// The entity it refers to.
        #[arg(long, value_name = "ID")]
        source_id: String,
        /// The prompt.
        #[arg(long, value_name = "TEXT")]
        message: String,
        /// The agent it is for (`metadata.agent`): it shows in that agent's
        /// `brief` and wakes its `wait`.
        #[arg(long, value_name = "A")]
        agent: Option<AgentId>,
    },
    /// List open reminders, oldest first.
    List {
        /// Only this kind.
        #[arg(long, value_name = "K")]
        kind: Option<String>,
    },
    /// Resolve a reminder by hand.
    Resolve {
        /// The reminder id.
        id: ReminderId,
        /// completed or ignored.
        #[arg(long, value_name = "R")]
        resolution: ResolutionArg,
        /// A note recorded with the resolution.
        #[arg(long, value_name = "TEXT")]
        note: Option<String>,
    },
    /// Put a reminder off; it reopens when the time has come.
    Snooze {
        /// The reminder id.
        id: ReminderId,
        /// How many hours.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        hours: u32,
    },
    /// Resolve automatically, as the resolving verb does (auto_cleared):
    /// the reminder of exactly this kind, source type and source id.
    Clear {
        /// The kind.
        #[arg(long, value_name = "K")]
        kind: String,
        /// The kind's source type.
        #[arg(long, value_name = "T")]
        source_type: String,
        /// The entity it refers to.
        #[arg(long, value_name = "ID")]
        source_id: String,
        /// The verb that resolved it (one of the kind's resolving verbs, such as prism_wrap).
        #[arg(long, value_name = "VERB")]
        verb: String,
    },
    /// Every reminder ever opened (open, snoozed, resolved), oldest first.
    History {
        /// Only this kind.
        #[arg(long, value_name = "K")]
        kind: Option<String>,
    },
    /// Counts per kind: opened, resolved by resolution, open now, median open age.
    Metrics {
        /// Count openings and resolutions from this time on (RFC 3339) [default: all time].
        #[arg(long, value_name = "TIME", value_parser = parse_time)]
        since: Option<chipset_store::Timestamp>,
    },
}

/// A manual resolution, as typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ResolutionArg {
    /// Done.
    Completed,
    /// Dismissed.
    Ignored,
}

impl From<ResolutionArg> for chipset_nudge::ManualResolution {
    fn from(r: ResolutionArg) -> Self {
        match r {
            ResolutionArg::Completed => chipset_nudge::ManualResolution::Completed,
            ResolutionArg::Ignored => chipset_nudge::ManualResolution::Ignored,
        }
    }
}

fn parse_time(text: &str) -> Result<chipset_store::Timestamp, String> {
    text.parse::<chipset_store::Timestamp>()
        .map_err(|e| e.to_string())
}
