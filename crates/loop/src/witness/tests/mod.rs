//! The witness's pure core, judged alone: the steps, the effects each
//! carries, and a table over every record step, sign of life and deadline.

use std::time::Duration;

use chipset_hook::BeadId;
use chipset_hook::{Assignment, Hook, HookState, WorkItem};
use chipset_mail::MessageId;
use chipset_nudge::NudgeType;
use chipset_store::{AgentId, Timestamp};

use super::*;
use crate::format::{Evidence, HEALTH_ESCALATION, Incident, IncidentKey, LoopMessage, Step};

mod table;

/// The old verdicts, read back from a [`Next`] (after checking that the
/// effects it carries agree with it).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    Wait,
    Check,
    Warn,
    Escalate,
    FinishEscalation,
    Resolve { evidence: Evidence, at: Timestamp },
    Close,
}

fn witness() -> AgentId {
    AgentId::new("witness").unwrap()
}

/// Checks the effects of `next` against `j` and returns its verdict.
#[track_caller]
fn verdict(next: &Next, a: &Assignment, j: &Judging) -> Verdict {
    // The shell skips the lock on exactly these.
    assert_eq!(next.is_wait(), *next == Next::Wait, "{next:?}");
    match next {
        Next::Wait => Verdict::Wait,
        Next::Record { record, action } => {
            assert_eq!(record.updated_at, j.now);
            assert_eq!(record.witness, j.witness);
            match (&record.step, action) {
                (
                    Step::Resolved { alive_at, evidence },
                    WitnessAction::Alive {
                        key,
                        evidence: e,
                        at,
                    },
                ) => {
                    assert_eq!((evidence, alive_at, key), (e, at, &IncidentKey::of(a)));
                    Verdict::Resolve {
                        evidence: *evidence,
                        at: *at,
                    }
                }
                (
                    Step::Resolved {
                        evidence: Evidence::MovedOn,
                        ..
                    },
                    WitnessAction::Closed { at, .. },
                ) => {
                    assert_eq!(*at, j.now);
                    Verdict::Close
                }
                other => panic!("a record that is not a resolution: {other:?}"),
            }
        }
        Next::Nudge(step) => {
            assert_eq!(step.agent(), &a.agent);
            assert_eq!(step.record.updated_at, j.now);
            assert!(step.text.contains(a.work.bead_id.as_str()), "{}", step.text);
            match (step.nudge, &step.record.step) {
                (WitnessNudge::HealthCheck, Step::Checking { health_check_at }) => {
                    assert_eq!(*health_check_at, j.now);
                    assert_eq!(step.record.opened_at, j.now);
                    assert_eq!(step.nudge.kind(), NudgeType::HealthCheck);
                    assert!(matches!(
                        step.action(true),
                        WitnessAction::HealthCheck { held: true, at, .. } if at == j.now
                    ));
                    Verdict::Check
                }
                (
                    WitnessNudge::StallWarning,
                    Step::Warned {
                        stall_warning_at, ..
                    },
                ) => {
                    assert_eq!(*stall_warning_at, j.now);
                    assert_eq!(step.nudge.kind(), NudgeType::StallWarning);
                    assert!(matches!(
                        step.action(false),
                        WitnessAction::StallWarning { held: false, at, .. } if at == j.now
                    ));
                    Verdict::Warn
                }
                other => panic!("a nudge with the wrong record: {other:?}"),
            }
        }
        Next::Escalate(e) => {
            let (intent, finish) = e.intent(mail_id());
            assert!(matches!(
                &intent.step,
                Step::Escalating { escalated_at, mail, .. } if *escalated_at == j.now && *mail == mail_id()
            ));
            assert!(matches!(
                &finish.action,
                WitnessAction::Escalated {
                    recovered: false,
                    ..
                }
            ));
            check_finish(&finish, &intent, j);
            Verdict::Escalate
        }
        Next::Finish(f) => {
            assert!(matches!(
                &f.action,
                WitnessAction::Escalated {
                    recovered: true,
                    ..
                }
            ));
            Verdict::FinishEscalation
        }
    }
}

