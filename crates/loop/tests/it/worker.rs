//! The agent work loop: GUPP pickup, heartbeat, nudges, abort, signals,
//! completion and its report, and the fence when the work is taken away.

use chipset_bus::{Bus, Priority as BusPriority};
use chipset_hook::HookStatus;
use chipset_loop::{Stop, Topic, WorkOutcome, Worker, WorkerConfig};
use chipset_nudge::{NewNudge, NudgeType, Received};
use chipset_store::{Classify, ErrorKind, ReadOutcome};

use crate::{Setup, agent, bead, body_json, secs, setup};

both!(
    idle_when_nothing_is_hooked,
    gupp_runs_the_work_completes_the_hook_and_reports_it,
    checkpoints_touch_the_hook_at_the_configured_pace,
    health_checks_are_answered_while_working,
    an_idle_agent_answers_health_checks_too,
    an_abort_stops_the_work_cooperatively_and_reports_nothing,
    an_abort_older_than_the_assignment_is_stale,
    health_checks_stall_warnings_and_responses_are_no_signal_to_the_work,
    priority_changes_and_sync_requests_reach_the_work_as_signals,
    work_taken_away_cannot_be_completed_and_nothing_is_reported,
    a_checkpoint_notices_the_work_was_taken_away,
    a_failed_work_leaves_the_hook_active_and_is_resumed,
    run_until_does_not_resume_aborted_work_while_the_hook_holds_it,
    run_until_takes_up_new_work_hooked_after_an_abort,
    run_until_goes_on_after_work_is_taken_away,
    run_until_tidies_only_the_assignments_wakeup_and_mail,
    run_until_ends_on_an_error_that_is_not_stale,
    a_completion_refused_for_a_corrupt_hook_is_not_stale,
    a_heartbeat_touches_the_hook_now,
);

fn worker(s: &Setup, who: &str) -> Worker {
    Worker::new(
        s.channels(),
        agent(who),
        agent("mayor"),
        WorkerConfig {
            touch_every: secs(10),
            ..WorkerConfig::default()
        },
    )
}

/// As [`worker`], polling every 5 ms: for the `run_until` tests.
fn quick_worker(s: &Setup, who: &str) -> Worker {
    Worker::new(
        s.channels(),
        agent(who),
        agent("mayor"),
        WorkerConfig {
            touch_every: secs(10),
            poll_every: std::time::Duration::from_millis(5),
        },
    )
}

fn assign(s: &Setup, who: &str, b: &str) -> chipset_hook::Assignment {
    s.hooks
        .assign(&agent(who), bead(b), "some work", Some(&agent("mayor")))
        .unwrap()
}

fn nudge(s: &Setup, from: &str, to: &str, kind: NudgeType, requires: bool) {
    let mut d = NewNudge::new(agent(from), kind, "hello");
    if requires {
        d = d.requiring_response();
    }
    let _ = s.nudges.send(&agent(to), &d).unwrap();
}

fn idle_when_nothing_is_hooked(s: Setup) {
    let w = worker(&s, "polecat-alpha");
    let out = w.run_once(|_| panic!("no work to run")).unwrap();
    assert_eq!(out, WorkOutcome::Idle);
}

fn gupp_runs_the_work_completes_the_hook_and_reports_it(s: Setup) {
    let a = assign(&s, "polecat-alpha", "gt-abc12");
    let w = worker(&s, "polecat-alpha");
    let out = w
        .run_once(|work| {
            assert_eq!(work.assignment(), &a);
            assert!(!work.resumed());
            assert_eq!(
                HookStatus::of(&s.hooks.read(&agent("polecat-alpha")).unwrap()),
                Some(HookStatus::Active)
            );
            for _ in 0..5 {
                s.advance(10);
                work.checkpoint()?;
            }
            Ok("README section added".to_owned())
        })
        .unwrap();
    let WorkOutcome::Completed {
        assignment,
        report,
        completed_at,
    } = out
    else {
        panic!("{out:?}")
    };
    assert_eq!(assignment, a);
    let hook = s.hooks.read(&agent("polecat-alpha")).unwrap();
    assert_eq!(HookStatus::of(&hook), Some(HookStatus::Completed));
    assert_eq!(hook.value().unwrap().last_activity, completed_at);

    let inbox = s.inbox(&agent("mayor"));
    assert_eq!(inbox.len(), 1);
    assert_eq!(inbox[0].id, report);
    assert_eq!(inbox[0].subject, Topic::CompletionReport.to_string());
    let body = body_json(&inbox[0].body);
    assert_eq!(body["type"], "completion_report");
    assert_eq!(body["assignment"], serde_json::to_value(&a).unwrap());
    assert_eq!(body["summary"], "README section added");
    let pending = s.bus().pending(&agent("mayor")).unwrap();
    assert_eq!(pending.events[0].kind, Topic::WorkCompleted.to_string());
    assert_eq!(pending.events[0].priority, BusPriority::High);

    // Next time round: the completed work waits for the dispatcher's clear.
    assert!(matches!(
        w.run_once(|_| panic!("nothing to run")).unwrap(),
        WorkOutcome::AwaitingClear(_)
    ));
}

