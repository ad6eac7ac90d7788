//! The dispatcher's pure core: `(ledger entry, event, now)` → the entry to
//! write, the effects around the write, the action to report, and what the
//! shell must do (and feed back as the next event). Nothing here reads a
//! file, a hook or a clock.

use chipset_hook::{Assignment, Hook, HookStatus};
use chipset_mail::MessageId;
use chipset_store::{ReadOutcome, Timestamp};

use super::events::{LedgerCommand, LedgerEffect, LedgerEvent, LedgerTransition};
use super::{DispatchAction, IgnoreReason};
use crate::format::{
    Attempt, AttemptOutcome, BeadState, COMPLETION_REPORT, HEALTH_ESCALATION, LedgerEntry,
};
use crate::witness::same_assignment;

/// The dispatcher ledger's state machine: what `event` does to `entry` at
/// `now`. Total: an event that does not apply to the entry's state changes
/// nothing (a report or escalation about another assignment is reported
/// [`DispatchAction::Ignored`] unless it repeats one already handled).
///
/// ```text
/// state        event                          entry written                     next
/// queued       Choose{agent, mail}            assigning{agent, mail}            Assign(agent)
/// assigning    Hooked(a)                      assigned{a, mail} (+attempt)      - (mail sent, agent woken, before)
/// assigning    Refused                        queued                            -
/// assigning    Sweep                          -                                 Adopt(agent)
/// assigning    Adopt(hook holds the bead)     assigned{a, mail} (+attempt)      Check(agent) (mail, wake-up before)
/// assigning    Adopt(hook unreadable)         -                                 - (unreadable)
/// assigning    Adopt(anything else)           queued                            -
/// assigned     Sweep                          -                                 Check(agent)
/// assigned     Check(completed, matching)     -                                 Verify(agent)
/// assigned     Check(matching, no mail yet)   -                                 Mail(a)
/// assigned     Check(not holding it)          queued, attempt lost              - (Requeued)
/// assigned     Mailed(id)                     assigned{a, id}                   -
/// assigned     Escalation(a)                  reassigning{a}                    TakeAway(a)
/// assigned,    Report(a)                      -                                 Verify(agent)
///  reassigning
/// assigned,    Verify(completed, matching)    done{cleared: false}, attempt     Clear(a) (Completed)
///  reassigning                                completed
/// assigned,    Verify(anything else)          -                                 - (Ignored not_completed)
///  reassigning
/// reassigning  Sweep                          -                                 TakeAway(a)
/// reassigning  TookAway                       queued, attempt reassigned        - (agent suspended and aborted before)
/// reassigning  FoundCompleted                 -                                 Verify(agent)
/// done         Sweep (not cleared)            -                                 Clear(a)
/// done         Cleared                        done{cleared: true}               - (finished after)
/// done         Sweep (cleared)                -                                 - (finished)
/// ```
pub(crate) fn ledger_transition(
    entry: &LedgerEntry,
    event: &LedgerEvent,
    now: Timestamp,
) -> LedgerTransition {
    let changed = |state: BeadState| LedgerEntry {
        state,
        updated_at: now,
        ..entry.clone()
    };
    match (&entry.state, event) {
        // Messages.
        (
            BeadState::Assigned { assignment, .. } | BeadState::Reassigning { taken: assignment },
            LedgerEvent::Report {
                assignment: a,
                completed_at,
            },
        ) if same_assignment(assignment, a) => LedgerTransition::then(LedgerCommand::Verify {
            agent: a.agent.clone(),
            completed_at: *completed_at,
        }),
        (_, LedgerEvent::Report { assignment: a, .. }) => {
            late(entry, a, AttemptOutcome::Completed, COMPLETION_REPORT)
        }
        (BeadState::Assigned { assignment, .. }, LedgerEvent::Escalation { assignment: a })
            if same_assignment(assignment, a) =>
        {
            // The intent is durable before the hook changes.
            LedgerTransition {
                entry: Some(changed(BeadState::Reassigning {
                    taken: assignment.clone(),
                })),
                next: LedgerCommand::TakeAway(assignment.clone()),
                ..LedgerTransition::stay()
            }
        }
        (_, LedgerEvent::Escalation { assignment: a }) => {
            late(entry, a, AttemptOutcome::Reassigned, HEALTH_ESCALATION)
        }

        // The sweep.
        (BeadState::Queued, LedgerEvent::Sweep) => LedgerTransition::stay(),
        (BeadState::Assigning { agent, .. }, LedgerEvent::Sweep) => {
            LedgerTransition::then(LedgerCommand::Adopt(agent.clone()))
        }
        (BeadState::Assigned { assignment, .. }, LedgerEvent::Sweep) => {
            LedgerTransition::then(LedgerCommand::Check(assignment.agent.clone()))
        }
        (BeadState::Reassigning { taken }, LedgerEvent::Sweep) => {
            LedgerTransition::then(LedgerCommand::TakeAway(taken.clone()))
        }
        (
            BeadState::Done {
                assignment,
                cleared: false,
                ..
            },
            LedgerEvent::Sweep,
        ) => LedgerTransition::then(LedgerCommand::Clear(assignment.clone())),
        (BeadState::Done { cleared: true, .. }, LedgerEvent::Sweep) => LedgerTransition {
            after: vec![LedgerEffect::Finished(entry.bead_id.clone())],
            ..LedgerTransition::stay()
        },

        // Assigning queued work.
        (BeadState::Queued, LedgerEvent::Choose { agent, mail }) => LedgerTransition {
            // The intent is durable before the hook: a restart adopts or undoes it.
            entry: Some(changed(BeadState::Assigning {
                agent: agent.clone(),
                mail: mail.clone(),
            })),
            next: LedgerCommand::Assign(agent.clone()),
            ..LedgerTransition::stay()
        },
        (BeadState::Assigning { mail, .. }, LedgerEvent::Hooked(a)) => LedgerTransition {
            // Both under the intent's id, before the write: a retry (the
            // adoption below) sends each once.
            before: tell(a, mail),
            entry: Some(assigned(entry, a, mail, now)),
            action: Some(DispatchAction::Assigned {
                bead_id: entry.bead_id.clone(),
                agent: a.agent.clone(),
                generation: a.generation,
                mail: mail.clone(),
                at: now,
            }),
            ..LedgerTransition::stay()
        },
        (BeadState::Assigning { .. }, LedgerEvent::Refused) => {
            LedgerTransition::write(changed(BeadState::Queued))
        }

        // Resolving an assignment cut short by a crash.
        (BeadState::Assigning { agent, mail }, LedgerEvent::Adopt(hook)) => {
            // An unreadable hook may hold the bead: reported, and adopted
            // again at the next sweep, never requeued (which could hand
            // the bead to a second agent).
            let held = match hook {
                ReadOutcome::Value(h) => h.assignment().filter(|a| a.work.bead_id == entry.bead_id),
                ReadOutcome::Missing => None,
                ReadOutcome::Corrupt(c) => return LedgerTransition::report(unreadable(c)),
                ReadOutcome::Unsupported(u) => return LedgerTransition::report(unsupported(u)),
            };
            match held {
                // Sent under the intent's id: once, even if it went out before the crash.
                Some(a) => LedgerTransition {
                    before: tell(&a, mail),
                    entry: Some(assigned(entry, &a, mail, now)),
                    next: LedgerCommand::Check(agent.clone()),
                    ..LedgerTransition::stay()
                },
                None => LedgerTransition::write(changed(BeadState::Queued)),
            }
        }

        // Checking an assignment against its hook.
        (
            BeadState::Assigned {
                assignment: a,
                mail,
            },
            LedgerEvent::Check(hook),
        ) => match hook {
            ReadOutcome::Corrupt(c) => LedgerTransition::report(unreadable(c)),
            ReadOutcome::Unsupported(u) => LedgerTransition::report(unsupported(u)),
            ReadOutcome::Value(h) if holds(h, a) => {
                if h.state.status() == HookStatus::Completed {
                    LedgerTransition::then(LedgerCommand::Verify {
                        agent: a.agent.clone(),
                        completed_at: None,
                    })
                } else if mail.is_none() {
                    LedgerTransition::then(LedgerCommand::Mail(a.clone()))
                } else {
                    LedgerTransition::stay()
                }
            }
            _ => {
                let mut lost = changed(BeadState::Queued);
                lost.end_attempt(a, AttemptOutcome::Lost, now);
                LedgerTransition {
                    entry: Some(lost),
                    action: Some(DispatchAction::Requeued {
                        bead_id: a.work.bead_id.clone(),
                        agent: a.agent.clone(),
                        generation: a.generation,
                        at: now,
                    }),
                    ..LedgerTransition::stay()
                }
            }
        },
        (
            BeadState::Assigned {
                assignment,
                mail: None,
            },
            LedgerEvent::Mailed(id),
        ) => LedgerTransition::write(changed(BeadState::Assigned {
            assignment: assignment.clone(),
            mail: Some(id.clone()),
        })),

        // Verifying a completion on the hook.
        (
            BeadState::Assigned { assignment: a, .. } | BeadState::Reassigning { taken: a },
            LedgerEvent::Verify { hook, completed_at },
        ) => match hook {
            ReadOutcome::Value(h) if h.state.status() == HookStatus::Completed && holds(h, a) => {
                let mut done = changed(BeadState::Done {
                    assignment: a.clone(),
                    completed_at: completed_at.unwrap_or(h.last_activity),
                    cleared: false,
                });
                done.end_attempt(a, AttemptOutcome::Completed, now);
                // Done is durable before the hook is cleared: a restart clears it.
                LedgerTransition {
                    entry: Some(done),
                    action: Some(DispatchAction::Completed {
                        bead_id: a.work.bead_id.clone(),
                        agent: a.agent.clone(),
                        generation: a.generation,
                        at: now,
                    }),
                    next: LedgerCommand::Clear(a.clone()),
                    ..LedgerTransition::stay()
                }
            }
            ReadOutcome::Corrupt(c) => LedgerTransition::report(unreadable(c)),
            ReadOutcome::Unsupported(u) => LedgerTransition::report(unsupported(u)),
            _ => {
                LedgerTransition::report(ignored(COMPLETION_REPORT, a, IgnoreReason::NotCompleted))
            }
        },

        // Taking work away from a silent agent.
        (BeadState::Reassigning { taken }, LedgerEvent::TookAway) => {
            let mut queued = changed(BeadState::Queued);
            queued.end_attempt(taken, AttemptOutcome::Reassigned, now);
            LedgerTransition {
                before: vec![
                    LedgerEffect::Suspend {
                        agent: taken.agent.clone(),
                        bead_id: taken.work.bead_id.clone(),
                    },
                    LedgerEffect::Abort(taken.clone()),
                ],
                entry: Some(queued),
                action: Some(DispatchAction::Reassigned {
                    bead_id: taken.work.bead_id.clone(),
                    from: taken.agent.clone(),
                    generation: taken.generation,
                    at: now,
                }),
                ..LedgerTransition::stay()
            }
        }
        (BeadState::Reassigning { taken }, LedgerEvent::FoundCompleted) => {
            LedgerTransition::then(LedgerCommand::Verify {
                agent: taken.agent.clone(),
                completed_at: None,
            })
        }

        // Clearing a done bead's hook.
        (
            BeadState::Done {
                assignment,
                completed_at,
                cleared: false,
            },
            LedgerEvent::Cleared,
        ) => LedgerTransition {
            entry: Some(changed(BeadState::Done {
                assignment: assignment.clone(),
                completed_at: *completed_at,
                cleared: true,
            })),
            after: vec![LedgerEffect::Finished(entry.bead_id.clone())],
            ..LedgerTransition::stay()
        },

        // Anything else does not apply to this state: nothing changes.
        (
            BeadState::Queued
            | BeadState::Assigning { .. }
            | BeadState::Assigned { .. }
            | BeadState::Reassigning { .. }
            | BeadState::Done { .. },
            LedgerEvent::Choose { .. }
            | LedgerEvent::Adopt(_)
            | LedgerEvent::Check(_)
            | LedgerEvent::Verify { .. }
            | LedgerEvent::Hooked(_)
            | LedgerEvent::Refused
            | LedgerEvent::Mailed(_)
            | LedgerEvent::TookAway
            | LedgerEvent::FoundCompleted
            | LedgerEvent::Cleared,
        ) => LedgerTransition::stay(),
    }
}