/// A finish sends the intent's id, wakes once per incident, and records the escalation.
#[track_caller]
fn check_finish(f: &Finish, intent: &Incident, j: &Judging) {
    let Step::Escalating {
        health_check_at,
        stall_warning_at,
        escalated_at,
        mail,
    } = &intent.step
    else {
        panic!("not an intent: {intent:?}");
    };
    assert_eq!(&f.mail, mail);
    assert_eq!(f.dedup_key, format!("{HEALTH_ESCALATION}/{}", intent.key()));
    assert_eq!(
        f.message,
        LoopMessage::HealthEscalation {
            assignment: intent.assignment.clone(),
            last_activity: intent.last_activity,
            health_check_at: *health_check_at,
            stall_warning_at: *stall_warning_at,
            escalated_at: *escalated_at,
        }
    );
    assert_eq!(
        f.record.step,
        Step::Escalated {
            health_check_at: *health_check_at,
            stall_warning_at: *stall_warning_at,
            escalated_at: *escalated_at,
            mail: mail.clone(),
        }
    );
    assert_eq!(
        (f.record.updated_at, &f.record.witness),
        (j.now, &j.witness)
    );
    assert_eq!(f.record.opened_at, intent.opened_at);
}

fn mail_id() -> MessageId {
    "1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab"
        .parse()
        .unwrap()
}

/// Judges and reads the verdict back.
#[track_caller]
fn v(record: Option<&Incident>, h: &Hook, a: &Assignment, j: &Judging) -> Verdict {
    verdict(&judge(record, h, a, j), a, j)
}

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
        witness: witness(),
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
    assert_eq!(v(None, &h, &a, &j(5 * MIN, None)), Verdict::Wait);
    assert_eq!(v(None, &h, &a, &j(5 * MIN + 1, None)), Verdict::Check);

    let checking = incident(
        &a,
        Step::Checking {
            health_check_at: t(6 * MIN),
        },
    );
    assert_eq!(
        v(Some(&checking), &h, &a, &j(7 * MIN - 1, None)),
        Verdict::Wait
    );
    assert_eq!(v(Some(&checking), &h, &a, &j(7 * MIN, None)), Verdict::Warn);
    // An answer before the health check does not count; one after does.
    assert_eq!(
        v(Some(&checking), &h, &a, &j(7 * MIN, Some(6 * MIN - 1))),
        Verdict::Warn
    );
    assert_eq!(
        v(Some(&checking), &h, &a, &j(7 * MIN, Some(6 * MIN))),
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
        v(Some(&warned), &h, &a, &j(8 * MIN - 1, None)),
        Verdict::Wait
    );
    assert_eq!(
        v(Some(&warned), &h, &a, &j(8 * MIN, None)),
        Verdict::Escalate
    );
    let (touched, _) = hook(7 * MIN + 5);
    assert_eq!(
        v(Some(&warned), &touched, &a, &j(8 * MIN, None)),
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
        v(Some(&escalated), &h, &a, &j(100 * MIN, None)),
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
        v(Some(&escalating), &h, &a, &j(8 * MIN, None)),
        Verdict::FinishEscalation
    );
}

#[test]
fn a_record_of_another_assignment_is_ignored() {
    let (h, a) = hook(0);
    let work = WorkItem::new(BeadId::new("b1").unwrap(), "t", t(0), None);
    let older = Hook::new(a.agent.clone(), HookState::Active(work), t(0), 0)
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
        v(Some(&escalated), &h, &a, &j(6 * MIN, None)),
        Verdict::Check
    );
}

#[test]
fn grace_delays_new_incidents_and_restarted_steps() {
    let (h, a) = hook(0);
    let mut late_start = j(5 * MIN + 1, None);
    late_start.started_at = t(5 * MIN);
    assert_eq!(v(None, &h, &a, &late_start), Verdict::Wait);
    late_start.now = t(6 * MIN);
    assert_eq!(v(None, &h, &a, &late_start), Verdict::Check);

    let checking = incident(
        &a,
        Step::Checking {
            health_check_at: t(6 * MIN),
        },
    );
    let mut restarted = j(7 * MIN, None);
    restarted.started_at = t(7 * MIN);
    assert_eq!(v(Some(&checking), &h, &a, &restarted), Verdict::Wait);
    restarted.now = t(8 * MIN);
    assert_eq!(v(Some(&checking), &h, &a, &restarted), Verdict::Warn);
}
