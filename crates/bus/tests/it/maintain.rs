//! Status counts, retention and the doctor.

use std::time::Duration;

use chipset_bus::{Bus, ControlOp, NewEvent, Priority, Resource, Retention};
use chipset_store::{Action, DoctorMode, IoBackend, RealIo, StateOptions};
use chipset_testkit::TempState;

use crate::{agent, manual};

use crate::EventName;

fn publish(bus: &Bus, to: &str, p: Priority) -> chipset_bus::Event {
    bus.publish(&agent(to), &NewEvent::new("w", "k").with_priority(p))
        .unwrap()
        .delivered()
        .unwrap()
        .clone()
}

#[test]
fn counts_and_status_come_from_listings() {
    let (_t, _clock, bus) = manual();
    publish(&bus, "a", Priority::Critical);
    publish(&bus, "a", Priority::Low);
    let e = publish(&bus, "a", Priority::Low);
    publish(&bus, "b", Priority::High);
    assert!(bus.ack_event(&agent("a"), &e).unwrap());
    let _ = bus.start(&agent("b"), std::process::id()).unwrap();
    // A name that is no event's, counted apart.
    std::fs::write(bus.queue_dir(&agent("b")).as_path().join("README"), b"hi").unwrap();
    let status = bus.status().unwrap();
    assert_eq!(status.len(), 2);
    assert_eq!(status[0].agent, agent("a"));
    assert_eq!(status[0].pending, [1, 0, 0, 1]);
    assert_eq!(status[0].processed, 1);
    assert_eq!(status[0].foreign, 0);
    assert_eq!(status[0].pending_at(Priority::Critical), 1);
    assert_eq!(status[0].pending_at(Priority::High), 0);
    assert_eq!(status[0].pending_at(Priority::Low), 1);
    assert_eq!(status[0].pending_total(), 2);
    assert_eq!(status[1].agent, agent("b"));
    assert_eq!(status[1].pending, [0, 1, 0, 0]);
    assert_eq!(status[1].foreign, 1);
    assert_eq!(status[1].processed, 0);
    assert_eq!(status[1].pending_total(), 1);
    assert_eq!(bus.agent_status(&agent("b")).unwrap(), status[1]);
    assert!(status[1].live);
    assert!(!status[0].live);
}

#[test]
fn prune_keeps_the_newest_processed_events_and_never_touches_the_queue() {
    let (_t, clock, bus) = manual();
    let a = agent("a");
    let mut acked = Vec::new();
    for i in 0..6 {
        let e = publish(&bus, "a", Priority::ALL[i % 4]);
        clock.advance(Duration::from_secs(60));
        acked.push(e);
    }
    let waiting = publish(&bus, "a", Priority::Low);
    for e in &acked {
        assert!(bus.ack_event(&a, e).unwrap());
    }
    let pruned = bus
        .prune(&a, &retention(|r| r.max_count = Some(4)))
        .unwrap();
    assert_eq!(pruned.events, 2);
    let kept: Vec<_> = crate::processed(&bus, &a)
        .iter()
        .map(|e| e.id().clone())
        .collect();
    let mut newest: Vec<_> = acked[2..].iter().map(|e| e.id.clone()).collect();
    newest.sort_by_key(|id| {
        acked
            .iter()
            .find(|e| e.id == *id)
            .map(|e| (e.priority, id.clone()))
    });
    assert_eq!(kept, newest);

    // By age: the events published more than 150 s before now go.
    let pruned = bus
        .prune(
            &a,
            &retention(|r| r.max_age = Some(Duration::from_secs(150))),
        )
        .unwrap();
    assert_eq!(pruned.events, 2);
    // By size: one file's worth.
    let one = std::fs::metadata(
        bus.processed_dir(&a)
            .as_path()
            .join(crate::processed(&bus, &a)[0].name()),
    )
    .unwrap()
    .len();
    let pruned = bus
        .prune(&a, &retention(|r| r.max_bytes = Some(one)))
        .unwrap();
    assert_eq!(pruned.events, 1);
    assert_eq!(crate::processed(&bus, &a).len(), 1);
    assert_eq!(bus.pending(&a).unwrap().events, [waiting]);
}

