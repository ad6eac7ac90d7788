//! `chipset lease ...`: [`chipset_lease::Leases`] from a shell, and the
//! pre-commit check (`chipset lease check --staged --agent A`).

use std::process::Command;
use std::time::Duration;

use chipset_lease::{DEFAULT_TTL, LeaseMode, LeaseRequest, Leases};
use chipset_mcp::view::{
    LeaseBlocked, LeaseCheck, LeaseGranted, LeaseListing, LeaseRecord, LeaseReleased, LeaseRenewed,
};
use chipset_store::AgentId;
use clap::{ArgGroup, Subcommand};

use crate::Ctx;
use crate::cli::{AGENT_ENV, parse_duration};
use crate::error::{CliError, Result};
use crate::output::{self, Output};

/// `chipset lease ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum LeaseCommand {
    /// Lease paths or globs (relative to the project root), exclusive
    /// unless --shared; refused, changing nothing, when live leases of
    /// other agents overlap (each is named). Prints the fencing token.
    Acquire {
        /// The agent taking the lease [default: $CHIPSET_AGENT if set and not empty].
        #[arg(long, env = AGENT_ENV, hide_env = true)]
        agent: AgentId,
        /// Let other agents hold overlapping shared leases.
        #[arg(long)]
        shared: bool,
        /// How long it lasts (30s, 45m, 2h) [default: 30m; at most 168h].
        #[arg(long, value_parser = parse_duration)]
        ttl: Option<Duration>,
        /// Why (shown to the agents it blocks).
        #[arg(long, default_value = "")]
        reason: String,
        /// The paths or globs (`src/auth/**`).
        #[arg(required = true, num_args = 1..)]
        paths: Vec<String>,
    },
    /// Extend a lease held by the agent to now plus the TTL; refused when
    /// it is no longer held (released, forced, or expired and taken).
    Renew {
        /// The holder [default: $CHIPSET_AGENT if set and not empty].
        #[arg(long, env = AGENT_ENV, hide_env = true)]
        agent: AgentId,
        /// The lease's fencing token.
        token: u64,
        /// The new TTL from now [default: 30m].
        #[arg(long, value_parser = parse_duration)]
        ttl: Option<Duration>,
    },
    /// Release a lease held by the agent (an already released one is
    /// success); with --force and --reason, another agent's lease, as for
    /// one abandoned (nothing checks that its holder is gone: the holder
    /// is mailed the reason).
    Release {
        /// The holder, or with --force the agent releasing it [default: $CHIPSET_AGENT if set and not empty].
        #[arg(long, env = AGENT_ENV, hide_env = true)]
        agent: AgentId,
        /// The lease's fencing token.
        token: u64,
        /// Release another agent's lease.
        #[arg(long, requires = "reason")]
        force: bool,
        /// Why (required with --force).
        #[arg(long)]
        reason: Option<String>,
    },
    /// List the live leases (with --all, expired ones still recorded too).
    List {
        /// Include expired leases.
        #[arg(long)]
        all: bool,
    },
    /// Exit 1, naming the holder, when a path is leased exclusively by
    /// another agent: the git pre-commit guard (`--staged`).
    #[command(group(ArgGroup::new("what").required(true).args(["staged", "paths"])))]
    Check {
        /// The agent about to change the paths [default: $CHIPSET_AGENT if set and not empty].
        #[arg(long, env = AGENT_ENV, hide_env = true)]
        agent: AgentId,
        /// Check the files staged in git (`git diff --cached`), relative
        /// to the repository's top level.
        #[arg(long)]
        staged: bool,
        /// The paths to check, relative to the project root.
        paths: Vec<String>,
    },
}

