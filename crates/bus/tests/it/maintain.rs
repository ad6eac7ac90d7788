//! Status counts, retention and the doctor.

use std::time::Duration;

use chipset_bus::{
    AckOutcome, Action, Bus, ControlCommand, NewEvent, Priority, Problem, Repair, Resource,
    Retention,
};

use crate::{agent, manual};

fn publish(bus: &Bus, to: &str, p: Priority) -> chipset_bus::Event {
    bus.publish(&agent(to), &NewEvent::new("w", "k").priority(p))
        .unwrap()
        .delivered()
        .unwrap()
        .clone()
}

#[test]
fn counts_and_status_come_from_listings() {
    let (_t, _clock, bus) = manual();
    publish(&bus, "a", Priority::Critical);
    publish(&bus, "a", Priority::Low);
    let e = publish(&bus, "a", Priority::Low);
    publish(&bus, "b", Priority::High);
    assert_eq!(bus.ack_event(&agent("a"), &e).unwrap(), AckOutcome::Acked);
    let _ = bus.start(&agent("b")).unwrap();
    let status = bus.status().unwrap();
    assert_eq!(status.len(), 2);
    assert_eq!(status[0].agent, agent("a"));
    assert_eq!(status[0].counts.pending, [1, 0, 0, 1]);
    assert_eq!(status[0].counts.processed, 1);
    assert_eq!(status[0].counts.pending_at(Priority::Critical), 1);
    assert_eq!(status[1].counts.pending_total(), 1);
    assert!(status[1].presence.is_live());
    assert!(!status[0].presence.is_live());
}

#[test]
fn prune_keeps_the_newest_processed_events_and_never_touches_the_queue() {
    let (_t, clock, bus) = manual();
    let a = agent("a");
    let mut acked = Vec::new();
    for i in 0..6 {
        let e = publish(&bus, "a", Priority::ALL[i % 4]);
        clock.advance(Duration::from_secs(60));
        acked.push(e);
    }
    let waiting = publish(&bus, "a", Priority::Low);
    for e in &acked {
        assert_eq!(bus.ack_event(&a, e).unwrap(), AckOutcome::Acked);
    }
    let pruned = bus.prune(&a, &Retention::keep_all().max_count(4)).unwrap();
    assert_eq!(pruned.events, 2);
    let kept: Vec<_> = bus
        .processed(&a)
        .unwrap()
        .iter()
        .map(|e| e.id().clone())
        .collect();
    let mut newest: Vec<_> = acked[2..].iter().map(|e| e.id().clone()).collect();
    newest.sort_by_key(|id| {
        acked
            .iter()
            .find(|e| e.id() == id)
            .map(|e| (e.priority(), id.clone()))
    });
    assert_eq!(kept, newest);

    // By age: the events published more than 150 s before now go.
    let pruned = bus
        .prune(&a, &Retention::keep_all().max_age(Duration::from_secs(150)))
        .unwrap();
    assert_eq!(pruned.events, 2);
    // By size: one file's worth.
    let one = std::fs::metadata(
        bus.processed_dir(&a)
            .join(bus.processed(&a).unwrap()[0].name()),
    )
    .unwrap()
    .len();
    let pruned = bus
        .prune(&a, &Retention::keep_all().max_bytes(one))
        .unwrap();
    assert_eq!(pruned.events, 1);
    assert_eq!(bus.processed(&a).unwrap().len(), 1);
    assert_eq!(bus.pending(&a).unwrap().events(), [waiting]);
}

#[test]
fn prune_drops_old_dedup_records_so_the_key_works_again() {
    let (_t, clock, bus) = manual();
    let a = agent("a");
    let e = NewEvent::new("w", "k")
        .dedup_key("x")
        .dedup_window(Duration::from_secs(3600));
    let _ = bus.publish(&a, &e).unwrap();
    clock.advance(Duration::from_secs(120));
    let none = bus
        .prune(
            &a,
            &Retention::keep_all().dedup_max_age(Duration::from_secs(600)),
        )
        .unwrap();
    assert_eq!(none.dedup_records, 0);
    let some = bus
        .prune(
            &a,
            &Retention::keep_all().dedup_max_age(Duration::from_secs(60)),
        )
        .unwrap();
    assert_eq!(some.dedup_records, 1);
    assert!(!bus.publish(&a, &e).unwrap().is_duplicate());
}

