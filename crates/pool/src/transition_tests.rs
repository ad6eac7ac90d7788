//! The pure core's tests: post checks, dependency cycles, states and
//! ready order.

use super::*;
use crate::format::DoneRecord;

fn t(s: &str) -> Timestamp {
    s.parse::<Timestamp>().unwrap()
}

fn id(s: &str) -> ItemId {
    ItemId::new(s).unwrap()
}

fn item(name: &str, deps: &[&str]) -> Item {
    NewItem::new(name)
        .with_depends_on(deps.iter().map(|d| id(d)))
        .to_item(
            id(name),
            &AgentId::new("lead").unwrap(),
            t("2026-01-01T00:00:00Z"),
        )
}

fn table(items: &[Item]) -> Table {
    let mut table = Table::empty();
    for (n, i) in items.iter().enumerate() {
        table.items.push(Entry::of(i, n as u64 + 1));
    }
    table
}

#[test]
fn a_check_names_the_field() {
    let check = |item: NewItem, field: &str| match item.validate() {
        Err(Error::Invalid { field: f, .. }) => assert_eq!(f, field),
        other => panic!("{field}: {other:?}"),
    };
    check(NewItem::new("  "), "title");
    check(NewItem::new("a\nb"), "title");
    check(NewItem::new("x".repeat(MAX_TITLE + 1)), "title");
    check(NewItem::new("t").with_priority(5), "priority");
    check(NewItem::new("t").with_labels(["a b"]), "label");
    check(NewItem::new("t").with_labels([""]), "label");
    check(NewItem::new("t").with_role("x,y"), "role");
    check(
        NewItem::new("t").with_labels((0..=MAX_LABELS).map(|n| n.to_string())),
        "labels",
    );
    assert!(matches!(
        NewItem::new("t")
            .with_body("b".repeat(MAX_BODY + 1))
            .validate(),
        Err(Error::BodyTooLarge { .. })
    ));
    assert!(
        NewItem::new("t")
            .with_body("b".repeat(MAX_BODY))
            .validate()
            .is_ok()
    );
}

#[test]
fn dependencies_must_exist_and_never_close_a_cycle() {
    let posted = table(&[item("a", &[])]);
    let index = Index::new(&posted);
    assert!(check_dependencies(&index, &[item("b", &["a"])]).is_ok());
    assert!(matches!(
        check_dependencies(&index, &[item("b", &["zz"])]),
        Err(Error::UnknownDependency { .. })
    ));
    assert!(matches!(
        check_dependencies(&index, &[item("b", &["b"])]),
        Err(Error::Cycle { .. })
    ));
    let Err(Error::Cycle { ids }) = check_dependencies(
        &index,
        &[item("b", &["c"]), item("c", &["d"]), item("d", &["b"])],
    ) else {
        panic!("expected a cycle")
    };
    assert_eq!(ids, [id("b"), id("c"), id("d"), id("b")]);
    assert!(check_dependencies(&index, &[item("b", &["c", "a"]), item("c", &["a"])]).is_ok());
}

#[test]
fn state_follows_done_deps_deferral_then_priority_and_age() {
    let mut items = vec![
        item("a", &[]),
        item("b", &["a"]),
        item("c", &[]),
        item("d", &[]),
    ];
    items[2].priority = 0;
    items[3].not_before = Some(t("2026-01-02T00:00:00Z"));
    let mut posted = table(&items);
    let holds = HashMap::new();
    let view = View {
        index: Index::new(&posted),
        holds: &holds,
        now: t("2026-01-01T12:00:00Z"),
    };
    let ready: Vec<&str> = view
        .ready(&ReadyFilter::new())
        .iter()
        .map(|e| e.id.as_str())
        .collect();
    assert_eq!(ready, ["c", "a"]);
    assert_eq!(view.next(&ReadyFilter::new()).unwrap().id, id("c"));
    assert_eq!(
        view.state(&posted.items[1]),
        WorkState::Blocked { on: vec![id("a")] }
    );
    assert_eq!(view.state(&posted.items[3]).as_str(), "deferred");
    posted.items[0].done = Some(DoneRecord {
        by: AgentId::new("x").unwrap(),
        at: t("2026-01-01T00:00:00Z"),
    });
    let view = View {
        index: Index::new(&posted),
        holds: &holds,
        now: t("2026-01-03T00:00:00Z"),
    };
    let ready: Vec<&str> = view
        .ready(&ReadyFilter::new())
        .iter()
        .map(|e| e.id.as_str())
        .collect();
    assert_eq!(ready, ["c", "b", "d"]);
}

#[test]
fn a_filter_keeps_labels_and_role_or_no_role() {
    let mut e = Entry::of(&item("a", &[]), 1);
    e.labels = vec!["ui".into(), "bug".into()];
    assert!(ReadyFilter::new().with_label("ui").keeps(&e));
    assert!(!ReadyFilter::new().with_label("db").keeps(&e));
    assert!(ReadyFilter::new().with_role("qa").keeps(&e));
    e.role = Some("dev".into());
    assert!(!ReadyFilter::new().with_role("qa").keeps(&e));
    assert!(ReadyFilter::new().with_role("dev").keeps(&e));
    assert!(ReadyFilter::new().keeps(&e));
    assert!(ReadyFilter::new().with_roles(["qa", "dev"]).keeps(&e));
    assert!(
        !ReadyFilter::new()
            .with_roles(Vec::<String>::new())
            .keeps(&e)
    );
    e.role = None;
    assert!(
        ReadyFilter::new()
            .with_roles(Vec::<String>::new())
            .keeps(&e)
    );
}
