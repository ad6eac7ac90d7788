//! The witness's pure core: from an incident record, the hook, the answers
//! seen and the time, the next step and every effect it has, as values.
//! Nothing here reads a file, sends a message or reads a clock; the shell
//! ([`Witness`](crate::Witness)) carries the [`Next`] out in order.

use std::time::Duration;

use chipset_hook::{Assignment, Hook};
use chipset_mail::MessageId;
use chipset_nudge::NudgeType;
use chipset_store::{AgentId, Timestamp};

use super::WitnessAction;
use crate::format::{
    Evidence, HEALTH_ESCALATION, Incident, IncidentKey, LoopMessage, Step, fixed_id,
};

/// The inputs of [`judge`] besides the record and the hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Judging {
    /// Now.
    pub(crate) now: Timestamp,
    /// The stall threshold.
    pub(crate) stall_threshold: Duration,
    /// The agent's nudge interval.
    pub(crate) interval: Duration,
    /// The grace period.
    pub(crate) grace: Duration,
    /// When this witness started.
    pub(crate) started_at: Timestamp,
    /// When the agent last answered the witness, if it has.
    pub(crate) answered_at: Option<Timestamp>,
    /// The witness judging: the `witness` of the records it writes.
    pub(crate) witness: AgentId,
}

/// The two nudges the witness sends (both require a response).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WitnessNudge {
    /// The first nudge of an incident.
    HealthCheck,
    /// The second, one interval later without a sign of life.
    StallWarning,
}

impl WitnessNudge {
    /// Returns the nudge type sent.
    pub(crate) fn kind(self) -> NudgeType {
        match self {
            WitnessNudge::HealthCheck => NudgeType::HealthCheck,
            WitnessNudge::StallWarning => NudgeType::StallWarning,
        }
    }
}

/// What the witness does next about one hook: the step and its effects,
/// in the order the shell carries them out.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum Next {
    /// Nothing to do now.
    Wait,
    /// Write `record` (the incident resolved: a sign of life, or the hook
    /// moved on), then report `action`.
    Record {
        /// The incident record to write.
        record: Incident,
        /// What to report ([`WitnessAction::Alive`] or [`WitnessAction::Closed`]).
        action: WitnessAction,
    },
    /// Send a nudge, then write its record and report it.
    Nudge(NudgeStep),
    /// Start an escalation: write the intent with the mail's id first, then
    /// finish it ([`Escalation::intent`]).
    Escalate(Escalation),
    /// Finish an escalation that was started.
    Finish(Box<Finish>),
}

impl Next {
    /// Returns true when there is nothing to do.
    pub(crate) fn is_wait(&self) -> bool {
        matches!(self, Next::Wait)
    }
}

/// A nudge to send (requiring a response), and the record to write once it is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) struct NudgeStep {
    /// Which nudge.
    pub(crate) nudge: WitnessNudge,
    /// Its text.
    pub(crate) text: String,
    /// The incident record to write after the send.
    pub(crate) record: Incident,
    /// What the nudge is about, the same on every tick that decides it
    /// until it is recorded: for a health check when the agent went quiet,
    /// for a stall warning when the health check went out.
    pub(crate) since: Timestamp,
}

impl NudgeStep {
    /// Returns the nudge's id, fixed by what it is about so that a tick
    /// that sends it again (the first tick's record write failed, or a
    /// crash cut it) names the same nudge, which the nudge channel then
    /// delivers once: a [`fixed_id`] at the [`NudgeStep::since`] time with
    /// the prefix `a1e7c4ec-0001` (alert check: health check) or `-0002`
    /// (stall warning), keyed by the assignment (agent, bead, generation).
    pub(crate) fn id(&self) -> String {
        let prefix = match self.nudge {
            WitnessNudge::HealthCheck => "a1e7c4ec-0001",
            WitnessNudge::StallWarning => "a1e7c4ec-0002",
        };
        fixed_id(self.since, prefix, &self.record.key().to_string())
    }

    /// Returns the record with the nudge's time set to `at`, when the
    /// nudge was first sent (an earlier tick's send that this one found
    /// delivered): the answer window counts from the nudge the agent got.
    pub(crate) fn record_sent_at(&self, at: Timestamp) -> Incident {
        let mut record = self.record.clone();
        match &mut record.step {
            Step::Checking { health_check_at } => *health_check_at = at,
            Step::Warned {
                stall_warning_at, ..
            } => *stall_warning_at = at,
            _ => {}
        }
        record
    }

    /// Returns the agent the nudge goes to.
    pub(crate) fn agent(&self) -> &AgentId {
        &self.record.assignment.agent
    }

    /// Returns the action to report once sent (`held`: the nudge waits
    /// behind an unprocessed `abort`).
    pub(crate) fn action(&self, held: bool) -> WitnessAction {
        let key = self.record.key();
        let at = self.record.updated_at;
        match self.nudge {
            WitnessNudge::HealthCheck => WitnessAction::HealthCheck {
                key,
                last_activity: self.record.last_activity,
                at,
                held,
            },
            WitnessNudge::StallWarning => WitnessAction::StallWarning { key, at, held },
        }
    }
}

