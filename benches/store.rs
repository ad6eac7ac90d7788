//! chipset-store primitives beside hand-written raw baselines of the same syscalls.
//!
//! Each group holds the primitive and its baseline, measured in the same run;
//! compare the two within a group. Goal: each primitive at most 1.15× its
//! baseline, and a batch append of 100 records costs one data sync (so it
//! lands near a single append, not 100 of them).

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chipset_store::{Channel, Decision, Error, ReadOutcome, StateDir};
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

/// Raw durable replace: exclusive temp, write, fsync, rename, fsync directory.
fn raw_replace(dir: &Path, target: &Path, bytes: &[u8]) {
    let tmp = dir.join(format!(".raw.{}.tmp", next()));
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .unwrap();
    f.write_all(bytes).unwrap();
    f.sync_all().unwrap();
    fs::rename(&tmp, target).unwrap();
    sync_dir(dir);
}

/// Raw durable create: temp, write, fsync, hard link into place (no replace), unlink temp, fsync dir.
fn raw_create(dir: &Path, target: &Path, bytes: &[u8]) {
    let tmp = dir.join(format!(".raw.{}.tmp", next()));
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .unwrap();
    f.write_all(bytes).unwrap();
    f.sync_all().unwrap();
    fs::hard_link(&tmp, target).unwrap();
    fs::remove_file(&tmp).unwrap();
    sync_dir(dir);
}

/// Raw durable append: open for append, one write, fdatasync.
fn raw_append(path: &Path, bytes: &[u8]) {
    let mut f = OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .unwrap();
    f.write_all(bytes).unwrap();
    f.sync_data().unwrap();
}

fn setup() -> (tempfile::TempDir, StateDir, PathBuf) {
    let tmp = tempfile::tempdir_in(".").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let state = StateDir::open(tmp.path().join("state")).unwrap();
    let dir = state.channel_dir(Channel::Hooks).unwrap();
    (tmp, state, dir)
}

fn durable_replace(c: &mut Criterion) {
    let (_tmp, state, dir) = setup();
    let value = payload();
    let bytes = chipset_store::to_canonical_json(&value).unwrap();
    let mut g = c.benchmark_group("durable_replace");
    let target = dir.join("raw.json");
    g.bench_function("raw", |b| b.iter(|| raw_replace(&dir, &target, &bytes)));
    let target = dir.join("store.json");
    g.bench_function("store", |b| {
        b.iter(|| state.write_json(&target, &value).unwrap())
    });
    g.finish();
}

fn noclobber_create(c: &mut Criterion) {
    let (_tmp, state, dir) = setup();
    let value = payload();
    let bytes = chipset_store::to_canonical_json(&value).unwrap();
    let mut g = c.benchmark_group("noclobber_create");
    g.bench_function("raw", |b| {
        b.iter(|| raw_create(&dir, &dir.join(format!("raw-{}.json", next())), &bytes));
    });
    g.bench_function("store", |b| {
        b.iter(|| {
            state
                .create_new_json(&dir.join(format!("store-{}.json", next())), &value)
                .unwrap();
        });
    });
    g.finish();
}

fn appends(c: &mut Criterion) {
    let (_tmp, state, dir) = setup();
    let record = json!({"event": "sent", "id": "1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab", "to": "np-executor"});
    let line = chipset_store::to_canonical_line(&record).unwrap();
    let batch: Vec<Value> = (0..100).map(|i| json!({"event": "sent", "n": i})).collect();
    let batch_bytes: Vec<u8> = batch
        .iter()
        .flat_map(|r| chipset_store::to_canonical_line(r).unwrap())
        .collect();

    let mut g = c.benchmark_group("append");
    let raw_path = dir.join("raw.jsonl");
    g.bench_function("raw", |b| b.iter(|| raw_append(&raw_path, &line)));
    let log = state.log(&dir.join("store.jsonl")).unwrap();
    g.bench_function("store", |b| b.iter(|| log.append(&record).unwrap()));
    g.finish();

    let mut g = c.benchmark_group("append_batch_100");
    let raw_path = dir.join("raw-batch.jsonl");
    g.bench_function("raw", |b| b.iter(|| raw_append(&raw_path, &batch_bytes)));
    let log = state.log(&dir.join("store-batch.jsonl")).unwrap();
    g.bench_function("store", |b| b.iter(|| log.append_batch(&batch).unwrap()));
    g.finish();
}

fn locked_rmw(c: &mut Criterion) {
    let (_tmp, state, dir) = setup();
    let mut g = c.benchmark_group("locked_read_modify_write");
    let raw_path = dir.join("raw-counter.json");
    let raw_lock = dir.join(".raw-counter.json.lock");
    fs::write(&raw_path, "0\n").unwrap();
    g.bench_function("raw", |b| {
        b.iter(|| {
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
            raw_replace(&dir, &raw_path, format!("{}\n", n + 1).as_bytes());
            drop(lock);
        });
    });
    let path = dir.join("counter.json");
    g.bench_function("store", |b| {
        b.iter(|| {
            state
                .update(&path, |cur: ReadOutcome<u64>| {
                    let n = cur.value().unwrap_or(0);
                    Ok::<_, Error>(Decision::Write(n + 1, ()))
                })
                .unwrap();
        });
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(60)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
}

criterion_group! {
    name = benches;
    config = config();
    targets = durable_replace, noclobber_create, appends, locked_rmw
}
criterion_main!(benches);