fn checkpoints_touch_the_hook_at_the_configured_pace(s: Setup) {
    assign(&s, "polecat-alpha", "gt-abc12");
    let w = worker(&s, "polecat-alpha");
    let alpha = agent("polecat-alpha");
    let last = || s.hooks.read(&alpha).unwrap().value().unwrap().last_activity;
    let _ = w
        .run_once(|work| {
            let start = last();
            s.advance(5);
            work.checkpoint()?;
            assert_eq!(last(), start, "within touch_every: no touch");
            s.advance(5);
            work.checkpoint()?;
            assert_eq!(last(), s.clock_now(), "touched");
            work.heartbeat()?;
            Ok(String::new())
        })
        .unwrap();
}

fn health_checks_are_answered_while_working(s: Setup) {
    assign(&s, "polecat-alpha", "gt-abc12");
    let w = worker(&s, "polecat-alpha");
    let sent_at = s.clock_now();
    nudge(&s, "witness", "polecat-alpha", NudgeType::HealthCheck, true);
    let _ = w
        .run_once(|work| {
            s.advance(1);
            work.checkpoint()?;
            Ok(String::new())
        })
        .unwrap();
    let answer = s
        .nudges
        .response_from(&agent("witness"), &agent("polecat-alpha"), sent_at)
        .unwrap();
    assert!(answer.is_some());
    assert!(matches!(
        s.nudges.receive(&agent("polecat-alpha")).unwrap(),
        ReadOutcome::Value(Received::Seen(_))
    ));
}

fn an_idle_agent_answers_health_checks_too(s: Setup) {
    let w = worker(&s, "polecat-alpha");
    let sent_at = s.clock_now();
    nudge(&s, "witness", "polecat-alpha", NudgeType::HealthCheck, true);
    assert_eq!(w.run_once(|_| panic!()).unwrap(), WorkOutcome::Idle);
    assert!(
        s.nudges
            .response_from(&agent("witness"), &agent("polecat-alpha"), sent_at)
            .unwrap()
            .is_some()
    );
}

fn an_abort_stops_the_work_cooperatively_and_reports_nothing(s: Setup) {
    assign(&s, "polecat-alpha", "gt-abc12");
    let w = worker(&s, "polecat-alpha");
    let mut steps = 0;
    let out = w
        .run_once(|work| {
            loop {
                steps += 1;
                if steps == 3 {
                    nudge(&s, "mayor", "polecat-alpha", NudgeType::Abort, false);
                }
                s.advance(1);
                if let Err(stop) = work.checkpoint() {
                    assert!(matches!(stop, Stop::Aborted(_)));
                    // Once seen, the abort stops every later checkpoint too.
                    assert!(matches!(work.checkpoint(), Err(Stop::Aborted(_))));
                    return Err(stop);
                }
            }
        })
        .unwrap();
    assert_eq!(steps, 3);
    let WorkOutcome::Aborted { nudge, .. } = out else {
        panic!("{out:?}")
    };
    assert_eq!(nudge.kind, NudgeType::Abort);
    // The hook is the dispatcher's to clear or reassign; no report was sent.
    assert_eq!(
        HookStatus::of(&s.hooks.read(&agent("polecat-alpha")).unwrap()),
        Some(HookStatus::Active)
    );
    assert!(s.inbox(&agent("mayor")).is_empty());
}

