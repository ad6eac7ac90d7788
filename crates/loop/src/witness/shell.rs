//! The witness's shell: reads the hooks, records and answers, takes the
//! incident lock, and carries out what the pure core ([`judge`], [`close`])
//! decided.

use std::time::Duration;

use chipset_bus::{EventId, NewEvent, Priority as BusPriority};
use chipset_hook::{Assignment, Hook, HookState};
use chipset_mail::MessageId;
use chipset_mail::{MailPriority, NewMessage};
use chipset_nudge::{Delivery, NewNudge, NudgeId, NudgeType, Received};
use chipset_store::{AgentId, ReadOutcome, SortableId, Timestamp};

use super::judge::{Finish, Judging, Next, answers_since, close, judge, same_assignment};
use super::{WitnessAction, WitnessConfig};
use crate::channels::Channels;
use crate::error::Result;
use crate::error::Tick;
use crate::files::{Files, Held, task_of};
use crate::format::{HEALTH_ESCALATION, Incident, LoopMessage};

/// The witness: watches every pending and active hook, nudges quiet agents,
/// and escalates silent ones to the dispatcher, once per incident.
///
/// Cheap to clone. Many witnesses may run at once: each step on an agent is
/// taken under that agent's incident lock, so two witnesses never both send
/// a step (and never both escalate).
#[derive(Debug, Clone)]
pub struct Witness {
    me: AgentId,
    dispatcher: AgentId,
    config: WitnessConfig,
    channels: Channels,
    files: Files,
    started_at: Timestamp,
}

impl Witness {
    /// Returns a witness named `me` that escalates to `dispatcher`, working
    /// through `channels`: a [`StateDir`](chipset_store::StateDir) for
    /// every channel with its default config, or [`Channels`] you
    /// configured (so their configs apply: the escalation mail goes
    /// through its [`Mail`](chipset_mail::Mail), the wake-up through its
    /// [`Bus`](chipset_bus::Bus)). The nudge intervals it judges with are
    /// `config`'s. Its start time (for the restart grace period) is now
    /// on the state's clock.
    pub fn new(
        channels: impl Into<Channels>,
        me: AgentId,
        dispatcher: AgentId,
        config: WitnessConfig,
    ) -> Self {
        let channels = channels.into();
        let files = channels.files();
        // On a server its clock; if it cannot say the time now, the local
        // one (the grace period only delays the first steps).
        let started_at = files.now().unwrap_or_else(|_| files.state.now());
        Witness {
            me,
            dispatcher,
            started_at,
            files,
            channels,
            config,
        }
    }

    /// Looks at every hook once, at the state clock's now, and takes the
    /// steps that are due. Returns what it did; the actions are also appended
    /// to `loop/witness/log.jsonl`.
    ///
    /// Per pending or active hook: quiet longer than the stall threshold (and
    /// out of the grace period) → `health_check`; no sign of life within the
    /// agent's interval → `stall_warning`; none within another interval →
    /// one `health_escalation` mail to the dispatcher (notify, urgent) and a
    /// critical bus event. An answer or a touch after the first nudge
    /// resolves the incident. Corrupt hooks are reported, never judged.
    ///
    /// Retry rule: the retry of a tick that failed is the next tick, which
    /// finishes a step the failed one started (an escalation under the id
    /// its intent holds) and sends each nudge and escalation of an
    /// incident once.
    ///
    /// # Errors
    ///
    /// Channel errors. An unreadable incident record (or hook) is not one:
    /// it is reported as [`WitnessAction::Unreadable`] and that agent is
    /// not judged (run the doctor). Steps taken before an error stay taken, and a
    /// tick that fails after it changed something returns
    /// [`Error::PartlyDone`](crate::Error::PartlyDone) (its outcome is
    /// unknown), unless the failure says so already.
    pub fn tick(&self) -> Result<Vec<WitnessAction>> {
        let now = self.files.now()?;
        let mut tick = Tick::new();
        let done = self.look(now, &mut tick);
        tick.finish("witness tick", done, |actions| {
            self.files.append(&self.files.witness_log(), actions)
        })
    }

    /// The steps of [`Witness::tick`] (the tick appends their actions to the log).
    fn look(&self, now: Timestamp, actions: &mut Tick<WitnessAction>) -> Result<()> {
        // Answers land in the witness's own `latest.json` too (seed 000); they
        // are read through the per-responder records, so mark them processed.
        if let ReadOutcome::Value(Received::New(n)) = self.channels.nudges.receive(&self.me)?
            && n.kind == NudgeType::NudgeResponse
        {
            self.channels.nudges.mark_processed(&self.me, &n)?;
            actions.changed();
        }
        for (agent, read) in &self.channels.hooks.list()? {
            match read {
                ReadOutcome::Corrupt(c) => actions.push(WitnessAction::Unreadable {
                    path: c.path.clone(),
                    reason: c.reason.to_string(),
                }),
                // A hook in a state this version does not know cannot be judged idle or done.
                ReadOutcome::Unsupported(u) => actions.push(WitnessAction::Unreadable {
                    path: u.path.clone(),
                    reason: format!("holds {}, unsupported by this version", u.what),
                }),
                ReadOutcome::Value(hook) => {
                    let done = match watched(hook) {
                        Some(assignment) => self.watch(hook, &assignment, now, actions),
                        None => self.close_if_open(agent, hook, now, actions),
                    };
                    unreadable_record(done, actions)?;
                }
                ReadOutcome::Missing => {}
            }
        }
        Ok(())
    }

