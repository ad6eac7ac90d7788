//! `chipset work ...`: [`chipset::pool::Pool`] from a shell.

use std::time::Duration;

use chipset::pool::{ItemId, NewItem, WorkState};
use chipset_mcp::view::{
    self, WorkClaimed, WorkListing, WorkPosted, WorkRecord, WorkSettled, filter,
};
use chipset_store::{AgentId, Timestamp};
use clap::{ArgGroup, Subcommand};

use crate::Ctx;
use crate::cli::{AGENT_ENV, parse_duration};
use crate::error::{CliError, Result};
use crate::output::{self, Output};

/// `chipset work ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum WorkCommand {
    /// Post an item to the pool. With --id, posting again with the same
    /// content is a retry that changes nothing.
    #[command(group(ArgGroup::new("when").args(["not_before", "defer"])))]
    Post {
        /// The agent posting it [default: $CHIPSET_AGENT if set and not empty].
        #[arg(long, env = AGENT_ENV, hide_env = true)]
        agent: AgentId,
        /// The item id [default: a fresh `w-…`].
        #[arg(long)]
        id: Option<ItemId>,
        /// The details.
        #[arg(long, default_value = "")]
        body: String,
        /// A label (repeat for more).
        #[arg(long = "label")]
        labels: Vec<String>,
        /// 0 (most urgent) to 4, or P0 to P4 as the listings print it.
        #[arg(long, default_value_t = chipset::pool::DEFAULT_PRIORITY, value_parser = parse_priority)]
        priority: u8,
        /// An item that must be done first (repeat for more).
        #[arg(long = "depends-on")]
        depends_on: Vec<ItemId>,
        /// Not ready before this time (RFC 3339).
        #[arg(long, value_parser = parse_time)]
        not_before: Option<Timestamp>,
        /// Not ready for this long from now (30s, 45m, 2h).
        #[arg(long, value_parser = parse_duration)]
        defer: Option<Duration>,
        /// Only agents claiming for this role (or for any) see it.
        #[arg(long)]
        role: Option<String>,
        /// What to do, one line.
        title: String,
    },
    /// List the claimable items: most urgent, then oldest first.
    Ready {
        /// Only items carrying this label (repeat: all of them).
        #[arg(long = "label")]
        labels: Vec<String>,
        /// Items for this role and for no role.
        #[arg(long)]
        role: Option<String>,
    },
    /// Claim the next ready item (or the one named) onto the agent's hook.
    /// Then `chipset hook activate` starts it; `hook complete` finishes it,
    /// and the next claim records it done.
    Claim {
        /// The claimer [default: $CHIPSET_AGENT if set and not empty].
        #[arg(long, env = AGENT_ENV, hide_env = true)]
        agent: AgentId,
        /// Only items carrying this label (repeat: all of them).
        #[arg(long = "label")]
        labels: Vec<String>,
        /// Items for this role and for no role.
        #[arg(long)]
        role: Option<String>,
        /// The item to claim [default: the next ready one].
        id: Option<ItemId>,
    },
    /// Return an item on the agent's hook to the pool, with a reason.
    Release {
        /// The holder [default: $CHIPSET_AGENT if set and not empty].
        #[arg(long, env = AGENT_ENV, hide_env = true)]
        agent: AgentId,
        /// Why.
        #[arg(long)]
        reason: String,
        /// The item.
        id: ItemId,
    },
    /// Mark an item on the agent's hook done, and clear the hook.
    Done {
        /// The holder [default: $CHIPSET_AGENT if set and not empty].
        #[arg(long, env = AGENT_ENV, hide_env = true)]
        agent: AgentId,
        /// The item.
        id: ItemId,
    },
    /// List every item with its state (with --open, those not done).
    List {
        /// Leave out the done items.
        #[arg(long)]
        open: bool,
    },
}