fn an_abort_older_than_the_assignment_is_stale(s: Setup) {
    nudge(&s, "mayor", "polecat-alpha", NudgeType::Abort, false);
    s.advance(1);
    assign(&s, "polecat-alpha", "gt-abc12");
    let w = worker(&s, "polecat-alpha");
    let out = w
        .run_once(|work| {
            work.checkpoint()?;
            work.checkpoint()?;
            Ok("done".to_owned())
        })
        .unwrap();
    assert!(matches!(out, WorkOutcome::Completed { .. }));
}

/// Health checks, stall warnings and nudge responses are the loop's own
/// business (answered or marked processed): no signal reaches the work.
fn health_checks_stall_warnings_and_responses_are_no_signal_to_the_work(s: Setup) {
    assign(&s, "polecat-alpha", "gt-abc12");
    let w = worker(&s, "polecat-alpha");
    let out = w
        .run_once(|work| {
            for kind in [
                NudgeType::HealthCheck,
                NudgeType::StallWarning,
                NudgeType::NudgeResponse,
            ] {
                nudge(&s, "witness", "polecat-alpha", kind.clone(), false);
                s.advance(1);
                work.checkpoint()?;
                assert!(
                    matches!(
                        s.nudges.receive(&agent("polecat-alpha")).unwrap(),
                        ReadOutcome::Value(Received::Seen(_))
                    ),
                    "{kind:?} not processed"
                );
                let signals = work.take_signals();
                assert!(signals.is_empty(), "{kind:?}: {signals:?}");
            }
            Ok("done".to_owned())
        })
        .unwrap();
    assert!(matches!(out, WorkOutcome::Completed { .. }));
}

fn priority_changes_and_sync_requests_reach_the_work_as_signals(s: Setup) {
    assign(&s, "polecat-alpha", "gt-abc12");
    let w = worker(&s, "polecat-alpha");
    let _ = w
        .run_once(|work| {
            nudge(
                &s,
                "mayor",
                "polecat-alpha",
                NudgeType::PriorityChange,
                false,
            );
            work.checkpoint()?;
            nudge(&s, "peer", "polecat-alpha", NudgeType::SyncRequest, true);
            work.checkpoint()?;
            work.checkpoint()?; // nothing new
            let signals = work.take_signals();
            assert!(matches!(
                &signals[..],
                [
                    ReadOutcome::Value(p),
                    ReadOutcome::Value(q)
                ]
                    if p.kind == NudgeType::PriorityChange && p.from == "mayor"
                        && q.kind == NudgeType::SyncRequest && q.from == "peer"
            ));
            assert!(work.take_signals().is_empty());
            Ok(String::new())
        })
        .unwrap();
    // The sync request required an answer: the peer has it.
    let answers = s
        .nudges
        .responses_since(&agent("peer"), chipset_store::Timestamp::EPOCH)
        .unwrap();
    assert_eq!(answers.items.len(), 1);
}

fn work_taken_away_cannot_be_completed_and_nothing_is_reported(s: Setup) {
    let a = assign(&s, "polecat-alpha", "gt-abc12");
    let w = worker(&s, "polecat-alpha");
    let err = w
        .run_once(|_work| {
            // The dispatcher takes the work away while it runs.
            s.hooks.reassign(&a).unwrap();
            Ok("finished anyway".to_owned())
        })
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Stale, "{err}");
    assert!(matches!(err, chipset_loop::Error::Stale { .. }));
    assert!(s.inbox(&agent("mayor")).is_empty());
    assert!(s.sent(&Topic::CompletionReport.to_string()).is_empty());
    assert_eq!(
        HookStatus::of(&s.hooks.read(&agent("polecat-alpha")).unwrap()),
        Some(HookStatus::Empty)
    );
}

fn a_checkpoint_notices_the_work_was_taken_away(s: Setup) {
    let a = assign(&s, "polecat-alpha", "gt-abc12");
    let w = worker(&s, "polecat-alpha");
    let err = w
        .run_once(|work| {
            s.hooks.reassign(&a).unwrap();
            s.advance(60);
            let stop = work.checkpoint().unwrap_err();
            assert!(matches!(stop, Stop::TakenAway));
            Err(stop)
        })
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Stale);
}

fn a_failed_work_leaves_the_hook_active_and_is_resumed(s: Setup) {
    assign(&s, "polecat-alpha", "gt-abc12");
    let w = worker(&s, "polecat-alpha");
    let out = w
        .run_once(|_| Err(Stop::Failed("compiler crashed".to_owned())))
        .unwrap();
    assert!(matches!(out, WorkOutcome::Failed { ref reason, .. } if reason == "compiler crashed"));
    let out = w
        .run_once(|work| {
            assert!(work.resumed());
            Ok("second try".to_owned())
        })
        .unwrap();
    assert!(matches!(out, WorkOutcome::Completed { .. }));
}

