//! Random sequences of acquires, renews, releases, forced releases and
//! clock steps by three agents: after every step no two live leases of
//! different agents conflict, tokens only increase, and a refused step
//! changed nothing on disk. The same body runs on PostgreSQL when
//! `CHIPSET_TEST_PG` names a server; there time is the server's clock,
//! which a test cannot step, so those sequences hold no clock steps
//! (`the_server_clock_judges_expiry` covers expiry there).

use std::time::Duration;

use chipset_lease::{LeaseMode, LeaseRequest};
use chipset_testkit::TempState;
use proptest::prelude::*;

use crate::agent;
use crate::place::{Place, table};

#[derive(Debug, Clone)]
enum Op {
    Acquire {
        who: usize,
        paths: Vec<&'static str>,
        shared: bool,
        ttl_s: u64,
    },
    Renew {
        who: usize,
        nth: usize,
    },
    Release {
        who: usize,
        nth: usize,
    },
    Force {
        who: usize,
        nth: usize,
    },
    Advance {
        secs: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let pattern = prop::sample::select(vec![
        "src",
        "src/a.rs",
        "src/*.rs",
        "src/auth/**",
        "docs",
        "docs/*.md",
        "**/*.md",
        "README.md",
    ]);
    prop_oneof![
        4 => (0..3usize, prop::collection::vec(pattern, 1..3), any::<bool>(), 1..120u64)
            .prop_map(|(who, paths, shared, ttl_s)| Op::Acquire { who, paths, shared, ttl_s }),
        1 => (0..3usize, 0..8usize).prop_map(|(who, nth)| Op::Renew { who, nth }),
        1 => (0..3usize, 0..8usize).prop_map(|(who, nth)| Op::Release { who, nth }),
        1 => (0..3usize, 0..8usize).prop_map(|(who, nth)| Op::Force { who, nth }),
        2 => (1..90u64).prop_map(|secs| Op::Advance { secs }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn grants_never_conflict_and_tokens_only_increase(ops in prop::collection::vec(op(), 1..40)) {
        grants_model(&Place::fs(), ops)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]
    #[test]
    fn grants_never_conflict_and_tokens_only_increase_on_postgres(
        ops in prop::collection::vec(
            op().prop_filter("the server's clock cannot be stepped", |o| !matches!(o, Op::Advance { .. })),
            1..40,
        )
    ) {
        // A fresh schema per case, as a fresh directory per case above.
        if let Some(place) = Place::pg("grants_never_conflict_on_postgres") {
            grants_model(&place, ops)?;
        }
    }
}

fn grants_model(place: &Place, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let (t, clock) = TempState::manual_no_sync();
    let leases = place.open(&t.state);
    let backend = place.backend(&t.state);
    let table = || table(backend.as_ref());
    {
        let agents = [agent("a"), agent("b"), agent("c")];
        let mut seen_tokens: Vec<u64> = Vec::new();
        for op in ops {
            let before = table();
            let tokens: Vec<u64> = leases.list().unwrap().iter().map(|l| l.token).collect();
            let pick = |nth: usize| {
                tokens
                    .get(nth % tokens.len().max(1))
                    .copied()
                    .unwrap_or(999)
            };
            let refused = match &op {
                Op::Acquire {
                    who,
                    paths,
                    shared,
                    ttl_s,
                } => {
                    let mode = if *shared {
                        LeaseMode::Shared
                    } else {
                        LeaseMode::Exclusive
                    };
                    let req = LeaseRequest::new(agents[*who].clone(), mode, paths)
                        .with_ttl(Duration::from_secs(*ttl_s));
                    match leases.acquire(&req) {
                        Ok(a) if !a.existing => {
                            prop_assert!(seen_tokens.iter().all(|t| *t < a.lease.token));
                            seen_tokens.push(a.lease.token);
                            false
                        }
                        Ok(_) => false,
                        Err(_) => true,
                    }
                }
                Op::Renew { who, nth } => leases
                    .renew(&agents[*who], pick(*nth), Duration::from_secs(60))
                    .is_err(),
                Op::Release { who, nth } => leases.release(&agents[*who], pick(*nth)).is_err(),
                Op::Force { who, nth } => leases
                    .force_release(&agents[*who], pick(*nth), "gone")
                    .is_err(),
                Op::Advance { secs } => {
                    clock.advance(Duration::from_secs(*secs));
                    false
                }
            };
            if refused {
                prop_assert_eq!(table(), before, "a refused {:?} changed the table", op);
            }
            let live = leases.live().unwrap();
            for (i, x) in live.iter().enumerate() {
                for y in &live[i + 1..] {
                    prop_assert!(!x.conflicts_with(y), "{:?} and {:?} are both live", x, y);
                }
            }
        }
    }
    Ok(())
}
