//! The witness core's tables: every step, sign of life and deadline;
//! `close`; an earlier assignment's escalation.

use super::*;

/// A sign of life in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sign {
    None,
    /// An answer before the incident's first nudge (it does not count).
    AnsweredBefore,
    /// An answer after it.
    Answered,
    /// A touch of the hook after it.
    Touched,
}

/// The whole table: every record step of this assignment, every sign of
/// life, before and after the step's deadline.
#[test]
fn exhaustive_table_of_steps_signs_and_deadlines() {
    let sign_at = 6 * MIN + 30_000;
    let steps: Vec<(&str, Option<Step>, [u64; 2])> = vec![
        ("none", None, [4 * MIN, 10 * MIN]),
        (
            "resolved",
            Some(Step::Resolved {
                alive_at: t(2 * MIN),
                evidence: Evidence::Answered,
            }),
            [4 * MIN, 10 * MIN],
        ),
        (
            "checking",
            Some(Step::Checking {
                health_check_at: t(6 * MIN),
            }),
            [6 * MIN + 40_000, 10 * MIN],
        ),
        (
            "warned",
            Some(Step::Warned {
                health_check_at: t(6 * MIN),
                stall_warning_at: t(7 * MIN),
            }),
            [7 * MIN + 10_000, 10 * MIN],
        ),
        (
            "escalating",
            Some(Step::Escalating {
                health_check_at: t(6 * MIN),
                stall_warning_at: t(7 * MIN),
                escalated_at: t(8 * MIN),
                mail: mail_id(),
            }),
            [9 * MIN, 10 * MIN],
        ),
        (
            "escalated",
            Some(Step::Escalated {
                health_check_at: t(6 * MIN),
                stall_warning_at: t(7 * MIN),
                escalated_at: t(8 * MIN),
                mail: mail_id(),
            }),
            [9 * MIN, 10 * MIN],
        ),
    ];
    let expected = |step: &str, sign: Sign, due: bool| -> Verdict {
        let alive = match sign {
            Sign::Answered => Some(Evidence::Answered),
            Sign::Touched => Some(Evidence::Touched),
            Sign::None | Sign::AnsweredBefore => None,
        };
        match (step, alive) {
            ("escalated", _) => Verdict::Wait,
            ("escalating", _) => Verdict::FinishEscalation,
            ("checking" | "warned", Some(evidence)) => Verdict::Resolve {
                evidence,
                at: t(sign_at),
            },
            ("checking", None) if due => Verdict::Warn,
            ("warned", None) if due => Verdict::Escalate,
            // A touch resets the quiet spell; answers count only in an incident.
            ("none" | "resolved", _) if due && sign != Sign::Touched => Verdict::Check,
            _ => Verdict::Wait,
        }
    };
    let mut rows = 0;
    for (name, step, times) in &steps {
        for sign in [
            Sign::None,
            Sign::AnsweredBefore,
            Sign::Answered,
            Sign::Touched,
        ] {
            for (due, now) in [(false, times[0]), (true, times[1])] {
                let (h, a) = hook(if sign == Sign::Touched { sign_at } else { 0 });
                let record = step.clone().map(|s| incident(&a, s));
                let answered = match sign {
                    Sign::AnsweredBefore => Some(5 * MIN),
                    Sign::Answered => Some(sign_at),
                    Sign::None | Sign::Touched => None,
                };
                let jj = j(now, answered);
                let next = judge(record.as_ref(), &h, &a, &jj);
                let got = verdict(&next, &a, &jj);
                assert_eq!(got, expected(name, sign, due), "{name} {sign:?} due={due}");
                if let (Next::Finish(f), Some(r)) = (&next, &record) {
                    check_finish(f, r, &jj);
                }
                // A record written by the core keeps the incident's opening.
                if let (Next::Record { record: new, .. }, Some(old)) = (&next, &record) {
                    assert_eq!(
                        (new.opened_at, new.last_activity),
                        (old.opened_at, old.last_activity)
                    );
                }
                rows += 1;
            }
        }
    }
    assert_eq!(rows, 6 * 4 * 2);
}

