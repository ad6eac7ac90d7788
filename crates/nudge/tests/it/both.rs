//! Signal behaviours checked on both backends from one body (issue 30):
//! the directory, and PostgreSQL when `CHIPSET_TEST_PG` names a server.

use std::thread;
use std::time::{Duration, Instant};

use chipset_backend::Wake;
use chipset_nudge::{Delivery, NewNudge, NudgeType, Received};
use chipset_store::{DoctorMode, ReadOutcome};
use chipset_testkit::TempState;

use crate::place::{Place, key};
use crate::support::agent;

chipset_backend::both!(
    crate::place::Place;
    a_send_moves_a_corrupt_latest_aside_and_keeps_its_bytes,
    a_corrupt_processed_record_means_unsure_and_marking_moves_it_aside,
    every_handle_lists_the_same_agents_and_nudges,
    doctor_reports_bad_values_and_fix_moves_them_aside,
    a_wait_wakes_when_a_nudge_arrives_from_another_handle,
);

fn a_send_moves_a_corrupt_latest_aside_and_keeps_its_bytes(place: &Place) {
    let t = TempState::new();
    let (n, b) = (place.open(&t.state), place.backend(&t.state));
    let p = agent("polecat-alpha");
    let _ = b
        .put(&key("nudge/polecat-alpha/latest.json"), b"garbage")
        .unwrap();
    assert!(matches!(n.receive(&p).unwrap(), ReadOutcome::Corrupt(_)));
    let draft = NewNudge::new(agent("mayor"), NudgeType::HealthCheck, "hi");
    let d = n.send(&p, &draft).unwrap();
    let Delivery::RepairedCorrupt { quarantined, .. } = d else {
        panic!("{d:?}")
    };
    let kept = if place.is_pg() {
        b.read(&key(quarantined.to_str().unwrap()))
            .unwrap()
            .unwrap()
            .value
    } else {
        std::fs::read(&quarantined).unwrap()
    };
    assert_eq!(kept, b"garbage");
    assert!(matches!(
        n.receive(&p).unwrap(),
        ReadOutcome::Value(Received::New(_))
    ));
}

fn a_corrupt_processed_record_means_unsure_and_marking_moves_it_aside(place: &Place) {
    let t = TempState::new();
    let (n, b) = (place.open(&t.state), place.backend(&t.state));
    let p = agent("polecat-alpha");
    let draft = NewNudge::new(agent("mayor"), NudgeType::HealthCheck, "hi");
    let _ = n.send(&p, &draft).unwrap();
    let _ = b
        .put(&key("nudge/polecat-alpha/processed.json"), b"{")
        .unwrap();
    let got = n.receive(&p).unwrap();
    let ReadOutcome::Value(Received::Unsure { nudge, .. }) = got else {
        panic!("{got:?}")
    };
    n.mark_processed(&p, &nudge).unwrap();
    assert!(matches!(
        n.receive(&p).unwrap(),
        ReadOutcome::Value(Received::Seen(_))
    ));
}

fn every_handle_lists_the_same_agents_and_nudges(place: &Place) {
    let t = TempState::new();
    let (n, b) = (place.open(&t.state), place.backend(&t.state));
    assert!(n.agents().unwrap().is_empty());
    let (a, c, d) = (agent("alpha"), agent("charlie"), agent("delta"));
    let hi = |kind| NewNudge::new(agent("mayor"), kind, "hi");
    let _ = n.send(&a, &hi(NudgeType::HealthCheck)).unwrap();
    assert!(n.read_and_mark(&a).unwrap().value().is_some());
    let _ = n.send(&agent("bravo"), &hi(NudgeType::Abort)).unwrap();
    let _ = b
        .put(&key("nudge/charlie/latest.json"), b"garbage")
        .unwrap();
    let _ = n.send(&d, &hi(NudgeType::SyncRequest)).unwrap();
    // A folder of another agent's name only through its responses.
    let _ = b
        .put(&key("nudge/echo/responses/alpha.json"), b"{}")
        .unwrap();
    let mut want = vec![a, agent("bravo"), c, d, agent("echo")];
    want.sort();
    // Another handle sees the same agents and nudges: two new (one an
    // abort), one unreadable.
    let other = place.open(&t.state);
    assert_eq!(other.agents().unwrap(), want);
    let read: Vec<_> = want.iter().map(|a| other.receive(a).unwrap()).collect();
    let new: Vec<&NudgeType> = read
        .iter()
        .filter_map(|r| match r {
            ReadOutcome::Value(Received::New(n)) => Some(&n.kind),
            _ => None,
        })
        .collect();
    assert_eq!(
        new,
        [&NudgeType::Abort, &NudgeType::SyncRequest],
        "{read:?}"
    );
    let corrupt = read.iter().filter(|r| matches!(r, ReadOutcome::Corrupt(_)));
    assert_eq!(corrupt.count(), 1, "{read:?}");
}

