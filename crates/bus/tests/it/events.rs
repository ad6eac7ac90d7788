//! Publishing, reading in order, acknowledging.

use std::time::Duration;

use chipset_bus::{Error, NewEvent, Priority, Problem, Published};
use serde_json::json;

use crate::{agent, manual};

use crate::EventName;

#[test]
fn pending_is_priority_then_age_and_reading_never_acks() {
    let (_t, clock, bus) = manual();
    let a = agent("polecat-alpha");
    for (kind, p) in [
        ("heartbeat", Priority::Low),
        ("status", Priority::Normal),
        ("done", Priority::High),
        ("blocked", Priority::Critical),
        ("status-2", Priority::Normal),
        ("blocked-2", Priority::Critical),
    ] {
        let _ = bus
            .publish(&a, &NewEvent::new("w", kind).with_priority(p))
            .unwrap();
        clock.advance(Duration::from_millis(5));
    }
    let kinds = |bus: &chipset_bus::Bus| -> Vec<String> {
        bus.pending(&a)
            .unwrap()
            .events
            .iter()
            .map(|e| e.kind.to_owned())
            .collect()
    };
    let expected = [
        "blocked",
        "blocked-2",
        "done",
        "status",
        "status-2",
        "heartbeat",
    ];
    assert_eq!(kinds(&bus), expected);
    // Reading twice gives the same: nothing was acknowledged on the agent's behalf.
    assert_eq!(kinds(&bus), expected);
}

#[test]
fn a_flood_of_low_events_never_hides_a_critical_one() {
    // Regression: a fixed-size scan hid critical events behind a flood of low ones.
    let (_t, _clock, bus) = manual();
    let a = agent("mayor");
    for _ in 0..300 {
        let _ = bus
            .publish(
                &a,
                &NewEvent::new("w", "heartbeat").with_priority(Priority::Low),
            )
            .unwrap();
    }
    let _ = bus
        .publish(
            &a,
            &NewEvent::new("w", "blocked").with_priority(Priority::Critical),
        )
        .unwrap();
    let pending = bus.pending(&a).unwrap();
    assert_eq!(pending.events.len(), 301);
    assert_eq!(pending.events[0].kind, "blocked");
}

#[test]
fn one_publisher_keeps_its_order_within_a_millisecond_whatever_the_kind() {
    let (_t, _clock, bus) = manual();
    let a = agent("mayor");
    // The manual clock stands still: every id shares one millisecond.
    for kind in ["zeta", "alpha", "mid"] {
        let _ = bus.publish(&a, &NewEvent::new("w", kind)).unwrap();
    }
    let kinds: Vec<_> = bus
        .pending(&a)
        .unwrap()
        .events
        .iter()
        .map(|e| e.kind.to_owned())
        .collect();
    assert_eq!(kinds, ["zeta", "alpha", "mid"]);
}

#[test]
fn ack_moves_to_processed_and_twice_is_harmless() {
    let (_t, _clock, bus) = manual();
    let a = agent("mayor");
    let e = bus
        .publish(
            &a,
            &NewEvent::new("w", "done").with_payload(json!({"task": 7})),
        )
        .unwrap()
        .delivered()
        .unwrap()
        .clone();
    assert!(bus.ack(&a, &e.id).unwrap());
    assert!(!bus.ack(&a, &e.id).unwrap());
    assert!(!bus.ack_event(&a, &e).unwrap());
    assert!(bus.pending(&a).unwrap().is_empty());
    let processed = crate::processed(&bus, &a);
    assert_eq!(processed.len(), 1);
    assert_eq!(processed[0].id(), e.id);
    assert_eq!(processed[0].name(), e.file_name());
}

#[test]
fn acking_an_unknown_event_is_an_error() {
    let (_t, _clock, bus) = manual();
    let id = chipset_bus::EventId::new("1000-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab").unwrap();
    let err = bus.ack(&agent("mayor"), &id).unwrap_err();
    assert!(matches!(err, Error::UnknownEvent { .. }), "{err}");
}

