//! Files written by other programs: fields this version does not know
//! survive every rewrite, and a priority it does not know is unsupported
//! (reported, never quarantined), not corrupt.

use std::fs;
use std::time::Duration;

use chipset_bus::{Bus, BusConfig, ControlOp, NewEvent, Occasion, Priority, Problem, Resource};
use chipset_store::{AgentId, DoctorMode, StatePath};
use serde_json::{Value, json};

use crate::{agent, manual};

use crate::EventName;

fn json_of(path: &std::path::Path) -> Value {
    serde_json::from_slice(&fs::read(path).unwrap()).unwrap()
}

fn add(path: &std::path::Path, key: &str, value: Value) {
    let mut v = json_of(path);
    v[key] = value;
    fs::write(path, serde_json::to_vec(&v).unwrap()).unwrap();
}

/// Publishes one event to `a` and returns its queue file.
fn queued_event(bus: &Bus, a: &AgentId) -> StatePath {
    let _ = bus.publish(a, &NewEvent::new("mayor", "task")).unwrap();
    let name = crate::queued(bus, a)[0].name().to_owned();
    bus.queue_dir(a).join(&name).unwrap()
}

#[test]
fn an_events_extra_fields_are_read_and_kept_through_ack() {
    let (_t, _clock, bus) = manual();
    let a = agent("worker-1");
    let e = bus.publish(&a, &NewEvent::new("mayor", "task")).unwrap();
    let name = crate::queued(&bus, &a)[0].name().to_owned();
    let path = bus.queue_dir(&a).join(&name).unwrap();
    add(&path, "trace_id", json!("t-1"));
    let bytes = fs::read(&path).unwrap();
    let pending = bus.pending(&a).unwrap();
    assert_eq!(pending.events[0].extra["trace_id"], "t-1");
    let _ = bus.ack(&a, &e.delivered().unwrap().id).unwrap();
    assert_eq!(
        fs::read(bus.processed_dir(&a).join(&name).unwrap()).unwrap(),
        bytes
    );
}

#[test]
fn an_unknown_priority_is_unsupported_and_left_in_place() {
    let (_t, _clock, bus) = manual();
    let a = agent("worker-1");
    let path = queued_event(&bus, &a);
    add(&path, "priority", json!("urgent"));
    let bytes = fs::read(&path).unwrap();

    let pending = bus.pending(&a).unwrap();
    assert!(pending.events.is_empty());
    assert_eq!(
        pending.unreadable.get(path.as_path()),
        Some(&Problem::Unsupported("bus event priority `urgent`".into()))
    );
    let report = bus.doctor(DoctorMode::Fix).unwrap();
    assert_eq!(report.findings.len(), 1, "{report:?}");
    assert_eq!(report.findings[0].actions, []);
    assert_eq!(fs::read(&path).unwrap(), bytes, "never moved");
}

/// A broken event whose priority is one this version knows is corrupt, not
/// unsupported: only an unknown priority makes a file this version cannot
/// read but a later one could.
#[test]
fn a_broken_event_with_a_known_priority_is_corrupt() {
    let (_t, _clock, bus) = manual();
    let a = agent("worker-1");
    let path = queued_event(&bus, &a);
    add(&path, "created_at", json!("not a time"));
    let pending = bus.pending(&a).unwrap();
    assert!(pending.events.is_empty());
    assert!(
        matches!(
            pending.unreadable.get(path.as_path()),
            Some(Problem::Corrupt(_))
        ),
        "{pending:?}"
    );
}

#[test]
fn presence_registry_and_nag_state_keep_extra_fields() {
    let (t, clock, _) = manual();
    let bus = Bus::with_config(t.state.clone(), BusConfig::default());
    let a = agent("worker-1");
    let dir = bus.queue_dir(&a).parent().unwrap().to_owned();

    bus.start(&a, std::process::id()).unwrap();
    add(&dir.join("presence.json"), "host", json!("box-1"));
    clock.advance(Duration::from_secs(1));
    let p = bus.heartbeat(&a).unwrap();
    assert_eq!(p.extra["host"], "box-1");
    assert_eq!(json_of(&dir.join("presence.json"))["host"], "box-1");

    bus.control(&a, ControlOp::Register, &Resource::new("chat", "a.chat"))
        .unwrap();
    bus.apply_control(&a).unwrap();
    add(&dir.join("registry.json"), "owner", json!("wrapper-2"));
    bus.control(&a, ControlOp::Register, &Resource::new("chat", "b.chat"))
        .unwrap();
    let applied = bus.apply_control(&a).unwrap();
    assert_eq!(applied.resources.len(), 2);
    let registry = json_of(&dir.join("registry.json"));
    assert_eq!(registry["owner"], "wrapper-2", "{registry}");
    assert_eq!(registry["resources"].as_array().unwrap().len(), 2);
    insta::assert_snapshot!(
        "foreign_registry_json",
        fs::read_to_string(dir.join("registry.json")).unwrap()
    );

    let _ = bus
        .publish(
            &a,
            &NewEvent::new("w", "blocked").with_priority(Priority::Critical),
        )
        .unwrap();
    clock.advance(Duration::from_secs(31));
    assert_eq!(bus.due_reminders(&a, Occasion::Pause).unwrap().len(), 1);
    add(&dir.join("nag.json"), "version_note", json!("v2"));
    clock.advance(Duration::from_secs(120));
    assert_eq!(bus.due_reminders(&a, Occasion::Pause).unwrap().len(), 1);
    assert_eq!(json_of(&dir.join("nag.json"))["version_note"], "v2");
}
