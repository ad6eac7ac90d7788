//! `chipset brief` and `chipset wait`: [`chipset_loop::Attention`] from a
//! shell, for agent hosts' hook points.
//!
//! `brief` prints one line per kind of work that needs the agent, and
//! nothing at all when nothing does, so a hook that runs it before every
//! prompt costs no tokens while the agent is idle. `wait` blocks until the
//! brief is not empty and prints it; a timeout is not a failure: exit 0 and
//! no text (`"timed_out": true` in JSON), as `bus wait`. An unreadable file
//! is a line of the brief (work for the agent or the doctor), not a failure.

use std::time::Duration;

use chipset_mcp::view::Waited;
use chipset_store::AgentId;

use crate::Ctx;
use crate::error::Result;
use crate::output::{self, Output};

/// Runs `chipset brief AGENT`.
pub(crate) fn brief(ctx: &Ctx, agent: &AgentId) -> Result<Output> {
    let brief = ctx.chipset.attention().brief(agent)?;
    Ok(Output::new(brief.to_string(), output::json(&brief)))
}

/// Runs `chipset wait AGENT [--timeout S]`.
pub(crate) fn wait(ctx: &Ctx, agent: &AgentId, timeout: Option<Duration>) -> Result<Output> {
    let brief = ctx
        .chipset
        .attention()
        .wait(agent, timeout.unwrap_or(Duration::MAX))?;
    let text = brief.to_string();
    let view = Waited {
        timed_out: brief.is_empty(),
        brief,
    };
    Ok(Output::new(text, output::json(&view)))
}