#[test]
fn a_started_escalation_of_another_assignment_is_finished_first() {
    let (h, a) = hook(0);
    let work = WorkItem::new(BeadId::new("b0").unwrap(), "t", t(0), None);
    let older = Hook::new(a.agent.clone(), HookState::Active(work), t(0), 0)
        .assignment()
        .unwrap();
    let mut escalating = incident(
        &older,
        Step::Escalating {
            health_check_at: t(0),
            stall_warning_at: t(MIN),
            escalated_at: t(2 * MIN),
            mail: mail_id(),
        },
    );
    // Started by a witness that died: the one finishing it signs the record.
    escalating.witness = AgentId::new("witness-before").unwrap();
    let jj = j(3 * MIN, None);
    let next = judge(Some(&escalating), &h, &a, &jj);
    let Next::Finish(f) = &next else {
        panic!("expected a finish, got {next:?}");
    };
    check_finish(f, &escalating, &jj);
    // The escalation is about the older assignment, not the hook's.
    assert_eq!(f.message.assignment(), &older);
    assert_eq!(f.action.key(), Some(&IncidentKey::of(&older)));
}

#[test]
fn close_resolves_open_incidents_and_finishes_started_escalations() {
    let (h, a) = hook(3 * MIN);
    let jj = j(10 * MIN, None);
    let steps = [
        (
            Step::Checking {
                health_check_at: t(MIN),
            },
            Verdict::Close,
        ),
        (
            Step::Warned {
                health_check_at: t(MIN),
                stall_warning_at: t(2 * MIN),
            },
            Verdict::Close,
        ),
        (
            Step::Escalating {
                health_check_at: t(MIN),
                stall_warning_at: t(2 * MIN),
                escalated_at: t(3 * MIN),
                mail: mail_id(),
            },
            Verdict::FinishEscalation,
        ),
        (
            Step::Escalated {
                health_check_at: t(MIN),
                stall_warning_at: t(2 * MIN),
                escalated_at: t(3 * MIN),
                mail: mail_id(),
            },
            Verdict::Wait,
        ),
        (
            Step::Resolved {
                alive_at: t(MIN),
                evidence: Evidence::Touched,
            },
            Verdict::Wait,
        ),
    ];
    assert!(close(None, &h, &witness(), jj.now).is_wait());
    for (step, want) in steps {
        let mut record = incident(&a, step);
        // Written by an earlier witness: the one closing it signs the record.
        record.witness = AgentId::new("witness-before").unwrap();
        let next = close(Some(&record), &h, &witness(), jj.now);
        assert_eq!(verdict(&next, &a, &jj), want, "{}", record.step.name());
        match &next {
            Next::Record { record: new, .. } => assert_eq!(
                new.step,
                Step::Resolved {
                    alive_at: t(3 * MIN),
                    evidence: Evidence::MovedOn
                }
            ),
            Next::Finish(f) => check_finish(f, &record, &jj),
            _ => {}
        }
    }
    // Nothing about the hook's own assignment is needed to close.
    assert_eq!(answers_since(None, &a), None);
}

#[test]
fn answers_count_from_the_first_nudge_of_this_assignment() {
    let (_, a) = hook(0);
    let checking = incident(
        &a,
        Step::Checking {
            health_check_at: t(6 * MIN),
        },
    );
    assert_eq!(answers_since(Some(&checking), &a), Some(t(6 * MIN)));
    let work = WorkItem::new(BeadId::new("b0").unwrap(), "t", t(0), None);
    let other = Hook::new(a.agent.clone(), HookState::Active(work), t(0), 0)
        .assignment()
        .unwrap();
    assert_eq!(answers_since(Some(&checking), &other), None);
}

#[test]
fn a_new_incident_after_a_resolved_one_starts_from_the_hook_as_it_is() {
    // Touched at one minute, alive (answered) at two; quiet since.
    let (h, a) = hook(MIN);
    let resolved = incident(
        &a,
        Step::Resolved {
            alive_at: t(2 * MIN),
            evidence: Evidence::Answered,
        },
    );
    let jj = j(10 * MIN, None);
    let next = judge(Some(&resolved), &h, &a, &jj);
    assert_eq!(verdict(&next, &a, &jj), Verdict::Check);
    let Next::Nudge(step) = &next else {
        panic!("expected a nudge, got {next:?}");
    };
    // Not the resolved incident's opening and activity (both at zero).
    assert_eq!(
        (step.record.opened_at, step.record.last_activity),
        (t(10 * MIN), t(MIN))
    );
}