/// Regression: after an abort left the hook active, `run_until` picked the
/// same work up again at once and re-ran it.
fn run_until_does_not_resume_aborted_work_while_the_hook_holds_it(s: Setup) {
    assign(&s, "polecat-alpha", "gt-abc12");
    let w = quick_worker(&s, "polecat-alpha");
    let mut runs = 0;
    let mut outcomes = Vec::new();
    w.run_until(
        |work| {
            runs += 1;
            // The abort arrives while the work runs.
            nudge(&s, "mayor", "polecat-alpha", NudgeType::Abort, false);
            s.advance(1);
            work.checkpoint()?;
            Ok("done".to_owned())
        },
        |result| {
            outcomes.push(matches!(result, Ok(WorkOutcome::Aborted { .. })));
            outcomes.len() == 4
        },
    )
    .unwrap();
    assert_eq!(runs, 1, "the aborted work ran again");
    assert_eq!(outcomes, [true, false, false, false]);
    assert_eq!(
        HookStatus::of(&s.hooks.read(&agent("polecat-alpha")).unwrap()),
        Some(HookStatus::Active)
    );
}

/// After an abort, `run_until` idles only while the hook holds the aborted
/// work: new work hooked in its place is picked up and done.
fn run_until_takes_up_new_work_hooked_after_an_abort(s: Setup) {
    let aborted = assign(&s, "polecat-alpha", "gt-1");
    let w = quick_worker(&s, "polecat-alpha");
    let mut ran = Vec::new();
    let mut outcomes = 0;
    w.run_until(
        |work| {
            ran.push(work.assignment().work.bead_id.to_string());
            if ran.len() == 1 {
                nudge(&s, "mayor", "polecat-alpha", NudgeType::Abort, false);
                s.advance(1);
                work.checkpoint()?;
            }
            Ok("done".to_owned())
        },
        |result| {
            outcomes += 1;
            if outcomes == 2 {
                // The dispatcher takes the aborted work back and hooks new work.
                s.hooks.reassign(&aborted).unwrap();
                assign(&s, "polecat-alpha", "gt-2");
            }
            matches!(result, Ok(WorkOutcome::Completed { .. })) || outcomes == 50
        },
    )
    .unwrap();
    assert_eq!(ran, ["gt-1", "gt-2"]);
}

/// Work taken away while it runs is no error of the loop: `run_until` goes
/// back to the hook for the next work.
fn run_until_goes_on_after_work_is_taken_away(s: Setup) {
    let first = assign(&s, "polecat-alpha", "gt-1");
    let w = quick_worker(&s, "polecat-alpha");
    let mut ran = Vec::new();
    let mut stale = 0;
    w.run_until(
        |work| {
            ran.push(work.assignment().work.bead_id.to_string());
            if ran.len() == 1 {
                s.hooks.reassign(&first).unwrap();
                assign(&s, "polecat-alpha", "gt-2");
            }
            Ok("done".to_owned())
        },
        |result| {
            stale += usize::from(matches!(result, Err(e) if e.kind() == ErrorKind::Stale));
            matches!(result, Ok(WorkOutcome::Completed { .. }))
        },
    )
    .unwrap();
    assert_eq!(ran, ["gt-1", "gt-2"]);
    assert_eq!(stale, 1);
}

