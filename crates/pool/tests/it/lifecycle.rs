//! Post, ready, claim, release and done, their retries, and the table's
//! format. The bodies that plant no file and step no clock run on both
//! backends (`fs::*`, `pg::*`).

use std::time::Duration;

use chipset_hook::{HookStatus, Hooks};
use chipset_pool::{Error, NewItem, Pool, ReadyFilter, WorkState};
use chipset_store::{Classify, ErrorKind, ReadOutcome};

use chipset_backend::{Dir, Wake};

use crate::place::Place;
use crate::{agent, id, item, setup, setup_on};

fn ready_ids(s: &crate::Setup, filter: &ReadyFilter) -> Vec<String> {
    s.pool
        .ready(filter)
        .unwrap()
        .into_iter()
        .map(|l| String::from(l.entry.id))
        .collect()
}

#[test]
fn ready_orders_by_priority_then_age_and_hides_blocked_and_deferred() {
    let s = setup();
    let lead = agent("lead");
    s.pool.post(&lead, &item("a").with_priority(3)).unwrap();
    s.pool.post(&lead, &item("b").with_priority(1)).unwrap();
    s.clock.advance(Duration::from_millis(5));
    s.pool.post(&lead, &item("c").with_priority(1)).unwrap();
    s.pool
        .post(
            &lead,
            &item("d").with_depends_on([id("b")]).with_priority(0),
        )
        .unwrap();
    let later = s.tmp.state.now() + Duration::from_secs(60);
    s.pool
        .post(&lead, &item("e").with_not_before(later).with_priority(0))
        .unwrap();
    assert_eq!(ready_ids(&s, &ReadyFilter::new()), ["b", "c", "a"]);
    assert_eq!(
        s.pool.get(&id("d")).unwrap().state,
        WorkState::Blocked { on: vec![id("b")] }
    );
    assert_eq!(
        s.pool.get(&id("e")).unwrap().state,
        WorkState::Deferred { until: later }
    );
    s.clock.advance(Duration::from_secs(61));
    assert_eq!(ready_ids(&s, &ReadyFilter::new()), ["e", "b", "c", "a"]);
    let counts = s.pool.counts().unwrap();
    assert_eq!((counts.ready, counts.blocked, counts.total()), (4, 1, 5));
}

fn filters_keep_labels_and_the_role_or_no_role(place: &Place) {
    let s = setup_on(place);
    let lead = agent("lead");
    s.pool
        .post(&lead, &item("ui").with_labels(["ui", "bug"]))
        .unwrap();
    s.pool
        .post(&lead, &item("review").with_role("reviewer"))
        .unwrap();
    s.pool.post(&lead, &item("any")).unwrap();
    assert_eq!(ready_ids(&s, &ReadyFilter::new().with_label("bug")), ["ui"]);
    assert_eq!(
        ready_ids(&s, &ReadyFilter::new().with_role("dev")),
        ["ui", "any"]
    );
    assert_eq!(
        ready_ids(&s, &ReadyFilter::new().with_role("reviewer")),
        ["ui", "review", "any"]
    );
    let got = s
        .pool
        .claim_next(
            &agent("rev"),
            &ReadyFilter::new().with_role("reviewer").with_label("bug"),
        )
        .unwrap()
        .unwrap();
    assert_eq!(got.entry.id, id("ui"));
}

fn a_claim_is_on_the_hook_and_nowhere_else(place: &Place) {
    let s = setup_on(place);
    let (lead, alice, bob) = (agent("lead"), agent("alice"), agent("bob"));
    s.pool.post(&lead, &item("a")).unwrap();
    let claimed = s
        .pool
        .claim_next(&alice, &ReadyFilter::new())
        .unwrap()
        .unwrap();
    assert!(!claimed.existing);
    assert_eq!(
        s.hooks.current(&alice).unwrap(),
        Some(claimed.assignment.clone())
    );
    assert_eq!(claimed.assignment.work.assigned_by.as_ref(), Some(&alice));
    assert_eq!(
        s.pool.get(&id("a")).unwrap().state,
        WorkState::Claimed {
            holder: alice.clone(),
            hook: HookStatus::Pending
        }
    );
    // Nothing is ready for Bob, and he cannot take Alice's item.
    assert!(
        s.pool
            .claim_next(&bob, &ReadyFilter::new())
            .unwrap()
            .is_none()
    );
    assert!(matches!(
        s.pool.claim(&bob, &id("a")),
        Err(Error::NotReady {
            state: WorkState::Claimed { .. },
            ..
        })
    ));
    // A retry by Alice returns the first claim and changes nothing.
    let again = s
        .pool
        .claim_next(&alice, &ReadyFilter::new())
        .unwrap()
        .unwrap();
    assert!(again.existing);
    assert_eq!(again.assignment, claimed.assignment);
    let named = s.pool.claim(&alice, &id("a")).unwrap();
    assert!(named.existing);
}

