//! The command surface: clap types only. Every id is parsed into the
//! library's validated newtype here, so a bad id is a usage error (exit 2)
//! before anything touches the state root.

use std::path::PathBuf;
use std::time::Duration;

use chipset_bus::EventId;
use chipset_hook::BeadId;
use chipset_mail::MessageId;
use chipset_nudge::ReminderId;
use chipset_store::{AgentId, TaskId, Timestamp};
use clap::{Args, Parser, Subcommand, ValueEnum};

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
                  nothing is changed), a failed write to stdout included; 3 when the outcome \
                  is unknown: the change was made but not known to be durable, and stderr \
                  names what was written (the id): retry with the same id, which is then a \
                  no-op success."
)]
pub(crate) struct Cli {
    /// The state root [default: $CHIPSET_ROOT if set and not empty, else
    /// `.chipset/state` under the current directory].
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) root: Option<PathBuf>,
    /// Run the mail commands on this folder in place: any folder with the
    /// seed's layout (`inbox/`, `archive/`, `manifest.jsonl`), such as a
    /// nubos-pilot project's `.nubos-pilot/messages` [default: `mail/` under
    /// the state root; without --root or $CHIPSET_ROOT, the nearest
    /// `.chipset/state` or `.nubos-pilot/messages` up from the current
    /// directory].
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) mail_dir: Option<PathBuf>,
    /// Print one JSON document on stdout instead of text.
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
    /// What needs an agent now, one line per kind of work; nothing when idle.
    Brief {
        /// The agent.
        agent: AgentId,
    },
    /// Block until something needs the agent, then print it like `brief`
    /// (nothing on timeout, exit 0).
    Wait {
        /// The agent.
        agent: AgentId,
        /// Give up after this many seconds [default: wait forever].
        #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
        timeout: Option<Duration>,
    },
    /// The witness loop: heartbeat checks and escalation.
    #[command(subcommand)]
    Witness(WitnessCommand),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// One screen: every agent's hook, nudge, inbox and bus, and open reminders.
    Status,
    /// Find (and with --fix repair) corrupt files, stale temps, orphaned mail.
    Doctor(DoctorArgs),
    /// Serve the agent-facing operations as MCP tools, acting as one agent
    /// (stdio, or streamable HTTP with --http).
    Mcp(McpArgs),
}

/// `chipset mcp ...`.
#[derive(Debug, Args)]
pub(crate) struct McpArgs {
    /// The agent every tool acts as (sender, inbox owner, hook holder).
    #[arg(long, value_name = "AGENT")]
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

/// `chipset hook ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum HookCommand {
    /// Show one agent's hook.
    Show {
        /// The agent.
        agent: AgentId,
    },
    /// List every hook file.
    List,
    /// Assign work to an empty hook (dispatcher).
    Assign {
        /// The agent.
        agent: AgentId,
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
        /// The agent.
        agent: AgentId,
    },
    /// Heartbeat on the active work the hook holds now (the agent).
    Touch {
        /// The agent.
        agent: AgentId,
    },
    /// Finish the active work the hook holds now (the agent).
    Complete {
        /// The agent.
        agent: AgentId,
    },
    /// Clear completed work (dispatcher); --reassign takes pending or active work away.
    Clear {
        /// The agent.
        agent: AgentId,
        /// Take a pending or active hook away instead of clearing a completed one.
        #[arg(long)]
        reassign: bool,
    },
}

/// `chipset nudge ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum NudgeCommand {
    /// Send a nudge (latest wins; an unprocessed abort is replaced only by an abort).
    Send {
        /// The sender.
        #[arg(long, value_name = "A")]
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
        /// The agent.
        agent: AgentId,
    },
    /// Answer the agent's latest nudge (and mark it processed).
    Respond {
        /// The agent answering.
        agent: AgentId,
        /// The answer.
        #[arg(long, value_name = "TEXT", default_value = "Acknowledged")]
        message: String,
    },
}

