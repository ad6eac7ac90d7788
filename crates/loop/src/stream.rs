//! The async face of attention (feature `tokio`): a stream of briefs, a
//! subscription (the brief now, then each change) and an async wait, each
//! watched on a thread of its own so that no runtime thread ever blocks.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use chipset_store::AgentId;
use tokio::sync::{mpsc, oneshot};

use crate::attention::{Attention, Brief, BriefWatch};
use crate::error::Result;

/// How long a watching thread blocks before it checks that its stream or
/// wait is still wanted: a dropped one's thread ends within this.
const SLICE: Duration = Duration::from_millis(200);

/// An async [`Stream`](futures_core::Stream) of one agent's briefs, made by
/// [`Attention::stream`] or [`Attention::subscribe`]: each new brief as it
/// changes, including one that became empty. It ends only after an error,
/// which is its last item.
///
/// The watching runs on a thread of its own (a
/// [`BriefWatch`](crate::BriefWatch)), so the stream needs no particular
/// runtime and never blocks one; dropping the stream stops the thread.
#[derive(Debug)]
pub struct BriefStream {
    rx: mpsc::Receiver<Result<Brief>>,
}

impl BriefStream {
    /// Returns the next brief, or `None` after the stream's last item.
    pub async fn next(&mut self) -> Option<Result<Brief>> {
        self.rx.recv().await
    }
}

impl Attention {
    /// Returns an async stream of `agent`'s briefs (see [`BriefStream`]):
    /// the current brief first unless it is empty, then each change. The
    /// watch is set up on the stream's thread; a failure to set it up is
    /// the stream's first and last item.
    ///
    /// # Errors
    ///
    /// [`Error::Store`](crate::Error::Store) when the thread cannot be started.
    pub fn stream(&self, agent: &AgentId) -> Result<BriefStream> {
        let (tx, rx) = mpsc::channel(16);
        let attention = self.clone();
        let who = agent.clone();
        self.spawn(agent, move || match attention.watch(&who) {
            Ok(watch) => forward(watch, &tx),
            Err(e) => {
                let _ = tx.blocking_send(Err(e));
            }
        })?;
        Ok(BriefStream { rx })
    }

    /// Subscribes to `agent`'s brief: returns the brief now (empty or not)
    /// and a stream of each later change. The watch is in place before the
    /// brief is read, so no change in between is missed.
    ///
    /// # Errors
    ///
    /// As [`Attention::watch`] and [`Attention::brief`];
    /// [`Error::Store`](crate::Error::Store) when the thread cannot be started.
    pub async fn subscribe(&self, agent: &AgentId) -> Result<(Brief, BriefStream)> {
        let (started, ready) = oneshot::channel();
        let (tx, rx) = mpsc::channel(16);
        let attention = self.clone();
        let who = agent.clone();
        self.spawn(agent, move || {
            let first = attention.watch(&who).and_then(|mut watch| {
                let now = match watch.next(Duration::ZERO)? {
                    Some(brief) => brief,
                    None => watch
                        .last()
                        .cloned()
                        .unwrap_or_else(|| Brief::empty(who.clone())),
                };
                Ok((now, watch))
            });
            match first {
                Ok((now, watch)) => {
                    if started.send(Ok(now)).is_ok() {
                        forward(watch, &tx);
                    }
                }
                Err(e) => {
                    let _ = started.send(Err(e));
                }
            }
        })?;
        let now = ready.await.map_err(|_| self.stopped(agent))??;
        Ok((now, BriefStream { rx }))
    }

    /// The async form of [`Attention::wait`]: returns as soon as something
    /// needs `agent` (at once if something does already), with what it
    /// is; or the brief at `timeout` (empty unless work came at that very
    /// moment). The wait runs on a thread of its own, which ends soon after
    /// the future is dropped.
    ///
    /// # Errors
    ///
    /// As [`Attention::wait`]; [`Error::Store`](crate::Error::Store) when
    /// the thread cannot be started.
    pub async fn wait_async(&self, agent: &AgentId, timeout: Duration) -> Result<Brief> {
        let (reply, rx) = oneshot::channel();
        let attention = self.clone();
        let who = agent.clone();
        self.spawn(agent, move || {
            let deadline = Instant::now().checked_add(timeout);
            let outcome = attention.watch(&who).and_then(|mut watch| {
                loop {
                    if reply.is_closed() {
                        return Ok(None);
                    }
                    let left =
                        deadline.map_or(SLICE, |d| d.saturating_duration_since(Instant::now()));
                    if let Some(brief) = watch.next(left.min(SLICE))?
                        && !brief.is_empty()
                    {
                        return Ok(Some(brief));
                    }
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return attention.brief(&who).map(Some);
                    }
                }
            });
            match outcome {
                Ok(Some(brief)) => {
                    let _ = reply.send(Ok(brief));
                }
                Ok(None) => {}
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            }
        })?;
        rx.await.map_err(|_| self.stopped(agent))?
    }

    fn spawn(&self, agent: &AgentId, run: impl FnOnce() + Send + 'static) -> Result<()> {
        std::thread::Builder::new()
            .name(format!("chipset-attention-{agent}"))
            .spawn(run)
            .map(drop)
            .map_err(|e| {
                chipset_store::Error::io("start the attention thread for", self.state_root(), e)
                    .into()
            })
    }

    fn stopped(&self, agent: &AgentId) -> crate::Error {
        chipset_store::Error::io(
            "watch the brief of",
            self.state_root().join(agent.as_str()),
            std::io::Error::other("the attention thread stopped"),
        )
        .into()
    }
}

/// Sends each brief `watch` returns until the stream is dropped or the
/// watch fails (the error is the last item).
fn forward(mut watch: BriefWatch, tx: &mpsc::Sender<Result<Brief>>) {
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
}

impl futures_core::Stream for BriefStream {
    type Item = Result<Brief>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}
