//! Signals in one process: precedence, restart, corruption, responses.

use std::time::Duration;

use chipset_nudge::{Delivery, NewNudge, NudgeType, Nudges, Received};
use chipset_store::{Action, Clock, Defect, DoctorMode, ReadOutcome, StateDir};

use crate::support::DeliveryExt;
use crate::support::ReceivedExt;
use crate::support::{NudgePaths, responders};
use crate::support::{agent, manual_state, temps_under};

fn draft(kind: NudgeType, msg: &str) -> NewNudge {
    NewNudge::new(agent("mayor"), kind, msg)
}

/// A type of another name is a name: one line, at most 64 bytes; a message
/// holds at most 64 KiB. A refused nudge writes nothing.
#[test]
fn a_bad_type_or_an_oversized_message_is_refused() {
    let (t, _c) = manual_state();
    let n = Nudges::new(t.state.clone());
    let p = agent("polecat-alpha");
    let max = "m".repeat(64 * 1024);
    for (kind, message) in [
        ("health_check\nhook (1): forged", "hi"),
        ("", "hi"),
        (&*"t".repeat(65), "hi"),
        ("custom", &*format!("{max}m")),
    ] {
        let e = n
            .send(&p, &draft(NudgeType::from(kind), message))
            .unwrap_err();
        assert!(
            matches!(e, chipset_nudge::Error::InvalidField { .. }),
            "{e:?}"
        );
    }
    assert!(matches!(n.receive(&p).unwrap(), ReadOutcome::Missing));
    // The bounds themselves pass, and a message may hold line breaks.
    let _ = n
        .send(&p, &draft(NudgeType::from(&*"t".repeat(64)), &max))
        .unwrap();
    let _ = n
        .send(&p, &draft(NudgeType::from("custom"), "two\nlines"))
        .unwrap();
}

/// Regression: an `abort` could be overwritten by a later `health_check`.
#[test]
fn unprocessed_abort_holds_against_less_urgent() {
    let (t, _c) = manual_state();
    let n = Nudges::new(t.state.clone());
    let p = agent("polecat-alpha");
    let abort = n.send(&p, &draft(NudgeType::Abort, "stop")).unwrap();
    assert!(!matches!(abort, Delivery::Held { .. }), "{abort:?}");
    let abort = abort.sent().unwrap().clone();
    for kind in [
        NudgeType::HealthCheck,
        NudgeType::StallWarning,
        NudgeType::PriorityChange,
        NudgeType::SyncRequest,
        NudgeType::NudgeResponse,
        NudgeType::Unknown("x".into()),
    ] {
        let d = n.send(&p, &draft(kind.clone(), "later")).unwrap();
        let Delivery::Held { pending, unsent } = d else {
            panic!("{kind} replaced a pending abort: {d:?}")
        };
        assert_eq!(pending, abort);
        assert_eq!(unsent.kind, kind, "the unsent nudge is handed back");
    }
    assert_eq!(
        n.read_latest(&p).unwrap(),
        ReadOutcome::Value(abort.clone())
    );
    // Another abort replaces it, and reports the one it replaced.
    let d = n.send(&p, &draft(NudgeType::Abort, "stop again")).unwrap();
    assert!(matches!(&d, Delivery::Replaced { previous, .. } if *previous == abort));
    // Once processed, anything replaces it.
    let latest = d.sent().unwrap().clone();
    n.mark_processed(&p, &latest).unwrap();
    let d = n.send(&p, &draft(NudgeType::HealthCheck, "ok?")).unwrap();
    assert!(matches!(d, Delivery::Delivered { .. }), "{d:?}");
}

#[test]
fn latest_wins_for_other_types_and_reports_the_loss() {
    let (t, _c) = manual_state();
    let n = Nudges::new(t.state.clone());
    let p = agent("polecat-alpha");
    let first = n.send(&p, &draft(NudgeType::PriorityChange, "p1")).unwrap();
    assert!(matches!(first, Delivery::Delivered { .. }));
    let second = n.send(&p, &draft(NudgeType::HealthCheck, "hc")).unwrap();
    let Delivery::Replaced { previous, .. } = second else {
        panic!("{second:?}")
    };
    assert_eq!(previous.message, "p1");
}