/// `chipset mail ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum MailCommand {
    /// Send a message; prints the new id.
    Send(MailSend),
    /// List an agent's inbox.
    Inbox {
        /// The agent.
        #[arg(required_unless_present = "agent_opt", conflicts_with = "agent_opt")]
        agent: Option<AgentId>,
        /// The agent (as nubos-pilot's `messages-inbox --agent A` takes it).
        #[arg(long = "agent", id = "agent_opt", value_name = "A")]
        agent_opt: Option<AgentId>,
        /// Only this kind.
        #[arg(long, value_name = "K")]
        kind: Option<MailKind>,
        /// Only this task's messages.
        #[arg(long, visible_alias = "phase", value_name = "T")]
        task: Option<TaskId>,
        /// Only messages after this one: a message id (ids sort in send
        /// order) or an RFC 3339 time (created strictly after it).
        #[arg(long, value_name = "ID|TIME", value_parser = parse_since)]
        since: Option<Since>,
    },
    /// Archive a message (a request only after it was answered).
    Archive {
        /// The message id.
        #[arg(required_unless_present = "id_opt", conflicts_with = "id_opt")]
        id: Option<MessageId>,
        /// The message id (as nubos-pilot's `messages-archive --id ID` takes it).
        #[arg(long = "id", id = "id_opt", value_name = "ID")]
        id_opt: Option<MessageId>,
    },
    /// Show the thread a message belongs to, in causal order.
    Thread {
        /// The message id.
        #[arg(required_unless_present = "id_opt", conflicts_with = "id_opt")]
        id: Option<MessageId>,
        /// The message id (as `--id ID`).
        #[arg(long = "id", id = "id_opt", value_name = "ID")]
        id_opt: Option<MessageId>,
    },
    /// List a task's requests still waiting for a reply (the commit gate).
    Pending {
        /// The task.
        task: TaskId,
    },
    /// Move a committed task's messages into archive/by-task/.
    Sweep {
        /// The task.
        task: TaskId,
    },
    /// Find (and with --fix repair) problems in the mail folder only.
    Doctor(DoctorArgs),
}

/// Where `mail inbox --since` starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Since {
    /// Messages whose id sorts after this one.
    Id(MessageId),
    /// Messages created strictly after this instant.
    Time(Timestamp),
}

fn parse_since(text: &str) -> Result<Since, String> {
    if let Ok(t) = Timestamp::parse(text) {
        return Ok(Since::Time(t));
    }
    MessageId::new(text)
        .map(Since::Id)
        .map_err(|e| format!("neither a message id nor an RFC 3339 time: {e}"))
}

/// `chipset mail send ...`.
#[derive(Debug, Args)]
pub(crate) struct MailSend {
    /// The sender.
    #[arg(long, value_name = "A")]
    pub(crate) from: AgentId,
    /// The addressee.
    #[arg(long, value_name = "B")]
    pub(crate) to: AgentId,
    /// request (expects a reply), response (answers --in-reply-to) or notify.
    #[arg(long, value_name = "KIND")]
    pub(crate) kind: MailKind,
    /// A kebab-case topic.
    #[arg(long, value_name = "S")]
    pub(crate) subject: String,
    /// The text; `-` reads it from standard input.
    #[arg(long, value_name = "TEXT", required_unless_present = "body_file")]
    pub(crate) body: Option<String>,
    /// Read the text from this file.
    #[arg(long, value_name = "PATH", conflicts_with = "body")]
    pub(crate) body_file: Option<PathBuf>,
    /// The task (required for request and notify; a response takes its request's).
    #[arg(long, visible_alias = "phase", value_name = "T")]
    pub(crate) task: Option<TaskId>,
    /// Accepted for nubos-pilot's scripts: a request expects a reply anyway
    /// (refused with the other kinds, which cannot).
    #[arg(long)]
    pub(crate) expects_reply: bool,
    /// The round within the task, 0 to 2^53 [default: none, written `null`].
    #[arg(long, value_name = "N")]
    pub(crate) round: Option<u64>,
    /// The message this one replies to (required for a response).
    #[arg(long, value_name = "ID")]
    pub(crate) in_reply_to: Option<MessageId>,
    /// urgent, normal or low [default: normal].
    #[arg(long, value_name = "P")]
    pub(crate) priority: Option<MailPriority>,
    /// The message's id (`{unix-ms}-{uuid-v4}`), to make a retry safe:
    /// sending again with the same id and content (every field but the
    /// time) prints the first delivery's id and writes no second copy,
    /// wherever the message went since; other content is refused.
    #[arg(long, value_name = "ID")]
    pub(crate) id: Option<MessageId>,
}

/// A mail kind, as typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum MailKind {
    /// Expects a reply.
    Request,
    /// Answers a request.
    Response,
    /// Expects no reply.
    Notify,
}

impl From<MailKind> for chipset_mail::Kind {
    fn from(k: MailKind) -> Self {
        match k {
            MailKind::Request => chipset_mail::Kind::Request,
            MailKind::Response => chipset_mail::Kind::Response,
            MailKind::Notify => chipset_mail::Kind::Notify,
        }
    }
}

/// A mail priority, as typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum MailPriority {
    /// Before anything else.
    Urgent,
    /// The default.
    Normal,
    /// Whenever convenient.
    Low,
}