/// Once the work is done, `run_until` has acknowledged the `work-assigned`
/// wake-up and archived the `work-assignment` mail, and left the agent's
/// other events and mail of the task alone.
fn run_until_tidies_only_the_assignments_wakeup_and_mail(s: Setup) {
    let me = agent("polecat-alpha");
    let d = chipset_loop::Dispatcher::new(
        s.channels(),
        agent("mayor"),
        [me.clone()],
        chipset_loop::DispatcherConfig::default(),
    );
    d.submit(bead("gt-1"), "some work").unwrap();
    d.tick().unwrap();
    let bus = s.bus();
    let _ = bus
        .publish(&me, &chipset_bus::NewEvent::new("mayor", "other-kind"))
        .unwrap();
    let note = s
        .mail
        .send(&chipset_mail::NewMessage::notify(
            agent("mayor"),
            me.clone(),
            chipset_store::TaskId::new("gt-1").unwrap(),
            "fyi",
            "not the assignment",
        ))
        .unwrap();
    let kinds = |bus: &Bus| -> Vec<String> {
        let pending = bus.pending(&me).unwrap();
        pending.events.iter().map(|e| e.kind.to_owned()).collect()
    };
    assert!(kinds(&bus).contains(&chipset_loop::Topic::WorkAssigned.to_string()));
    assert!(
        s.inbox(&me)
            .iter()
            .any(|m| m.subject == chipset_loop::Topic::WorkAssignment.to_string())
    );
    let mut context = Vec::new();
    let mut said_stop = false;
    quick_worker(&s, "polecat-alpha")
        .run_until(
            |work| {
                context = work.context().unwrap();
                Ok("done".to_owned())
            },
            |result| {
                assert!(!said_stop, "run_until went on after it was told to stop");
                said_stop = matches!(result, Ok(WorkOutcome::Completed { .. }));
                said_stop
            },
        )
        .unwrap();
    let subjects: Vec<_> = context.iter().map(|m| m.subject.to_owned()).collect();
    assert_eq!(
        subjects,
        [
            chipset_loop::Topic::WorkAssignment.to_string(),
            "fyi".to_owned()
        ],
        "the work's mail, in send order"
    );
    assert_eq!(kinds(&bus), ["other-kind"]);
    let inbox: Vec<_> = s.inbox(&me).into_iter().map(|m| m.id).collect();
    assert_eq!(inbox, [note.id]);
}

/// A non-stale error ends `run_until` after `until` has seen it.
fn run_until_ends_on_an_error_that_is_not_stale(s: Setup) {
    s.put_hook_bytes(&agent("polecat-alpha"), b"{not json");
    let mut seen = 0;
    let err = quick_worker(&s, "polecat-alpha")
        .run_until(
            |_| Ok("done".to_owned()),
            |_| {
                seen += 1;
                seen == 50
            },
        )
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    assert_eq!(seen, 1);
}

/// A completion the hook refuses for another reason than staleness (here a
/// hook file gone corrupt under the work) is that error, not "taken away".
fn a_completion_refused_for_a_corrupt_hook_is_not_stale(s: Setup) {
    assign(&s, "polecat-alpha", "gt-1");
    let err = worker(&s, "polecat-alpha")
        .run_once(|_| {
            s.put_hook_bytes(&agent("polecat-alpha"), b"{not json");
            Ok("done".to_owned())
        })
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    assert!(s.sent(&Topic::CompletionReport.to_string()).is_empty());
}

/// A corrupt `latest.json` met at a checkpoint reaches the work as an
/// unreadable signal (it may have held an abort).
#[test]
fn a_corrupt_nudge_reaches_the_work_as_an_unreadable_signal() {
    let s = setup();
    assign(&s, "polecat-alpha", "gt-abc12");
    let _ = worker(&s, "polecat-alpha")
        .run_once(|work| {
            nudge(&s, "mayor", "polecat-alpha", NudgeType::SyncRequest, false);
            s.state()
                .write_bytes(&s.nudges.agent_dir(&agent("polecat-alpha")).join_static("latest.json"), b"{")
                .unwrap();
            work.checkpoint()?;
            let signals = work.take_signals();
            assert!(
                matches!(&signals[..], [ReadOutcome::Corrupt(c)]
                    if c.path == s.nudges.agent_dir(&agent("polecat-alpha")).join_static("latest.json").as_path()),
                "{signals:?}"
            );
            Ok(String::new())
        })
        .unwrap();
}

/// A heartbeat touches the hook now, whatever the touch pace.
fn a_heartbeat_touches_the_hook_now(s: Setup) {
    assign(&s, "polecat-alpha", "gt-1");
    let _ = worker(&s, "polecat-alpha")
        .run_once(|work| {
            s.advance(3);
            work.heartbeat()?;
            let hook = s.hooks.read(&agent("polecat-alpha")).unwrap();
            assert_eq!(
                hook.value().unwrap().last_activity,
                s.hooks.state().now(),
                "touched at once, though the pace is 10 s"
            );
            Ok(String::new())
        })
        .unwrap();
}

