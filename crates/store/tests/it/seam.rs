//! Every store primitive driven through both test backends of the I/O seam:
//! a fault at every call (EIO and ENOSPC), and every power-cut state.
//!
//! For every N, the operation succeeds, or fails with nothing visible
//! changed, or fails with `Error::OutcomeUnknown` and a state from which a
//! retry (following the idempotent-retry rule) is a no-op success. Every
//! power-cut state reads without corruption and keeps every operation that
//! had returned. Every publish order is driven: `FileThenDir` (an fsync
//! per file) and `WriteBackThenDir` (a write-back, made durable by the
//! directory sync, on a recorder that models an in-order journal).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use chipset_store::{
    Decision, Error, JsonLog, ReadOutcome, SharedIo, StateDir, StateOptions, StatePath, SyncOrder,
};
use chipset_testkit::state_path as sp;
use chipset_testkit::{EIO, ENOSPC, Fault, FaultIo, IoOp, RecordIo, visible};

const ORDERS: [SyncOrder; 2] = [SyncOrder::FileThenDir, SyncOrder::WriteBackThenDir];
use serde_json::{Value, json};

type Op = fn(&StateDir) -> Result<(), Error>;

/// One primitive: how to set up its world, run it (retry-safe, by the
/// idempotent-retry rule), and tell whether it applied.
#[derive(Clone)]
struct Case {
    name: &'static str,
    setup: fn(&StateDir),
    run: Op,
    applied: fn(&Path) -> bool,
    /// A log the setup left with bad lines on purpose: a power-cut state may
    /// hold exactly these bytes (before the commit point) or a clean log.
    dirty: Option<&'static [u8]>,
}

fn hooks(root: &Path) -> PathBuf {
    root.join("hooks")
}

fn read(path: &Path) -> Option<Vec<u8>> {
    fs::read(path).ok()
}

