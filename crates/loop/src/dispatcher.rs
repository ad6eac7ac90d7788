//! The dispatcher: assigns work items to idle agents, verifies and clears
//! completed work, and takes work away from silent agents. Its ledger under
//! `loop/dispatcher/` makes every multi-step change resumable.

use std::collections::{BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chipset_bus::{Bus, NewEvent};
use chipset_hook::{Assignment, HookRead, HookStatus, Hooks, TransitionError};
use chipset_mail::{Draft, InboxFilter, Kind, Mail, MailError, Message};
use chipset_nudge::{Draft as NudgeDraft, NudgeType, Nudges};
use chipset_store::{AgentId, BeadId, Corruption, MessageId, SortableId, StateDir, Timestamp};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::files::{Files, Locked, task_of};
use crate::format::{
    AgentBook, Attempt, AttemptOutcome, BeadState, COMPLETION_REPORT, HEALTH_ESCALATION,
    LedgerEntry, LoopMessage, Suspension, WORK_ASSIGNED_EVENT, WORK_ASSIGNMENT,
    WORK_COMPLETED_EVENT,
};
use crate::witness::same_assignment;

/// The default time [`Dispatcher::run_until`] waits for a wake-up before ticking anyway: 1 s.
pub const DEFAULT_DISPATCH_POLL: Duration = Duration::from_secs(1);

/// How a dispatcher paces itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DispatcherConfig {
    /// How long [`Dispatcher::run_until`] waits on the bus for a wake-up
    /// before ticking anyway (the safety net). Default 1 s.
    pub poll_every: Duration,
}

impl Default for DispatcherConfig {
    fn default() -> Self {
        DispatcherConfig {
            poll_every: DEFAULT_DISPATCH_POLL,
        }
    }
}

impl DispatcherConfig {
    /// Returns this config with the poll pace set.
    #[must_use]
    pub fn with_poll_every(mut self, every: Duration) -> Self {
        self.poll_every = every;
        self
    }
}

/// Why the dispatcher ignored a report or an escalation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum IgnoreReason {
    /// The bead is not in the ledger.
    UnknownBead,
    /// The bead was completed already, by another assignment.
    AlreadyDone,
    /// The report or escalation is about an assignment that is no longer current.
    NotCurrent,
    /// A completion report, but the hook does not show the work completed.
    NotCompleted,
}

