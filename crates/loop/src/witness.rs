//! The witness: heartbeat and escalation (seeds 000 and 001).
//!
//! The pure part is [`judge`]: from an incident record, the hook and the
//! answers seen, it decides the next step. [`Witness::tick`] applies it to
//! every hook under the incident file's lock.

use std::path::PathBuf;
use std::time::Duration;

use chipset_bus::{Bus, NewEvent, Priority as BusPriority};
use chipset_hook::{Assignment, Hook, HookRead, HookState, Hooks};
use chipset_mail::{Draft, Mail, MailError, Priority};
use chipset_nudge::{
    Draft as NudgeDraft, NudgeConfig, NudgeType, Nudges, Received, ResponseStatus,
};
use chipset_store::{AgentId, MessageId, SortableId, StateDir, Timestamp};
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::files::{Files, Locked, task_of};
use crate::format::{Evidence, HEALTH_ESCALATION, Incident, IncidentKey, LoopMessage, Step};

/// The default stall threshold: a pending or active hook untouched for 5 minutes is quiet.
pub const DEFAULT_STALL_THRESHOLD: Duration = Duration::from_secs(300);
/// The default grace period after an assignment or a witness restart: 60 seconds.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(60);

/// How the witness judges agents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WitnessConfig {
    /// How long a pending or active hook may go untouched before the witness
    /// checks on its agent. Default 5 minutes.
    pub stall_threshold: Duration,
    /// The nudge interval: how long the witness waits for a sign of life
    /// after each nudge, by agent (default 60 s, seed 000).
    pub nudge: NudgeConfig,
    /// No incident opens within this time after the work was assigned, and
    /// a restarted witness takes no step within this time of its start.
    /// Default 60 s.
    pub grace: Duration,
}

impl Default for WitnessConfig {
    fn default() -> Self {
        WitnessConfig {
            stall_threshold: DEFAULT_STALL_THRESHOLD,
            nudge: NudgeConfig::default(),
            grace: DEFAULT_GRACE,
        }
    }
}

impl WitnessConfig {
    /// Returns this config with the stall threshold set.
    #[must_use]
    pub fn with_stall_threshold(mut self, threshold: Duration) -> Self {
        self.stall_threshold = threshold;
        self
    }

    /// Returns this config with the default nudge interval set.
    #[must_use]
    pub fn with_interval(mut self, interval: Duration) -> Self {
        self.nudge.default_interval = interval;
        self
    }

    /// Returns this config with `agent`'s nudge interval set.
    #[must_use]
    pub fn with_agent_interval(mut self, agent: AgentId, interval: Duration) -> Self {
        self.nudge = self.nudge.with_interval(agent, interval);
        self
    }

    /// Returns this config with the grace period set.
    #[must_use]
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }
}