fn a_completed_hook_marks_the_item_done_and_the_next_claim_records_it(place: &Place) {
    let s = setup_on(place);
    let (lead, alice) = (agent("lead"), agent("alice"));
    s.pool.post(&lead, &item("a")).unwrap();
    s.pool
        .post(&lead, &item("b").with_depends_on([id("a")]))
        .unwrap();
    let a = s
        .pool
        .claim_next(&alice, &ReadyFilter::new())
        .unwrap()
        .unwrap();
    s.hooks.activate(&a.assignment).unwrap();
    s.hooks.complete(&a.assignment).unwrap();
    assert_eq!(
        s.pool.get(&id("a")).unwrap().state,
        WorkState::Done {
            by: alice.clone(),
            recorded: false
        }
    );
    // The dependency counts as done already.
    assert_eq!(ready_ids(&s, &ReadyFilter::new()), ["b"]);
    let b = s
        .pool
        .claim_next(&alice, &ReadyFilter::new())
        .unwrap()
        .unwrap();
    assert_eq!(b.finished, Some(id("a")));
    assert_eq!(b.entry.id, id("b"));
    let a_now = s.pool.get(&id("a")).unwrap();
    assert_eq!(
        a_now.state,
        WorkState::Done {
            by: alice.clone(),
            recorded: true
        }
    );
    assert_eq!(a_now.entry.done.unwrap().by, alice);
}

fn a_claim_with_nothing_ready_leaves_the_finished_item_on_the_hook(place: &Place) {
    let s = setup_on(place);
    nothing_ready_keeps_the_finished_item(&s.pool, &s.hooks);
}

/// Regression: a claim with nothing ready cleared the claimer's finished
/// item off its hook and answered "nothing ready", so `finished` was
/// never reported. It decides first now: the hook keeps the completed
/// item (recorded done), and the claim that takes work reports it.
pub(crate) fn nothing_ready_keeps_the_finished_item(pool: &Pool, hooks: &Hooks) {
    let (lead, alice) = (agent("lead"), agent("alice"));
    pool.post(&lead, &item("a")).unwrap();
    let a = pool.claim(&alice, &id("a")).unwrap().assignment;
    hooks.activate(&a).unwrap();
    hooks.complete(&a).unwrap();
    assert!(
        pool.claim_next(&alice, &ReadyFilter::new())
            .unwrap()
            .is_none()
    );
    let hook = hooks.read(&alice).unwrap().value().expect("alice's hook");
    let state = &hook.state;
    assert_eq!(state.status(), HookStatus::Completed, "{state:?}");
    assert_eq!(state.work().unwrap().bead_id.as_str(), "a");
    assert!(matches!(
        pool.get(&id("a")).unwrap().state,
        WorkState::Done { recorded: true, .. }
    ));
    pool.post(&lead, &item("b")).unwrap();
    let b = pool
        .claim_next(&alice, &ReadyFilter::new())
        .unwrap()
        .unwrap();
    assert_eq!((b.entry.id, b.finished), (id("b"), Some(id("a"))));
}

fn another_agents_claim_records_a_completed_item_too(place: &Place) {
    let s = setup_on(place);
    let (lead, alice, bob) = (agent("lead"), agent("alice"), agent("bob"));
    s.pool.post_many(&lead, &[item("a"), item("b")]).unwrap();
    let a = s
        .pool
        .claim_next(&alice, &ReadyFilter::new())
        .unwrap()
        .unwrap();
    s.hooks.activate(&a.assignment).unwrap();
    s.hooks.complete(&a.assignment).unwrap();
    let _ = s
        .pool
        .claim_next(&bob, &ReadyFilter::new())
        .unwrap()
        .unwrap();
    // Recorded now: a later clear of Alice's hook outside the pool loses nothing.
    s.hooks.clear(&a.assignment).unwrap();
    assert!(matches!(
        s.pool.get(&id("a")).unwrap().state,
        WorkState::Done { recorded: true, .. }
    ));
}

