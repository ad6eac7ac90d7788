//! The dispatcher ledger's pure core, judged alone: the whole table of
//! states and events, then the effects and records of the steps that carry
//! them.

use chipset_hook::BeadId;
use chipset_hook::{Assignment, Hook, HookState, WorkItem};
use chipset_mail::MessageId;
use chipset_store::{AgentId, Corruption, ReadOutcome, Timestamp};

use super::*;
use crate::format::{Attempt, AttemptOutcome};

fn t(ms: i64) -> Timestamp {
    Timestamp::from_unix_ms(1_772_706_600_000 + ms)
}

fn a1() -> AgentId {
    AgentId::new("a1").unwrap()
}

fn work() -> WorkItem {
    WorkItem::new(BeadId::new("b1").unwrap(), "title", t(0), None)
}

fn hook(state: HookState, generation: u64) -> ReadOutcome<Hook> {
    ReadOutcome::Value(Hook::new(a1(), state, t(3), generation))
}

/// The current assignment (generation 1) and an older one (generation 0).
fn current() -> Assignment {
    let ReadOutcome::Value(h) = hook(HookState::Active(work()), 1) else {
        unreachable!()
    };
    h.assignment().unwrap()
}

fn older() -> Assignment {
    let ReadOutcome::Value(h) = hook(HookState::Active(work()), 0) else {
        unreachable!()
    };
    h.assignment().unwrap()
}

fn mail() -> MessageId {
    "1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab"
        .parse()
        .unwrap()
}

fn attempt(outcome: AttemptOutcome) -> Attempt {
    Attempt {
        agent: a1(),
        generation: 1,
        assigned_at: t(0),
        outcome,
        ended_at: None,
    }
}

fn entry(state: BeadState, attempts: Vec<Attempt>) -> LedgerEntry {
    LedgerEntry {
        bead_id: BeadId::new("b1").unwrap(),
        title: "title".into(),
        submitted_at: t(0),
        state,
        attempts,
        updated_at: t(0),
    }
}

/// Every state the table covers, by label.
fn states() -> Vec<(&'static str, LedgerEntry)> {
    let open = || vec![attempt(AttemptOutcome::Open)];
    let done = |cleared| BeadState::Done {
        assignment: current(),
        completed_at: t(2),
        cleared,
    };
    vec![
        ("queued", entry(BeadState::Queued, vec![])),
        (
            "assigning",
            entry(
                BeadState::Assigning {
                    agent: a1(),
                    mail: mail(),
                },
                vec![],
            ),
        ),
        (
            "assigned",
            entry(
                BeadState::Assigned {
                    assignment: current(),
                    mail: Some(mail()),
                },
                open(),
            ),
        ),
        (
            "assigned_unmailed",
            entry(
                BeadState::Assigned {
                    assignment: current(),
                    mail: None,
                },
                open(),
            ),
        ),
        (
            "reassigning",
            entry(BeadState::Reassigning { taken: current() }, open()),
        ),
        (
            "done_uncleared",
            entry(done(false), vec![attempt(AttemptOutcome::Completed)]),
        ),
        (
            "done",
            entry(done(true), vec![attempt(AttemptOutcome::Completed)]),
        ),
    ]
}

