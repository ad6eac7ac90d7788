//! chipset-store primitives beside hand-written raw baselines of the same syscalls.
//!
//! Each group holds the primitive (`store`) and its baseline (`raw`),
//! measured in the same run. Disks are shared and noisy, and an fsync costs
//! more or less depending on what the journal holds, so the two are
//! interleaved: every timed run of one side is followed by an untimed run of
//! the other, and both see the same mix of disk states. Compare the two
//! within a group. Goal: each primitive at most 1.15× its baseline, and a
//! batch append of 100 records costs one data sync (so it lands near a
//! single append, not 100 of them).

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "a bench times the store against plain std::fs and builds its fixtures with it"
)]
#![allow(clippy::print_stdout, reason = "a benchmark reports its figures")]

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chipset_store::{Decision, Error, ReadOutcome, StateDir, StatePath};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};

static N: AtomicU64 = AtomicU64::new(0);

fn next() -> u64 {
    N.fetch_add(1, Ordering::Relaxed)
}

fn payload() -> Value {
    json!({
        "agent_id": "polecat-alpha",
        "status": "active",
        "work_item": {"bead_id": "gt-abc12", "title": "Add README section", "assigned_at": "2026-03-05T10:30:00.000Z"},
        "last_activity": "2026-03-05T10:32:00.000Z"
    })
}

fn sync_dir(dir: &Path) {
    File::open(dir).unwrap().sync_all().unwrap();
}

/// Raw durable replace: serialize, exclusive temp, write, fsync, rename, fsync directory.
fn raw_replace(dir: &Path, target: &Path, value: &Value) {
    let bytes = serde_json::to_vec_pretty(value).unwrap();
    let tmp = dir.join(format!(".raw.{}.tmp", next()));
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .unwrap();
    f.write_all(&bytes).unwrap();
    f.sync_all().unwrap();
    fs::rename(&tmp, target).unwrap();
    sync_dir(dir);
}

/// Raw durable create: serialize, temp, write, fsync, hard link into place
/// (no replace), unlink temp, fsync directory.
fn raw_create(dir: &Path, target: &Path, value: &Value) {
    let bytes = serde_json::to_vec_pretty(value).unwrap();
    let tmp = dir.join(format!(".raw.{}.tmp", next()));
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .unwrap();
    f.write_all(&bytes).unwrap();
    f.sync_all().unwrap();
    fs::hard_link(&tmp, target).unwrap();
    fs::remove_file(&tmp).unwrap();
    sync_dir(dir);
}

/// Raw durable append: serialize each record as a line, open for append, one write, fdatasync.
fn raw_append(path: &Path, records: &[Value]) {
    let mut buf = Vec::new();
    for r in records {
        serde_json::to_writer(&mut buf, r).unwrap();
        buf.push(b'\n');
    }
    let mut f = OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .unwrap();
    f.write_all(&buf).unwrap();
    f.sync_data().unwrap();
}

fn setup() -> (tempfile::TempDir, StateDir, StatePath) {
    let tmp = tempfile::tempdir_in(".").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let state = StateDir::open(tmp.path().join("state")).unwrap();
    let dir = state
        .channel_dir(chipset::store::Channel::new("hooks"))
        .unwrap();
    (tmp, state, dir)
}

/// How many pairs the robust ratio is taken over.
const PAIRS: usize = 200;

/// Benchmarks `raw` and `ours` in one group, interleaved (see the file docs),
/// then prints the median of per-pair ratios: a figure that disk noise moves
/// far less than it moves two separately measured means.
fn paired(c: &mut Criterion, group: &str, raw: &dyn Fn(), ours: &dyn Fn()) {
    let mut g = c.benchmark_group(group);
    for (name, timed, other) in [("raw", raw, ours), ("store", ours, raw)] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    timed();
                    total += start.elapsed();
                    other();
                }
                total
            });
        });
    }
    g.finish();
    if std::env::args().any(|a| a == "--test") {
        return; // criterion's smoke-test mode: no measurements wanted
    }
    let mut ratios: Vec<f64> = (0..PAIRS)
        .map(|i| {
            // Alternate which side goes first, so neither always follows the other.
            let (first, second) = if i % 2 == 0 { (raw, ours) } else { (ours, raw) };
            let start = Instant::now();
            first();
            let a = start.elapsed().as_secs_f64();
            let start = Instant::now();
            second();
            let b = start.elapsed().as_secs_f64();
            if i % 2 == 0 { b / a } else { a / b }
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    println!(
        "{group}: median per-pair ratio store/raw {:.3} over {PAIRS} pairs",
        ratios[PAIRS / 2]
    );
}

fn durable_replace(c: &mut Criterion) {
    let (_tmp, state, dir) = setup();
    let value = payload();
    let (raw_target, store_target) = (
        dir.as_path().join("raw.json"),
        dir.join_static("store.json"),
    );
    paired(
        c,
        "durable_replace",
        &|| raw_replace(&dir, &raw_target, &value),
        &|| state.write_json(&store_target, &value).unwrap(),
    );
}

fn noclobber_create(c: &mut Criterion) {
    let (_tmp, state, dir) = setup();
    let value = payload();
    paired(
        c,
        "noclobber_create",
        &|| {
            raw_create(
                &dir,
                &dir.as_path().join(format!("raw-{}.json", next())),
                &value,
            )
        },
        &|| {
            state
                .create_new_json(&dir.join(format!("store-{}.json", next())).unwrap(), &value)
                .unwrap();
        },
    );
}

fn appends(c: &mut Criterion) {
    let (_tmp, state, dir) = setup();
    let record = json!({"event": "sent", "id": "1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab", "to": "np-executor"});
    let batch: Vec<Value> = (0..100).map(|i| json!({"event": "sent", "n": i})).collect();

    let (raw_path, log) = (
        dir.as_path().join("raw.jsonl"),
        state.log(&dir.join_static("store.jsonl")).unwrap(),
    );
    paired(
        c,
        "append",
        &|| raw_append(&raw_path, std::slice::from_ref(&record)),
        &|| log.append(&record).unwrap(),
    );

    let (raw_path, log) = (
        dir.as_path().join("raw-batch.jsonl"),
        state.log(&dir.join_static("store-batch.jsonl")).unwrap(),
    );
    paired(
        c,
        "append_batch_100",
        &|| raw_append(&raw_path, &batch),
        &|| {
            log.append_batch(&batch).unwrap();
        },
    );
}

fn locked_rmw(c: &mut Criterion) {
    let (_tmp, state, dir) = setup();
    let raw_path = dir.as_path().join("raw-counter.json");
    let raw_lock = dir.as_path().join(".raw-counter.json.lock");
    fs::write(&raw_path, "0\n").unwrap();
    let path = dir.join_static("counter.json");
    paired(
        c,
        "locked_read_modify_write",
        &|| {
            let lock = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&raw_lock)
                .unwrap();
            lock.lock().unwrap();
            let mut text = String::new();
            File::open(&raw_path)
                .unwrap()
                .read_to_string(&mut text)
                .unwrap();
            let n: u64 = serde_json::from_str(&text).unwrap();
            raw_replace(&dir, &raw_path, &json!(n + 1));
            drop(lock);
        },
        &|| {
            state
                .update(&path, |cur: ReadOutcome<u64>| {
                    let n = cur.value().unwrap_or(0);
                    Ok::<_, Error>(Decision::Write(n + 1, ()))
                })
                .unwrap();
        },
    );
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(40)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(6))
}

criterion_group! {
    name = benches;
    config = config();
    targets = durable_replace, noclobber_create, appends, locked_rmw
}
criterion_main!(benches);
