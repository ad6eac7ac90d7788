//! Ids: validation table as a property, and sortable ids under a stalled clock.

use std::collections::HashSet;

use chipset_store::{AgentId, ManualClock, SortableId, Timestamp};
use proptest::prelude::*;

/// The rules, stated independently of the implementation.
fn model_accepts(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && !s.starts_with('.')
        && !s.contains(['/', '\\'])
        && !s.chars().any(char::is_control)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn validation_matches_the_rules(s in "(\\PC|[/\\\\.\\x00\\n\\x7f]){0,140}") {
        prop_assert_eq!(AgentId::new(s.clone()).is_ok(), model_accepts(&s), "{:?}", s);
    }

    #[test]
    fn accepted_ids_stay_one_segment(s in "[a-zA-Z0-9._-]{1,128}") {
        if let Ok(id) = AgentId::new(s.clone()) {
            let path = std::path::Path::new("/root").join(id.as_str());
            prop_assert_eq!(path.parent(), Some(std::path::Path::new("/root")));
            prop_assert_eq!(path.components().count(), 3); // `/`, `root`, the id
        } else {
            prop_assert!(!model_accepts(&s));
        }
    }
}

#[test]
fn ids_from_a_stalled_clock_are_unique_and_strictly_increasing() {
    let clock = ManualClock::new(Timestamp::from_unix_ms(1_730_000_000_123));
    let ids: Vec<SortableId> = (0..100_000).map(|_| SortableId::generate(&clock)).collect();
    for pair in ids.windows(2) {
        assert!(
            pair[0].as_str() < pair[1].as_str(),
            "{} !< {}",
            pair[0],
            pair[1]
        );
    }
    let unique: HashSet<&str> = ids.iter().map(SortableId::as_str).collect();
    assert_eq!(unique.len(), ids.len());
    // The clock stalled, so the millisecond part never moved.
    assert!(ids.iter().all(|id| id.unix_ms() == 1_730_000_000_123));
}

#[test]
fn ids_from_many_threads_are_unique() {
    let clock = ManualClock::new(Timestamp::from_unix_ms(1_730_000_000_000));
    let all: Vec<Vec<String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    (0..5_000)
                        .map(|_| String::from(SortableId::generate(&clock)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for ids in &all {
        assert!(ids.windows(2).all(|p| p[0] < p[1]), "per-thread order");
    }
    let unique: HashSet<&String> = all.iter().flatten().collect();
    assert_eq!(unique.len(), 20_000);
}