/// Regression: a second nudge within the same timestamp was skipped as "already seen".
#[test]
fn same_timestamp_nudges_are_told_apart() {
    let (t, _c) = manual_state();
    let n = Nudges::new(t.state.clone());
    let p = agent("polecat-alpha");
    let _ = n.send(&p, &draft(NudgeType::HealthCheck, "same")).unwrap();
    let ReadOutcome::Value(Received::New(a)) = n.receive(&p).unwrap() else {
        panic!()
    };
    n.mark_processed(&p, &a).unwrap();
    // The clock has not moved: same timestamp, same content.
    let _ = n.send(&p, &draft(NudgeType::HealthCheck, "same")).unwrap();
    let ReadOutcome::Value(Received::New(b)) = n.receive(&p).unwrap() else {
        panic!("second nudge in the same millisecond was skipped")
    };
    assert_eq!(a.timestamp, b.timestamp);
    assert_ne!(a.id, b.id);
}

#[test]
fn restart_neither_reprocesses_nor_misses() {
    let (t, clock) = manual_state();
    let p = agent("polecat-alpha");
    {
        let n = Nudges::new(t.state.clone());
        let _ = n.send(&p, &draft(NudgeType::SyncRequest, "sync")).unwrap();
        let ReadOutcome::Value(Received::New(x)) = n.receive(&p).unwrap() else {
            panic!()
        };
        n.mark_processed(&p, &x).unwrap();
    }
    // A new process: a fresh handle on the same root.
    let state = StateDir::open(t.state.root()).unwrap();
    let n = Nudges::new(state);
    assert!(
        matches!(
            n.receive(&p).unwrap(),
            ReadOutcome::Value(Received::Seen(_))
        ),
        "reprocessed after restart"
    );
    clock.advance(Duration::from_secs(1));
    let _ = n.send(&p, &draft(NudgeType::HealthCheck, "new")).unwrap();
    let r = n.receive(&p).unwrap();
    assert_eq!(r.to_process().map(|x| x.message.as_str()), Some("new"));
    let rec: serde_json::Value = t
        .state
        .read_json(&n.processed_path(&p))
        .unwrap()
        .value()
        .unwrap();
    assert_eq!(rec["count"], 1);
}

/// Regression: a corrupt `latest.json` was read as "no nudge pending".
#[test]
fn corrupt_latest_is_distinct_and_repaired() {
    let (t, _c) = manual_state();
    let n = Nudges::new(t.state.clone());
    let p = agent("polecat-alpha");
    assert_eq!(n.receive(&p).unwrap(), ReadOutcome::Missing);
    let path = n.latest_path(&p);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "{\"from\": \"mayor\", \"type\": \"ab").unwrap();
    assert!(matches!(n.receive(&p).unwrap(), ReadOutcome::Corrupt(_)));
    assert_eq!(n.doctor(DoctorMode::Check).unwrap().findings.len(), 1);
    // A corrupt processed record is found too, once per file.
    t.state.write_bytes(&n.processed_path(&p), b"{").unwrap();
    assert_eq!(n.doctor(DoctorMode::Check).unwrap().findings.len(), 2);
    assert!(t.state.remove_file(&n.processed_path(&p)).unwrap());
    // The doctor reports it, and with Fix moves it aside.
    let report = n.doctor(DoctorMode::Check).unwrap();
    assert!(matches!(report.findings[0].fault, Defect::Corrupt(_)));
    assert!(path.exists());
    let report = n.doctor(DoctorMode::Fix).unwrap();
    let [
        Action::Quarantined {
            to: Some(aside), ..
        },
    ] = &report.findings[0].actions[..]
    else {
        panic!("{report:?}")
    };
    assert!(aside.exists());
    assert_eq!(n.receive(&p).unwrap(), ReadOutcome::Missing);
    assert!(n.doctor(DoctorMode::Check).unwrap().is_clean());
}

