//! Presence versus availability, and the restart steps.

use std::time::Duration;

use chipset_bus::{Bus, BusConfig, NewEvent, Priority};
use chipset_store::{AgentId, ReadOutcome};

use crate::{agent, manual};

/// Whether `agent`'s presence is there and live, as the bus judges it now.
fn live(bus: &Bus, agent: &AgentId) -> bool {
    matches!(bus.presence(agent).unwrap(), ReadOutcome::Value(p) if bus.is_live(&p))
}

/// Whether `agent`'s presence is there and stale.
fn stale(bus: &Bus, agent: &AgentId) -> bool {
    matches!(bus.presence(agent).unwrap(), ReadOutcome::Value(p) if !bus.is_live(&p))
}

#[test]
fn an_offline_agent_has_a_queue_that_accumulates() {
    let (_t, _clock, bus) = manual();
    let a = agent("worker-1");
    assert!(!bus.is_available(&a).unwrap());
    assert_eq!(bus.presence(&a).unwrap(), ReadOutcome::Missing);
    let _ = bus.publish(&a, &NewEvent::new("mayor", "task")).unwrap();
    assert!(bus.is_available(&a).unwrap());
    assert_eq!(bus.presence(&a).unwrap(), ReadOutcome::Missing);
    assert_eq!(bus.pending(&a).unwrap().events.len(), 1);
}

/// A bus on `t` whose presence goes stale after 60 s.
fn stale_after_a_minute(t: &chipset_testkit::TempState) -> Bus {
    let mut config = BusConfig::default();
    config.presence_stale_after = Duration::from_secs(60);
    Bus::with_config(t.state.clone(), config)
}

#[test]
fn start_returns_pending_in_order_and_registers_presence() {
    let (t, clock, _) = manual();
    let bus = stale_after_a_minute(&t);
    let a = agent("worker-1");
    let _ = bus
        .publish(&a, &NewEvent::new("m", "low").with_priority(Priority::Low))
        .unwrap();
    let _ = bus
        .publish(
            &a,
            &NewEvent::new("m", "crit").with_priority(Priority::Critical),
        )
        .unwrap();
    let s = bus.start(&a, std::process::id()).unwrap();
    let kinds: Vec<_> = s.pending.events.iter().map(|e| &e.kind).collect();
    assert_eq!(kinds, ["crit", "low"]);
    assert_eq!(s.previous, ReadOutcome::Missing);
    assert_eq!(s.presence.pid, std::process::id());
    assert!(live(&bus, &a));
    assert_eq!(bus.presence(&a).unwrap().value(), Some(s.presence.clone()));
    assert!(!s.pending.is_empty(), "events, nothing unreadable");

    // Silence makes presence stale, and stale presence blocks nothing.
    clock.advance(Duration::from_secs(61));
    assert!(stale(&bus, &a));
    assert_eq!(bus.presence(&a).unwrap().value(), Some(s.presence.clone()));
    let _ = bus.publish(&a, &NewEvent::new("m", "more")).unwrap();
    assert_eq!(bus.pending(&a).unwrap().events.len(), 3);
    let e = bus.pending(&a).unwrap().events.remove(0);
    assert!(bus.ack_event(&a, &e).unwrap());

    let beat = bus.heartbeat(&a).unwrap();
    assert_eq!(beat.started_at, s.presence.started_at);
    assert_eq!(beat.last_seen, clock_now(&bus));
    assert!(live(&bus, &a));

    // A restart sees the previous session and its stale or live presence.
    let again = bus.start(&a, std::process::id()).unwrap();
    assert!(matches!(&again.previous, ReadOutcome::Value(p) if bus.is_live(p)));
    assert_eq!(again.pending.events.len(), 2);
}

/// A session started for another process (a command line starting its
/// caller's) records that pid; that process's heartbeats keep it, and
/// another's registers afresh.
#[test]
fn start_records_the_agent_process_given() {
    let (_t, clock, bus) = manual();
    let a = agent("worker-1");
    let s = bus.start(&a, 4242).unwrap();
    assert_eq!(s.presence.pid, 4242);
    assert_eq!(bus.presence(&a).unwrap().value(), Some(s.presence.clone()));
    assert!(live(&bus, &a));
    clock.advance(Duration::from_secs(5));
    let beat = bus.heartbeat(&a).unwrap();
    assert_eq!(beat.pid, std::process::id(), "this process is not 4242");
    assert_eq!(beat.started_at, clock_now(&bus));
}

fn clock_now(bus: &Bus) -> chipset_store::Timestamp {
    bus.state().now()
}

#[test]
fn a_corrupt_presence_is_reported_and_replaced_on_start() {
    let (_t, _clock, bus) = manual();
    let a = agent("worker-1");
    let _ = bus.start(&a, std::process::id()).unwrap();
    let path = bus.queue_dir(&a).parent().unwrap().join("presence.json");
    std::fs::write(&path, b"{").unwrap();
    assert!(bus.presence(&a).unwrap().is_corrupt());
    let s = bus.start(&a, std::process::id()).unwrap();
    assert!(s.previous.is_corrupt());
    assert!(live(&bus, &a));
}

/// A heartbeat over a corrupt presence moves it aside (for a look later) and
/// registers afresh; over another process's presence it registers this
/// process, from now.
#[test]
fn a_heartbeat_over_a_corrupt_or_foreign_presence_registers_afresh() {
    let (t, clock, bus) = manual();
    let a = agent("worker-1");
    let first = bus.start(&a, std::process::id()).unwrap().presence;
    let dir = t.state.channel(chipset_bus::Bus::CHANNEL).join_id(&a, "");
    let path = dir.join_static("presence.json");
    t.state.write_bytes(&path, b"{").unwrap();
    assert!(!t.state.has_quarantine(&dir).unwrap());
    clock.advance(Duration::from_secs(5));
    let beat = bus.heartbeat(&a).unwrap();
    assert!(
        t.state.has_quarantine(&dir).unwrap(),
        "the corrupt file is kept aside"
    );
    assert_eq!(beat.started_at, clock_now(&bus));
    assert_ne!(beat.started_at, first.started_at);

    let other = chipset_bus::Presence {
        pid: std::process::id() + 1,
        ..beat.clone()
    };
    t.state.write_json(&path, &other).unwrap();
    clock.advance(Duration::from_secs(5));
    let beat = bus.heartbeat(&a).unwrap();
    assert_eq!(beat.pid, std::process::id());
    assert_eq!(beat.started_at, clock_now(&bus), "a new session, from now");
}

/// Presence is live up to the staleness limit, and stale only past it.
#[test]
fn presence_is_live_up_to_its_limit() {
    let (t, clock, _) = manual();
    let bus = stale_after_a_minute(&t);
    let a = agent("worker-1");
    let _ = bus.start(&a, std::process::id()).unwrap();
    clock.advance(Duration::from_secs(60));
    assert!(live(&bus, &a));
    clock.advance(Duration::from_millis(1));
    assert!(stale(&bus, &a));
}
