//! Critic/executor rounds (seed 002): a typed round with a persisted
//! checkpoint, a fail-closed commit gate, stalemate escalation, and the
//! sweep of the task's mail after the commit.

use chipset_bus::{Bus, EventId, NewEvent, Priority as BusPriority};
use chipset_mail::{Mail, SweepReport};
use chipset_store::{AgentId, TaskId, Timestamp};

use crate::channels::Channels;
use crate::error::{Error, Result};
use crate::files::{Files, Held};
use crate::format::{
    Blocker, CriticReport, EscalationReason, Gate, PendingReply, Phase, ROUND_ESCALATION_EVENT,
    RoundCheckpoint, RoundRecord, Routing, fixed_id,
};

/// The default round limit: 5.
pub(crate) const DEFAULT_MAX_ROUNDS: u32 = 5;

/// How rounds are run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundsConfig {
    /// A task that has not committed after this many rounds escalates. Default 5.
    pub max_rounds: u32,
    /// Who is woken (a critical `round-escalation` bus event) when a round
    /// escalates; nobody when `None` (the default).
    pub escalate_to: Option<AgentId>,
    /// The `source` of that event. Default `orchestrator`.
    pub orchestrator: String,
}

impl Default for RoundsConfig {
    fn default() -> Self {
        RoundsConfig {
            max_rounds: DEFAULT_MAX_ROUNDS,
            escalate_to: None,
            orchestrator: "orchestrator".to_owned(),
        }
    }
}

/// Decides where a round goes: the pure routing rule of seed 002.
///
/// - Commit when the verification passed, there are no findings and the
///   gate is clear. A gate that could not be read blocks (fail closed).
/// - Escalate (stalemate) when replies are pending now and in the previous
///   routed round, and their number did not shrink.
/// - Escalate when `round` reached `max_rounds` without a commit.
/// - Otherwise another round, with every blocker listed.
pub(crate) fn route(
    report: &CriticReport,
    gate: &Gate,
    history: &[RoundRecord],
    round: u32,
    max_rounds: u32,
) -> Routing {
    let mut blockers = Vec::new();
    if !report.verified() {
        blockers.push(Blocker::VerificationFailed {
            exit_code: report.verify_exit_code,
        });
    }
    if !report.findings.is_empty() {
        blockers.push(Blocker::Findings {
            categories: report.findings.iter().map(|f| f.category.clone()).collect(),
        });
    }
    let subjects = match gate {
        Gate::Clear => Vec::new(),
        Gate::Pending { replies } => {
            let subjects: Vec<String> = replies.iter().map(|r| r.subject.clone()).collect();
            blockers.push(Blocker::PendingReplies {
                pending_subjects: subjects.clone(),
            });
            subjects
        }
        Gate::Unreadable { error } => {
            blockers.push(Blocker::GateUnreadable {
                error: error.clone(),
            });
            Vec::new()
        }
    };
    if blockers.is_empty() {
        return Routing::Commit;
    }
    let previous = history.last().and_then(|r| r.gate.pending());
    // `pending >= previous > 0`: replies pending in both rounds, none fewer.
    if let (Some(pending), Some(previous)) = (gate.pending(), previous)
        && previous > 0
        && pending >= previous
    {
        return Routing::Escalate {
            reason: EscalationReason::Stalemate {
                previous,
                pending,
                pending_subjects: subjects,
            },
            blockers,
        };
    }
    if round >= max_rounds {
        return Routing::Escalate {
            reason: EscalationReason::TooManyRounds { max_rounds },
            blockers,
        };
    }
    Routing::AnotherRound { blockers }
}

/// The rounds of every task under one state root: `loop/rounds/{task}.json`.
///
/// Cheap to clone.
#[derive(Debug, Clone)]
pub struct Rounds {
    files: Files,
    mail: Mail,
    bus: Bus,
    config: RoundsConfig,
}

