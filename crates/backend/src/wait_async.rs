//! [`AsyncWait`]: a [`Wait`] awaited without blocking a runtime thread
//! (feature `tokio`).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::error::{Error, Result};
use crate::seam::{Wait, Wake};

/// How long the thread blocks in one call of the inner wait, at most: how
/// soon it notices a dropped future or a dropped [`AsyncWait`].
const SLICE: Duration = Duration::from_millis(100);

/// One wait asked of the thread.
struct Request {
    timeout: Duration,
    reply: oneshot::Sender<Result<Wake>>,
}

/// The async form of a [`Wait`] (feature `tokio`), such as the watches of
/// every hook (`Hooks::watch`), an agent's nudges (`Nudges::watch`), the
/// work pool (`Pool::watch`) or an inbox (`Mail::watch_inbox`).
///
/// The blocking wait moves to a thread of its own, so awaiting
/// [`AsyncWait::wait`] never blocks a runtime thread, and any executor
/// works (a current-thread runtime too; no timer driver is needed).
/// Cancel-safe: a wake that comes for a future already dropped is kept
/// and returned by the next wait, so a change is never missed. Dropping
/// the `AsyncWait` ends its thread soon after.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use chipset_backend::{AsyncWait, Backend, Dir, FsBackend, Wake};
///
/// let tmp = tempfile::tempdir()?;
/// let backend = FsBackend::new(chipset_store::StateDir::open(tmp.path())?);
/// let watch = backend.watch(&[Dir::new("hooks")?], Duration::from_secs(60))?;
/// let mut wait = AsyncWait::new(watch)?;
/// let runtime = tokio::runtime::Builder::new_current_thread().build()?;
/// let wake = runtime.block_on(wait.wait(Duration::from_millis(20)))?;
/// assert_eq!(wake, Wake::TimedOut);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct AsyncWait {
    requests: mpsc::Sender<Request>,
}

impl AsyncWait {
    /// Moves `wait` to a thread of its own and returns its async form.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the thread cannot be started.
    pub fn new(wait: Box<dyn Wait>) -> Result<Self> {
        let (requests, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("chipset-wait".to_owned())
            .spawn(move || serve(wait, &rx))
            .map_err(|e| stopped(&format!("cannot start it: {e}")))?;
        Ok(AsyncWait { requests })
    }

    /// Waits as [`Wait::wait`] does, without blocking the calling thread:
    /// until something changes in a watched folder, a rescan is due, or
    /// `timeout` passes.
    ///
    /// # Errors
    ///
    /// As [`Wait::wait`]; [`Error::Store`] when the wait's thread stopped
    /// (an earlier error ended it).
    pub async fn wait(&mut self, timeout: Duration) -> Result<Wake> {
        let (reply, rx) = oneshot::channel();
        if self.requests.send(Request { timeout, reply }).is_err() {
            return Err(stopped("it ended after an error"));
        }
        rx.await.map_err(|_| stopped("it ended after an error"))?
    }
}

/// Answers each request with what `wait` returns, in slices, until the
/// `AsyncWait` is dropped or the wait fails. A change or a rescan that no
/// one is waiting for any more (the future was dropped) is kept for the
/// next request.
fn serve(mut wait: Box<dyn Wait>, requests: &mpsc::Receiver<Request>) {
    let mut kept: Option<Wake> = None;
    for Request { timeout, reply } in requests {
        if let Some(wake) = kept.take() {
            let _ = reply.send(Ok(wake));
            continue;
        }
        let deadline = Instant::now().checked_add(timeout);
        let answer = loop {
            let left = deadline.map_or(SLICE, |d| d.saturating_duration_since(Instant::now()));
            match wait.wait(left.min(SLICE)) {
                Ok(Wake::TimedOut) if deadline.is_none_or(|d| Instant::now() < d) => {
                    if reply.is_closed() {
                        break None;
                    }
                }
                answer => break Some(answer),
            }
        };
        let Some(answer) = answer else {
            continue;
        };
        let failed = answer.is_err();
        if let Err(Ok(wake @ (Wake::Changed | Wake::Rescan))) = reply.send(answer) {
            kept = Some(wake);
        }
        if failed {
            return;
        }
    }
}

/// The error for a wait whose thread cannot start or has stopped.
fn stopped(why: &str) -> Error {
    Error::Store {
        op: "wait on",
        key: "the watched folders".to_owned(),
        source: chipset_store::Error::io(
            "run the thread of",
            "a wait",
            std::io::Error::other(why.to_owned()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wait that sees one change at `at`.
    #[derive(Debug)]
    struct ChangeAt {
        at: Instant,
        seen: bool,
    }

    impl Wait for ChangeAt {
        fn wait(&mut self, timeout: Duration) -> Result<Wake> {
            if !self.seen {
                let left = self.at.saturating_duration_since(Instant::now());
                std::thread::sleep(left.min(timeout));
                if Instant::now() >= self.at {
                    self.seen = true;
                    return Ok(Wake::Changed);
                }
            } else {
                std::thread::sleep(timeout);
            }
            Ok(Wake::TimedOut)
        }
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    }

    /// A change that comes after the future waiting for it was dropped is
    /// kept, and the next wait returns it at once.
    #[test]
    fn a_change_for_a_dropped_wait_is_kept_for_the_next() {
        let at = Instant::now() + Duration::from_millis(50);
        let mut wait = AsyncWait::new(Box::new(ChangeAt { at, seen: false })).unwrap();
        runtime().block_on(async {
            tokio::select! {
                biased;
                _ = wait.wait(Duration::from_secs(10)) => panic!("nothing changed yet"),
                () = std::future::ready(()) => {}
            }
        });
        std::thread::sleep(Duration::from_millis(400));
        let next = runtime().block_on(wait.wait(Duration::from_millis(1)));
        assert_eq!(next.unwrap(), Wake::Changed);
        let after = runtime().block_on(wait.wait(Duration::from_millis(1)));
        assert_eq!(after.unwrap(), Wake::TimedOut);
    }
}
