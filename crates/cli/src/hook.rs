//! `chipset hook ...`: [`chipset_hook::Hooks`] from a shell.
//!
//! The agent-side commands (`activate`, `touch`, `complete`) and `clear` act
//! on the assignment the hook holds now ([`Hooks::current`]), or with
//! `--bead`/`--generation` only on the one they name; the library still
//! fences the change on it, so a hook that changed in between refuses.

use chipset_hook::{Hook, HookStatus, Hooks};
use chipset_mcp::view::Cleared;
use chipset_store::{AgentId, ErrorKind, ReadOutcome};

use crate::Ctx;
use crate::cli::{HookCommand, HookFence};
use crate::error::{CliError, Result};
use crate::output::{self, Cell, Output, Table, Tone};
use crate::view::HookEntry;

/// Runs one hook command.
pub(crate) fn run(ctx: &Ctx, command: HookCommand) -> Result<Output> {
    let hooks = ctx.chipset.hooks().clone();
    match command {
        HookCommand::Show { who } => show(ctx, &hooks, &who.agent()?),
        HookCommand::List => list(ctx, &hooks),
        HookCommand::Assign {
            who,
            bead,
            title,
            by,
        } => {
            let agent = who.agent()?;
            let assignment = hooks.assign(&agent, bead, title, by.as_ref())?;
            let text = format!(
                "assigned {} to {agent} (generation {})\n",
                assignment.work.bead_id, assignment.generation
            );
            Ok(Output::new(text, output::json(&assignment)))
        }
        HookCommand::Activate { who, fence } => {
            let held = held(&hooks, &who.agent()?, "activate", &fence)?;
            Ok(changed(&hooks.activate(&held)?))
        }
        HookCommand::Touch { who, fence } => {
            let held = held(&hooks, &who.agent()?, "touch", &fence)?;
            Ok(changed(&hooks.touch(&held)?))
        }
        HookCommand::Complete { who, fence } => {
            let held = held(&hooks, &who.agent()?, "complete", &fence)?;
            Ok(changed(&hooks.complete(&held)?))
        }
        HookCommand::Clear {
            who,
            reassign,
            fence,
        } => clear(&hooks, &who.agent()?, reassign, &fence),
    }
}

/// `hook clear [--reassign]`, as the `hook_clear` tool ([`Cleared::run`]);
/// its JSON is the hook, or what was taken.
fn clear(hooks: &Hooks, agent: &AgentId, reassign: bool, fence: &HookFence) -> Result<Output> {
    let bead = fence.bead.as_ref();
    let (cleared, text) = Cleared::run(hooks, agent, reassign, bead, fence.generation)?;
    let doc = match &cleared {
        Cleared::Cleared(hook) => output::json(hook),
        Cleared::Reassigned(taken) => output::json(taken),
    };
    Ok(Output::new(text, doc))
}

/// Returns the assignment `agent`'s hook holds now for `op`, fenced on
/// what `fence` names ([`CliError::held`]).
fn held(
    hooks: &Hooks,
    agent: &AgentId,
    op: &str,
    fence: &HookFence,
) -> Result<chipset_hook::Assignment> {
    CliError::held(hooks, agent, op, fence.bead.as_ref(), fence.generation)
}

fn changed(hook: &Hook) -> Output {
    let bead = hook
        .state
        .work()
        .map_or_else(String::new, |w| format!(" {}", w.bead_id));
    let text = format!("{}: {}{bead}\n", hook.agent, hook.state.status());
    Output::new(text, output::json(hook))
}