/// Every event the table covers, by label.
fn events() -> Vec<(&'static str, LedgerEvent)> {
    let corrupt = || {
        ReadOutcome::Corrupt(Corruption {
            path: "hooks/a1.json".into(),
            reason: chipset_store::CorruptReason::Unparsable("eof".into()),
        })
    };
    // A hook in a status this version does not know (written by a newer
    // program): reported like a corrupt one, never taken as lost or not done.
    let unsupported = || {
        ReadOutcome::Unsupported(chipset_store::Unsupported::new(
            "hooks/a1.json",
            "hook status `paused`",
        ))
    };
    vec![
        (
            "report",
            LedgerEvent::Report {
                assignment: current(),
                completed_at: Some(t(2)),
            },
        ),
        (
            "report_older",
            LedgerEvent::Report {
                assignment: older(),
                completed_at: None,
            },
        ),
        (
            "escalation",
            LedgerEvent::Escalation {
                assignment: current(),
            },
        ),
        (
            "escalation_older",
            LedgerEvent::Escalation {
                assignment: older(),
            },
        ),
        ("sweep", LedgerEvent::Sweep),
        (
            "choose",
            LedgerEvent::Choose {
                agent: a1(),
                mail: mail(),
            },
        ),
        (
            "adopt_holds",
            LedgerEvent::Adopt(hook(HookState::Pending(work()), 1)),
        ),
        ("adopt_empty", LedgerEvent::Adopt(hook(HookState::Empty, 2))),
        ("adopt_missing", LedgerEvent::Adopt(ReadOutcome::Missing)),
        ("adopt_corrupt", LedgerEvent::Adopt(corrupt())),
        ("adopt_unsupported", LedgerEvent::Adopt(unsupported())),
        (
            "check_completed",
            LedgerEvent::Check(hook(HookState::Completed(work()), 1)),
        ),
        (
            "check_active",
            LedgerEvent::Check(hook(HookState::Active(work()), 1)),
        ),
        ("check_empty", LedgerEvent::Check(hook(HookState::Empty, 2))),
        ("check_corrupt", LedgerEvent::Check(corrupt())),
        ("check_unsupported", LedgerEvent::Check(unsupported())),
        (
            "verify_completed",
            LedgerEvent::Verify {
                hook: hook(HookState::Completed(work()), 1),
                completed_at: None,
            },
        ),
        (
            "verify_active",
            LedgerEvent::Verify {
                hook: hook(HookState::Active(work()), 1),
                completed_at: None,
            },
        ),
        (
            "verify_corrupt",
            LedgerEvent::Verify {
                hook: corrupt(),
                completed_at: None,
            },
        ),
        (
            "verify_unsupported",
            LedgerEvent::Verify {
                hook: unsupported(),
                completed_at: None,
            },
        ),
        ("hooked", LedgerEvent::Hooked(current())),
        ("refused", LedgerEvent::Refused),
        ("mailed", LedgerEvent::Mailed(mail())),
        ("took_away", LedgerEvent::TookAway),
        ("found_completed", LedgerEvent::FoundCompleted),
        ("cleared", LedgerEvent::Cleared),
    ]
}

fn command(c: &LedgerCommand) -> &'static str {
    match c {
        LedgerCommand::Stop => "stop",
        LedgerCommand::Adopt(_) => "adopt",
        LedgerCommand::Check(_) => "check",
        LedgerCommand::Verify { .. } => "verify",
        LedgerCommand::Assign(_) => "assign",
        LedgerCommand::Mail(_) => "mail",
        LedgerCommand::TakeAway(_) => "take_away",
        LedgerCommand::Clear(_) => "clear",
    }
}

fn action(a: &DispatchAction) -> String {
    let doc = serde_json::to_value(a).unwrap();
    match doc.get("reason").and_then(|r| r.as_str()) {
        Some(reason) if doc["action"] == "ignored" => format!("ignored:{reason}"),
        _ => doc["action"].as_str().unwrap().to_owned(),
    }
}