/// What the witness did in one tick, in the order it did it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
#[non_exhaustive]
pub enum WitnessAction {
    /// The hook went quiet; a `health_check` (requiring a response) was sent.
    HealthCheck {
        /// The incident.
        key: IncidentKey,
        /// The hook's `last_activity`.
        last_activity: Timestamp,
        /// When.
        at: Timestamp,
        /// True when the nudge was held behind an unprocessed `abort`.
        held: bool,
    },
    /// No sign of life within the interval; a `stall_warning` was sent.
    StallWarning {
        /// The incident.
        key: IncidentKey,
        /// When.
        at: Timestamp,
        /// True when the nudge was held behind an unprocessed `abort`.
        held: bool,
    },
    /// The agent showed a sign of life; the incident is resolved.
    Alive {
        /// The incident.
        key: IncidentKey,
        /// What it did.
        evidence: Evidence,
        /// When it did it.
        at: Timestamp,
    },
    /// No sign of life after the stall warning: one `health_escalation` mail
    /// went to the dispatcher (and a critical bus event, to wake it).
    Escalated {
        /// The incident.
        key: IncidentKey,
        /// The escalation mail.
        mail: MessageId,
        /// When the escalation started.
        at: Timestamp,
        /// True when a restarted witness finished an escalation its
        /// predecessor had started (finding the mail it sent, or sending it).
        recovered: bool,
    },
    /// The hook moved on (completed, cleared, reassigned) while the incident was open.
    Closed {
        /// The incident.
        key: IncidentKey,
        /// When.
        at: Timestamp,
    },
    /// A hook (or an agent's answer record) could not be read; it is not
    /// judged (never taken as idle, never as alive).
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

impl WitnessAction {
    /// Returns the incident key, for actions about one.
    pub fn key(&self) -> Option<&IncidentKey> {
        match self {
            WitnessAction::HealthCheck { key, .. }
            | WitnessAction::StallWarning { key, .. }
            | WitnessAction::Alive { key, .. }
            | WitnessAction::Escalated { key, .. }
            | WitnessAction::Closed { key, .. } => Some(key),
            WitnessAction::Unreadable { .. } => None,
        }
    }
}

/// What [`judge`] decided for one hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing to do now.
    Wait,
    /// Open an incident: send a `health_check`.
    Check,
    /// Send a `stall_warning`.
    Warn,
    /// Send the escalation.
    Escalate,
    /// Finish an escalation that was started (a restarted witness).
    FinishEscalation,
    /// The agent is alive.
    Resolve {
        /// What it did.
        evidence: Evidence,
        /// When.
        at: Timestamp,
    },
}

/// The inputs of [`judge`] besides the record and the hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Judging {
    /// Now.
    pub now: Timestamp,
    /// The stall threshold.
    pub stall_threshold: Duration,
    /// The agent's nudge interval.
    pub interval: Duration,
    /// The grace period.
    pub grace: Duration,
    /// When this witness started.
    pub started_at: Timestamp,
    /// When the agent last answered the witness, if it has.
    pub answered_at: Option<Timestamp>,
}

/// Decides the next step for a pending or active hook: the witness's pure core.
///
/// `record` is the agent's incident record if it is about this assignment.
/// An agent is alive when, after the incident's first nudge, it answered or
/// touched its hook. A quiet spell is measured from the later of the hook's
/// `last_activity` and the last sign of life. No incident opens within the
/// grace period after the assignment or the witness's start, and a restarted
/// witness takes no step within the grace period of its start.
pub fn judge(
    record: Option<&Incident>,
    hook: &Hook,
    assignment: &Assignment,
    j: &Judging,
) -> Verdict {
    let restart_over = j.started_at.add(j.grace);
    let life = |since: Timestamp| -> Option<Verdict> {
        if let Some(at) = j.answered_at
            && at >= since
        {
            return Some(Verdict::Resolve {
                evidence: Evidence::Answered,
                at,
            });
        }
        (hook.last_activity() >= since).then(|| Verdict::Resolve {
            evidence: Evidence::Touched,
            at: hook.last_activity(),
        })
    };
    let step = record
        .filter(|r| same_assignment(&r.assignment, assignment))
        .map(|r| &r.step);
    match step {
        None | Some(Step::Resolved { .. }) => {
            let alive_at = match step {
                Some(Step::Resolved { alive_at, .. }) => *alive_at,
                _ => Timestamp::EPOCH,
            };
            let quiet_since = hook.last_activity().max(alive_at);
            let not_before = assignment
                .work()
                .assigned_at()
                .add(j.grace)
                .max(restart_over);
            if j.now.since(quiet_since) > j.stall_threshold && j.now >= not_before {
                Verdict::Check
            } else {
                Verdict::Wait
            }
        }
        Some(Step::Checking { health_check_at }) => life(*health_check_at).unwrap_or(
            if j.now >= health_check_at.add(j.interval).max(restart_over) {
                Verdict::Warn
            } else {
                Verdict::Wait
            },
        ),
        Some(Step::Warned {
            health_check_at,
            stall_warning_at,
        }) => life(*health_check_at).unwrap_or(
            if j.now >= stall_warning_at.add(j.interval).max(restart_over) {
                Verdict::Escalate
            } else {
                Verdict::Wait
            },
        ),
        Some(Step::Escalating { .. }) => Verdict::FinishEscalation,
        Some(Step::Escalated { .. }) => Verdict::Wait,
    }
}

