//! Resource-updated notifications: the agent's brief watched through
//! [`chipset_loop::Attention::stream`] (inotify plus rescans on a thread of
//! its own), one notification per change.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;

use chipset_failure::Failure;
use chipset_loop::{Attention, Brief, BriefStream};
use futures_core::Stream as _;
use rmcp::ErrorData;

use crate::ops::Ctx;

/// Returns the stream of the agent's briefs, with the current brief (the
/// one a subscriber has, or can read) as its starting point; the reads run
/// on the blocking pool.
pub(crate) async fn briefs(ctx: &Arc<Ctx>) -> Result<(BriefStream, Brief), ErrorData> {
    let ctx = Arc::clone(ctx);
    tokio::task::spawn_blocking(move || {
        let attention = Attention::from_state(&ctx.state);
        // Stream first, read second: a change in between is a difference
        // the stream reports, never a miss.
        let stream = attention.stream(&ctx.agent).map_err(internal)?;
        let now = attention.brief(&ctx.agent).map_err(internal)?;
        Ok((stream, now))
    })
    .await
    .map_err(|e| ErrorData::internal_error(format!("the watch did not start: {e}"), None))?
}

fn internal(e: chipset_loop::Error) -> ErrorData {
    ErrorData::internal_error(Failure::from(e).to_string(), None)
}

/// Calls `send` each time the brief differs from the last one seen, until
/// `send` reports the client gone (false) or the watch fails.
pub(crate) async fn notify<F, Fut>((mut stream, mut last): (BriefStream, Brief), send: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    loop {
        let next = poll_fn(|cx| Pin::new(&mut stream).poll_next(cx)).await;
        match next {
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
