//! Property test: `pending` is always exactly the unacknowledged set, in
//! priority-then-age order, compared with a plain in-memory model, on a
//! directory and, when `CHIPSET_TEST_PG` names a server, on PostgreSQL
//! (issue 30) from the same body.

use std::collections::BTreeSet;
use std::time::Duration;

use chipset_bus::{EventId, NewEvent, Priority};
use proptest::prelude::*;

use crate::place::Place;
use crate::{agent, manual_no_sync};

#[derive(Debug, Clone)]
enum Op {
    Publish {
        priority: usize,
        kind: usize,
        advance_ms: u64,
    },
    Ack {
        pick: usize,
        by_id: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..4usize, 0..3usize, 0..3u64).prop_map(|(priority, kind, advance_ms)| Op::Publish {
            priority,
            kind,
            advance_ms
        }),
        2 => (any::<usize>(), any::<bool>()).prop_map(|(pick, by_id)| Op::Ack { pick, by_id }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn pending_matches_the_model(ops in prop::collection::vec(op(), 1..24)) {
        pending_model(&Place::fs(), ops)?;
    }
}

proptest! {
    // Fewer cases on a server: each opens a fresh schema (a migration).
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn pending_matches_the_model_on_postgres(ops in prop::collection::vec(op(), 1..24)) {
        // A fresh schema per case, as a fresh directory per case above.
        if let Some(place) = Place::pg("pending_matches_the_model_on_postgres") {
            pending_model(&place, ops)?;
        }
    }
}

/// The model's body: on a server the ids still follow the manual clock
/// (they are the publisher's), so the expected order is the same.
fn pending_model(place: &Place, ops: Vec<Op>) -> Result<(), TestCaseError> {
    {
        let (t, clock, _) = manual_no_sync();
        let bus = place.open(&t.state);
        let a = agent("model");
        // The model: every published event, and which are acknowledged.
        let mut published: Vec<(Priority, EventId, chipset_bus::Event)> = Vec::new();
        let mut acked: BTreeSet<EventId> = BTreeSet::new();
        for op in ops {
            match op {
                Op::Publish {
                    priority,
                    kind,
                    advance_ms,
                } => {
                    clock.advance(Duration::from_millis(advance_ms));
                    let p = Priority::ALL[priority];
                    let e = NewEvent::new("src", ["a", "m", "z"][kind]).with_priority(p);
                    let e = bus.publish(&a, &e).unwrap().delivered().unwrap().clone();
                    published.push((p, e.id.clone(), e));
                }
                Op::Ack { pick, by_id } => {
                    if published.is_empty() {
                        continue;
                    }
                    let (_, id, e) = &published[pick % published.len()];
                    // True the first time: the model's set says whether it is new.
                    let expected = acked.insert(id.clone());
                    let got = if by_id {
                        bus.ack(&a, id)
                    } else {
                        bus.ack_event(&a, e)
                    };
                    prop_assert_eq!(got.unwrap(), expected);
                }
            }
            let mut expected: Vec<_> = published
                .iter()
                .filter(|(_, id, _)| !acked.contains(id))
                .map(|(p, id, _)| (*p, id.clone()))
                .collect();
            expected.sort();
            let pending = bus.pending(&a).unwrap();
            prop_assert!(pending.unreadable.is_empty());
            let got: Vec<_> = pending
                .events
                .iter()
                .map(|e| (e.priority, e.id.clone()))
                .collect();
            prop_assert_eq!(got, expected);
        }
    }
    Ok(())
}