    /// Ticks every `every` (real time) until `until` says stop. A blocking
    /// convenience for a witness thread or process.
    ///
    /// # Errors
    ///
    /// As [`Witness::tick`].
    pub fn run_until(
        &self,
        every: Duration,
        mut until: impl FnMut(&[WitnessAction]) -> bool,
    ) -> Result<()> {
        loop {
            let actions = self.tick()?;
            if until(&actions) {
                return Ok(());
            }
            std::thread::sleep(every);
        }
    }

    fn judging(&self, agent: &AgentId, now: Timestamp, answered_at: Option<Timestamp>) -> Judging {
        Judging {
            now,
            stall_threshold: self.config.stall_threshold,
            interval: self.config.interval_for(agent),
            grace: self.config.grace,
            started_at: self.started_at,
            answered_at,
            witness: self.me.clone(),
        }
    }

    /// Returns when `agent` answered this witness at or after `since`.
    fn answered(
        &self,
        agent: &AgentId,
        since: Option<Timestamp>,
        actions: &mut Tick<WitnessAction>,
    ) -> Result<Option<Timestamp>> {
        let Some(since) = since else { return Ok(None) };
        match self.channels.nudges.response_from(&self.me, agent, since) {
            Ok(answer) => Ok(answer.map(|a| a.timestamp)),
            Err(chipset_nudge::Error::Corrupt(c)) => {
                actions.push(WitnessAction::Unreadable {
                    path: c.path.clone(),
                    reason: c.reason.to_string(),
                });
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Reads the inputs of [`judge`] other than the record and the hook
    /// (when the agent answered since the incident's first nudge) and judges.
    fn decide(
        &self,
        record: Option<&Incident>,
        hook: &Hook,
        assignment: &Assignment,
        now: Timestamp,
        actions: &mut Tick<WitnessAction>,
    ) -> Result<Next> {
        let agent = &assignment.agent;
        let answered = self.answered(agent, answers_since(record, assignment), actions)?;
        Ok(judge(
            record,
            hook,
            assignment,
            &self.judging(agent, now, answered),
        ))
    }

    fn watch(
        &self,
        hook: &Hook,
        assignment: &Assignment,
        now: Timestamp,
        actions: &mut Tick<WitnessAction>,
    ) -> Result<()> {
        let agent = &assignment.agent;
        let path = self.files.incident(agent);
        // A first look without the lock: most hooks need nothing.
        let record: Option<Incident> = self.files.read(&path)?;
        let mut scratch = Tick::new();
        if self
            .decide(record.as_ref(), hook, assignment, now, &mut scratch)?
            .is_wait()
        {
            actions.extend(scratch.actions);
            return Ok(());
        }
        // Decide again under the lock: another witness may have moved first,
        // and the agent may have touched its hook since the listing read it.
        let mut locked = self.files.lock::<Incident>(&path)?;
        let next = match self.channels.hooks.read(agent)? {
            ReadOutcome::Value(fresh)
                if watched(&fresh).is_some_and(|a| same_assignment(&a, assignment)) =>
            {
                self.decide(locked.current(), &fresh, assignment, now, actions)?
            }
            // Cleared, reassigned, completed or unreadable now: the next tick
            // sees it as it is.
            _ => Next::Wait,
        };
        self.apply(&mut locked, next, actions)
    }

    /// Carries out a [`Next`] under the incident's lock, in its order.
    fn apply(
        &self,
        locked: &mut Held<Incident>,
        next: Next,
        actions: &mut Tick<WitnessAction>,
    ) -> Result<()> {
        match next {
            Next::Wait => {}
            Next::Record { record, action } => {
                locked.write(record)?;
                actions.changed();
                if let WitnessAction::Alive { key, evidence, .. } = &action {
                    tracing::info!(%key, %evidence, "agent is alive");
                }
                actions.push(action);
            }
            Next::Nudge(step) => {
                // Under an id fixed by what it is about: a tick that sends
                // it again after this one failed to record it finds it
                // delivered, and records the time the agent got it.
                let id = NudgeId::new(step.id()).map_err(chipset_nudge::Error::from)?;
                let draft = NewNudge::new(self.me.clone(), step.nudge.kind(), step.text.clone())
                    .requiring_response()
                    .with_id(id);
                let sent = match self.channels.nudges.send(step.agent(), &draft) {
                    Ok(sent) => Some(sent),
                    // Another witness (or this one under another name) sent
                    // this very nudge: it is out, from them.
                    Err(chipset_nudge::Error::IdTaken { .. }) => None,
                    Err(e) => return Err(e.into()),
                };
                actions.changed();
                let held = matches!(sent, Some(Delivery::Held { .. }));
                let action = step.action(held);
                let record = match &sent {
                    Some(sent) if !held => step.record_sent_at(sent.nudge().timestamp),
                    _ => step.record,
                };
                locked.write(record)?;
                match &action {
                    WitnessAction::HealthCheck { key, .. } => {
                        tracing::info!(%key, "hook quiet: health check sent");
                    }
                    other => tracing::warn!(key = ?other.key(), "no answer: stall warning sent"),
                }
                actions.push(action);
            }
            Next::Escalate(escalation) => {
                // The intent, with the mail's id, is durable before the mail:
                // a witness that dies in between sends it on restart under
                // the same id, which the mail channel accepts only once.
                let mail = MessageId::from(SortableId::generate(self.files.state.clock().as_ref()));
                let (intent, finish) = escalation.intent(mail);
                locked.write(intent)?;
                actions.changed();
                self.finish(locked, finish, actions)?;
            }
            Next::Finish(finish) => self.finish(locked, *finish, actions)?,
        }
        Ok(())
    }

    /// Sends a started escalation, wakes the dispatcher, and records the
    /// incident as escalated, under the incident's lock.
    fn finish(
        &self,
        locked: &mut Held<Incident>,
        finish: Finish,
        actions: &mut Tick<WitnessAction>,
    ) -> Result<()> {
        self.send_escalation(&finish.message, &finish.mail)?;
        actions.changed();
        // The wake-up, under the mail's id: a recovering witness's publish
        // returns the first (the key alone would let one through again
        // when the first publish failed before recording it).
        let event = NewEvent::new(self.me.as_str(), HEALTH_ESCALATION)
            .with_priority(BusPriority::Critical)
            .with_payload(finish.message.to_payload())
            .with_dedup_key(finish.dedup_key)
            .with_id(EventId::new(finish.mail.as_str())?);
        let _ = self.channels.bus.publish(&self.dispatcher, &event)?;
        actions.changed();
        // A stalled holder's pool item goes back to the pool with the one
        // escalation; a restarted witness finishing it finds it returned.
        let held = finish.message.assignment();
        if let Some(item) = chipset_pool::Pool::new(self.files.state.clone()).return_stalled(
            held,
            &self.me,
            "holder stalled: escalated by the witness",
        )? {
            tracing::warn!(item = %item.id, holder = %held.agent, "stalled work returned to the pool");
            actions.changed();
        }
        locked.write(finish.record)?;
        tracing::warn!(key = ?finish.action.key(), mail = %finish.mail, "agent silent: escalated to the dispatcher");
        actions.push(finish.action);
        Ok(())
    }

    /// Closes an open incident whose hook moved on (see [`close`]).
    fn close_if_open(
        &self,
        agent: &AgentId,
        hook: &Hook,
        now: Timestamp,
        actions: &mut Tick<WitnessAction>,
    ) -> Result<()> {
        let path = self.files.incident(agent);
        let record: Option<Incident> = self.files.read(&path)?;
        if close(record.as_ref(), hook, &self.me, now).is_wait() {
            return Ok(());
        }
        let mut locked = self.files.lock::<Incident>(&path)?;
        let next = close(locked.current(), hook, &self.me, now);
        self.apply(&mut locked, next, actions)
    }
    /// Sends the escalation under the id persisted in the intent. If a
    /// predecessor sent it already, the mail channel refuses the id as taken
    /// and nothing is sent twice.
    fn send_escalation(&self, message: &LoopMessage, id: &MessageId) -> Result<()> {
        let a = message.assignment();
        let draft = NewMessage::notify(
            self.me.clone(),
            self.dispatcher.clone(),
            task_of(&a.work.bead_id)?,
            HEALTH_ESCALATION,
            message.to_body(),
        )
        .with_priority(MailPriority::Urgent)
        .with_id(id.clone());
        match self.channels.mail.send(&draft) {
            Ok(_) => Ok(()),
            Err(chipset_mail::Error::IdTaken { location, .. }) => {
                tracing::info!(%id, ?location, "escalation was sent before the restart");
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// Returns the assignment of a hook the witness watches: pending or active work.
fn watched(hook: &Hook) -> Option<Assignment> {
    match hook.state {
        HookState::Pending(_) | HookState::Active(_) => hook.assignment(),
        // Empty, completed, or a state this version does not know.
        _ => None,
    }
}

/// Reports an unreadable incident record as an action and goes on with the
/// other agents: that agent is not judged (it may have been escalated
/// already) until the doctor moves the record aside.
fn unreadable_record(result: Result<()>, actions: &mut Tick<WitnessAction>) -> Result<()> {
    match result {
        Err(crate::Error::Corrupt(c)) => {
            actions.push(WitnessAction::Unreadable {
                path: c.path.clone(),
                reason: c.reason.to_string(),
            });
            Ok(())
        }
        other => other,
    }
}
