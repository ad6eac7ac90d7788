//! Real processes: concurrent publishers, a de-duplication race, a waiter
//! woken from another process, and SIGKILL mid-publish and mid-ack. Each
//! runs on a directory and, when `CHIPSET_TEST_PG` names a server, on
//! PostgreSQL (issue 30) from the same body: there every process is a
//! client of its own, as agents on several hosts are.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use chipset_backend::Backend;
use chipset_bus::{Bus, EventId, NewEvent, Priority, Published};
use chipset_store::DoctorMode;
use chipset_testkit::{self as kit, Jitter, TempState};
use serde_json::json;

use crate::agent;
use crate::place::Place;

use crate::EventName;

const ENTRY: &str = "procs::child_entry";

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").unwrap();
    out.flush().unwrap();
}

/// Publishes `count` events from `source`, cycling through the priorities,
/// with the sequence number in the payload.
fn publish_many(bus: &Bus, source: &str, count: u64) {
    let to = agent("hub");
    for seq in 0..count {
        let p = Priority::ALL[(seq % 4) as usize];
        let e = NewEvent::new(source, "tick")
            .with_priority(p)
            .with_payload(json!({ "seq": seq }));
        assert!(bus.publish(&to, &e).unwrap().delivered().is_some());
    }
}

/// Publishes one event with a shared key and says whether it was delivered.
fn publish_keyed(bus: &Bus, source: &str) -> &'static str {
    let e = NewEvent::new(source, "chat-mention").with_dedup_key("debug.chat#42");
    match bus.publish(&agent("hub"), &e).unwrap() {
        Published::Delivered(_) => "delivered",
        Published::Duplicate { .. } => "duplicate",
    }
}

/// Publishes forever, saying `done {id}` after each publish returns.
fn crash_publisher(bus: &Bus, limit: u64, mut out: impl FnMut(&str)) {
    for i in 0..limit {
        let p = Priority::ALL[(i % 4) as usize];
        let e = NewEvent::new("crasher", "tick")
            .with_priority(p)
            .with_payload(json!({ "i": i, "pad": "x".repeat((i as usize * 53) % 2000) }));
        let published = bus.publish(&agent("hub"), &e).unwrap();
        out(&format!("done {}", published.delivered().unwrap().id));
    }
}

/// Acknowledges everything pending, saying `acked {id}` after each.
fn crash_acker(bus: &Bus, mut out: impl FnMut(&str)) {
    let hub = agent("hub");
    for e in bus.pending(&hub).unwrap().events {
        assert!(bus.ack_event(&hub, &e).unwrap());
        out(&format!("acked {}", e.id));
    }
}

#[test]
fn child_entry() {
    if let Some(role) = kit::child_role() {
        let (bus, _state) = Place::open_spec(role.arg(0));
        match role.name.as_str() {
            "publish" => {
                kit::wait_for_file(Path::new(role.arg(1)));
                publish_many(&bus, role.arg(2), role.parse(3));
            }
            "keyed" => {
                kit::wait_for_file(Path::new(role.arg(1)));
                say(publish_keyed(&bus, role.arg(2)));
            }
            "waiter" => {
                let mut waiter = bus.waiter(&agent("hub")).unwrap();
                say(&format!("ready notified={}", waiter.is_notified()));
                match waiter.wait(Duration::from_secs(60)).unwrap().first() {
                    Some(id) => say(&format!("woke {id}")),
                    None => say("timeout"),
                }
            }
            "crash-publish" => crash_publisher(&bus, u64::MAX, say),
            "crash-ack" => crash_acker(&bus, say),
            other => panic!("unknown role {other}"),
        }
        return;
    }
    // Not a child: run the roles in-process on tiny inputs.
    let t = TempState::new();
    let bus = Bus::new(t.state.clone());
    let hub = agent("hub");
    publish_many(&bus, "p", 4);
    assert_eq!(bus.pending(&hub).unwrap().events.len(), 4);
    assert_eq!(publish_keyed(&bus, "a"), "delivered");
    assert_eq!(publish_keyed(&bus, "b"), "duplicate");
    let mut done = Vec::new();
    crash_publisher(&bus, 3, |l| done.push(l.to_owned()));
    assert_eq!(done.len(), 3);
    let mut acked = Vec::new();
    crash_acker(&bus, |l| acked.push(l.to_owned()));
    assert_eq!(acked.len(), 8);
    assert!(bus.pending(&hub).unwrap().is_empty());
}

/// Runs `body` on a directory and, when a server is named, on PostgreSQL.
macro_rules! both {
    ($($name:ident => $body:ident;)*) => {
        mod fs {
            $(
                #[test]
                fn $name() {
                    super::$body(&super::Place::fs());
                }
            )*
        }
        mod pg {
            $(
                #[test]
                fn $name() {
                    if let Some(place) = super::Place::pg(concat!("procs::pg::", stringify!($name))) {
                        super::$body(&place);
                    }
                }
            )*
        }
    };
}