/// Reports an unreadable incident record as an action and goes on with the
/// other agents: that agent is not judged (it may have been escalated
/// already) until the doctor moves the record aside.
fn unreadable_record(result: Result<()>, actions: &mut Vec<WitnessAction>) -> Result<()> {
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

/// Returns true when two assignments are the same fence (see
/// [`Assignment::same_fence`]).
pub(crate) fn same_assignment(a: &Assignment, b: &Assignment) -> bool {
    a.same_fence(b)
}

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
    hooks: Hooks,
    nudges: Nudges,
    mail: Mail,
    bus: Bus,
    files: Files,
    started_at: Timestamp,
}

impl Witness {
    /// Returns a witness named `me` that escalates to `dispatcher`. Its start
    /// time (for the restart grace period) is now on the state's clock.
    pub fn new(state: StateDir, me: AgentId, dispatcher: AgentId, config: WitnessConfig) -> Self {
        let started_at = state.now();
        Witness {
            me,
            dispatcher,
            hooks: Hooks::new(state.clone()),
            nudges: Nudges::with_config(state.clone(), config.nudge.clone()),
            mail: Mail::new(state.clone()),
            bus: Bus::new(state.clone()),
            files: Files::new(state),
            config,
            started_at,
        }
    }

    /// Returns the witness's agent id (the `from` of its nudges and mail).
    pub fn id(&self) -> &AgentId {
        &self.me
    }

    /// Returns the config.
    pub fn config(&self) -> &WitnessConfig {
        &self.config
    }

    /// Returns when this witness started.
    pub fn started_at(&self) -> Timestamp {
        self.started_at
    }

    /// Reads `agent`'s incident record.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`](crate::Error::Corrupt) when it is unreadable; [`Error::Store`](crate::Error::Store).
    pub fn incident(&self, agent: &AgentId) -> Result<Option<Incident>> {
        self.files.read(&self.files.incident(agent))
    }

    /// Returns every incident record, by agent.
    ///
    /// # Errors
    ///
    /// As [`Witness::incident`].
    pub fn incidents(&self) -> Result<Vec<Incident>> {
        let dir = self.files.incidents_dir();
        let mut out = Vec::new();
        for name in self.files.state.list(&dir)? {
            let Some(agent) = name
                .strip_suffix(".json")
                .and_then(|a| AgentId::new(a).ok())
            else {
                continue;
            };
            if let Some(i) = self.incident(&agent)? {
                out.push(i);
            }
        }
        Ok(out)
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
    /// # Errors
    ///
    /// [`Error::Corrupt`](crate::Error::Corrupt) when an incident record is unreadable (run the
    /// doctor); channel errors. Steps taken before the error stay taken.
    pub fn tick(&self) -> Result<Vec<WitnessAction>> {
        let now = self.files.state.now();
        let mut actions = Vec::new();
        // Answers land in the witness's own `latest.json` too (seed 000); they
        // are read through the per-responder records, so mark them processed.
        if let Received::New(n) = self.nudges.receive(&self.me)?
            && n.kind == NudgeType::NudgeResponse
        {
            self.nudges.mark_processed(&self.me, &n)?;
        }
        for entry in self.hooks.list()? {
            match &entry.read {
                HookRead::Corrupt(c) => actions.push(WitnessAction::Unreadable {
                    path: c.path.clone(),
                    reason: c.reason.to_string(),
                }),
                // A hook in a state this version does not know cannot be judged idle or done.
                HookRead::Unsupported(u) => actions.push(WitnessAction::Unreadable {
                    path: u.path.clone(),
                    reason: format!("holds {}, unsupported by this version", u.what),
                }),
                HookRead::Hook(hook)
                    if matches!(hook.state(), HookState::Pending(_) | HookState::Active(_)) =>
                {
                    let assignment = hook.assignment().expect("pending and active hold work");
                    let watched = self.watch(hook, &assignment, now, &mut actions);
                    unreadable_record(watched, &mut actions)?;
                }
                HookRead::Hook(hook) => {
                    let closed = self.close_if_open(&entry.agent, hook, now, &mut actions);
                    unreadable_record(closed, &mut actions)?;
                }
                HookRead::Missing => {}
            }
        }
        self.files.append(&self.files.witness_log(), &actions)?;
        Ok(actions)
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
            interval: self.config.nudge.interval_for(agent),
            grace: self.config.grace,
            started_at: self.started_at,
            answered_at,
        }
    }

