//! The async face of attention (feature `tokio`): a stream of briefs.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use chipset_store::AgentId;
use tokio::sync::mpsc;

use crate::attention::{Attention, Brief};
use crate::error::Result;

/// How long the watching thread blocks before it checks that the stream is
/// still wanted: a dropped stream's thread ends within this.
const SLICE: Duration = Duration::from_millis(200);

/// An async [`Stream`](futures_core::Stream) of one agent's briefs, made by
/// [`Attention::stream`]: the current brief first (unless it is empty),
/// then each new brief as it changes, including one that became empty. It
/// ends only after an error, which is its last item.
///
/// The watching runs on a thread of its own (a
/// [`BriefWatch`](crate::BriefWatch)), so the stream needs no particular
/// runtime and never blocks one; dropping the stream stops the thread.
#[derive(Debug)]
pub struct BriefStream {
    rx: mpsc::Receiver<Result<Brief>>,
}

impl Attention {
    /// Returns an async stream of `agent`'s briefs (see [`BriefStream`]).
    ///
    /// # Errors
    ///
    /// As [`Attention::watch`].
    pub fn stream(&self, agent: &AgentId) -> Result<BriefStream> {
        let mut watch = self.watch(agent)?;
        let (tx, rx) = mpsc::channel(16);
        std::thread::Builder::new()
            .name(format!("chipset-attention-{agent}"))
            .spawn(move || {
                // A dropped stream drops its receiver, which closes `tx`.
                while !tx.is_closed() {
                    match watch.next(SLICE) {
                        Ok(None) => {}
                        Ok(Some(brief)) => {
                            if tx.blocking_send(Ok(brief)).is_err() {
                                return;
                            }
                        }
                        Err(e) => {
                            let _ = tx.blocking_send(Err(e));
                            return;
                        }
                    }
                }
            })
            .map_err(|e| {
                chipset_store::Error::io("start the attention thread for", self.state_root(), e)
            })?;
        Ok(BriefStream { rx })
    }
}

impl futures_core::Stream for BriefStream {
    type Item = Result<Brief>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}
