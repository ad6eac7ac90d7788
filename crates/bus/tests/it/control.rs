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
    assert_eq!(crate::registry(&bus, &a).unwrap(), after);

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
    assert!(crate::registry(&bus, &a).is_err());
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
    let registry = crate::registry(&bus, &a).unwrap();
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

/// An I/O backend that, as the doctor's log repair is about to publish the
/// shrunk `control.jsonl`, runs an apply of the registry on another thread
/// (through a second, plain store) and waits a while for it, then fails the
/// next publish of `registry.json` once: a power cut or a full disk right
/// after the repair.
#[derive(Debug)]
struct ApplyDuringRepair {
    root: std::path::PathBuf,
    apply: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
    applied_in_between: std::sync::atomic::AtomicBool,
    fail_registry: std::sync::atomic::AtomicBool,
}

impl chipset_store::IoBackend for ApplyDuringRepair {
    fn rename(&self, from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
        use std::sync::atomic::Ordering::SeqCst;
        if to.ends_with("control.jsonl") {
            let root = self.root.clone();
            let apply = std::thread::spawn(move || {
                let bus = chipset_bus::Bus::new(chipset_store::StateDir::open(root).unwrap());
                bus.apply_control(&agent("mayor")).unwrap();
            });
            std::thread::sleep(std::time::Duration::from_millis(300));
            self.applied_in_between.store(apply.is_finished(), SeqCst);
            *self.apply.lock().unwrap() = Some(apply);
            chipset_store::RealIo.rename(from, to)?;
            self.fail_registry.store(true, SeqCst);
            return Ok(());
        }
        if to.ends_with("registry.json") && self.fail_registry.swap(false, SeqCst) {
            return Err(std::io::Error::from_raw_os_error(5));
        }
        chipset_store::RealIo.rename(from, to)
    }
}

/// The doctor resets the registry, repairs the control log and rebuilds
/// the registry under the registry's lock, which every apply takes. An
/// apply let in between stored the unrepaired log's length, and a failure
/// before the rebuild then left that offset past the repaired log's end:
/// later commands were skipped, and no later Fix saw it.
#[test]
fn an_apply_waits_out_the_doctors_repair_of_the_control_log() {
    use chipset_store::{DoctorMode, StateDir, StateOptions};
    use std::sync::atomic::Ordering::SeqCst;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("state");
    let plain = chipset_bus::Bus::new(StateDir::open(&root).unwrap());
    let a = agent("mayor");
    plain
        .control(&a, ControlOp::Register, &Resource::new("chat", "a.chat"))
        .unwrap();
    let state = plain.state();
    let log = chipset_testkit::state_path(state, "bus/mayor/control.jsonl");
    let mut text = state.read_bytes(&log).unwrap().value().unwrap();
    text.extend_from_slice(b"not json, and long enough to move the offset well past the end\n");
    state.write_bytes(&log, &text).unwrap();
    let applied = plain.apply_control(&a).unwrap().applied_offset;
    assert_eq!(applied, text.len() as u64);

    let io = std::sync::Arc::new(ApplyDuringRepair {
        root: root.clone(),
        apply: std::sync::Mutex::new(None),
        applied_in_between: false.into(),
        fail_registry: false.into(),
    });
    let options = StateOptions {
        io: io.clone(),
        ..StateOptions::default()
    };
    let bus = chipset_bus::Bus::new(StateDir::open_with(&root, options).unwrap());
    assert!(
        bus.doctor(DoctorMode::Fix).is_err(),
        "the rebuild's write fails"
    );
    let apply = io.apply.lock().unwrap().take().expect("the repair ran");
    apply.join().unwrap();
    assert!(
        !io.applied_in_between.load(SeqCst),
        "an apply ran in the middle of the repair"
    );
    let len = state.stat(&log).unwrap().unwrap().len;
    let registry = crate::registry(&plain, &a).unwrap();
    assert!(len < text.len() as u64, "the bad line was moved out");
    assert_eq!(registry.applied_offset, len, "{registry:?}");
    assert!(
        registry
            .resources
            .contains_key(&Resource::new("chat", "a.chat"))
    );
    plain
        .control(&a, ControlOp::Register, &Resource::new("queue", "w"))
        .unwrap();
    let after = plain.apply_control(&a).unwrap();
    assert!(
        after.resources.contains_key(&Resource::new("queue", "w")),
        "{after:?}"
    );
    assert!(plain.doctor(DoctorMode::Check).unwrap().is_clean());
}
