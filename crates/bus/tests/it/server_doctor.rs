//! The doctor, status and retention on a server (issue 30), from the same
//! bodies as on a directory: values are damaged through the backend
//! (the directory's files, or the server's rows), then found and fixed.

use chipset_backend::Dir;
use chipset_bus::{Bus, ControlOp, NewEvent, Resource, Retention};
use chipset_store::{Action, DoctorMode, ReadOutcome};
use chipset_testkit::TempState;

use crate::agent;
use crate::place::Place;

fn dir(segments: &[&str]) -> Dir {
    let mut d = Dir::new("bus").unwrap();
    for s in segments {
        d = d.join(s).unwrap();
    }
    d
}

fn codes(report: &chipset_store::Report) -> Vec<&str> {
    report.findings.iter().map(|f| f.code).collect()
}

/// A corrupt presence, a queued event overwritten with bad bytes, a queued
/// copy of an acknowledged event and a control record that is no command
/// are each found; the fix moves the bad values aside and removes the
/// copy, and the state is then clean but for the control record, which a
/// server never rewrites.
fn doctor_finds_and_fixes_damaged_values(place: &Place) {
    let t = TempState::new();
    let bus = place.open(&t.state);
    let raw = place.backend(&t.state);
    let hub = agent("hub");
    let _ = bus.start(&hub, std::process::id()).unwrap();
    let kept = bus.publish(&hub, &NewEvent::new("w", "k")).unwrap();
    let acked = bus.publish(&hub, &NewEvent::new("w", "k2")).unwrap();
    let acked = acked.delivered().unwrap().clone();
    let names = crate::listed(&*raw, &hub, "queue");
    assert_eq!(names.len(), 2);
    assert!(bus.ack_event(&hub, &acked).unwrap());
    let bad_name = names
        .iter()
        .find(|n| n.contains(kept.delivered().unwrap().id.as_str()))
        .unwrap();
    let acked_name = crate::listed(&*raw, &hub, "processed")[0].clone();
    let queue = dir(&["hub", "queue"]);
    raw.put(&queue.key(bad_name).unwrap(), b"{not json")
        .unwrap();
    let processed_bytes = raw
        .read(&dir(&["hub", "processed"]).key(&acked_name).unwrap())
        .unwrap()
        .unwrap()
        .value;
    let _ = raw
        .create(&queue.key(&acked_name).unwrap(), &processed_bytes)
        .unwrap();
    raw.put(&dir(&["hub"]).key("presence.json").unwrap(), b"[1, 2")
        .unwrap();
    bus.control(&hub, ControlOp::Register, &Resource::new("chat", "c"))
        .unwrap();
    raw.append(
        &dir(&["hub"]).key("control.jsonl").unwrap(),
        &[b"{\"x\":1}"],
    )
    .unwrap();

    let check = bus.doctor(DoctorMode::Check).unwrap();
    let mut found = codes(&check);
    found.sort_unstable();
    assert_eq!(
        found,
        [
            "bus-acked-copy",
            "bus-bad-line",
            "bus-corrupt",
            "bus-corrupt"
        ],
        "{check:#?}"
    );
    // Checking changed nothing.
    assert_eq!(crate::listed(&*raw, &hub, "queue").len(), 2);

    let fixed = bus.doctor(DoctorMode::Fix).unwrap();
    for f in &fixed.findings {
        match f.code {
            "bus-corrupt" => assert!(
                f.actions
                    .iter()
                    .any(|a| matches!(a, Action::Quarantined { .. })),
                "{f:?}"
            ),
            "bus-acked-copy" => assert!(
                f.actions.iter().any(|a| matches!(a, Action::Removed(_))),
                "{f:?}"
            ),
            _ => {}
        }
    }
    assert!(crate::listed(&*raw, &hub, "queue").is_empty());
    assert_eq!(crate::listed(&*raw, &hub, "processed"), [acked_name]);
    assert!(matches!(bus.presence(&hub).unwrap(), ReadOutcome::Missing));
    if place.is_pg() {
        // The bad event's bytes were moved beside it, not deleted.
        let aside = raw.list(&queue.join("quarantine").unwrap()).unwrap();
        assert_eq!(aside.len(), 1, "{aside:?}");
        assert!(aside[0].ends_with(bad_name.as_str()), "{aside:?}");
    }

    let after = bus.doctor(DoctorMode::Check).unwrap();
    if place.is_pg() {
        // A server's log is never rewritten: the record stays, reported.
        assert_eq!(codes(&after), ["bus-bad-line"], "{after:#?}");
        assert_eq!(after.open(), 1);
    } else {
        assert!(after.is_clean(), "{after:#?}");
    }
}

#[test]
fn doctor_finds_and_fixes_damaged_values_on_a_directory() {
    doctor_finds_and_fixes_damaged_values(&Place::fs());
}

#[test]
fn doctor_finds_and_fixes_damaged_values_on_postgres() {
    if let Some(place) = Place::pg("doctor_finds_and_fixes_damaged_values_on_postgres") {
        doctor_finds_and_fixes_damaged_values(&place);
    }
}

/// Status lists the agents and counts their queues, and retention keeps
/// the newest processed events: the same on both backends.
fn status_and_prune(place: &Place) {
    let t = TempState::new();
    let bus: Bus = place.open(&t.state);
    let raw = place.backend(&t.state);
    let (a, b) = (agent("a"), agent("b"));
    for i in 0..4 {
        let e = bus
            .publish(&a, &NewEvent::new("w", format!("k{i}")))
            .unwrap()
            .delivered()
            .unwrap()
            .clone();
        assert!(bus.ack_event(&a, &e).unwrap());
    }
    let _ = bus.publish(&b, &NewEvent::new("w", "k")).unwrap();
    let status = bus.status().unwrap();
    assert_eq!(
        status.iter().map(|s| s.agent.clone()).collect::<Vec<_>>(),
        [a.clone(), b.clone()]
    );
    assert_eq!(status[0].processed, 4);
    assert_eq!(status[1].pending_total(), 1);
    let newest = crate::listed(&*raw, &a, "processed")[2..].to_vec();
    let mut retention = Retention::default();
    retention.max_count = Some(2);
    let pruned = bus.prune(&a, &retention).unwrap();
    assert_eq!(pruned.events, 2);
    assert_eq!(crate::listed(&*raw, &a, "processed"), newest);
    assert!(bus.doctor(DoctorMode::Check).unwrap().is_clean());
}

#[test]
fn status_and_prune_on_a_directory() {
    status_and_prune(&Place::fs());
}

#[test]
fn status_and_prune_on_postgres() {
    if let Some(place) = Place::pg("status_and_prune_on_postgres") {
        status_and_prune(&place);
    }
}