fn log_ids(root: &Path, rel: &str) -> Vec<String> {
    let state = StateDir::open(root).unwrap();
    let path = sp(&state, rel);
    let log = state.log_reader(&path).unwrap();
    let c = log.read_from::<Value>(0).unwrap();
    assert!(
        c.bad_lines.is_empty(),
        "bad lines in {}: {:?}",
        path.display(),
        c.bad_lines
    );
    c.records
        .iter()
        .map(|r| r["id"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Creates `path` with `bytes`; an existing file with the same bytes is the
/// first attempt's success (same id, same content), other bytes are refused.
fn create_idempotent(state: &StateDir, path: &StatePath, bytes: &[u8]) -> Result<(), Error> {
    match state.create_new(path, bytes) {
        Err(Error::AlreadyExists { .. }) if read(path).as_deref() == Some(bytes) => Ok(()),
        other => other,
    }
}

/// Appends the record with `id` unless the log has it already.
fn append_idempotent(log: &JsonLog, ids: &[&str]) -> Result<(), Error> {
    let have: Vec<String> = log
        .read_from::<Value>(0)?
        .records
        .iter()
        .filter_map(|r| r["id"].as_str().map(str::to_owned))
        .collect();
    let missing: Vec<Value> = ids
        .iter()
        .filter(|id| !have.iter().any(|h| h == *id))
        .map(|id| json!({"id": id, "event": "sent"}))
        .collect();
    match missing.len() {
        0 => Ok(()),
        1 => log.append(&missing[0]),
        _ => log.append_batch(&missing).map(drop),
    }
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "durable replace",
            setup: |s| {
                let p = sp(s, "hooks/a.json");
                s.write_json(&p, &json!({"status": "empty"})).unwrap();
            },
            run: |s| s.write_json(&sp(s, "hooks/a.json"), &json!({"status": "active"})),
            applied: |r| {
                read(&hooks(r).join("a.json"))
                    .is_some_and(|b| b.starts_with(b"{\n  \"status\": \"active\""))
            },
            dirty: None,
        },
        Case {
            name: "no-clobber create in a new directory",
            setup: |_| {},
            run: |s| {
                let p = sp(s, "mail/inbox/bob/1-x.json");
                create_idempotent(s, &p, b"{\"id\": \"1-x\"}\n")
            },
            applied: |r| {
                read(&r.join("mail/inbox/bob/1-x.json")).as_deref() == Some(b"{\"id\": \"1-x\"}\n")
            },
            dirty: None,
        },
        Case {
            name: "batch create",
            setup: |_| {},
            run: |s| {
                let dir = sp(s, "mail/inbox/carol");
                let items: Vec<(StatePath, Vec<u8>)> = (0..3)
                    .map(|i| {
                        let path = dir.join(format!("{i}.json")).unwrap();
                        (path, format!("{i}\n").into_bytes())
                    })
                    .collect();
                match s.create_new_batch(&items) {
                    Ok(_) => {}
                    Err(e) => return Err(e),
                }
                // A retry's AlreadyExists is the first attempt's success only with the same bytes.
                for (p, b) in &items {
                    assert_eq!(
                        read(p).as_deref(),
                        Some(&b[..]),
                        "batch left {}",
                        p.display()
                    );
                }
                Ok(())
            },
            applied: |r| {
                (0..3).all(|i| read(&r.join(format!("mail/inbox/carol/{i}.json"))).is_some())
            },
            dirty: None,
        },
        Case {
            name: "move",
            setup: |s| {
                s.create_new(&sp(s, "mail/inbox/bob/7.json"), b"7\n")
                    .unwrap();
            },
            run: |s| {
                let from = sp(s, "mail/inbox/bob/7.json");
                let to = sp(s, "mail/archive/7.json");
                match s.move_noclobber(&from, &to) {
                    // Already moved by the attempt that failed after its commit point.
                    Err(Error::NotFound { .. }) if read(&to).is_some() => Ok(()),
                    // A power cut kept it in both places: the same bytes are the same message.
                    Err(Error::AlreadyExists { .. }) if read(&to) == read(&from) => Ok(()),
                    other => other,
                }
            },
            applied: |r| read(&r.join("mail/archive/7.json")).is_some(),
            dirty: None,
        },
        Case {
            name: "append",
            setup: |s| {
                let log = s.log(&sp(s, "mail/manifest.jsonl")).unwrap();
                append_idempotent(&log, &["0"]).unwrap();
            },
            run: |s| append_idempotent(&s.log(&sp(s, "mail/manifest.jsonl"))?, &["1"]),
            applied: |r| log_ids(r, "mail/manifest.jsonl") == ["0", "1"],
            dirty: None,
        },
        Case {
            name: "append to a new log",
            // `StateDir::log` makes the log's directory; the append makes the file.
            setup: |s| drop(s.log(&sp(s, "bus/a/control.jsonl")).unwrap()),
            run: |s| append_idempotent(&s.log(&sp(s, "bus/a/control.jsonl"))?, &["1"]),
            applied: |r| log_ids(r, "bus/a/control.jsonl") == ["1"],
            dirty: None,
        },
        Case {
            name: "batch append",
            setup: |s| {
                let log = s.log(&sp(s, "mail/manifest.jsonl")).unwrap();
                append_idempotent(&log, &["0"]).unwrap();
            },
            run: |s| append_idempotent(&s.log(&sp(s, "mail/manifest.jsonl"))?, &["1", "2"]),
            applied: |r| log_ids(r, "mail/manifest.jsonl") == ["0", "1", "2"],
            dirty: None,
        },
        Case {
            name: "update",
            setup: |s| {
                s.write_json(&sp(s, "hooks/u.json"), &json!({"applied": []}))
                    .unwrap();
            },
            run: |s| {
                s.update(&sp(s, "hooks/u.json"), |cur: ReadOutcome<Value>| {
                    let mut v = cur.into_result()?.unwrap_or(json!({"applied": []}));
                    let list = v["applied"].as_array_mut().unwrap();
                    // Repeating a transition that already applied is success.
                    if list.contains(&json!("t1")) {
                        return Ok(Decision::Keep(()));
                    }
                    list.push(json!("t1"));
                    Ok(Decision::Write(v, ()))
                })
            },
            applied: |r| {
                let v: Value =
                    serde_json::from_slice(&read(&hooks(r).join("u.json")).unwrap()).unwrap();
                v["applied"] == json!(["t1"])
            },
            dirty: None,
        },
        Case {
            name: "log repair",
            setup: |s| {
                let p = sp(s, "mail/manifest.jsonl");
                s.ensure_dir(&sp(s, "mail")).unwrap();
                fs::write(&p, DIRTY_LOG).unwrap();
            },
            run: |s| {
                s.log(&sp(s, "mail/manifest.jsonl"))?
                    .repair::<Value>()
                    .map(drop)
            },
            applied: |r| {
                let state = StateDir::open(r).unwrap();
                let c = state
                    .log_reader(&sp(&state, "mail/manifest.jsonl"))
                    .unwrap()
                    .read_from::<Value>(0)
                    .unwrap();
                c.bad_lines.is_empty() && c.torn_tail.is_none() && c.records.len() == 2
            },
            dirty: Some(DIRTY_LOG),
        },
    ]
}

const DIRTY_LOG: &[u8] = b"{\"id\":\"0\"}\nnot json\n{\"id\":\"1\"}\n{\"id\":";

pub(crate) fn open(root: &Path, io: SharedIo) -> StateDir {
    StateDir::open_with(
        root,
        StateOptions {
            io,
            ..StateOptions::default()
        },
    )
    .unwrap()
}

#[derive(Debug, Default)]
struct Tally {
    injected: u64,
    ok: u64,
    unchanged: u64,
    outcome_unknown: u64,
}

/// Runs `case` with a fault at call `n` (1-based, of any kind) and checks the outcome.
fn run_faulted(case: &Case, order: SyncOrder, n: u64, errno: i32, tally: &mut Tally) {
    let tmp = tempfile::tempdir().unwrap();
    let fault = FaultIo::with_order(Fault::nth(0, EIO), order);
    let state = open(tmp.path(), fault.clone());
    (case.setup)(&state);
    let before = visible(state.root());
    fault.set(Fault::nth(n, errno));
    let result = (case.run)(&state);
    tally.injected += fault.injected();
    let what = format!("{} ({order:?}) with errno {errno} at call {n}", case.name);
    match result {
        Ok(()) => {
            tally.ok += 1;
            assert!(
                (case.applied)(state.root()),
                "{what}: returned Ok but did not apply"
            );
        }
        Err(Error::OutcomeUnknown { .. }) => {
            tally.outcome_unknown += 1;
        }
        Err(e) => {
            tally.unchanged += 1;
            assert_eq!(
                visible(state.root()),
                before,
                "{what}: failed ({e}) but changed what readers see"
            );
        }
    }
    // Whatever happened, a retry with the same id on a healthy disk is a success that applies once.
    fault.disarm();
    (case.run)(&state).unwrap_or_else(|e| panic!("{what}: retry failed: {e}"));
    assert!((case.applied)(state.root()), "{what}: retry did not apply");
}

#[test]
#[allow(
    clippy::print_stderr,
    reason = "prints the figures for the report (shown with --nocapture)"
)]
fn every_fault_leaves_nothing_visible_or_an_outcome_unknown_that_a_retry_settles() {
    let mut totals = BTreeMap::new();
    for (case, order) in cases()
        .into_iter()
        .flat_map(|c| ORDERS.map(|o| (c.clone(), o)))
    {
        // Count the calls of a clean run.
        let tmp = tempfile::tempdir().unwrap();
        let fault = FaultIo::with_order(Fault::nth(0, EIO), order);
        let state = open(tmp.path(), fault.clone());
        (case.setup)(&state);
        fault.set(Fault::nth(0, EIO));
        (case.run)(&state).unwrap();
        assert!(
            (case.applied)(state.root()),
            "{}: a clean run did not apply",
            case.name
        );
        let calls = fault.counted();
        assert!(calls > 0, "{}: made no calls through the seam", case.name);
        let mut tally = Tally::default();
        for errno in [EIO, ENOSPC] {
            for n in 1..=calls {
                run_faulted(&case, order, n, errno, &mut tally);
            }
        }
        assert_eq!(
            tally.injected,
            2 * calls,
            "{}: every planned fault was injected",
            case.name
        );
        totals.insert((case.name, format!("{order:?}")), tally);
    }
    // The figures for the report: `cargo test -- --nocapture` shows them.
    for ((name, order), t) in &totals {
        eprintln!(
            "fault {name} ({order}): injected {}, ok {}, unchanged {}, outcome unknown {}",
            t.injected, t.ok, t.unchanged, t.outcome_unknown
        );
    }
}

