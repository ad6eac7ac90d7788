//! The bus doctor's repairs driven through the store's I/O seam: a fault
//! (EIO, ENOSPC) at every call of `doctor(Fix)` on a damaged agent
//! directory, and every power-cut state of it. No run loses a byte of the
//! damaged files, a pending event or a control command; the registry
//! never points past its log; no report claims a fix a check finds undone;
//! and a later Fix finishes the repair ([`chipset_testkit::sweep_doctor`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chipset_bus::{Bus, ControlOp, Error, EventId, NewEvent, Priority, Resource};
use chipset_store::{DoctorMode, RealIo, Report, SharedIo, StateDir, StatePath};
use chipset_testkit::{DoctorCase, cut_doctor, manual_state, state_path, sweep_doctor};

use crate::agent;

/// What is damaged, in agent `a`'s directory.
#[derive(Clone, Copy)]
enum Damage {
    /// A corrupt event and a foreign file in the queue, a queued copy of
    /// an acknowledged event, and a corrupt presence, registry, nag state
    /// and de-duplication record: each moved aside (the copy removed).
    Files,
    /// A bad line between commands of the control log, and a torn tail,
    /// under a registry applied to the log's end: the lines are moved
    /// aside and the registry rebuilt.
    Log,
}

/// The healthy pending events: (id, recipient).
const PENDING: [(&str, &str); 3] = [
    ("1772706900100-9b3e0c1a-5d2f-4e1b-8a6c-0123456789a0", "a"),
    ("1772706900101-9b3e0c1a-5d2f-4e1b-8a6c-0123456789a1", "a"),
    ("1772706900102-9b3e0c1a-5d2f-4e1b-8a6c-0123456789a2", "b"),
];
/// An event acknowledged by `a`, a copy of which is left in its queue.
const ACKED: &str = "1772706900103-9b3e0c1a-5d2f-4e1b-8a6c-0123456789a3";
/// An event of `a` whose file is overwritten with [`BAD_EVENT`].
const BROKEN: &str = "1772706900104-9b3e0c1a-5d2f-4e1b-8a6c-0123456789a4";
const BAD_EVENT: &[u8] = b"{\"id\": \"torn";
const FOREIGN: &[u8] = b"not an event";
const BAD_PRESENCE: &[u8] = b"[\"presence\"]";
const BAD_REGISTRY: &[u8] = b"{\"applied_offset\": ";
const BAD_NAG: &[u8] = b"[\"nag\"]";
const BAD_DEDUP: &[u8] = b"{\"dedup\": ";
const BAD_LINE: &[u8] = b"not a command\n";
const TORN: &[u8] = b"{\"op\":\"reg";
/// The resources `a` registers, in order; the registry holds them all.
const TARGETS: [&str; 3] = ["x", "y", "z"];

fn open(root: &Path, io: SharedIo) -> Bus {
    let state = manual_state(root, io);
    Bus::new(state)
}

fn event(id: &str) -> NewEvent {
    NewEvent::new("w", "k")
        .with_priority(Priority::Normal)
        .with_id(EventId::new(id).unwrap())
}

/// The file of `id` (a normal event from `w` of kind `k`) in `a`'s
/// queue, relative to the root: `{P}-{id}-{source}-{kind}.json`.
/// The bytes of the file at `path`, which must be there.
fn read(state: &StateDir, path: &StatePath) -> Vec<u8> {
    state
        .read_bytes(path)
        .unwrap()
        .into_result()
        .unwrap()
        .unwrap()
}

fn queued(id: &str) -> PathBuf {
    PathBuf::from(format!("bus/a/queue/2-{id}-w-k.json"))
}

fn register(bus: &Bus, target: &str) {
    bus.control(
        &agent("a"),
        ControlOp::Register,
        &Resource::new("chat", target),
    )
    .unwrap();
}

impl DoctorCase for Damage {
    type World = Bus;
    type Error = Error;

    fn name(&self) -> &str {
        match self {
            Damage::Files => "bus files",
            Damage::Log => "bus control log",
        }
    }

