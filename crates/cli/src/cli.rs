//! The command surface: clap types only. Every id is parsed into the
//! library's validated newtype here, so a bad id is a usage error (exit 2)
//! before anything touches the state root.

mod bus;
mod mail;
mod remind;

use std::path::PathBuf;
use std::time::Duration;

use chipset_hook::BeadId;
use chipset_store::AgentId;
use clap::{Args, Parser, Subcommand};

use crate::error::CliError;

pub(crate) use self::bus::{BusCommand, ControlCommand, PruneArgs};
pub(crate) use self::mail::{MailCommand, MailExpects, MailKind, MailSend, Since};
pub(crate) use self::remind::RemindCommand;

/// The `chipset` command line.
#[derive(Debug, Parser)]
#[command(
    name = "chipset",
    version,
    about = "Crash-safe coordination for AI agents through a shared directory",
    long_about = "Crash-safe coordination for AI agents through a shared directory: hooks, \
                  nudges, mail, events and reminders from a shell.\n\n\
                  Exit status: 0 on success; 2 for invalid arguments or ids; 1 for a refused \
                  operation or any other failure (one line on stderr says what and why; \
                  nothing is changed), or a failed write to stdout (the line says the \
                  command itself succeeded, with its short result); 3 when the outcome \
                  is unknown: the change was made but not known to be durable, and stderr \
                  names what was written (the id: retry with the same id, which is then a \
                  no-op success) or how to finish it; where it names neither, the same \
                  command again finishes it."
)]
pub(crate) struct Cli {
    /// The state root [default: $CHIPSET_ROOT if set and not empty, else
    /// the nearest `.chipset/state` in the current directory or one above
    /// it, else the `.chipset/state` of the nubos-pilot project found on
    /// the way, else `.chipset/state` in the current directory; `chipset
    /// init` creates it].
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) root: Option<PathBuf>,
    /// Keep mail in this folder, in place: any folder with the seed's
    /// layout (`inbox/`, `archive/`, `manifest.jsonl`), such as a
    /// nubos-pilot project's `.nubos-pilot/messages`; every command uses it
    /// (beside a server root only the mail commands, in it alone)
    /// [default: `mail/` under the state root; without --root or
    /// $CHIPSET_ROOT, in a nubos-pilot project at or below the state root,
    /// its `.nubos-pilot/messages`].
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) mail_dir: Option<PathBuf>,
    /// Print one JSON document on stdout instead of text (a failure too:
    /// its `error`, `class` and `kind`, on one line).
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The top-level commands, one per channel plus the operator views.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// One work item per agent: assign, activate, touch, complete, clear.
    #[command(subcommand)]
    Hook(HookCommand),
    /// Latest-wins urgent signals between agents.
    #[command(subcommand)]
    Nudge(NudgeCommand),
    /// Addressed, threaded messages with a pending-reply gate.
    #[command(subcommand)]
    Mail(MailCommand),
    /// Prioritised, de-duplicated per-agent event queues.
    #[command(subcommand)]
    Bus(BusCommand),
    /// Persistent reminders for open obligations (the seed's six kinds).
    #[command(subcommand)]
    Remind(RemindCommand),
    /// Exclusive or shared, expiring, fenced leases on project paths.
    #[command(subcommand)]
    Lease(crate::lease::LeaseCommand),
    /// The agent directory: profiles, roles and when each was last seen.
    #[command(subcommand)]
    Agent(crate::agent::AgentCommand),
    /// The work pool: items agents claim themselves onto their hook.
    #[command(subcommand)]
    Work(crate::work::WorkCommand),
    /// What needs an agent now, one line per kind of work; nothing when idle.
    Brief {
        #[command(flatten)]
        who: Who,
    },
    /// Block until something needs the agent, then print it like `brief`
    /// (nothing on timeout, exit 0).
    Wait {
        #[command(flatten)]
        who: Who,
        /// Give up after this many seconds [default: wait forever].
        #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
        timeout: Option<Duration>,
    },
    /// The witness loop: heartbeat checks and escalation.
    #[command(subcommand)]
    Witness(WitnessCommand),
    /// Create the state root (where the other commands look for it) and
    /// print the `.mcp.json` entry that serves it to an agent host.
    Init {
        /// The agent the MCP entry acts as [default: $CHIPSET_AGENT if set and not empty, else a placeholder, AGENT].
        #[arg(long, value_name = "AGENT", env = AGENT_ENV, hide_env = true)]
        agent: Option<AgentId>,
    },
    /// Copy a whole state to a PostgreSQL server or back to a directory
    /// (idempotent: run it again to resume), then check the counts.
    Migrate(crate::migrate::MigrateArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// One screen: every agent's hook, nudge, inbox and bus, and open reminders.
    Status,
    /// The live operator view: agents, requests, bus, reminders, leases,
    /// work pool (keys a r b m l w, / to search, q to quit).
    Top(TopArgs),
    /// Serve the same views as a read-only web dashboard with live updates.
    Serve(ServeArgs),
    /// Find (and with --fix repair) corrupt files, stale temps, orphaned mail.
    Doctor(DoctorArgs),
    /// Find words in every agent's mail, bus events, hook titles and
    /// reminders: ranked hits with a snippet.
    Search(crate::search::SearchArgs),
    /// Serve the agent-facing operations as MCP tools, acting as one agent
    /// (stdio, or streamable HTTP with --http).
    Mcp(McpArgs),
}

