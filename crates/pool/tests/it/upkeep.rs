//! The log's folding, and the pool's doctor.

use chipset_pool::{NewItem, ReadyFilter, WorkState};

use crate::{agent, id, setup};

/// The log's lines now.
pub(crate) fn log_lines(s: &crate::Setup) -> usize {
    std::fs::read_to_string(s.tmp.state.root().join("pool/log.jsonl"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// Regression: only a post folded the log into the table, so a pool that
/// saw only claims and dones grew its log without bound.
#[test]
fn claims_and_dones_alone_keep_the_log_short() {
    let s = setup();
    let items: Vec<NewItem> = (0..100)
        .map(|n| NewItem::new(format!("item {n}")).with_id(id(&format!("i{n:03}"))))
        .collect();
    s.pool.post_many(&agent("lead"), &items).unwrap();
    let alice = agent("alice");
    let (mut longest, mut folds, mut last) = (0, 0, 0);
    for n in 0..100 {
        let c = s
            .pool
            .claim_next(&alice, &ReadyFilter::new())
            .unwrap()
            .unwrap();
        if n % 2 == 0 {
            s.pool.done(&alice, &c.entry.id).unwrap();
        } else {
            // Completed on the hook: the next claim records it done.
            s.hooks.activate(&c.assignment).unwrap();
            s.hooks.complete(&c.assignment).unwrap();
        }
        let lines = log_lines(&s);
        longest = longest.max(lines);
        folds += usize::from(lines < last);
        last = lines;
    }
    // A pool of 100 items folds its log at 25 records.
    assert!(longest < 25, "the log reached {longest} lines");
    assert!(folds >= 3, "folded {folds} times");
    let list = s.pool.list().unwrap();
    assert!(
        list.iter()
            .all(|l| matches!(l.state, WorkState::Done { .. })),
        "every item done after the folds"
    );
    assert_eq!(list.iter().filter(|l| l.entry.done.is_some()).count(), 99);
}