/// An escalation to start. Its mail id is the one input the core does not
/// choose (it is generated from the clock and randomness): the shell gives
/// it to [`Escalation::intent`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Escalation {
    warned: Incident,
    health_check_at: Timestamp,
    stall_warning_at: Timestamp,
}

impl Escalation {
    /// Returns the intent to write durably before the mail (the incident
    /// `escalating`, holding `mail`), and the finish that follows it.
    pub(crate) fn intent(&self, mail: MessageId) -> (Incident, Finish) {
        let now = self.warned.updated_at;
        let intent = Incident {
            step: Step::Escalating {
                health_check_at: self.health_check_at,
                stall_warning_at: self.stall_warning_at,
                escalated_at: now,
                mail: mail.clone(),
            },
            ..self.warned.clone()
        };
        let finish = finishing(
            &intent,
            [self.health_check_at, self.stall_warning_at, now],
            mail,
            &self.warned.witness,
            now,
            false,
        );
        (intent, finish)
    }
}

/// A started escalation to finish, in order: send `message` as the
/// `health-escalation` mail under `mail` (the mail channel accepts the id
/// once, so a restarted witness does not send it twice), publish a critical
/// bus event de-duplicated on `dedup_key` to wake the dispatcher, write
/// `record` (the incident escalated, final), report `action`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) struct Finish {
    /// The escalation's body and payload.
    pub(crate) message: LoopMessage,
    /// The id the mail goes under.
    pub(crate) mail: MessageId,
    /// The wake-up event's de-duplication key.
    pub(crate) dedup_key: String,
    /// The record to write once both are sent.
    pub(crate) record: Incident,
    /// What to report.
    pub(crate) action: WitnessAction,
}

/// Returns the finish of an `escalating` incident record (`recovered`: an
/// earlier witness started it), or `None` for any other step.
pub(crate) fn finish(
    record: &Incident,
    witness: &AgentId,
    now: Timestamp,
    recovered: bool,
) -> Option<Finish> {
    match &record.step {
        Step::Escalating {
            health_check_at,
            stall_warning_at,
            escalated_at,
            mail,
        } => Some(finishing(
            record,
            [*health_check_at, *stall_warning_at, *escalated_at],
            mail.clone(),
            witness,
            now,
            recovered,
        )),
        _ => None,
    }
}

fn finishing(
    record: &Incident,
    [health_check_at, stall_warning_at, escalated_at]: [Timestamp; 3],
    mail: MessageId,
    witness: &AgentId,
    now: Timestamp,
    recovered: bool,
) -> Finish {
    let key = record.key();
    Finish {
        message: LoopMessage::HealthEscalation {
            assignment: record.assignment.clone(),
            last_activity: record.last_activity,
            health_check_at,
            stall_warning_at,
            escalated_at,
        },
        dedup_key: format!("{HEALTH_ESCALATION}/{key}"),
        record: Incident {
            step: Step::Escalated {
                health_check_at,
                stall_warning_at,
                escalated_at,
                mail: mail.clone(),
            },
            witness: witness.clone(),
            updated_at: now,
            ..record.clone()
        },
        action: WitnessAction::Escalated {
            key,
            mail: mail.clone(),
            at: escalated_at,
            recovered,
        },
        mail,
    }
}