/// `chipset mcp ...`.
#[derive(Debug, Args)]
pub(crate) struct McpArgs {
    /// The agent every tool acts as (sender, inbox owner, hook holder) [default: $CHIPSET_AGENT if set and not empty].
    #[arg(long, value_name = "AGENT", env = AGENT_ENV, hide_env = true)]
    pub(crate) agent: AgentId,
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio; loopback
    /// addresses only, unless a token is given.
    #[arg(long, value_name = "ADDR")]
    pub(crate) http: Option<std::net::SocketAddr>,
    /// Require `Authorization: Bearer <token>`, the token read from this
    /// environment variable.
    #[arg(
        long,
        value_name = "VAR",
        requires = "http",
        conflicts_with = "token_file"
    )]
    pub(crate) token_env: Option<String>,
    /// Require `Authorization: Bearer <token>`, the token read from the
    /// first line of this file.
    #[arg(long, value_name = "PATH", requires = "http")]
    pub(crate) token_file: Option<PathBuf>,
}

/// `chipset top`.
#[derive(Debug, Args)]
pub(crate) struct TopArgs {
    /// The view to start on: agents, requests, bus, reminders, leases or pool.
    #[arg(long, value_name = "VIEW", value_parser = crate::top::parse_view)]
    pub(crate) view: Option<chipset_console::View>,
    /// Time between full rescans, the safety net behind the directory
    /// notifications (a number with ms, s, m, h or d).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    pub(crate) rescan: Duration,
    /// Print one frame of WIDTHxHEIGHT as text and exit (no terminal needed).
    #[arg(long, value_name = "WIDTHxHEIGHT", value_parser = crate::top::parse_size)]
    pub(crate) once: Option<(u16, u16)>,
}

/// `chipset serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Serve at http://ADDR/; loopback addresses only, unless a token is given.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8377")]
    pub(crate) addr: std::net::SocketAddr,
    /// Require the token read from this environment variable (as
    /// `Authorization: Bearer <token>`, or opened once as /?token=<token>).
    #[arg(long, value_name = "VAR", conflicts_with = "token_file")]
    pub(crate) token_env: Option<String>,
    /// Require the token read from the first line of this file.
    #[arg(long, value_name = "PATH")]
    pub(crate) token_file: Option<PathBuf>,
    /// Time between full rescans, the safety net behind the directory
    /// notifications (a number with ms, s, m, h or d).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    pub(crate) rescan: Duration,
}