#[test]
fn a_sticky_full_disk_fails_cleanly_and_heals_when_space_returns() {
    for case in cases() {
        let tmp = tempfile::tempdir().unwrap();
        let fault = FaultIo::passthrough();
        let state = open(tmp.path(), fault.clone());
        (case.setup)(&state);
        let before = visible(state.root());
        // Writes and creates run out of space; everything else works, as on a full disk.
        fault.set(Fault {
            nth: 1,
            kinds: vec![IoOp::Write, IoOp::Create, IoOp::Mkdir],
            errno: ENOSPC,
            sticky: true,
        });
        // Under a watchdog: an operation that retries what failed for want
        // of space as if its temp name were taken would never end.
        let failed = chipset_testkit::returns(case.name, {
            let (run, state) = (case.run, state.clone());
            move || run(&state)
        });
        match failed {
            Err(Error::OutcomeUnknown { .. }) => {
                panic!("{}: a full disk is a clean failure", case.name)
            }
            Err(_) => assert_eq!(
                visible(state.root()),
                before,
                "{}: changed on a full disk",
                case.name
            ),
            Ok(()) => panic!("{}: succeeded with no space", case.name),
        }
        fault.disarm();
        (case.run)(&state).unwrap();
        assert!((case.applied)(state.root()), "{}", case.name);
    }
}

