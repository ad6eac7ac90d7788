//! The dispatcher's shell: reads its inbox and bus queue, locks each ledger
//! entry, and drives it through the pure [`ledger_transition`], carrying out each
//! [`LedgerCommand`] and [`LedgerEffect`] and feeding the result back.

use std::collections::VecDeque;

use chipset_bus::{EventId, NewEvent};
use chipset_hook::BeadId;
use chipset_hook::HookStatus;
use chipset_mail::MessageId;
use chipset_mail::{Kind, Message, NewMessage};
use chipset_nudge::{NewNudge, NudgeId, NudgeType};
use chipset_store::{AgentId, SortableId, Timestamp};

use crate::error::Tick;
use crate::files::Held;

use super::transition::{ignored, unreadable, unsupported};
use super::{
    DispatchAction, Dispatcher, IgnoreReason, LedgerCommand, LedgerEffect, LedgerEvent,
    ledger_transition,
};
use crate::error::{Error, Result};
use crate::files::task_of;
use crate::format::{
    AgentBook, BeadState, COMPLETION_REPORT, HEALTH_ESCALATION, IncidentKey, LedgerEntry,
    LoopMessage, Suspension, WORK_ASSIGNED_EVENT, WORK_ASSIGNMENT, WORK_COMPLETED_EVENT, fixed_id,
};

impl Dispatcher {
    pub(super) fn read_mail(
        &self,
        now: Timestamp,
        actions: &mut Tick<DispatchAction>,
    ) -> Result<()> {
        let mail = &self.channels.mail;
        let inbox = match mail.inbox(&self.me) {
            Ok(inbox) => inbox,
            // Reported, and the tick goes on to its sweep: an unreadable
            // inbox (corrupt, or a message this version does not know)
            // holds back only the reports, until the doctor or a person
            // moves the file.
            Err(chipset_mail::Error::Corrupt(c)) => {
                actions.push(unreadable(&c));
                return Ok(());
            }
            Err(e) => match e.unsupported() {
                Some(u) => {
                    actions.push(unsupported(u));
                    return Ok(());
                }
                None => return Err(e.into()),
            },
        };
        for m in inbox {
            if m.subject != COMPLETION_REPORT && m.subject != HEALTH_ESCALATION {
                continue;
            }
            match LoopMessage::from_body(&m.body) {
                Some(message) => self.on_message(&message, now, actions)?,
                None => actions.push(DispatchAction::Unreadable {
                    path: mail
                        .path_of(&m.id, &chipset_mail::Location::Inbox(self.me.clone()))
                        .into_path_buf(),
                    reason: format!("{} mail whose body is not a loop message", m.subject),
                }),
            }
            if self.archive(&m) {
                actions.changed();
            }
        }
        Ok(())
    }