#[test]
fn send_over_corrupt_latest_quarantines_it() {
    let (t, _c) = manual_state();
    let n = Nudges::new(t.state.clone());
    let p = agent("polecat-alpha");
    let path = n.latest_path(&p);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "garbage").unwrap();
    let d = n.send(&p, &draft(NudgeType::HealthCheck, "hi")).unwrap();
    let Delivery::RepairedCorrupt { quarantined, .. } = d else {
        panic!("{d:?}")
    };
    assert_eq!(std::fs::read_to_string(quarantined).unwrap(), "garbage");
    assert!(matches!(
        n.receive(&p).unwrap(),
        ReadOutcome::Value(Received::New(_))
    ));
}

#[test]
fn corrupt_processed_record_means_unsure_not_skip() {
    let (t, _c) = manual_state();
    let n = Nudges::new(t.state.clone());
    let p = agent("polecat-alpha");
    let _ = n.send(&p, &draft(NudgeType::Abort, "stop")).unwrap();
    std::fs::write(n.processed_path(&p), "{").unwrap();
    let r = n.receive(&p).unwrap();
    assert!(matches!(r, ReadOutcome::Value(Received::Unsure { .. })));
    // Sending treats it as unprocessed: the abort is held.
    assert!(matches!(
        n.send(&p, &draft(NudgeType::HealthCheck, "x")).unwrap(),
        Delivery::Held { .. }
    ));
    n.mark_processed(&p, r.to_process().unwrap()).unwrap();
    assert!(matches!(
        n.receive(&p).unwrap(),
        ReadOutcome::Value(Received::Seen(_))
    ));
}

/// `read_and_mark` shows a nudge as new once (marking it), then as seen; a
/// corrupt processed record makes it new again with a doubt to tell.
#[test]
fn read_and_mark_shows_a_nudge_new_once() {
    let (t, _c) = manual_state();
    let n = Nudges::new(t.state.clone());
    let p = agent("polecat-alpha");
    assert_eq!(n.read_and_mark(&p).unwrap(), ReadOutcome::Missing);
    let _ = n.send(&p, &draft(NudgeType::HealthCheck, "ping")).unwrap();
    let first = n.read_and_mark(&p).unwrap();
    assert!(
        matches!(&first, ReadOutcome::Value(Received::New(x)) if x.message == "ping"),
        "{first:?}"
    );
    assert!(matches!(
        n.read_and_mark(&p).unwrap(),
        ReadOutcome::Value(Received::Seen(_))
    ));

    std::fs::write(n.processed_path(&p), "{").unwrap();
    let unsure = n.read_and_mark(&p).unwrap();
    assert!(
        matches!(&unsure, ReadOutcome::Value(Received::Unsure { record, .. })
            if record.path.ends_with("processed.json")),
        "{unsure:?}"
    );
    // Marked: the bad record was moved aside and the nudge is seen now.
    assert!(matches!(
        n.receive(&p).unwrap(),
        ReadOutcome::Value(Received::Seen(_))
    ));
}

/// Each of a send's four outcomes, in turn.
#[test]
fn delivery_outcomes_are_pinned() {
    let (t, _c) = manual_state();
    let n = Nudges::new(t.state.clone());
    let p = agent("polecat-alpha");
    assert!(matches!(
        n.send(&p, &draft(NudgeType::HealthCheck, "a")).unwrap(),
        Delivery::Delivered { .. }
    ));
    assert!(matches!(
        n.send(&p, &draft(NudgeType::Abort, "b")).unwrap(),
        Delivery::Replaced { .. }
    ));
    assert!(matches!(
        n.send(&p, &draft(NudgeType::HealthCheck, "c")).unwrap(),
        Delivery::Held { .. }
    ));
    std::fs::write(n.latest_path(&p), "garbage").unwrap();
    assert!(matches!(
        n.send(&p, &draft(NudgeType::HealthCheck, "d")).unwrap(),
        Delivery::RepairedCorrupt { .. }
    ));
}