impl From<MailPriority> for chipset_mail::MailPriority {
    fn from(p: MailPriority) -> Self {
        match p {
            MailPriority::Urgent => chipset_mail::MailPriority::Urgent,
            MailPriority::Normal => chipset_mail::MailPriority::Normal,
            MailPriority::Low => chipset_mail::MailPriority::Low,
        }
    }
}

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
        /// The agent.
        agent: AgentId,
    },
    /// Acknowledge an event.
    Ack {
        /// The agent.
        agent: AgentId,
        /// The event id.
        event_id: EventId,
    },
    /// Block until the agent has pending events, then list them (nothing on timeout).
    Wait {
        /// The agent.
        agent: AgentId,
        /// Give up after this many seconds (exit 0, empty output) [default: wait forever].
        #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
        timeout: Option<Duration>,
    },
    /// Start a session (restart semantics): make the queue, list every
    /// pending event in processing order, register presence.
    Start {
        /// The agent.
        agent: AgentId,
    },
    /// Show an agent's presence: live, stale, absent or unreadable.
    Presence {
        /// The agent.
        agent: AgentId,
    },
    /// The control inbox: register or unregister resources to watch.
    #[command(subcommand)]
    Control(ControlCommand),
    /// List the pending events due for a reminder now, by the priority
    /// schedule (timed reminders are recorded, so they are not repeated early).
    Nag {
        /// The agent.
        agent: AgentId,
        /// A regular poll cycle (poll rules fire too) rather than a natural pause.
        #[arg(long)]
        poll: bool,
    },
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
    /// The agent.
    pub(crate) agent: AgentId,
    /// What sort of resource (chat, queue, hub, ...).
    #[arg(long, value_name = "K")]
    pub(crate) kind: String,
    /// Where it is (a path, an agent id, ...).
    #[arg(long, value_name = "T")]
    pub(crate) target: String,
}

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

/// `chipset witness ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum WitnessCommand {
    /// Run witness ticks until SIGTERM or SIGINT, then exit 0; prints each action.
    Run {
        /// Time between ticks: a number with ms, s, m or h (bare numbers are seconds).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        every: Duration,
        /// The witness's own agent id (it sends the nudges).
        #[arg(long, value_name = "A", default_value = "witness")]
        me: AgentId,
        /// The dispatcher that receives escalations.
        #[arg(long, value_name = "D", default_value = "mayor")]
        dispatcher: AgentId,
    },
}

/// `chipset doctor [--fix]`.
#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    /// Repair what can be repaired (quarantine, never delete; sweep stale temps).
    #[arg(long)]
    pub(crate) fix: bool,
}

fn parse_json(text: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))
}

fn parse_time(text: &str) -> Result<chipset_store::Timestamp, String> {
    chipset_store::Timestamp::parse(text).map_err(|e| e.to_string())
}

/// Parses `500ms`, `30s`, `5m`, `1h` or a bare number of seconds; never zero.
fn parse_duration(text: &str) -> Result<Duration, String> {
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
        _ => return Err(format!("unknown unit in {text:?}: use ms, s, m or h")),
    };
    let n: f64 = number
        .parse()
        .map_err(|_| format!("not a duration: {text:?} (such as 30s, 5m, 500ms)"))?;
    match Duration::try_from_secs_f64(n * scale) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err(format!("not a usable duration: {text:?}")),
    }
}

fn parse_seconds(text: &str) -> Result<Duration, String> {
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
                BusCommand::Pending { .. } | BusCommand::Wait { .. } | BusCommand::Presence { .. }
            ),
            Command::Remind(c) => matches!(
                c,
                RemindCommand::List { .. }
                    | RemindCommand::History { .. }
                    | RemindCommand::Metrics { .. }
            ),
            // The witness writes (incidents, nudges), but only into a root
            // that has agents to watch: a mistyped root is refused.
            Command::Witness(_) => true,
            Command::Completions { .. } => false,
            Command::Brief { .. } | Command::Wait { .. } => true,
            // The tools read as well as write (`mail_pending` is a commit
            // gate): a mistyped root must not serve as an empty one.
            Command::Status | Command::Doctor(_) | Command::Mcp(_) => true,
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
    fn since_is_a_time_or_an_id() {
        assert_eq!(
            parse_since("2026-11-23T04:36:10.001Z"),
            Ok(Since::Time(Timestamp::from_unix_ms(1_795_408_570_001)))
        );
        assert_eq!(
            parse_since("1795408570001-af0bcc55-dbc3-4b45-a04f-312f26ea7034"),
            Ok(Since::Id(
                MessageId::new("1795408570001-af0bcc55-dbc3-4b45-a04f-312f26ea7034").unwrap()
            ))
        );
        assert!(parse_since("../x").is_err());
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
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("5d").is_err());
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-1s").is_err());
    }
}