/// What each (state, event) gives: the state written (`-`: no write), the
/// next command, the action reported (`-`: none).
fn expected(state: &str, event: &str) -> (&'static str, &'static str, &'static str) {
    let assigned = matches!(state, "assigned" | "assigned_unmailed");
    let holding = assigned || state == "reassigning";
    let done = matches!(state, "done" | "done_uncleared");
    match (state, event) {
        // Messages about the current assignment.
        (_, "report") if holding => ("-", "verify", "-"),
        (_, "escalation") if assigned => ("reassigning", "take_away", "-"),
        // A repeat of a handled one is silent; anything else is ignored.
        (_, "report") if done => ("-", "stop", "-"),
        (_, "report" | "report_older" | "escalation" | "escalation_older") if done => {
            ("-", "stop", "ignored:already_done")
        }
        (_, "report" | "report_older" | "escalation" | "escalation_older") => {
            ("-", "stop", "ignored:not_current")
        }
        // The sweep.
        ("assigning", "sweep") => ("-", "adopt", "-"),
        (_, "sweep") if assigned => ("-", "check", "-"),
        ("reassigning", "sweep") => ("-", "take_away", "-"),
        ("done_uncleared", "sweep") => ("-", "clear", "-"),
        // Assigning.
        ("queued", "choose") => ("assigning", "assign", "-"),
        ("assigning", "hooked") => ("assigned", "stop", "assigned"),
        ("assigning", "refused" | "adopt_empty" | "adopt_missing") => ("queued", "stop", "-"),
        ("assigning", "adopt_corrupt" | "adopt_unsupported") => ("-", "stop", "unreadable"),
        ("assigning", "adopt_holds") => ("assigned", "check", "-"),
        // Checking an assignment.
        (_, "check_completed") if assigned => ("-", "verify", "-"),
        ("assigned_unmailed", "check_active") => ("-", "mail", "-"),
        (_, "check_empty") if assigned => ("queued", "stop", "requeued"),
        (_, "check_corrupt" | "check_unsupported") if assigned => ("-", "stop", "unreadable"),
        ("assigned_unmailed", "mailed") => ("assigned", "stop", "-"),
        // Verifying.
        (_, "verify_completed") if holding => ("done", "clear", "completed"),
        (_, "verify_active") if holding => ("-", "stop", "ignored:not_completed"),
        (_, "verify_corrupt" | "verify_unsupported") if holding => ("-", "stop", "unreadable"),
        // Taking away and clearing.
        ("reassigning", "took_away") => ("queued", "stop", "reassigned"),
        ("reassigning", "found_completed") => ("-", "verify", "-"),
        ("done_uncleared", "cleared") => ("done", "stop", "-"),
        _ => ("-", "stop", "-"),
    }
}

/// The whole table: every state against every event.
#[test]
fn exhaustive_table_of_states_and_events() {
    let mut rows = 0;
    for (state, e) in states() {
        for (event, ev) in events() {
            let got = ledger_transition(&e, &ev, t(10));
            let written = got.entry.as_ref().map_or("-", |n| n.state.name());
            let want = expected(state, event);
            let want_written = match want.0 {
                "assigned" | "reassigning" | "assigning" | "queued" | "done" => want.0,
                _ => "-",
            };
            assert_eq!(
                (
                    written,
                    command(&got.next),
                    got.action.as_ref().map_or("-".to_owned(), action)
                ),
                (want_written, want.1, want.2.to_owned()),
                "{state} + {event}"
            );
            if let Some(new) = &got.entry {
                assert_eq!(new.updated_at, t(10), "{state} + {event}");
                assert_eq!(new.bead_id, e.bead_id);
                assert_eq!(new.submitted_at, e.submitted_at);
            }
            rows += 1;
        }
    }
    assert_eq!(rows, 7 * 26);
}

fn step(state: &str, event: &str) -> (LedgerEntry, LedgerTransition) {
    let e = states().into_iter().find(|(s, _)| *s == state).unwrap().1;
    let ev = events().into_iter().find(|(s, _)| *s == event).unwrap().1;
    let t = ledger_transition(&e, &ev, t(10));
    (e, t)
}

#[test]
fn an_assignment_sends_its_mail_and_wakes_before_the_write() {
    let (_, got) = step("assigning", "hooked");
    assert_eq!(
        got.before,
        [
            LedgerEffect::SendAssignment {
                assignment: current(),
                mail: mail()
            },
            LedgerEffect::Wake {
                assignment: current(),
                mail: mail()
            }
        ]
    );
    assert!(got.after.is_empty());
    let new = got.entry.unwrap();
    assert_eq!(
        new.state,
        BeadState::Assigned {
            assignment: current(),
            mail: Some(mail())
        }
    );
    assert_eq!(new.attempts, [attempt(AttemptOutcome::Open)]);
    // Adopting after a crash sends and wakes under the intent's id too
    // (the retry of a tick cut short before the write), and adds the attempt.
    let (_, adopted) = step("assigning", "adopt_holds");
    assert_eq!(adopted.before, got.before);
    assert_eq!(adopted.entry.unwrap().attempts.len(), 1);
}

