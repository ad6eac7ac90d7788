//! The agent work loop (GUPP): pick up hooked work, run it with a handle
//! that keeps the hook fresh and answers nudges, complete it, report it.

use std::collections::VecDeque;
use std::time::Duration;

use chipset_hook::{Assignment, Pickup};
use chipset_mail::MessageId;
use chipset_mail::{Kind, Message};
use chipset_nudge::{Nudge, NudgeType, Received};
use chipset_store::{AgentId, ReadOutcome, Timestamp};

use crate::channels::Channels;
use crate::error::{Error, Result};
use crate::files::task_of;
use crate::format::{WORK_ASSIGNED_EVENT, WORK_ASSIGNMENT};

mod report;

pub(crate) use report::PendingReport;

/// The default minimum time between two hook touches from [`WorkHandle::checkpoint`]: 5 s.
pub(crate) const DEFAULT_TOUCH_EVERY: Duration = Duration::from_secs(5);
/// The default time [`Worker::run_until`] waits for a wake-up before polling its hook again: 1 s.
pub(crate) const DEFAULT_POLL_EVERY: Duration = Duration::from_secs(1);

/// How a worker paces itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerConfig {
    /// The least time between two touches of the hook by
    /// [`WorkHandle::checkpoint`] (nudges are read at every checkpoint).
    /// Keep it well under the witness's stall threshold. Default 5 s.
    pub touch_every: Duration,
    /// How long [`Worker::run_until`] waits on the bus for a wake-up before
    /// polling the hook anyway (the safety net). Default 1 s.
    pub poll_every: Duration,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            touch_every: DEFAULT_TOUCH_EVERY,
            poll_every: DEFAULT_POLL_EVERY,
        }
    }
}

/// Why the work must stop: what [`WorkHandle::checkpoint`] returns, and what
/// the caller's work returns to stop early.
#[derive(Debug)]
#[non_exhaustive]
pub enum Stop {
    /// An `abort` nudge sent after the work was assigned: stop cooperatively.
    Aborted(Box<Nudge>),
    /// The work was taken away (the hook was cleared or reassigned): it can
    /// no longer be completed.
    TakenAway,
    /// The caller's work failed; the hook stays active, so the next pickup
    /// resumes it (GUPP: hooked work is never declined).
    Failed(String),
    /// A channel operation failed.
    Error(Box<Error>),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        if taken_away(&e) {
            Stop::TakenAway
        } else {
            Stop::Error(Box::new(e))
        }
    }
}

/// Returns true when `e` says the work was taken away: the loop's
/// [`Error::Stale`], or the hook's refusal of a stale assignment.
fn taken_away(e: &Error) -> bool {
    matches!(
        e,
        Error::Stale { .. } | Error::Hook(chipset_hook::Error::StaleAssignment { .. })
    )
}

/// What one [`Worker::run_once`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
#[non_exhaustive]
pub enum WorkOutcome {
    /// Nothing is hooked.
    Idle,
    /// The hook holds completed work waiting for the dispatcher's clear.
    AwaitingClear(Assignment),
    /// The work ran, the hook is completed, and the `completion_report` mail
    /// went to the dispatcher (with a high-priority bus event). A report
    /// that a failure held back goes out at a later call, which returns
    /// what it finds then (often [`WorkOutcome::AwaitingClear`]).
    Completed {
        /// The assignment completed.
        assignment: Assignment,
        /// The completion report.
        report: MessageId,
        /// When the hook was completed.
        completed_at: Timestamp,
    },
    /// An `abort` stopped the work; the hook was left for the dispatcher.
    Aborted {
        /// The assignment.
        assignment: Assignment,
        /// The abort.
        nudge: Nudge,
    },
    /// The caller's work failed; the hook stays active and the next pickup resumes it.
    Failed {
        /// The assignment.
        assignment: Assignment,
        /// What the work said.
        reason: String,
    },
}

/// An agent's side of the work loop: GUPP on its hook, nudges answered.
///
/// Cheap to clone.
#[derive(Debug, Clone)]
pub struct Worker {
    me: AgentId,
    dispatcher: AgentId,
    config: WorkerConfig,
    channels: Channels,
}

impl Worker {
    /// Returns the work loop of agent `me`, reporting to `dispatcher`,
    /// working through `channels`: a [`StateDir`](chipset_store::StateDir) for every channel with
    /// its default config, or [`Channels`] you configured (so their configs
    /// apply: the completion report goes through its
    /// [`Mail`](chipset_mail::Mail), the wake-ups through its
    /// [`Bus`](chipset_bus::Bus)).
    pub fn new(
        channels: impl Into<Channels>,
        me: AgentId,
        dispatcher: AgentId,
        config: WorkerConfig,
    ) -> Self {
        let channels = channels.into();
        Worker {
            me,
            dispatcher,
            config,
            channels,
        }
    }

