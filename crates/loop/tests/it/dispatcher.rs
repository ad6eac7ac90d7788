//! The dispatcher on a manual clock: assignment, verified completion exactly
//! once, reassignment after an escalation, and restarts mid-change.

use chipset_hook::{Assignment, HookStatus, Pickup};
use chipset_loop::{
    AttemptOutcome, BeadState, DispatchAction, Dispatcher, DispatcherConfig, Error, IgnoreReason,
    Topic, Witness, WitnessConfig, WorkOutcome, Worker, WorkerConfig,
};
use chipset_nudge::NudgeType;
use chipset_store::{Classify, ErrorKind, ReadOutcome};

use crate::{Setup, agent, bead, escalation_body, secs};

both!(
    work_goes_to_idle_agents_in_pool_order_with_mail_and_a_wake_up,
    a_bead_is_submitted_once,
    a_completion_is_verified_cleared_and_counted_once_whatever_the_repeats,
    a_completed_hook_is_found_without_a_report,
    a_take_away_that_fails_otherwise_is_an_error_not_a_completion,
    an_escalation_takes_the_work_away_and_gives_it_to_an_idle_agent,
    an_escalation_about_an_old_assignment_is_ignored,
    work_cleared_by_someone_else_is_queued_again,
    a_dispatcher_killed_after_the_hook_assign_adopts_it_on_restart,
    a_dispatcher_killed_after_the_assignment_mail_does_not_send_it_twice,
    a_dispatcher_killed_before_the_hook_assign_undoes_the_intent_on_restart,
    a_dispatcher_killed_mid_reassignment_finishes_it_on_restart,
    a_dispatcher_killed_between_done_and_the_clear_clears_on_restart,
    a_restarted_dispatcher_handles_an_escalation_that_arrived_while_it_was_down,
    a_corrupt_ledger_entry_is_reported_and_left_alone,
    run_until_ticks_until_told_to_stop,
    other_events_on_the_dispatchers_queue_are_left_alone,
    a_take_away_of_work_already_moved_on_is_done,
    an_agent_with_a_corrupt_hook_is_passed_over,
    a_dispatcher_killed_after_the_clear_records_it_on_restart,
);

fn dispatcher(s: &Setup, pool: &[&str]) -> Dispatcher {
    Dispatcher::new(
        s.channels(),
        agent("mayor"),
        pool.iter().map(|a| agent(a)),
        DispatcherConfig::default(),
    )
}

fn worker(s: &Setup, who: &str) -> Worker {
    Worker::new(
        s.channels(),
        agent(who),
        agent("mayor"),
        WorkerConfig::default(),
    )
}

fn witness(s: &Setup) -> Witness {
    s.witness(
        "witness",
        WitnessConfig {
            stall_threshold: secs(300),
            nudge_interval: secs(60),
            grace: secs(0),
            ..WitnessConfig::default()
        },
    )
}

fn names(actions: &[DispatchAction]) -> Vec<String> {
    actions
        .iter()
        .map(|a| match a {
            DispatchAction::Assigned { bead_id, agent, .. } => {
                format!("assigned {bead_id} {agent}")
            }
            DispatchAction::Completed { bead_id, agent, .. } => {
                format!("completed {bead_id} {agent}")
            }
            DispatchAction::Reassigned { bead_id, from, .. } => {
                format!("reassigned {bead_id} {from}")
            }
            DispatchAction::Requeued { bead_id, agent, .. } => {
                format!("requeued {bead_id} {agent}")
            }
            DispatchAction::Ignored {
                bead_id, reason, ..
            } => format!("ignored {bead_id} {reason:?}"),
            DispatchAction::Unreadable { .. } => "unreadable".to_owned(),
            _ => "other".to_owned(),
        })
        .collect()
}

fn done(w: &Worker) -> WorkOutcome {
    w.run_once(|_| Ok("done".to_owned())).unwrap()
}