#[test]
fn doctor_reports_then_fixes_by_quarantine() {
    let (_t, _clock, bus) = manual();
    let a = agent("a");
    let good = publish(&bus, "a", Priority::High);
    let acked = publish(&bus, "a", Priority::Normal);
    assert_eq!(bus.ack_event(&a, &acked).unwrap(), AckOutcome::Acked);
    let queue = bus.queue_dir(&a);
    let dir = queue.parent().unwrap().to_owned();
    // A corrupt event, a foreign file, a crash leftover in both places,
    // a corrupt presence, a torn control log, a stray file under bus/.
    std::fs::write(
        queue.join("2-1000-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab-w-k.json"),
        b"{",
    )
    .unwrap();
    std::fs::write(queue.join("README"), b"hi").unwrap();
    std::fs::copy(
        bus.processed_dir(&a).join(acked.file_name()),
        queue.join(acked.file_name()),
    )
    .unwrap();
    std::fs::write(dir.join("presence.json"), b"[]").unwrap();
    bus.control(&a, &ControlCommand::register(Resource::new("chat", "x")))
        .unwrap();
    let mut log = std::fs::read(dir.join("control.jsonl")).unwrap();
    log.extend_from_slice(b"{\"op\":\"reg");
    std::fs::write(dir.join("control.jsonl"), log).unwrap();
    std::fs::write(bus.state().root().join("bus/stray.txt"), b"?").unwrap();

    let report = bus.doctor(Repair::ReportOnly).unwrap();
    let problems: Vec<_> = report.findings.iter().map(|f| &f.file.problem).collect();
    assert_eq!(report.findings.len(), 6, "{problems:?}");
    assert!(report.findings.iter().all(|f| f.action == Action::Reported));
    assert!(problems.contains(&&Problem::ForeignName));
    assert!(problems.contains(&&Problem::AckedCopyInQueue));
    assert!(
        problems
            .iter()
            .any(|p| matches!(p, Problem::TornLogTail { .. }))
    );
    // Report-only changed nothing.
    assert_eq!(bus.doctor(Repair::ReportOnly).unwrap(), report);

    let fixed = bus.doctor(Repair::Fix).unwrap();
    assert_eq!(fixed.findings.len(), 6);
    assert!(
        fixed
            .findings
            .iter()
            .any(|f| matches!(f.action, Action::Quarantined(_)))
    );
    // Only the stray file under bus/ is left to a human.
    let after = bus.doctor(Repair::ReportOnly).unwrap();
    assert_eq!(after.findings.len(), 1, "{:?}", after.findings);
    assert_eq!(bus.pending(&a).unwrap().events(), [good]);
    assert!(bus.pending(&a).unwrap().unreadable().is_empty());
    assert_eq!(
        std::fs::read_dir(queue.join(".quarantine"))
            .unwrap()
            .count(),
        2
    );
}

#[test]
fn ack_cleans_up_a_copy_left_in_both_places() {
    let (_t, _clock, bus) = manual();
    let a = agent("a");
    let e = publish(&bus, "a", Priority::High);
    assert_eq!(bus.ack_event(&a, &e).unwrap(), AckOutcome::Acked);
    std::fs::copy(
        bus.processed_dir(&a).join(e.file_name()),
        bus.queue_dir(&a).join(e.file_name()),
    )
    .unwrap();
    assert_eq!(bus.ack_event(&a, &e).unwrap(), AckOutcome::AlreadyAcked);
    assert!(bus.pending(&a).unwrap().is_empty());
}
