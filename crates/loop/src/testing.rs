//! The loops' pure rules, for tests outside the crate (the `testing`
//! feature): they are private to the crate otherwise, since users drive
//! the loops through their handles.

use crate::format::{CriticReport, Gate, RoundRecord, Routing};

/// Decides where a round goes, as [`Round::route`](crate::Round::route)
/// does from its checkpoint: commit, another round, or escalation.
pub fn route(
    report: &CriticReport,
    gate: &Gate,
    history: &[RoundRecord],
    round: u32,
    max_rounds: u32,
) -> Routing {
    crate::rounds::route(report, gate, history, round, max_rounds)
}
