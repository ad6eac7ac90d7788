//! Benchmarks for chipset-bus, each beside a hand-written baseline in the same run:
//!
//! - `publish/bus` vs `publish/raw_durable_create`: one event published
//!   (no de-duplication key) against std::fs doing a durable no-clobber
//!   create by hand (create_new temp, write, sync_all, rename, sync dir).
//!   `publish/bus_with_key` shows the cost of a de-duplication key (a lock
//!   and a second durable write).
//! - `wake/publish_to_wake`: from the start of a publish in this process to
//!   the moment a `Waiter` in a child process (this binary, re-run with an
//!   environment variable) returns, measured on the system clock, which both
//!   processes share. A median of separate samples is printed too.
//! - `pending/bus_10k` vs `pending/raw_read_10k`: reading a queue of 10,000
//!   events, against listing, sorting, reading and parsing the files by hand;
//!   `pending/counts_10k` is one agent's status line: two listings and its presence file.
//! - On PostgreSQL (issue 30), when `CHIPSET_TEST_PG` names a server: the
//!   median and p99 of a publish (plain and keyed, `Bus::with_backend`)
//!   and of a publish to the wake-up of a waiter on another client
//!   (LISTEN/NOTIFY), printed beside criterion's figures.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "a bench times the store against plain std::fs and builds its fixtures with it"
)]
#![allow(
    clippy::print_stderr,
    reason = "a benchmark prints its own figures beside criterion's"
)]

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use chipset_backend::{Backend, PgBackend, PgOptions};
use chipset_bus::{Bus, BusConfig, EventId, NewEvent, Priority};
use chipset_store::{AgentId, Clock, StateDir, SystemClock};
use criterion::{BenchmarkId, Criterion};
use serde_json::json;

const CHILD_ENV: &str = "CHIPSET_BUS_BENCH_WAITER";

fn unix_nanos() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

/// The child: waits on agent `wake` and says when each event arrived.
fn child_waiter(root: &str) {
    let bus = Bus::new(StateDir::open(root).expect("state root"));
    let agent = AgentId::new("wake").expect("agent");
    let mut waiter = bus.waiter(&agent).expect("waiter");
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready {}", waiter.is_notified()).expect("stdout");
    out.flush().expect("stdout");
    loop {
        if waiter
            .wait(Duration::from_secs(60))
            .expect("wait")
            .is_empty()
        {
            return;
        }
        let at = unix_nanos();
        if writeln!(out, "woke {at}")
            .and_then(|()| out.flush())
            .is_err()
        {
            return;
        }
    }
}

fn payload() -> serde_json::Value {
    json!({"task": "M005-S007-T0002", "summary": "tests pass; ready for review"})
}

static RAW_N: AtomicU64 = AtomicU64::new(0);

/// What a durable no-clobber create costs when written by hand.
fn raw_durable_create(dir: &Path, bytes: &[u8]) {
    let n = RAW_N.fetch_add(1, Ordering::Relaxed);
    let name = format!("2-{n:020}-raw.json");
    let tmp = dir.join(format!(".{name}.tmp"));
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .expect("create temp");
    f.write_all(bytes).expect("write");
    f.sync_all().expect("sync");
    drop(f);
    fs::rename(&tmp, dir.join(name)).expect("rename");
    File::open(dir)
        .and_then(|d| d.sync_all())
        .expect("sync dir");
}