/// `chipset hook ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum HookCommand {
    /// Show one agent's hook.
    Show {
        #[command(flatten)]
        who: Who,
    },
    /// List every hook file.
    List,
    /// Assign work to an empty hook (dispatcher). The agent must be named:
    /// $CHIPSET_AGENT is not used.
    Assign {
        #[command(flatten)]
        who: Target,
        /// The bead (work item) id.
        #[arg(long, value_name = "ID")]
        bead: BeadId,
        /// The work's short description.
        #[arg(long, value_name = "TEXT")]
        title: String,
        /// The dispatcher, recorded as `assigned_by`.
        #[arg(long, value_name = "DISPATCHER")]
        by: Option<AgentId>,
    },
    /// Start the pending work the hook holds now (the agent).
    Activate {
        #[command(flatten)]
        who: Who,
        #[command(flatten)]
        fence: HookFence,
    },
    /// Heartbeat on the active work the hook holds now (the agent).
    Touch {
        #[command(flatten)]
        who: Who,
        #[command(flatten)]
        fence: HookFence,
    },
    /// Finish the active work the hook holds now (the agent).
    Complete {
        #[command(flatten)]
        who: Who,
        #[command(flatten)]
        fence: HookFence,
    },
    /// Clear completed work (dispatcher); --reassign takes pending or active
    /// work away. The agent must be named: $CHIPSET_AGENT is not used.
    Clear {
        #[command(flatten)]
        who: Target,
        /// Take a pending or active hook away instead of clearing a completed one.
        #[arg(long)]
        reassign: bool,
        #[command(flatten)]
        fence: HookFence,
    },
}

/// Which assignment a hook command is meant for: without these it acts on
/// whatever the hook holds now.
#[derive(Debug, Clone, Args)]
pub(crate) struct HookFence {
    /// Act only while the hook holds this bead: work taken away (or
    /// replaced) since is refused (exit 1), and nothing changes.
    #[arg(long, value_name = "ID")]
    pub(crate) bead: Option<BeadId>,
    /// Act only on the assignment of this generation (`hook assign` and
    /// `hook show` print it): the same bead assigned again is another.
    #[arg(long, value_name = "N")]
    pub(crate) generation: Option<u64>,
}

/// `chipset nudge ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum NudgeCommand {
    /// Send a nudge (latest wins; an unprocessed abort is replaced only by an abort).
    Send {
        /// The sender [default: $CHIPSET_AGENT if set and not empty].
        #[arg(long, value_name = "A", env = AGENT_ENV, hide_env = true)]
        from: AgentId,
        /// The recipient.
        #[arg(long, value_name = "B")]
        to: AgentId,
        /// health_check, stall_warning, priority_change, abort, sync_request or
        /// nudge_response (other names are sent verbatim).
        #[arg(long = "type", value_name = "TYPE", value_parser = clap::builder::NonEmptyStringValueParser::new())]
        kind: String,
        /// Human-readable content.
        #[arg(long, value_name = "TEXT")]
        message: String,
        /// The recipient must answer (`chipset nudge respond`).
        #[arg(long)]
        requires_response: bool,
    },
    /// Show an agent's latest nudge and mark a new one processed.
    Read {
        #[command(flatten)]
        who: Who,
    },
    /// Answer the agent's latest nudge (and mark it processed).
    Respond {
        #[command(flatten)]
        who: Who,
        /// The answer.
        #[arg(long, value_name = "TEXT", default_value = "Acknowledged")]
        message: String,
    },
}

/// The environment variable that names the agent a command acts as or is
/// about, when the command line does not: an agent host sets it once.
pub(crate) const AGENT_ENV: &str = "CHIPSET_AGENT";

/// Parses the command line. An empty `$CHIPSET_AGENT` counts as unset, as
/// an empty `$CHIPSET_ROOT` does: clap would pass it to the options that
/// fall back to it as a value, an invalid agent id.
///
/// # Errors
///
/// clap's, for arguments it cannot take (and `--help`, `--version`).
pub(crate) fn parse() -> Result<Cli, clap::Error> {
    use clap::{CommandFactory, FromArgMatches};
    let mut command = Cli::command();
    if std::env::var_os(AGENT_ENV).is_some_and(|v| v.is_empty()) {
        command = without_agent_env(command);
    }
    let mut matches = command.try_get_matches()?;
    Cli::from_arg_matches_mut(&mut matches)
}