#[test]
#[allow(
    clippy::print_stderr,
    reason = "prints the figures for the report (shown with --nocapture)"
)]
fn every_power_cut_state_reads_clean_and_keeps_what_returned() {
    let mut counts = BTreeMap::new();
    for (case, order) in cases()
        .into_iter()
        .flat_map(|c| ORDERS.map(|o| (c.clone(), o)))
    {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("state");
        // Set up on the real disk, then record from there.
        (case.setup)(&StateDir::open(&root).unwrap());
        let rec = RecordIo::start_with_order(&root, order).unwrap();
        let state = open(&root, rec.clone());
        (case.run)(&state).unwrap();
        rec.mark(case.name);
        let states = rec.crash_states();
        assert!(
            states.len() > 1,
            "{}: a power cut can leave more than one state",
            case.name
        );
        let mut applied_after_return = 0;
        for (i, cut) in states.iter().enumerate() {
            let dir = tmp.path().join(format!("cut{i}"));
            cut.materialize(&dir).unwrap();
            let back = StateDir::open(&dir).unwrap();
            check_reads_clean(&back, &dir, case.dirty);
            if cut.returned.iter().any(|r| r == case.name) {
                applied_after_return += 1;
                assert!(
                    (case.applied)(&dir),
                    "{}: lost after returning, at call {}",
                    case.name,
                    cut.crash_point
                );
            }
            // And from any cut, the retry settles it.
            (case.run)(&back).unwrap_or_else(|e| panic!("{}: retry after cut {i}: {e}", case.name));
            assert!((case.applied)(&dir), "{}", case.name);
        }
        assert!(
            applied_after_return > 0,
            "{}: some state follows the return",
            case.name
        );
        counts.insert(
            (case.name, format!("{order:?}")),
            (rec.calls(), states.len()),
        );
    }
    for ((name, order), (calls, states)) in &counts {
        eprintln!("power cut {name} ({order}): {calls} calls, {states} distinct states");
    }
}

/// Reads every JSON file and log under `dir`: none is corrupt, no log has a bad line.
fn check_reads_clean(state: &StateDir, dir: &Path, dirty: Option<&[u8]>) {
    for (rel, bytes) in visible(dir) {
        if bytes.is_none() {
            continue;
        }
        let path = sp(state, rel.to_str().unwrap());
        if rel.extension().is_some_and(|e| e == "jsonl") {
            if dirty.is_some() && bytes.as_deref() == dirty {
                continue;
            }
            let c = state
                .log_reader(&path)
                .unwrap()
                .read_from::<Value>(0)
                .unwrap();
            assert!(c.bad_lines.is_empty(), "bad line in {}", rel.display());
        } else if rel.extension().is_some_and(|e| e == "json") {
            let r = state.read_json::<Value>(&path).unwrap();
            assert!(
                matches!(r, ReadOutcome::Value(_)),
                "{}: {r:?}",
                rel.display()
            );
        }
    }
}