fn doctor_reports_bad_values_and_fix_moves_them_aside(place: &Place) {
    let t = TempState::new();
    let (n, b) = (place.open(&t.state), place.backend(&t.state));
    let a = agent("alpha");
    let draft = NewNudge::new(agent("mayor"), NudgeType::HealthCheck, "hi");
    let _ = n.send(&a, &draft).unwrap();
    let _ = b
        .put(&key("nudge/charlie/latest.json"), b"garbage")
        .unwrap();
    let _ = b
        .put(&key("nudge/alpha/processed.json"), b"[1, 2]")
        .unwrap();
    let _ = b
        .put(&key("nudge/alpha/responses/bravo.json"), b"{\"from\": ")
        .unwrap();
    let _ = b
        .put(&key("nudge/alpha/responses/notes.txt"), b"mine")
        .unwrap();
    let codes = |mode| {
        let report = n.doctor(mode).unwrap();
        let mut codes: Vec<(&str, bool)> = report
            .findings
            .iter()
            .map(|f| (f.code, f.actions.is_empty()))
            .collect();
        codes.sort_unstable();
        (report.scanned, codes)
    };
    let (scanned, found) = codes(DoctorMode::Check);
    // Two files per agent and one response.
    assert_eq!(scanned, 5);
    assert_eq!(
        found,
        [
            ("nudge-corrupt", true),
            ("nudge-corrupt", true),
            ("nudge-corrupt", true),
            ("nudge-stray", true),
        ]
    );
    // A check changed nothing.
    assert!(matches!(
        n.read_latest(&agent("charlie")).unwrap(),
        ReadOutcome::Corrupt(_)
    ));
    let (_, fixed) = codes(DoctorMode::Fix);
    assert_eq!(
        fixed,
        [
            ("nudge-corrupt", false),
            ("nudge-corrupt", false),
            ("nudge-corrupt", false),
            ("nudge-stray", true),
        ]
    );
    // Moved aside, never deleted; the nudge to alpha is still there.
    assert!(matches!(
        n.read_latest(&agent("charlie")).unwrap(),
        ReadOutcome::Missing
    ));
    assert!(matches!(
        n.receive(&a).unwrap(),
        ReadOutcome::Value(Received::New(_))
    ));
    let (_, after) = codes(DoctorMode::Check);
    assert_eq!(after, [("nudge-stray", true)]);
}

fn a_wait_wakes_when_a_nudge_arrives_from_another_handle(place: &Place) {
    let t = TempState::new();
    let n = place.open(&t.state);
    let p = agent("polecat-alpha");
    let mut wait = n.watch(&p, Duration::from_secs(30)).unwrap();
    let other = place.open(&t.state);
    let to = p.clone();
    let sender = thread::spawn(move || {
        thread::sleep(Duration::from_millis(100));
        let draft = NewNudge::new(agent("mayor"), NudgeType::Abort, "stop");
        let _ = other.send(&to, &draft).unwrap();
    });
    let start = Instant::now();
    let mut woke = None;
    while start.elapsed() < Duration::from_secs(10) {
        if wait.wait(Duration::from_secs(10)).unwrap() == Wake::Changed
            && matches!(n.receive(&p).unwrap(), ReadOutcome::Value(Received::New(_)))
        {
            woke = Some(start.elapsed());
            break;
        }
    }
    sender.join().unwrap();
    let woke = woke.expect("the send from another handle wakes the wait");
    assert!(woke < Duration::from_secs(5), "woke after {woke:?}");
}