impl Rounds {
    /// Returns the rounds working through `channels` (a
    /// [`StateDir`](chipset_store::StateDir) for every channel with its
    /// default config, or [`Channels`] you configured): the gate and the
    /// sweep through its mail, the escalation's wake-up through its bus,
    /// and the checkpoints on its server when it is on one
    /// ([`Channels::with_backend`]).
    pub fn new(channels: impl Into<Channels>, config: RoundsConfig) -> Self {
        let channels = channels.into();
        Rounds {
            files: channels.files(),
            bus: channels.bus,
            mail: channels.mail,
            config,
        }
    }

    /// Reads `task`'s round as last checkpointed, without opening one:
    /// `None` when the task has none.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] when it is unreadable; [`Error::Store`].
    pub fn get(&self, task: &TaskId) -> Result<Option<Round>> {
        let checkpoint: Option<RoundCheckpoint> = self.files.read(&self.files.round(task))?;
        Ok(checkpoint.map(|checkpoint| Round {
            rounds: self.clone(),
            checkpoint,
            last: None,
        }))
    }

    /// Opens `task`'s round: resumes from its checkpoint (a killed
    /// orchestrator goes on where it was), or starts round 1 in the
    /// executor phase and writes the first checkpoint.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] when the checkpoint is unreadable (a round is never
    /// silently restarted over it); [`Error::Store`].
    pub fn open(&self, task: &TaskId) -> Result<Round> {
        let mut locked = self.lock(task)?;
        let checkpoint = match locked.current().cloned() {
            Some(c) => c,
            None => {
                let now = self.files.now()?;
                let c = RoundCheckpoint {
                    task: task.clone(),
                    round: 1,
                    phase: Phase::Executor,
                    report: None,
                    history: Vec::new(),
                    started_at: now,
                    updated_at: now,
                    swept: None,
                };
                locked.write(c.clone())?;
                c
            }
        };
        drop(locked);
        let round = Round {
            rounds: self.clone(),
            checkpoint,
            last: None,
        };
        // A crash after checkpointing an escalation but before its wake-up
        // would lose the wake-up: announce again (de-duplicated on the bus).
        if round.checkpoint.phase == Phase::Escalated {
            let reason = round
                .checkpoint
                .history
                .last()
                .and_then(|r| match &r.routing {
                    Routing::Escalate { reason, .. } => Some(reason.clone()),
                    _ => None,
                });
            if let Some(reason) = reason {
                round.announce_escalation(&reason)?;
            }
        }
        Ok(round)
    }

    fn lock(&self, task: &TaskId) -> Result<Held<RoundCheckpoint>> {
        self.files.lock(&self.files.round(task))
    }
}

/// One task's round, as a typed state machine over its checkpoint.
///
/// ```text
/// executor --executor_done--> critic --critic_done--> routing --route-->
///     executor (next round) | committing --committed--> committed | escalated
/// ```
///
/// Every step checks the phase, and writes the checkpoint under its lock
/// after checking that nobody else moved it on ([`Error::Conflict`]).
///
/// Retry rule: after a step fails, call it again on the same handle. If
/// the failed attempt's checkpoint was written after all (an unknown
/// outcome), the retry finds it and returns as that attempt would have
/// (`route`: the same routing), writing nothing; otherwise it takes the
/// step now. Calling a step again after it succeeded is the same: a
/// success that writes nothing, while the checkpoint is still the one it
/// wrote. So a `route` that escalated but failed to wake `escalate_to`
/// announces again when called again, and `committed` sweeps again (the
/// sweep is idempotent). After a crash, reopen the round
/// ([`Rounds::open`]) and take the step its phase calls for.
#[derive(Debug, Clone)]
pub struct Round {
    rounds: Rounds,
    checkpoint: RoundCheckpoint,
    /// This handle's last step: the phase it stepped from, and the
    /// checkpoint it wrote or tried to write (a failed write may have
    /// happened).
    last: Option<(Phase, RoundCheckpoint)>,
}

