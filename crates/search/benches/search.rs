//! Search at scale: 100,000 messages (`SEARCH_BENCH_MESSAGES` to change),
//! 200 agents, in the directory `TMPDIR` names.
//!
//! - the first build of the index from every file;
//! - `query_warm`: queries on an index that is caught up (the catch-up
//!   before each finds nothing new), p50/p95/p99 over 1,000 queries, then
//!   criterion's own figure. Goal (issue 29): p95 under 20 ms.
//! - `catch_up_1000`: a catch-up after 1,000 new messages. Goal: under 2 s.
//! - `send` alone and while another thread searches in a loop: writers
//!   never touch the index, so a send costs the same (issue 29: "writers
//!   are not slowed").
//!
//! `cargo bench -p chipset-search --bench search` prints the figures.

#![allow(clippy::print_stdout, reason = "a bench reports its figures on stdout")]

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chipset_mail::{Mail, NewMessage};
use chipset_search::{Query, SearchIndex};
use chipset_store::{AgentId, StateDir, TaskId};
use criterion::Criterion;

const AGENTS: usize = 200;

/// A small deterministic generator, so every run indexes the same text.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// 4,000 made-up words: `w0` … `w3999`, drawn with a skew so that some
/// are common and most are rare, as in real text.
fn word(rng: &mut Rng) -> String {
    let a = rng.below(4000);
    let b = rng.below(4000);
    format!("w{}", a.min(b))
}

fn draft(rng: &mut Rng, i: usize) -> NewMessage {
    let from = AgentId::new(format!("agent-{}", rng.below(AGENTS))).unwrap();
    let to = AgentId::new(format!("agent-{}", rng.below(AGENTS))).unwrap();
    let task = TaskId::new(format!("task-{}", i / 50)).unwrap();
    let subject = format!("{}-{}", word(rng), word(rng));
    let body: Vec<String> = (0..30).map(|_| word(rng)).collect();
    NewMessage::notify(from, to, task, subject, body.join(" "))
}

fn send_many(mail: &Mail, rng: &mut Rng, from: usize, n: usize) {
    let mut i = from;
    while i < from + n {
        let batch: Vec<NewMessage> = (i..(from + n).min(i + 1000))
            .map(|j| draft(rng, j))
            .collect();
        mail.send_batch(&batch).unwrap();
        i += batch.len();
    }
}

fn percentiles(mut times: Vec<Duration>) -> String {
    times.sort();
    let at = |p: f64| times[((times.len() as f64 * p) as usize).min(times.len() - 1)];
    format!(
        "p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        at(0.50).as_secs_f64() * 1e3,
        at(0.95).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        times.last().unwrap().as_secs_f64() * 1e3
    )
}

fn queries(rng: &mut Rng) -> Vec<Query> {
    (0..50)
        .map(|i| match i % 5 {
            0 => Query::new(word(rng)),
            1 => Query::new(format!("{} {}", word(rng), word(rng))),
            2 => Query::new(word(rng)).from(format!("agent-{}", rng.below(AGENTS))),
            3 => Query::new(format!("w{}*", 100 + rng.below(300))),
            _ => Query::new(format!("{} OR {}", word(rng), word(rng))).kind("notify"),
        })
        .collect()
}

fn main() {
    let n: usize = std::env::var("SEARCH_BENCH_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let tmp = tempfile::tempdir().unwrap();
    println!("state in {}", tmp.path().display());
    let state = StateDir::open(tmp.path().join("state")).unwrap();
    let mail = Mail::new(state.clone());
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let t = Instant::now();
    send_many(&mail, &mut rng, 0, n);
    println!(
        "fixture: {n} messages to {AGENTS} agents in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    let search = SearchIndex::new(state.clone());
    let t = Instant::now();
    let built = search.catch_up().unwrap();
    println!(
        "first build: {} records in {:.2} s",
        built.read,
        t.elapsed().as_secs_f64()
    );

    // Let the folders' stamps settle (a stamp younger than 2 s is read
    // again), then look once so the index holds them.
    std::thread::sleep(Duration::from_millis(3100));
    search.catch_up().unwrap();
    let nothing = search.catch_up().unwrap();
    assert_eq!(nothing.read, 0);

    let qs = queries(&mut rng);
    for q in &qs {
        search.search(q).unwrap();
    }
    let mut times = Vec::new();
    let mut hits = 0;
    for i in 0..1000 {
        let t = Instant::now();
        hits += black_box(search.search(&qs[i % qs.len()]).unwrap()).len();
        times.push(t.elapsed());
    }
    println!(
        "query_warm (1,000 queries, {hits} hits): {}",
        percentiles(times)
    );
    // A fresh handle per query: what one `chipset search` process pays
    // (opening the index) on top.
    let mut times = Vec::new();
    for i in 0..200 {
        let t = Instant::now();
        let fresh = SearchIndex::new(state.clone());
        black_box(fresh.search(&qs[i % qs.len()]).unwrap());
        times.push(t.elapsed());
    }
    println!(
        "query_warm, a new handle each (200 queries): {}",
        percentiles(times)
    );

    let mut times = Vec::new();
    for round in 0..3 {
        send_many(&mail, &mut rng, n + round * 1000, 1000);
        let t = Instant::now();
        let caught = search.catch_up().unwrap();
        times.push(t.elapsed());
        assert_eq!(caught.read, 1000);
    }
    println!(
        "catch_up_1000 (3 rounds): {}",
        times
            .iter()
            .map(|d| format!("{:.0} ms", d.as_secs_f64() * 1e3))
            .collect::<Vec<_>>()
            .join(", ")
    );

    // Sends alone, then while another thread searches without pause.
    let one = |rng: &mut Rng, i: usize| {
        let t = Instant::now();
        mail.send(&draft(rng, i)).unwrap();
        t.elapsed()
    };
    let alone: Vec<Duration> = (0..300).map(|i| one(&mut rng, n + 10_000 + i)).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let searcher = {
        let (stop, search, q) = (stop.clone(), search.clone(), qs[0].clone());
        std::thread::spawn(move || {
            let mut k = 0;
            while !stop.load(Ordering::Relaxed) {
                search.search(&q).unwrap();
                k += 1;
            }
            k
        })
    };
    let busy: Vec<Duration> = (0..300).map(|i| one(&mut rng, n + 20_000 + i)).collect();
    stop.store(true, Ordering::Relaxed);
    let searches = searcher.join().unwrap();
    println!("send alone (300): {}", percentiles(alone));
    println!(
        "send while searching (300, {searches} searches meanwhile): {}",
        percentiles(busy)
    );

    let mut c = Criterion::default()
        .configure_from_args()
        .sample_size(20)
        .measurement_time(Duration::from_secs(5));
    let mut i = 0;
    c.bench_function("query_warm", |b| {
        b.iter(|| {
            i += 1;
            black_box(search.search(&qs[i % qs.len()]).unwrap())
        });
    });
    c.final_summary();
}
