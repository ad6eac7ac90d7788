//! `brief` and `wait`: what needs this agent now, or as soon as anything does.

use std::time::Instant;

use chipset_loop::{Attention, Brief};

use super::{Ctx, Outcome, Reply, WAIT_SLICE, timeout};
use crate::params::Wait;
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
    let brief = Attention::from_state(&ctx.state).brief(&ctx.agent)?;
    Ok(Reply::new(text(&brief, false), &brief))
}

fn waited(brief: Brief, timed_out: bool) -> Reply {
    Reply::new(text(&brief, timed_out), Waited { brief, timed_out })
}

/// Returns as soon as anything needs this agent, as `chipset wait` does,
/// watching in short slices so that `cancelled` is noticed soon.
pub(crate) fn wait(ctx: &Ctx, p: &Wait, cancelled: &dyn Fn() -> bool) -> Outcome {
    let deadline = Instant::now() + timeout(p.timeout_seconds)?;
    // Watch first, read second (the watch's first brief): nothing is missed.
    let mut watch = Attention::from_state(&ctx.state).watch(&ctx.agent)?;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if let Some(brief) = watch.next(left.min(WAIT_SLICE))?
            && !brief.is_empty()
        {
            return Ok(waited(brief, false));
        }
        if deadline <= Instant::now() || cancelled() {
            return Ok(waited(Brief::empty(ctx.agent.clone()), true));
        }
    }
}