fn done_finishes_from_any_hook_state_and_is_retry_safe(place: &Place) {
    let s = setup_on(place);
    let (lead, alice) = (agent("lead"), agent("alice"));
    s.pool.post(&lead, &item("a")).unwrap();
    let _ = s.pool.claim(&alice, &id("a")).unwrap();
    let done = s.pool.done(&alice, &id("a")).unwrap();
    assert!(!done.existing);
    assert_eq!(s.hooks.current(&alice).unwrap(), None);
    let again = s.pool.done(&alice, &id("a")).unwrap();
    assert!(again.existing);
    assert!(matches!(
        s.pool.claim(&alice, &id("a")),
        Err(Error::AlreadyDone { .. })
    ));
    assert!(matches!(
        s.pool.release(&alice, &id("a"), "no"),
        Err(Error::AlreadyDone { .. })
    ));
}

fn release_returns_the_item_with_its_reason_once(place: &Place) {
    let s = setup_on(place);
    let (lead, alice, bob) = (agent("lead"), agent("alice"), agent("bob"));
    s.pool.post(&lead, &item("a")).unwrap();
    let a = s.pool.claim(&alice, &id("a")).unwrap();
    // Bob cannot release Alice's item, nor finish it.
    let before = crate::snapshot(&s);
    assert!(matches!(
        s.pool.release(&bob, &id("a"), "mine now"),
        Err(Error::NotHolder { holder: Some(h), .. }) if h == alice
    ));
    assert!(matches!(
        s.pool.done(&bob, &id("a")),
        Err(Error::NotHolder { .. })
    ));
    assert_eq!(crate::snapshot(&s), before);
    let released = s.pool.release(&alice, &id("a"), "needs a design").unwrap();
    assert!(!released.existing);
    let record = released.entry.released.unwrap();
    assert_eq!(
        (record.by, record.reason.as_str()),
        (alice.clone(), "needs a design")
    );
    assert_eq!(released.entry.releases, 1);
    assert_eq!(s.hooks.current(&alice).unwrap(), None);
    // Alice's old assignment is fenced off.
    assert_eq!(
        s.hooks.activate(&a.assignment).unwrap_err().kind(),
        ErrorKind::Stale
    );
    // A retry is a success that changes nothing.
    let again = s.pool.release(&alice, &id("a"), "needs a design").unwrap();
    assert!(again.existing);
    assert_eq!(again.entry.releases, 1);
    assert_eq!(ready_ids(&s, &ReadyFilter::new()), ["a"]);
    let b = s
        .pool
        .claim_next(&bob, &ReadyFilter::new())
        .unwrap()
        .unwrap();
    assert_eq!(b.entry.id, id("a"));
}

fn a_stalled_holders_item_returns_once(place: &Place) {
    let s = setup_on(place);
    let (lead, alice, witness) = (agent("lead"), agent("alice"), agent("witness"));
    s.pool.post(&lead, &item("a")).unwrap();
    let a = s.pool.claim(&alice, &id("a")).unwrap();
    let back = s
        .pool
        .return_stalled(&a.assignment, &witness, "stalled")
        .unwrap()
        .unwrap();
    assert_eq!(back.released.unwrap().holder, alice);
    assert!(
        s.pool
            .return_stalled(&a.assignment, &witness, "stalled")
            .unwrap()
            .is_none()
    );
    assert_eq!(ready_ids(&s, &ReadyFilter::new()), ["a"]);
}