fn work_goes_to_idle_agents_in_pool_order_with_mail_and_a_wake_up(s: Setup) {
    let d = dispatcher(&s, &["w1", "w2"]);
    for b in ["b1", "b2", "b3"] {
        s.advance(1);
        d.submit(bead(b), format!("task {b}")).unwrap();
    }
    assert_eq!(
        names(&d.tick().unwrap()),
        ["assigned b1 w1", "assigned b2 w2"]
    );
    assert!(d.tick().unwrap().is_empty(), "no idle agent for b3");
    let inbox = s.inbox(&agent("w1"));
    assert_eq!(inbox.len(), 1);
    assert_eq!(inbox[0].subject, Topic::WorkAssignment.to_string());
    let wake = s.bus().pending(&agent("w2")).unwrap();
    assert_eq!(wake.events[0].kind, Topic::WorkAssigned.to_string());
    let entry = d.entry(&bead("b3")).unwrap().unwrap();
    assert_eq!(entry.state, BeadState::Queued);

    // w1 finishes: its completion is verified, and b3 goes to w1.
    assert!(matches!(
        done(&worker(&s, "w1")),
        WorkOutcome::Completed { .. }
    ));
    assert_eq!(
        names(&d.tick().unwrap()),
        ["completed b1 w1", "assigned b3 w1"]
    );
}

/// A bead is in the ledger once: the same request again is a retry that
/// returns the first entry, whatever its state, and another title is
/// refused.
fn a_bead_is_submitted_once(s: Setup) {
    let d = dispatcher(&s, &["w1"]);
    let first = d.submit(bead("b1"), "t").unwrap();
    s.advance(1);
    assert_eq!(d.submit(bead("b1"), "t").unwrap(), first);
    assert!(matches!(
        d.submit(bead("b1"), "another").unwrap_err(),
        Error::AlreadySubmitted { .. }
    ));
    assert_eq!(names(&d.tick().unwrap()), ["assigned b1 w1"]);
    let assigned = d.entry(&bead("b1")).unwrap().unwrap();
    assert_eq!(d.submit(bead("b1"), "t").unwrap(), assigned);
    assert_eq!(d.ledger().unwrap().items, [assigned]);
}

fn a_completion_is_verified_cleared_and_counted_once_whatever_the_repeats(s: Setup) {
    let d = dispatcher(&s, &["w1"]);
    d.submit(bead("b1"), "t").unwrap();
    d.tick().unwrap();
    let w = worker(&s, "w1");
    let WorkOutcome::Completed { report, .. } = done(&w) else {
        panic!()
    };
    // The report arrives by mail and by bus; both are handled, one completes.
    let actions = d.tick().unwrap();
    assert_eq!(names(&actions), ["completed b1 w1"]);
    assert_eq!(
        HookStatus::of(&s.hooks.read(&agent("w1")).unwrap()),
        Some(HookStatus::Empty)
    );
    let entry = d.entry(&bead("b1")).unwrap().unwrap();
    assert!(entry.is_done());
    assert_eq!(entry.completed_by(), Some(&agent("w1")));
    assert_eq!(entry.attempts.len(), 1);
    assert_eq!(entry.attempts[0].outcome, AttemptOutcome::Completed);
    // The report was archived, the wake-up acknowledged.
    assert!(s.inbox(&agent("mayor")).is_empty());
    let at = s.mail.locate(&report).unwrap().unwrap();
    assert!(!matches!(at, chipset_mail::Location::Inbox(_)), "{at:?}");
    assert!(s.bus().pending(&agent("mayor")).unwrap().is_empty());
    for _ in 0..3 {
        assert!(d.tick().unwrap().is_empty());
    }
}

fn a_completed_hook_is_found_without_a_report(s: Setup) {
    let d = dispatcher(&s, &["w1"]);
    d.submit(bead("b1"), "t").unwrap();
    d.tick().unwrap();
    // The agent completed its hook and died before it could mail the report.
    let Pickup::Started(a) = s.hooks.pickup(&agent("w1")).unwrap() else {
        panic!()
    };
    s.hooks.complete(&a).unwrap();
    assert_eq!(names(&d.tick().unwrap()), ["completed b1 w1"]);
}

/// Bead `b1` assigned to `w1`, which picks it up and then hangs through
/// three witness rounds, which escalate it exactly once: returns what `w1`
/// holds.
fn assigned_then_silent(s: &Setup, d: &Dispatcher) -> Assignment {
    d.submit(bead("b1"), "t").unwrap();
    assert_eq!(names(&d.tick().unwrap()), ["assigned b1 w1"]);
    let Pickup::Started(held) = s.hooks.pickup(&agent("w1")).unwrap() else {
        panic!()
    };
    let wit = witness(s);
    let mut escalations = 0;
    for _ in 0..3 {
        s.advance(301);
        escalations += wit
            .tick()
            .unwrap()
            .iter()
            .filter(|a| matches!(a, chipset_loop::WitnessAction::Escalated { .. }))
            .count();
    }
    assert_eq!(escalations, 1);
    held
}