    /// Returns when `agent` answered this witness at or after `since`.
    fn answered(
        &self,
        agent: &AgentId,
        since: Option<Timestamp>,
        actions: &mut Vec<WitnessAction>,
    ) -> Result<Option<Timestamp>> {
        let Some(since) = since else { return Ok(None) };
        match self.nudges.response_status(&self.me, agent, since) {
            Ok(ResponseStatus::Answered { at, .. }) => Ok(Some(at)),
            Ok(_) => Ok(None),
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

    fn watch(
        &self,
        hook: &Hook,
        assignment: &Assignment,
        now: Timestamp,
        actions: &mut Vec<WitnessAction>,
    ) -> Result<()> {
        let agent = assignment.agent();
        let path = self.files.incident(agent);
        // A first look without the lock: most hooks need nothing.
        let record: Option<Incident> = self.files.read(&path)?;
        if let Some(old) = &record
            && !same_assignment(&old.assignment, assignment)
            && matches!(old.step, Step::Escalating { .. })
        {
            // An escalation of an earlier assignment was started: finish it
            // before a new incident can replace its record.
            let mut locked = self.files.lock::<Incident>(&path)?;
            self.finish_escalation(&mut locked, now, true, actions)?;
            return Ok(());
        }
        let since = record
            .as_ref()
            .filter(|r| same_assignment(&r.assignment, assignment))
            .and_then(|r| r.step.health_check_at());
        let mut scratch = Vec::new();
        let answered = self.answered(agent, since, &mut scratch)?;
        if judge(
            record.as_ref(),
            hook,
            assignment,
            &self.judging(agent, now, answered),
        ) == Verdict::Wait
        {
            actions.extend(scratch);
            return Ok(());
        }
        // Decide again under the lock: another witness may have moved first,
        // and the agent may have touched its hook since the listing read it.
        let mut locked = self.files.lock::<Incident>(&path)?;
        let fresh = match self.hooks.read(agent)? {
            HookRead::Hook(h)
                if matches!(h.state(), HookState::Pending(_) | HookState::Active(_))
                    && h.assignment()
                        .is_some_and(|a| same_assignment(&a, assignment)) =>
            {
                h
            }
            // Cleared, reassigned, completed or unreadable now: the next tick
            // sees it as it is.
            _ => return Ok(()),
        };
        let hook = &fresh;
        let record = locked.current.clone();
        let since = record
            .as_ref()
            .filter(|r| same_assignment(&r.assignment, assignment))
            .and_then(|r| r.step.health_check_at());
        let answered = self.answered(agent, since, actions)?;
        let verdict = judge(
            record.as_ref(),
            hook,
            assignment,
            &self.judging(agent, now, answered),
        );
        let key = IncidentKey::of(assignment);
        let incident = |step: Step, opened_at: Timestamp, last_activity: Timestamp| Incident {
            assignment: assignment.clone(),
            last_activity,
            opened_at,
            step,
            witness: self.me.clone(),
            updated_at: now,
        };
        let (opened_at, last_activity) = record
            .as_ref()
            .filter(|r| same_assignment(&r.assignment, assignment))
            .map_or((now, hook.last_activity()), |r| {
                (r.opened_at, r.last_activity)
            });
        match verdict {
            Verdict::Wait => {}
            Verdict::Resolve { evidence, at } => {
                locked.write(incident(
                    Step::Resolved {
                        alive_at: at,
                        evidence,
                    },
                    opened_at,
                    last_activity,
                ))?;
                tracing::info!(%key, %evidence, "agent is alive");
                actions.push(WitnessAction::Alive { key, evidence, at });
            }
            Verdict::Check => {
                let held = self.nudge(agent, NudgeType::HealthCheck, assignment)?;
                locked.write(incident(
                    Step::Checking {
                        health_check_at: now,
                    },
                    now,
                    hook.last_activity(),
                ))?;
                tracing::info!(%key, "hook quiet: health check sent");
                actions.push(WitnessAction::HealthCheck {
                    key,
                    last_activity: hook.last_activity(),
                    at: now,
                    held,
                });
            }
            Verdict::Warn => {
                let health_check_at = since.expect("checking has a health check");
                let held = self.nudge(agent, NudgeType::StallWarning, assignment)?;
                locked.write(incident(
                    Step::Warned {
                        health_check_at,
                        stall_warning_at: now,
                    },
                    opened_at,
                    last_activity,
                ))?;
                tracing::warn!(%key, "no answer: stall warning sent");
                actions.push(WitnessAction::StallWarning { key, at: now, held });
            }
            Verdict::Escalate => {
                let Some(Step::Warned {
                    health_check_at,
                    stall_warning_at,
                }) = record.as_ref().map(|r| r.step.clone())
                else {
                    unreachable!("an escalation follows a warning")
                };
                // The intent, with the mail's id, is durable before the mail:
                // a witness that dies in between sends it on restart under
                // the same id, which the mail channel accepts only once.
                let mail = MessageId::from(SortableId::generate(self.files.state.clock().as_ref()));
                locked.write(incident(
                    Step::Escalating {
                        health_check_at,
                        stall_warning_at,
                        escalated_at: now,
                        mail,
                    },
                    opened_at,
                    last_activity,
                ))?;
                self.finish_escalation(&mut locked, now, false, actions)?;
            }
            Verdict::FinishEscalation => {
                self.finish_escalation(&mut locked, now, true, actions)?;
            }
        }
        Ok(())
    }

    /// Sends the escalation of the `Escalating` incident held under its lock
    /// (`recovered`: an earlier witness started it), wakes the dispatcher,
    /// and records the incident as escalated.
    fn finish_escalation(
        &self,
        locked: &mut Locked<Incident>,
        now: Timestamp,
        recovered: bool,
        actions: &mut Vec<WitnessAction>,
    ) -> Result<()> {
        let Some(mut incident) = locked.current.clone() else {
            return Ok(());
        };
        let Step::Escalating {
            health_check_at,
            stall_warning_at,
            escalated_at,
            mail,
        } = incident.step.clone()
        else {
            return Ok(());
        };
        let key = incident.key();
        let message = LoopMessage::HealthEscalation {
            assignment: incident.assignment.clone(),
            last_activity: incident.last_activity,
            health_check_at,
            stall_warning_at,
            escalated_at,
        };
        self.send_escalation(&message, &mail)?;
        // The wake-up: de-duplicated, so a recovering witness does not wake twice.
        let event = NewEvent::new(self.me.as_str(), HEALTH_ESCALATION)
            .priority(BusPriority::Critical)
            .payload(message.to_payload())
            .dedup_key(format!("{HEALTH_ESCALATION}/{key}"));
        let _ = self.bus.publish(&self.dispatcher, &event)?;
        incident.step = Step::Escalated {
            health_check_at,
            stall_warning_at,
            escalated_at,
            mail: mail.clone(),
        };
        incident.witness = self.me.clone();
        incident.updated_at = now;
        locked.write(incident)?;
        tracing::warn!(%key, %mail, "agent silent: escalated to the dispatcher");
        actions.push(WitnessAction::Escalated {
            key,
            mail,
            at: escalated_at,
            recovered,
        });
        Ok(())
    }

    /// Closes an open incident whose hook moved on. An escalation that was
    /// started is finished all the same: the dispatcher decides what it means.
    fn close_if_open(
        &self,
        agent: &AgentId,
        hook: &Hook,
        now: Timestamp,
        actions: &mut Vec<WitnessAction>,
    ) -> Result<()> {
        let path = self.files.incident(agent);
        let open = |r: &Option<Incident>| r.as_ref().is_some_and(|r| r.step.is_open());
        if !open(&self.files.read(&path)?) {
            return Ok(());
        }
        let mut locked = self.files.lock::<Incident>(&path)?;
        let Some(mut incident) = locked.current.clone().filter(|r| r.step.is_open()) else {
            return Ok(());
        };
        if matches!(incident.step, Step::Escalating { .. }) {
            return self.finish_escalation(&mut locked, now, true, actions);
        }
        let key = incident.key();
        incident.step = Step::Resolved {
            alive_at: hook.last_activity(),
            evidence: Evidence::MovedOn,
        };
        incident.updated_at = now;
        incident.witness = self.me.clone();
        locked.write(incident)?;
        actions.push(WitnessAction::Closed { key, at: now });
        Ok(())
    }

    /// Sends a nudge requiring a response; returns true when it was held.
    fn nudge(&self, agent: &AgentId, kind: NudgeType, a: &Assignment) -> Result<bool> {
        let text = match kind {
            NudgeType::HealthCheck => format!(
                "You have hooked work ({}). Are you working on it?",
                a.bead_id()
            ),
            _ => format!(
                "No activity on your hooked work ({}) and no answer to the health check.",
                a.bead_id()
            ),
        };
        let draft = NudgeDraft::new(self.me.clone(), kind, text).requiring_response();
        Ok(self.nudges.send(agent, draft)?.is_held())
    }

    /// Sends the escalation under the id persisted in the intent. If a
    /// predecessor sent it already, the mail channel refuses the id as taken
    /// and nothing is sent twice.
    fn send_escalation(&self, message: &LoopMessage, id: &MessageId) -> Result<()> {
        let a = message.assignment();
        let draft = Draft::notify(
            self.me.clone(),
            self.dispatcher.clone(),
            task_of(a.bead_id())?,
            HEALTH_ESCALATION,
            message.to_body(),
        )
        .with_priority(Priority::Urgent)
        .with_id(id.clone());
        match self.mail.send(&draft) {
            Ok(_) => Ok(()),
            Err(MailError::IdTaken { location, .. }) => {
                tracing::info!(%id, ?location, "escalation was sent before the restart");
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use chipset_hook::{HookState, WorkItem};
    use chipset_store::BeadId;

    use super::*;

    const MIN: u64 = 60_000;

    fn t(ms: u64) -> Timestamp {
        Timestamp::from_unix_ms(i64::try_from(ms).unwrap())
    }

    fn hook(last_activity: u64) -> (Hook, Assignment) {
        let work = WorkItem::new(BeadId::new("b1").unwrap(), "t", t(0), None);
        let hook = Hook::new(
            AgentId::new("w1").unwrap(),
            HookState::Active(work),
            t(last_activity),
            1,
        );
        let a = hook.assignment().unwrap();
        (hook, a)
    }

    fn j(now: u64, answered_at: Option<u64>) -> Judging {
        Judging {
            now: t(now),
            stall_threshold: Duration::from_millis(5 * MIN),
            interval: Duration::from_millis(MIN),
            grace: Duration::from_millis(MIN),
            started_at: t(0),
            answered_at: answered_at.map(t),
        }
    }

    fn incident(a: &Assignment, step: Step) -> Incident {
        Incident {
            assignment: a.clone(),
            last_activity: t(0),
            opened_at: t(0),
            step,
            witness: AgentId::new("witness").unwrap(),
            updated_at: t(0),
        }
    }

    #[test]
    fn judge_follows_the_incident_steps() {
        let (h, a) = hook(0);
        // Quiet for the threshold exactly: not yet; one ms more: check.
        assert_eq!(judge(None, &h, &a, &j(5 * MIN, None)), Verdict::Wait);
        assert_eq!(judge(None, &h, &a, &j(5 * MIN + 1, None)), Verdict::Check);

        let checking = incident(
            &a,
            Step::Checking {
                health_check_at: t(6 * MIN),
            },
        );
        assert_eq!(
            judge(Some(&checking), &h, &a, &j(7 * MIN - 1, None)),
            Verdict::Wait
        );
        assert_eq!(
            judge(Some(&checking), &h, &a, &j(7 * MIN, None)),
            Verdict::Warn
        );
        // An answer before the health check does not count; one after does.
        assert_eq!(
            judge(Some(&checking), &h, &a, &j(7 * MIN, Some(6 * MIN - 1))),
            Verdict::Warn
        );
        assert_eq!(
            judge(Some(&checking), &h, &a, &j(7 * MIN, Some(6 * MIN))),
            Verdict::Resolve {
                evidence: Evidence::Answered,
                at: t(6 * MIN)
            }
        );

        let warned = incident(
            &a,
            Step::Warned {
                health_check_at: t(6 * MIN),
                stall_warning_at: t(7 * MIN),
            },
        );
        assert_eq!(
            judge(Some(&warned), &h, &a, &j(8 * MIN - 1, None)),
            Verdict::Wait
        );
        assert_eq!(
            judge(Some(&warned), &h, &a, &j(8 * MIN, None)),
            Verdict::Escalate
        );
        let (touched, _) = hook(7 * MIN + 5);
        assert_eq!(
            judge(Some(&warned), &touched, &a, &j(8 * MIN, None)),
            Verdict::Resolve {
                evidence: Evidence::Touched,
                at: t(7 * MIN + 5)
            }
        );

        let escalated = incident(
            &a,
            Step::Escalated {
                health_check_at: t(6 * MIN),
                stall_warning_at: t(7 * MIN),
                escalated_at: t(8 * MIN),
                mail: "1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab"
                    .parse()
                    .unwrap(),
            },
        );
        assert_eq!(
            judge(Some(&escalated), &h, &a, &j(100 * MIN, None)),
            Verdict::Wait
        );
        let escalating = incident(
            &a,
            Step::Escalating {
                health_check_at: t(6 * MIN),
                stall_warning_at: t(7 * MIN),
                escalated_at: t(8 * MIN),
                mail: "1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab"
                    .parse()
                    .unwrap(),
            },
        );
        assert_eq!(
            judge(Some(&escalating), &h, &a, &j(8 * MIN, None)),
            Verdict::FinishEscalation
        );
    }

    #[test]
    fn a_record_of_another_assignment_is_ignored() {
        let (h, a) = hook(0);
        let work = WorkItem::new(BeadId::new("b1").unwrap(), "t", t(0), None);
        let older = Hook::new(a.agent().clone(), HookState::Active(work), t(0), 0)
            .assignment()
            .unwrap();
        let escalated = incident(
            &older,
            Step::Escalated {
                health_check_at: t(0),
                stall_warning_at: t(0),
                escalated_at: t(0),
                mail: "1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab"
                    .parse()
                    .unwrap(),
            },
        );
        assert_eq!(
            judge(Some(&escalated), &h, &a, &j(6 * MIN, None)),
            Verdict::Check
        );
    }

    #[test]
    fn grace_delays_new_incidents_and_restarted_steps() {
        let (h, a) = hook(0);
        let mut late_start = j(5 * MIN + 1, None);
        late_start.started_at = t(5 * MIN);
        assert_eq!(judge(None, &h, &a, &late_start), Verdict::Wait);
        late_start.now = t(6 * MIN);
        assert_eq!(judge(None, &h, &a, &late_start), Verdict::Check);

        let checking = incident(
            &a,
            Step::Checking {
                health_check_at: t(6 * MIN),
            },
        );
        let mut restarted = j(7 * MIN, None);
        restarted.started_at = t(7 * MIN);
        assert_eq!(judge(Some(&checking), &h, &a, &restarted), Verdict::Wait);
        restarted.now = t(8 * MIN);
        assert_eq!(judge(Some(&checking), &h, &a, &restarted), Verdict::Warn);
    }
}
