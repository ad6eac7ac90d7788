//! `chipset agent ...`: [`chipset::directory::Directory`] from a shell.
//!
//! `register` creates or updates a profile: an option not given keeps its
//! value, an empty one (`--model ''`, `--roles ''`) clears it, and the same
//! registration again writes nothing. `whois` and `list` show `last_seen`,
//! computed from the activity chipset already records.

use chipset::directory::{Directory, Filter, Registered, Registration, Role};
use chipset_mcp::view::{AgentListing, AgentProfile, ListMembers};
use chipset_store::AgentId;
use clap::Subcommand;

use crate::Ctx;
use crate::cli::Who;
use crate::error::{CliError, Result};
use crate::output::{self, Output, Table};

/// `chipset agent ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum AgentCommand {
    /// Create or update an agent's profile (options not given are kept; an
    /// empty value clears one).
    Register {
        #[command(flatten)]
        who: Who,
        /// Its roles, comma-separated (a-z, 0-9, `-`, `_`), replacing the
        /// old list; '' clears them.
        #[arg(long, visible_alias = "role", value_name = "ROLE,...")]
        roles: Option<String>,
        /// The program driving it.
        #[arg(long, value_name = "NAME")]
        program: Option<String>,
        /// The model.
        #[arg(long, value_name = "NAME")]
        model: Option<String>,
        /// The host it runs on.
        #[arg(long, value_name = "NAME")]
        host: Option<String>,
        /// What it works on now.
        #[arg(long, value_name = "TEXT")]
        task: Option<String>,
        /// Free text (at most 2048 bytes).
        #[arg(long, value_name = "TEXT")]
        note: Option<String>,
    },
    /// List the registered agents by name, with when each was last seen.
    List {
        /// Only agents holding this role.
        #[arg(long, value_name = "ROLE")]
        role: Option<Role>,
        /// Only agents seen within this long: a number with ms, s, m, h or d.
        #[arg(long, value_name = "DURATION", value_parser = crate::cli::parse_duration)]
        seen_within: Option<std::time::Duration>,
    },
    /// Show one agent's profile and when it was last seen.
    Whois {
        #[command(flatten)]
        who: Who,
    },
    /// Put agents on a list (`--to @LIST` mails them all): the list is a
    /// role in each profile. The agents must be registered.
    ListAdd {
        /// The list (a-z, 0-9, `-`, `_`; not `all`), with or without its `@`.
        #[arg(value_parser = parse_list)]
        list: Role,
        /// The agents.
        #[arg(required = true)]
        agents: Vec<AgentId>,
    },
    /// Take agents off a list.
    ListRemove {
        /// The list, with or without its `@`.
        #[arg(value_parser = parse_list)]
        list: Role,
        /// The agents.
        #[arg(required = true)]
        agents: Vec<AgentId>,
    },
}

/// Runs one agent command.
pub(crate) fn run(ctx: &Ctx, command: AgentCommand) -> Result<Output> {
    let directory = ctx.chipset.directory().clone();
    match command {
        AgentCommand::Register {
            who,
            roles,
            program,
            model,
            host,
            task,
            note,
        } => {
            let agent = who.agent()?;
            let mut change = Registration::new();
            change.roles = roles.as_deref().map(parse_roles).transpose()?;
            change.program = program;
            change.model = model;
            change.host = host;
            change.task = task;
            change.note = note;
            let done = directory.register(&agent, &change)?;
            let what = match &done {
                Registered::Created(_) => "registered",
                Registered::Updated(_) => "updated",
                _ => "unchanged",
            };
            let view = AgentProfile::of(done.profile(), None);
            Ok(Output::new(
                format!("{what} {agent}\n"),
                output::json(&view),
            ))
        }
        AgentCommand::Whois { who } => {
            let info = directory.whois(&who.agent()?)?;
            let view = AgentProfile::of(&info.profile, Some(info.last_seen));
            Ok(Output::new(whois_text(ctx, &view), output::json(&view)))
        }
        AgentCommand::ListAdd { list, agents } => change_list(&directory, &list, &agents, true),
        AgentCommand::ListRemove { list, agents } => change_list(&directory, &list, &agents, false),
        AgentCommand::List { role, seen_within } => {
            let mut filter = Filter::default();
            filter.role = role;
            filter.seen_within = seen_within;
            let roster = directory.list(&filter)?;
            let view = AgentListing::of(&roster, usize::MAX);
            let failure = CliError::unreadable(&roster, "profile");
            Ok(Output::new(list_text(ctx, &view), output::json(&view)).with_failure(failure))
        }
    }
}

/// `agent list-add|list-remove`: prints the list's members after the change.
fn change_list(
    directory: &Directory,
    list: &Role,
    agents: &[AgentId],
    add: bool,
) -> Result<Output> {
    let done = if add {
        directory.list_add(list, agents)?
    } else {
        directory.list_remove(list, agents)?
    };
    let changed = done
        .iter()
        .filter(|d| !matches!(d, Registered::Unchanged(_)))
        .count();
    let (view, note) = ListMembers::of(list, changed, directory.members(list));
    Ok(Output::new(view.text(add), output::json(&view)).with_note_if(note))
}

/// Parses `--roles a,b`; an empty list clears the roles.
/// Parses a list's name as `--to @LIST` and the listings write it, or
/// bare.
fn parse_list(text: &str) -> Result<Role> {
    Ok(text.strip_prefix('@').unwrap_or(text).parse::<Role>()?)
}

fn parse_roles(text: &str) -> Result<Vec<Role>> {
    if text.is_empty() {
        return Ok(Vec::new());
    }
    text.split(',')
        .map(|r| Role::new(r.trim()).map_err(CliError::from))
        .collect()
}

fn seen(ctx: &Ctx, p: &AgentProfile) -> String {
    p.last_seen.as_ref().map_or_else(String::new, |s| {
        format!("{} ago ({})", output::age(ctx.state.now(), s.at), s.source)
    })
}

fn whois_text(ctx: &Ctx, p: &AgentProfile) -> String {
    let mut pairs = vec![("agent", p.name.to_string())];
    if !p.roles.is_empty() {
        pairs.push(("roles", p.roles.join(", ")));
    }
    for (key, value) in [
        ("program", &p.program),
        ("model", &p.model),
        ("host", &p.host),
        ("task", &p.task),
        ("note", &p.note),
    ] {
        if let Some(v) = value {
            pairs.push((key, v.clone()));
        }
    }
    pairs.push(("registered", p.registered_at.to_string()));
    pairs.push(("last seen", seen(ctx, p)));
    output::fields(&pairs)
}

fn list_text(ctx: &Ctx, view: &AgentListing) -> String {
    if view.agents.is_empty() {
        return "no agents\n".to_owned();
    }
    let mut table = Table::new(&["AGENT", "ROLES", "PROGRAM", "MODEL", "HOST", "SEEN", "TASK"]);
    let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".to_owned());
    for p in &view.agents {
        let roles = if p.roles.is_empty() {
            "-".to_owned()
        } else {
            p.roles.join(",")
        };
        table.row(vec![
            p.name.to_string().into(),
            roles.into(),
            dash(&p.program).into(),
            dash(&p.model).into(),
            dash(&p.host).into(),
            seen(ctx, p).into(),
            dash(&p.task).into(),
        ]);
    }
    table.render(ctx.paint)
}