/// A take-away that fails for another reason than "already moved on" or
/// "completed" (here: the hook file is corrupt) is an error of the tick,
/// never taken for a completion: the work stays with its agent, open.
fn a_take_away_that_fails_otherwise_is_an_error_not_a_completion(s: Setup) {
    let d = dispatcher(&s, &["w1", "w2"]);
    assigned_then_silent(&s, &d);
    s.put_hook_bytes(&agent("w1"), b"{oops");
    let err = d.tick().unwrap_err();
    // The failure is the corrupt hook's, never a refusal read as "taken
    // away" (the tick may have changed something before it: then it is
    // the cause of a `PartlyDone`).
    let cause = match &err {
        Error::PartlyDone { source, .. } => source.as_ref(),
        e => e,
    };
    assert_eq!(cause.kind(), ErrorKind::Corrupt, "{err:?}");
    let entry = d.entry(&bead("b1")).unwrap().unwrap();
    assert!(
        entry
            .attempts
            .iter()
            .all(|t| t.outcome != AttemptOutcome::Completed),
        "{entry:?}"
    );
}

fn an_escalation_takes_the_work_away_and_gives_it_to_an_idle_agent(s: Setup) {
    let d = dispatcher(&s, &["w1", "w2"]);
    let held = assigned_then_silent(&s, &d);
    let actions = d.tick().unwrap();
    assert_eq!(names(&actions), ["reassigned b1 w1", "assigned b1 w2"]);

    // w1 is suspended and told to abort; its late completion is refused.
    assert!(s.loop_json("dispatcher/agents.json")["suspended"]["w1"].is_object());
    let ReadOutcome::Value(n) = s.nudges.read_latest(&agent("w1")).unwrap() else {
        panic!()
    };
    assert_eq!(n.kind, NudgeType::Abort);
    // Under an id fixed by the assignment taken away (its assignment time,
    // the abort's prefix): a tick that sends it again names the same one.
    let id = n.id.as_ref().unwrap().as_str();
    let at = held.work.assigned_at.unix_ms();
    assert!(
        id.starts_with(&format!("{at:013}-ab0a7000-0003-4000-8")),
        "{id}"
    );
    assert_eq!(
        s.hooks.complete(&held).unwrap_err().kind(),
        ErrorKind::Stale
    );

    // w2 completes it: done once, by w2.
    assert!(matches!(
        done(&worker(&s, "w2")),
        WorkOutcome::Completed { .. }
    ));
    assert_eq!(names(&d.tick().unwrap()), ["completed b1 w2"]);
    let entry = d.entry(&bead("b1")).unwrap().unwrap();
    let outcomes: Vec<_> = entry
        .attempts
        .iter()
        .map(|t| (t.agent.as_str().to_owned(), t.outcome))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("w1".to_owned(), AttemptOutcome::Reassigned),
            ("w2".to_owned(), AttemptOutcome::Completed)
        ]
    );
    // The suspended agent gets no new work until reinstated.
    d.submit(bead("b2"), "t").unwrap();
    assert_eq!(names(&d.tick().unwrap()), ["assigned b2 w2"]);
    assert!(d.reinstate(&agent("w1")).unwrap());
    d.submit(bead("b3"), "t").unwrap();
    assert_eq!(names(&d.tick().unwrap()), ["assigned b3 w1"]);
}

fn an_escalation_about_an_old_assignment_is_ignored(s: Setup) {
    let d = dispatcher(&s, &["w1"]);
    d.submit(bead("b1"), "t").unwrap();
    d.tick().unwrap();
    let Pickup::Started(a) = s.hooks.pickup(&agent("w1")).unwrap() else {
        panic!()
    };
    // The agent completes just before an escalation is read: the completion wins.
    s.hooks.complete(&a).unwrap();
    let body = escalation_body(&a);
    s.mail
        .send(&chipset_mail::NewMessage::notify(
            agent("witness"),
            agent("mayor"),
            "b1".parse().unwrap(),
            Topic::HealthEscalation.to_string(),
            body.clone(),
        ))
        .unwrap();
    let actions = d.tick().unwrap();
    assert_eq!(names(&actions), ["completed b1 w1"]);
    let entry = d.entry(&bead("b1")).unwrap().unwrap();
    assert_eq!(entry.completed_by(), Some(&agent("w1")));
    // Sent again later (a recovering witness): ignored, the bead stays done.
    s.mail
        .send(&chipset_mail::NewMessage::notify(
            agent("witness"),
            agent("mayor"),
            "b1".parse().unwrap(),
            Topic::HealthEscalation.to_string(),
            body.clone(),
        ))
        .unwrap();
    assert_eq!(names(&d.tick().unwrap()), ["ignored b1 AlreadyDone"]);
    let _ = IgnoreReason::AlreadyDone;
}

