//! The waiting tools and resource-updated notifications, on the libraries'
//! async forms (feature `tokio`): the bus's [`Waiter::wait_async`], and
//! [`Attention::wait_async`] and [`Attention::subscribe`]. Each watches on
//! a thread of its own, so no runtime thread blocks and a cancelled call
//! ends at once.
//!
//! [`Waiter::wait_async`]: chipset_bus::Waiter::wait_async

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use chipset_bus::Pending;
use chipset_failure::Failure;
use chipset_loop::{Brief, BriefStream};
use rmcp::ErrorData;

use crate::ops::{self, Ctx, Outcome};
use crate::params::{BusWait, Wait, limit};

/// Waits as `chipset bus wait` does (waiter first, then the queue, then
/// wait) until this agent has pending events, the timeout passes or
/// `cancelled` completes. The queue reads run on the blocking pool.
pub(crate) async fn bus_wait(
    ctx: &Arc<Ctx>,
    p: Result<BusWait, Failure>,
    cancelled: impl Future<Output = ()>,
) -> Outcome {
    let p = p?;
    let deadline = Instant::now() + ops::timeout(p.timeout_seconds)?;
    let limit = limit(p.limit)?;
    let mut waiter = ctx.bus().waiter_async(&ctx.agent).await?;
    let mut pending = pending(ctx).await?;
    tokio::pin!(cancelled);
    while pending.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(ops::events(&ctx.agent, &pending, limit, Some(true)));
        }
        tokio::select! {
            arrived = waiter.wait_async(left) => {
                if !arrived?.is_empty() {
                    pending = self::pending(ctx).await?;
                }
            }
            () = &mut cancelled => {
                return Ok(ops::events(&ctx.agent, &pending, limit, Some(true)));
            }
        }
    }
    Ok(ops::events(&ctx.agent, &pending, limit, Some(false)))
}

/// Reads the agent's queue on the blocking pool.
async fn pending(ctx: &Arc<Ctx>) -> Result<Pending, Failure> {
    let ctx = Arc::clone(ctx);
    tokio::task::spawn_blocking(move || ctx.bus().pending(&ctx.agent).map_err(Failure::from))
        .await
        .map_err(|e| Failure::refused(format!("the queue read did not finish: {e}")))?
}

/// Returns as soon as anything needs this agent, as `chipset wait` does;
/// an empty brief with `timed_out` when the timeout passes or `cancelled`
/// completes first.
pub(crate) async fn wait(
    ctx: &Arc<Ctx>,
    p: Result<Wait, Failure>,
    cancelled: impl Future<Output = ()>,
) -> Outcome {
    let timeout = ops::timeout(p?.timeout_seconds)?;
    let attention = ctx.attention();
    tokio::select! {
        brief = attention.wait_async(&ctx.agent, timeout) => {
            let brief = brief?;
            let timed_out = brief.is_empty();
            Ok(ops::waited(brief, timed_out))
        }
        () = cancelled => Ok(ops::waited(Brief::empty(ctx.agent.clone()), true)),
    }
}

/// Returns the stream of the agent's briefs, with the current brief (the
/// one a subscriber has, or can read) as its starting point.
pub(crate) async fn briefs(ctx: &Arc<Ctx>) -> Result<(BriefStream, Brief), ErrorData> {
    let (now, stream) = ctx
        .attention()
        .subscribe(&ctx.agent)
        .await
        .map_err(|e| ErrorData::internal_error(Failure::from(e).to_string(), None))?;
    Ok((stream, now))
}

/// Calls `send` each time the brief differs from the last one seen, until
/// `send` reports the client gone (false) or the watch fails.
pub(crate) async fn notify<F, Fut>((mut stream, mut last): (BriefStream, Brief), send: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    loop {
        match stream.next().await {
            Some(Ok(brief)) => {
                if brief != last {
                    last = brief;
                    if !send().await {
                        return;
                    }
                }
            }
            Some(Err(e)) => {
                tracing::warn!(error = %Failure::from(e), "watching the brief failed; no more updates");
                return;
            }
            None => return,
        }
    }
}
