//! The on-disk contract: the bodies of the loop's mail and bus events, and
//! the persisted loop state under `loop/`. Snapshots in `tests/it/snapshots/`
//! pin these bytes.

use std::fmt;

use chipset_hook::Assignment;
use chipset_hook::BeadId;
use chipset_mail::MessageId;
use chipset_store::{AgentId, Timestamp};
use serde::{Deserialize, Serialize};

/// A mail subject or bus event kind the loops send, each on the bead's
/// task (`phase` = bead id) for mail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Topic {
    /// Mail subject of a dispatcher's work assignment, `work-assignment`.
    WorkAssignment,
    /// Mail subject of an agent's completion report, `completion-report`.
    CompletionReport,
    /// Mail subject (and bus event kind) of a witness's health escalation,
    /// `health-escalation`.
    HealthEscalation,
    /// Bus event kind that wakes an agent when work is assigned to it,
    /// `work-assigned`.
    WorkAssigned,
    /// Bus event kind that wakes the dispatcher when work is completed,
    /// `work-completed`.
    WorkCompleted,
    /// Bus event kind published when a round escalates, `round-escalation`.
    RoundEscalation,
}

impl Topic {
    /// Returns the subject or kind as written.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Topic::WorkAssignment => WORK_ASSIGNMENT,
            Topic::CompletionReport => COMPLETION_REPORT,
            Topic::HealthEscalation => HEALTH_ESCALATION,
            Topic::WorkAssigned => WORK_ASSIGNED_EVENT,
            Topic::WorkCompleted => WORK_COMPLETED_EVENT,
            Topic::RoundEscalation => ROUND_ESCALATION_EVENT,
        }
    }
}

impl fmt::Display for Topic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

pub(crate) const WORK_ASSIGNMENT: &str = "work-assignment";
pub(crate) const COMPLETION_REPORT: &str = "completion-report";
pub(crate) const HEALTH_ESCALATION: &str = "health-escalation";
pub(crate) const WORK_ASSIGNED_EVENT: &str = "work-assigned";
pub(crate) const WORK_COMPLETED_EVENT: &str = "work-completed";
pub(crate) const ROUND_ESCALATION_EVENT: &str = "round-escalation";

/// What the loops say to each other: the JSON body of their mail and the
/// payload of their bus events, tagged by `type` (the seeds' snake-case names).
///
/// Every variant carries the [`Assignment`] it is about, so the receiver can
/// act on exactly that assignment (fenced by agent, generation, bead and
/// assignment time) and ignore reports about an older one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub(crate) enum LoopMessage {
    /// Dispatcher to agent: this work is on your hook.
    WorkAssignment {
        /// The assignment.
        assignment: Assignment,
    },
    /// Agent to dispatcher: the work is done and the hook is completed.
    CompletionReport {
        /// The assignment completed.
        assignment: Assignment,
        /// When the hook was completed.
        completed_at: Timestamp,
        /// What the agent says about the result.
        summary: String,
    },
    /// Witness to dispatcher: the agent showed no sign of life.
    HealthEscalation {
        /// The assignment the silent agent holds.
        assignment: Assignment,
        /// The hook's `last_activity` when the incident opened.
        last_activity: Timestamp,
        /// When the `health_check` nudge was sent.
        health_check_at: Timestamp,
        /// When the `stall_warning` nudge was sent.
        stall_warning_at: Timestamp,
        /// When the witness escalated.
        escalated_at: Timestamp,
    },
}

impl LoopMessage {
    /// Returns the assignment the message is about.
    pub(crate) fn assignment(&self) -> &Assignment {
        match self {
            LoopMessage::WorkAssignment { assignment }
            | LoopMessage::CompletionReport { assignment, .. }
            | LoopMessage::HealthEscalation { assignment, .. } => assignment,
        }
    }

    /// Returns the body as canonical JSON text.
    pub(crate) fn to_body(&self) -> String {
        let bytes =
            chipset_store::StateDir::to_canonical_json(self).expect("loop messages serialize");
        String::from_utf8(bytes).expect("canonical JSON is UTF-8")
    }

    /// Parses a mail body or bus payload; `None` when it is not a loop message.
    pub(crate) fn from_body(body: &str) -> Option<Self> {
        serde_json::from_str(body).ok()
    }