/// The limits are inclusive: events that together take exactly `max_bytes`
/// are kept, and so is an event exactly `max_age` old; one byte or one
/// second less prunes the oldest, and `Pruned` counts its bytes.
#[test]
fn prune_keeps_what_is_exactly_at_a_limit() {
    let (_t, clock, bus) = manual();
    let a = agent("a");
    let mut events = Vec::new();
    for _ in 0..3 {
        events.push(publish(&bus, "a", Priority::Normal));
        clock.advance(Duration::from_secs(60));
    }
    for e in &events {
        assert!(bus.ack_event(&a, e).unwrap());
    }
    let size = |e: &chipset_bus::Event| {
        std::fs::metadata(bus.processed_dir(&a).as_path().join(e.file_name()))
            .unwrap()
            .len()
    };
    let (oldest, middle, newest) = (size(&events[0]), size(&events[1]), size(&events[2]));
    let left = |bus: &Bus| -> Vec<_> {
        crate::processed(bus, &a)
            .iter()
            .map(|e| e.id().clone())
            .collect()
    };

    let all = oldest + middle + newest;
    let pruned = bus
        .prune(&a, &retention(|r| r.max_bytes = Some(all)))
        .unwrap();
    assert_eq!(pruned, chipset_bus::Pruned::default(), "all fit exactly");
    let pruned = bus
        .prune(&a, &retention(|r| r.max_bytes = Some(all - 1)))
        .unwrap();
    assert_eq!((pruned.events, pruned.bytes), (1, oldest));
    assert_eq!(left(&bus), [events[1].id.clone(), events[2].id.clone()]);

    // Now is 180 s after the first publish: the middle one is 120 s old.
    let pruned = bus
        .prune(
            &a,
            &retention(|r| r.max_age = Some(Duration::from_secs(120))),
        )
        .unwrap();
    assert_eq!(
        pruned,
        chipset_bus::Pruned::default(),
        "exactly as old is kept"
    );
    let pruned = bus
        .prune(
            &a,
            &retention(|r| r.max_age = Some(Duration::from_secs(119))),
        )
        .unwrap();
    assert_eq!((pruned.events, pruned.bytes), (1, middle));
    assert_eq!(left(&bus), [events[2].id.clone()]);
}

#[test]
fn prune_drops_old_dedup_records_so_the_key_works_again() {
    let (_t, clock, bus) = manual();
    let a = agent("a");
    let e = NewEvent::new("w", "k")
        .with_dedup_key("x")
        .with_dedup_window(Duration::from_secs(3600));
    let _ = bus.publish(&a, &e).unwrap();
    clock.advance(Duration::from_secs(120));
    let none = bus
        .prune(
            &a,
            &retention(|r| r.dedup_max_age = Some(Duration::from_secs(600))),
        )
        .unwrap();
    assert_eq!(none.dedup_records, 0);
    // Exactly as old as the limit: kept.
    let exact = bus
        .prune(
            &a,
            &retention(|r| r.dedup_max_age = Some(Duration::from_secs(120))),
        )
        .unwrap();
    assert_eq!(exact.dedup_records, 0);
    assert!(
        bus.publish(&a, &e).unwrap().delivered().is_none(),
        "still judged"
    );
    let some = bus
        .prune(
            &a,
            &retention(|r| r.dedup_max_age = Some(Duration::from_secs(60))),
        )
        .unwrap();
    assert_eq!(some.dedup_records, 1);
    assert!(bus.publish(&a, &e).unwrap().delivered().is_some());
}

