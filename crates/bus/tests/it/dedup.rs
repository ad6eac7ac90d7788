//! De-duplication windows, per publish and per bus, across restarts.

use std::time::Duration;

use chipset_bus::{Bus, BusConfig, EventId, NewEvent, Published};

use crate::{agent, manual};

#[test]
fn a_key_is_dropped_inside_the_window_and_works_again_after() {
    let (_t, clock, bus) = manual();
    let a = agent("mayor");
    let e = NewEvent::new("chat-watcher", "chat-mention").with_dedup_key("debug.chat#42");
    let first = bus.publish(&a, &e).unwrap();
    let first_id = first.delivered().unwrap().id.clone();
    clock.advance(Duration::from_secs(59));
    match bus.publish(&a, &e).unwrap() {
        Published::Duplicate { key, original, .. } => {
            assert_eq!(key, "debug.chat#42");
            assert_eq!(original, first_id);
        }
        other => panic!("expected a duplicate, got {other:?}"),
    }
    clock.advance(Duration::from_secs(1));
    assert!(bus.publish(&a, &e).unwrap().delivered().is_some());
    assert_eq!(bus.pending(&a).unwrap().events.len(), 2);
}

#[test]
fn the_window_is_per_recipient_and_per_key() {
    let (_t, _clock, bus) = manual();
    let e = NewEvent::new("w", "k").with_dedup_key("one");
    let _ = bus.publish(&agent("a"), &e).unwrap();
    assert!(bus.publish(&agent("b"), &e).unwrap().delivered().is_some());
    let other = NewEvent::new("w", "k").with_dedup_key("two");
    assert!(
        bus.publish(&agent("a"), &other)
            .unwrap()
            .delivered()
            .is_some()
    );
    // Events without a key are never de-duplicated.
    let plain = NewEvent::new("w", "k");
    let _ = bus.publish(&agent("a"), &plain).unwrap();
    assert!(
        bus.publish(&agent("a"), &plain)
            .unwrap()
            .delivered()
            .is_some()
    );
}

#[test]
fn the_window_can_be_set_per_publish_and_per_bus() {
    let (t, clock, _) = manual();
    let mut config = BusConfig::default();
    config.dedup_window = Duration::from_secs(5);
    let bus = Bus::with_config(t.state.clone(), config);
    let a = agent("mayor");
    let e = NewEvent::new("w", "k").with_dedup_key("x");
    let _ = bus.publish(&a, &e).unwrap();
    clock.advance(Duration::from_secs(5));
    assert!(
        bus.publish(&a, &e).unwrap().delivered().is_some(),
        "bus window is 5 s"
    );
    clock.advance(Duration::from_secs(30));
    let long = e.clone().with_dedup_window(Duration::from_secs(3600));
    assert!(
        bus.publish(&a, &long).unwrap().delivered().is_none(),
        "this publish asks 1 h"
    );
}

#[test]
fn de_duplication_survives_a_restart() {
    let (t, _clock, bus) = manual();
    let a = agent("mayor");
    let e = NewEvent::new("w", "k").with_dedup_key("x");
    let _ = bus.publish(&a, &e).unwrap();
    drop(bus);
    let reopened = Bus::new(t.state.clone());
    assert!(reopened.publish(&a, &e).unwrap().delivered().is_none());
}

#[test]
fn long_keys_work_and_do_not_collide() {
    let (_t, _clock, bus) = manual();
    let a = agent("mayor");
    let base = "chat/".repeat(100);
    let k1 = NewEvent::new("w", "k").with_dedup_key(format!("{base}1"));
    let k2 = NewEvent::new("w", "k").with_dedup_key(format!("{base}2"));
    let _ = bus.publish(&a, &k1).unwrap();
    assert!(bus.publish(&a, &k2).unwrap().delivered().is_some());
    assert!(bus.publish(&a, &k1).unwrap().delivered().is_none());
}

#[test]
fn a_corrupt_record_is_quarantined_and_the_event_delivered() {
    let (_t, _clock, bus) = manual();
    let a = agent("mayor");
    let e = NewEvent::new("w", "k").with_dedup_key("x");
    let _ = bus.publish(&a, &e).unwrap();
    let record = bus.queue_dir(&a).parent().unwrap().join("dedup/x.json");
    std::fs::write(&record, b"garbage").unwrap();
    assert!(bus.publish(&a, &e).unwrap().delivered().is_some());
    let quarantine = record.parent().unwrap().join(".quarantine");
    assert_eq!(std::fs::read_dir(quarantine).unwrap().count(), 1);
    assert!(bus.publish(&a, &e).unwrap().delivered().is_none());
}

/// A late retry of a publish with a chosen id returns its first delivery
/// and leaves the key's record alone when a newer event holds it: the
/// window keeps counting from the newer event.
#[test]
fn a_late_retry_does_not_take_the_key_back_from_a_newer_event() {
    let (_t, clock, bus) = manual();
    let a = agent("mayor");
    let chosen = EventId::generate(&clock);
    let first = NewEvent::new("w", "k")
        .with_dedup_key("K")
        .with_id(chosen.clone());
    let delivered = bus.publish(&a, &first).unwrap();
    assert_eq!(delivered.delivered().unwrap().id, chosen);
    clock.advance(Duration::from_secs(60));
    let newer = bus
        .publish(&a, &NewEvent::new("w", "k").with_dedup_key("K"))
        .unwrap();
    let newer_id = newer.delivered().expect("the window had passed").id.clone();
    // The retry finds its first delivery.
    let retried = bus.publish(&a, &first).unwrap();
    assert_eq!(retried.delivered().unwrap().id, chosen);
    clock.advance(Duration::from_secs(1));
    match bus
        .publish(&a, &NewEvent::new("w", "k").with_dedup_key("K"))
        .unwrap()
    {
        Published::Duplicate { original, .. } => assert_eq!(original, newer_id),
        other => panic!("the key's window counts from the newer event: {other:?}"),
    }
}

/// A key's record file holding another key's record (a program that names
/// its records differently, or two long keys whose names collide) is not
/// taken for the key's: a late retry of a publish with a chosen id writes
/// the key's own record back, so the key's window holds again.
#[test]
fn a_late_retry_rewrites_a_record_that_holds_another_key() {
    let (t, clock, bus) = manual();
    let a = agent("mayor");
    let first = NewEvent::new("w", "k")
        .with_dedup_key("x")
        .with_id(EventId::generate(&clock));
    let delivered = bus.publish(&a, &first).unwrap();
    let first_id = delivered.delivered().unwrap().id.clone();
    let record = t.at("bus/mayor/dedup/x.json");
    let mut held: serde_json::Value = t.state.read_json(&record).unwrap().value().unwrap();
    held["key"] = "another key".into();
    t.state.write_json(&record, &held).unwrap();

    let retried = bus.publish(&a, &first).unwrap();
    assert_eq!(retried.delivered().unwrap().id, first_id);
    match bus
        .publish(&a, &NewEvent::new("w", "k").with_dedup_key("x"))
        .unwrap()
    {
        Published::Duplicate { original, .. } => assert_eq!(original, first_id),
        other => panic!("the key's record was not written back: {other:?}"),
    }
}
