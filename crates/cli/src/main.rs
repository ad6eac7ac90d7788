//! The `chipset` command line: every channel from a shell, for agents and
//! operators.
//!
//! A thin shell over the library crates (`chipset-store`, `chipset-hook`,
//! `chipset-nudge`, `chipset-mail`, `chipset-bus`, and `chipset-loop` for
//! `witness run`, `brief` and `wait`): it parses arguments into the
//! libraries' validated types, calls one library operation (or a few, for
//! `status` and `doctor`), and prints the result. Every rule lives in the
//! libraries.
//!
//! ```text
//! chipset [--root DIR] [--json] hook show|list|assign|activate|touch|complete|clear ...
//! chipset [--root DIR] [--json] nudge send|read|respond ...
//! chipset [--root DIR] [--mail-dir DIR] [--json] mail send|inbox|archive|thread|pending|sweep|doctor ...
//! chipset [--root DIR] [--json] bus publish|pending|ack|wait|start|presence|nag ...
//! chipset [--root DIR] [--json] bus control register|unregister ...
//! chipset [--root DIR] [--json] remind open|list|resolve|snooze|clear|history|metrics ...
//! chipset [--root DIR] [--json] agent register|list|whois ...
//! chipset [--root DIR] [--json] witness run --every DURATION
//! chipset completions SHELL
//! chipset [--root DIR] [--json] init [--agent AGENT]
//! chipset [--json] migrate --to DIR|URL [--from DIR|URL] [--skip CHANNEL]...
//! chipset [--root DIR] [--json] brief AGENT
//! chipset [--root DIR] [--json] wait AGENT [--timeout SECONDS]
//! chipset [--root DIR] [--json] status
//! chipset [--root DIR] [--json] doctor [--fix]
//! chipset [--root DIR] [--json] search WORDS... [--from A] [--to B] [--task T] [--kind K] [--channel C] [--since TIME|AGE] [--limit N]
//! chipset [--root DIR] mcp --agent AGENT [--http ADDR] [--token-env VAR | --token-file PATH]
//! chipset [--root DIR] top [--view VIEW] [--rescan DURATION] [--once WIDTHxHEIGHT]
//! chipset [--root DIR] serve [--addr ADDR] [--token-env VAR | --token-file PATH]
//! ```
//!
//! # The state root
//!
//! `--root DIR`, else the `CHIPSET_ROOT` environment variable (when set and
//! not empty), else the nearest `.chipset/state` found walking up from the
//! current directory, else, in a nubos-pilot project (a `.nubos-pilot`
//! folder found on the way, as nubos-pilot finds its own), the project's
//! `.chipset/state`, else `.chipset/state` under the current directory.
//! `chipset init` creates it there (or where `--root` says) and prints the
//! `.mcp.json` entry that serves it to an agent host; the read-only
//! commands' error for a missing root says so. `chipset mcp` on stdio sends
//! that error to its client as the answer to `initialize`.
//!
//! Mail is kept in `mail/` under the root, or in any folder with the
//! seed's layout given as `--mail-dir DIR` (for example a nubos-pilot
//! project's `.nubos-pilot/messages`); without `--mail-dir`, `--root` or
//! `CHIPSET_ROOT`, in a nubos-pilot project at or below the state root it
//! is the project's `.nubos-pilot/messages`, made on first use as
//! nubos-pilot makes it. The
//! folder is every command's mail (`mail`, `brief`, `wait`, `status`,
//! `search`, `doctor`, `top`, `serve`, `mcp`, a forced lease release's
//! notice), so chipset and nubos-pilot share one mail store and one commit
//! gate. The mail commands need no state root there: with no
//! `.chipset/state` found (or a server root with `--mail-dir`) they run in
//! the folder alone, all but group mail (its agents and lists are in the
//! root's directory). Any other command with `--mail-dir` and a server
//! root is a usage error: a server keeps its own mail. Arguments that
//! nubos-pilot's `messages-*` scripts pass work as they do there: `--phase`
//! (alias of `--task`), `--expects-reply`, `--body-file PATH`, `--body -`
//! (stdin), `inbox --agent A`, `inbox --since ID|TIME`, `archive --id ID`,
//! `thread --id ID`. A command that writes creates it if missing; a command
//! that only reads (`show`, `list`, `inbox`, `thread`, `pending`, `read`,
//! `wait`, `brief`, `status`, `doctor`) refuses a missing root with exit
//! status 1, so a mistyped root never reads as an empty, healthy one (a
//! nubos-pilot project's `messages/` not made yet reads as empty: its
//! project folder is there).
//!
//! # The agent
//!
//! A command about one agent names it by position (`chipset brief ann`) or
//! as `--agent ann`; one acting as an agent names it as `--agent` or, to
//! send, `--from`. Where the command line leaves it out, the
//! `CHIPSET_AGENT` environment variable (when set and not empty) names it,
//! so an agent host sets it once for every command its agent runs. A
//! dispatcher's command on another agent's hook (`hook assign`, `hook
//! clear`) never falls back to it: its target must be named.
//!
//! # Output
//!
//! Text output is short and aligned, coloured as `anstream` decides for
//! stdout: only on a terminal, never with `NO_COLOR` set, always with
//! `CLICOLOR_FORCE` set. With `--json`, stdout holds exactly one JSON
//! document per command (library records as they are on disk, in their
//! serde form, inside the views `chipset_mcp::view` shares with the MCP
//! tools). A command that fails prints the result it still has (a
//! listing with unreadable files), else its failure as one line:
//! `{"error", "class", "kind"}`, the MCP tools' `Refusal`.
//! `mail send` and `bus publish` print the new id alone, so scripts can
//! capture it; `bus publish --id ID` takes a caller-chosen id, so that a
//! retry is recognised (same id and content: the first delivery, exit 0;
//! other content: refused, exit 1).
//!
//! # Exit status
//!
//! - `0`: success, including outcomes that are not errors in the libraries:
//!   a duplicate `bus publish` (nothing published; a note on stderr), an
//!   acknowledgement or archive that was done already, a `bus wait` that
//!   timed out (no output, or `[]` with `--json`), a `wait` that timed out
//!   (no output, `"timed_out": true` with `--json`), a `brief` with nothing
//!   to say (no output at all).
//! - `2`: invalid arguments or ids (a malformed agent, task, bead, message,
//!   event or reminder id; a subject that is not kebab-case; an unregistered
//!   reminder kind; a payload that is not JSON).
//! - `1`: a refused operation (a transition the hook's state does not allow,
//!   an archive without reply, a nudge held behind a pending abort, an id
//!   that does not exist, a corrupt file where a clean one is needed) or any
//!   other failure; also `doctor` when problems remain unfixed, listings
//!   that found unreadable files, and a failed write to stdout (the line on
//!   stderr says the command itself succeeded and repeats a short result
//!   such as the new ids, so they are not lost). A
//!   closed pipe is not a failure: `chipset mail inbox a | head -1` and
//!   `chipset completions bash | head -1` exit 0.
//! - `3`: the outcome is unknown: the change was made (it may be visible)
//!   but making it durable, or finishing it, failed. The line on stderr
//!   names what was written (the event id, the file) and says what to run
//!   again: the same command with the same id (`bus publish --id`), which
//!   is then a no-op success, or the same command (`mail sweep`, `bus
//!   control`, `migrate`), which finishes the job. A line that names
//!   neither (`hook assign`, `lease acquire`, `agent register`, …: the
//!   store's "the change to … is not known to be durable") means the same command again,
//!   which finds the change made and finishes it.
//!
//! `witness run` runs until SIGTERM or SIGINT and then exits 0, after the
//! tick in progress; with `--json` it prints one JSON object per line (each
//! action, then a summary, or the failure that ended it); it and `serve`
//! are the commands whose stdout is a stream.
//!
//! Every failure prints one line on stderr, `chipset: error: ...`, saying
//! what was refused and why; a refused operation changes nothing.