both! {
    eight_processes_publish_2000_events_all_present_in_order => publish_2000;
    eight_processes_same_key_exactly_one_delivered => same_key_once;
    waiter_in_another_process_wakes_on_publish => waiter_wakes;
    sigkill_mid_publish_loses_nothing_reported_done => sigkill_mid_publish;
    sigkill_mid_ack_keeps_every_event_in_exactly_one_place => sigkill_mid_ack;
}

fn publish_2000(place: &Place) {
    let t = TempState::new();
    let go = t.scratch("go");
    let mut children: Vec<_> = (0..8)
        .map(|i| {
            kit::spawn(
                ENTRY,
                "publish",
                &[
                    place.spec(t.state.root()),
                    go.to_string_lossy().into_owned(),
                    format!("pub-{i}"),
                    "250".into(),
                ],
            )
        })
        .collect();
    std::fs::write(&go, b"go").unwrap();
    for c in &mut children {
        kit::wait_ok(c, Duration::from_secs(120));
    }
    let bus = place.open(&t.state);
    let pending = bus.pending(&agent("hub")).unwrap();
    assert!(pending.unreadable.is_empty());
    assert_eq!(pending.events.len(), 2000);
    let mut per_priority = [0; 4];
    for e in &pending.events {
        per_priority[Priority::ALL.iter().position(|p| *p == e.priority).unwrap()] += 1;
    }
    // Priority first, then id (time) within a priority.
    let keys: Vec<_> = pending
        .events
        .iter()
        .map(|e| (e.priority, e.id.clone()))
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
    // Every (publisher, seq) once, and each publisher's own order kept within a priority.
    let mut last: BTreeMap<(String, Priority), u64> = BTreeMap::new();
    let mut all = BTreeSet::new();
    for e in pending.events {
        let seq = e.payload["seq"].as_u64().unwrap();
        assert!(all.insert((e.source.to_owned(), seq)));
        let prev = last.insert((e.source.to_owned(), e.priority), seq);
        assert!(prev.is_none_or(|p| p < seq), "{} out of order", e.source);
    }
    assert_eq!(all.len(), 2000);
    // 250 per publisher cycling over four priorities: 63, 63, 62, 62 each.
    assert_eq!(per_priority, [504, 504, 496, 496]);
    // The status counts from the listing alone.
    assert_eq!(
        bus.agent_status(&agent("hub")).unwrap().pending,
        [504, 504, 496, 496]
    );
}

/// Eight processes publish one key at once; on PostgreSQL each is a client
/// of its own, so this is the de-duplication exactly once across hosts.
fn same_key_once(place: &Place) {
    let t = TempState::new();
    let go = t.scratch("go");
    let mut children: Vec<_> = (0..8)
        .map(|i| {
            kit::spawn(
                ENTRY,
                "keyed",
                &[
                    place.spec(t.state.root()),
                    go.to_string_lossy().into_owned(),
                    format!("watcher-{i}"),
                ],
            )
        })
        .collect();
    let outputs: Vec<_> = children.iter_mut().map(collect).collect();
    std::fs::write(&go, b"go").unwrap();
    let mut said = Vec::new();
    for rx in outputs {
        said.extend(rx.iter().filter(|l| l == "delivered" || l == "duplicate"));
    }
    for c in &mut children {
        kit::wait_ok(c, Duration::from_secs(60));
    }
    said.sort();
    assert_eq!(
        said.iter().filter(|s| *s == "delivered").count(),
        1,
        "{said:?}"
    );
    assert_eq!(
        said.iter().filter(|s| *s == "duplicate").count(),
        7,
        "{said:?}"
    );
    let bus = place.open(&t.state);
    assert_eq!(bus.pending(&agent("hub")).unwrap().events.len(), 1);
}

/// On PostgreSQL the wake is the server's notification, sent at commit.
fn waiter_wakes(place: &Place) {
    let t = TempState::new();
    let mut child = kit::spawn(ENTRY, "waiter", &[place.spec(t.state.root())]);
    let rx = collect(&mut child);
    let ready = next_with(&rx, "ready");
    assert!(ready.starts_with("ready notified="), "{ready}");
    let bus = place.open(&t.state);
    let published = bus
        .publish(&agent("hub"), &NewEvent::new("worker", "task-done"))
        .unwrap();
    let woke = next_with(&rx, "woke");
    assert_eq!(woke, format!("woke {}", published.delivered().unwrap().id));
    assert!(rx.iter().all(|l| l != "timeout"));
    kit::wait_ok(&mut child, Duration::from_secs(30));
}

/// Reads a child's lines on a thread, so the parent can kill it at any moment.
fn collect(child: &mut std::process::Child) -> mpsc::Receiver<String> {
    let lines = kit::lines(child);
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Returns the next line starting with `prefix`, skipping the test harness's own lines.
fn next_with(rx: &mpsc::Receiver<String>, prefix: &str) -> String {
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("no `{prefix}` line from the child: {e}"));
        if line.starts_with(prefix) {
            return line;
        }
    }
}

/// Returns the ids of every remaining line starting with `prefix`.
fn ids_after(rx: &mpsc::Receiver<String>, prefix: &str) -> Vec<EventId> {
    rx.iter()
        .filter_map(|l| l.strip_prefix(prefix).map(|id| EventId::new(id).unwrap()))
        .collect()
}