    /// Reads and answers the agent's nudge while it holds no work (or
    /// between pieces of work): answers those that require it, marks it
    /// processed, and returns the signals for the caller. An `abort` with no
    /// work to stop is only marked processed.
    ///
    /// # Errors
    ///
    /// Channel errors.
    fn answer_nudges(&self) -> Result<Vec<ReadOutcome<Nudge>>> {
        let mut out = Vec::new();
        let _ = self.process_nudge(None, &mut out)?;
        Ok(out)
    }

    /// GUPP, once: picks up the hooked work (pending work is activated,
    /// active work of an earlier life is resumed) and runs `work` with a
    /// [`WorkHandle`]. When `work` returns `Ok(summary)`, keeps the report
    /// in `loop/worker/reports/{agent}.json`, completes the hook and sends
    /// the `completion_report` mail (notify) to the dispatcher, under an id
    /// fixed by the assignment, plus a high-priority `work-completed` bus
    /// event to wake it; then removes the record. A report a failure or a
    /// crash left undelivered is sent first, before the pickup (late, if
    /// the dispatcher has cleared the hook meanwhile), so no summary is
    /// lost and none is sent twice.
    ///
    /// # Errors
    ///
    /// [`Error::Stale`] when the work was taken away before it completed
    /// (nothing is reported as done); [`Error::Hook`] with a corrupt hook;
    /// [`Error::PartlyDone`] when a step failed after the hook was
    /// completed (or a nudge was answered): call again, and the report
    /// kept goes out; [`Error::Corrupt`] with an unreadable report record;
    /// channel errors, and the error of a [`Stop::Error`].
    pub fn run_once<F>(&self, work: F) -> Result<WorkOutcome>
    where
        F: FnOnce(&mut WorkHandle<'_>) -> std::result::Result<String, Stop>,
    {
        // A report a failure or a crash left undelivered goes first.
        self.deliver_pending()?;
        let pickup = self.channels.hooks.pickup(&self.me)?;
        let (assignment, resumed) = match pickup {
            Pickup::Idle => {
                let _ = self.answer_nudges()?;
                return Ok(WorkOutcome::Idle);
            }
            Pickup::AwaitingClear(a) => {
                let _ = self.answer_nudges()?;
                return Ok(WorkOutcome::AwaitingClear(a));
            }
            Pickup::Started(a) => (a, false),
            Pickup::Resumed(a) => (a, true),
            // A pickup this version does not know: nothing it can execute.
            _ => {
                let _ = self.answer_nudges()?;
                return Ok(WorkOutcome::Idle);
            }
        };
        tracing::info!(agent = %self.me, bead = %assignment.work.bead_id, resumed, "work picked up");
        let mut handle = WorkHandle {
            worker: self,
            last_touch: self.channels.hooks.state().now(),
            assignment,
            resumed,
            stop: None,
            signals: VecDeque::new(),
        };
        let result = match handle.read_nudges() {
            Err(stop) => Err(stop),
            Ok(_) => work(&mut handle),
        };
        let assignment = handle.assignment.clone();
        match result {
            Ok(summary) => self.complete(assignment, summary),
            Err(Stop::Aborted(nudge)) => Ok(WorkOutcome::Aborted {
                assignment,
                nudge: *nudge,
            }),
            Err(Stop::TakenAway) => Err(Error::Stale {
                assignment: Box::new(assignment),
            }),
            Err(Stop::Failed(reason)) => Ok(WorkOutcome::Failed { assignment, reason }),
            Err(Stop::Error(e)) => Err(*e),
        }
    }

    /// Runs [`Worker::run_once`] over and over, waiting on the agent's bus
    /// queue (a `work-assigned` event wakes it at once) or
    /// [`WorkerConfig::poll_every`] between idle polls, until `until` says
    /// stop. `until` sees every result; an error other than [`Error::Stale`]
    /// ends the loop after `until` has seen it (taken-away work does not: the
    /// agent goes back to its hook for the next work). Work stopped by an
    /// `abort` is not picked up again while the hook still holds it: the
    /// worker is idle (and `until` sees [`WorkOutcome::Idle`]) until the
    /// dispatcher clears or reassigns it.
    ///
    /// # Errors
    ///
    /// The first error other than [`Error::Stale`].
    pub fn run_until<F>(
        &self,
        mut work: F,
        mut until: impl FnMut(&Result<WorkOutcome>) -> bool,
    ) -> Result<()>
    where
        F: FnMut(&mut WorkHandle<'_>) -> std::result::Result<String, Stop>,
    {
        let mut waiter = self.channels.bus.waiter(&self.me)?;
        // Work stopped by an abort stays on the hook for the dispatcher; the
        // worker must not pick it up again, so it idles until the hook changes.
        let mut aborted: Option<Assignment> = None;
        loop {
            self.ack_wakeups()?;
            if let Some(held) = &aborted {
                match self.channels.hooks.current(&self.me)? {
                    Some(current) if crate::witness::same_assignment(&current, held) => {
                        if until(&Ok(WorkOutcome::Idle)) {
                            return Ok(());
                        }
                        let _ = waiter.wait(self.config.poll_every)?;
                        continue;
                    }
                    _ => aborted = None,
                }
            }
            let result = self.run_once(&mut work);
            if let Ok(WorkOutcome::Aborted { assignment, .. }) = &result {
                aborted = Some(assignment.clone());
            }
            let idle = matches!(
                result,
                Ok(WorkOutcome::Idle | WorkOutcome::AwaitingClear(_) | WorkOutcome::Aborted { .. })
            );
            let stop = until(&result);
            match result {
                Err(e) if !taken_away(&e) => return Err(e),
                _ if stop => return Ok(()),
                _ => {}
            }
            if idle {
                let _ = waiter.wait(self.config.poll_every)?;
            }
        }
    }

    /// Acknowledges the `work-assigned` wake-ups in the agent's queue.
    fn ack_wakeups(&self) -> Result<()> {
        for event in self.channels.bus.pending(&self.me)?.events {
            if event.kind == WORK_ASSIGNED_EVENT {
                let _ = self.channels.bus.ack_event(&self.me, &event)?;
            }
        }
        Ok(())
    }

    /// Archives the bead's `work-assignment` mail once the work is done
    /// (tidying only: a failure is logged, never reported as a failed completion).
    fn archive_assignment_mail(&self, a: &Assignment) {
        let Ok(task) = task_of(&a.work.bead_id) else {
            return;
        };
        match self.channels.mail.inbox(&self.me) {
            Ok(messages) => {
                for m in messages.iter().filter(|m| {
                    m.kind == Kind::Notify && *m.task() == task && m.subject == WORK_ASSIGNMENT
                }) {
                    if let Err(e) = self.channels.mail.archive(&m.id) {
                        tracing::warn!(id = %m.id, error = %e, "could not archive the work assignment");
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not read the inbox to archive the work assignment")
            }
        }
    }

    /// Processes the agent's latest nudge, if new: answers it when it
    /// requires an answer, marks it processed, and returns its type and an
    /// abort that stops `current` (an abort older than the assignment is stale).
    fn process_nudge(
        &self,
        current: Option<&Assignment>,
        signals: &mut Vec<ReadOutcome<Nudge>>,
    ) -> Result<(Option<NudgeType>, Option<Nudge>)> {
        let received = match self.channels.nudges.receive(&self.me) {
            // Whether the latest nudge was processed cannot be told.
            Err(chipset_nudge::Error::Store(chipset_store::Error::Unsupported(u))) => {
                signals.push(ReadOutcome::Unsupported(u));
                return Ok((None, None));
            }
            other => other?,
        };
        let nudge = match received {
            ReadOutcome::Value(Received::New(n) | Received::Unsure { nudge: n, .. }) => n,
            ReadOutcome::Corrupt(c) => {
                signals.push(ReadOutcome::Corrupt(c));
                return Ok((None, None));
            }
            ReadOutcome::Unsupported(u) => {
                signals.push(ReadOutcome::Unsupported(u));
                return Ok((None, None));
            }
            // Empty, seen, or a variant a newer chipset-nudge adds.
            _ => return Ok((None, None)),
        };
        let mut stop = None;
        match nudge.kind {
            NudgeType::Abort => match current {
                Some(a) if nudge.timestamp >= a.work.assigned_at => stop = Some(nudge.clone()),
                _ => tracing::info!(agent = %self.me, "abort older than the current work: ignored"),
            },
            NudgeType::HealthCheck | NudgeType::StallWarning | NudgeType::NudgeResponse => {}
            // `priority_change`, `sync_request` and types this version does
            // not act on: the work's to act on.
            _ => signals.push(ReadOutcome::Value(nudge.clone())),
        }
        let mut responded = false;
        if nudge.requires_response {
            let text = match (current, &stop) {
                (Some(a), None) => format!("Acknowledged. Working on {}.", a.work.bead_id),
                (Some(a), Some(_)) => format!("Aborting {}.", a.work.bead_id),
                (None, _) => "Acknowledged. Idle.".to_owned(),
            };
            match self.channels.nudges.respond(&self.me, &nudge, text) {
                Ok(_) => responded = true,
                Err(chipset_nudge::Error::InvalidSender { from }) => {
                    tracing::warn!(from, "cannot answer a nudge from an invalid sender");
                }
                Err(e) => return Err(e.into()),
            }
        }
        // After a response a failure is partly done: the nudge is
        // answered, and the retry answers it again as the same response.
        if let Err(e) = self.channels.nudges.mark_processed(&self.me, &nudge) {
            let e = Error::from(e);
            return Err(if responded {
                Error::partly("nudge answer", e)
            } else {
                e
            });
        }
        Ok((Some(nudge.kind), stop))
    }
}

/// What the caller's work holds while it runs: the assignment, the
/// heartbeat and the nudges.
///
/// Call [`WorkHandle::checkpoint`] regularly (between steps of the work): it
/// answers nudges, touches the hook (at most every
/// [`WorkerConfig::touch_every`]) and says when to stop.
#[derive(Debug)]
pub struct WorkHandle<'w> {
    worker: &'w Worker,
    assignment: Assignment,
    resumed: bool,
    last_touch: Timestamp,
    stop: Option<Nudge>,
    signals: VecDeque<ReadOutcome<Nudge>>,
}

impl WorkHandle<'_> {
    /// Returns the assignment being worked on.
    pub fn assignment(&self) -> &Assignment {
        &self.assignment
    }

    /// Returns true when the work was already active at pickup (the agent
    /// restarted mid-work): continue it rather than start over.
    pub fn resumed(&self) -> bool {
        self.resumed
    }

    /// Returns (and forgets) the signals received so far, in arrival
    /// order: the nudges for the work to act on (`priority_change`,
    /// `sync_request` and types the worker does not handle itself; an
    /// `abort` stops the work instead), as the store's [`ReadOutcome`] of
    /// the agent's `latest.json`. [`ReadOutcome::Corrupt`] or
    /// [`ReadOutcome::Unsupported`] say the file (or its `processed.json`)
    /// cannot be used, since a nudge (even an abort) may be behind it. Work
    /// goes on then (the hook's fence still stops a taken-away
    /// completion); the doctor repairs a corrupt file and leaves an
    /// unsupported one for the program that wrote it. No signal is
    /// [`ReadOutcome::Missing`].
    pub fn take_signals(&mut self) -> Vec<ReadOutcome<Nudge>> {
        self.signals.drain(..).collect()
    }

    /// Reads the nudge, answers it, and touches the hook when
    /// [`WorkerConfig::touch_every`] has passed (or a `stall_warning` came).
    ///
    /// # Errors
    ///
    /// [`Stop::Aborted`] after an `abort`; [`Stop::TakenAway`] when the hook
    /// no longer holds the work; [`Stop::Error`] when a channel fails.
    /// Return it from the work to stop.
    pub fn checkpoint(&mut self) -> std::result::Result<(), Stop> {
        let warned = self.read_nudges()?;
        let now = self.worker.channels.hooks.state().now();
        if warned || now.since(self.last_touch) >= self.worker.config.touch_every {
            self.touch()?;
        }
        Ok(())
    }

    /// Touches the hook now and reads the nudge.
    ///
    /// # Errors
    ///
    /// As [`WorkHandle::checkpoint`].
    pub fn heartbeat(&mut self) -> std::result::Result<(), Stop> {
        self.read_nudges()?;
        self.touch()
    }

    /// Returns the unarchived mail about this work item in the agent's inbox
    /// (the `work-assignment` and any follow-ups), in send order.
    ///
    /// # Errors
    ///
    /// [`Error::Mail`], including a corrupt inbox file.
    pub fn context(&self) -> Result<Vec<Message>> {
        let task = task_of(&self.assignment.work.bead_id)?;
        let mut messages = self.worker.channels.mail.inbox(&self.worker.me)?;
        messages.retain(|m| *m.task() == task);
        Ok(messages)
    }

    fn touch(&mut self) -> std::result::Result<(), Stop> {
        match self.worker.channels.hooks.touch(&self.assignment) {
            Ok(hook) => {
                self.last_touch = hook.last_activity;
                Ok(())
            }
            Err(e) => Err(Error::from(e).into()),
        }
    }

    /// Returns true when a stall warning came (the seed: update the activity).
    fn read_nudges(&mut self) -> std::result::Result<bool, Stop> {
        if let Some(n) = &self.stop {
            return Err(Stop::Aborted(Box::new(n.clone())));
        }
        let mut signals = Vec::new();
        let (kind, stop) = self
            .worker
            .process_nudge(Some(&self.assignment), &mut signals)?;
        let warned = kind == Some(NudgeType::StallWarning);
        self.signals.extend(signals);
        if let Some(n) = stop {
            self.stop = Some(n.clone());
            return Err(Stop::Aborted(Box::new(n)));
        }
        Ok(warned)
    }
}