#![forbid(unsafe_code)]
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "the command line talks to the terminal"
)]

mod agent;
mod attention;
mod bus;
mod cli;
mod doctor;
mod error;
mod hook;
mod init;
mod lease;
mod mail;
mod mcp;
mod migrate;
mod nudge;
mod output;
mod remind;
mod search;
mod serve;
mod status;
mod top;
mod view;
mod witness;
mod work;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use chipset::{Chipset, Root, ServerOptions, ServerUrl};
use chipset_store::{StateDir, StateOptions};

use crate::cli::{Cli, Command};
use crate::error::{CliError, Result};
use crate::output::{Output, Paint};

/// The environment variable naming the state root when `--root` is not given.
const ROOT_ENV: &str = "CHIPSET_ROOT";

/// The folder that marks a nubos-pilot project, as nubos-pilot finds its
/// project root (the nearest one up from the current directory).
pub(crate) const NUBOS_PROJECT: &str = ".nubos-pilot";

/// Where a nubos-pilot project keeps its mail folder (seed 002's layout),
/// under [`NUBOS_PROJECT`].
pub(crate) const NUBOS_MESSAGES: &str = "messages";

/// What every command runs with: the opened state root and the colour choice.
#[derive(Debug)]
pub(crate) struct Ctx {
    /// The state root, or for the mail commands on a mail folder, that
    /// folder; on a server, its local folder (caches only).
    pub(crate) state: StateDir,
    /// Every channel, on the directory or the server: commands take their
    /// channel from here.
    pub(crate) chipset: Chipset,
    /// True when `state` is a mail folder (`--mail-dir`, or a
    /// `.nubos-pilot/messages` found) rather than a state root.
    pub(crate) mail_folder: bool,
    /// Whether text output is coloured.
    pub(crate) paint: Paint,
}

