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

/// What the thread is asked.
enum Request {
    /// One wait.
    Wait {
        timeout: Duration,
        reply: oneshot::Sender<Result<Wake>>,
    },
    /// An answer a dropped future received but never read: kept for the
    /// next wait.
    Unread(Result<Wake>),
}

/// A wait's answer channel, which hands an answer that came but was never
/// read (the future was dropped) back to the thread.
struct Answer<'a> {
    rx: Option<oneshot::Receiver<Result<Wake>>>,
    requests: &'a mpsc::Sender<Request>,
}

impl Drop for Answer<'_> {
    fn drop(&mut self) {
        if let Some(mut rx) = self.rx.take() {
            // Closed first: the thread can no longer send, so an answer is
            // either here now or kept by the thread.
            rx.close();
            if let Ok(answer) = rx.try_recv()
                && !matches!(answer, Ok(Wake::TimedOut))
            {
                let _ = self.requests.send(Request::Unread(answer));
            }
        }
    }
}

/// The async form of a [`Wait`] (feature `tokio`), such as the watches of
/// every hook (`Hooks::watch`), an agent's nudges (`Nudges::watch`), the
/// work pool (`Pool::watch`) or an inbox (`Mail::watch_inbox`).
///
/// The blocking wait moves to a thread of its own, so awaiting
/// [`AsyncWait::wait`] never blocks a runtime thread, and any executor
/// works (a current-thread runtime too; no timer driver is needed).
/// Cancel-safe: a wake that comes for a future dropped before it read it
/// is kept and returned by the next wait, so a change is never missed.
/// Dropping the `AsyncWait` ends its thread soon after.
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
        if self
            .requests
            .send(Request::Wait { timeout, reply })
            .is_err()
        {
            return Err(stopped("it ended after an error"));
        }
        let mut answer = Answer {
            rx: Some(rx),
            requests: &self.requests,
        };
        let read = answer.rx.as_mut().expect("just set").await;
        answer.rx = None;
        read.map_err(|_| stopped("it ended after an error"))?
    }
}

/// Answers each request with what `wait` returns, in slices, until the
/// `AsyncWait` is dropped or the wait fails. A request whose future was
/// dropped before its turn is skipped at once. A change, a rescan or an
/// error that no one is waiting for any more (the future was dropped) is
/// kept for the next request that is still waited on; after an error is
/// handed over the thread ends.
fn serve(mut wait: Box<dyn Wait>, requests: &mpsc::Receiver<Request>) {
    let mut kept: Option<Result<Wake>> = None;
    for request in requests {
        let (timeout, reply) = match request {
            Request::Wait { timeout, reply } => (timeout, reply),
            Request::Unread(answer) => {
                kept.get_or_insert(answer);
                continue;
            }
        };
        if reply.is_closed() {
            continue;
        }
        let answer = match kept.take() {
            Some(answer) => answer,
            None => match slices(wait.as_mut(), timeout, &reply) {
                Some(answer) => answer,
                None => continue,
            },
        };
        let failed = answer.is_err();
        match reply.send(answer) {
            Ok(()) if failed => return,
            Ok(()) | Err(Ok(Wake::TimedOut)) => {}
            Err(unheard) => kept = Some(unheard),
        }
    }
}

/// Waits on `wait` for up to `timeout` in slices of at most [`SLICE`], and
/// returns what it answered other than a timeout before the deadline;
/// `None` when the request's future was dropped meanwhile.
fn slices(
    wait: &mut dyn Wait,
    timeout: Duration,
    reply: &oneshot::Sender<Result<Wake>>,
) -> Option<Result<Wake>> {
    let deadline = Instant::now().checked_add(timeout);
    loop {
        let left = deadline.map_or(SLICE, |d| d.saturating_duration_since(Instant::now()));
        match wait.wait(left.min(SLICE)) {
            Ok(Wake::TimedOut) if deadline.is_none_or(|d| Instant::now() < d) => {
                if reply.is_closed() {
                    return None;
                }
            }
            answer => return Some(answer),
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
        // A second wait dropped before its answer is read leaves it kept;
        // one whose first poll already found the kept answer read it (the
        // thread can answer within that poll). Either way the change is
        // handed over exactly once.
        let read_now = runtime().block_on(async {
            tokio::select! {
                biased;
                answer = wait.wait(Duration::from_secs(10)) => Some(answer.unwrap()),
                () = std::future::ready(()) => None,
            }
        });
        std::thread::sleep(Duration::from_millis(200));
        let next = runtime().block_on(wait.wait(Duration::from_millis(1)));
        let expected = match read_now {
            Some(answer) => {
                assert_eq!(answer, Wake::Changed);
                Wake::TimedOut
            }
            None => Wake::Changed,
        };
        assert_eq!(next.unwrap(), expected, "read at once: {read_now:?}");
        let after = runtime().block_on(wait.wait(Duration::from_millis(1)));
        assert_eq!(after.unwrap(), Wake::TimedOut);
    }
}
