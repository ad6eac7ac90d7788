//! Golden files: the on-disk contract.

use std::time::Duration;

use chipset_bus::{ControlOp, NewEvent, Occasion, Priority, Resource};
use serde_json::json;

use crate::{agent, manual};

/// Replaces generated ids (whose random part differs each run) with a placeholder.
fn redact(text: &str, ids: &[&str]) -> String {
    let mut out = text.to_owned();
    for (i, id) in ids.iter().enumerate() {
        out = out.replace(id, &format!("[id-{i}]"));
    }
    out
}

#[test]
fn event_file() {
    let (_t, _clock, bus) = manual();
    let a = agent("supervisor");
    let e = bus
        .publish(
            &a,
            &NewEvent::new("worker-2", "needs-input")
                .with_priority(Priority::Critical)
                .with_payload(json!({"task": "M005-S007-T0002", "question": "which branch?"}))
                .with_dedup_key("worker-2/blocked"),
        )
        .unwrap()
        .delivered()
        .unwrap()
        .clone();
    let path = bus.queue_dir(&a).join(e.file_name()).unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    let id = e.id.as_str();
    insta::assert_snapshot!(redact(&e.file_name(), &[id]), @"0-[id-0]-worker-2-needs-input.json");
    insta::assert_snapshot!("event_file", redact(&text, &[id]));
    let record = bus
        .queue_dir(&a)
        .parent()
        .unwrap()
        .join("dedup/worker-2%2Fblocked.json");
    insta::assert_snapshot!(
        "dedup_record",
        redact(&std::fs::read_to_string(record).unwrap(), &[id])
    );
}

#[test]
fn presence_control_registry_and_nag_files() {
    let (_t, clock, bus) = manual();
    let a = agent("supervisor");
    let _ = bus.start(&a, std::process::id()).unwrap();
    let dir = bus.queue_dir(&a).parent().unwrap().to_owned();
    let presence = std::fs::read_to_string(dir.join("presence.json")).unwrap();
    insta::assert_snapshot!(
        "presence",
        presence.replace(&std::process::id().to_string(), "[pid]")
    );
    bus.control(
        &a,
        ControlOp::Register,
        &Resource::new("chat", ".nbs/chat/debug.chat"),
    )
    .unwrap();
    bus.control(
        &a,
        ControlOp::Unregister,
        &Resource::new("queue", "witness"),
    )
    .unwrap();
    let _ = bus.apply_control(&a).unwrap();
    insta::assert_snapshot!(
        "control_log",
        std::fs::read_to_string(dir.join("control.jsonl")).unwrap()
    );
    insta::assert_snapshot!(
        "registry",
        std::fs::read_to_string(dir.join("registry.json")).unwrap()
    );
    let e = bus
        .publish(
            &a,
            &NewEvent::new("w", "blocked").with_priority(Priority::Critical),
        )
        .unwrap();
    clock.advance(Duration::from_secs(31));
    assert_eq!(bus.due_reminders(&a, Occasion::Pause).unwrap().len(), 1);
    let nag = std::fs::read_to_string(dir.join("nag.json")).unwrap();
    insta::assert_snapshot!("nag", redact(&nag, &[e.delivered().unwrap().id.as_str()]));
}