#[test]
fn responses_on_a_manual_clock() {
    let (t, clock) = manual_state();
    let w = agent("witness");
    let (fast, slow) = (agent("fast"), agent("slow"));
    let n = Nudges::new(t.state.clone());
    let t0 = clock.now();
    for a in [&fast, &slow] {
        let _ = n
            .send(
                a,
                &NewNudge::new(w.clone(), NudgeType::HealthCheck, "ok?").requiring_response(),
            )
            .unwrap();
    }
    clock.advance(Duration::from_secs(5));
    let incoming = n.receive(&fast).unwrap().to_process().unwrap().clone();
    let r = n.respond(&fast, &incoming, "yes").unwrap();
    assert_eq!(r.nudge().in_reply_to, incoming.id);
    let answer = n.response_from(&w, &fast, t0).unwrap().unwrap();
    assert_eq!(
        (answer.message.as_str(), answer.timestamp),
        ("yes", r.nudge().timestamp)
    );
    assert_eq!(n.response_from(&w, &slow, t0).unwrap(), None);
    clock.advance(Duration::from_secs(55));
    assert_eq!(n.response_from(&w, &slow, t0).unwrap(), None);
    // An answer older than the nudge does not count for it.
    let later = clock.now();
    assert_eq!(n.response_from(&w, &fast, later).unwrap(), None);
    let since = n.responses_since(&w, t0).unwrap();
    assert_eq!(responders(&since), ["fast"]);
    assert!(n.responses_since(&w, later).unwrap().items.is_empty());
}

/// A responder's record holds its latest answer: a later answer replaces
/// an earlier one, and an answer stamped before the recorded one (another
/// process of the same responder, on a clock behind) leaves it in place.
#[test]
fn the_response_record_keeps_the_newest_answer() {
    let (t, clock) = manual_state();
    let n = Nudges::new(t.state.clone());
    // `draft` sends as the mayor.
    let (w, p) = (agent("mayor"), agent("polecat"));
    let t0 = clock.now();
    let latest = |n: &Nudges| {
        let answered = n.responses_since(&w, t0).unwrap().items;
        assert_eq!(answered.len(), 1, "{answered:?}");
        answered[0].message.clone()
    };
    let first = ask(&n, &p, "ok?");
    let _ = n.respond(&p, &first, "first answer").unwrap();
    clock.advance(Duration::from_secs(60));
    let second = ask(&n, &p, "still ok?");
    let _ = n.respond(&p, &second, "second answer").unwrap();
    assert_eq!(latest(&n), "second answer");
    clock.set(t0 + Duration::from_secs(30));
    let _ = n.respond(&p, &first, "a late answer from behind").unwrap();
    assert_eq!(latest(&n), "second answer");
    // Two answers stamped the same instant: the later call's stays.
    clock.set(t0 + Duration::from_secs(60));
    let _ = n.respond(&p, &second, "second answer, amended").unwrap();
    assert_eq!(latest(&n), "second answer, amended");
}

/// A seed responder writes only `latest.json`; the sender still sees it.
#[test]
fn seed_written_response_is_counted() {
    let (t, _c) = manual_state();
    let n = Nudges::new(t.state.clone());
    let w = agent("witness");
    let path = n.latest_path(&w);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        &path,
        r#"{"from":"old-agent","type":"nudge_response","message":"Acknowledged.","timestamp":"2026-03-05T10:36:00Z","requires_response":false}"#,
    )
    .unwrap();
    let t0 = "2026-03-05T10:35:00Z"
        .parse::<chipset_store::Timestamp>()
        .unwrap();
    assert_eq!(
        responders(&n.responses_since(&w, t0).unwrap()),
        ["old-agent"]
    );
    assert!(
        n.response_from(&w, &agent("old-agent"), t0)
            .unwrap()
            .is_some()
    );
}

#[test]
fn respond_refuses_unsafe_sender() {
    let (t, _c) = manual_state();
    let n = Nudges::new(t.state.clone());
    let mut incoming = draft_nudge();
    incoming.from = "../etc".into();
    let err = n.respond(&agent("a"), &incoming, "x").unwrap_err();
    assert!(
        matches!(err, chipset_nudge::Error::InvalidSender { .. }),
        "{err}"
    );
}