fn main() -> ExitCode {
    let cli = match cli::parse() {
        Ok(cli) => cli,
        Err(e) => return usage(&e),
    };
    // `mcp` speaks MCP on stdout (stdio) and prints nothing else there.
    let json = cli.json && !matches!(cli.command, Command::Mcp(_));
    if let Command::Completions { shell } = cli.command {
        // No state root is opened: completions need none. The script is
        // built in memory and printed as any output is, so a closed pipe
        // (`chipset completions bash | head -1`) is not a panic.
        let mut command = <Cli as clap::CommandFactory>::command();
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut command, "chipset", &mut script);
        let text = String::from_utf8_lossy(&script).into_owned();
        return Output::new(text, serde_json::Value::Null).emit(false);
    }
    if let Command::Migrate(args) = &cli.command {
        return match migrate::run(&cli, args) {
            Ok(out) => out.emit(json),
            Err(e) => output::fail(&e, json),
        };
    }
    if let Command::Init { agent } = &cli.command {
        return match init::run(&cli, agent.as_ref()) {
            Ok(out) => out.emit(json),
            Err(e) => output::fail(&e, json),
        };
    }
    match run(cli) {
        Ok(out) => out.emit(json),
        Err(e) => output::fail(&e, json),
    }
}

/// The root `--root` or `$CHIPSET_ROOT` names, if either does. The
/// variable is read here rather than by clap, so that an empty one means
/// unset.
pub(crate) fn explicit_root(cli: &Cli) -> Option<PathBuf> {
    cli.root.clone().or_else(|| {
        std::env::var_os(ROOT_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    })
}

/// Where a command runs: found by [`locate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Place {
    /// The state root; `None` for the mail commands on a mail folder alone
    /// (no state root given or found), which run in it in place.
    pub(crate) root: Option<PathBuf>,
    /// The mail folder of the seed's layout kept outside the state root
    /// (`--mail-dir`, or a nubos-pilot project's `.nubos-pilot/messages`).
    pub(crate) mail: Option<PathBuf>,
    /// True when the mail folder was found by the walk up (a nubos-pilot
    /// project's, made on first use), not named by `--mail-dir`.
    pub(crate) found_project: bool,
}

/// Returns where the command runs.
///
/// The state root: `--root`, else `$CHIPSET_ROOT`, else the nearest
/// `.chipset/state` up from the current directory, else, in a nubos-pilot
/// project (a `.nubos-pilot` folder found on the way, as nubos-pilot finds
/// its project), the project's `.chipset/state`, else `.chipset/state`
/// under the current directory.
///
/// The mail folder: `--mail-dir`; else, without `--root` or
/// `$CHIPSET_ROOT`, the `.nubos-pilot/messages` of a nubos-pilot project
/// at or below the state root found (with or without its `messages` yet),
/// so that every command shares the project's mail. The mail commands on
/// a mail folder with no state root (none found, or a server's) run in it
/// alone.
pub(crate) fn locate(cli: &Cli) -> Result<Place> {
    let mail_command = matches!(cli.command, Command::Mail(_));
    let explicit = explicit_root(cli);
    if let Some(dir) = &cli.mail_dir {
        let root = match explicit {
            // A server keeps its own mail: the mail commands run in the
            // folder alone, as they would with no root.
            Some(root) if mail_command && matches!(Root::parse(&root), Root::Server(_)) => None,
            Some(root) => Some(root),
            None => {
                let walked = walk()?;
                match walked.existing {
                    None if mail_command => None,
                    _ => Some(walked.root()),
                }
            }
        };
        return Ok(Place {
            root,
            mail: Some(dir.clone()),
            found_project: false,
        });
    }
    if let Some(root) = explicit {
        return Ok(Place {
            root: Some(root),
            mail: None,
            found_project: false,
        });
    }
    let walked = walk()?;
    let mail = walked
        .project
        .as_ref()
        .map(|p| p.join(NUBOS_PROJECT).join(NUBOS_MESSAGES));
    // A project not set up for chipset yet: its mail alone for the mail
    // commands; the state root it would have for the others.
    let root = match (&mail, &walked.existing) {
        (Some(_), None) if mail_command => None,
        _ => Some(walked.root()),
    };
    Ok(Place {
        root,
        found_project: mail.is_some(),
        mail,
    })
}

