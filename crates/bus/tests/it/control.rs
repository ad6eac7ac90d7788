//! The control inbox and the registry.

use chipset_bus::{ControlOp, Resource};

use crate::{agent, manual};

#[test]
fn commands_are_applied_forward_from_the_stored_offset() {
    let (_t, _clock, bus) = manual();
    let a = agent("mayor");
    let debug = Resource::new("chat", ".nbs/chat/debug.chat");
    let hub = Resource::new("queue", "witness");
    bus.control(&a, ControlOp::Register, &debug).unwrap();
    bus.control(&a, ControlOp::Register, &hub).unwrap();
    let applied = bus.apply_control(&a).unwrap();
    assert_eq!(applied.resources.len(), 2);
    assert!(applied.resources.contains_key(&debug) && applied.resources.contains_key(&hub));

    // Nothing new: nothing applied, the same registry and offset.
    let again = bus.apply_control(&a).unwrap();
    assert_eq!(again, applied);

    bus.control(&a, ControlOp::Unregister, &debug).unwrap();
    let after = bus.apply_control(&a).unwrap();
    assert!(after.applied_offset > applied.applied_offset);
    assert!(!after.resources.contains_key(&debug) && after.resources.contains_key(&hub));
    assert_eq!(bus.registry(&a).unwrap(), after);

    // The log keeps every command: never truncated.
    let log =
        std::fs::read_to_string(bus.queue_dir(&a).parent().unwrap().join("control.jsonl")).unwrap();
    assert_eq!(log.lines().count(), 3);
}

#[test]
fn a_crash_before_the_registry_write_reapplies_to_the_same_registry() {
    let (_t, _clock, bus) = manual();
    let a = agent("mayor");
    let r = Resource::new("chat", "a.chat");
    bus.control(&a, ControlOp::Register, &r).unwrap();
    let first = bus.apply_control(&a).unwrap();
    bus.control(&a, ControlOp::Unregister, &r).unwrap();
    bus.control(&a, ControlOp::Register, &r).unwrap();
    // Simulate a crash that lost the last registry write: put the old one back.
    let path = bus
        .state()
        .channel(chipset_bus::Bus::CHANNEL)
        .join_id(&a, "")
        .join_static("registry.json");
    let after = bus.apply_control(&a).unwrap();
    bus.state().write_json(&path, &first).unwrap();
    let replayed = bus.apply_control(&a).unwrap();
    assert_eq!(replayed.resources, after.resources);
    assert_eq!(replayed.applied_offset, after.applied_offset);
}

#[test]
fn a_corrupt_registry_is_rebuilt_from_the_whole_log() {
    let (_t, _clock, bus) = manual();
    let a = agent("mayor");
    let r = Resource::new("chat", "a.chat");
    bus.control(&a, ControlOp::Register, &r).unwrap();
    let good = bus.apply_control(&a).unwrap();
    let path = bus
        .state()
        .channel(chipset_bus::Bus::CHANNEL)
        .join_id(&a, "")
        .join_static("registry.json");
    std::fs::write(&path, b"nonsense").unwrap();
    assert!(bus.registry(&a).is_err());
    assert_eq!(bus.apply_control(&a).unwrap(), good);
}

#[test]
fn bad_lines_are_skipped_and_reported_by_the_doctor() {
    let (_t, _clock, bus) = manual();
    let a = agent("mayor");
    let r = Resource::new("chat", "a.chat");
    bus.control(&a, ControlOp::Register, &r).unwrap();
    let log = bus.queue_dir(&a).parent().unwrap().join("control.jsonl");
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str("{\"op\":\"explode\"}\n");
    std::fs::write(&log, text).unwrap();
    bus.control(&a, ControlOp::Register, &Resource::new("queue", "w"))
        .unwrap();
    let applied = bus.apply_control(&a).unwrap();
    assert_eq!(applied.resources.len(), 2);
    assert!(
        applied.resources.contains_key(&r)
            && applied.resources.contains_key(&Resource::new("queue", "w"))
    );
    let report = bus.doctor(chipset_store::DoctorMode::Check).unwrap();
    let codes: Vec<_> = report.findings.iter().map(|f| f.code).collect();
    assert_eq!(codes, ["bus-bad-line"]);
    assert!(
        bus.control(&a, ControlOp::Register, &Resource::new("chat", ""))
            .is_err()
    );
}

/// Issue 12: the doctor moves bad control lines to `.quarantine/` (every
/// whole command kept), and a directory where the log belongs is reported
/// and moved aside instead of stopping the doctor; afterwards it is clean.
#[test]
fn the_doctor_repairs_bad_lines_and_moves_a_directory_log_aside() {
    use chipset_store::{Action, DoctorMode};
    let (_t, _clock, bus) = manual();
    let a = agent("mayor");
    bus.control(&a, ControlOp::Register, &Resource::new("chat", "a.chat"))
        .unwrap();
    let log = bus.queue_dir(&a).parent().unwrap().join("control.jsonl");
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str("not json\n");
    // Applied up to past the bad line: the repair must not leave this offset stale.
    std::fs::write(&log, &text).unwrap();
    let before = bus.apply_control(&a).unwrap();
    assert_eq!(before.resources.len(), 1);
    std::fs::write(&log, text).unwrap();
    bus.control(&a, ControlOp::Register, &Resource::new("queue", "w"))
        .unwrap();
    let report = bus.doctor(DoctorMode::Fix).unwrap();
    assert_eq!(report.findings.len(), 1, "{:?}", report.findings);
    assert!(matches!(
        report.findings[0].actions[..],
        [Action::Quarantined { to: Some(_), .. }]
    ));
    assert!(bus.doctor(DoctorMode::Check).unwrap().findings.is_empty());
    let registry = bus.registry(&a).unwrap();
    assert!(
        registry
            .resources
            .contains_key(&Resource::new("queue", "w")),
        "{registry:?}"
    );
    assert!(
        registry
            .resources
            .contains_key(&Resource::new("chat", "a.chat")),
        "{registry:?}"
    );
    // Nothing left to apply: the same registry and offset.
    assert_eq!(bus.apply_control(&a).unwrap(), registry);

    let b = agent("witness");
    bus.ensure_queue(&b).unwrap();
    let dir_log = bus.queue_dir(&b).parent().unwrap().join("control.jsonl");
    std::fs::create_dir(&dir_log).unwrap();
    let report = bus.doctor(DoctorMode::Check).unwrap();
    assert_eq!(report.findings.len(), 1, "{:?}", report.findings);
    let report = bus.doctor(DoctorMode::Fix).unwrap();
    assert!(matches!(
        report.findings[0].actions[..],
        [Action::Quarantined { to: Some(_), .. }]
    ));
    assert!(bus.doctor(DoctorMode::Check).unwrap().findings.is_empty());
    bus.control(&b, ControlOp::Register, &Resource::new("chat", "b.chat"))
        .unwrap();
}