fn draft_nudge() -> chipset_nudge::Nudge {
    chipset_nudge::Nudge {
        from: "witness".into(),
        kind: NudgeType::HealthCheck,
        message: "m".into(),
        timestamp: chipset_store::Timestamp::from_unix_ms(0),
        requires_response: true,
        id: None,
        in_reply_to: None,
        extra: serde_json::Map::new(),
    }
}

#[test]
fn sends_and_marks_leave_no_temp_files() {
    let (t, _c) = manual_state();
    let n = Nudges::new(t.state.clone());
    let _ = n
        .send(&agent("a"), &draft(NudgeType::Abort, "stop"))
        .unwrap();
    let _ = n
        .send(&agent("b"), &draft(NudgeType::HealthCheck, "hc"))
        .unwrap();
    let b = n
        .receive(&agent("b"))
        .unwrap()
        .to_process()
        .unwrap()
        .clone();
    n.mark_processed(&agent("b"), &b).unwrap();
    assert!(matches!(
        n.receive(&agent("a")).unwrap(),
        ReadOutcome::Value(Received::New(ref x)) if x.kind == NudgeType::Abort
    ));
    assert!(matches!(
        n.receive(&agent("b")).unwrap(),
        ReadOutcome::Value(Received::Seen(_))
    ));
    assert!(temps_under(t.state.root()).is_empty());
}

/// Regression: a stray file under `nudge/` was listed as an agent, and
/// every scan over the agents failed on it.
#[test]
fn stray_files_are_not_agents() {
    let (t, _c) = manual_state();
    let n = Nudges::new(t.state.clone());
    let _ = n
        .send(
            &agent("polecat-alpha"),
            &draft(NudgeType::HealthCheck, "working?"),
        )
        .unwrap();
    std::fs::write(t.state.root().join("nudge").join("stray.txt"), "x").unwrap();
    assert_eq!(n.agents().unwrap(), [agent("polecat-alpha")]);
    assert_eq!(n.doctor(DoctorMode::Check).unwrap().findings.len(), 1);
}

