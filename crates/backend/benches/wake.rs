//! Wake latency: a write on one handle, a waiter on another, the time from
//! the start of the write to the waiter's wake-up. Prints the median and
//! p99 on a directory (inotify) and, when `CHIPSET_TEST_PG` names a
//! server, on PostgreSQL (`LISTEN/NOTIFY`, the goal is under 10 ms on
//! loopback).
//!
//! `cargo bench -p chipset-backend --bench wake` (`WAKE_ROUNDS`, default 300).

#![allow(clippy::print_stdout, reason = "a bench reports its figures")]

use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use chipset_backend::{Backend, Dir, FsBackend, PgBackend, PgOptions, Wake};

fn main() {
    // `cargo test --benches` runs this with `--bench` absent: stay quick.
    let quick = !std::env::args().any(|a| a == "--bench");
    let rounds: usize = if quick {
        3
    } else {
        std::env::var("WAKE_ROUNDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(300)
    };
    let tmp = tempfile::tempdir().unwrap();
    let fs = FsBackend::open(tmp.path()).unwrap();
    let again = FsBackend::open(tmp.path()).unwrap();
    report(
        "directory (inotify)",
        &measure(Arc::new(fs), Arc::new(again), rounds),
    );
    match std::env::var("CHIPSET_TEST_PG") {
        Ok(url) if !url.is_empty() => {
            let schema = format!("bench_wake_{}", std::process::id());
            let options = || PgOptions::with_schema(schema.clone());
            let writer = PgBackend::open_with(&url, options()).unwrap();
            let waiter = PgBackend::open_with(&url, options()).unwrap();
            report(
                "PostgreSQL (LISTEN/NOTIFY)",
                &measure(Arc::new(writer), Arc::new(waiter), rounds),
            );
            let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            c.batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
                .unwrap();
        }
        _ => println!("PostgreSQL: not measured (CHIPSET_TEST_PG is not set)"),
    }
}

/// Returns each round's latency: a write on `writer`, a wait on `waiter`.
fn measure(writer: Arc<dyn Backend>, waiter: Arc<dyn Backend>, rounds: usize) -> Vec<Duration> {
    let dir = Dir::new("bench").unwrap().join("wake").unwrap();
    let mut wait = waiter
        .watch(std::slice::from_ref(&dir), Duration::from_secs(60))
        .unwrap();
    let (go, started) = mpsc::channel::<()>();
    let (sent, at) = mpsc::channel::<Instant>();
    let d = dir.clone();
    let t = thread::spawn(move || {
        for i in 0..rounds {
            if started.recv().is_err() {
                return;
            }
            // Let the waiter block first.
            thread::sleep(Duration::from_millis(2));
            let k = d.key(&format!("{i:06}.json")).unwrap();
            let t0 = Instant::now();
            let _ = writer.create(&k, b"{}").unwrap();
            sent.send(t0).unwrap();
        }
    });
    let mut out = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        go.send(()).unwrap();
        let wake = wait.wait(Duration::from_secs(10)).unwrap();
        let woke = Instant::now();
        assert_eq!(wake, Wake::Changed);
        let t0 = at.recv().unwrap();
        out.push(woke.saturating_duration_since(t0));
        // Drain a second event of the same write (inotify sends several).
        while wait.wait(Duration::from_millis(1)).unwrap() == Wake::Changed {}
    }
    drop(go);
    t.join().unwrap();
    out
}

fn report(what: &str, latencies: &[Duration]) {
    let mut sorted = latencies.to_vec();
    sorted.sort();
    let at = |q: f64| sorted[((sorted.len() as f64 - 1.0) * q).round() as usize];
    println!(
        "{what}: {} wakes, median {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        sorted.len(),
        at(0.5).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        sorted[sorted.len() - 1].as_secs_f64() * 1e3
    );
}