/// What the walk up from the current directory found.
struct Walked {
    /// The nearest existing `.chipset/state`.
    existing: Option<PathBuf>,
    /// The nearest nubos-pilot project at or below it (the folder holding
    /// `.nubos-pilot`).
    project: Option<PathBuf>,
}

impl Walked {
    /// The state root: the one found, else the project's, else
    /// `.chipset/state` under the current directory.
    fn root(&self) -> PathBuf {
        match (&self.existing, &self.project) {
            (Some(state), _) => state.clone(),
            (None, Some(project)) => project.join(StateDir::DEFAULT_ROOT),
            (None, None) => PathBuf::from(StateDir::DEFAULT_ROOT),
        }
    }
}

/// Walks up from the current directory to the nearest `.chipset/state`,
/// noting the nearest nubos-pilot project on the way (or at its level).
fn walk() -> Result<Walked> {
    let mut walked = Walked {
        existing: None,
        project: None,
    };
    if let Ok(cwd) = std::env::current_dir() {
        for dir in cwd.ancestors() {
            // nubos-pilot writes its mail under the project it finds by
            // this folder; one found without `messages/` yet is its mail
            // folder all the same, or the two programs would part ways.
            if walked.project.is_none() && is_dir(&dir.join(NUBOS_PROJECT))? {
                walked.project = Some(dir.to_owned());
            }
            let state = dir.join(StateDir::DEFAULT_ROOT);
            if is_dir(&state)? {
                walked.existing = Some(state);
                break;
            }
        }
    }
    Ok(walked)
}

/// Whether `path` is a directory. A folder that cannot be looked at is an
/// error: "unreadable" is not "absent", and looking past it in a walk
/// could pick another root.
pub(crate) fn is_dir(path: &Path) -> Result<bool> {
    Ok(StateDir::stat_outside(path)?.is_some_and(|s| s.is_dir()))
}

fn run(cli: Cli) -> Result<Output> {
    let json = cli.json;
    let place = locate(&cli)?;
    let chipset = match (&place.root, &place.mail) {
        (Some(root), mail) => match Root::parse(root) {
            Root::Server(url) if mail.is_none() => open_server(&cli, &url)?,
            Root::Server(url) => {
                return Err(CliError::usage(format!(
                    "--mail-dir keeps mail in a folder, and the root (--root or {ROOT_ENV}) \
                     is the server {url}, which keeps its own mail: leave one out"
                )));
            }
            _ => {
                // Both are checked before either is made: a refusal
                // writes nothing.
                let folder = mail.as_deref();
                check_dir(&cli, root, false, false)?;
                if let Some(folder) = folder {
                    check_dir(&cli, folder, true, place.found_project)?;
                }
                let state = open_dir(&cli, root, false, false)?;
                let mut config = chipset::Config::default();
                if let Some(folder) = folder {
                    config.mail_folder = Some(open_dir(&cli, folder, true, place.found_project)?);
                }
                Chipset::with_config(state, config)
            }
        },
        (None, Some(folder)) => {
            if let Command::Mail(command) = &cli.command {
                mail::refuse_group_alone(command)?;
            }
            check_dir(&cli, folder, true, place.found_project)?;
            Chipset::from_state(open_dir(&cli, folder, true, place.found_project)?)
        }
        (None, None) => unreachable!("locate gives a state root or a mail folder"),
    };
    let ctx = Ctx {
        state: chipset.state().clone(),
        chipset,
        mail_folder: place.root.is_none(),
        paint: Paint::detect(),
    };
    match cli.command {
        Command::Hook(c) => hook::run(&ctx, c),
        Command::Nudge(c) => nudge::run(&ctx, c),
        Command::Mail(c) => mail::run(&ctx, c),
        Command::Bus(c) => bus::run(&ctx, c),
        Command::Remind(c) => remind::run(&ctx, c),
        Command::Lease(c) => lease::run(&ctx, c),
        Command::Agent(c) => agent::run(&ctx, c),
        Command::Work(c) => work::run(&ctx, c),
        Command::Brief { who } => attention::brief(&ctx, &who.agent()?),
        Command::Wait { who, timeout } => attention::wait(&ctx, &who.agent()?, timeout),
        Command::Witness(c) => witness::run(&ctx, c, json),
        // Handled in `main` before any root is opened.
        Command::Completions { .. } | Command::Init { .. } | Command::Migrate(_) => {
            Ok(Output::new("", serde_json::Value::Null))
        }
        Command::Status => status::run(&ctx),
        Command::Doctor(args) => doctor::run(&ctx, &args),
        Command::Search(args) => search::run(&ctx, args),
        Command::Mcp(args) => mcp::run(ctx, args),
        Command::Top(args) => top::run(&ctx, &args),
        Command::Serve(args) => serve::run(&ctx, &args, json),
    }
}