#[test]
fn a_completion_ends_the_attempt_and_takes_the_reported_time() {
    let (_, got) = step("assigned", "verify_completed");
    let new = got.entry.unwrap();
    // No report named a time: the hook's last activity.
    assert!(matches!(
        new.state,
        BeadState::Done { completed_at, cleared: false, .. } if completed_at == t(3)
    ));
    assert_eq!(new.attempts[0].outcome, AttemptOutcome::Completed);
    assert_eq!(new.attempts[0].ended_at, Some(t(10)));
    assert_eq!(got.next, LedgerCommand::Clear(current()));
    let e = states().remove(2).1;
    let reported = ledger_transition(
        &e,
        &LedgerEvent::Verify {
            hook: hook(HookState::Completed(work()), 1),
            completed_at: Some(t(2)),
        },
        t(10),
    );
    assert!(matches!(
        reported.entry.unwrap().state,
        BeadState::Done { completed_at, .. } if completed_at == t(2)
    ));
    // Clearing records it and finishes the bead.
    let (_, cleared) = step("done_uncleared", "cleared");
    assert!(matches!(
        cleared.entry.unwrap().state,
        BeadState::Done { cleared: true, completed_at, .. } if completed_at == t(2)
    ));
    assert_eq!(
        cleared.after,
        [LedgerEffect::Finished(BeadId::new("b1").unwrap())]
    );
    let (_, swept) = step("done", "sweep");
    assert_eq!(
        swept.after,
        [LedgerEffect::Finished(BeadId::new("b1").unwrap())]
    );
}

#[test]
fn taking_work_away_suspends_and_aborts_before_the_requeue() {
    let (_, got) = step("reassigning", "took_away");
    assert_eq!(
        got.before,
        [
            LedgerEffect::Suspend {
                agent: a1(),
                bead_id: BeadId::new("b1").unwrap()
            },
            LedgerEffect::Abort(current())
        ]
    );
    let new = got.entry.unwrap();
    assert_eq!(new.state, BeadState::Queued);
    assert_eq!(new.attempts[0].outcome, AttemptOutcome::Reassigned);
    // A lost hook ends the attempt as lost.
    let (_, lost) = step("assigned", "check_empty");
    assert_eq!(
        lost.entry.unwrap().attempts[0].outcome,
        AttemptOutcome::Lost
    );
    // Once reassigned, the same escalation again is silent.
    let mut e = new;
    e.state = BeadState::Queued;
    let again = ledger_transition(
        &e,
        &LedgerEvent::Escalation {
            assignment: current(),
        },
        t(11),
    );
    assert_eq!(again, LedgerTransition::stay());
}

/// An attempt is ended only when it is the assignment's own: same agent,
/// same generation, still open; others are left as they are.
#[test]
fn only_the_assignments_own_open_attempt_is_ended() {
    let other = |agent: &str, generation, outcome| Attempt {
        agent: AgentId::new(agent).unwrap(),
        generation,
        ..attempt(outcome)
    };
    let mut e = entry(
        BeadState::Queued,
        vec![
            other("a1", 0, AttemptOutcome::Open),
            other("a1", 1, AttemptOutcome::Reassigned),
            other("a2", 1, AttemptOutcome::Open),
        ],
    );
    let before = e.clone();
    e.end_attempt(&current(), AttemptOutcome::Completed, t(9));
    assert_eq!(e, before, "no attempt of a1's generation 1 is open");
    e.attempts.push(attempt(AttemptOutcome::Open));
    e.end_attempt(&current(), AttemptOutcome::Completed, t(9));
    assert_eq!(e.attempts[..3], before.attempts[..]);
    assert_eq!(
        (e.attempts[3].outcome, e.attempts[3].ended_at),
        (AttemptOutcome::Completed, Some(t(9)))
    );
}