/// What the dispatcher did in one tick, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
#[non_exhaustive]
pub enum DispatchAction {
    /// A work item went onto an idle agent's hook, with a `work-assignment` mail.
    Assigned {
        /// The bead.
        bead_id: BeadId,
        /// The agent.
        agent: AgentId,
        /// The hook generation.
        generation: u64,
        /// The `work-assignment` mail.
        mail: MessageId,
        /// When.
        at: Timestamp,
    },
    /// A completion was verified on the hook and the hook cleared: the bead is done.
    Completed {
        /// The bead.
        bead_id: BeadId,
        /// The agent that completed it.
        agent: AgentId,
        /// The hook generation.
        generation: u64,
        /// When.
        at: Timestamp,
    },
    /// After an escalation, the work was taken away from the silent agent
    /// (fenced: it can no longer complete it) and queued again; the agent
    /// is suspended and sent an `abort`.
    Reassigned {
        /// The bead.
        bead_id: BeadId,
        /// The silent agent.
        from: AgentId,
        /// The generation taken away.
        generation: u64,
        /// When.
        at: Timestamp,
    },
    /// The hook stopped holding the assignment without a completion (someone
    /// else cleared or reassigned it): the bead was queued again.
    Requeued {
        /// The bead.
        bead_id: BeadId,
        /// The agent whose hook let go of it.
        agent: AgentId,
        /// The generation.
        generation: u64,
        /// When.
        at: Timestamp,
    },
    /// A report or escalation that changes nothing.
    Ignored {
        /// What it said.
        kind: String,
        /// The bead.
        bead_id: BeadId,
        /// The agent it named.
        agent: AgentId,
        /// The generation it named.
        generation: u64,
        /// Why.
        reason: IgnoreReason,
    },
    /// A file or message that could not be read; it was left alone (a mail
    /// with an unreadable body is archived, so it is seen once).
    Unreadable {
        /// The file or message.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// The dispatcher ledger as read: entries by submission, and unreadable files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Ledger {
    /// Every readable entry, by submission time then bead.
    pub entries: Vec<LedgerEntry>,
    /// Entries that could not be read (never taken as absent).
    pub corrupt: Vec<Corruption>,
}

/// The dispatcher: owns the assignment of work items to a pool of agents.
///
/// Cheap to clone (clones share the cache of finished beads).
#[derive(Debug, Clone)]
pub struct Dispatcher {
    me: AgentId,
    pool: Vec<AgentId>,
    config: DispatcherConfig,
    hooks: Hooks,
    nudges: Nudges,
    mail: Mail,
    bus: Bus,
    files: Files,
    finished: Arc<Mutex<BTreeSet<BeadId>>>,
}

impl Dispatcher {
    /// Returns the dispatcher `me` over the agents of `pool` (assigned in
    /// that order of preference).
    pub fn new(
        state: StateDir,
        me: AgentId,
        pool: impl IntoIterator<Item = AgentId>,
        config: DispatcherConfig,
    ) -> Self {
        Dispatcher {
            me,
            pool: pool.into_iter().collect(),
            config,
            hooks: Hooks::new(state.clone()),
            nudges: Nudges::new(state.clone()),
            mail: Mail::new(state.clone()),
            bus: Bus::new(state.clone()),
            files: Files::new(state),
            finished: Arc::default(),
        }
    }

    /// Returns the dispatcher's agent id.
    pub fn id(&self) -> &AgentId {
        &self.me
    }

    /// Returns the agent pool.
    pub fn pool(&self) -> &[AgentId] {
        &self.pool
    }