/// Returns `command` with no argument falling back to `$CHIPSET_AGENT`.
fn without_agent_env(command: clap::Command) -> clap::Command {
    command
        .mut_args(|arg| match arg.get_env() {
            Some(name) if name == AGENT_ENV => arg.env(None),
            _ => arg,
        })
        .mut_subcommands(without_agent_env)
}

/// The agent a command is about: by position (`chipset brief ann`), or, as
/// the commands with other positional arguments and nubos-pilot's scripts
/// take it, by `--agent ann`, else `$CHIPSET_AGENT`.
#[derive(Debug, Clone, Args)]
pub(crate) struct Who {
    /// The agent [default: $CHIPSET_AGENT if set and not empty].
    #[arg(value_name = "AGENT", conflicts_with = "agent_opt")]
    agent: Option<AgentId>,
    /// The agent, as an option (instead of AGENT).
    #[arg(long = "agent", id = "agent_opt", value_name = "AGENT")]
    agent_opt: Option<AgentId>,
}

impl Who {
    /// Returns the agent named either way, else the one `$CHIPSET_AGENT`
    /// names.
    ///
    /// # Errors
    ///
    /// A usage error when none is named, or `$CHIPSET_AGENT` is not a valid
    /// agent id.
    pub(crate) fn agent(self) -> crate::error::Result<AgentId> {
        agent_or_env(self.agent.or(self.agent_opt))
    }
}

/// The agent whose hook a dispatcher's command changes (`hook assign`,
/// `hook clear`): by position or by `--agent`, never `$CHIPSET_AGENT`, so
/// a target left out never falls back to the caller itself.
#[derive(Debug, Clone, Args)]
pub(crate) struct Target {
    /// The agent whose hook this changes ($CHIPSET_AGENT is not used).
    #[arg(value_name = "AGENT", conflicts_with = "agent_opt")]
    agent: Option<AgentId>,
    /// The agent, as an option (instead of AGENT).
    #[arg(long = "agent", id = "agent_opt", value_name = "AGENT")]
    agent_opt: Option<AgentId>,
}

impl Target {
    /// Returns the agent the command line names.
    ///
    /// # Errors
    ///
    /// A usage error when the command line names none.
    pub(crate) fn agent(self) -> crate::error::Result<AgentId> {
        self.agent.or(self.agent_opt).ok_or_else(|| {
            CliError::usage("name the agent whose hook this changes: AGENT or --agent AGENT")
        })
    }
}

/// Returns `named`, else the agent `$CHIPSET_AGENT` names.
///
/// # Errors
///
/// A usage error when neither names one, or `$CHIPSET_AGENT` is not a
/// valid agent id.
pub(crate) fn agent_or_env(named: Option<AgentId>) -> crate::error::Result<AgentId> {
    if let Some(agent) = named {
        return Ok(agent);
    }
    match std::env::var(AGENT_ENV) {
        Ok(text) if !text.is_empty() => {
            AgentId::new(text).map_err(|e| CliError::usage(format!("invalid ${AGENT_ENV}: {e}")))
        }
        _ => Err(CliError::usage(format!(
            "name the agent: AGENT, --agent AGENT, or ${AGENT_ENV}"
        ))),
    }
}

/// `chipset witness ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum WitnessCommand {
    /// Run witness ticks until SIGTERM or SIGINT, then exit 0; prints each action.
    Run {
        /// Time between ticks: a number with ms, s, m, h or d (bare numbers are seconds).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        every: Duration,
        /// The witness's own agent id (it sends the nudges).
        #[arg(long, value_name = "A", default_value = "witness")]
        me: AgentId,
        /// The dispatcher that receives escalations.
        #[arg(long, value_name = "D", default_value = "mayor")]
        dispatcher: AgentId,
        /// How long a pending or active hook may go untouched before the
        /// witness checks on its agent [default: 5m].
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        stall_after: Option<Duration>,
        /// How long the witness waits for a sign of life after each nudge
        /// [default: 60s].
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        nudge_interval: Option<Duration>,
        /// No incident opens this soon after the work was assigned, nor any
        /// step this soon after the witness starts [default: 60s].
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        grace: Option<Duration>,
    },
}

/// `chipset doctor [--fix]`.
#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    /// Repair what can be repaired (quarantine, never delete; sweep stale temps).
    #[arg(long)]
    pub(crate) fix: bool,
}