/// The effects that tell the agent of `a`: its `work-assignment` mail
/// under `mail`, and its `work-assigned` wake-up under the same id.
fn tell(a: &Assignment, mail: &MessageId) -> Vec<LedgerEffect> {
    vec![
        LedgerEffect::SendAssignment {
            assignment: a.clone(),
            mail: mail.clone(),
        },
        LedgerEffect::Wake {
            assignment: a.clone(),
            mail: mail.clone(),
        },
    ]
}

/// The entry assigned to `a`, with its `work-assignment` mail `mail` and a new open attempt.
fn assigned(entry: &LedgerEntry, a: &Assignment, mail: &MessageId, now: Timestamp) -> LedgerEntry {
    let mut out = LedgerEntry {
        state: BeadState::Assigned {
            assignment: a.clone(),
            mail: Some(mail.clone()),
        },
        updated_at: now,
        ..entry.clone()
    };
    out.attempts.push(Attempt {
        agent: a.agent.clone(),
        generation: a.generation,
        assigned_at: a.work.assigned_at,
        outcome: AttemptOutcome::Open,
        ended_at: None,
    });
    out
}

/// A report or escalation about `a` that is not current: ignored, or
/// nothing at all when it merely repeats one already handled (the same
/// completion or escalation seen again by mail, bus or poll).
fn late(
    entry: &LedgerEntry,
    a: &Assignment,
    repeat: AttemptOutcome,
    kind: &str,
) -> LedgerTransition {
    let handled = entry
        .attempts
        .iter()
        .any(|t| t.agent == a.agent && t.generation == a.generation && t.outcome == repeat);
    if handled {
        return LedgerTransition::stay();
    }
    let reason = if entry.is_done() {
        IgnoreReason::AlreadyDone
    } else {
        IgnoreReason::NotCurrent
    };
    LedgerTransition::report(ignored(kind, a, reason))
}

pub(crate) fn unreadable(c: &chipset_store::Corruption) -> DispatchAction {
    DispatchAction::Unreadable {
        path: c.path.clone(),
        reason: c.reason.to_string(),
    }
}

/// A file holding a value this version does not know (a hook's state, a
/// message's priority): reported like an unreadable one, never acted on.
pub(crate) fn unsupported(u: &chipset_store::Unsupported) -> DispatchAction {
    DispatchAction::Unreadable {
        path: u.path.clone(),
        reason: format!("holds {}, unsupported by this version", u.what),
    }
}

pub(crate) fn ignored(kind: &str, a: &Assignment, reason: IgnoreReason) -> DispatchAction {
    DispatchAction::Ignored {
        kind: kind.to_owned(),
        bead_id: a.work.bead_id.clone(),
        agent: a.agent.clone(),
        generation: a.generation,
        reason,
    }
}

/// Returns true when `hook` still holds `held`: its assignment has the same fence.
fn holds(hook: &Hook, held: &Assignment) -> bool {
    hook.assignment().is_some_and(|now| now.same_fence(held))
}