    /// Adds a work item to the ledger, queued. It is assigned by a later
    /// [`Dispatcher::tick`].
    ///
    /// # Errors
    ///
    /// [`Error::AlreadySubmitted`] when the bead is in the ledger already
    /// (whatever its state: a bead is done at most once); [`Error::Store`].
    pub fn submit(&self, bead: BeadId, title: impl Into<String>) -> Result<LedgerEntry> {
        let now = self.files.state.now();
        let entry = LedgerEntry {
            bead_id: bead.clone(),
            title: title.into(),
            submitted_at: now,
            state: BeadState::Queued,
            attempts: Vec::new(),
            updated_at: now,
        };
        match self
            .files
            .state
            .create_new_json(&self.files.bead(&bead), &entry)
        {
            Ok(()) => Ok(entry),
            Err(chipset_store::Error::AlreadyExists { .. }) => {
                Err(Error::AlreadySubmitted { bead })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Reads one ledger entry.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] when it is unreadable; [`Error::Store`].
    pub fn entry(&self, bead: &BeadId) -> Result<Option<LedgerEntry>> {
        self.files.read(&self.files.bead(bead))
    }

    /// Reads the whole ledger.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the directory cannot be listed.
    pub fn ledger(&self) -> Result<Ledger> {
        let mut ledger = Ledger::default();
        for name in self.files.state.list(&self.files.beads_dir())? {
            let Some(bead) = name.strip_suffix(".json").and_then(|b| BeadId::new(b).ok()) else {
                continue;
            };
            match self.entry(&bead) {
                Ok(Some(e)) => ledger.entries.push(e),
                Ok(None) => {}
                Err(Error::Corrupt(c)) => ledger.corrupt.push(c),
                Err(e) => return Err(e),
            }
        }
        ledger
            .entries
            .sort_by(|a, b| (a.submitted_at, &a.bead_id).cmp(&(b.submitted_at, &b.bead_id)));
        Ok(ledger)
    }

    /// Returns the agents given no new work (escalated as silent).
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`]; [`Error::Store`].
    pub fn suspended(&self) -> Result<AgentBook> {
        Ok(self.files.read(&self.files.agents())?.unwrap_or_default())
    }

    /// Gives `agent` work again after a suspension. Returns false when it
    /// was not suspended.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`]; [`Error::Store`].
    pub fn reinstate(&self, agent: &AgentId) -> Result<bool> {
        let mut locked = self.files.lock::<AgentBook>(&self.files.agents())?;
        let mut book = locked.current.clone().unwrap_or_default();
        if book.suspended.remove(agent).is_none() {
            return Ok(false);
        }
        locked.write(book)?;
        Ok(true)
    }

    /// Does everything that is due, at the state clock's now: handles the
    /// completion reports and escalations in the dispatcher's inbox and bus
    /// queue, finishes changes a crashed predecessor started, verifies and
    /// clears completed hooks even without a report, and assigns queued
    /// work to idle agents. Returns what it did; the actions are also
    /// appended to `loop/dispatcher/log.jsonl`.
    ///
    /// Every report, event and change is idempotent against the ledger, so
    /// a report seen twice (by mail and by bus) completes a bead once.
    ///
    /// # Errors
    ///
    /// Channel errors. Changes made before the error stay made and are
    /// consistent; the next tick goes on from them.
    pub fn tick(&self) -> Result<Vec<DispatchAction>> {
        let now = self.files.state.now();
        let mut actions = Vec::new();
        self.read_mail(now, &mut actions)?;
        self.read_bus(now, &mut actions)?;
        let queued = self.sweep(now, &mut actions)?;
        self.assign_queued(queued, now, &mut actions)?;
        self.files.append(&self.files.dispatcher_log(), &actions)?;
        Ok(actions)
    }

    /// Ticks until `until` says stop, waiting on the dispatcher's bus queue
    /// between ticks (an escalation or a completion wakes it at once), or at
    /// most [`DispatcherConfig::poll_every`]. A blocking convenience for a
    /// dispatcher thread or process.
    ///
    /// # Errors
    ///
    /// As [`Dispatcher::tick`].
    pub fn run_until(&self, mut until: impl FnMut(&[DispatchAction]) -> bool) -> Result<()> {
        let mut waiter = self.bus.waiter(&self.me)?;
        loop {
            let actions = self.tick()?;
            if until(&actions) {
                return Ok(());
            }
            let _ = waiter.wait(self.config.poll_every)?;
        }
    }

    fn read_mail(&self, now: Timestamp, actions: &mut Vec<DispatchAction>) -> Result<()> {
        let inbox = match self.mail.inbox(&self.me, &InboxFilter::default()) {
            Ok(inbox) => inbox,
            Err(MailError::Corrupt(c)) => {
                actions.push(unreadable(&c));
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        for m in inbox {
            if m.subject() != COMPLETION_REPORT && m.subject() != HEALTH_ESCALATION {
                continue;
            }
            match LoopMessage::from_body(m.body()) {
                Some(message) => self.on_message(&message, now, actions)?,
                None => actions.push(DispatchAction::Unreadable {
                    path: self
                        .mail
                        .path_of(m.id(), &chipset_mail::Location::Inbox(self.me.clone())),
                    reason: format!("{} mail whose body is not a loop message", m.subject()),
                }),
            }
            self.archive(&m);
        }
        Ok(())
    }

    fn archive(&self, m: &Message) {
        if m.kind() == Kind::Request {
            return;
        }
        if let Err(e) = self.mail.archive(m.id()) {
            tracing::warn!(id = %m.id(), error = %e, "could not archive a handled message");
        }
    }

    fn read_bus(&self, now: Timestamp, actions: &mut Vec<DispatchAction>) -> Result<()> {
        let pending = self.bus.pending(&self.me)?;
        for bad in pending.unreadable() {
            actions.push(DispatchAction::Unreadable {
                path: bad.path.clone(),
                reason: format!("{:?}", bad.problem),
            });
        }
        for event in pending.events() {
            if event.kind() != WORK_COMPLETED_EVENT && event.kind() != HEALTH_ESCALATION {
                continue;
            }
            match LoopMessage::from_payload(event.payload()) {
                Some(message) => self.on_message(&message, now, actions)?,
                // Reported like an unreadable mail, so nothing vanishes silently.
                None => actions.push(DispatchAction::Unreadable {
                    path: self.bus.queue_dir(&self.me).join(event.file_name()),
                    reason: format!("{} event whose payload is not a loop message", event.kind()),
                }),
            }
            let _ = self.bus.ack_event(&self.me, event)?;
        }
        Ok(())
    }

    fn on_message(
        &self,
        message: &LoopMessage,
        now: Timestamp,
        actions: &mut Vec<DispatchAction>,
    ) -> Result<()> {
        match message {
            LoopMessage::CompletionReport {
                assignment,
                completed_at,
                ..
            } => self.on_completion(assignment, Some(*completed_at), now, actions),
            LoopMessage::HealthEscalation { assignment, .. } => {
                self.on_escalation(assignment, now, actions)
            }
            LoopMessage::WorkAssignment { .. } => Ok(()),
        }
    }

    /// Locks a ledger entry; a corrupt one is reported and skipped.
    fn lock_entry(
        &self,
        bead: &BeadId,
        actions: &mut Vec<DispatchAction>,
    ) -> Result<Option<Locked<LedgerEntry>>> {
        match self.files.lock::<LedgerEntry>(&self.files.bead(bead)) {
            Ok(l) => Ok(Some(l)),
            Err(Error::Corrupt(c)) => {
                actions.push(unreadable(&c));
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    fn on_completion(
        &self,
        a: &Assignment,
        completed_at: Option<Timestamp>,
        now: Timestamp,
        actions: &mut Vec<DispatchAction>,
    ) -> Result<()> {
        let Some(mut locked) = self.lock_entry(a.bead_id(), actions)? else {
            return Ok(());
        };
        let Some(entry) = locked.current.clone() else {
            actions.push(ignored(COMPLETION_REPORT, a, IgnoreReason::UnknownBead));
            return Ok(());
        };
        match &entry.state {
            BeadState::Assigned { assignment, .. }
            | BeadState::Reassigning { taken: assignment }
                if same_assignment(assignment, a) =>
            {
                self.verify_completion(&mut locked, completed_at, now, actions)
            }
            _ => {
                if let Some(reason) = late(&entry, a, AttemptOutcome::Completed) {
                    actions.push(ignored(COMPLETION_REPORT, a, reason));
                }
                Ok(())
            }
        }
    }

    /// Verifies on the hook that the entry's current assignment is
    /// completed; if so, records the bead done and clears the hook.
    fn verify_completion(
        &self,
        locked: &mut Locked<LedgerEntry>,
        completed_at: Option<Timestamp>,
        now: Timestamp,
        actions: &mut Vec<DispatchAction>,
    ) -> Result<()> {
        let mut entry = locked.current.clone().expect("locked entry");
        let a = match &entry.state {
            BeadState::Assigned { assignment, .. }
            | BeadState::Reassigning { taken: assignment } => assignment.clone(),
            _ => return Ok(()),
        };
        let hook = match self.hooks.read(a.agent())? {
            HookRead::Hook(h) if h.status() == HookStatus::Completed && a.matches(&h) => h,
            HookRead::Corrupt(c) => {
                actions.push(unreadable(&c));
                return Ok(());
            }
            HookRead::Unsupported(u) => {
                actions.push(unsupported(&u));
                return Ok(());
            }
            _ => {
                actions.push(ignored(COMPLETION_REPORT, &a, IgnoreReason::NotCompleted));
                return Ok(());
            }
        };
        entry.state = BeadState::Done {
            assignment: a.clone(),
            completed_at: completed_at.unwrap_or(hook.last_activity()),
            cleared: false,
        };
        entry.end_attempt(&a, AttemptOutcome::Completed, now);
        entry.updated_at = now;
        // Done is durable before the hook is cleared: a restart clears it.
        locked.write(entry)?;
        self.clear(locked, now)?;
        tracing::info!(bead = %a.bead_id(), agent = %a.agent(), "work completed");
        actions.push(DispatchAction::Completed {
            bead_id: a.bead_id().clone(),
            agent: a.agent().clone(),
            generation: a.generation(),
            at: now,
        });
        Ok(())
    }

    /// Clears the hook of a done entry and records that it is cleared.
    fn clear(&self, locked: &mut Locked<LedgerEntry>, now: Timestamp) -> Result<()> {
        let mut entry = locked.current.clone().expect("locked entry");
        let BeadState::Done {
            assignment,
            completed_at,
            cleared: false,
        } = &entry.state
        else {
            return Ok(());
        };
        match self.hooks.clear(assignment) {
            Ok(_) => {}
            // Already cleared (a restart after the clear), or moved on.
            Err(e) if e.is_stale() || e.transition().is_some() => {}
            Err(e) => return Err(e.into()),
        }
        entry.state = BeadState::Done {
            assignment: assignment.clone(),
            completed_at: *completed_at,
            cleared: true,
        };
        entry.updated_at = now;
        let bead = entry.bead_id.clone();
        locked.write(entry)?;
        self.finished.lock().expect("cache").insert(bead);
        Ok(())
    }

    fn on_escalation(
        &self,
        a: &Assignment,
        now: Timestamp,
        actions: &mut Vec<DispatchAction>,
    ) -> Result<()> {
        let Some(mut locked) = self.lock_entry(a.bead_id(), actions)? else {
            return Ok(());
        };
        let Some(mut entry) = locked.current.clone() else {
            actions.push(ignored(HEALTH_ESCALATION, a, IgnoreReason::UnknownBead));
            return Ok(());
        };
        match &entry.state {
            BeadState::Assigned { assignment, .. } if same_assignment(assignment, a) => {
                entry.state = BeadState::Reassigning {
                    taken: assignment.clone(),
                };
                entry.updated_at = now;
                // The intent is durable before the hook changes.
                locked.write(entry)?;
                self.take_away(&mut locked, now, actions)
            }
            _ => {
                if let Some(reason) = late(&entry, a, AttemptOutcome::Reassigned) {
                    actions.push(ignored(HEALTH_ESCALATION, a, reason));
                }
                Ok(())
            }
        }
    }

    /// Takes the work of a `Reassigning` entry away from its agent and
    /// queues it again; if the agent completed it just in time, accepts the
    /// completion instead.
    fn take_away(
        &self,
        locked: &mut Locked<LedgerEntry>,
        now: Timestamp,
        actions: &mut Vec<DispatchAction>,
    ) -> Result<()> {
        let mut entry = locked.current.clone().expect("locked entry");
        let BeadState::Reassigning { taken } = entry.state.clone() else {
            return Ok(());
        };
        match self.hooks.reassign(&taken) {
            Ok(_) => {}
            Err(e) if e.is_stale() => {}
            Err(e)
                if matches!(
                    e.transition(),
                    Some(TransitionError::WrongState {
                        from: HookStatus::Completed,
                        ..
                    })
                ) =>
            {
                return self.verify_completion(locked, None, now, actions);
            }
            Err(e) => return Err(e.into()),
        }
        self.suspend(taken.agent(), taken.bead_id(), now)?;
        let text = format!(
            "abort {} (generation {}): reassigned after a health escalation",
            taken.bead_id(),
            taken.generation()
        );
        let abort = NudgeDraft::new(self.me.clone(), NudgeType::Abort, text);
        if let Err(e) = self.nudges.send(taken.agent(), abort) {
            tracing::warn!(agent = %taken.agent(), error = %e, "could not send the abort");
        }
        entry.state = BeadState::Queued;
        entry.end_attempt(&taken, AttemptOutcome::Reassigned, now);
        entry.updated_at = now;
        locked.write(entry)?;
        tracing::warn!(bead = %taken.bead_id(), agent = %taken.agent(), "work taken away from a silent agent");
        actions.push(DispatchAction::Reassigned {
            bead_id: taken.bead_id().clone(),
            from: taken.agent().clone(),
            generation: taken.generation(),
            at: now,
        });
        Ok(())
    }

    fn suspend(&self, agent: &AgentId, bead: &BeadId, now: Timestamp) -> Result<()> {
        let mut locked = self.files.lock::<AgentBook>(&self.files.agents())?;
        let mut book = locked.current.clone().unwrap_or_default();
        if book.suspended.contains_key(agent) {
            return Ok(());
        }
        book.suspended.insert(
            agent.clone(),
            Suspension {
                since: now,
                bead_id: bead.clone(),
            },
        );
        locked.write(book)
    }

    /// Goes over every unfinished entry: finishes interrupted changes,
    /// verifies completions without a report, sends missing assignment
    /// mail, requeues lost work. Returns the queued beads in order.
    fn sweep(&self, now: Timestamp, actions: &mut Vec<DispatchAction>) -> Result<Vec<BeadId>> {
        let ledger = self.ledger()?;
        for c in &ledger.corrupt {
            actions.push(unreadable(c));
        }
        let mut queued = Vec::new();
        for listed in ledger.entries {
            if self
                .finished
                .lock()
                .expect("cache")
                .contains(&listed.bead_id)
            {
                continue;
            }
            let Some(mut locked) = self.lock_entry(&listed.bead_id, actions)? else {
                continue;
            };
            let Some(entry) = locked.current.clone() else {
                continue;
            };
            match &entry.state {
                BeadState::Queued => queued.push(entry.bead_id.clone()),
                BeadState::Assigning { agent, mail } => {
                    if self.adopt(&mut locked, agent, mail, now)? {
                        self.check_assigned(&mut locked, now, actions)?;
                    } else {
                        queued.push(entry.bead_id.clone());
                    }
                }
                BeadState::Assigned { .. } => {
                    self.check_assigned(&mut locked, now, actions)?;
                    if matches!(
                        locked.current.as_ref().map(|e| &e.state),
                        Some(BeadState::Queued)
                    ) {
                        queued.push(entry.bead_id.clone());
                    }
                }
                BeadState::Reassigning { .. } => {
                    self.take_away(&mut locked, now, actions)?;
                    if matches!(
                        locked.current.as_ref().map(|e| &e.state),
                        Some(BeadState::Queued)
                    ) {
                        queued.push(entry.bead_id.clone());
                    }
                }
                BeadState::Done { cleared: false, .. } => self.clear(&mut locked, now)?,
                BeadState::Done { .. } => {
                    self.finished
                        .lock()
                        .expect("cache")
                        .insert(entry.bead_id.clone());
                }
            }
        }
        Ok(queued)
    }

    /// Resolves an `Assigning` entry after a crash: adopts the assignment if
    /// the agent's hook holds the bead, else queues the bead again. Returns
    /// true when adopted.
    fn adopt(
        &self,
        locked: &mut Locked<LedgerEntry>,
        agent: &AgentId,
        mail: &MessageId,
        now: Timestamp,
    ) -> Result<bool> {
        let mut entry = locked.current.clone().expect("locked entry");
        let held = match self.hooks.read(agent)? {
            HookRead::Hook(h) => h.assignment().filter(|a| *a.bead_id() == entry.bead_id),
            _ => None,
        };
        match held {
            Some(a) => {
                // Sent under the intent's id: once, even if it went out before the crash.
                self.send_assignment(&a, Some(mail))?;
                entry.attempts.push(Attempt {
                    agent: a.agent().clone(),
                    generation: a.generation(),
                    assigned_at: a.work().assigned_at(),
                    outcome: AttemptOutcome::Open,
                    ended_at: None,
                });
                entry.state = BeadState::Assigned {
                    assignment: a,
                    mail: Some(mail.clone()),
                };
                entry.updated_at = now;
                locked.write(entry)?;
                Ok(true)
            }
            None => {
                entry.state = BeadState::Queued;
                entry.updated_at = now;
                locked.write(entry)?;
                Ok(false)
            }
        }
    }

    /// Checks an `Assigned` entry against its hook.
    fn check_assigned(
        &self,
        locked: &mut Locked<LedgerEntry>,
        now: Timestamp,
        actions: &mut Vec<DispatchAction>,
    ) -> Result<()> {
        let mut entry = locked.current.clone().expect("locked entry");
        let BeadState::Assigned {
            assignment: a,
            mail,
        } = entry.state.clone()
        else {
            return Ok(());
        };
        match self.hooks.read(a.agent())? {
            HookRead::Corrupt(c) => actions.push(unreadable(&c)),
            HookRead::Unsupported(u) => actions.push(unsupported(&u)),
            HookRead::Hook(h) if a.matches(&h) => {
                if h.status() == HookStatus::Completed {
                    return self.verify_completion(locked, None, now, actions);
                }
                if mail.is_none() {
                    let id = self.send_assignment(&a, None)?;
                    entry.state = BeadState::Assigned {
                        assignment: a,
                        mail: Some(id),
                    };
                    entry.updated_at = now;
                    locked.write(entry)?;
                }
            }
            _ => {
                entry.state = BeadState::Queued;
                entry.end_attempt(&a, AttemptOutcome::Lost, now);
                entry.updated_at = now;
                locked.write(entry)?;
                tracing::warn!(bead = %a.bead_id(), agent = %a.agent(), "the hook let go of the work: queued again");
                actions.push(DispatchAction::Requeued {
                    bead_id: a.bead_id().clone(),
                    agent: a.agent().clone(),
                    generation: a.generation(),
                    at: now,
                });
            }
        }
        Ok(())
    }

    /// Returns the idle agents of the pool, in pool order: not suspended, hook empty.
    fn idle_agents(&self) -> Result<VecDeque<AgentId>> {
        let book = match self.suspended() {
            Ok(b) => b,
            // An unreadable book cannot say who is suspended: assign no one.
            Err(Error::Corrupt(_)) => return Ok(VecDeque::new()),
            Err(e) => return Err(e),
        };
        let mut idle = VecDeque::new();
        for agent in &self.pool {
            if book.suspended.contains_key(agent) {
                continue;
            }
            if self.hooks.read(agent)?.status() == Some(HookStatus::Empty) {
                idle.push_back(agent.clone());
            }
        }
        Ok(idle)
    }

    fn assign_queued(
        &self,
        queued: Vec<BeadId>,
        now: Timestamp,
        actions: &mut Vec<DispatchAction>,
    ) -> Result<()> {
        if queued.is_empty() {
            return Ok(());
        }
        let mut idle = self.idle_agents()?;
        for bead in queued {
            if idle.is_empty() {
                break;
            }
            let Some(mut locked) = self.lock_entry(&bead, actions)? else {
                continue;
            };
            let Some(mut entry) = locked.current.clone() else {
                continue;
            };
            if entry.state != BeadState::Queued {
                continue;
            }
            while let Some(agent) = idle.pop_front() {
                let mail = MessageId::from(SortableId::generate(self.files.state.clock().as_ref()));
                entry.state = BeadState::Assigning {
                    agent: agent.clone(),
                    mail: mail.clone(),
                };
                entry.updated_at = now;
                // The intent is durable before the hook: a restart adopts or undoes it.
                locked.write(entry.clone())?;
                match self
                    .hooks
                    .assign(&agent, bead.clone(), entry.title.clone(), Some(&self.me))
                {
                    Ok(a) => {
                        self.send_assignment(&a, Some(&mail))?;
                        entry.attempts.push(Attempt {
                            agent: agent.clone(),
                            generation: a.generation(),
                            assigned_at: a.work().assigned_at(),
                            outcome: AttemptOutcome::Open,
                            ended_at: None,
                        });
                        entry.state = BeadState::Assigned {
                            assignment: a.clone(),
                            mail: Some(mail.clone()),
                        };
                        locked.write(entry.clone())?;
                        let wake = NewEvent::new(self.me.as_str(), WORK_ASSIGNED_EVENT).payload(
                            LoopMessage::WorkAssignment {
                                assignment: a.clone(),
                            }
                            .to_payload(),
                        );
                        let _ = self.bus.publish(&agent, &wake)?;
                        tracing::info!(%bead, %agent, "work assigned");
                        actions.push(DispatchAction::Assigned {
                            bead_id: bead.clone(),
                            agent,
                            generation: a.generation(),
                            mail,
                            at: now,
                        });
                        break;
                    }
                    Err(e) if e.transition().is_some() || e.is_corrupt() => {
                        tracing::info!(%agent, error = %e, "agent not assignable; trying the next");
                        entry.state = BeadState::Queued;
                        locked.write(entry.clone())?;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(())
    }

    /// Sends the `work-assignment` mail, under `id` when given (then a
    /// second send of the same id is a no-op), and returns its id.
    fn send_assignment(&self, a: &Assignment, id: Option<&MessageId>) -> Result<MessageId> {
        let message = LoopMessage::WorkAssignment {
            assignment: a.clone(),
        };
        let mut draft = Draft::notify(
            self.me.clone(),
            a.agent().clone(),
            task_of(a.bead_id())?,
            WORK_ASSIGNMENT,
            message.to_body(),
        );
        if let Some(id) = id {
            draft = draft.with_id(id.clone());
        }
        match self.mail.send(&draft) {
            Ok(m) => Ok(m.id().clone()),
            Err(MailError::IdTaken { id, .. }) => Ok(id),
            Err(e) => Err(e.into()),
        }
    }
}

fn unreadable(c: &Corruption) -> DispatchAction {
    DispatchAction::Unreadable {
        path: c.path.clone(),
        reason: c.reason.to_string(),
    }
}

/// A hook in a state this version does not know: reported like an
/// unreadable one, and never acted on.
fn unsupported(u: &chipset_store::Unsupported) -> DispatchAction {
    DispatchAction::Unreadable {
        path: u.path.clone(),
        reason: format!("holds {}, unsupported by this version", u.what),
    }
}

fn ignored(kind: &str, a: &Assignment, reason: IgnoreReason) -> DispatchAction {
    DispatchAction::Ignored {
        kind: kind.to_owned(),
        bead_id: a.bead_id().clone(),
        agent: a.agent().clone(),
        generation: a.generation(),
        reason,
    }
}

/// Why a report or escalation about `a` that is not current is ignored, or
/// `None` when it merely repeats one already handled (the same completion
/// or escalation seen again by mail, bus or poll).
fn late(entry: &LedgerEntry, a: &Assignment, repeat: AttemptOutcome) -> Option<IgnoreReason> {
    let handled = entry
        .attempts
        .iter()
        .any(|t| t.agent == *a.agent() && t.generation == a.generation() && t.outcome == repeat);
    if handled {
        return None;
    }
    if entry.is_done() {
        Some(IgnoreReason::AlreadyDone)
    } else {
        Some(IgnoreReason::NotCurrent)
    }
}
