//! The async face of wake-ups (feature `tokio`): a [`Waiter`]'s watching
//! on a thread of its own, so a wait is awaited without blocking a runtime
//! thread.

use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use chipset_store::AgentId;
use tokio::sync::oneshot;

use crate::bus::Bus;
use crate::error::Result;
use crate::format::EventId;
use crate::name::QueueEntry;
use crate::wait::{At, Waiter, Watching};

/// How long the waiting thread blocks before it checks that the wait is
/// still wanted: a cancelled wait's thread is free again within this.
const SLICE: Duration = Duration::from_millis(200);

/// One wait, handed to the waiting thread.
#[derive(Debug)]
pub(crate) struct Request {
    timeout: Duration,
    reply: Reply,
}

/// Where the answer to a wait goes.
#[derive(Debug)]
enum Reply {
    /// To [`Waiter::wait`], which blocks for it.
    Blocking(std_mpsc::Sender<Result<Vec<EventId>>>),
    /// To [`Waiter::wait_async`], which may be dropped meanwhile.
    Async(oneshot::Sender<Result<Vec<EventId>>>),
}

impl Reply {
    /// Returns true when nobody waits for the answer any more.
    fn is_closed(&self) -> bool {
        match self {
            Reply::Blocking(_) => false,
            Reply::Async(tx) => tx.is_closed(),
        }
    }

    /// Sends the answer; false when nobody took it.
    fn send(self, answer: Result<Vec<EventId>>) -> bool {
        match self {
            Reply::Blocking(tx) => tx.send(answer).is_ok(),
            Reply::Async(tx) => tx.send(answer).is_ok(),
        }
    }
}

impl Bus {
    /// Returns a waiter on `agent`'s queue, as [`Bus::waiter`] does, without
    /// blocking: the queue is created and listed on the waiter's thread,
    /// not the caller's. Wait on it with [`Waiter::wait_async`].
    ///
    /// # Errors
    ///
    /// As [`Bus::waiter`]; [`Error::Store`](crate::Error::Store) when the
    /// thread cannot be started.
    pub async fn waiter_async(&self, agent: &AgentId) -> Result<Waiter> {
        let (started, ready) = oneshot::channel();
        let (requests, rx) = std_mpsc::channel();
        let bus = self.clone();
        let who = agent.clone();
        spawn(self, agent, move || match bus.watching(&who) {
            Ok(watching) => {
                let _ = started.send(Ok(watching.is_notified()));
                serve(watching, &rx);
            }
            Err(e) => {
                let _ = started.send(Err(e));
            }
        })?;
        let notified = ready.await.map_err(|_| gone(self, agent))??;
        Ok(Waiter {
            agent: agent.clone(),
            notified,
            at: At::Thread(requests),
        })
    }
}

impl Waiter {
    /// Waits as [`Waiter::wait`] does without blocking the calling thread:
    /// the first call moves the watching to a thread of its own, and each
    /// wait is awaited. Cancel-safe: an arrival is never lost to a dropped
    /// future, the next wait reports it. Dropping the waiter ends its thread.
    ///
    /// # Errors
    ///
    /// As [`Waiter::wait`]; [`Error::Store`](crate::Error::Store) when the
    /// waiter's thread cannot be started or has stopped.
    pub async fn wait_async(&mut self, timeout: Duration) -> Result<Vec<EventId>> {
        let (reply, rx) = oneshot::channel();
        let requests = self.thread()?;
        if requests
            .send(Request {
                timeout,
                reply: Reply::Async(reply),
            })
            .is_err()
        {
            return Err(stopped(&self.agent));
        }
        rx.await.map_err(|_| stopped(&self.agent))?
    }

