//! Real processes: locked increments from many processes, and SIGKILL at random moments.

use std::fs;
use std::path::Path;
use std::thread;
use std::time::Duration;

use chipset_store::{Channel, Decision, Error, ReadOutcome, StateDir, StatePath};
use chipset_testkit::{self as kit, Jitter, TempState};
use serde::{Deserialize, Serialize};

const ENTRY: &str = "procs::child_entry";

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Counter {
    n: u64,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Record {
    n: u64,
    pad: String,
}

fn increment(state: &StateDir, path: &StatePath, times: u64) {
    for _ in 0..times {
        state
            .update(path, |cur: ReadOutcome<Counter>| {
                let n = match cur {
                    ReadOutcome::Missing => 0,
                    ReadOutcome::Value(c) => c.n,
                    ReadOutcome::Corrupt(c) => return Err(Error::Corrupt(c)),
                    ReadOutcome::Unsupported(u) => return Err(Error::Unsupported(u)),
                };
                Ok::<_, Error>(Decision::Write(Counter { n: n + 1 }, ()))
            })
            .unwrap();
    }
}

/// Replaces a file and appends to a log `limit` times, numbering on from what
/// the previous writer left, and prints each committed step.
fn crash_writer(state: &StateDir, limit: u64, mut out: impl FnMut(&str)) {
    let dir = state.channel_dir(Channel::new("loop")).unwrap();
    let log = state.log(&dir.join_static("log.jsonl")).unwrap();
    let in_file = match state
        .read_json::<Record>(&dir.join_static("value.json"))
        .unwrap()
    {
        ReadOutcome::Value(r) => r.n,
        ReadOutcome::Missing => 0,
        ReadOutcome::Corrupt(c) => panic!("value file corrupt at start: {c}"),
        ReadOutcome::Unsupported(u) => panic!("value file unsupported at start: {u}"),
    };
    let in_log = log
        .read_from::<Record>(0)
        .unwrap()
        .records
        .iter()
        .map(|r| r.n)
        .max()
        .unwrap_or(0);
    let start = in_file.max(in_log) + 1;
    out(&format!("start {start}"));
    for n in start..start.saturating_add(limit) {
        // Vary the size so a torn write would show.
        let pad = "x".repeat((n as usize * 37) % 3000);
        state
            .write_json(
                &dir.join_static("value.json"),
                &Record {
                    n,
                    pad: pad.clone(),
                },
            )
            .unwrap();
        out(&format!("replaced {n}"));
        log.append(&Record { n, pad }).unwrap();
        out(&format!("appended {n}"));
    }
}

#[test]
fn child_entry() {
    if let Some(role) = kit::child_role() {
        let state = StateDir::open(role.arg(0)).unwrap();
        match role.name.as_str() {
            "increment" => {
                let path = kit::state_path(&state, "loop/counter.json");
                kit::wait_for_file(Path::new(role.arg(1)));
                increment(&state, &path, role.parse(2));
            }
            "crash-writer" => crash_writer(&state, u64::MAX, |line| {
                use std::io::Write;
                let mut stdout = std::io::stdout().lock();
                writeln!(stdout, "{line}").unwrap();
                stdout.flush().unwrap();
            }),
            other => panic!("unknown role {other}"),
        }
        return;
    }
    // Not a child: run both roles in-process on tiny inputs.
    let t = TempState::new();
    let path = t
        .state
        .channel_dir(Channel::new("loop"))
        .unwrap()
        .join_static("counter.json");
    increment(&t.state, &path, 3);
    assert_eq!(
        t.state.read_json::<Counter>(&path).unwrap(),
        ReadOutcome::Value(Counter { n: 3 })
    );
    let mut seen = Vec::new();
    crash_writer(&t.state, 2, |l| seen.push(l.to_owned()));
    assert_eq!(
        seen,
        [
            "start 1",
            "replaced 1",
            "appended 1",
            "replaced 2",
            "appended 2"
        ]
    );
}

#[test]
fn locked_increments_from_four_processes_all_count() {
    let t = TempState::new();
    let go = t.scratch("go");
    let root = t.state.root().to_str().unwrap().to_owned();
    let mut children: Vec<_> = (0..4)
        .map(|_| {
            kit::spawn(
                ENTRY,
                "increment",
                &[root.clone(), go.to_str().unwrap().into(), "250".into()],
            )
        })
        .collect();
    fs::write(&go, "").unwrap();
    for c in &mut children {
        kit::wait_ok(c, Duration::from_secs(300));
    }
    let path = t.at("loop/counter.json");
    assert_eq!(
        t.state.read_json::<Counter>(&path).unwrap(),
        ReadOutcome::Value(Counter { n: 1000 })
    );
}

#[test]
fn sigkill_at_random_moments_never_leaves_a_partial_file() {
    let seed = Jitter::seed_from_time();
    let mut jitter = Jitter::new(seed);
    let t = TempState::new();
    let root = t.state.root().to_str().unwrap().to_owned();
    let dir = t.state.channel(Channel::new("loop"));
    let mut last_replaced = 0u64;
    let mut last_appended = 0u64;
    let mut before = 0u64;
    for round in 0..50 {
        let mut child = kit::spawn(ENTRY, "crash-writer", std::slice::from_ref(&root));
        let lines = kit::lines(&mut child);
        let reader = thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<String>>());
        thread::sleep(Duration::from_millis(20 + jitter.below(60)));
        kit::kill9(&mut child);
        let lines = reader.join().unwrap();
        let mut start = None;
        let mut acked_this_round = None;
        for line in &lines {
            if let Some(n) = line.strip_prefix("start ") {
                start = Some(n.parse::<u64>().unwrap());
            } else if let Some(n) = line.strip_prefix("replaced ") {
                last_replaced = n.parse().unwrap();
                acked_this_round = Some(last_replaced);
            } else if let Some(n) = line.strip_prefix("appended ") {
                last_appended = n.parse().unwrap();
            }
        }
        let ctx = format!("seed {seed} round {round}");

        // The value file holds the last value acknowledged this round or the
        // one in flight after it; with nothing acknowledged, the value the
        // round began with or the child's first.
        let value = match t
            .state
            .read_json::<Record>(&dir.join_static("value.json"))
            .unwrap()
        {
            ReadOutcome::Value(v) => {
                assert_eq!(v.pad.len(), (v.n as usize * 37) % 3000, "{ctx}");
                v.n
            }
            ReadOutcome::Missing => 0,
            other => panic!("{ctx}: value file is not whole: {other:?}"),
        };
        let allowed = match (acked_this_round, start) {
            (Some(k), _) => vec![k, k + 1],
            (None, Some(s)) => vec![before, s],
            (None, None) => vec![before],
        };
        assert!(
            allowed.contains(&value),
            "{ctx}: file has {value}, allowed {allowed:?}"
        );
        before = value;
        // No real name holds anything but the two files.
        for name in t.state.list(&dir).unwrap() {
            assert!(
                name == "value.json" || name == "log.jsonl",
                "{ctx}: unexpected {name}"
            );
        }
        // The log yields only whole records, each acknowledged append among them.
        let log = t.state.log(&dir.join_static("log.jsonl")).unwrap();
        let read = log.read_from::<Record>(0).unwrap();
        let numbers: Vec<u64> = read.records.iter().map(|r| r.n).collect();
        assert!(
            numbers.contains(&last_appended) || last_appended == 0,
            "{ctx}: lost {last_appended}"
        );
        // An append of n starts only after "replaced n" was printed.
        assert!(
            numbers.iter().all(|&n| n <= last_replaced),
            "{ctx}: {numbers:?}"
        );
        assert!(
            numbers.windows(2).all(|p| p[0] < p[1]),
            "{ctx}: not increasing: {numbers:?}"
        );
        // Torn fragments are reported, never returned as records.
        for r in &read.records {
            assert_eq!(r.pad.len(), (r.n as usize * 37) % 3000, "{ctx}");
        }
    }
    let swept = t
        .state
        .sweep_temps(
            &t.state.root_path(),
            Duration::ZERO,
            chipset_store::DoctorMode::Fix,
        )
        .unwrap()
        .len();
    let leftovers = t
        .state
        .sweep_temps(&dir, Duration::ZERO, chipset_store::DoctorMode::Check)
        .unwrap();
    assert!(
        leftovers.is_empty(),
        "temps left after sweep: {leftovers:?} (swept {swept})"
    );
}
