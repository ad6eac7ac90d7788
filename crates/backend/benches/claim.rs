//! Claim throughput (issue 30): threads draining 10,000 rows with
//! `Backend::claim`, each claim offering a window of 32 names of its
//! thread's snapshot and writing the row's owner (`owners/{row}`) in the
//! same step. Prints the claims per second and the median and p99 time of
//! one claim on a directory (the set's lock, then a durable create) and,
//! when `CHIPSET_TEST_PG` names a server, on PostgreSQL (`FOR UPDATE SKIP
//! LOCKED` and the insert in one transaction), and checks that every row
//! was claimed exactly once. Seeding the rows is not measured (on a
//! directory it skips the syncs).
//!
//! `cargo bench -p chipset-backend --bench claim` (`CLAIM_ROWS`, default
//! 10,000; `CLAIM_THREADS`, default 4).

#![allow(clippy::print_stdout, reason = "a bench reports its figures")]

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use chipset_backend::{
    Backend, Claim, ClaimView, ClaimWrite, Dir, FsBackend, Key, PgBackend, PgOptions,
};
use chipset_store::{StateDir, StateOptions};

const WINDOW: usize = 32;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn main() {
    // `cargo test --benches` runs this with `--bench` absent: stay quick.
    let quick = !std::env::args().any(|a| a == "--bench");
    let rows = if quick { 40 } else { env("CLAIM_ROWS", 10_000) };
    let threads = env("CLAIM_THREADS", 4);
    let tmp = tempfile::tempdir().unwrap();
    let seed = StateDir::open_with(
        tmp.path(),
        StateOptions {
            io: chipset_testkit::NoSyncIo::shared(),
            ..StateOptions::default()
        },
    )
    .unwrap();
    let names = seed_rows(&FsBackend::new(seed), rows);
    let handles = (0..threads)
        .map(|_| Arc::new(FsBackend::open(tmp.path()).unwrap()) as Arc<dyn Backend>)
        .collect();
    report("directory", &drain_all(handles, &names));
    match std::env::var("CHIPSET_TEST_PG") {
        Ok(url) if !url.is_empty() => {
            let schema = format!("bench_claim_{}", std::process::id());
            let open = || PgBackend::open_with(&url, PgOptions::with_schema(schema.clone()));
            seed_rows(&open().unwrap(), rows);
            let handles = (0..threads)
                .map(|_| Arc::new(open().unwrap()) as Arc<dyn Backend>)
                .collect();
            report("PostgreSQL", &drain_all(handles, &names));
            let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            c.batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
                .unwrap();
        }
        _ => println!("PostgreSQL: not measured (CHIPSET_TEST_PG is not set)"),
    }
}

fn key(dir: &str, name: &str) -> Key {
    Dir::new(dir).unwrap().key(name).unwrap()
}

fn seed_rows(b: &dyn Backend, n: usize) -> Vec<String> {
    let names: Vec<String> = (0..n).map(|i| format!("{i:05}.json")).collect();
    for name in &names {
        let _ = b.create(&key("q", name), b"{}\n").unwrap();
    }
    names
}

/// What the threads measured: each claim's time, and the whole run's.
struct Run {
    claims: Vec<Duration>,
    total: Duration,
}

fn drain_all(handles: Vec<Arc<dyn Backend>>, names: &[String]) -> Run {
    let names = Arc::new(names.to_vec());
    let barrier = Arc::new(Barrier::new(handles.len()));
    let start = Instant::now();
    let workers: Vec<_> = handles
        .into_iter()
        .enumerate()
        .map(|(i, b)| {
            let (names, barrier) = (Arc::clone(&names), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                drain(b.as_ref(), &format!("t{i}"), &names)
            })
        })
        .collect();
    let mut claims: Vec<Duration> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    let total = start.elapsed();
    assert_eq!(claims.len(), names.len(), "every row claimed exactly once");
    claims.sort();
    Run { claims, total }
}

/// Claims for `me` until no row is left; returns each successful claim's time.
fn drain(b: &dyn Backend, me: &str, names: &[String]) -> Vec<Duration> {
    let (lock, q) = (key("q", "table.json"), Dir::new("q").unwrap());
    let mut times = Vec::new();
    let mut at = 0;
    let mut last_pass = false;
    loop {
        let window: Vec<String> = if last_pass {
            let owned = b.list(&Dir::new("owners").unwrap()).unwrap();
            names
                .iter()
                .filter(|n| owned.binary_search(n).is_err())
                .cloned()
                .collect()
        } else {
            names[at..(at + WINDOW).min(names.len())].to_vec()
        };
        if window.is_empty() {
            return times;
        }
        let claim = Claim {
            lock: &lock,
            dir: &q,
            candidates: &window,
        };
        let mut decide = |view: &mut dyn ClaimView, name: &str| {
            if view.read(&key("owners", name))?.is_some() {
                return Ok(None);
            }
            Ok(Some(vec![ClaimWrite {
                key: key("owners", name),
                expected: None,
                value: me.as_bytes().to_vec(),
            }]))
        };
        let t = Instant::now();
        let claimed = b.claim(&claim, &mut decide).unwrap();
        match claimed {
            Some(c) => {
                times.push(t.elapsed());
                if !last_pass {
                    at = names.binary_search(&c.name).unwrap() + 1;
                }
            }
            None if last_pass => return times,
            None => at += WINDOW,
        }
        if at >= names.len() {
            last_pass = true;
        }
    }
}

fn report(what: &str, run: &Run) {
    let n = run.claims.len();
    let at = |q: f64| run.claims[((n as f64 * q) as usize).min(n - 1)];
    println!(
        "{what}: {n} claims in {:.1} s ({:.0}/s); one claim: median {:.2} ms, p99 {:.2} ms",
        run.total.as_secs_f64(),
        n as f64 / run.total.as_secs_f64(),
        at(0.5).as_secs_f64() * 1000.0,
        at(0.99).as_secs_f64() * 1000.0,
    );
}
