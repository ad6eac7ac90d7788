//! Reminders for unacknowledged events.

use std::time::Duration;

use chipset_bus::{Bus, NewEvent, Occasion, Priority};

use crate::{agent, manual};

fn kinds(events: &[chipset_bus::Event]) -> Vec<&str> {
    events.iter().map(|e| e.kind.as_str()).collect()
}

#[test]
fn reminders_follow_priorities_and_survive_a_restart() {
    let (t, clock, bus) = manual();
    let a = agent("mayor");
    for (kind, p) in [
        ("crit", Priority::Critical),
        ("high", Priority::High),
        ("norm", Priority::Normal),
        ("low", Priority::Low),
    ] {
        let _ = bus
            .publish(&a, &NewEvent::new("w", kind).with_priority(p))
            .unwrap();
    }
    assert!(bus.due_reminders(&a, Occasion::Pause).unwrap().is_empty());
    assert_eq!(
        kinds(&bus.due_reminders(&a, Occasion::Poll).unwrap()),
        ["norm"]
    );

    clock.advance(Duration::from_secs(30));
    assert_eq!(
        kinds(&bus.due_reminders(&a, Occasion::Pause).unwrap()),
        ["crit"]
    );

    // A restart 10 s later: a fresh handle reads the persisted times, no storm.
    clock.advance(Duration::from_secs(10));
    let restarted = Bus::new(t.state.clone());
    assert!(
        restarted
            .due_reminders(&a, Occasion::Pause)
            .unwrap()
            .is_empty()
    );

    clock.advance(Duration::from_secs(80));
    assert_eq!(
        kinds(&restarted.due_reminders(&a, Occasion::Pause).unwrap()),
        ["crit", "high"]
    );

    // Acknowledged events are never reminded; low comes once it is alone.
    for e in restarted.pending(&a).unwrap().events {
        if e.priority != Priority::Low {
            assert!(restarted.ack_event(&a, &e).unwrap());
        }
    }
    clock.advance(Duration::from_secs(600));
    assert!(
        restarted
            .due_reminders(&a, Occasion::Pause)
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        kinds(&restarted.due_reminders(&a, Occasion::Poll).unwrap()),
        ["low"]
    );
}

/// Asking what is due for an agent with nothing pending writes nothing:
/// `bus nag` of a mistyped name made a queue, and a phantom agent.
#[test]
fn nothing_pending_is_nothing_due_and_writes_nothing() {
    let (t, _clock, bus) = manual();
    for occasion in [Occasion::Pause, Occasion::Poll] {
        assert!(
            bus.due_reminders(&agent("ghost"), occasion)
                .unwrap()
                .is_empty()
        );
    }
    assert!(!t.at("bus/ghost").exists());
}