#[test]
fn each_recipient_gets_its_own_copy() {
    // Regression: one shared queue where the first consumer's ack removed the event for all.
    let (_t, _clock, bus) = manual();
    let (a, b) = (agent("critic"), agent("executor"));
    let out = bus
        .publish_to(
            &[a.clone(), b.clone(), a.clone()],
            &NewEvent::new("mayor", "round-start").with_priority(Priority::High),
        )
        .unwrap();
    assert_eq!(out.len(), 2);
    let e = out[0].1.delivered().unwrap().clone();
    assert!(bus.ack_event(&a, &e).unwrap());
    assert!(bus.pending(&a).unwrap().is_empty());
    assert_eq!(bus.pending(&b).unwrap().events, [e]);
}

#[test]
fn publish_to_with_a_key_dedups_each_recipient_alone() {
    let (_t, _clock, bus) = manual();
    let (a, b) = (agent("critic"), agent("executor"));
    let e = NewEvent::new("w", "mention").with_dedup_key("k");
    let _ = bus.publish(&a, &e).unwrap();
    let out = bus.publish_to(&[a.clone(), b.clone()], &e).unwrap();
    assert!(out[0].1.delivered().is_none());
    assert!(matches!(out[1].1, Published::Delivered(_)));
}

#[test]
fn unreadable_queue_files_are_reported_not_skipped() {
    // Regression: a reader that skipped unparsable files let an "empty queue" gate pass.
    let (_t, _clock, bus) = manual();
    let a = agent("mayor");
    let good = bus.publish(&a, &NewEvent::new("w", "ok")).unwrap();
    let dir = bus.queue_dir(&a);
    std::fs::write(
        dir.as_path()
            .join("0-1000-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab-w-bad.json"),
        b"{ torn",
    )
    .unwrap();
    std::fs::write(dir.as_path().join("notes.txt"), b"hello").unwrap();
    let pending = bus.pending(&a).unwrap();
    assert_eq!(pending.events, [good.delivered().unwrap().clone()]);
    let problems: Vec<_> = pending.unreadable.values().collect();
    assert!(matches!(problems[0], Problem::Corrupt(_)));
    assert_eq!(problems[1], &Problem::ForeignName);
    assert!(!pending.is_empty());
}

#[test]
fn a_file_whose_name_disagrees_with_its_contents_is_reported() {
    let (_t, _clock, bus) = manual();
    let a = agent("mayor");
    let e = bus
        .publish(&a, &NewEvent::new("w", "x").with_priority(Priority::Low))
        .unwrap()
        .delivered()
        .unwrap()
        .clone();
    let dir = bus.queue_dir(&a);
    let promoted = format!("0{}", &e.file_name()[1..]);
    std::fs::rename(
        dir.as_path().join(e.file_name()),
        dir.as_path().join(promoted),
    )
    .unwrap();
    let pending = bus.pending(&a).unwrap();
    assert!(pending.events.is_empty());
    let problems: Vec<_> = pending.unreadable.values().collect();
    assert_eq!(problems, [&Problem::NameMismatch]);
    assert!(!pending.is_empty(), "no event, but a file to look at");
}

#[test]
fn invalid_fields_are_refused_before_anything_is_written() {
    let (_t, _clock, bus) = manual();
    let a = agent("mayor");
    for e in [
        NewEvent::new("", "k"),
        NewEvent::new("s", "k\n"),
        NewEvent::new("s", "k").with_dedup_key("x".repeat(1025)),
    ] {
        assert!(matches!(
            bus.publish(&a, &e).unwrap_err(),
            Error::InvalidField { .. }
        ));
    }
    assert!(!bus.is_available(&a).unwrap());
}

#[test]
fn odd_sources_and_kinds_stay_inside_the_queue() {
    let (_t, _clock, bus) = manual();
    let a = agent("mayor");
    let e = bus
        .publish(&a, &NewEvent::new("../../etc", "/passwd.d"))
        .unwrap()
        .delivered()
        .unwrap()
        .clone();
    assert_eq!(e.source, "../../etc");
    let names = bus.state().list(&bus.queue_dir(&a)).unwrap();
    assert_eq!(names, [e.file_name()]);
    assert!(!names[0].contains('/'));
    assert_eq!(bus.pending(&a).unwrap().events, [e]);
}
