//! `brief` and `wait`: what needs this agent now, or as soon as anything
//! does (the waiting itself is in [`crate::watch`]).

use chipset_loop::Brief;

use super::{Ctx, Outcome, Reply};
use crate::view::Waited;

/// Renders a brief: its lines, or a line saying nothing needs the agent.
fn text(brief: &Brief, timed_out: bool) -> String {
    if !brief.is_empty() {
        brief.to_string()
    } else if timed_out {
        format!("timed out: nothing needs {}\n", brief.agent)
    } else {
        format!("nothing needs {}\n", brief.agent)
    }
}

/// What needs this agent now, across every channel ([`Attention::brief`]).
pub(crate) fn brief(ctx: &Ctx) -> Outcome {
    let brief = ctx.attention().brief(&ctx.agent)?;
    Ok(Reply::new(text(&brief, false), &brief))
}

/// Returns the `wait` tool's reply: the brief, and whether the wait timed out.
pub(crate) fn waited(brief: Brief, timed_out: bool) -> Reply {
    Reply::new(text(&brief, timed_out), Waited { brief, timed_out })
}
