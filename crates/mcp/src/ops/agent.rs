//! The directory tools: `agent_whois` and `agent_list` (registration is
//! `chipset mcp --agent A` starting, and `chipset agent register`).

use std::time::Duration;

use chipset::directory::{Filter, Role};
use chipset_failure::Failure;
use chipset_store::AgentId;

use super::{Ctx, Outcome, Reply, id};
use crate::params::{AgentList, AgentListChange, AgentWhois, limit};
use crate::view::{AgentListing, AgentProfile, ListMembers};

/// Returns one line for `p`: name, roles, what it runs, last seen.
pub(crate) fn line(p: &AgentProfile) -> String {
    let mut text = p.name.to_string();
    if !p.roles.is_empty() {
        text.push_str(&format!(" [{}]", p.roles.join(",")));
    }
    for v in [&p.program, &p.model, &p.host].into_iter().flatten() {
        text.push_str(&format!(" {v}"));
    }
    if let Some(task) = &p.task {
        text.push_str(&format!(" task={task}"));
    }
    if let Some(seen) = &p.last_seen {
        text.push_str(&format!(" seen {} ({})", seen.at, seen.source));
    }
    text.push('\n');
    text
}

pub(crate) fn agent_whois(ctx: &Ctx, p: AgentWhois) -> Outcome {
    let agent: AgentId = match &p.name {
        Some(a) => id(a)?,
        None => ctx.agent.clone(),
    };
    let info = ctx.directory().whois(&agent)?;
    let view = AgentProfile::of(&info.profile, Some(info.last_seen));
    let mut text = line(&view);
    if let Some(note) = &view.note {
        text.push_str(note);
        text.push('\n');
    }
    Ok(Reply::new(text, view))
}

/// Returns the seconds a `--seen-within` asked for as a duration.
pub(crate) fn seen_within(secs: Option<f64>) -> Result<Option<Duration>, Failure> {
    secs.map(|s| {
        Duration::try_from_secs_f64(s).map_err(|_| {
            Failure::usage(format!(
                "seen_within_seconds must be a number of seconds, not {s}"
            ))
        })
    })
    .transpose()
}

pub(crate) fn agent_list(ctx: &Ctx, p: AgentList) -> Outcome {
    let limit = limit(p.limit)?;
    let mut filter = Filter::default();
    filter.role = p.role.map(Role::new).transpose()?;
    filter.seen_within = seen_within(p.seen_within_seconds)?;
    let roster = ctx.directory().list(&filter)?;
    let view = AgentListing::of(&roster, limit);
    let mut text: String = view.agents.iter().map(line).collect();
    if view.total > view.agents.len() {
        text.push_str(&format!(
            "… {} more ({} in all): pass a larger `limit`\n",
            view.total - view.agents.len(),
            view.total
        ));
    }
    if text.is_empty() {
        text = "no agents\n".to_owned();
    }
    let failure = Failure::unreadable(&roster, "profile");
    let mut reply = Reply::new(text, view);
    reply.failure = failure;
    Ok(reply)
}

pub(crate) fn agent_list_add(ctx: &Ctx, p: AgentListChange) -> Outcome {
    change_list(ctx, p, true)
}

pub(crate) fn agent_list_remove(ctx: &Ctx, p: AgentListChange) -> Outcome {
    change_list(ctx, p, false)
}

/// Puts agents on a list or takes them off, and shows its members after.
fn change_list(ctx: &Ctx, p: AgentListChange, add: bool) -> Outcome {
    let name = p.list.strip_prefix('@').unwrap_or(&p.list);
    let list = Role::new(name).map_err(Failure::from)?;
    let agents = p
        .agents
        .iter()
        .map(|a| id(a))
        .collect::<Result<Vec<AgentId>, Failure>>()?;
    let directory = ctx.directory();
    let done = if add {
        directory.list_add(&list, &agents)?
    } else {
        directory.list_remove(&list, &agents)?
    };
    let changed = done
        .iter()
        .filter(|d| !matches!(d, chipset::directory::Registered::Unchanged(_)))
        .count();
    let (view, note) = ListMembers::of(&list, changed, directory.members(&list));
    Ok(Reply::noted(view.text(add), view, note))
}