/// Checks there is nothing partial: every queued and processed file reads
/// as an event, and the doctor finds nothing (stale temps aside: a killed
/// writer may leave a dot-temp, which no reader looks at). On a server
/// every value is one committed statement; the queue is read back.
fn assert_whole(place: &Place, bus: &Bus) {
    let hub = agent("hub");
    assert!(bus.pending(&hub).unwrap().unreadable.is_empty());
    if place.is_pg() {
        return;
    }
    let report = bus.doctor(DoctorMode::Check).unwrap();
    assert!(report.is_clean(), "{:?}", report.findings);
    let dir = bus.processed_dir(&hub);
    for entry in crate::processed(bus, &hub) {
        let read = bus
            .state()
            .read_json::<chipset_bus::Event>(&dir.join(entry.name()).unwrap())
            .unwrap();
        assert!(read.value().is_some(), "{}", entry.name());
    }
}

fn sigkill_mid_publish(place: &Place) {
    let seed = Jitter::seed_from_time();
    let mut jitter = Jitter::new(seed);
    let t = TempState::new();
    let bus = place.open(&t.state);
    let raw = place.backend(&t.state);
    let mut reported = BTreeSet::new();
    for round in 0..3 {
        let mut child = kit::spawn(ENTRY, "crash-publish", &[place.spec(t.state.root())]);
        let rx = collect(&mut child);
        // Let it get going, then kill it at a random moment.
        let first = next_with(&rx, "done ");
        reported.insert(EventId::new(first.strip_prefix("done ").unwrap()).unwrap());
        thread::sleep(Duration::from_millis(20 + jitter.below(150)));
        kit::kill9(&mut child);
        reported.extend(ids_after(&rx, "done "));
        let queued: BTreeSet<_> = crate::listed(&*raw, &agent("hub"), "queue")
            .into_iter()
            .map(|e| e.id().clone())
            .collect();
        let missing: Vec<_> = reported.difference(&queued).collect();
        assert!(
            missing.is_empty(),
            "seed {seed} round {round}: lost {missing:?}"
        );
        assert_whole(place, &bus);
    }
}

/// The ids queued and processed, as one consistent view: the queue is
/// listed before and after the processed area, and again until it did not
/// change in between. On a server a killed client's last statement may
/// still commit after the client is gone (the server finishes it), so a
/// move can land between two listings; moves only go from the queue to
/// the processed area, so an unchanged queue brackets a true view.
fn placed(raw: &dyn Backend) -> (BTreeSet<EventId>, BTreeSet<EventId>) {
    let hub = agent("hub");
    let ids = |names: Vec<String>| -> BTreeSet<EventId> {
        names.into_iter().map(|e| e.id().clone()).collect()
    };
    loop {
        let before = ids(crate::listed(raw, &hub, "queue"));
        let processed = ids(crate::listed(raw, &hub, "processed"));
        if ids(crate::listed(raw, &hub, "queue")) == before {
            return (before, processed);
        }
    }
}

fn sigkill_mid_ack(place: &Place) {
    let seed = Jitter::seed_from_time();
    let mut jitter = Jitter::new(seed);
    let t = TempState::new();
    let bus = place.open(&t.state);
    let raw = place.backend(&t.state);
    let hub = agent("hub");
    let mut published = BTreeSet::new();
    crash_publisher(&bus, 300, |l| {
        published.insert(EventId::new(l.strip_prefix("done ").unwrap()).unwrap());
    });
    let mut acked = BTreeSet::new();
    for round in 0..3 {
        let mut child = kit::spawn(ENTRY, "crash-ack", &[place.spec(t.state.root())]);
        let rx = collect(&mut child);
        // The last round may find nothing left to acknowledge.
        while let Ok(line) = rx.recv_timeout(Duration::from_secs(60)) {
            if let Some(id) = line.strip_prefix("acked ") {
                acked.insert(EventId::new(id).unwrap());
                break;
            }
        }
        thread::sleep(Duration::from_millis(10 + jitter.below(60)));
        kit::kill9(&mut child);
        acked.extend(ids_after(&rx, "acked "));
        let (queued, processed) = placed(&*raw);
        assert!(queued.is_disjoint(&processed), "seed {seed} round {round}");
        let union: BTreeSet<_> = queued.union(&processed).cloned().collect();
        assert_eq!(union, published, "seed {seed} round {round}");
        assert!(acked.is_subset(&processed), "seed {seed} round {round}");
        assert_whole(place, &bus);
    }
    // What the killed ackers left is still pending, in order, and can be
    // acked. On a server the last killed acker's statement may still
    // commit after the listing (see `placed`): an event it moved answers
    // "already acknowledged", and is in the processed area.
    for e in bus.pending(&hub).unwrap().events {
        if !bus.ack_event(&hub, &e).unwrap() {
            let (queued, processed) = placed(&*raw);
            assert!(
                processed.contains(&e.id) && !queued.contains(&e.id),
                "seed {seed}: {} was neither acked now nor before",
                e.id
            );
        }
    }
    assert_eq!(crate::listed(&*raw, &hub, "processed").len(), 300);
}