fn work_cleared_by_someone_else_is_queued_again(s: Setup) {
    let d = dispatcher(&s, &["w1", "w2"]);
    d.submit(bead("b1"), "t").unwrap();
    d.tick().unwrap();
    let a = s.hooks.current(&agent("w1")).unwrap().unwrap();
    // An operator takes it away by hand (`chipset hook clear --reassign`).
    s.hooks.reassign(&a).unwrap();
    // w1's hook is empty again, so it is idle: the bead may go back to it.
    assert_eq!(
        names(&d.tick().unwrap()),
        ["requeued b1 w1", "assigned b1 w1"]
    );
    let entry = d.entry(&bead("b1")).unwrap().unwrap();
    assert_eq!(entry.attempts[0].outcome, AttemptOutcome::Lost);
}

/// Rewrites a ledger entry's state (a dispatcher killed between two steps).
fn set_state(s: &Setup, b: &str, state: serde_json::Value) {
    let rel = format!("dispatcher/beads/{b}.json");
    let mut v = s.loop_json(&rel);
    let obj = v.as_object_mut().unwrap();
    for k in [
        "assignment",
        "mail",
        "taken",
        "agent",
        "completed_at",
        "cleared",
    ] {
        obj.remove(k);
    }
    for (k, val) in state.as_object().unwrap() {
        obj.insert(k.clone(), val.clone());
    }
    s.put_loop_bytes(
        &rel,
        &chipset_store::StateDir::to_canonical_json(&v).unwrap(),
    );
}

fn a_dispatcher_killed_after_the_hook_assign_adopts_it_on_restart(s: Setup) {
    let first = dispatcher(&s, &["w1"]);
    first.submit(bead("b1"), "t").unwrap();
    // Killed after writing the intent and assigning the hook, before the mail.
    let id = mail_id(&s);
    set_state(
        &s,
        "b1",
        serde_json::json!({"state": "assigning", "agent": "w1", "mail": id}),
    );
    s.hooks
        .assign(&agent("w1"), bead("b1"), "t", Some(&agent("mayor")))
        .unwrap();
    drop(first);

    let second = dispatcher(&s, &["w1"]);
    assert!(second.tick().unwrap().is_empty());
    let entry = second.entry(&bead("b1")).unwrap().unwrap();
    let BeadState::Assigned { mail, .. } = &entry.state else {
        panic!("{entry:?}")
    };
    assert_eq!(
        mail.as_ref(),
        Some(&id),
        "the missing assignment mail was sent"
    );
    assert_eq!(s.inbox(&agent("w1")).len(), 1);
    assert_eq!(entry.attempts.len(), 1);
}

fn a_dispatcher_killed_after_the_assignment_mail_does_not_send_it_twice(s: Setup) {
    let first = dispatcher(&s, &["w1"]);
    first.submit(bead("b1"), "t").unwrap();
    first.tick().unwrap();
    // Killed after the hook and the mail, before the ledger said "assigned".
    let mail = s.inbox(&agent("w1")).remove(0);
    set_state(
        &s,
        "b1",
        serde_json::json!({"state": "assigning", "agent": "w1", "mail": mail.id}),
    );
    drop(first);
    let second = dispatcher(&s, &["w1"]);
    assert!(second.tick().unwrap().is_empty());
    assert_eq!(s.inbox(&agent("w1")).len(), 1);
    assert_eq!(s.sent(&Topic::WorkAssignment.to_string()).len(), 1);
}

fn mail_id(s: &Setup) -> chipset_mail::MessageId {
    chipset_mail::MessageId::from(chipset_store::SortableId::generate(&s.clock))
}

fn a_dispatcher_killed_before_the_hook_assign_undoes_the_intent_on_restart(s: Setup) {
    let first = dispatcher(&s, &["w1"]);
    first.submit(bead("b1"), "t").unwrap();
    set_state(
        &s,
        "b1",
        serde_json::json!({"state": "assigning", "agent": "w1", "mail": mail_id(&s)}),
    );
    drop(first);
    let second = dispatcher(&s, &["w1"]);
    assert_eq!(names(&second.tick().unwrap()), ["assigned b1 w1"]);
}