    /// Parses a bus payload; `None` when it is not a loop message.
    pub(crate) fn from_payload(payload: &serde_json::Value) -> Option<Self> {
        serde_json::from_value(payload.clone()).ok()
    }

    /// Returns the message as a bus payload.
    pub(crate) fn to_payload(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("loop messages serialize")
    }
}

/// The identity of a witness incident: one agent, one bead, one hook
/// generation. At most one escalation is ever sent per key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct IncidentKey {
    /// The silent agent.
    pub agent: AgentId,
    /// The bead on its hook.
    pub bead_id: BeadId,
    /// The hook's generation.
    pub generation: u64,
}

impl IncidentKey {
    /// Returns the key of `assignment`.
    pub(crate) fn of(assignment: &Assignment) -> Self {
        IncidentKey {
            agent: assignment.agent.clone(),
            bead_id: assignment.work.bead_id.clone(),
            generation: assignment.generation,
        }
    }
}

impl fmt::Display for IncidentKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.agent, self.bead_id, self.generation)
    }
}

/// What showed that an agent is alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Evidence {
    /// It answered the witness's nudge (a `nudge_response`).
    Answered,
    /// It touched (or activated) its hook after the nudge.
    Touched,
    /// Its hook moved on (completed, cleared or reassigned) while the incident was open.
    MovedOn,
}

impl fmt::Display for Evidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Evidence::Answered => "answered",
            Evidence::Touched => "touched its hook",
            Evidence::MovedOn => "hook moved on",
        })
    }
}

/// Where an incident is, with the times of the steps taken.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
#[non_exhaustive]
pub(crate) enum Step {
    /// A `health_check` was sent; waiting for a sign of life.
    Checking {
        /// When it was sent.
        health_check_at: Timestamp,
    },
    /// No sign of life within the interval; a `stall_warning` was sent.
    Warned {
        /// When the health check was sent.
        health_check_at: Timestamp,
        /// When the stall warning was sent.
        stall_warning_at: Timestamp,
    },
    /// The escalation is being sent: written with the mail's id before the
    /// mail, so a witness that dies in between sends it on restart under the
    /// same id (which the mail channel accepts once).
    Escalating {
        /// When the health check was sent.
        health_check_at: Timestamp,
        /// When the stall warning was sent.
        stall_warning_at: Timestamp,
        /// When the escalation started.
        escalated_at: Timestamp,
        /// The id the escalation mail is sent under.
        mail: MessageId,
    },
    /// The `health_escalation` mail was sent: final for this key.
    Escalated {
        /// When the health check was sent.
        health_check_at: Timestamp,
        /// When the stall warning was sent.
        stall_warning_at: Timestamp,
        /// When the escalation was sent.
        escalated_at: Timestamp,
        /// The escalation mail.
        mail: MessageId,
    },
    /// The agent showed a sign of life; a later quiet spell opens a new check.
    Resolved {
        /// When the sign of life was seen (the answer's or the touch's time).
        alive_at: Timestamp,
        /// What it was.
        evidence: Evidence,
    },
}

impl Step {
    /// Returns the step's name as written in `step`.
    #[cfg(test)]
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Step::Checking { .. } => "checking",
            Step::Warned { .. } => "warned",
            Step::Escalating { .. } => "escalating",
            Step::Escalated { .. } => "escalated",
            Step::Resolved { .. } => "resolved",
        }
    }

    /// Returns when the first nudge of the incident was sent, if one was.
    pub(crate) fn health_check_at(&self) -> Option<Timestamp> {
        match self {
            Step::Checking { health_check_at }
            | Step::Warned {
                health_check_at, ..
            }
            | Step::Escalating {
                health_check_at, ..
            }
            | Step::Escalated {
                health_check_at, ..
            } => Some(*health_check_at),
            Step::Resolved { .. } => None,
        }
    }

    /// Returns true while the incident is open (checking, warned, escalating).
    pub(crate) fn is_open(&self) -> bool {
        matches!(
            self,
            Step::Checking { .. } | Step::Warned { .. } | Step::Escalating { .. }
        )
    }
}