/// Regression: a symlink in place of an agent's nudge directory made the
/// doctor fail as a whole, so no other agent's files were checked.
#[test]
fn the_doctor_reports_a_symlinked_agent_directory_and_goes_on() {
    let (t, _c) = manual_state();
    let n = Nudges::new(t.state.clone());
    let _ = n
        .send(
            &agent("polecat-alpha"),
            &draft(NudgeType::HealthCheck, "working?"),
        )
        .unwrap();
    std::fs::write(n.latest_path(&agent("polecat-alpha")), "{").unwrap();
    let elsewhere = t.scratch("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, t.state.root().join("nudge").join("linked")).unwrap();

    let report = n.doctor(DoctorMode::Check).unwrap();
    assert!(
        report
            .findings
            .iter()
            .any(|f| f.fault == Defect::Stray
                && f.path.as_ref().is_some_and(|p| p.ends_with("linked"))),
        "{report:?}"
    );
    assert!(
        report
            .findings
            .iter()
            .any(|f| matches!(f.fault, Defect::Corrupt(_))
                && f.path.as_ref()
                    == Some(&n.latest_path(&agent("polecat-alpha")).into_path_buf())),
        "{report:?}"
    );
    assert!(
        std::fs::read_dir(&elsewhere).unwrap().next().is_none(),
        "nothing written through the link"
    );
}

/// What `chipset doctor` prints for signals: each file it reads counts as
/// scanned (present or not), and each finding carries its stable code, its
/// class, its path and its words.
#[test]
fn the_doctor_codes_words_and_counts_each_signal_file() {
    let (t, _c) = manual_state();
    let n = Nudges::new(t.state.clone());
    let alpha = agent("polecat-alpha");
    let bravo = agent("polecat-bravo");
    let _ = n
        .send(&alpha, &draft(NudgeType::HealthCheck, "working?"))
        .unwrap();
    let _ = n
        .send(&bravo, &draft(NudgeType::HealthCheck, "working?"))
        .unwrap();
    let corrupt = n.latest_path(&bravo);
    std::fs::write(&corrupt, "{").unwrap();
    // A name that is no agent id: a stray, left alone.
    let stray = t.state.root().join("nudge").join("Not An Agent");
    std::fs::write(&stray, "x").unwrap();

    let report = n.doctor(DoctorMode::Check).unwrap();
    // Two agents, latest.json and processed.json each (processed is missing).
    assert_eq!(report.scanned, 4, "{report:?}");
    assert!(!report.is_clean());
    let [first, second] = &report.findings[..] else {
        panic!("{report:?}")
    };
    assert_eq!(first.code, "nudge-stray");
    assert_eq!(first.fault, Defect::Stray);
    assert_eq!(first.path.as_ref(), Some(&stray));
    assert_eq!(
        first.message,
        format!("`{}`: not written by chipset (left alone)", stray.display())
    );
    assert_eq!(second.code, "nudge-corrupt");
    assert!(matches!(second.fault, Defect::Corrupt(_)), "{second:?}");
    assert_eq!(second.path.as_ref(), Some(&corrupt.as_path().to_path_buf()));
    let Defect::Corrupt(reason) = &second.fault else {
        unreachable!()
    };
    assert_eq!(
        second.message,
        format!("`{}`: corrupt ({reason})", corrupt.display())
    );
    assert!(second.actions.is_empty(), "Check changes nothing");
}

/// A retry under a chosen id is recognised in the processed record too: once
/// the recipient processed the nudge and a later one replaced it, the retry
/// is the first delivery again and writes nothing, while a new id with the
/// same content is delivered; other content under the id, even only another
/// message, is refused.
#[test]
fn a_chosen_id_retry_is_found_in_the_processed_record() {
    let (t, clock) = manual_state();
    let n = Nudges::new(t.state.clone());
    let p = agent("polecat");
    let check = || draft(NudgeType::HealthCheck, "ok?").requiring_response();
    let id = |s: &str| chipset_nudge::NudgeId::new(s).unwrap();
    let chosen = check().with_id(id("n-1"));
    let first = n.send(&p, &chosen).unwrap();
    let first = first.sent().unwrap().clone();
    n.mark_processed(&p, &first).unwrap();
    clock.advance(Duration::from_secs(5));
    let later = n.send(&p, &draft(NudgeType::SyncRequest, "later")).unwrap();
    let later = later.sent().unwrap().clone();
    let retry = n.send(&p, &chosen).unwrap();
    assert_eq!(
        retry,
        Delivery::Delivered {
            sent: first.clone()
        }
    );
    assert_eq!(n.read_latest(&p).unwrap(), ReadOutcome::Value(later));
    let other_message = draft(NudgeType::HealthCheck, "still ok?").requiring_response();
    assert!(matches!(
        n.send(&p, &other_message.with_id(id("n-1"))),
        Err(chipset_nudge::Error::IdTaken { .. })
    ));
    let fresh = n.send(&p, &check().with_id(id("n-2"))).unwrap();
    assert_eq!(fresh.sent().unwrap().id, Some(id("n-2")), "{fresh:?}");
    match n.read_latest(&p).unwrap() {
        ReadOutcome::Value(latest) => assert_eq!(latest.id, Some(id("n-2"))),
        other => panic!("{other:?}"),
    }
}

/// Marking the same nudge processed twice counts it once.
#[test]
fn marking_a_nudge_processed_again_counts_it_once() {
    let (t, _c) = manual_state();
    let n = Nudges::new(t.state.clone());
    let p = agent("polecat");
    let sent = n.send(&p, &draft(NudgeType::HealthCheck, "ok?")).unwrap();
    let sent = sent.sent().unwrap().clone();
    n.mark_processed(&p, &sent).unwrap();
    n.mark_processed(&p, &sent).unwrap();
    let record: serde_json::Value = t
        .state
        .read_json(&n.processed_path(&p))
        .unwrap()
        .value()
        .unwrap();
    assert_eq!(record["count"], 1);
    let last: chipset_nudge::Nudge = serde_json::from_value(record["last"].clone()).unwrap();
    assert_eq!(last, sent);
}

/// Sends `p` a health check from the mayor, saying `msg`, that requires an
/// answer, and returns it as sent.
fn ask(n: &Nudges, p: &chipset_store::AgentId, msg: &str) -> chipset_nudge::Nudge {
    let d = n
        .send(p, &draft(NudgeType::HealthCheck, msg).requiring_response())
        .unwrap();
    d.sent().unwrap().clone()
}

/// A corrupt response record is moved aside before the answer is written,
/// so what it held can still be looked at.
#[test]
fn a_corrupt_response_record_is_moved_aside_by_the_next_answer() {
    let (t, _c) = manual_state();
    let n = Nudges::new(t.state.clone());
    let (w, p) = (agent("mayor"), agent("polecat"));
    let asked = ask(&n, &p, "ok?");
    let record = n.response_path(&w, &p);
    t.state.write_bytes(&record, b"{\"from\": ").unwrap();
    let responses = n.agent_dir(&w).join("responses").unwrap();
    assert!(!t.state.has_quarantine(&responses).unwrap());
    let r = n.respond(&p, &asked, "yes").unwrap();
    assert!(t.state.has_quarantine(&responses).unwrap());
    assert_eq!(
        t.state.read_json::<chipset_nudge::Nudge>(&record).unwrap(),
        ReadOutcome::Value(r.nudge().clone())
    );
}

/// A responder's newest answer is the one seen, wherever it is: a seed
/// program's answer in `latest.json` newer than the responder's record
/// wins, and an answer stamped exactly at `since` counts.
#[test]
fn the_newest_answer_of_a_responder_wins_and_since_is_inclusive() {
    let (t, clock) = manual_state();
    let n = Nudges::new(t.state.clone());
    let (w, p) = (agent("mayor"), agent("polecat"));
    let t0 = clock.now();
    let asked = ask(&n, &p, "ok?");
    let _ = n.respond(&p, &asked, "in the record").unwrap();
    clock.advance(Duration::from_secs(60));
    let at = clock.now();
    let seed = serde_json::json!({
        "from": "polecat",
        "type": "nudge_response",
        "message": "in latest.json",
        "timestamp": at,
        "requires_response": false,
    });
    t.state.write_json(&n.latest_path(&w), &seed).unwrap();
    for since in [t0, at] {
        let answered = n.responses_since(&w, since).unwrap().items;
        assert_eq!(answered.len(), 1, "{answered:?}");
        assert_eq!(answered[0].message, "in latest.json");
        assert_eq!(answered[0].timestamp, at);
    }
}

/// In an agent's `responses/` folder only `{responder}.json` files are
/// answers: a name without `.json`, or a folder named like an answer, is a
/// stray the doctor reports and leaves alone, next to the answer it checks.
#[test]
fn the_doctor_reports_strays_among_the_responses() {
    let (t, _c) = manual_state();
    let n = Nudges::new(t.state.clone());
    let (w, p) = (agent("mayor"), agent("polecat"));
    let asked = ask(&n, &p, "ok?");
    let _ = n.respond(&p, &asked, "yes").unwrap();
    let responses = n.agent_dir(&w).join("responses").unwrap();
    let notes = responses.join("notes.txt").unwrap();
    t.state.write_bytes(&notes, b"x").unwrap();
    let folder = responses.join("folder.json").unwrap();
    t.state.ensure_dir(&folder).unwrap();
    let report = n.doctor(DoctorMode::Fix).unwrap();
    assert!(
        report.findings.iter().all(|f| f.fault == Defect::Stray),
        "{report:?}"
    );
    let mut strays: Vec<_> = report.findings.iter().map(|f| f.path.clone()).collect();
    strays.sort();
    assert_eq!(
        strays,
        [
            Some(folder.as_path().to_path_buf()),
            Some(notes.as_path().to_path_buf()),
        ],
        "{report:?}"
    );
    assert!(report.findings.iter().all(|f| f.actions.is_empty()));
    assert!(t.state.stat(&notes).unwrap().is_some());
    assert!(t.state.stat(&n.response_path(&w, &p)).unwrap().is_some());
}
