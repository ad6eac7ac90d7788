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

fn codes(report: &chipset_store::Report) -> Vec<&'static str> {
    report.findings.iter().map(|f| f.code).collect()
}

fn write(s: &crate::Setup, rel: &str, text: &str) {
    std::fs::write(s.tmp.state.root().join(rel), text).unwrap();
}

/// Four items: `a` done through `done` (in the log), `b` completed on
/// bob's hook, `c` pending on carol's hook, `d` ready.
fn four(s: &crate::Setup) {
    let items: Vec<NewItem> = ["a", "b", "c", "d"]
        .iter()
        .map(|n| crate::item(n))
        .collect();
    s.pool.post_many(&agent("lead"), &items).unwrap();
    let _ = s.pool.claim(&agent("alice"), &id("a")).unwrap();
    s.pool.done(&agent("alice"), &id("a")).unwrap();
    let b = s.pool.claim(&agent("bob"), &id("b")).unwrap().assignment;
    s.hooks.activate(&b).unwrap();
    s.hooks.complete(&b).unwrap();
    let _ = s.pool.claim(&agent("carol"), &id("c")).unwrap();
}

fn states(s: &crate::Setup) -> Vec<(String, &'static str)> {
    s.pool
        .list()
        .unwrap()
        .into_iter()
        .map(|l| (String::from(l.entry.id), l.state.as_str()))
        .collect()
}

fn expected_states() -> Vec<(String, &'static str)> {
    [
        ("a", "done"),
        ("b", "done"),
        ("c", "claimed"),
        ("d", "ready"),
    ]
    .iter()
    .map(|(i, st)| ((*i).to_owned(), *st))
    .collect()
}

/// A healthy pool is clean in both modes, and a root whose pool was never
/// used gets no pool directory from the doctor.
#[test]
fn a_healthy_pool_is_clean_and_an_unused_one_is_untouched() {
    let s = setup();
    let report = s.pool.doctor(chipset_store::DoctorMode::Fix).unwrap();
    assert!(report.is_clean());
    assert!(!s.tmp.state.root().join("pool").exists());
    four(&s);
    for mode in [
        chipset_store::DoctorMode::Check,
        chipset_store::DoctorMode::Fix,
    ] {
        let report = s.pool.doctor(mode).unwrap();
        assert!(report.is_clean(), "{:?}", report.findings);
        assert_eq!(report.scanned, 5, "the table and four items");
    }
}

/// A corrupt table fails the pool closed; the fix moves it aside and
/// rebuilds it from the item files, the log and the hooks.
#[test]
fn a_corrupt_table_is_rebuilt_from_items_log_and_hooks() {
    let s = setup();
    four(&s);
    write(&s, "pool/table.json", "{\"format\": 1, \"items\": [");
    assert!(s.pool.list().is_err(), "fails closed");
    let check = s.pool.doctor(chipset_store::DoctorMode::Check).unwrap();
    assert_eq!(codes(&check), ["pool-table-corrupt"]);
    assert!(check.findings[0].fixable);
    assert!(s.pool.list().is_err(), "a check changes nothing");
    let fix = s.pool.doctor(chipset_store::DoctorMode::Fix).unwrap();
    assert_eq!(codes(&fix), ["pool-table-corrupt"]);
    let said = fix.findings[0].fix_line().unwrap();
    assert!(said.contains("quarantined"), "{said}");
    assert!(
        said.contains("rebuilt the table from 4 item files"),
        "{said}"
    );
    assert_eq!(states(&s), expected_states());
    assert!(
        s.pool
            .doctor(chipset_store::DoctorMode::Check)
            .unwrap()
            .is_clean()
    );
    // The pool works on: the next claim takes `d`.
    let next = s
        .pool
        .claim_next(&agent("dan"), &ReadyFilter::new())
        .unwrap();
    assert_eq!(next.unwrap().entry.id, id("d"));
}

/// A lost table with item files left is rebuilt the same way.
#[test]
fn a_missing_table_is_rebuilt() {
    let s = setup();
    four(&s);
    std::fs::remove_file(s.tmp.state.root().join("pool/table.json")).unwrap();
    let check = s.pool.doctor(chipset_store::DoctorMode::Check).unwrap();
    assert_eq!(codes(&check), ["pool-table-missing"]);
    let fix = s.pool.doctor(chipset_store::DoctorMode::Fix).unwrap();
    assert!(fix.findings[0].is_fixed());
    assert_eq!(states(&s), expected_states());
}