    /// Returns the sender of wait requests to this waiter's thread, moving
    /// the watching there first when it is on the caller's.
    ///
    /// The thread starts before the watching leaves this waiter, so a
    /// thread that cannot start leaves the waiter as it was, still able to
    /// wait on the caller's thread.
    fn thread(&mut self) -> Result<&std_mpsc::Sender<Request>> {
        if let At::Here(watching) = &self.at {
            let bus = watching.bus().clone();
            let (requests, rx) = std_mpsc::channel();
            let (hand, handed) = std_mpsc::channel::<Box<Watching>>();
            spawn(&bus, &self.agent, move || {
                // Ends without serving only when the waiter never hands
                // the watching over, which it does right after the spawn.
                if let Ok(watching) = handed.recv() {
                    serve(*watching, &rx);
                }
            })?;
            let At::Here(watching) = std::mem::replace(&mut self.at, At::Thread(requests)) else {
                unreachable!("checked above");
            };
            // The thread is blocked on `handed`, so this send cannot fail.
            let _ = hand.send(watching);
        }
        match &self.at {
            At::Thread(requests) => Ok(requests),
            At::Here(_) => unreachable!("moved above"),
        }
    }
}

/// Hands one wait to the waiting thread and blocks for its answer.
pub(crate) fn wait_blocking(
    requests: &std_mpsc::Sender<Request>,
    agent: &AgentId,
    timeout: Duration,
) -> Result<Vec<EventId>> {
    let (reply, rx) = std_mpsc::channel();
    let request = Request {
        timeout,
        reply: Reply::Blocking(reply),
    };
    if requests.send(request).is_err() {
        return Err(stopped(agent));
    }
    rx.recv().map_err(|_| stopped(agent))?
}

fn stopped(agent: &AgentId) -> crate::Error {
    crate::Error::Store(chipset_store::Error::io(
        "wait for the events of",
        agent.as_str(),
        std::io::Error::other("the waiter thread has stopped"),
    ))
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

/// Serves wait requests until the [`Waiter`] is dropped. Arrivals a
/// cancelled request could not take are kept for the next one.
fn serve(mut watching: Watching, requests: &std_mpsc::Receiver<Request>) {
    let mut kept: Vec<QueueEntry> = Vec::new();
    while let Ok(Request { timeout, reply }) = requests.recv() {
        let deadline = Instant::now().checked_add(timeout);
        let outcome = loop {
            if !kept.is_empty() || reply.is_closed() {
                break Ok(());
            }
            let left = deadline.map_or(SLICE, |d| d.saturating_duration_since(Instant::now()));
            match watching.wait_entries(left.min(SLICE)) {
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
        let answer = outcome.map(|()| kept.iter().map(|e| e.id().clone()).collect());
        // A request dropped meanwhile leaves its arrivals for the next one.
        if reply.send(answer) && arrived {
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
                let wait = waiter.wait_async(Duration::from_secs(30));
                let mut wait = std::pin::pin!(wait);
                let waker = std::task::Waker::noop();
                let mut cx = std::task::Context::from_waker(waker);
                assert!(wait.as_mut().poll(&mut cx).is_pending());
            }
            let _ = bus.publish(&a, &NewEvent::new("w", "k")).unwrap();
            let arrived = waiter.wait_async(Duration::from_secs(20)).await.unwrap();
            assert_eq!(arrived.len(), 1);
            let arrived = waiter.wait_async(Duration::ZERO).await.unwrap();
            assert_eq!(arrived, []);
        });
    }

    /// A waiter made to block can be awaited, and blocked on again after:
    /// its watching moves to a thread once and reports each arrival once.
    #[test]
    fn a_blocking_waiter_is_awaited_and_blocked_on_again() {
        let tmp = tempfile::tempdir().unwrap();
        let bus = Bus::new(StateDir::open(tmp.path()).unwrap());
        let a = AgentId::new("a").unwrap();
        let mut waiter = bus.waiter(&a).unwrap();
        let _ = bus.publish(&a, &NewEvent::new("w", "one")).unwrap();
        let first = block_on(waiter.wait_async(Duration::from_secs(20))).unwrap();
        assert_eq!(first.len(), 1);
        assert!(matches!(waiter.at, At::Thread(_)));
        let _ = bus.publish(&a, &NewEvent::new("w", "two")).unwrap();
        let second = waiter.wait(Duration::from_secs(20)).unwrap();
        assert_eq!(second.len(), 1);
        assert_ne!(first, second);
        assert_eq!(waiter.wait(Duration::ZERO).unwrap(), []);
    }
}
