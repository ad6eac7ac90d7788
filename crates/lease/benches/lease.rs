//! Lease benchmarks:
//!
//! - `check/1000_leases`: `Leases::check` of 20 staged paths against 1,000
//!   live leases of 50 agents (globs and literal paths), warm: the pre-commit
//!   guard's cost. Goal: under 20 ms.
//! - `acquire/1000_leases`: one grant (lock, read, conflict check against
//!   1,000 leases, durable replace) followed by its release.
//!
//! The state root is made under `TMPDIR`, so the disk can be chosen.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "a bench builds its fixtures in a temporary directory"
)]

use std::hint::black_box;
use std::time::Duration;

use chipset_lease::{LeaseMode, LeaseRequest, Leases};
use chipset_store::{AgentId, StateDir};
use criterion::{Criterion, criterion_group, criterion_main};

const LEASES: usize = 1_000;

fn fixture(dir: &std::path::Path) -> Leases {
    let leases = Leases::new(StateDir::open(dir).unwrap());
    for i in 0..LEASES {
        let holder = AgentId::new(format!("agent-{}", i % 50)).unwrap();
        let paths: Vec<String> = match i % 3 {
            0 => vec![format!("crates/c{i}/src/**")],
            1 => vec![format!("crates/c{i}/Cargo.toml")],
            _ => vec![format!("docs/d{i}.md"), format!("tests/t{i}/*.rs")],
        };
        let req = LeaseRequest::new(holder, LeaseMode::Exclusive, &paths)
            .with_ttl(Duration::from_secs(6 * 3600))
            .with_reason("benchmark lease with a reason of typical length");
        let _ = leases.acquire(&req).unwrap();
    }
    leases
}

fn bench(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let leases = fixture(tmp.path());
    assert_eq!(leases.live().unwrap().len(), LEASES);
    let checker = AgentId::new("checker").unwrap();
    let staged: Vec<String> = (0..20)
        .map(|j| match j % 4 {
            0 => format!("crates/c{}/src/lib.rs", j * 37),
            1 => format!("crates/c{}/Cargo.toml", j * 41 + 1),
            2 => format!("tests/t{}/it.rs", j * 43 + 2),
            _ => format!("README{j}.md"),
        })
        .collect();
    let blocked = leases.check(&checker, &staged).unwrap();
    assert!(!blocked.is_empty());
    c.bench_function("check/1000_leases", |b| {
        b.iter(|| black_box(leases.check(&checker, black_box(&staged)).unwrap()));
    });
    let holder = AgentId::new("bencher").unwrap();
    c.bench_function("acquire/1000_leases", |b| {
        b.iter(|| {
            let req = LeaseRequest::new(holder.clone(), LeaseMode::Exclusive, ["elsewhere/**"]);
            let token = leases.acquire(&req).unwrap().lease.token;
            black_box(leases.release(&holder, token).unwrap())
        });
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