/// `w1`'s worker on a state root at `root` through `io`, at `T0`.
fn on(root: &std::path::Path, io: chipset_store::SharedIo) -> Worker {
    let at = chipset_store::Timestamp::from_unix_ms(chipset_testkit::T0);
    let options = chipset_store::StateOptions {
        io,
        clock: std::sync::Arc::new(chipset_store::ManualClock::new(at)),
        ..chipset_store::StateOptions::default()
    };
    let state = chipset_store::StateDir::open_with(root, options).unwrap();
    Worker::new(state, agent("w1"), agent("mayor"), WorkerConfig::default())
}

/// `b-1` hooked for `w1` under `root`.
fn hook_b1(root: &std::path::Path) {
    let hooks = chipset_hook::Hooks::new(chipset_store::StateDir::open(root).unwrap());
    hooks
        .assign(&agent("w1"), bead("b-1"), "work", Some(&agent("mayor")))
        .unwrap();
}

/// Whether `w1`'s hook is completed, and the summaries of the reports
/// and the count of wake-ups the dispatcher got.
fn reported(root: &std::path::Path) -> (bool, Vec<String>, usize) {
    let state = chipset_store::StateDir::open(root).unwrap();
    let hook = chipset_hook::Hooks::new(state.clone()).read(&agent("w1"));
    let completed = HookStatus::of(&hook.unwrap()) == Some(HookStatus::Completed);
    let mail = chipset_mail::Mail::new(state.clone());
    let inbox = mail.inbox(&agent("mayor")).unwrap();
    let summaries = inbox
        .iter()
        .map(|m| body_json(&m.body)["summary"].as_str().unwrap().to_owned());
    let wakes = Bus::new(state)
        .pending(&agent("mayor"))
        .unwrap()
        .events
        .len();
    (completed, summaries.collect(), wakes)
}

/// After a first run cut anywhere (a fault, or a power cut at `root`'s
/// state), one more run reports the work once: with the first run's
/// summary when its completion stuck (then its failure, if any, was
/// partly done), else with the second's.
fn one_more_run_reports_once(
    root: &std::path::Path,
    first: Option<chipset_loop::Error>,
    what: &str,
) {
    let (completed, ..) = reported(root);
    if let Some(e) = first.filter(|_| completed) {
        assert!(e.is_outcome_unknown(), "{what}: `{e}` after the completion");
    }
    let w = on(root, std::sync::Arc::new(chipset_store::RealIo));
    let _ = w
        .run_once(|_| Ok("done again".to_owned()))
        .unwrap_or_else(|e| panic!("{what}: retry: {e}"));
    let want = if completed { "done" } else { "done again" };
    assert_eq!(reported(root), (true, vec![want.to_owned()], 1), "{what}");
}

/// A fault at any I/O call of a run that completes: the work's summary is
/// never lost, and the report goes out once.
#[test]
fn a_completion_cut_by_a_fault_anywhere_reports_once_losing_nothing() {
    use chipset_testkit::{EIO, Fault, FaultIo};
    let probe = tempfile::tempdir().unwrap();
    hook_b1(probe.path());
    let fault = FaultIo::passthrough();
    let w = on(probe.path(), fault.clone());
    fault.set(Fault::nth(0, EIO));
    let _ = w.run_once(|_| Ok("done".to_owned())).unwrap();
    for n in 1..=fault.counted() {
        let tmp = tempfile::tempdir().unwrap();
        hook_b1(tmp.path());
        let fault = FaultIo::passthrough();
        let w = on(tmp.path(), fault.clone());
        fault.set(Fault::nth(n, EIO));
        let first = w.run_once(|_| Ok("done".to_owned())).err();
        fault.disarm();
        one_more_run_reports_once(tmp.path(), first, &format!("call {n}"));
    }
}

/// A power cut at any point of a run that completes: the same.
#[test]
fn a_completion_cut_by_a_power_cut_anywhere_reports_once_losing_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("state");
    hook_b1(&root);
    let rec = chipset_testkit::RecordIo::start(&root).unwrap();
    let _ = on(&root, rec.clone())
        .run_once(|_| Ok("done".to_owned()))
        .unwrap();
    for (i, cut) in rec.crash_states().iter().enumerate() {
        let dir = tmp.path().join(format!("cut{i}"));
        cut.materialize(&dir).unwrap();
        one_more_run_reports_once(&dir, None, &format!("cut {i}"));
    }
}