fn show(ctx: &Ctx, hooks: &Hooks, agent: &AgentId) -> Result<Output> {
    let hook = match hooks.read(agent)? {
        ReadOutcome::Missing => Hook::missing(agent.clone()),
        ReadOutcome::Value(hook) => hook,
        ReadOutcome::Corrupt(c) => return Err(CliError::hook_unreadable(agent, &c)),
        ReadOutcome::Unsupported(u) => {
            return Err(CliError::refused(format!(
                "the hook of `{agent}` cannot be shown: {u}; it is left as it is"
            )));
        }
    };
    let now = ctx.state.now();
    let mut pairs = vec![
        ("agent", agent.to_string()),
        ("status", hook.state.status().to_string()),
    ];
    if let Some(work) = hook.state.work() {
        pairs.push(("bead", work.bead_id.to_string()));
        pairs.push(("title", work.title.to_owned()));
        let by = work
            .assigned_by
            .as_ref()
            .map_or_else(String::new, |d| format!(" by {d}"));
        pairs.push(("assigned", format!("{}{by}", work.assigned_at)));
    }
    if hook.last_activity > chipset_store::Timestamp::EPOCH {
        pairs.push((
            "activity",
            format!(
                "{} ({} ago)",
                hook.last_activity,
                output::age(now, hook.last_activity)
            ),
        ));
    }
    pairs.push(("generation", hook.generation.to_string()));
    Ok(Output::new(output::fields(&pairs), output::json(&hook)))
}

fn list(ctx: &Ctx, hooks: &Hooks) -> Result<Output> {
    let now = ctx.state.now();
    let mut table = Table::new(&["AGENT", "STATUS", "AGE", "BEAD", "TITLE"]);
    let mut docs = Vec::new();
    let mut corrupt = 0;
    let mut unsupported = 0;
    for (agent_id, read) in hooks.list()? {
        let agent = agent_id.to_string();
        match &read {
            ReadOutcome::Corrupt(c) => {
                corrupt += 1;
                table.row(vec![
                    agent.clone().into(),
                    Cell::toned("corrupt", Tone::Bad),
                    "-".into(),
                    "-".into(),
                    c.reason.to_string().into(),
                ]);
                docs.push(HookEntry::Unreadable {
                    agent_id: agent_id.clone(),
                    status: "corrupt",
                    error: c.to_string(),
                });
            }
            ReadOutcome::Unsupported(u) => {
                unsupported += 1;
                table.row(vec![
                    agent.clone().into(),
                    Cell::toned("unsupported", Tone::Bad),
                    "-".into(),
                    "-".into(),
                    u.what.clone().into(),
                ]);
                docs.push(HookEntry::Unreadable {
                    agent_id: agent_id.clone(),
                    status: "unsupported",
                    error: u.to_string(),
                });
            }
            read => {
                let hook = read
                    .clone()
                    .value()
                    .unwrap_or_else(|| Hook::missing(agent_id.clone()));
                let work = hook.state.work();
                table.row(vec![
                    agent.into(),
                    status_cell(hook.state.status()),
                    output::age(now, hook.last_activity).into(),
                    work.map_or("-".into(), |w| w.bead_id.to_string()).into(),
                    work.map_or(String::new(), |w| w.title.to_owned()).into(),
                ]);
                docs.push(HookEntry::Hook(hook));
            }
        }
    }
    let text = if table.is_empty() {
        "no hooks\n".to_owned()
    } else {
        table.render(ctx.paint)
    };
    let failure = match (corrupt, unsupported) {
        (0, 0) => None,
        (0, n) => Some(CliError::new(
            ErrorKind::Unsupported,
            format!(
                "{} values this version does not support (left in place)",
                output::plural(n, "hook file holds")
            ),
        )),
        (n, _) => Some(CliError::new(
            ErrorKind::Corrupt,
            format!(
                "{} unreadable; `chipset doctor --fix` quarantines them",
                output::plural(n, "hook file")
            ),
        )),
    };
    Ok(Output::new(text, output::json(&docs)).with_failure(failure))
}

/// Returns a hook status as a coloured cell.
pub(crate) fn status_cell(status: HookStatus) -> Cell {
    let tone = match status {
        HookStatus::Empty => Tone::Dim,
        HookStatus::Pending => Tone::Warn,
        HookStatus::Active => Tone::Good,
        // Completed, or a status this version does not know.
        _ => Tone::Plain,
    };
    Cell::toned(status.to_string(), tone)
}
