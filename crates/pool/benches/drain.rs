//! Claims per second on both backends: 4 agents (threads, each with its
//! own handle) drain a pool of 2,000 items, each claim followed by a
//! `done`. Prints, per backend, the claims per second and one claim's
//! median and p99 (the `done` is outside the claim's time, inside the
//! rate's). The PostgreSQL half runs when `CHIPSET_TEST_PG` names a
//! server (a fresh schema, dropped at the end).
//!
//! `cargo bench -p chipset-pool --bench drain`

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::print_stdout,
    reason = "a bench builds its fixtures in a temporary directory and prints its figures"
)]

use std::collections::HashSet;
use std::thread;
use std::time::{Duration, Instant};

use chipset_backend::testing::TestSchema;
use chipset_pool::{ItemId, NewItem, Pool, ReadyFilter};
use chipset_store::{AgentId, StateDir};

const ITEMS: usize = 2_000;
const AGENTS: usize = 4;

fn post(pool: &Pool) {
    let lead = AgentId::new("lead").unwrap();
    let items: Vec<NewItem> = (0..ITEMS)
        .map(|n| {
            NewItem::new(format!("work item {n} with a title of typical length"))
                .with_id(ItemId::new(format!("bench-{n:05}")).unwrap())
                .with_priority(u8::try_from(n % 5).unwrap())
        })
        .collect();
    for chunk in items.chunks(500) {
        pool.post_many(&lead, chunk).unwrap();
    }
}

fn drain(name: &str, open: &(dyn Fn() -> Pool + Sync)) {
    post(&open());
    let started = Instant::now();
    let per_agent: Vec<(Vec<String>, Vec<Duration>)> = thread::scope(|s| {
        let handles: Vec<_> = (0..AGENTS)
            .map(|i| {
                s.spawn(move || {
                    let pool = open();
                    let me = AgentId::new(format!("agent-{i}")).unwrap();
                    let (mut ids, mut times) = (Vec::new(), Vec::new());
                    loop {
                        let t = Instant::now();
                        let Some(c) = pool.claim_next(&me, &ReadyFilter::new()).unwrap() else {
                            break;
                        };
                        times.push(t.elapsed());
                        pool.done(&me, &c.entry.id).unwrap();
                        ids.push(String::from(c.entry.id));
                    }
                    (ids, times)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let took = started.elapsed();
    let mut seen = HashSet::new();
    let mut times = Vec::new();
    for (ids, t) in per_agent {
        for id in ids {
            assert!(seen.insert(id), "an item claimed twice");
        }
        times.extend(t);
    }
    assert_eq!(seen.len(), ITEMS, "every item claimed");
    times.sort();
    let at = |q: f64| times[((times.len() as f64 - 1.0) * q) as usize];
    println!(
        "{name}: {ITEMS} claims (+ done) by {AGENTS} agents in {:.1} s: {:.0} claims/s; one claim: median {:.1} ms, p99 {:.1} ms",
        took.as_secs_f64(),
        ITEMS as f64 / took.as_secs_f64(),
        at(0.5).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let state = StateDir::open(tmp.path()).unwrap();
    drain("directory", &|| Pool::new(state.clone()));
    let Some(schema) = TestSchema::fresh("drain") else {
        println!("postgres: skipped, CHIPSET_TEST_PG is not set");
        return;
    };
    let local = tempfile::tempdir().unwrap();
    let local = StateDir::open(local.path()).unwrap();
    // A handle per agent, each with its own connections; the schema is
    // dropped with `schema`.
    drain("postgres", &|| {
        Pool::with_backend(local.clone(), schema.open())
    });
}
