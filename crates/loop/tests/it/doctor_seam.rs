//! The loop doctor's repair driven through the store's I/O seam: a fault
//! (EIO, ENOSPC) at every call of `doctor(Fix)` on damaged loop files,
//! and every power-cut state of it. No run loses a byte of the damaged
//! files or a healthy record, no report claims a fix a check finds undone,
//! and a later Fix finishes the repair ([`chipset_testkit::sweep_doctor`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chipset_loop::{Error, LoopState};
use chipset_store::{DoctorMode, RealIo, Report, SharedIo, StateDir};
use chipset_testkit::{DoctorCase, cut_doctor, manual_state, state_path, sweep_doctor};
use serde_json::json;

const T: &str = "2026-03-05T10:40:01.123Z";
const MAIL: &str = "1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab";
const BAD_INCIDENT: &[u8] = b"{ \"step\": \"torn";
const BAD_ENTRY: &[u8] = b"[\"not an entry\"]";
const BAD_ROUND: &[u8] = b"{\"task\": 3}";
/// A bad line between two records of the witness log: moved aside.
const BAD_LINE: &[u8] = b"not json\n";
const WITNESS_LOG: [&[u8]; 2] = [b"{\"a\":1}\n", b"{\"a\":2}\n"];
/// A torn tail, alone, on the dispatcher log: an append that never
/// finished, which the doctor cuts (as documented), so it is not among the
/// damaged bytes that must survive; the whole record before it is.
const DISPATCHER_LOG: &[u8] = b"{\"action\":\"x\"}\n";
const TORN: &[u8] = b"{\"action\":\"to";

/// Corrupt incident (w1), ledger entry (b1) and round (T1) files, a bad
/// line in the witness log and a torn tail on the dispatcher's, beside a
/// healthy incident, ledger entry and round of each kind.
struct Damaged;

/// The loops' state, and the root it is on.
struct World {
    loops: LoopState,
    state: StateDir,
}

fn assignment(a: &str, b: &str) -> serde_json::Value {
    json!({
        "agent": a, "generation": 1,
        "work": {"assigned_at": "2026-03-05T10:35:00.123Z", "bead_id": b, "title": "t"}
    })
}

fn put(root: &Path, rel: &str, bytes: &[u8]) {
    let state = manual_state(root, Arc::new(RealIo));
    let path = state_path(&state, &format!("loop/{rel}"));
    state.write_bytes(&path, bytes).unwrap();
}

/// The bytes of the loop file `rel`.
fn read(state: &StateDir, rel: &str) -> Vec<u8> {
    let path = state_path(state, &format!("loop/{rel}"));
    state
        .read_bytes(&path)
        .unwrap()
        .into_result()
        .unwrap()
        .unwrap()
}

fn put_json(root: &Path, rel: &str, mut v: serde_json::Value, extra: serde_json::Value) {
    let map = v.as_object_mut().unwrap();
    map.extend(extra.as_object().unwrap().clone());
    put(root, rel, v.to_string().as_bytes());
}

impl DoctorCase for Damaged {
    type World = World;
    type Error = Error;

    fn name(&self) -> &str {
        "loop"
    }

    fn plant(&self, root: &Path) {
        let incident = |a: &str| {
            json!({
                "assignment": assignment(a, "b"), "last_activity": T, "opened_at": T,
                "witness": "witness", "updated_at": T
            })
        };
        put_json(
            root,
            "witness/incidents/w0.json",
            incident("w0"),
            json!({"step": "checking", "health_check_at": T}),
        );
        put_json(
            root,
            "witness/incidents/w2.json",
            incident("w2"),
            json!({"step": "escalated", "health_check_at": T, "stall_warning_at": T,
                   "escalated_at": T, "mail": MAIL}),
        );
        put(root, "witness/incidents/w1.json", BAD_INCIDENT);
        let entry = |b: &str| json!({"bead_id": b, "title": "t", "submitted_at": T, "attempts": [], "updated_at": T});
        put_json(
            root,
            "dispatcher/beads/b0.json",
            entry("b0"),
            json!({"state": "queued"}),
        );
        put_json(
            root,
            "dispatcher/beads/b2.json",
            entry("b2"),
            json!({"state": "done", "assignment": assignment("w5", "b2"),
                   "completed_at": T, "cleared": true}),
        );
        put(root, "dispatcher/beads/b1.json", BAD_ENTRY);
        put(
            root,
            "dispatcher/agents.json",
            json!({"suspended": {"w3": {"bead_id": "b3", "since": T}}})
                .to_string()
                .as_bytes(),
        );
        for (task, phase) in [("T2", "committed"), ("T3", "executor")] {
            put(
                root,
                &format!("rounds/{task}.json"),
                json!({"task": task, "round": 1, "phase": phase, "history": [],
                       "started_at": T, "updated_at": T})
                .to_string()
                .as_bytes(),
            );
        }
        put(root, "rounds/T1.json", BAD_ROUND);
        put(
            root,
            "witness/log.jsonl",
            &[WITNESS_LOG[0], BAD_LINE, WITNESS_LOG[1]].concat(),
        );
        put(
            root,
            "dispatcher/log.jsonl",
            &[DISPATCHER_LOG, TORN].concat(),
        );
    }

    fn open(&self, root: &Path, io: SharedIo) -> World {
        let state = manual_state(root, io);
        World {
            loops: LoopState::new(state.clone()),
            state,
        }
    }

    fn doctor(&self, w: &World, mode: DoctorMode) -> Result<Report, Error> {
        w.loops.doctor(mode)
    }

    fn damaged(&self) -> Vec<(PathBuf, Vec<u8>)> {
        vec![
            (
                "loop/witness/incidents/w1.json".into(),
                BAD_INCIDENT.to_vec(),
            ),
            ("loop/dispatcher/beads/b1.json".into(), BAD_ENTRY.to_vec()),
            ("loop/rounds/T1.json".into(), BAD_ROUND.to_vec()),
            ("loop/witness/log.jsonl".into(), BAD_LINE.to_vec()),
        ]
    }

    /// Every healthy record counts in its state, and every whole log
    /// record is in its log, in order.
    fn healthy(&self, w: &World, what: &str) {
        let c = w.loops.counts().unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(
            (c.open_incidents, c.escalated_incidents),
            (1, 1),
            "{what}: an incident lost: {c:?}"
        );
        assert_eq!(
            (c.queued, c.done),
            (1, 1),
            "{what}: a ledger entry lost: {c:?}"
        );
        assert_eq!(c.suspended_agents, 1, "{what}: {c:?}");
        assert_eq!(
            (c.rounds_active, c.rounds_committed),
            (1, 1),
            "{what}: a round lost: {c:?}"
        );
        let witness = read(&w.state, "witness/log.jsonl");
        let whole: Vec<&[u8]> = witness
            .split_inclusive(|b| *b == b'\n')
            .filter(|l| *l != BAD_LINE)
            .collect();
        assert_eq!(whole, WITNESS_LOG, "{what}: a witness log record lost");
        let dispatcher = read(&w.state, "dispatcher/log.jsonl");
        assert!(
            dispatcher.starts_with(DISPATCHER_LOG),
            "{what}: the dispatcher log's record lost"
        );
    }
}

#[test]
fn every_fault_in_a_loop_repair_keeps_the_data_and_a_later_fix_finishes() {
    sweep_doctor(&Damaged);
}

#[test]
fn every_power_cut_in_a_loop_repair_keeps_the_data_and_a_later_fix_finishes() {
    cut_doctor(&Damaged);
}