/// Refuses, before anything is made, a state root (or with
/// `mail_folder`, a mail folder) that is something other than a
/// directory, or that does not exist for a command that only reads (so a
/// mistyped root never reads as an empty one). A nubos-pilot project's
/// mail folder found by the walk up (`found_project`) may be missing: it
/// is made on first use, and reading it is reading an empty one.
fn check_dir(cli: &Cli, dir: &Path, mail_folder: bool, found_project: bool) -> Result<()> {
    let what = if mail_folder {
        "mail folder"
    } else {
        "state root"
    };
    let failure = match StateDir::stat_outside(dir)? {
        Some(stat) if !stat.is_dir() => {
            CliError::refused(format!("{what} `{}` is not a directory", dir.display()))
        }
        None if cli.command.reads_only() && !found_project => missing(dir, mail_folder),
        _ => return Ok(()),
    };
    Err(refuse_mcp_stdio(cli, failure))
}

/// The refusal for a state root (or mail folder) that does not exist.
fn missing(dir: &Path, mail_folder: bool) -> CliError {
    if mail_folder {
        CliError::refused(format!(
            "mail folder `{}` does not exist (check --mail-dir)",
            dir.display()
        ))
    } else {
        CliError::refused(format!(
            "state root `{}` does not exist: `chipset init` creates it (or check --root \
             or {ROOT_ENV})",
            dir.display()
        ))
    }
}

/// Opens the state root `dir`, or with `mail_folder` the mail folder
/// `dir`, once [`check_dir`] has allowed it: made if missing for a command
/// that writes, an existing one for a command that only reads.
fn open_dir(cli: &Cli, dir: &Path, mail_folder: bool, found_project: bool) -> Result<StateDir> {
    if !cli.command.reads_only() || found_project {
        return Ok(StateDir::open(dir)?);
    }
    let existing = StateOptions {
        create: false,
        ..StateOptions::default()
    };
    let opened = StateDir::open_with(dir, existing).map_err(|e| match e {
        chipset_store::Error::NotFound { .. } => missing(dir, mail_folder),
        other => other.into(),
    });
    opened.map_err(|failure| refuse_mcp_stdio(cli, failure))
}

/// Opens the state on the server `url` (settings it leaves out from
/// libpq's environment).
fn open_server(cli: &Cli, url: &ServerUrl) -> Result<Chipset> {
    Chipset::open_server(url, &ServerOptions::default())
        .map_err(|e| refuse_mcp_stdio(cli, e.into()))
}

/// An MCP client on stdio sees why the server cannot start as the error
/// of its handshake, not as a connection closed without a word.
fn refuse_mcp_stdio(cli: &Cli, failure: CliError) -> CliError {
    if let Command::Mcp(args) = &cli.command
        && args.http.is_none()
    {
        let _ = chipset_mcp::refuse_stdio(failure.to_string());
    }
    failure
}

/// Prints clap's help and version as clap does; every other parse error
/// becomes one line on stderr with exit code 2 (and, with `--json`, the
/// failure's document on stdout).
fn usage(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    // The arguments did not parse: read again, past the errors, for
    // `--json`; never for `mcp`, whose stdout is the protocol's.
    let json = <Cli as clap::CommandFactory>::command()
        .ignore_errors(true)
        .try_get_matches()
        .is_ok_and(|m| {
            m.subcommand_name() != Some("mcp")
                && m.try_get_one::<bool>("json").ok().flatten() == Some(&true)
        });
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            // The help on stderr says what is missing.
            let _ = e.print();
            if json {
                output::refusal(&CliError::usage("a subcommand is missing (try --help)"));
            }
            ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
        }
        _ => {
            let text = e.to_string();
            let first = text.split("\n\n").next().unwrap_or_default();
            let message = first.strip_prefix("error: ").unwrap_or(first);
            output::fail(&CliError::usage(format!("{message} (try --help)")), json)
        }
    }
}