fn a_dispatcher_killed_mid_reassignment_finishes_it_on_restart(s: Setup) {
    let first = dispatcher(&s, &["w1", "w2"]);
    first.submit(bead("b1"), "t").unwrap();
    first.tick().unwrap();
    let a = s.hooks.current(&agent("w1")).unwrap().unwrap();
    // Killed after writing "reassigning", before the hook changed.
    set_state(
        &s,
        "b1",
        serde_json::json!({"state": "reassigning", "taken": a}),
    );
    drop(first);

    let second = dispatcher(&s, &["w1", "w2"]);
    assert_eq!(
        names(&second.tick().unwrap()),
        ["reassigned b1 w1", "assigned b1 w2"]
    );
    assert_eq!(s.hooks.complete(&a).unwrap_err().kind(), ErrorKind::Stale);
    // A restart after the hook changed but before the ledger said so: same end.
    let b = s.hooks.current(&agent("w2")).unwrap().unwrap();
    set_state(
        &s,
        "b1",
        serde_json::json!({"state": "reassigning", "taken": b}),
    );
    s.hooks.reassign(&b).unwrap();
    let third = dispatcher(&s, &["w1", "w2"]);
    let actions = names(&third.tick().unwrap());
    assert_eq!(actions[0], "reassigned b1 w2");
}

/// A dispatcher that recorded b1 done on w1 and died before the clear:
/// returns the completed assignment (the hook still holds it).
fn done_but_not_cleared(s: &Setup) -> Assignment {
    let first = dispatcher(s, &["w1"]);
    first.submit(bead("b1"), "t").unwrap();
    first.tick().unwrap();
    let Pickup::Started(a) = s.hooks.pickup(&agent("w1")).unwrap() else {
        panic!()
    };
    s.hooks.complete(&a).unwrap();
    set_state(
        s,
        "b1",
        serde_json::json!({"state": "done", "assignment": a, "completed_at": a.work.assigned_at, "cleared": false}),
    );
    a
}

fn a_dispatcher_killed_between_done_and_the_clear_clears_on_restart(s: Setup) {
    done_but_not_cleared(&s);
    let second = dispatcher(&s, &["w1"]);
    assert!(
        second.tick().unwrap().is_empty(),
        "already done: no second completion"
    );
    assert_eq!(
        HookStatus::of(&s.hooks.read(&agent("w1")).unwrap()),
        Some(HookStatus::Empty)
    );
    let entry = second.entry(&bead("b1")).unwrap().unwrap();
    assert!(matches!(entry.state, BeadState::Done { cleared: true, .. }));
}

fn a_restarted_dispatcher_handles_an_escalation_that_arrived_while_it_was_down(s: Setup) {
    let first = dispatcher(&s, &["w1", "w2"]);
    first.submit(bead("b1"), "t").unwrap();
    first.tick().unwrap();
    let _ = s.hooks.pickup(&agent("w1")).unwrap();
    drop(first); // the dispatcher dies; the witness escalates meanwhile
    let wit = witness(&s);
    for _ in 0..3 {
        s.advance(301);
        wit.tick().unwrap();
    }
    let second = dispatcher(&s, &["w1", "w2"]);
    assert_eq!(
        names(&second.tick().unwrap()),
        ["reassigned b1 w1", "assigned b1 w2"]
    );
    assert!(matches!(
        done(&worker(&s, "w2")),
        WorkOutcome::Completed { .. }
    ));
    let third = dispatcher(&s, &["w1", "w2"]);
    assert_eq!(names(&third.tick().unwrap()), ["completed b1 w2"]);
    assert_eq!(s.sent(&Topic::HealthEscalation.to_string()).len(), 1);
}

fn a_corrupt_ledger_entry_is_reported_and_left_alone(s: Setup) {
    let d = dispatcher(&s, &["w1"]);
    d.submit(bead("b1"), "t").unwrap();
    s.put_loop_bytes("dispatcher/beads/b1.json", b"{ torn");
    assert_eq!(names(&d.tick().unwrap()), ["unreadable"]);
    assert_eq!(
        HookStatus::of(&s.hooks.read(&agent("w1")).unwrap()),
        Some(HookStatus::Empty)
    );
    assert_eq!(d.entry(&bead("b1")).unwrap_err().kind(), ErrorKind::Corrupt);
    assert_eq!(d.ledger().unwrap().corrupt.len(), 1);
}

/// A dispatcher's config sets the poll pace.
#[test]
fn a_dispatcher_config_sets_the_pace() {
    let quick = DispatcherConfig {
        poll_every: secs(7),
    };
    assert_eq!(quick.poll_every, secs(7));
    assert_ne!(DispatcherConfig::default().poll_every, secs(7));
}