/// Decides the next step for a pending or active hook holding `assignment`:
/// the witness's pure core.
///
/// `record` is the agent's incident record, whatever assignment it is
/// about. An escalation of an earlier assignment that was started is
/// finished first, before a new incident can replace its record; any other
/// record of another assignment is ignored. An agent is alive when, after
/// the incident's first nudge, it answered or touched its hook. A quiet
/// spell is measured from the later of the hook's `last_activity` and the
/// last sign of life. No incident opens within the grace period after the
/// assignment or the witness's start, and a restarted witness takes no step
/// within the grace period of its start.
///
/// ```text
/// record step        sign of life since the check   due                 next
/// none, resolved     -                              quiet > threshold   Nudge(health_check) → checking
/// checking           yes                            -                   Record(resolved) + Alive
/// checking           no                             check + interval    Nudge(stall_warning) → warned
/// warned             yes                            -                   Record(resolved) + Alive
/// warned             no                             warning + interval  Escalate → escalating → escalated
/// escalating         -                              -                   Finish (recovered) → escalated
/// escalated          -                              -                   Wait (final)
/// ```
pub(crate) fn judge(
    record: Option<&Incident>,
    hook: &Hook,
    assignment: &Assignment,
    j: &Judging,
) -> Next {
    if let Some(old) = record
        && !same_assignment(&old.assignment, assignment)
        && let Some(f) = finish(old, &j.witness, j.now, true)
    {
        return Next::Finish(Box::new(f));
    }
    let mine = record.filter(|r| same_assignment(&r.assignment, assignment));
    let (opened_at, last_activity) = mine.map_or((j.now, hook.last_activity), |r| {
        (r.opened_at, r.last_activity)
    });
    let incident = |step: Step| Incident {
        assignment: assignment.clone(),
        last_activity,
        opened_at,
        step,
        witness: j.witness.clone(),
        updated_at: j.now,
    };
    let restart_over = j.started_at + j.grace;
    // A sign of life at or after `since`: an answer first, then a touch.
    let alive = |since: Timestamp| -> Option<Next> {
        let (evidence, at) = match j.answered_at {
            Some(at) if at >= since => (Evidence::Answered, at),
            _ if hook.last_activity >= since => (Evidence::Touched, hook.last_activity),
            _ => return None,
        };
        Some(Next::Record {
            record: incident(Step::Resolved {
                alive_at: at,
                evidence,
            }),
            action: WitnessAction::Alive {
                key: IncidentKey::of(assignment),
                evidence,
                at,
            },
        })
    };
    let nudge = |nudge: WitnessNudge, record: Incident, since: Timestamp| {
        let bead = &assignment.work.bead_id;
        let text = match nudge {
            WitnessNudge::HealthCheck => {
                format!("You have hooked work ({bead}). Are you working on it?")
            }
            WitnessNudge::StallWarning => format!(
                "No activity on your hooked work ({bead}) and no answer to the health check."
            ),
        };
        Next::Nudge(NudgeStep {
            nudge,
            text,
            record,
            since,
        })
    };
    match mine.map(|r| (r, &r.step)) {
        None | Some((_, Step::Resolved { .. })) => {
            let alive_at = match mine.map(|r| &r.step) {
                Some(Step::Resolved { alive_at, .. }) => *alive_at,
                _ => Timestamp::EPOCH,
            };
            let quiet_since = hook.last_activity.max(alive_at);
            let not_before = (assignment.work.assigned_at + j.grace).max(restart_over);
            if j.now.since(quiet_since) > j.stall_threshold && j.now >= not_before {
                // A new incident: opened now, from the hook as it is.
                let record = Incident {
                    opened_at: j.now,
                    last_activity: hook.last_activity,
                    ..incident(Step::Checking {
                        health_check_at: j.now,
                    })
                };
                nudge(WitnessNudge::HealthCheck, record, quiet_since)
            } else {
                Next::Wait
            }
        }
        Some((_, Step::Checking { health_check_at })) => {
            alive(*health_check_at).unwrap_or_else(|| {
                if j.now >= (*health_check_at + j.interval).max(restart_over) {
                    let record = incident(Step::Warned {
                        health_check_at: *health_check_at,
                        stall_warning_at: j.now,
                    });
                    nudge(WitnessNudge::StallWarning, record, *health_check_at)
                } else {
                    Next::Wait
                }
            })
        }
        Some((
            _,
            Step::Warned {
                health_check_at,
                stall_warning_at,
            },
        )) => alive(*health_check_at).unwrap_or_else(|| {
            if j.now >= (*stall_warning_at + j.interval).max(restart_over) {
                Next::Escalate(Escalation {
                    warned: incident(Step::Warned {
                        health_check_at: *health_check_at,
                        stall_warning_at: *stall_warning_at,
                    }),
                    health_check_at: *health_check_at,
                    stall_warning_at: *stall_warning_at,
                })
            } else {
                Next::Wait
            }
        }),
        Some((r, Step::Escalating { .. })) => {
            finish(r, &j.witness, j.now, true).map_or(Next::Wait, |f| Next::Finish(Box::new(f)))
        }
        Some((_, Step::Escalated { .. })) => Next::Wait,
    }
}

/// Decides what happens to `agent`'s open incident once its hook no longer
/// holds pending or active work (completed, cleared, reassigned): a started
/// escalation is finished all the same (the dispatcher decides what it
/// means); a check or a warning is closed as resolved, the evidence being
/// that the hook moved on. Anything else: nothing.
pub(crate) fn close(
    record: Option<&Incident>,
    hook: &Hook,
    witness: &AgentId,
    now: Timestamp,
) -> Next {
    let Some(record) = record.filter(|r| r.step.is_open()) else {
        return Next::Wait;
    };
    if let Some(f) = finish(record, witness, now, true) {
        return Next::Finish(Box::new(f));
    }
    Next::Record {
        record: Incident {
            step: Step::Resolved {
                alive_at: hook.last_activity,
                evidence: Evidence::MovedOn,
            },
            updated_at: now,
            witness: witness.clone(),
            ..record.clone()
        },
        action: WitnessAction::Closed {
            key: record.key(),
            at: now,
        },
    }
}

/// Returns when the incident of `record` about `assignment` sent its first
/// nudge: answers from then on are signs of life.
pub(crate) fn answers_since(
    record: Option<&Incident>,
    assignment: &Assignment,
) -> Option<Timestamp> {
    record
        .filter(|r| same_assignment(&r.assignment, assignment))
        .and_then(|r| r.step.health_check_at())
}

/// Returns true when two assignments are the same fence (see
/// [`Assignment::same_fence`]).
pub(crate) fn same_assignment(a: &Assignment, b: &Assignment) -> bool {
    a.same_fence(b)
}
