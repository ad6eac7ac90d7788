//! Random sequences of posts, claims, hook completions, releases and
//! dones by three agents, against a plain model: after every step each
//! item is where the model says (ready, claimed by one agent, or done),
//! each claim takes the model's next item (most urgent, then oldest), and
//! no item is on two hooks. The same body runs on PostgreSQL when
//! `CHIPSET_TEST_PG` names a server, a fresh schema per case.

use std::collections::BTreeMap;

use chipset_hook::HookStatus;
use chipset_pool::{ItemId, NewItem, ReadyFilter, WorkState};
use chipset_testkit::TempState;
use proptest::prelude::*;

use crate::agent;
use crate::place::Place;

#[derive(Debug, Clone)]
enum Op {
    Post { priority: u8 },
    Claim { who: usize },
    Complete { who: usize },
    Release { who: usize },
    Done { who: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..3u8).prop_map(|priority| Op::Post { priority }),
        4 => (0..3usize).prop_map(|who| Op::Claim { who }),
        2 => (0..3usize).prop_map(|who| Op::Complete { who }),
        1 => (0..3usize).prop_map(|who| Op::Release { who }),
        1 => (0..3usize).prop_map(|who| Op::Done { who }),
    ]
}

/// Where the model says an item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    Ready,
    /// On this agent's hook, pending or active.
    Held(usize),
    /// Completed on this agent's hook, not cleared yet.
    Completed(usize),
    Done,
}

fn name(state: &WorkState) -> &'static str {
    state.as_str()
}

fn pool_model(place: &Place, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let t = TempState::new();
    let (pool, hooks) = place.open(&t.state);
    let agents = [agent("a"), agent("b"), agent("c")];
    let lead = agent("lead");
    // id -> (priority, posting order, where)
    let mut items: BTreeMap<String, (u8, usize, At)> = BTreeMap::new();
    let mut posted = 0;
    for op in ops {
        match op {
            Op::Post { priority } => {
                let id = format!("m{posted:03}");
                let new = NewItem::new(format!("do {id}"))
                    .with_id(ItemId::new(&id).unwrap())
                    .with_priority(priority);
                pool.post(&lead, &new).unwrap();
                items.insert(id, (priority, posted, At::Ready));
                posted += 1;
            }
            Op::Claim { who } => {
                let mine = items
                    .iter()
                    .find(
                        |(_, (_, _, at))| matches!(at, At::Held(w) | At::Completed(w) if *w == who),
                    )
                    .map(|(id, (_, _, at))| (id.clone(), *at));
                let claimed = pool.claim_next(&agents[who], &ReadyFilter::new()).unwrap();
                if let Some((id, At::Held(_))) = &mine {
                    let c = claimed.unwrap();
                    prop_assert!(c.existing);
                    prop_assert_eq!(String::from(c.entry.id), id.clone());
                    continue;
                }
                if let Some((id, _)) = &mine {
                    items.get_mut(id).unwrap().2 = At::Done;
                }
                let next = items
                    .iter()
                    .filter(|(_, (_, _, at))| *at == At::Ready)
                    .min_by_key(|(_, (p, n, _))| (*p, *n))
                    .map(|(id, _)| id.clone());
                let got = claimed.map(|c| {
                    assert!(!c.existing);
                    String::from(c.entry.id)
                });
                prop_assert_eq!(&got, &next);
                if let Some(id) = next {
                    items.get_mut(&id).unwrap().2 = At::Held(who);
                }
            }
            Op::Complete { who } => {
                let Some(held) = hooks.current(&agents[who]).unwrap() else {
                    continue;
                };
                let id = held.work.bead_id.as_str().to_owned();
                if items[&id].2 != At::Held(who) {
                    continue;
                }
                let _ = hooks.activate(&held);
                hooks.complete(&held).unwrap();
                items.get_mut(&id).unwrap().2 = At::Completed(who);
            }
            Op::Release { who } => {
                let held = items
                    .iter()
                    .find(|(_, (_, _, at))| *at == At::Held(who))
                    .map(|(id, _)| id.clone());
                if let Some(id) = held {
                    pool.release(&agents[who], &ItemId::new(&id).unwrap(), "model")
                        .unwrap();
                    items.get_mut(&id).unwrap().2 = At::Ready;
                }
            }
            Op::Done { who } => {
                let held = items
                    .iter()
                    .find(
                        |(_, (_, _, at))| matches!(at, At::Held(w) | At::Completed(w) if *w == who),
                    )
                    .map(|(id, _)| id.clone());
                if let Some(id) = held {
                    pool.done(&agents[who], &ItemId::new(&id).unwrap()).unwrap();
                    items.get_mut(&id).unwrap().2 = At::Done;
                }
            }
        }
        let listed = pool.list().unwrap();
        prop_assert_eq!(listed.len(), items.len());
        for l in &listed {
            let want = items[l.entry.id.as_str()].2;
            match (want, &l.state) {
                (At::Ready, WorkState::Ready)
                | (At::Done | At::Completed(_), WorkState::Done { .. }) => {}
                (At::Held(w), WorkState::Claimed { holder, hook }) => {
                    prop_assert_eq!(holder, &agents[w]);
                    prop_assert!(matches!(hook, HookStatus::Pending | HookStatus::Active));
                }
                (want, got) => {
                    prop_assert!(false, "{}: model {want:?}, pool {}", l.entry.id, name(got))
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn the_pool_follows_the_model(ops in prop::collection::vec(op(), 1..40)) {
        pool_model(&Place::fs(), ops)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]
    #[test]
    fn the_pool_follows_the_model_on_postgres(ops in prop::collection::vec(op(), 1..40)) {
        // A fresh schema per case, as a fresh directory per case above.
        if let Some(place) = Place::pg("the_pool_follows_the_model_on_postgres") {
            pool_model(&place, ops)?;
        }
    }
}