fn bench_publish(c: &mut Criterion) {
    let tmp = tempfile::tempdir_in(std::env::temp_dir()).expect("tempdir");
    let bus = Bus::new(StateDir::open(tmp.path().join("state")).expect("state"));
    let agent = AgentId::new("bench").expect("agent");
    let event = NewEvent::new("worker-1", "task-done")
        .with_priority(Priority::High)
        .with_payload(payload());
    // Same size of file as the bus writes.
    let sample = bus.publish(&agent, &event).expect("publish");
    let bytes = chipset_store::StateDir::to_canonical_json(sample.delivered().expect("delivered"))
        .expect("json");
    let raw_dir = tmp.path().join("raw");
    fs::create_dir(&raw_dir).expect("raw dir");

    // Disk load from other processes drifts over seconds, so each sample
    // interleaves the two operations and times only its own: both see the
    // same conditions.
    let mut g = c.benchmark_group("publish");
    g.bench_function("raw_durable_create", |b| {
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            for _ in 0..iters {
                let t = Instant::now();
                raw_durable_create(&raw_dir, &bytes);
                timed += t.elapsed();
                let _ = bus.publish(&agent, &event).expect("publish");
            }
            timed
        });
    });
    g.bench_function("bus", |b| {
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            for _ in 0..iters {
                raw_durable_create(&raw_dir, &bytes);
                let t = Instant::now();
                let _ = bus.publish(&agent, &event).expect("publish");
                timed += t.elapsed();
            }
            timed
        });
    });
    let keyed = AtomicU64::new(0);
    g.bench_function("bus_with_key", |b| {
        b.iter(|| {
            let k = keyed.fetch_add(1, Ordering::Relaxed);
            let e = event.clone().with_dedup_key(format!("key-{k}"));
            bus.publish(&agent, &e).expect("publish")
        });
    });
    g.finish();
    // Medians of the same interleaving, less sensitive to the long fsync tail.
    let (mut raw, mut ours) = (Vec::new(), Vec::new());
    for _ in 0..300 {
        let t = Instant::now();
        raw_durable_create(&raw_dir, &bytes);
        raw.push(t.elapsed());
        let t = Instant::now();
        let _ = bus.publish(&agent, &event).expect("publish");
        ours.push(t.elapsed());
    }
    raw.sort_unstable();
    ours.sort_unstable();
    let (r, o) = (raw[raw.len() / 2], ours[ours.len() / 2]);
    eprintln!(
        "publish (paired, 300 each): raw median {:.0} us, bus median {:.0} us, ratio {:.2}",
        r.as_secs_f64() * 1e6,
        o.as_secs_f64() * 1e6,
        o.as_secs_f64() / r.as_secs_f64()
    );
}

fn bench_wake(c: &mut Criterion) {
    let tmp = tempfile::tempdir_in(std::env::temp_dir()).expect("tempdir");
    let root = tmp.path().join("state");
    let bus = Bus::new(StateDir::open(&root).expect("state"));
    let agent = AgentId::new("wake").expect("agent");
    let mut child = Command::new(std::env::current_exe().expect("exe"))
        .env(CHILD_ENV, &root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn waiter");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let ready = lines.next().expect("ready line").expect("read");
    eprintln!("wake: child waiter {ready} (true = inotify, false = rescans)");
    let event = NewEvent::new("worker-1", "task-done").with_payload(payload());
    // Returns (publish start -> wake, publish return -> wake) in nanoseconds.
    let mut once = || {
        let start = unix_nanos();
        let _ = bus.publish(&agent, &event).expect("publish");
        let returned = unix_nanos();
        let line = lines.next().expect("woke line").expect("read");
        let woke: i128 = line
            .strip_prefix("woke ")
            .and_then(|n| n.parse().ok())
            .expect("woke {nanos}");
        (woke - start, woke - returned)
    };
    let mut g = c.benchmark_group("wake");
    g.bench_function("publish_to_wake", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (from_start, _) = once();
                total += Duration::from_nanos(from_start.max(0) as u64);
            }
            total
        });
    });
    g.finish();
    let mut from_start = Vec::new();
    let mut from_return = Vec::new();
    for _ in 0..300 {
        let (s, r) = once();
        from_start.push(s);
        from_return.push(r);
    }
    from_start.sort_unstable();
    from_return.sort_unstable();
    let us = |v: &[i128], q: usize| v[v.len() * q / 100] as f64 / 1000.0;
    eprintln!(
        "wake: publish start -> child woke: median {:.0} us, p90 {:.0} us; publish return -> child woke: median {:.0} us, p90 {:.0} us (negative: woke before publish returned)",
        us(&from_start, 50),
        us(&from_start, 90),
        us(&from_return, 50),
        us(&from_return, 90)
    );
    // The child is ours; end it by its handle.
    let _ = child.kill();
    let _ = child.wait();
}