/// Parses `500ms`, `30s`, `5m`, `1h`, `7d` or a bare number of seconds; never zero.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (number, unit) = match t.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let scale = match unit {
        "ms" => 0.001,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        _ => return Err(format!("unknown unit in {text:?}: use ms, s, m, h or d")),
    };
    let n: f64 = number
        .parse()
        .map_err(|_| format!("not a duration: {text:?} (such as 30s, 5m, 500ms)"))?;
    match Duration::try_from_secs_f64(n * scale) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err(format!("{text:?} is zero: give a duration above zero")),
        Err(_) => Err(format!(
            "not a usable duration: {text:?} (negative or too long)"
        )),
    }
}

pub(crate) fn parse_seconds(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .parse()
        .map_err(|_| format!("not a number of seconds: {text:?}"))?;
    Duration::try_from_secs_f64(secs)
        .map_err(|_| format!("not a usable number of seconds: {text:?}"))
}

impl Command {
    /// Returns true for commands that only look at the state: they need an
    /// existing root, since a mistyped root must not read as an empty,
    /// healthy one (`mail pending` on it would open a commit gate).
    pub(crate) fn reads_only(&self) -> bool {
        match self {
            Command::Hook(c) => matches!(c, HookCommand::Show { .. } | HookCommand::List),
            Command::Nudge(c) => matches!(c, NudgeCommand::Read { .. }),
            Command::Mail(c) => matches!(
                c,
                MailCommand::Inbox { .. }
                    | MailCommand::Thread { .. }
                    | MailCommand::Pending { .. }
                    | MailCommand::Doctor(_)
            ),
            Command::Bus(c) => matches!(
                c,
                BusCommand::Pending { .. }
                    | BusCommand::Wait { .. }
                    | BusCommand::Presence { .. }
                    // A prune of a mistyped root must not pass as "nothing to prune".
                    | BusCommand::Prune(_)
            ),
            Command::Remind(c) => matches!(
                c,
                RemindCommand::List { .. }
                    | RemindCommand::History { .. }
                    | RemindCommand::Metrics { .. }
            ),
            // A check on a mistyped root must not pass as "nothing leased".
            // The index under the root is a cache it may write; a mistyped
            // root must not search as an empty one.
            Command::Search(_) => true,
            Command::Lease(c) => matches!(
                c,
                crate::lease::LeaseCommand::List { .. } | crate::lease::LeaseCommand::Check { .. }
            ),
            // The witness writes (incidents, nudges), but only into a root
            // that has agents to watch: a mistyped root is refused.
            Command::Witness(_) => true,
            Command::Agent(c) => !matches!(c, crate::agent::AgentCommand::Register { .. }),
            // A listing on a mistyped root must not pass as an empty pool.
            Command::Work(c) => matches!(
                c,
                crate::work::WorkCommand::Ready { .. } | crate::work::WorkCommand::List { .. }
            ),
            Command::Completions { .. } | Command::Init { .. } => false,
            // Handled before any root is opened; its source must exist.
            Command::Migrate(_) => true,
            Command::Brief { .. } | Command::Wait { .. } => true,
            // The tools read as well as write (`mail_pending` is a commit
            // gate): a mistyped root must not serve as an empty one.
            Command::Status | Command::Doctor(_) | Command::Mcp(_) => true,
            // Views: a mistyped root must not show as an empty, idle team.
            Command::Top(_) | Command::Serve(_) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn seconds_parse_and_refuse() {
        assert_eq!(parse_seconds("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_seconds("0"), Ok(Duration::ZERO));
        assert!(parse_seconds("-1").is_err());
        assert!(parse_seconds("soon").is_err());
        assert!(parse_seconds("inf").is_err());
    }

    #[test]
    fn durations_parse_and_refuse() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        let zero = parse_duration("0s").unwrap_err();
        assert!(zero.contains("above zero"), "{zero}");
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert!(parse_duration("5w").is_err());
        assert!(parse_duration("soon").is_err());
        let negative = parse_duration("-1s").unwrap_err();
        assert!(negative.contains("negative"), "{negative}");
    }
}