    /// Archives a handled message (best effort); returns whether it did.
    fn archive(&self, m: &Message) -> bool {
        if m.kind == Kind::Request {
            return false;
        }
        match self.channels.mail.archive(&m.id) {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(id = %m.id, error = %e, "could not archive a handled message");
                false
            }
        }
    }

    pub(super) fn read_bus(
        &self,
        now: Timestamp,
        actions: &mut Tick<DispatchAction>,
    ) -> Result<()> {
        let bus = &self.channels.bus;
        let pending = bus.pending(&self.me)?;
        for (path, problem) in pending.unreadable {
            actions.push(DispatchAction::Unreadable {
                path,
                reason: format!("{problem:?}"),
            });
        }
        for event in pending.events {
            if event.kind != WORK_COMPLETED_EVENT && event.kind != HEALTH_ESCALATION {
                continue;
            }
            match LoopMessage::from_payload(&event.payload) {
                Some(message) => self.on_message(&message, now, actions)?,
                // Reported like an unreadable mail, so nothing vanishes silently.
                None => actions.push(DispatchAction::Unreadable {
                    path: bus.queue_dir(&self.me).as_path().join(event.file_name()),
                    reason: format!("{} event whose payload is not a loop message", event.kind),
                }),
            }
            let _ = bus.ack_event(&self.me, &event)?;
            actions.changed();
        }
        Ok(())
    }

    fn on_message(
        &self,
        message: &LoopMessage,
        now: Timestamp,
        actions: &mut Tick<DispatchAction>,
    ) -> Result<()> {
        let (kind, event) = match message {
            LoopMessage::CompletionReport {
                assignment,
                completed_at,
                ..
            } => (
                COMPLETION_REPORT,
                LedgerEvent::Report {
                    assignment: assignment.clone(),
                    completed_at: Some(*completed_at),
                },
            ),
            LoopMessage::HealthEscalation { assignment, .. } => (
                HEALTH_ESCALATION,
                LedgerEvent::Escalation {
                    assignment: assignment.clone(),
                },
            ),
            LoopMessage::WorkAssignment { .. } => return Ok(()),
        };
        let a = message.assignment();
        let Some(mut locked) = self.lock_entry(&a.work.bead_id, actions)? else {
            return Ok(());
        };
        if locked.current().is_none() {
            actions.push(ignored(kind, a, IgnoreReason::UnknownBead));
            return Ok(());
        }
        self.drive(&mut locked, event, now, actions)
    }

    /// Locks a ledger entry; a corrupt one is reported and skipped.
    fn lock_entry(
        &self,
        bead: &BeadId,
        actions: &mut Tick<DispatchAction>,
    ) -> Result<Option<Held<LedgerEntry>>> {
        match self.files.lock::<LedgerEntry>(&self.files.bead(bead)) {
            Ok(l) => Ok(Some(l)),
            Err(Error::Corrupt(c)) => {
                actions.push(unreadable(&c));
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Drives the locked entry from `event` until the core says stop: each
    /// transition's effects and write are carried out in order, and its
    /// command's result is the next event. A missing entry is left alone.
    fn drive(
        &self,
        locked: &mut Held<LedgerEntry>,
        mut event: LedgerEvent,
        now: Timestamp,
        actions: &mut Tick<DispatchAction>,
    ) -> Result<()> {
        loop {
            let Some(entry) = locked.current() else {
                return Ok(());
            };
            let t = ledger_transition(entry, &event, now);
            let (bead, title) = (entry.bead_id.clone(), entry.title.clone());
            for effect in t.before {
                self.effect(effect, now, actions)?;
            }
            if let Some(new) = t.entry {
                locked.write(new)?;
                actions.changed();
            }
            for effect in t.after {
                self.effect(effect, now, actions)?;
            }
            if let Some(action) = t.action {
                trace(&action);
                actions.push(action);
            }
            event = match t.next {
                LedgerCommand::Stop => return Ok(()),
                LedgerCommand::Adopt(agent) => {
                    LedgerEvent::Adopt(self.channels.hooks.read(&agent)?)
                }
                LedgerCommand::Check(agent) => {
                    LedgerEvent::Check(self.channels.hooks.read(&agent)?)
                }
                LedgerCommand::Verify {
                    agent,
                    completed_at,
                } => LedgerEvent::Verify {
                    hook: self.channels.hooks.read(&agent)?,
                    completed_at,
                },
                LedgerCommand::Assign(agent) => {
                    match self
                        .channels
                        .hooks
                        .assign(&agent, bead, title, Some(&self.me))
                    {
                        Ok(a) => {
                            actions.changed();
                            LedgerEvent::Hooked(a)
                        }
                        Err(e)
                            if refused_by_rules(&e)
                                || matches!(e, chipset_hook::Error::Corrupt { .. }) =>
                        {
                            tracing::info!(%agent, error = %e, "agent not assignable; trying the next");
                            LedgerEvent::Refused
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
                LedgerCommand::Mail(a) => {
                    // Under an id fixed by the assignment: a tick that sends
                    // it again after this one failed to record `Mailed`
                    // names the same mail, delivered once.
                    let id = assignment_mail_id(&a)?;
                    let id = self.send_assignment(&a, &id)?;
                    actions.changed();
                    LedgerEvent::Mailed(id)
                }
                LedgerCommand::TakeAway(a) => match self.channels.hooks.reassign(&a) {
                    Ok(_) => {
                        actions.changed();
                        LedgerEvent::TookAway
                    }
                    Err(chipset_hook::Error::StaleAssignment { .. }) => LedgerEvent::TookAway,
                    Err(chipset_hook::Error::WrongState {
                        from: HookStatus::Completed,
                        ..
                    }) => LedgerEvent::FoundCompleted,
                    Err(e) => return Err(e.into()),
                },
                LedgerCommand::Clear(a) => match self.channels.hooks.clear(&a) {
                    Ok(_) => {
                        actions.changed();
                        LedgerEvent::Cleared
                    }
                    // Already cleared (a restart after the clear), or moved on.
                    Err(e) if refused_by_rules(&e) => LedgerEvent::Cleared,
                    Err(e) => return Err(e.into()),
                },
            };
        }
    }

    /// Carries out an effect; one that writes notes the tick's change.
    fn effect(
        &self,
        effect: LedgerEffect,
        now: Timestamp,
        actions: &mut Tick<DispatchAction>,
    ) -> Result<()> {
        let writes = !matches!(effect, LedgerEffect::Finished(_));
        match effect {
            LedgerEffect::SendAssignment { assignment, mail } => {
                let _ = self.send_assignment(&assignment, &mail)?;
            }
            LedgerEffect::Wake {
                assignment: a,
                mail,
            } => {
                // Under the mail's id: a retry's publish returns the first.
                let wake = NewEvent::new(self.me.as_str(), WORK_ASSIGNED_EVENT)
                    .with_payload(
                        LoopMessage::WorkAssignment {
                            assignment: a.clone(),
                        }
                        .to_payload(),
                    )
                    .with_id(EventId::new(mail.as_str())?);
                let _ = self.channels.bus.publish(&a.agent, &wake)?;
            }
            LedgerEffect::Suspend { agent, bead_id } => self.suspend(&agent, &bead_id, now)?,
            LedgerEffect::Abort(taken) => {
                let text = format!(
                    "abort {} (generation {}): reassigned after a health escalation",
                    taken.work.bead_id, taken.generation
                );
                // Under an id fixed by the assignment it takes away: a tick
                // that sends it again after this one failed to record the
                // reassignment names the same abort, delivered once.
                let key = IncidentKey::of(&taken).to_string();
                let id = fixed_id(taken.work.assigned_at, "ab0a7000-0003", &key);
                let abort = NewNudge::new(self.me.clone(), NudgeType::Abort, text)
                    .with_id(NudgeId::new(id).map_err(chipset_nudge::Error::from)?);
                if let Err(e) = self.channels.nudges.send(&taken.agent, &abort) {
                    tracing::warn!(agent = %taken.agent, error = %e, "could not send the abort");
                }
            }
            LedgerEffect::Finished(bead) => {
                self.finished.lock().expect("cache").insert(bead);
            }
        }
        if writes {
            actions.changed();
        }
        Ok(())
    }

    fn suspend(&self, agent: &AgentId, bead: &BeadId, now: Timestamp) -> Result<()> {
        let mut locked = self.files.lock::<AgentBook>(&self.files.agents())?;
        let mut book = locked.take().unwrap_or_default();
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

    /// Drives every unfinished entry through the sweep: finishes interrupted
    /// changes, verifies completions without a report, sends missing
    /// assignment mail, requeues lost work. Returns the queued beads in order.
    pub(super) fn sweep(
        &self,
        now: Timestamp,
        actions: &mut Tick<DispatchAction>,
    ) -> Result<Vec<BeadId>> {
        let ledger = self.ledger()?;
        actions.extend(ledger.corrupt.iter().map(unreadable));
        actions.extend(ledger.unsupported.iter().map(unsupported));
        let mut queued = Vec::new();
        for listed in ledger.items {
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
            self.drive(&mut locked, LedgerEvent::Sweep, now, actions)?;
            if is_queued(&locked) {
                queued.push(listed.bead_id);
            }
        }
        Ok(queued)
    }

    /// Returns the idle agents of the pool, in pool order: not suspended, hook empty.
    fn idle_agents(&self) -> Result<VecDeque<AgentId>> {
        let book = match self.read_suspended() {
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
            if HookStatus::of(&self.channels.hooks.read(agent)?) == Some(HookStatus::Empty) {
                idle.push_back(agent.clone());
            }
        }
        Ok(idle)
    }

    /// Offers each queued bead to the idle agents in turn until one's hook takes it.
    pub(super) fn assign_queued(
        &self,
        queued: Vec<BeadId>,
        now: Timestamp,
        actions: &mut Tick<DispatchAction>,
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
            while is_queued(&locked)
                && let Some(agent) = idle.pop_front()
            {
                let mail = MessageId::from(SortableId::generate(self.files.state.clock().as_ref()));
                self.drive(
                    &mut locked,
                    LedgerEvent::Choose { agent, mail },
                    now,
                    actions,
                )?;
            }
        }
        Ok(())
    }

    /// Sends the `work-assignment` mail under `id` (a second send of the
    /// same id is a no-op) and returns its id.
    fn send_assignment(&self, a: &chipset_hook::Assignment, id: &MessageId) -> Result<MessageId> {
        let message = LoopMessage::WorkAssignment {
            assignment: a.clone(),
        };
        let draft = NewMessage::notify(
            self.me.clone(),
            a.agent.clone(),
            task_of(&a.work.bead_id)?,
            WORK_ASSIGNMENT,
            message.to_body(),
        )
        .with_id(id.clone());
        match self.channels.mail.send(&draft) {
            Ok(m) => Ok(m.id.clone()),
            Err(chipset_mail::Error::IdTaken { id, .. }) => Ok(id),
            Err(e) => Err(e.into()),
        }
    }
}

/// The id of the `work-assignment` mail of an assignment whose entry
/// names none: a [`fixed_id`] at the time it was assigned with the prefix
/// `ab0a7000-0001`, keyed by the assignment (agent, bead, generation).
fn assignment_mail_id(a: &chipset_hook::Assignment) -> Result<MessageId> {
    let key = IncidentKey::of(a).to_string();
    let id = fixed_id(a.work.assigned_at, "ab0a7000-0001", &key);
    Ok(MessageId::new(id)?)
}

fn is_queued(locked: &Held<LedgerEntry>) -> bool {
    matches!(locked.current().map(|e| &e.state), Some(BeadState::Queued))
}

fn trace(action: &DispatchAction) {
    match action {
        DispatchAction::Assigned { bead_id, agent, .. } => {
            tracing::info!(bead = %bead_id, %agent, "work assigned");
        }
        DispatchAction::Completed { bead_id, agent, .. } => {
            tracing::info!(bead = %bead_id, %agent, "work completed");
        }
        DispatchAction::Reassigned { bead_id, from, .. } => {
            tracing::warn!(bead = %bead_id, agent = %from, "work taken away from a silent agent");
        }
        DispatchAction::Requeued { bead_id, agent, .. } => {
            tracing::warn!(bead = %bead_id, %agent, "the hook let go of the work: queued again");
        }
        _ => {}
    }
}

/// Returns true when the hook's rules refused a step: the hook was
/// readable and nothing was written (a failure to read or write it is not
/// a refusal).
fn refused_by_rules(e: &chipset_hook::Error) -> bool {
    use chipset_hook::Error as E;
    matches!(
        e,
        E::AlreadyAssigned { .. }
            | E::NotPermitted { .. }
            | E::NotOwner { .. }
            | E::WrongState { .. }
            | E::StaleAssignment { .. }
    )
}