fn a_post_retry_returns_the_first_result(place: &Place) {
    let s = setup_on(place);
    let lead = agent("lead");
    let first = s.pool.post(&lead, &item("a").with_body("details")).unwrap();
    assert!(!first.existing);
    s.clock.advance(Duration::from_secs(1));
    let again = s.pool.post(&lead, &item("a").with_body("details")).unwrap();
    assert!(again.existing);
    assert_eq!(again.entry, first.entry);
    assert!(matches!(
        s.pool.post(&lead, &item("a").with_body("other")),
        Err(Error::IdTaken { .. })
    ));
    let full = s.pool.item(&id("a")).unwrap();
    assert_eq!(full.body, "details");
    // A deferral counts from the first post, so its retry matches it.
    let later = || item("b").with_defer(Duration::from_secs(3600));
    s.pool.post(&lead, &later()).unwrap();
    s.clock.advance(Duration::from_secs(1));
    assert!(s.pool.post(&lead, &later()).unwrap().existing);
    let b = s.pool.item(&id("b")).unwrap();
    assert_eq!(b.not_before, Some(b.posted_at + Duration::from_secs(3600)));
    // Fresh ids are generated when none is given.
    let fresh = s.pool.post(&lead, &NewItem::new("anything")).unwrap();
    assert!(fresh.entry.id.as_str().starts_with("w-"));
}

fn a_claim_refuses_a_hook_holding_other_work(place: &Place) {
    let s = setup_on(place);
    let (lead, alice) = (agent("lead"), agent("alice"));
    s.pool.post(&lead, &item("a")).unwrap();
    s.hooks
        .assign(
            &alice,
            chipset_testkit::bead("gt-other"),
            "other",
            Some(&lead),
        )
        .unwrap();
    let before = crate::snapshot(&s);
    assert!(matches!(
        s.pool.claim_next(&alice, &ReadyFilter::new()),
        Err(Error::HookBusy { .. })
    ));
    assert_eq!(crate::snapshot(&s), before);
}

/// Plants a hook of `ghost` that is not JSON.
fn plant_corrupt_hook(s: &crate::Setup) {
    match &s.backend {
        Some(b) => {
            let key = Dir::new("hooks").unwrap().key("ghost.json").unwrap();
            b.put(&key, b"{").unwrap();
        }
        None => {
            std::fs::create_dir_all(s.tmp.state.root().join("hooks")).unwrap();
            std::fs::write(s.tmp.state.root().join("hooks/ghost.json"), "{").unwrap();
        }
    }
}

fn a_corrupt_hook_fails_claims_closed(place: &Place) {
    let s = setup_on(place);
    let lead = agent("lead");
    s.pool.post(&lead, &item("a")).unwrap();
    plant_corrupt_hook(&s);
    assert!(matches!(
        s.pool.claim_next(&agent("alice"), &ReadyFilter::new()),
        Err(Error::Hook(e)) if e.kind() == ErrorKind::Corrupt
    ));
    assert!(s.pool.ready(&ReadyFilter::new()).is_err());
}

/// The listing reads past a corrupt hook: every item, the hook named, and
/// the items it might hold unconfirmed; the strict reads and the claims
/// still fail on it.
fn a_listing_reads_past_a_corrupt_hook(place: &Place) {
    let s = setup_on(place);
    let (lead, alice, bob) = (agent("lead"), agent("alice"), agent("bob"));
    for i in ["done", "held", "free"] {
        s.pool.post(&lead, &item(i)).unwrap();
    }
    s.pool
        .post(&lead, &item("after").with_depends_on([id("free")]))
        .unwrap();
    let _ = s.pool.claim(&bob, &id("done")).unwrap();
    s.pool.done(&bob, &id("done")).unwrap();
    let _ = s.pool.claim(&alice, &id("held")).unwrap();
    // Without an unreadable hook it is the strict listing.
    let clean = s.pool.listing().unwrap();
    assert_eq!(clean.items, s.pool.list().unwrap());
    assert!(clean.corrupt.is_empty() && clean.items.iter().all(|l| !l.unconfirmed));
    plant_corrupt_hook(&s);
    let listing = s.pool.listing().unwrap();
    let shown: Vec<(&str, &str, bool)> = listing
        .items
        .iter()
        .map(|l| (l.entry.id.as_str(), l.state.as_str(), l.unconfirmed))
        .collect();
    // Done and held are confirmed by the table's record and alice's hook;
    // the ghost's hook might hold either of the others.
    assert_eq!(
        shown,
        [
            ("done", "done", false),
            ("held", "claimed", false),
            ("free", "ready", true),
            ("after", "blocked", true),
        ]
    );
    assert_eq!(listing.corrupt.len(), 1, "{listing:?}");
    assert!(
        listing.corrupt[0].path.ends_with("hooks/ghost.json"),
        "{listing:?}"
    );
    assert!(listing.unsupported.is_empty());
    assert!(matches!(s.pool.list(), Err(Error::Hook(_))));
    let before = crate::snapshot(&s);
    assert!(matches!(
        s.pool.claim(&agent("carol"), &id("free")),
        Err(Error::Hook(e)) if e.kind() == ErrorKind::Corrupt
    ));
    assert_eq!(
        crate::snapshot(&s),
        before,
        "a refused claim writes nothing"
    );
}