    fn plant(&self, root: &Path) {
        let bus = open(root, Arc::new(RealIo));
        let a = agent("a");
        for (id, to) in PENDING {
            assert!(
                bus.publish(&agent(to), &event(id))
                    .unwrap()
                    .delivered()
                    .is_some()
            );
        }
        register(&bus, TARGETS[0]);
        register(&bus, TARGETS[1]);
        bus.apply_control(&a).unwrap();
        let state = bus.state();
        let at = |rel: &str| state_path(state, &format!("bus/a/{rel}"));
        let put = |rel: &str, bytes: &[u8]| state.write_bytes(&at(rel), bytes).unwrap();
        let append =
            |rel: &str, tail: &[u8]| put(rel, &[read(state, &at(rel)), tail.to_vec()].concat());
        match self {
            Damage::Files => {
                register(&bus, TARGETS[2]);
                bus.apply_control(&a).unwrap();
                let acked = bus.publish(&a, &event(ACKED)).unwrap();
                let acked = acked.delivered().unwrap().clone();
                assert!(bus.ack_event(&a, &acked).unwrap());
                let done = read(state, &at(&format!("processed/{}", acked.file_name())));
                put(&format!("queue/{}", acked.file_name()), &done);
                assert!(
                    bus.publish(&a, &event(BROKEN))
                        .unwrap()
                        .delivered()
                        .is_some()
                );
                let broken = queued(BROKEN);
                state
                    .write_bytes(&state_path(state, broken.to_str().unwrap()), BAD_EVENT)
                    .unwrap();
                put("queue/README", FOREIGN);
                put("presence.json", BAD_PRESENCE);
                put("registry.json", BAD_REGISTRY);
                put("nag.json", BAD_NAG);
                put("dedup/key.json", BAD_DEDUP);
            }
            Damage::Log => {
                append("control.jsonl", BAD_LINE);
                register(&bus, TARGETS[2]);
                // Applied to the end: the bad line skipped.
                bus.apply_control(&a).unwrap();
                append("control.jsonl", TORN);
            }
        }
    }

    fn open(&self, root: &Path, io: SharedIo) -> Bus {
        open(root, io)
    }

    fn doctor(&self, bus: &Bus, mode: DoctorMode) -> Result<Report, Error> {
        bus.doctor(mode)
    }

    fn damaged(&self) -> Vec<(PathBuf, Vec<u8>)> {
        match self {
            Damage::Files => vec![
                (queued(BROKEN), BAD_EVENT.to_vec()),
                ("bus/a/queue/README".into(), FOREIGN.to_vec()),
                ("bus/a/presence.json".into(), BAD_PRESENCE.to_vec()),
                ("bus/a/registry.json".into(), BAD_REGISTRY.to_vec()),
                ("bus/a/nag.json".into(), BAD_NAG.to_vec()),
                ("bus/a/dedup/key.json".into(), BAD_DEDUP.to_vec()),
            ],
            Damage::Log => vec![
                ("bus/a/control.jsonl".into(), BAD_LINE.to_vec()),
                ("bus/a/control.jsonl".into(), TORN.to_vec()),
            ],
        }
    }

    /// Every pending event reads, the acknowledged one stays processed,
    /// every command is in the control log, and a readable registry points
    /// into the log (at its end, it holds every resource).
    fn healthy(&self, bus: &Bus, what: &str) {
        for to in ["a", "b"] {
            let pending = bus
                .pending(&agent(to))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let ids: BTreeSet<&str> = pending.events.iter().map(|e| e.id.as_str()).collect();
            for (id, _) in PENDING.iter().filter(|(_, t)| *t == to) {
                assert!(ids.contains(id), "{what}: event {id} lost: {ids:?}");
            }
        }
        if matches!(self, Damage::Files) {
            let processed = crate::processed(bus, &agent("a"));
            assert!(
                processed.iter().any(|n| n.contains(ACKED)),
                "{what}: the acknowledged event lost: {processed:?}"
            );
        }
        let bytes = read(bus.state(), &state_path(bus.state(), "bus/a/control.jsonl"));
        let targets: Vec<String> = bytes
            .split(|b| *b == b'\n')
            .filter_map(|l| serde_json::from_slice::<serde_json::Value>(l).ok())
            .filter_map(|v| v.get("target").and_then(|t| t.as_str()).map(str::to_owned))
            .collect();
        assert_eq!(targets, TARGETS, "{what}: a command lost");
        let len = u64::try_from(bytes.len()).unwrap();
        // A corrupt registry fails closed; a missing one is rebuilt.
        if let Ok(registry) = crate::registry(bus, &agent("a")) {
            let offset = registry.applied_offset;
            assert!(
                offset <= len,
                "{what}: the registry is applied to {offset}, past the log's end {len}"
            );
            if offset == len {
                let held: Vec<&str> = registry
                    .resources
                    .keys()
                    .map(|r| r.target.as_str())
                    .collect();
                assert_eq!(held, TARGETS, "{what}: the registry lost a resource");
            }
        }
    }
}

#[test]
fn every_fault_in_a_bus_repair_keeps_the_data_and_a_later_fix_finishes() {
    for case in [Damage::Files, Damage::Log] {
        sweep_doctor(&case);
    }
}

#[test]
fn every_power_cut_in_a_bus_repair_keeps_the_data_and_a_later_fix_finishes() {
    for case in [Damage::Files, Damage::Log] {
        cut_doctor(&case);
    }
}