/// Two handles are equal when they hold the same checkpoint.
impl PartialEq for Round {
    fn eq(&self, other: &Round) -> bool {
        self.checkpoint == other.checkpoint
    }
}

impl Eq for Round {}

impl Round {
    /// Returns the task.
    pub fn task(&self) -> &TaskId {
        &self.checkpoint.task
    }

    /// Returns the current round's number, from 1. A task that committed
    /// or escalated keeps the number of its last round, which is also how
    /// many rounds were routed.
    pub fn number(&self) -> u32 {
        self.checkpoint.round
    }

    /// Returns the phase, as last checkpointed.
    pub fn phase(&self) -> Phase {
        self.checkpoint.phase
    }

    /// Records that the executor finished its work: executor → critic.
    ///
    /// # Errors
    ///
    /// [`Error::WrongPhase`]; [`Error::Conflict`]; [`Error::Store`].
    pub fn executor_done(&mut self) -> Result<()> {
        self.step(
            Phase::Executor,
            |c, _| {
                c.phase = Phase::Critic;
                Ok(())
            },
            |_| (),
        )
    }

    /// Records the critic's report: critic → routing.
    ///
    /// # Errors
    ///
    /// As [`Round::executor_done`].
    pub fn critic_done(&mut self, report: CriticReport) -> Result<()> {
        self.step(
            Phase::Critic,
            |c, _| {
                c.report = Some(report);
                c.phase = Phase::Routing;
                Ok(())
            },
            |_| (),
        )
    }

    /// Routes the round: reads the pending-replies gate (an error blocks the
    /// commit), applies the routing rule (commit when verified, clean and no reply is pending; escalate on a stalemate or at the round limit; else another round), records the round in the history and moves
    /// to the next round's executor phase, to committing, or to escalated (a
    /// critical bus event wakes [`RoundsConfig::escalate_to`]).
    ///
    /// # Errors
    ///
    /// As [`Round::executor_done`]. A gate that cannot be read is not an
    /// error: it is a [`Blocker::GateUnreadable`], and blocks the commit.
    /// [`Error::PartlyDone`] when the escalation was checkpointed but its
    /// wake-up failed (call `route` again to announce it).
    pub fn route(&mut self) -> Result<Routing> {
        let gate = match self.rounds.mail.pending_replies(self.task()) {
            Ok(pending) if pending.is_empty() => Gate::Clear,
            Ok(pending) => Gate::Pending {
                replies: pending
                    .iter()
                    .map(|m| PendingReply {
                        id: m.id.clone(),
                        subject: m.subject.to_owned(),
                    })
                    .collect(),
            },
            Err(e) => {
                tracing::warn!(task = %self.task(), error = %e, "pending-replies gate unreadable: commit blocked");
                Gate::Unreadable {
                    error: e.to_string(),
                }
            }
        };
        let max_rounds = self.rounds.config.max_rounds;
        let routing = self.step(
            Phase::Routing,
            |c, now| {
                let report = c.report.take().expect("routing has the critic's report");
                let routing = route(&report, &gate, &c.history, c.round, max_rounds);
                c.history.push(RoundRecord {
                    round: c.round,
                    report,
                    gate,
                    routing: routing.clone(),
                    routed_at: now,
                });
                match &routing {
                    Routing::Commit => c.phase = Phase::Committing,
                    Routing::AnotherRound { .. } => {
                        c.round += 1;
                        c.phase = Phase::Executor;
                    }
                    Routing::Escalate { .. } => c.phase = Phase::Escalated,
                }
                Ok(routing)
            },
            |c| {
                let last = c.history.last().expect("a routed round is in the history");
                last.routing.clone()
            },
        )?;
        if let Routing::Escalate { reason, .. } = &routing {
            // The checkpoint is written: a failed wake-up is a route done
            // in part, which the same call again finishes.
            self.announce_escalation(reason)
                .map_err(|e| Error::partly("round route", e))?;
        }
        Ok(routing)
    }