/// A waiter on another handle (on a server, another host for all it
/// knows) wakes on a post and on a claim: by inotify on a directory, by
/// the notification on a server, never by its two-minute rescan.
fn a_watch_wakes_on_a_post_and_a_claim(place: &Place) {
    let t = chipset_testkit::TempState::new();
    let (pool, _) = place.open(&t.state);
    let (watcher, _) = place.open(&t.state);
    let mut wait = watcher.watch(Duration::from_secs(120)).unwrap();
    pool.post(&agent("lead"), &item("a")).unwrap();
    assert_eq!(wait.wait(Duration::from_secs(10)).unwrap(), Wake::Changed);
    assert_eq!(watcher.ready(&ReadyFilter::new()).unwrap().len(), 1);
    let _ = pool
        .claim_next(&agent("alice"), &ReadyFilter::new())
        .unwrap()
        .unwrap();
    while !matches!(
        watcher.get(&id("a")).unwrap().state,
        WorkState::Claimed { .. }
    ) {
        assert_eq!(wait.wait(Duration::from_secs(10)).unwrap(), Wake::Changed);
    }
}

#[test]
fn the_files_are_pinned() {
    let s = setup();
    let lead = agent("lead");
    s.pool
        .post(
            &lead,
            &item("a")
                .with_body("the body")
                .with_labels(["ui", "bug", "ui"])
                .with_role("dev")
                .with_priority(1),
        )
        .unwrap();
    s.pool
        .post(&lead, &item("b").with_depends_on([id("a")]))
        .unwrap();
    let a = s.pool.claim(&agent("alice"), &id("a")).unwrap();
    s.pool
        .release(&agent("alice"), &a.entry.id, "later")
        .unwrap();
    let root = s.tmp.state.root();
    insta::assert_snapshot!(
        "item",
        std::fs::read_to_string(root.join("pool/items/a.json")).unwrap()
    );
    insta::assert_snapshot!(
        "table",
        std::fs::read_to_string(root.join("pool/table.json")).unwrap()
    );
    insta::assert_snapshot!(
        "log",
        std::fs::read_to_string(root.join("pool/log.jsonl")).unwrap()
    );
    // The next post folds the log into the table and empties the log.
    s.pool.post(&lead, &item("c")).unwrap();
    assert!(matches!(
        s.tmp.state.read_bytes(&s.tmp.at("pool/log.jsonl")).unwrap(),
        ReadOutcome::Value(b) if b.is_empty()
    ));
    let folded = s.pool.get(&id("a")).unwrap().entry;
    assert_eq!(folded.releases, 1);
    let table = std::fs::read_to_string(root.join("pool/table.json")).unwrap();
    assert!(table.contains("\"reason\": \"later\""), "{table}");
}

chipset_backend::both!(
    crate::place::Place;
    filters_keep_labels_and_the_role_or_no_role,
    a_claim_is_on_the_hook_and_nowhere_else,
    a_completed_hook_marks_the_item_done_and_the_next_claim_records_it,
    a_claim_with_nothing_ready_leaves_the_finished_item_on_the_hook,
    another_agents_claim_records_a_completed_item_too,
    done_finishes_from_any_hook_state_and_is_retry_safe,
    release_returns_the_item_with_its_reason_once,
    a_stalled_holders_item_returns_once,
    a_post_retry_returns_the_first_result,
    a_claim_refuses_a_hook_holding_other_work,
    a_corrupt_hook_fails_claims_closed,
    a_listing_reads_past_a_corrupt_hook,
    a_watch_wakes_on_a_post_and_a_claim,
);