/// Runs one lease command.
pub(crate) fn run(ctx: &Ctx, command: LeaseCommand) -> Result<Output> {
    let leases = ctx.chipset.leases().clone();
    let now = || ctx.state.now();
    match command {
        LeaseCommand::Acquire {
            agent,
            shared,
            ttl,
            reason,
            paths,
        } => {
            let mode = if shared {
                LeaseMode::Shared
            } else {
                LeaseMode::Exclusive
            };
            let req = LeaseRequest::new(agent, mode, &paths)
                .with_ttl(ttl.unwrap_or(DEFAULT_TTL))
                .with_reason(reason);
            let granted = leases.acquire(&req)?;
            let lease = LeaseRecord::of(&granted.lease, now());
            let view = LeaseGranted {
                lease,
                existing: granted.existing,
            };
            // A retry returns the lease as granted (its expiry included):
            // say so, since another --ttl did not change it.
            let text = if view.existing {
                format!(
                    "{}\nalready held: this lease, unchanged (renew it to move its expiry)\n",
                    view.lease.line()
                )
            } else {
                format!("{}\n", view.lease.line())
            };
            Ok(Output::new(text, output::json(&view)))
        }
        LeaseCommand::Renew { agent, token, ttl } => {
            let lease = leases.renew(&agent, token, ttl.unwrap_or(DEFAULT_TTL))?;
            let view = LeaseRenewed {
                lease: LeaseRecord::of(&lease, now()),
            };
            Ok(Output::new(
                format!("{}\n", view.lease.line()),
                output::json(&view),
            ))
        }
        LeaseCommand::Release {
            agent,
            token,
            force,
            reason,
        } => {
            let released = if force {
                leases.force_release(&agent, token, reason.as_deref().unwrap_or_default())?
            } else {
                leases.release(&agent, token)?
            };
            let (view, text) = LeaseReleased::of(token, &released, force, now());
            Ok(Output::new(text, output::json(&view)))
        }
        LeaseCommand::List { all } => {
            let at = now();
            let records: Vec<LeaseRecord> = leases
                .list()?
                .iter()
                .filter(|l| all || l.is_live(at))
                .map(|l| LeaseRecord::of(l, at))
                .collect();
            let mut text: String = records.iter().map(|r| format!("{}\n", r.line())).collect();
            if text.is_empty() {
                text = "no leases\n".to_owned();
            }
            let total = records.len();
            let view = LeaseListing {
                leases: records,
                total,
            };
            Ok(Output::new(text, output::json(&view)))
        }
        LeaseCommand::Check {
            agent,
            staged,
            paths,
        } => {
            let paths = if staged { staged_paths()? } else { paths };
            check(ctx, &leases, &agent, &paths)
        }
    }
}

fn check(ctx: &Ctx, leases: &Leases, agent: &AgentId, paths: &[String]) -> Result<Output> {
    let at = ctx.state.now();
    let blocked: Vec<LeaseBlocked> = leases
        .check(agent, paths)?
        .iter()
        .map(|b| LeaseBlocked::of(b, at))
        .collect();
    let text: String = blocked
        .iter()
        .map(|b| {
            format!(
                "{}: leased exclusively by {} until {} (lease {}{})\n",
                b.path,
                b.lease.holder,
                b.lease.expires_at,
                b.lease.token,
                if b.lease.reason.is_empty() {
                    String::new()
                } else {
                    format!(": {}", b.lease.reason)
                }
            )
        })
        .collect();
    let failure = blocked.first().map(|first| {
        CliError::refused(format!(
            "{} leased exclusively by another agent (first: `{}` by `{}`); \
             ask the holder, or wait until the lease expires",
            if blocked.len() == 1 {
                "1 path is".to_owned()
            } else {
                format!("{} paths are", blocked.len())
            },
            first.path,
            first.lease.holder
        ))
    });
    let view = LeaseCheck {
        agent: agent.to_string(),
        clear: blocked.is_empty(),
        blocked,
    };
    Ok(Output::new(text, output::json(&view)).with_failure(failure))
}

/// Returns the paths staged in git, relative to the repository's top level:
/// added, changed, deleted and both sides of a rename.
fn staged_paths() -> Result<Vec<String>> {
    let out = Command::new("git")
        .args(["diff", "--cached", "--name-only", "--no-renames", "-z"])
        .output()
        .map_err(|e| CliError::refused(format!("failed to run `git diff --cached`: {e}")))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(CliError::refused(format!(
            "`git diff --cached` failed: {}",
            err.trim()
        )));
    }
    let text = String::from_utf8(out.stdout)
        .map_err(|_| CliError::refused("a staged path is not UTF-8; it cannot be checked"))?;
    Ok(text
        .split('\0')
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect())
}
