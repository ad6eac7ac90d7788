//! The witness: heartbeat and escalation (seeds 000 and 001).
//!
//! - `judge.rs`: the pure core. [`judge`] takes an incident record, the
//!   hook, the answers seen and the time, and returns the [`Next`] step with
//!   every effect it has (the nudge to send, the record to write, the
//!   escalation to send, the action to report); [`close`] does the same for
//!   a hook that moved on.
//! - `shell.rs`: [`Witness`], which reads the inputs, takes the incident
//!   file's lock, judges again under it, and carries the `Next` out in order.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use chipset_mail::MessageId;
use chipset_store::{AgentId, Timestamp};
use serde::{Deserialize, Serialize};

use crate::format::{Evidence, IncidentKey};

mod judge;
mod shell;
#[cfg(test)]
mod tests;

#[cfg(test)]
use judge::answers_since;
pub(crate) use judge::same_assignment;
#[cfg(test)]
use judge::{Finish, Judging, Next, WitnessNudge, close, judge};
pub use shell::Witness;

impl WitnessConfig {
    /// Returns the nudge interval for `agent`.
    fn interval_for(&self, agent: &AgentId) -> Duration {
        self.nudge_intervals
            .get(agent)
            .copied()
            .unwrap_or(self.nudge_interval)
    }
}

/// The default stall threshold: a pending or active hook untouched for 5 minutes is quiet.
pub(crate) const DEFAULT_STALL_THRESHOLD: Duration = Duration::from_secs(300);
/// The seed's default nudge interval: 60 seconds.
pub(crate) const DEFAULT_NUDGE_INTERVAL: Duration = Duration::from_secs(60);
/// The default grace period after an assignment or a witness restart: 60 seconds.
pub(crate) const DEFAULT_GRACE: Duration = Duration::from_secs(60);

/// How the witness judges agents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WitnessConfig {
    /// How long a pending or active hook may go untouched before the witness
    /// checks on its agent. Default 5 minutes.
    pub stall_threshold: Duration,
    /// The nudge interval: how long the witness waits for a sign of life
    /// after each nudge (default 60 s, seed 000), unless `nudge_intervals`
    /// names the agent.
    pub nudge_interval: Duration,
    /// Per-agent nudge intervals.
    pub nudge_intervals: BTreeMap<AgentId, Duration>,
    /// No incident opens within this time after the work was assigned, and
    /// a restarted witness takes no step within this time of its start.
    /// Default 60 s.
    pub grace: Duration,
}

impl Default for WitnessConfig {
    fn default() -> Self {
        WitnessConfig {
            stall_threshold: DEFAULT_STALL_THRESHOLD,
            nudge_interval: DEFAULT_NUDGE_INTERVAL,
            nudge_intervals: BTreeMap::new(),
            grace: DEFAULT_GRACE,
        }
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
