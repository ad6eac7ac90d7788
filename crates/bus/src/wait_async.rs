//! The async face of wake-ups (feature `tokio`): a [`Waiter`] on a thread
//! of its own, awaited without blocking a runtime thread.

use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use chipset_store::AgentId;
use tokio::sync::oneshot;

use crate::bus::Bus;
use crate::error::Result;
use crate::name::QueueEntry;
use crate::wait::{Waiter, Wake};

/// How long the waiting thread blocks before it checks that the wait is
/// still wanted: a cancelled wait's thread is free again within this.
const SLICE: Duration = Duration::from_millis(200);

/// One [`AsyncWaiter::wait`] call, handed to the waiting thread.
struct Request {
    timeout: Duration,
    reply: oneshot::Sender<Result<Wake>>,
}

/// The async form of [`Waiter`]: [`AsyncWaiter::wait`] is awaited instead
/// of blocking, on any executor (the watching runs on a thread of its own).
///
/// Made by [`Bus::waiter_async`]. It reports what
/// the [`Waiter`] inside reports: an event published after the waiter was
/// made is reported once, even if it came before `wait` was called.
/// Dropping a `wait` future loses nothing: what arrived meanwhile is
/// reported by the next `wait`. Dropping the waiter ends its thread.
#[derive(Debug)]
pub struct AsyncWaiter {
    agent: AgentId,
    notified: bool,
    requests: std_mpsc::Sender<Request>,
}

impl Bus {
    /// Returns an async waiter on `agent`'s queue (see [`Bus::waiter`]); the
    /// queue is created and listed on the waiter's thread, not the caller's.
    ///
    /// # Errors
    ///
    /// As [`Bus::waiter`]; [`Error::Store`](crate::Error::Store) when the
    /// thread cannot be started.
    pub async fn waiter_async(&self, agent: &AgentId) -> Result<AsyncWaiter> {
        let (started, ready) = oneshot::channel();
        let (requests, rx) = std_mpsc::channel();
        let bus = self.clone();
        let who = agent.clone();
        spawn(self, agent, move || match bus.waiter(&who) {
            Ok(waiter) => {
                let _ = started.send(Ok(waiter.is_notified()));
                serve(waiter, &rx);
            }
            Err(e) => {
                let _ = started.send(Err(e));
            }
        })?;
        let notified = ready.await.map_err(|_| gone(self, agent))??;
        Ok(AsyncWaiter {
            agent: agent.clone(),
            notified,
            requests,
        })
    }
}

impl AsyncWaiter {
    /// Returns true when directory notifications are in use (false: rescans only).
    pub fn is_notified(&self) -> bool {
        self.notified
    }

    /// Waits until an event arrives that this waiter has not reported, or
    /// `timeout` passes, as [`Waiter::wait`] does, without blocking the
    /// calling thread. Cancel-safe: an arrival is never lost to a dropped
    /// future.
    ///
    /// # Errors
    ///
    /// As [`Waiter::wait`]; [`Error::Store`](crate::Error::Store) when the
    /// waiter's thread has stopped.
    pub async fn wait(&mut self, timeout: Duration) -> Result<Wake> {
        let (reply, rx) = oneshot::channel();
        let stopped = |agent: &AgentId| {
            crate::Error::Store(chipset_store::Error::io(
                "wait for the events of",
                agent.as_str(),
                std::io::Error::other("the waiter thread has stopped"),
            ))
        };
        if self.requests.send(Request { timeout, reply }).is_err() {
            return Err(stopped(&self.agent));
        }
        rx.await.map_err(|_| stopped(&self.agent))?
    }
}

fn spawn(bus: &Bus, agent: &AgentId, run: impl FnOnce() + Send + 'static) -> Result<()> {
    std::thread::Builder::new()
        .name(format!("chipset-bus-wait-{agent}"))
        .spawn(run)
        .map(drop)
        .map_err(|e| {
            chipset_store::Error::io("start the waiter thread for", bus.state().root(), e).into()
        })
}

fn gone(bus: &Bus, agent: &AgentId) -> crate::Error {
    crate::Error::Store(chipset_store::Error::io(
        "start the waiter for",
        bus.queue_dir(agent).as_path(),
        std::io::Error::other("the waiter thread stopped"),
    ))
}

/// Serves wait requests until the [`AsyncWaiter`] is dropped. Arrivals a
/// cancelled request could not take are kept for the next one.
fn serve(mut waiter: Waiter, requests: &std_mpsc::Receiver<Request>) {
    let mut kept: Vec<QueueEntry> = Vec::new();
    while let Ok(Request { timeout, reply }) = requests.recv() {
        let deadline = Instant::now().checked_add(timeout);
        let outcome = loop {
            if !kept.is_empty() || reply.is_closed() {
                break Ok(());
            }
            let left = deadline.map_or(SLICE, |d| d.saturating_duration_since(Instant::now()));
            match waiter.wait_entries(left.min(SLICE)) {
                Ok(Some(entries)) => kept.extend(entries),
                Ok(None) => {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        break Ok(());
                    }
                }
                Err(e) => break Err(e),
            }
        };
        kept.sort();
        let arrived = outcome.is_ok() && !kept.is_empty();
        let wake = outcome.map(|()| {
            if kept.is_empty() {
                Wake::TimedOut
            } else {
                Wake::Arrived(kept.iter().map(|e| e.id().clone()).collect())
            }
        });
        // A request dropped meanwhile leaves its arrivals for the next one.
        if reply.send(wake).is_ok() && arrived {
            kept.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::NewEvent;
    use chipset_store::StateDir;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    /// An arrival that a cancelled wait could not report is reported by the next.
    #[test]
    fn a_cancelled_wait_hands_its_arrival_to_the_next() {
        let tmp = tempfile::tempdir().unwrap();
        let bus = Bus::new(StateDir::open(tmp.path()).unwrap());
        let a = AgentId::new("a").unwrap();
        block_on(async {
            let mut waiter = bus.waiter_async(&a).await.unwrap();
            {
                // Polled once, then dropped: the request is cancelled.
                let wait = waiter.wait(Duration::from_secs(30));
                let mut wait = std::pin::pin!(wait);
                let waker = std::task::Waker::noop();
                let mut cx = std::task::Context::from_waker(waker);
                assert!(wait.as_mut().poll(&mut cx).is_pending());
            }
            let _ = bus.publish(&a, &NewEvent::new("w", "k")).unwrap();
            let wake = waiter.wait(Duration::from_secs(20)).await.unwrap();
            assert!(matches!(wake, Wake::Arrived(e) if e.len() == 1));
            let wake = waiter.wait(Duration::ZERO).await.unwrap();
            assert_eq!(wake, Wake::TimedOut);
        });
    }
}
