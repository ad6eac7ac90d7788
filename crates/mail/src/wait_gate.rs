//! Waiting for a task's commit gate to open: [`Mail::wait_gate`], and with
//! the `tokio` feature its async form, [`Mail::wait_gate_async`].
//!
//! The wait watches the folders where the answer can change, and reads the
//! gate again ([`Mail::pending_replies`]) after every wake. The watch is
//! set up before the read that decides to wait, so a change between the
//! read and the wait is never missed: it either shows in that read or wakes
//! the watch.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use chipset_backend::{Wait, Wake};
use chipset_store::TaskId;

use crate::error::Result;
use crate::format::Message;
use crate::layout::Location;
use crate::mail::Mail;
use crate::server::watch_failure;

/// How often a gate wait reads the gate whatever the notifications say:
/// the safety net for a lost notification, and the latency bound where
/// there are none. [`MailConfig`](crate::MailConfig) has no watch setting,
/// so this is the bus's default rescan
/// (`chipset_store::WatchConfig::default().rescan_interval`, 1 s): a wait
/// for a gate is short-lived and someone is waiting on it.
pub(crate) const GATE_RESCAN: Duration = Duration::from_secs(1);

/// The longest a blocking gate wait sleeps in one call of its watch.
const STEP: Duration = Duration::from_secs(60);

impl Mail {
    /// Waits until `task` may commit: returns as soon as
    /// [`Mail::pending_replies`] is empty (at once when it already is), or
    /// at `timeout` with the requests still waiting for a reply then.
    ///
    /// It watches the inboxes of each open request's addressee (`to`: the
    /// request archived or moved) and sender (`from`: a response delivered,
    /// by chipset or written straight in by another program, to this copy or
    /// to another copy of an `any` group), and `archive/` (a response
    /// archived by another program); on a server also the task's open
    /// requests. It reads the gate again after each wake, and at least
    /// every second. The watch is in place before the read that decides to
    /// wait, and is moved when the open requests' folders change, so no
    /// answer is missed.
    ///
    /// ```
    /// use std::time::Duration;
    /// use chipset_mail::{Mail, NewMessage};
    /// use chipset_store::{AgentId, StateDir, TaskId};
    ///
    /// let tmp = tempfile::tempdir()?;
    /// let mail = Mail::new(StateDir::open(tmp.path())?);
    /// let (critic, exec) = (AgentId::new("critic")?, AgentId::new("exec")?);
    /// let task = TaskId::new("t1")?;
    /// let q = mail.send(&NewMessage::request(critic.clone(), exec.clone(), task.clone(),
    ///     "dead-code", "did you mean it?"))?;
    ///
    /// // Nobody answers: at the timeout the request is still open.
    /// let open = mail.wait_gate(&task, Duration::from_millis(50))?;
    /// assert_eq!(open[0].id, q.id);
    ///
    /// // Answered from another thread: the wait returns as soon as it lands.
    /// let answerer = mail.clone();
    /// let answering = std::thread::spawn(move || {
    ///     answerer.send(&NewMessage::response(exec, critic, q.id, "dead-code", "yes"))
    /// });
    /// assert!(mail.wait_gate(&task, Duration::from_secs(30))?.is_empty());
    /// answering.join().expect("the answering thread")?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Mail::pending_replies`], which it fails closed as: an
    /// unreadable file is an error, never an empty list.
    /// [`Error::Store`](crate::Error::Store) when the watch cannot be set
    /// up on a directory; [`Error::Backend`](crate::Error::Backend) on a
    /// server.
    pub fn wait_gate(&self, task: &TaskId, timeout: Duration) -> Result<Vec<Message>> {
        self.wait_gate_while(task, timeout, STEP, || true)
    }

    /// [`Mail::wait_gate`], which also returns (with what is open then)
    /// once `wanted` says false, looking at it at least every `step`.
    pub(crate) fn wait_gate_while(
        &self,
        task: &TaskId,
        timeout: Duration,
        step: Duration,
        wanted: impl Fn() -> bool,
    ) -> Result<Vec<Message>> {
        let deadline = Instant::now().checked_add(timeout);
        let due = || deadline.is_some_and(|d| Instant::now() >= d);
        let mut open = self.pending_replies(task)?;
        // The folders watched, and the watch on them.
        let mut watch: Option<(BTreeSet<Location>, Box<dyn Wait>)> = None;
        loop {
            if open.is_empty() || due() || !wanted() {
                return Ok(open);
            }
            let places = places_of(&open);
            let Some((_, wait)) = watch.as_mut().filter(|(watched, _)| *watched == places) else {
                // Watch first, then read: a change after this read wakes
                // the watch; one before it shows in the read. When the read
                // finds requests in other folders, the loop watches those.
                let places: Vec<Location> = places.into_iter().collect();
                let wait = self.watch_places(&places, Some(task), GATE_RESCAN)?;
                watch = Some((places.into_iter().collect(), wait));
                open = self.pending_replies(task)?;
                continue;
            };
            let left = deadline.map_or(step, |d| d.saturating_duration_since(Instant::now()));
            match wait.wait(left.min(step)).map_err(watch_failure)? {
                // Nothing changed in this step; at the deadline one last
                // read, so what is returned is what is open then.
                Wake::TimedOut => {
                    if due() {
                        return self.pending_replies(task);
                    }
                }
                Wake::Changed | Wake::Rescan => open = self.pending_replies(task)?,
            }
        }
    }
}

