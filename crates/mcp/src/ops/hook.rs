//! The hook tools: the agent's side (`hook_pickup`, `hook_touch`,
//! `hook_complete`) and the dispatcher's (`hook_assign`, `hook_clear`).

use chipset_failure::Failure;
use chipset_hook::{Assignment, BeadId, Hook, Hooks, Pickup};
use chipset_store::AgentId;

use super::{Ctx, Outcome, Reply, id};
use crate::params::{HookAssign, HookClear, HookWork, NoArguments};
use crate::view::{self, Cleared, PickupOutcome};

pub(crate) fn hook_pickup(ctx: &Ctx, _: NoArguments) -> Outcome {
    let pickup = ctx.hooks().pickup(&ctx.agent)?;
    let (outcome, assignment) = match pickup {
        Pickup::Idle => (PickupOutcome::Idle, None),
        Pickup::Started(a) => (PickupOutcome::Started, Some(a)),
        Pickup::Resumed(a) => (PickupOutcome::Resumed, Some(a)),
        Pickup::AwaitingClear(a) => (PickupOutcome::AwaitingClear, Some(a)),
        // A pickup this version does not know: nothing to execute.
        _ => (PickupOutcome::Idle, None),
    };
    let text = match &assignment {
        None => format!("no work for {}\n", ctx.agent),
        Some(a) => format!(
            "{} {} ({}), generation {}\n",
            outcome.as_str(),
            a.work.bead_id,
            a.work.title,
            a.generation
        ),
    };
    Ok(Reply::new(
        text,
        view::Pickup {
            outcome,
            assignment,
        },
    ))
}

/// Returns the assignment `agent`'s hook holds now for `op`, fenced on
/// the `bead` and `generation` the caller named ([`Failure::held`]).
fn held(
    hooks: &Hooks,
    agent: &AgentId,
    op: &str,
    bead: Option<&str>,
    generation: Option<u64>,
) -> Result<Assignment, Failure> {
    let bead: Option<BeadId> = bead.map(id).transpose()?;
    Failure::held(hooks, agent, op, bead.as_ref(), generation)
}

fn changed(hook: &Hook) -> Reply {
    let bead = hook
        .state
        .work()
        .map_or_else(String::new, |w| format!(" {}", w.bead_id));
    Reply::new(
        format!("{}: {}{bead}\n", hook.agent, hook.state.status()),
        hook,
    )
}

pub(crate) fn hook_touch(ctx: &Ctx, p: HookWork) -> Outcome {
    let hooks = ctx.hooks();
    let held = held(hooks, &ctx.agent, "touch", p.bead.as_deref(), p.generation)?;
    Ok(changed(&hooks.touch(&held)?))
}

pub(crate) fn hook_complete(ctx: &Ctx, p: HookWork) -> Outcome {
    let hooks = ctx.hooks();
    let held = held(
        hooks,
        &ctx.agent,
        "complete",
        p.bead.as_deref(),
        p.generation,
    )?;
    Ok(changed(&hooks.complete(&held)?))
}

/// Assigns work to an empty hook, recording this agent as `assigned_by`
/// (`chipset hook assign AGENT --by THIS`).
pub(crate) fn hook_assign(ctx: &Ctx, p: HookAssign) -> Outcome {
    let to: AgentId = id(&p.to)?;
    let bead: chipset_hook::BeadId = id(&p.bead)?;
    let hooks = ctx.hooks();
    let assignment = hooks.assign(&to, bead, p.title, Some(&ctx.agent))?;
    let text = format!(
        "assigned {} to {to} (generation {})\n",
        assignment.work.bead_id, assignment.generation
    );
    Ok(Reply::new(text, &assignment))
}

/// Clears completed work, or with `reassign` takes pending or active work
/// away (`chipset hook clear AGENT [--reassign]`), fenced on the assignment
/// the hook holds now.
pub(crate) fn hook_clear(ctx: &Ctx, p: HookClear) -> Outcome {
    let to: AgentId = id(&p.to)?;
    let bead: Option<BeadId> = p.bead.as_deref().map(id).transpose()?;
    let reassign = p.reassign.unwrap_or(false);
    let (cleared, text) = Cleared::run(ctx.hooks(), &to, reassign, bead.as_ref(), p.generation)?;
    Ok(Reply::new(text, cleared))
}

impl Cleared {
    /// Takes work off `agent`'s hook, as `chipset hook clear [--reassign]`
    /// and the `hook_clear` tool do: the completed work, or with
    /// `reassign` pending or active work, fenced on `bead` and `generation`
    /// when given ([`Failure::held`]). Returns the outcome and its line of
    /// text. A retry naming the generation of work that is off the hook
    /// already succeeds with the hook as it is; an unknown outcome says how
    /// to finish ([`Failure::finish_clear`]).
    ///
    /// # Errors
    ///
    /// As [`Failure::held`], and the hook's errors.
    pub fn run(
        hooks: &Hooks,
        agent: &AgentId,
        reassign: bool,
        bead: Option<&BeadId>,
        generation: Option<u64>,
    ) -> Result<(Self, String), Failure> {
        if let Some(hook) = Failure::cleared_already(hooks, agent, generation)? {
            let text = format!(
                "the hook of {agent} is empty: generation {} is off it already\n",
                hook.generation - 1
            );
            return Ok((Cleared::Cleared(hook), text));
        }
        let op = if reassign { "reassign" } else { "clear" };
        let held = Failure::held(hooks, agent, op, bead, generation)?;
        let unfinished = |e: chipset_hook::Error| Failure::from(e).finish_clear(op, &held);
        if reassign {
            let done = hooks.reassign(&held).map_err(unfinished)?;
            let text = format!(
                "took {} ({}) away from {agent}\n",
                done.taken.work.bead_id, done.was
            );
            return Ok((Cleared::Reassigned(done.into()), text));
        }
        let hook = hooks.clear(&held).map_err(unfinished)?;
        let text = format!("cleared {} from {agent}\n", held.work.bead_id);
        Ok((Cleared::Cleared(hook), text))
    }
}