/// Parses `--priority`: a number, or the listings' `P`-form of one. The
/// pool checks the range, so every front end says the same thing.
fn parse_priority(text: &str) -> std::result::Result<u8, String> {
    let digits = text.strip_prefix(['P', 'p']).unwrap_or(text);
    digits
        .parse()
        .map_err(|_| "not a priority: use 0 (most urgent) to 4, or P0 to P4".to_owned())
}

fn parse_time(text: &str) -> std::result::Result<Timestamp, String> {
    text.parse::<Timestamp>().map_err(|e| e.to_string())
}

/// Runs one work command.
pub(crate) fn run(ctx: &Ctx, command: WorkCommand) -> Result<Output> {
    let pool = ctx.chipset.pool().clone();
    match command {
        WorkCommand::Post {
            agent,
            id,
            body,
            labels,
            priority,
            depends_on,
            not_before,
            defer,
            role,
            title,
        } => {
            let mut item = NewItem::new(title)
                .with_body(body)
                .with_labels(labels)
                .with_priority(priority)
                .with_depends_on(depends_on);
            if let Some(id) = id {
                item = item.with_id(id);
            }
            // A deferral counts from the post's time on the pool's clock (the
            // server's on a server), so a retry matches the first post.
            match (not_before, defer) {
                (Some(at), _) => item = item.with_not_before(at),
                (None, Some(d)) => item = item.with_defer(d),
                (None, None) => {}
            }
            if let Some(role) = role {
                item = item.with_role(role);
            }
            let posted = pool.post(&agent, &item)?;
            // Posted: its state read back (a hook it depends on may be
            // unreadable) is shown if it can be, never a failure, which a
            // retry without `--id` would answer with a second item.
            let (record, note) = match pool.get(&posted.entry.id) {
                Ok(listed) => (WorkRecord::of_listed(&listed), None),
                Err(e) => {
                    let mut record = WorkRecord::of(&posted.entry, &WorkState::Ready);
                    record.state = "unknown".to_owned();
                    (record, Some(format!("its state could not be read: {e}")))
                }
            };
            let view = WorkPosted {
                item: record,
                existing: posted.existing,
            };
            let text = format!(
                "{} {}\n",
                if view.existing {
                    "already posted"
                } else {
                    "posted"
                },
                view.item.line()
            );
            Ok(Output::new(text, output::json(&view)).with_note_if(note))
        }
        WorkCommand::Ready { labels, role } => {
            let ready = pool.ready(&filter(&labels, role.as_deref()))?;
            let (view, text) = WorkListing::of(&ready, usize::MAX, "nothing ready");
            Ok(Output::new(text, output::json(&view)))
        }
        WorkCommand::Claim {
            agent,
            labels,
            role,
            id,
        } => {
            let claimed = match id {
                Some(id) => Some(pool.claim(&agent, &id)?),
                None => pool.claim_next(&agent, &filter(&labels, role.as_deref()))?,
            };
            let (view, text) = WorkClaimed::of(claimed.as_ref());
            Ok(Output::new(text, output::json(&view)))
        }
        WorkCommand::Release { agent, reason, id } => {
            let settled = pool.release(&agent, &id, &reason)?;
            let (view, text) = WorkSettled::of(&settled, "released");
            Ok(Output::new(text, output::json(&view)))
        }
        WorkCommand::Done { agent, id } => {
            let settled = pool.done(&agent, &id)?;
            let (view, text) = WorkSettled::of(&settled, "done");
            Ok(Output::new(text, output::json(&view)))
        }
        WorkCommand::List { open } => {
            // Every item, then (exit 1) the hooks it could not read: each
            // might hold an item, which is listed unconfirmed.
            let mut all = pool.listing()?;
            if open {
                all.items.retain(|l| l.state.as_str() != "done");
            }
            let (mut view, text) = WorkListing::of(&all.items, usize::MAX, "no items");
            view.unreadable = view::unreadable(&all);
            let failure = CliError::unreadable(&all, "hook");
            Ok(Output::new(text, output::json(&view)).with_failure(failure))
        }
    }
}
