//! Pool benchmarks:
//!
//! - `claim/10000_items`: `Pool::claim_next` with 10,000 items in the pool
//!   (1,000 of them done, some labelled, blocked or deferred) and 8 other
//!   agents holding items, warm: lock, read the table, read every hook,
//!   pick, one hook assignment. Goal: under 20 ms. The item is handed back
//!   (a hook reassignment) outside the measured time.
//! - `ready/10000_items`: `Pool::ready` over the same pool.
//!
//! The state root is made under `TMPDIR`, so the disk can be chosen.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "a bench builds its fixtures in a temporary directory"
)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use chipset_hook::Hooks;
use chipset_pool::{ItemId, NewItem, Pool, ReadyFilter};
use chipset_store::{AgentId, StateDir, Timestamp};
use criterion::{Criterion, criterion_group, criterion_main};

const ITEMS: usize = 10_000;
/// How many of them are done.
const DONE: usize = 1_000;

fn fixture(dir: &std::path::Path) -> Pool {
    let pool = Pool::new(StateDir::open(dir).unwrap());
    let lead = AgentId::new("lead").unwrap();
    let later = Timestamp::from_unix_ms(4_102_444_800_000);
    let items: Vec<NewItem> = (0..ITEMS)
        .map(|n| {
            let mut item = NewItem::new(format!("work item {n} with a title of typical length"))
                .with_id(ItemId::new(format!("bench-{n:05}")).unwrap())
                .with_priority(u8::try_from(n % 5).unwrap())
                .with_body("a body of a few words, kept in the item file only");
            if n % 7 == 0 {
                item = item.with_labels(["ui", "bug"]);
            }
            if n % 11 == 0 && n > 0 {
                item = item.with_depends_on([ItemId::new(format!("bench-{:05}", n - 1)).unwrap()]);
            }
            if n % 13 == 0 {
                item = item.with_not_before(later);
            }
            item
        })
        .collect();
    // The first items are done, as in a pool that has been worked for a
    // while (finished while the table was small, to keep the setup short).
    let (first, rest) = items.split_at(DONE);
    pool.post_many(&lead, first).unwrap();
    let worker = AgentId::new("worker").unwrap();
    while let Some(c) = pool.claim_next(&worker, &ReadyFilter::new()).unwrap() {
        pool.done(&worker, &c.entry.id).unwrap();
    }
    for chunk in rest.chunks(3_000) {
        pool.post_many(&lead, chunk).unwrap();
    }
    for i in 0..8 {
        let agent = AgentId::new(format!("agent-{i}")).unwrap();
        pool.claim_next(&agent, &ReadyFilter::new()).unwrap();
    }
    pool
}

fn bench(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let pool = fixture(tmp.path());
    let hooks = Hooks::new(pool.state().clone());
    let me = AgentId::new("bencher").unwrap();
    c.bench_function("claim/10000_items", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                let claimed = pool.claim_next(&me, &ReadyFilter::new()).unwrap().unwrap();
                total += start.elapsed();
                hooks.reassign(black_box(&claimed.assignment)).unwrap();
            }
            total
        });
    });
    c.bench_function("ready/10000_items", |b| {
        b.iter(|| black_box(pool.ready(&ReadyFilter::new()).unwrap().len()));
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