fn bench_pending(c: &mut Criterion) {
    const N: usize = 10_000;
    let tmp = tempfile::tempdir_in(std::env::temp_dir()).expect("tempdir");
    let state = StateDir::open(tmp.path().join("state")).expect("state");
    let bus = Bus::new(state.clone());
    let agent = AgentId::new("flooded").expect("agent");
    let queue = bus.ensure_queue(&agent).expect("queue");
    // Set-up only: files in the documented format, written without syncs.
    for i in 0..N {
        let p = Priority::ALL[i % 4];
        let id = EventId::generate(&SystemClock);
        let created = SystemClock.now();
        let body = json!({
            "id": id.as_str(), "source": "worker-1", "kind": "tick",
            "priority": p.as_str(), "created_at": created.to_string(), "payload": payload(),
        });
        let name = format!("{}-{id}-worker-1-tick.json", i % 4);
        fs::write(
            queue.as_path().join(name),
            chipset_store::StateDir::to_canonical_json(&body).expect("json"),
        )
        .expect("write");
    }
    assert_eq!(bus.pending(&agent).expect("pending").events.len(), N);

    let mut g = c.benchmark_group("pending");
    g.sample_size(20);
    g.bench_with_input(BenchmarkId::new("raw_read", N), &queue, |b, dir| {
        b.iter(|| {
            let mut names: Vec<_> = fs::read_dir(dir)
                .expect("list")
                .map(|e| e.expect("entry").file_name())
                .collect();
            names.sort_unstable();
            names
                .iter()
                .map(|n| {
                    let bytes = fs::read(dir.as_path().join(n)).expect("read");
                    serde_json::from_slice::<serde_json::Value>(&bytes).expect("parse")
                })
                .count()
        });
    });
    g.bench_with_input(BenchmarkId::new("bus", N), &agent, |b, a| {
        b.iter(|| bus.pending(a).expect("pending").events.len());
    });
    g.bench_with_input(BenchmarkId::new("counts", N), &agent, |b, a| {
        b.iter(|| bus.agent_status(a).expect("status").pending_total());
    });
    g.finish();
}

fn main() {
    if let Ok(root) = std::env::var(CHILD_ENV) {
        child_waiter(&root);
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    bench_publish(&mut c);
    bench_wake(&mut c);
    bench_pending(&mut c);
    bench_server();
    c.final_summary();
}

/// Median and p99 of `samples`, in microseconds.
fn spread(samples: &mut [Duration]) -> (f64, f64) {
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    (at(0.5).as_secs_f64() * 1e6, at(0.99).as_secs_f64() * 1e6)
}

/// The bus on PostgreSQL: publish, keyed publish, and publish to wake on
/// another client, each timed alone, in a schema of its own.
fn bench_server() {
    let Some(url) = std::env::var("CHIPSET_TEST_PG")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        eprintln!("server: skipped (CHIPSET_TEST_PG is not set)");
        return;
    };
    let schema = format!("bench_bus_{}", std::process::id());
    let open = || -> Arc<dyn Backend> {
        Arc::new(PgBackend::open_with(&url, PgOptions::with_schema(&schema)).expect("server"))
    };
    let tmp = tempfile::tempdir_in(std::env::temp_dir()).expect("tempdir");
    let state = StateDir::open(tmp.path().join("state")).expect("state");
    let mut config = BusConfig::default();
    // A wake within the run is a notification, never the rescan.
    config.watch.rescan_interval = Duration::from_secs(120);
    let bus = Bus::with_backend(state.clone(), config.clone(), open());
    let waiting = Bus::with_backend(state, config, open());
    let agent = AgentId::new("bench").expect("agent");
    let event = NewEvent::new("worker-1", "task-done")
        .with_priority(Priority::High)
        .with_payload(payload());
    let _ = bus.publish(&agent, &event).expect("warm");
    let mut plain = Vec::new();
    let mut keyed = Vec::new();
    for i in 0..300 {
        let t = Instant::now();
        let _ = bus.publish(&agent, &event).expect("publish");
        plain.push(t.elapsed());
        let e = event.clone().with_dedup_key(format!("key-{i}"));
        let t = Instant::now();
        let _ = bus.publish(&agent, &e).expect("publish");
        keyed.push(t.elapsed());
    }
    let listener = AgentId::new("listener").expect("agent");
    let mut waiter = waiting.waiter(&listener).expect("waiter");
    let mut wake = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        let _ = bus.publish(&listener, &event).expect("publish");
        let arrived = waiter.wait(Duration::from_secs(30)).expect("wait");
        assert!(!arrived.is_empty(), "no wake-up");
        wake.push(t.elapsed());
    }
    for (what, samples) in [
        ("publish", &mut plain),
        ("publish with a key", &mut keyed),
        ("publish to wake (another client)", &mut wake),
    ] {
        let (median, p99) = spread(samples);
        eprintln!("server: {what}: median {median:.0} us, p99 {p99:.0} us");
    }
    chipset_backend::testing::drop_schema(&url, &schema);
}
