//! The critic/executor rounds' records: a task's checkpoint under
//! `loop/rounds/`, and what a round is routed by.

use std::fmt;

use chipset_mail::MessageId;
use chipset_store::{TaskId, Timestamp};
use serde::{Deserialize, Serialize};

/// The phase a critic/executor round is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Phase {
    /// The executor is working.
    Executor,
    /// The critic is reviewing.
    Critic,
    /// The critic reported; routing decides.
    Routing,
    /// Routing allowed the commit; the caller commits, then calls `committed`.
    Committing,
    /// Committed and swept: final.
    Committed,
    /// Escalated (stalemate or too many rounds): final.
    Escalated,
}

impl Phase {
    /// Returns the name as written on disk.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Phase::Executor => "executor",
            Phase::Critic => "critic",
            Phase::Routing => "routing",
            Phase::Committing => "committing",
            Phase::Committed => "committed",
            Phase::Escalated => "escalated",
        }
    }

    /// Returns true for the final phases.
    #[cfg(test)]
    pub(crate) fn is_final(self) -> bool {
        matches!(self, Phase::Committed | Phase::Escalated)
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One critic finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CriticFinding {
    /// The finding category (`style`, `dead-code`, `missing-test`, …).
    pub category: String,
    /// What is wrong.
    pub detail: String,
}

/// What the critic reported for one round; the default is a clean report
/// (a passing verification and no findings).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CriticReport {
    /// The verification's exit code (0: passed).
    pub verify_exit_code: i32,
    /// The findings (empty: none).
    pub findings: Vec<CriticFinding>,
}

impl CriticReport {
    /// Returns true when the verification passed.
    pub(crate) fn verified(&self) -> bool {
        self.verify_exit_code == 0
    }
}

/// One request still waiting for a reply, as the gate saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PendingReply {
    /// The request.
    pub id: MessageId,
    /// Its subject.
    pub subject: String,
}

/// What the pending-replies gate answered at routing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "gate", rename_all = "snake_case")]
#[non_exhaustive]
pub(crate) enum Gate {
    /// No request of the task is waiting for a reply.
    Clear,
    /// These requests are waiting.
    Pending {
        /// The requests, in id order.
        replies: Vec<PendingReply>,
    },
    /// The gate could not be read (a corrupt inbox file, an I/O error): the
    /// commit is blocked (fail closed).
    Unreadable {
        /// The error, as text.
        error: String,
    },
}

impl Gate {
    /// Returns the number of pending replies, when known.
    pub(crate) fn pending(&self) -> Option<usize> {
        match self {
            Gate::Clear => Some(0),
            Gate::Pending { replies } => Some(replies.len()),
            Gate::Unreadable { .. } => None,
        }
    }
}

/// Why a round cannot commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "blocker", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Blocker {
    /// The verification failed.
    VerificationFailed {
        /// Its exit code.
        exit_code: i32,
    },
    /// The critic has findings.
    Findings {
        /// Their categories, in report order.
        categories: Vec<String>,
    },
    /// Requests of the task wait for replies (the seed's `details.pending_subjects`).
    PendingReplies {
        /// Their subjects, in id order.
        pending_subjects: Vec<String>,
    },
    /// The pending-replies gate could not be read.
    GateUnreadable {
        /// The error, as text.
        error: String,
    },
}

/// Why a round escalated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EscalationReason {
    /// Pending replies did not shrink across two consecutive rounds.
    Stalemate {
        /// Pending replies in the previous round.
        previous: usize,
        /// Pending replies now.
        pending: usize,
        /// Their subjects.
        pending_subjects: Vec<String>,
    },
    /// The round limit was reached without a commit.
    TooManyRounds {
        /// The limit.
        max_rounds: u32,
    },
}

/// Where routing sends a round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "routing", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Routing {
    /// Verified, no findings, no pending replies: commit.
    Commit,
    /// Back to the executor.
    AnotherRound {
        /// Everything that blocked the commit.
        blockers: Vec<Blocker>,
    },
    /// Stop and ask a human (the seed's askuser dialog).
    Escalate {
        /// Why.
        #[serde(flatten)]
        reason: EscalationReason,
        /// Everything that blocked the commit.
        blockers: Vec<Blocker>,
    },
}

/// The record of one routed round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub(crate) struct RoundRecord {
    /// The round number (from 1).
    pub round: u32,
    /// What the critic reported.
    pub report: CriticReport,
    /// What the gate answered.
    #[serde(flatten)]
    pub gate: Gate,
    /// Where routing sent the round.
    pub routing: Routing,
    /// When it was routed.
    pub routed_at: Timestamp,
}

/// A round's checkpoint: `loop/rounds/{task}.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub(crate) struct RoundCheckpoint {
    /// The task.
    pub task: TaskId,
    /// The current round (from 1).
    pub round: u32,
    /// The current phase.
    pub phase: Phase,
    /// The critic's report of the current round, once in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<CriticReport>,
    /// Every routed round, oldest first.
    pub history: Vec<RoundRecord>,
    /// When the task's first round started.
    pub started_at: Timestamp,
    /// When the checkpoint was last written.
    pub updated_at: Timestamp,
    /// How many messages the commit's sweep left in the task's
    /// `archive/by-task/` folder, once committed (the folder's count, so a
    /// commit retried after a failure counts what an earlier attempt moved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swept: Option<usize>,
}
