//! Waiters in one process: notifications, rescans, timeouts, no missed wake-ups.

use std::thread;
use std::time::Duration;

use chipset_bus::{Bus, BusConfig, NewEvent, Priority};
use chipset_testkit::TempState;

use crate::agent;

fn bus_with(notify: bool, rescan: Duration) -> (TempState, Bus) {
    let t = TempState::new();
    let mut config = BusConfig::default();
    config.watch.notify = notify;
    config.watch.rescan_interval = rescan;
    let bus = Bus::with_config(t.state.clone(), config);
    (t, bus)
}

#[test]
fn a_waiter_wakes_when_another_thread_publishes() {
    let (_t, bus) = bus_with(true, Duration::from_secs(30));
    let a = agent("mayor");
    // The queue does not exist yet: the waiter makes it.
    assert!(!bus.is_available(&a).unwrap());
    let mut waiter = bus.waiter(&a).unwrap();
    assert!(bus.is_available(&a).unwrap());
    assert!(waiter.is_notified());
    let publisher = bus.clone();
    let handle = thread::spawn(move || {
        thread::sleep(Duration::from_millis(50));
        publisher
            .publish(&agent("mayor"), &NewEvent::new("w", "done"))
            .unwrap()
    });
    // The rescan interval is 30 s, so only a notification can wake this in time
    // for the 20 s timeout.
    let wake = waiter.wait(Duration::from_secs(20)).unwrap();
    let published = handle.join().unwrap();
    assert_eq!(wake.len(), 1, "not woken");
    assert_eq!(wake[0], published.delivered().unwrap().id);
}

#[test]
fn rescans_alone_find_events() {
    let (_t, bus) = bus_with(false, Duration::from_millis(20));
    let a = agent("mayor");
    let mut waiter = bus.waiter(&a).unwrap();
    assert!(!waiter.is_notified());
    let _ = bus.publish(&a, &NewEvent::new("w", "x")).unwrap();
    assert!(!waiter.wait(Duration::from_secs(20)).unwrap().is_empty());
}

#[test]
fn events_published_before_wait_are_not_missed_and_not_repeated() {
    let (_t, bus) = bus_with(true, Duration::from_secs(1));
    let a = agent("mayor");
    let old = bus.publish(&a, &NewEvent::new("w", "old")).unwrap();
    let mut waiter = bus.waiter(&a).unwrap();
    // Published after the waiter was made, before wait was called.
    let _ = bus
        .publish(&a, &NewEvent::new("w", "low").with_priority(Priority::Low))
        .unwrap();
    let _ = bus
        .publish(
            &a,
            &NewEvent::new("w", "crit").with_priority(Priority::Critical),
        )
        .unwrap();
    let mut got = Vec::new();
    while got.len() < 2 {
        let arrived = waiter.wait(Duration::from_secs(20)).unwrap();
        assert!(!arrived.is_empty(), "missed a wake-up");
        got.extend(arrived);
    }
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|id| *id != old.delivered().unwrap().id));
    // Nothing new: a short wait times out, whatever rescans happen meanwhile.
    assert_eq!(waiter.wait(Duration::from_millis(1200)).unwrap(), []);
}

#[test]
fn acknowledging_does_not_wake_a_waiter() {
    let (_t, bus) = bus_with(true, Duration::from_millis(100));
    let a = agent("mayor");
    let e = bus.publish(&a, &NewEvent::new("w", "x")).unwrap();
    let mut waiter = bus.waiter(&a).unwrap();
    let _ = bus.ack_event(&a, e.delivered().unwrap()).unwrap();
    assert_eq!(waiter.wait(Duration::from_millis(300)).unwrap(), []);
}