/// The folders where the answer for `open` can change: each request's
/// addressee's and sender's inbox, and `archive/`.
fn places_of(open: &[Message]) -> BTreeSet<Location> {
    let mut places = BTreeSet::from([Location::Archive]);
    for q in open {
        places.insert(Location::Inbox(q.to.clone()));
        places.insert(Location::Inbox(q.from.clone()));
    }
    places
}

#[cfg(feature = "tokio")]
mod not_blocking {
    use std::time::Duration;

    use chipset_store::TaskId;
    use tokio::sync::oneshot;

    use crate::error::{Error, Result};
    use crate::format::Message;
    use crate::mail::Mail;

    /// How long the waiting thread blocks before it checks that the wait is
    /// still wanted: a dropped future's thread ends within this.
    const SLICE: Duration = Duration::from_millis(200);

    impl Mail {
        /// The async form of [`Mail::wait_gate`] (feature `tokio`): the same
        /// answer, without blocking the calling thread. The watch and the
        /// gate's reads (blocking file or database work) run on a thread of
        /// their own, as the bus's and the loop's async waits do, so any
        /// executor works, a current-thread runtime too. Dropping the
        /// future ends the thread soon after.
        ///
        /// # Errors
        ///
        /// As [`Mail::wait_gate`]; [`Error::Store`] when the thread cannot be
        /// started or stopped without an answer.
        pub async fn wait_gate_async(
            &self,
            task: &TaskId,
            timeout: Duration,
        ) -> Result<Vec<Message>> {
            let (reply, rx) = oneshot::channel();
            let mail = self.clone();
            let t = task.clone();
            std::thread::Builder::new()
                .name(format!("chipset-mail-gate-{task}"))
                .spawn(move || {
                    let answer = mail.wait_gate_while(&t, timeout, SLICE, || !reply.is_closed());
                    let _ = reply.send(answer);
                })
                .map_err(|e| self.thread_error(task, e))?;
            rx.await.map_err(|_| {
                self.thread_error(
                    task,
                    std::io::Error::other("the gate wait's thread stopped"),
                )
            })?
        }

        fn thread_error(&self, task: &TaskId, e: std::io::Error) -> Error {
            Error::Store(chipset_store::Error::io(
                "wait for the gate of",
                self.dir().join_id(task, "").as_path(),
                e,
            ))
        }
    }

    #[cfg(test)]
    mod tests {
        use std::time::Instant;

        use chipset_store::{AgentId, StateDir};

        use super::*;
        use crate::NewMessage;

        /// On a current-thread runtime the wait returns once another thread
        /// answers, and that thread answers only after a second future on
        /// the same runtime thread ran: a wait that blocked the thread
        /// would keep that future from running and time out.
        #[test]
        fn an_answer_from_another_thread_ends_the_async_wait() {
            let tmp = tempfile::tempdir().unwrap();
            let mail = Mail::new(StateDir::open(tmp.path()).unwrap());
            let (critic, exec) = (
                AgentId::new("critic").unwrap(),
                AgentId::new("exec").unwrap(),
            );
            let task = TaskId::new("t1").unwrap();
            let q = mail
                .send(&NewMessage::request(
                    critic.clone(),
                    exec.clone(),
                    task.clone(),
                    "q",
                    "?",
                ))
                .unwrap();
            assert_eq!(mail.pending_replies(&task).unwrap().len(), 1);
            let (go, went) = std::sync::mpsc::channel();
            let answerer = mail.clone();
            let answering = std::thread::spawn(move || {
                went.recv().unwrap();
                std::thread::sleep(Duration::from_millis(200));
                answerer
                    .send(&NewMessage::response(exec, critic, q.id, "q", "yes"))
                    .unwrap();
            });
            let runtime = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            let timeout = Duration::from_secs(10);
            let started = Instant::now();
            let (open, ()) = runtime.block_on(async {
                tokio::join!(mail.wait_gate_async(&task, timeout), async {
                    // Runs again only once the wait has let go of the thread.
                    tokio::task::yield_now().await;
                    go.send(()).unwrap();
                })
            });
            assert_eq!(open.unwrap(), []);
            assert!(started.elapsed() < timeout, "{:?}", started.elapsed());
            answering.join().unwrap();
        }
    }
}