#[test]
fn doctor_reports_then_fixes_by_quarantine() {
    let (_t, _clock, bus) = manual();
    let a = agent("a");
    let good = publish(&bus, "a", Priority::High);
    let acked = publish(&bus, "a", Priority::Normal);
    assert!(bus.ack_event(&a, &acked).unwrap());
    let queue = bus.queue_dir(&a);
    let dir = queue.parent().unwrap().to_owned();
    // A corrupt event, a foreign file, a crash leftover in both places,
    // a corrupt presence, a torn control log, a stray file under bus/.
    std::fs::write(
        queue
            .as_path()
            .join("2-1000-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab-w-k.json"),
        b"{",
    )
    .unwrap();
    std::fs::write(queue.as_path().join("README"), b"hi").unwrap();
    std::fs::copy(
        bus.processed_dir(&a).as_path().join(acked.file_name()),
        queue.as_path().join(acked.file_name()),
    )
    .unwrap();
    std::fs::write(dir.join("presence.json"), b"[]").unwrap();
    bus.control(&a, ControlOp::Register, &Resource::new("chat", "x"))
        .unwrap();
    let mut log = std::fs::read(dir.join("control.jsonl")).unwrap();
    let whole = log.len();
    log.extend_from_slice(b"{\"op\":\"reg");
    std::fs::write(dir.join("control.jsonl"), log).unwrap();
    std::fs::write(bus.state().root().join("bus/stray.txt"), b"?").unwrap();

    let report = bus.doctor(DoctorMode::Check).unwrap();
    let problems: Vec<_> = report.findings.iter().map(|f| f.code).collect();
    assert_eq!(report.findings.len(), 6, "{problems:?}");
    assert!(report.findings.iter().all(|f| f.actions.is_empty()));
    assert!(problems.contains(&"bus-foreign-name"));
    assert!(problems.contains(&"bus-acked-copy"));
    assert!(problems.contains(&"bus-torn-log"));
    // Each worded "`{path}`: {problem}", as `chipset doctor` prints it.
    let mut words: Vec<_> = report
        .findings
        .iter()
        .map(|f| {
            let prefix = format!("`{}`: ", f.path.as_ref().unwrap().display());
            let rest = f.message.strip_prefix(&prefix);
            (f.code, rest.unwrap_or_else(|| panic!("{f:?}")).to_owned())
        })
        .collect();
    words.sort();
    let codes: Vec<_> = words.iter().map(|(code, _)| *code).collect();
    assert_eq!(
        codes,
        [
            "bus-acked-copy",
            "bus-corrupt",
            "bus-corrupt",
            "bus-foreign-name",
            "bus-foreign-name",
            "bus-torn-log"
        ]
    );
    for (code, words) in &words {
        match *code {
            "bus-acked-copy" => assert_eq!(words, "acknowledged, but a copy is still queued"),
            "bus-corrupt" => assert!(
                words.starts_with("unparsable JSON: ")
                    || words.starts_with("unexpected JSON shape: "),
                "{words}"
            ),
            "bus-foreign-name" => assert_eq!(words, "not an event file name"),
            _ => assert_eq!(
                words,
                &format!("torn last line (10 bytes at offset {whole})")
            ),
        }
    }
    // Report-only changed nothing.
    assert_eq!(bus.doctor(DoctorMode::Check).unwrap(), report);

    // Event files read: four in the queue, one processed.
    assert_eq!(report.scanned, 5);

    let fixed = bus.doctor(DoctorMode::Fix).unwrap();
    assert_eq!(fixed.findings.len(), 6);
    assert_eq!(fixed.scanned, 5);
    // With no bad line before it, a torn tail is cut off, not moved aside.
    let torn = fixed
        .findings
        .iter()
        .find(|f| f.code == "bus-torn-log")
        .unwrap();
    assert_eq!(torn.actions, [Action::Truncated("truncated".to_owned())]);
    assert_eq!(
        std::fs::read(dir.join("control.jsonl")).unwrap().len(),
        whole
    );
    assert!(
        fixed
            .findings
            .iter()
            .any(|f| matches!(f.actions[..], [Action::Quarantined { to: Some(_), .. }]))
    );
    // Only the stray file under bus/ is left to a human.
    let after = bus.doctor(DoctorMode::Check).unwrap();
    assert_eq!(after.findings.len(), 1, "{:?}", after.findings);
    assert_eq!(bus.pending(&a).unwrap().events, [good]);
    assert!(bus.pending(&a).unwrap().unreadable.is_empty());
    assert_eq!(
        std::fs::read_dir(queue.as_path().join(".quarantine"))
            .unwrap()
            .count(),
        2
    );
}

/// A temp file a crash left under `bus/` is reported once older than
/// `stale_temp_age` (a younger one may be a write in progress) and removed
/// only by Fix.
#[test]
fn the_doctor_reports_a_stale_temp_and_fix_removes_it() {
    let (_t, _clock, bus) = manual();
    let a = agent("a");
    bus.ensure_queue(&a).unwrap();
    let dir = bus.queue_dir(&a).parent().unwrap().to_owned();
    let (stale, fresh) = (
        dir.join(".presence.json.1.tmp"),
        dir.join(".registry.json.2.tmp"),
    );
    std::fs::write(&fresh, b"{").unwrap();
    std::fs::File::create(&stale)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - Duration::from_secs(3600))
        .unwrap();

    let report = bus.doctor(DoctorMode::Check).unwrap();
    let [f] = &report.findings[..] else {
        panic!("{report:?}")
    };
    assert_eq!(
        (f.code, &f.fault, f.path.as_ref()),
        (
            "bus-stale-temp",
            &chipset_store::Defect::Stale,
            Some(&stale)
        )
    );
    assert_eq!(f.message, format!("`{}`: stale temp file", stale.display()));
    assert!(f.actions.is_empty());
    assert!(stale.exists(), "Check removes nothing");

    let fixed = bus.doctor(DoctorMode::Fix).unwrap();
    assert_eq!(fixed.findings.len(), 1, "{fixed:?}");
    assert_eq!(
        fixed.findings[0].actions,
        [Action::Removed("removed".to_owned())]
    );
    assert!(!stale.exists());
    assert!(fresh.exists(), "a young temp may be a write in progress");
    assert!(bus.doctor(DoctorMode::Check).unwrap().is_clean());
}