/// Returns an id fixed by what it names, for a message, event or nudge a
/// loop may send again after a failure (a retry then names the same one,
/// which its channel delivers once): `{unix-ms}-{uuid}` in the seed's form,
/// with `at`'s milliseconds, `prefix` (the first two groups of the UUID,
/// fixed per kind of send), the version and variant digits of a UUID v4,
/// and 60 bits of the FNV-1a hash of `key`.
pub(crate) fn fixed_id(at: Timestamp, prefix: &str, key: &str) -> String {
    let h = chipset_store::EscapeAlphabet::fnv1a_64(key.bytes());
    format!(
        "{:013}-{prefix}-4000-8{:03x}-{:012x}",
        at.unix_ms().max(0),
        (h >> 48) & 0xfff,
        h & 0xffff_ffff_ffff
    )
}

/// A witness's record of one agent: `loop/witness/incidents/{agent}.json`.
///
/// It holds the latest incident of the assignment on the agent's hook; a
/// record of an older assignment is replaced when a new incident opens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub(crate) struct Incident {
    /// The assignment the incident is about (its key: agent, bead, generation).
    pub assignment: Assignment,
    /// The hook's `last_activity` when the incident opened.
    pub last_activity: Timestamp,
    /// When the incident opened.
    pub opened_at: Timestamp,
    /// Where it is.
    #[serde(flatten)]
    pub step: Step,
    /// The witness that wrote it last.
    pub witness: AgentId,
    /// When it was written last.
    pub updated_at: Timestamp,
}

impl Incident {
    /// Returns the incident's key.
    pub(crate) fn key(&self) -> IncidentKey {
        IncidentKey::of(&self.assignment)
    }
}

/// How one assignment of a bead ended, in the dispatcher ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AttemptOutcome {
    /// Still on the agent's hook.
    Open,
    /// Completed, verified and cleared.
    Completed,
    /// Taken away after an escalation.
    Reassigned,
    /// The hook stopped holding it without a completion (cleared or
    /// reassigned by someone else); the bead was queued again.
    Lost,
}

impl fmt::Display for AttemptOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AttemptOutcome::Open => "open",
            AttemptOutcome::Completed => "completed",
            AttemptOutcome::Reassigned => "reassigned",
            AttemptOutcome::Lost => "lost",
        })
    }
}

/// One assignment of a bead to an agent, in the dispatcher ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Attempt {
    /// The agent.
    pub agent: AgentId,
    /// The hook generation of the assignment.
    pub generation: u64,
    /// When it was assigned.
    pub assigned_at: Timestamp,
    /// How it ended.
    pub outcome: AttemptOutcome,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Timestamp>,
}

/// Where a bead is in the dispatcher's hands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
#[non_exhaustive]
pub enum BeadState {
    /// Waiting for an idle agent.
    Queued,
    /// Being assigned to `agent` (written before the hook, so a restarted
    /// dispatcher adopts or undoes it).
    Assigning {
        /// The agent chosen.
        agent: AgentId,
        /// The id the `work-assignment` mail is sent under (so a restart
        /// sends it at most once).
        mail: MessageId,
    },
    /// On an agent's hook.
    Assigned {
        /// The assignment.
        assignment: Assignment,
        /// The `work-assignment` mail, once sent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mail: Option<MessageId>,
    },
    /// Being taken away from a silent agent (written before the hook
    /// changes, so a restarted dispatcher finishes it).
    Reassigning {
        /// The assignment being taken away.
        taken: Assignment,
    },
    /// Completed exactly once: final.
    Done {
        /// The assignment that completed it.
        assignment: Assignment,
        /// When the agent completed the hook (or when it was verified, if no report said).
        completed_at: Timestamp,
        /// Whether the hook was cleared (false only between two durable steps).
        cleared: bool,
    },
}

impl BeadState {
    /// Returns the state's name as written in `state`.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            BeadState::Queued => "queued",
            BeadState::Assigning { .. } => "assigning",
            BeadState::Assigned { .. } => "assigned",
            BeadState::Reassigning { .. } => "reassigning",
            BeadState::Done { .. } => "done",
        }
    }
}

impl fmt::Display for BeadState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// One work item in the dispatcher ledger: `loop/dispatcher/beads/{bead}.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LedgerEntry {
    /// The bead.
    pub bead_id: BeadId,
    /// Its title.
    pub title: String,
    /// When it was submitted.
    pub submitted_at: Timestamp,
    /// Where it is.
    #[serde(flatten)]
    pub state: BeadState,
    /// Every assignment so far, oldest first.
    pub attempts: Vec<Attempt>,
    /// When it last changed.
    pub updated_at: Timestamp,
}

