//! Bad input: a typed error, and nothing changed, on both backends.

use chipset_pool::{Error, ItemId, MAX_BODY, NewItem, ReadyFilter};

use crate::place::Place;
use crate::{agent, id, item, setup_on, snapshot};
use chipset_store::{Classify, ErrorKind};

fn bad_posts_are_refused_and_change_nothing(place: &Place) {
    let s = setup_on(place);
    let lead = agent("lead");
    s.pool.post(&lead, &item("a")).unwrap();
    let before = snapshot(&s);
    let refused = [
        s.pool.post(&lead, &item("b").with_depends_on([id("nope")])),
        s.pool.post(&lead, &item("b").with_depends_on([id("b")])),
        s.pool.post(&lead, &NewItem::new("   ")),
        s.pool
            .post(&lead, &item("b").with_body("x".repeat(MAX_BODY + 1))),
        s.pool.post(&lead, &item("b").with_priority(9)),
        s.pool.post(&lead, &item("a").with_body("other content")),
    ];
    let kinds: Vec<&str> = refused
        .iter()
        .map(|r| match r {
            Err(Error::UnknownDependency { .. }) => "unknown",
            Err(Error::Cycle { .. }) => "cycle",
            Err(Error::Invalid { field: "title", .. }) => "title",
            Err(Error::BodyTooLarge { .. }) => "body",
            Err(Error::Invalid {
                field: "priority", ..
            }) => "priority",
            Err(Error::IdTaken { .. }) => "taken",
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        ["unknown", "cycle", "title", "body", "priority", "taken"]
    );
    // All bad input but the taken id, which is a refusal (as a message's
    // or an event's id taken with other content is).
    let usage: Vec<bool> = refused
        .iter()
        .map(|r| r.as_ref().unwrap_err().kind() == ErrorKind::Invalid)
        .collect();
    assert_eq!(usage, [true, true, true, true, true, false]);
    // A batch whose items form a cycle posts none of them.
    let cycle = [
        item("x").with_depends_on([id("y")]),
        item("y").with_depends_on([id("x")]),
    ];
    assert!(matches!(
        s.pool.post_many(&lead, &cycle),
        Err(Error::Cycle { .. })
    ));
    // A role no agent can hold (the directory's rule), and `all`.
    for role in ["Reviewer", "../x", "a b", "all", ""] {
        let said = s.pool.post(&lead, &item("r").with_role(role));
        assert!(
            matches!(&said, Err(Error::Invalid { field: "role", .. })),
            "{role:?}: {said:?}"
        );
    }
    assert_eq!(snapshot(&s), before);
    s.pool
        .post(&lead, &item("r").with_role("code-review_2"))
        .unwrap();
}

#[test]
fn a_bad_id_is_refused_before_it_touches_a_path() {
    for bad in ["../etc", ".hidden", "a/b", ""] {
        assert!(ItemId::new(bad).is_err(), "{bad:?}");
    }
}

fn bad_claims_and_releases_change_nothing(place: &Place) {
    let s = setup_on(place);
    let (lead, alice) = (agent("lead"), agent("alice"));
    s.pool.post(&lead, &item("a")).unwrap();
    s.pool
        .post(&lead, &item("b").with_depends_on([id("a")]))
        .unwrap();
    let before = snapshot(&s);
    assert!(matches!(
        s.pool.claim(&alice, &id("zz")),
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        s.pool.claim(&alice, &id("b")),
        Err(Error::NotReady { .. })
    ));
    assert!(matches!(
        s.pool.release(&alice, &id("a"), "x"),
        Err(Error::NotHolder { holder: None, .. })
    ));
    assert!(matches!(
        s.pool.release(&alice, &id("a"), "  "),
        Err(Error::Invalid {
            field: "reason",
            ..
        })
    ));
    assert!(matches!(
        s.pool.done(&alice, &id("a")),
        Err(Error::NotHolder { .. })
    ));
    assert!(s.pool.ready(&ReadyFilter::new()).is_ok());
    assert_eq!(snapshot(&s), before);
}

chipset_backend::both!(
    crate::place::Place;
    bad_posts_are_refused_and_change_nothing,
    bad_claims_and_releases_change_nothing,
);