    /// Wakes `escalate_to` (when configured) with a critical, de-duplicated
    /// `round-escalation` event. Called after the escalation is checkpointed,
    /// and again by [`Rounds::open`] for an escalated checkpoint, so a crash
    /// between the two never loses the wake-up.
    fn announce_escalation(&self, reason: &EscalationReason) -> Result<()> {
        let Some(to) = &self.rounds.config.escalate_to else {
            return Ok(());
        };
        let payload = serde_json::json!({
            "task": self.task(),
            "round": self.number(),
            "escalation": reason,
        });
        let event = NewEvent::new(
            self.rounds.config.orchestrator.as_str(),
            ROUND_ESCALATION_EVENT,
        )
        .with_priority(BusPriority::Critical)
        .with_payload(payload)
        .with_dedup_key(format!("{ROUND_ESCALATION_EVENT}/{}", self.task()))
        .with_id(self.escalation_id()?);
        match self.rounds.bus.publish(to, &event) {
            // The id names this escalation's wake-up: one under it with
            // other content (the rounds reopened with another orchestrator
            // name or payload) is that wake-up, already announced.
            Ok(_) | Err(chipset_bus::Error::IdTaken { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The id of the escalation's wake-up, the same for every announcement
    /// of it (the key alone lets one through again when a publish failed
    /// before recording it): a [`fixed_id`] at the time the round was
    /// routed, with the prefix `e5ca1a7e-20d5` (escalate, rounds), keyed by
    /// the task.
    fn escalation_id(&self) -> Result<EventId> {
        let routed = self.checkpoint.history.last().map(|r| r.routed_at);
        let at = routed.unwrap_or(self.checkpoint.updated_at);
        Ok(EventId::new(fixed_id(
            at,
            "e5ca1a7e-20d5",
            self.task().as_str(),
        ))?)
    }

    /// Records that the caller committed: sweeps the task's mail into
    /// `mail/archive/by-task/{task}/` and marks the round committed,
    /// keeping how many messages that folder holds after the sweep. Safe to
    /// call again after a failure or a crash (the sweep is idempotent, and
    /// the count takes in what an earlier attempt moved).
    ///
    /// # Errors
    ///
    /// [`Error::WrongPhase`] unless committing; [`Error::Mail`] when the
    /// sweep fails (the round stays committing; call again after repair);
    /// [`Error::PartlyDone`] when marking it committed fails after the
    /// sweep.
    pub fn committed(&mut self) -> Result<SweepReport> {
        self.may_step(Phase::Committing)?;
        let report = self.rounds.mail.sweep_task_on_commit(self.task())?;
        // The sweep is done: a failure now is a commit done in part, which
        // the same call again finishes.
        self.step(
            Phase::Committing,
            |c, _| {
                c.phase = Phase::Committed;
                c.swept = Some(report.total);
                Ok(())
            },
            |_| (),
        )
        .map_err(|e| Error::partly("round commit", e))?;
        Ok(report)
    }

    fn wrong(&self, expected: Phase) -> Error {
        Error::WrongPhase {
            task: self.checkpoint.task.clone(),
            phase: self.checkpoint.phase,
            expected,
        }
    }

    /// Returns what this handle's last step from `expected` wrote or tried
    /// to write.
    fn mine(&self, expected: Phase) -> Option<&RoundCheckpoint> {
        self.last
            .as_ref()
            .filter(|(from, _)| *from == expected)
            .map(|(_, c)| c)
    }

    /// Checks that a step from `expected` may be taken: the round is in
    /// that phase, or the step is this handle's last one, taken again.
    fn may_step(&self, expected: Phase) -> Result<()> {
        if self.checkpoint.phase == expected || self.mine(expected) == Some(&self.checkpoint) {
            Ok(())
        } else {
            Err(self.wrong(expected))
        }
    }

    /// Applies `change` to the checkpoint in phase `expected`, under the
    /// checkpoint's lock, and writes it. When the checkpoint there is the
    /// one this handle's last step from `expected` wrote (that step taken
    /// again, or retried after a write that failed but happened), nothing
    /// is written and `again` returns what the step returned.
    fn step<R>(
        &mut self,
        expected: Phase,
        change: impl FnOnce(&mut RoundCheckpoint, Timestamp) -> Result<R>,
        again: impl FnOnce(&RoundCheckpoint) -> R,
    ) -> Result<R> {
        self.may_step(expected)?;
        let mut locked = self.rounds.lock(&self.checkpoint.task)?;
        if let Some(written) = self.mine(expected).filter(|c| locked.current() == Some(*c)) {
            self.checkpoint = written.clone();
            return Ok(again(&self.checkpoint));
        }
        if self.checkpoint.phase != expected || locked.current() != Some(&self.checkpoint) {
            return Err(Error::Conflict {
                task: self.checkpoint.task.clone(),
            });
        }
        let now = self.rounds.files.now()?;
        let mut next = self.checkpoint.clone();
        let out = change(&mut next, now)?;
        next.updated_at = now;
        self.last = Some((expected, next.clone()));
        locked.write(next.clone())?;
        self.checkpoint = next;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::format::CriticFinding;

    fn arb_gate() -> impl Strategy<Value = Gate> {
        prop_oneof![
            Just(Gate::Clear),
            (1usize..4).prop_map(|n| Gate::Pending {
                replies: (0..n)
                    .map(|i| PendingReply {
                        id: format!("1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-01234567890{i}")
                            .parse()
                            .unwrap(),
                        subject: "dead-code".to_owned(),
                    })
                    .collect()
            }),
            Just(Gate::Unreadable {
                error: "corrupt".to_owned()
            }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// The routing rule against its plain statement.
        #[test]
        fn routing_matches_the_rule(
            code in prop_oneof![Just(0), Just(1), Just(2)],
            findings in 0usize..3,
            gates in proptest::collection::vec(arb_gate(), 1..6),
            max_rounds in 1u32..6,
        ) {
            let report = CriticReport { verify_exit_code: code, findings: (0..findings).map(|i| CriticFinding { category: "style".to_owned(), detail: format!("f{i}") }).collect() };
            let mut history = Vec::new();
            for (i, gate) in gates.iter().enumerate() {
                let round = u32::try_from(i).unwrap() + 1;
                let routing = route(&report, gate, &history, round, max_rounds);
                let clean = code == 0 && findings == 0 && *gate == Gate::Clear;
                let previous = history.last().and_then(|h: &RoundRecord| h.gate.pending());
                let stalemate = matches!((gate.pending(), previous), (Some(n), Some(p)) if n > 0 && p > 0 && n >= p);
                match &routing {
                    Routing::Commit => prop_assert!(clean),
                    Routing::Escalate { reason: EscalationReason::Stalemate { .. }, .. } => prop_assert!(!clean && stalemate),
                    Routing::Escalate { reason: EscalationReason::TooManyRounds { .. }, .. } => prop_assert!(!clean && !stalemate && round >= max_rounds),
                    Routing::AnotherRound { blockers } => prop_assert!(!clean && !stalemate && round < max_rounds && !blockers.is_empty()),
                }
                // An unreadable gate never commits.
                if matches!(gate, Gate::Unreadable { .. }) {
                    prop_assert!(routing != Routing::Commit);
                }
                if !matches!(routing, Routing::AnotherRound { .. }) {
                    break;
                }
                history.push(RoundRecord {
                    round,
                    report: report.clone(),
                    gate: gate.clone(),
                    routing,
                    routed_at: Timestamp::EPOCH,
                });
            }
        }
    }
}