/// `run_until` ticks until its caller says stop: the submitted bead is
/// assigned by the time it returns.
fn run_until_ticks_until_told_to_stop(s: Setup) {
    let d = dispatcher(&s, &["polecat-alpha"]);
    d.submit(bead("gt-1"), "Add README section").unwrap();
    let mut seen = Vec::new();
    d.run_until(|actions| {
        seen.extend_from_slice(actions);
        !actions.is_empty()
    })
    .unwrap();
    assert!(
        seen.iter()
            .any(|a| matches!(a, DispatchAction::Assigned { .. })),
        "{seen:?}"
    );
    assert_eq!(
        HookStatus::of(&s.hooks.read(&agent("polecat-alpha")).unwrap()),
        Some(HookStatus::Pending)
    );
}

/// Events on the dispatcher's queue other than completions and escalations
/// are not its to read: they stay, unacknowledged and unreported.
fn other_events_on_the_dispatchers_queue_are_left_alone(s: Setup) {
    let d = dispatcher(&s, &["w1"]);
    let bus = s.bus();
    let _ = bus
        .publish(
            &agent("mayor"),
            &chipset_bus::NewEvent::new("ops", "other-kind"),
        )
        .unwrap();
    d.submit(bead("b1"), "t").unwrap();
    assert_eq!(names(&d.tick().unwrap()), ["assigned b1 w1"]);
    let pending = bus.pending(&agent("mayor")).unwrap();
    let kinds: Vec<_> = pending.events.iter().map(|e| &e.kind).collect();
    assert_eq!(kinds, ["other-kind"]);
}

/// A take-away that finds the work already moved on (someone else took it
/// back first) is done all the same: the bead goes to an idle agent.
fn a_take_away_of_work_already_moved_on_is_done(s: Setup) {
    let d = dispatcher(&s, &["w1", "w2"]);
    let held = assigned_then_silent(&s, &d);
    s.hooks.reassign(&held).unwrap();
    let actions = d.tick().unwrap();
    let names = names(&actions);
    assert!(
        names.iter().any(|n| n.starts_with("assigned b1")),
        "{names:?}"
    );
}

/// An agent whose hook cannot take work (corrupt) is passed over for the
/// next in the pool.
fn an_agent_with_a_corrupt_hook_is_passed_over(s: Setup) {
    let d = dispatcher(&s, &["w1", "w2"]);
    s.put_hook_bytes(&agent("w1"), b"{oops");
    d.submit(bead("b1"), "t").unwrap();
    assert_eq!(names(&d.tick().unwrap()), ["assigned b1 w2"]);
}

/// A dispatcher killed after the clear but before recording it finds the
/// hook already cleared on restart: the clear counts as done.
fn a_dispatcher_killed_after_the_clear_records_it_on_restart(s: Setup) {
    let a = done_but_not_cleared(&s);
    s.hooks.clear(&a).unwrap();
    let second = dispatcher(&s, &["w1"]);
    assert!(second.tick().unwrap().is_empty());
    let entry = second.entry(&bead("b1")).unwrap().unwrap();
    assert!(matches!(entry.state, BeadState::Done { cleared: true, .. }));
}

/// A message in the dispatcher's inbox that this version cannot read (a
/// newer program's priority) is reported, as a corrupt one is, and the
/// tick goes on: work is still assigned, where the tick used to fail.
#[test]
fn an_unsupported_message_in_the_inbox_is_reported_and_the_tick_goes_on() {
    let s = crate::setup();
    let d = dispatcher(&s, &["w1"]);
    let note = chipset_mail::NewMessage::notify(
        agent("ann"),
        agent("mayor"),
        "t1".parse().unwrap(),
        "status",
        "all green",
    );
    let sent = s.mail.send(&note).unwrap();
    let path = s
        .mail
        .path_of(&sent.id, &chipset_mail::Location::Inbox(agent("mayor")));
    let text = std::fs::read_to_string(path.as_path()).unwrap();
    let newer = text.replace("\"normal\"", "\"critical\"");
    assert_ne!(newer, text);
    std::fs::write(path.as_path(), newer).unwrap();
    d.submit(bead("b1"), "t").unwrap();
    let actions = d.tick().unwrap();
    assert_eq!(names(&actions), ["unreadable", "assigned b1 w1"]);
    let DispatchAction::Unreadable { reason, .. } = &actions[0] else {
        unreachable!()
    };
    assert!(reason.contains("priority `critical`"), "{reason}");
}