/// An I/O backend that, when the doctor moves `presence.json` aside, has a
/// writer replace `registry.json` with a good registry: the registry was
/// read (corrupt) before, and is rewritten between the check and its fix.
#[derive(Debug)]
struct RewriteOnQuarantine {
    registry: std::sync::Mutex<Option<std::path::PathBuf>>,
}

impl RewriteOnQuarantine {
    fn fire(&self, from: &std::path::Path) {
        if from.file_name().is_some_and(|n| n == "presence.json")
            && let Some(registry) = self.registry.lock().unwrap().take()
        {
            let good = serde_json::to_vec(&chipset_bus::Registry::default()).unwrap();
            std::fs::write(registry, good).unwrap();
        }
    }
}

impl IoBackend for RewriteOnQuarantine {
    fn rename(&self, from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
        RealIo.rename(from, to)?;
        self.fire(from);
        Ok(())
    }
    fn rename_noreplace(
        &self,
        from: &std::path::Path,
        to: &std::path::Path,
    ) -> std::io::Result<()> {
        RealIo.rename_noreplace(from, to)?;
        self.fire(from);
        Ok(())
    }
}

/// Regression (issue 13): the bus doctor moved aside a state file that its
/// writer rewrote between the doctor's check and its fix. Now it reads the
/// file again under the writer's lock and leaves a rewritten file alone.
#[test]
fn doctor_leaves_alone_a_file_rewritten_between_check_and_fix() {
    let io = std::sync::Arc::new(RewriteOnQuarantine {
        registry: std::sync::Mutex::new(None),
    });
    let t = TempState::with_options(StateOptions {
        io: io.clone(),
        ..StateOptions::default()
    });
    let bus = Bus::new(t.state.clone());
    let a = agent("a");
    bus.ensure_queue(&a).unwrap();
    let dir = bus.queue_dir(&a).parent().unwrap().to_owned();
    let (presence, registry) = (dir.join("presence.json"), dir.join("registry.json"));
    std::fs::write(&presence, b"[]").unwrap();
    std::fs::write(&registry, b"{").unwrap();
    let check = bus.doctor(DoctorMode::Check).unwrap();
    assert_eq!(check.findings.len(), 2, "{check:?}");

    *io.registry.lock().unwrap() = Some(registry.clone());
    let fix = bus.doctor(DoctorMode::Fix).unwrap();
    assert_eq!(fix.findings.len(), 2, "{fix:?}");
    let action = |path: &std::path::Path| {
        let f = fix
            .findings
            .iter()
            .find(|f| f.path.as_deref() == Some(path))
            .unwrap();
        f.actions.clone()
    };
    assert!(matches!(
        action(&presence)[..],
        [Action::Quarantined { to: Some(_), .. }]
    ));
    assert_eq!(
        action(&registry),
        [Action::LeftAlone("no longer bad".to_owned())]
    );
    let good = serde_json::to_vec(&chipset_bus::Registry::default()).unwrap();
    assert_eq!(std::fs::read(&registry).unwrap(), good, "the rewrite stays");
    assert!(bus.doctor(DoctorMode::Check).unwrap().is_clean());
}

#[test]
fn ack_cleans_up_a_copy_left_in_both_places() {
    let (_t, _clock, bus) = manual();
    let a = agent("a");
    let e = publish(&bus, "a", Priority::High);
    assert!(bus.ack_event(&a, &e).unwrap());
    std::fs::copy(
        bus.processed_dir(&a).as_path().join(e.file_name()),
        bus.queue_dir(&a).as_path().join(e.file_name()),
    )
    .unwrap();
    assert!(!bus.ack_event(&a, &e).unwrap());
    assert!(bus.pending(&a).unwrap().is_empty());
}

/// Returns a retention that keeps all but what `limit` sets.
fn retention(limit: impl FnOnce(&mut Retention)) -> Retention {
    let mut r = Retention::default();
    limit(&mut r);
    r
}