impl LedgerEntry {
    /// Returns true once the bead is done.
    pub fn is_done(&self) -> bool {
        matches!(self.state, BeadState::Done { .. })
    }

    /// Returns the agent that completed the bead, once done.
    pub fn completed_by(&self) -> Option<&AgentId> {
        match &self.state {
            BeadState::Done { assignment, .. } => Some(&assignment.agent),
            _ => None,
        }
    }

    pub(crate) fn end_attempt(&mut self, a: &Assignment, outcome: AttemptOutcome, at: Timestamp) {
        if let Some(attempt) = self.attempts.iter_mut().rev().find(|t| {
            t.agent == a.agent && t.generation == a.generation && t.outcome == AttemptOutcome::Open
        }) {
            attempt.outcome = outcome;
            attempt.ended_at = Some(at);
        }
    }
}

/// Agents the dispatcher gives no new work: `loop/dispatcher/agents.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub(crate) struct AgentBook {
    /// Suspended agents: escalated as silent, until reinstated.
    pub suspended: std::collections::BTreeMap<AgentId, Suspension>,
}

/// Why and since when an agent is suspended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub(crate) struct Suspension {
    /// When.
    pub since: Timestamp,
    /// The bead it went silent on.
    pub bead_id: BeadId,
}

mod rounds;

pub use rounds::{Blocker, CriticFinding, CriticReport, EscalationReason, Phase, Routing};
pub(crate) use rounds::{Gate, PendingReply, RoundCheckpoint, RoundRecord};

#[cfg(test)]
mod tests {
    use super::*;

    /// An incident key reads `agent/bead/generation`; the evidence reads as
    /// words, as the witness's log lines print them.
    #[test]
    fn incident_keys_and_evidence_display_as_words() {
        let key = IncidentKey {
            agent: AgentId::new("polecat-alpha").unwrap(),
            bead_id: BeadId::new("gt-1").unwrap(),
            generation: 3,
        };
        assert_eq!(key.to_string(), "polecat-alpha/gt-1/3");
        assert_eq!(Evidence::Answered.to_string(), "answered");
        assert_eq!(Evidence::Touched.to_string(), "touched its hook");
        assert_eq!(Evidence::MovedOn.to_string(), "hook moved on");
    }

    /// An attempt's outcome displays as its JSON name.
    #[test]
    fn an_attempt_outcome_displays_as_its_json_name() {
        for o in [
            AttemptOutcome::Open,
            AttemptOutcome::Completed,
            AttemptOutcome::Reassigned,
            AttemptOutcome::Lost,
        ] {
            assert_eq!(serde_json::to_value(o).unwrap(), o.to_string());
        }
        assert_eq!(AttemptOutcome::Lost.to_string(), "lost");
    }

    /// Only committed and escalated rounds are final.
    #[test]
    fn only_committed_and_escalated_are_final() {
        for (phase, fin) in [
            (Phase::Executor, false),
            (Phase::Critic, false),
            (Phase::Routing, false),
            (Phase::Committing, false),
            (Phase::Committed, true),
            (Phase::Escalated, true),
        ] {
            assert_eq!(phase.is_final(), fin, "{phase}");
        }
    }

    /// A step's name is the `step` tag its JSON carries.
    #[test]
    fn a_step_is_named_as_its_json_tag() {
        let t = Timestamp::from_unix_ms(1_000);
        let mail = MessageId::new("1000-7a703292-f1d1-4900-b635-8fd9f1df7f88").unwrap();
        for step in [
            Step::Checking { health_check_at: t },
            Step::Warned {
                health_check_at: t,
                stall_warning_at: t,
            },
            Step::Escalating {
                health_check_at: t,
                stall_warning_at: t,
                escalated_at: t,
                mail: mail.clone(),
            },
            Step::Escalated {
                health_check_at: t,
                stall_warning_at: t,
                escalated_at: t,
                mail: mail.clone(),
            },
            Step::Resolved {
                alive_at: t,
                evidence: Evidence::Answered,
            },
        ] {
            let json = serde_json::to_value(&step).unwrap();
            assert_eq!(json["step"], step.name(), "{step:?}");
        }
    }
}