/// A bad line inside the log fails the pool closed; the fix folds the
/// readable lines into the table and moves the log aside.
#[test]
fn a_corrupt_log_is_folded_and_moved_aside() {
    let s = setup();
    four(&s);
    let log = s.tmp.state.root().join("pool/log.jsonl");
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.insert_str(0, "not json\n");
    std::fs::write(&log, text).unwrap();
    assert!(s.pool.list().is_err(), "fails closed");
    let fix = s.pool.doctor(chipset_store::DoctorMode::Fix).unwrap();
    assert_eq!(codes(&fix), ["pool-log-corrupt"]);
    let said = fix.findings[0].fix_line().unwrap();
    assert!(said.contains("folded its 2 readable records"), "{said}");
    assert_eq!(states(&s), expected_states());
    assert_eq!(log_lines(&s), 0);
    assert!(
        s.pool
            .doctor(chipset_store::DoctorMode::Check)
            .unwrap()
            .is_clean()
    );
}

/// Item files: an orphan (a post cut short) is moved aside and a retry of
/// the post still works; a missing, changed or stray file is reported
/// for a person.
#[test]
fn item_files_are_checked_against_the_table() {
    let s = setup();
    four(&s);
    write(&s, "pool/items/zz.json", "{}");
    write(&s, "pool/items/notes.txt", "hello");
    std::fs::remove_file(s.tmp.state.root().join("pool/items/d.json")).unwrap();
    let a = std::fs::read_to_string(s.tmp.state.root().join("pool/items/a.json")).unwrap();
    write(&s, "pool/items/a.json", &a.replace("do a", "do A"));
    let fix = s.pool.doctor(chipset_store::DoctorMode::Fix).unwrap();
    let mut found = codes(&fix);
    found.sort_unstable();
    assert_eq!(
        found,
        [
            "pool-item-mismatch",
            "pool-item-missing",
            "pool-item-orphan",
            "pool-stray"
        ]
    );
    let orphan = fix
        .findings
        .iter()
        .find(|f| f.code == "pool-item-orphan")
        .unwrap();
    assert!(orphan.is_fixed());
    assert_eq!(fix.open(), 3, "the others are left for a person");
    assert!(!s.tmp.state.root().join("pool/items/zz.json").exists());
    let again = s.pool.post(&agent("lead"), &crate::item("zz")).unwrap();
    assert!(!again.existing);
}

/// A `done` cut short after its record leaves the item on the hook; the
/// fix clears the hook. Two hooks holding one item are a conflict.
#[test]
fn hooks_holding_done_items_are_cleared() {
    let s = setup();
    four(&s);
    let line = "{\"done\":{\"at\":\"2026-03-05T10:35:00.123Z\",\"by\":\"carol\"},\"id\":\"c\"}\n";
    let log = s.tmp.state.root().join("pool/log.jsonl");
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str(line);
    std::fs::write(&log, text).unwrap();
    let check = s.pool.doctor(chipset_store::DoctorMode::Check).unwrap();
    assert_eq!(codes(&check), ["pool-done-on-hook"]);
    let fix = s.pool.doctor(chipset_store::DoctorMode::Fix).unwrap();
    assert!(fix.findings[0].is_fixed());
    assert_eq!(s.hooks.current(&agent("carol")).unwrap(), None);
    assert!(
        s.pool
            .doctor(chipset_store::DoctorMode::Check)
            .unwrap()
            .is_clean()
    );
    // Assigned by hand onto a second hook: a person decides.
    s.hooks
        .assign(
            &agent("eve"),
            chipset_hook::BeadId::new("d").unwrap(),
            "d",
            None,
        )
        .unwrap();
    s.hooks
        .assign(
            &agent("fay"),
            chipset_hook::BeadId::new("d").unwrap(),
            "d",
            None,
        )
        .unwrap();
    let check = s.pool.doctor(chipset_store::DoctorMode::Fix).unwrap();
    assert_eq!(codes(&check), ["pool-claimed-twice"]);
    assert!(!check.findings[0].fixable);
}
