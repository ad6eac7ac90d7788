//! The lifecycle through the I/O layer: transitions, fencing, corrupt hooks,
//! doctor and listings.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use chipset_hook::{Error, HookStatus, Hooks, Pickup};
use chipset_store::{
    Action, Classify, CorruptReason, Defect, DoctorMode, ErrorKind, ReadOutcome, Timestamp,
};
use chipset_testkit::unrepaired;

use crate::ReadExt;
use crate::{T0, agent, bead, setup};

#[test]
fn a_missing_hook_is_empty_and_reading_creates_nothing() {
    let s = setup();
    let a = agent("a");
    assert_eq!(s.hooks.read(&a).unwrap(), ReadOutcome::Missing);
    assert_eq!(s.hooks.read(&a).unwrap().status(), Some(HookStatus::Empty));
    assert_eq!(s.hooks.current(&a).unwrap(), None);
    assert_eq!(s.hooks.pickup(&a).unwrap(), Pickup::Idle);
    assert!(!s.hooks.path(&a).exists());
    assert!(s.hooks.list().unwrap().is_empty());
}

#[test]
fn clearing_writes_an_empty_hook_and_never_deletes_the_file() {
    let s = setup();
    let a = agent("a");
    let held = s.hooks.assign(&a, bead("b1"), "t", None).unwrap();
    assert_eq!(held.generation, 1);
    s.hooks.activate(&held).unwrap();
    s.hooks.complete(&held).unwrap();
    let hook = s.hooks.clear(&held).unwrap();
    assert_eq!(hook.state.status(), HookStatus::Empty);
    assert_eq!(hook.generation, 2);
    assert!(s.hooks.path(&a).exists());
    assert_eq!(s.hooks.read(&a).unwrap(), ReadOutcome::Value(hook));
    // The next assignment starts a new generation.
    assert_eq!(
        s.hooks
            .assign(&a, bead("b1"), "t", None)
            .unwrap()
            .generation,
        3
    );
}

/// Assign refuses a title that is empty, over `MAX_TITLE` bytes or not
/// one line, as a typed error, before it reads or writes anything; a
/// plan of the pool's claim refuses it the same way.
#[test]
fn assign_refuses_a_bad_title_and_writes_nothing() {
    let s = setup();
    let a = agent("a");
    let long = "x".repeat(crate::MAX_TITLE + 1);
    for (title, says) in [
        ("", "must not be empty"),
        ("  ", "must not be empty"),
        ("multi\nline", "one line"),
        ("tab\there", "one line"),
        (long.as_str(), "at most 1024"),
    ] {
        let e = s.hooks.assign(&a, bead("b1"), title, None).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidTitle { reason } if reason.contains(says)),
            "{title:?}: {e}"
        );
        let plan = s
            .hooks
            .plan_assign(
                &a,
                None,
                None,
                (bead("b1"), title.to_owned()),
                None,
                Timestamp::EPOCH,
            )
            .unwrap_err();
        assert!(matches!(plan, Error::InvalidTitle { .. }), "{title:?}");
        assert!(!s.hooks.path(&a).exists(), "{title:?} wrote nothing");
    }
    let fits = "é".repeat(crate::MAX_TITLE / 2);
    s.hooks.assign(&a, bead("b1"), fits, None).unwrap();
}

#[test]
fn one_work_item_per_agent() {
    let s = setup();
    let a = agent("a");
    let held = s.hooks.assign(&a, bead("b1"), "t", None).unwrap();
    let refused = |status| {
        let e = s.hooks.assign(&a, bead("b2"), "u", None).unwrap_err();
        assert!(
            matches!(
                &e,
                Error::AlreadyAssigned { agent, status: s, bead_id }
                    if *agent == a && *s == status && *bead_id == bead("b1")
            ),
            "{e}"
        );
    };
    refused(HookStatus::Pending);
    s.hooks.activate(&held).unwrap();
    refused(HookStatus::Active);
    s.hooks.complete(&held).unwrap();
    refused(HookStatus::Completed);
    // The file still holds the first assignment.
    assert_eq!(s.hooks.current(&a).unwrap(), Some(held));
}

#[test]
fn no_skipping_and_the_explicit_takeaway() {
    let s = setup();
    let a = agent("a");
    let held = s.hooks.assign(&a, bead("b1"), "t", None).unwrap();
    let wrong = |e: Error, op, from| {
        assert!(
            matches!(&e, Error::WrongState { op: o, from: f, .. } if *o == op && *f == from),
            "{e}"
        );
        // A refusal by state is neither stale, corrupt nor unsupported: the
        // dispatcher reacts to each differently.
        assert_eq!(e.kind(), ErrorKind::Refused, "{e}");
    };
    wrong(
        s.hooks.complete(&held).unwrap_err(),
        "complete",
        HookStatus::Pending,
    );
    wrong(
        s.hooks.touch(&held).unwrap_err(),
        "touch",
        HookStatus::Pending,
    );
    wrong(
        s.hooks.clear(&held).unwrap_err(),
        "clear",
        HookStatus::Pending,
    );
    let active = s.hooks.activate(&held).unwrap();
    // Activating again is a retry of a transition that applied: success, nothing written.
    assert_eq!(s.hooks.activate(&held).unwrap(), active);
    wrong(
        s.hooks.clear(&held).unwrap_err(),
        "clear",
        HookStatus::Active,
    );

    // Taking active work away is a separate, explicit call, reported as such.
    let r = s.hooks.reassign(&held).unwrap();
    assert_eq!(r.taken, held);
    assert_eq!(r.was, HookStatus::Active);
    assert_eq!(r.hook.state.status(), HookStatus::Empty);
    assert_eq!(r.hook.generation, held.generation + 1);

    // Completed work is cleared, not reassigned.
    let held = s.hooks.assign(&a, bead("b2"), "t", None).unwrap();
    s.hooks.activate(&held).unwrap();
    s.hooks.complete(&held).unwrap();
    wrong(
        s.hooks.reassign(&held).unwrap_err(),
        "reassign",
        HookStatus::Completed,
    );
}

#[test]
fn a_replaced_agent_can_neither_touch_nor_complete() {
    let s = setup();
    let a = agent("a");
    let held = s.hooks.assign(&a, bead("b1"), "t", None).unwrap();
    s.hooks.activate(&held).unwrap();
    s.hooks.reassign(&held).unwrap();
    let file_before = fs::read(s.hooks.path(&a)).unwrap();
    for e in [
        s.hooks.touch(&held).unwrap_err(),
        s.hooks.complete(&held).unwrap_err(),
    ] {
        assert_eq!(e.kind(), ErrorKind::Stale, "{e}");
    }
    assert_eq!(
        fs::read(s.hooks.path(&a)).unwrap(),
        file_before,
        "a stale call wrote"
    );

    // Even once the same bead is handed back to the same agent.
    let again = s.hooks.assign(&a, bead("b1"), "t", None).unwrap();
    s.hooks.activate(&again).unwrap();
    // Same agent and bead, another generation: another fence. What the hook
    // holds now is the new one.
    assert!(!again.same_fence(&held) && !held.same_fence(&again));
    let current = s.hooks.current(&a).unwrap().unwrap();
    assert!(current.same_fence(&again) && !current.same_fence(&held));
    assert_eq!(
        again.to_string(),
        format!(
            "bead `b1` on `a` (generation 3, assigned {})",
            Timestamp::from_unix_ms(T0)
        )
    );
    let e = s.hooks.complete(&held).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Stale, "{e}");
    assert_eq!(
        e.to_string(),
        format!(
            "cannot complete: {held} is stale; the hook of `a` is now active with bead `b1` (generation 3, assigned {})",
            Timestamp::from_unix_ms(T0)
        )
    );
    s.hooks.complete(&again).unwrap();
}

#[test]
fn pickup_starts_resumes_or_waits_and_never_defers() {
    let s = setup();
    let a = agent("a");
    let held = s.hooks.assign(&a, bead("b1"), "t", None).unwrap();
    assert_eq!(s.hooks.pickup(&a).unwrap(), Pickup::Started(held.clone()));
    assert_eq!(s.hooks.read(&a).unwrap().status(), Some(HookStatus::Active));
    s.clock.advance(Duration::from_secs(5));
    let p = s.hooks.pickup(&a).unwrap();
    assert_eq!(p.work(), Some(&held));
    assert!(matches!(p, Pickup::Resumed(_)));
    let hook = s.hooks.read(&a).unwrap();
    assert_eq!(
        hook.hook().unwrap().last_activity,
        Timestamp::from_unix_ms(T0 + 5_000)
    );
    s.hooks.complete(&held).unwrap();
    assert_eq!(
        s.hooks.pickup(&a).unwrap(),
        Pickup::AwaitingClear(held.clone())
    );
    s.hooks.clear(&held).unwrap();
    assert_eq!(s.hooks.pickup(&a).unwrap(), Pickup::Idle);
}

#[test]
fn a_change_that_alters_nothing_writes_nothing() {
    let s = setup();
    let a = agent("a");
    let held = s.hooks.assign(&a, bead("b1"), "t", None).unwrap();
    s.hooks.activate(&held).unwrap();
    let inode = fs::metadata(s.hooks.path(&a)).unwrap().ino();
    s.hooks.touch(&held).unwrap();
    assert_eq!(fs::metadata(s.hooks.path(&a)).unwrap().ino(), inode);
    s.clock.advance(Duration::from_millis(1));
    s.hooks.touch(&held).unwrap();
    assert_ne!(fs::metadata(s.hooks.path(&a)).unwrap().ino(), inode);
}

/// Writes each kind of bad hook for agents c1..c5 and returns their names.
fn plant_corrupt_hooks(s: &crate::Setup) -> Vec<&'static str> {
    fs::create_dir_all(s.hooks.dir()).unwrap();
    let dir = s.hooks.dir().as_path(); // raw paths: the test plants bad files
    fs::write(dir.join("c1.json"), "{\"agent_id\": \"c1\", \"sta").unwrap();
    fs::write(
        dir.join("c2.json"),
        r#"{"agent_id":"c2","status":"pending","work_item":null,"last_activity":"2026-03-05T10:32:00Z"}"#,
    )
    .unwrap();
    fs::write(
        dir.join("c3.json"),
        r#"{"agent_id":"someone-else","status":"empty","work_item":null,"last_activity":"2026-03-05T10:32:00Z"}"#,
    )
    .unwrap();
    fs::write(dir.join("c4.json"), "").unwrap();
    let target = s.tmp.scratch("elsewhere.json");
    fs::write(&target, "outside").unwrap();
    std::os::unix::fs::symlink(&target, dir.join("c5.json")).unwrap();
    vec!["c1", "c2", "c3", "c4", "c5"]
}

#[test]
fn corrupt_hooks_are_never_empty_and_refuse_every_transition() {
    let s = setup();
    let names = plant_corrupt_hooks(&s);
    for name in &names {
        let a = agent(name);
        let read = s.hooks.read(&a).unwrap();
        assert!(read.corruption().is_some(), "{name}: {read:?}");
        assert_eq!(read.status(), None);
        let before = fs::symlink_metadata(s.hooks.path(&a)).unwrap().ino();
        let e = s.hooks.assign(&a, bead("b"), "t", None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corrupt, "{name}: {e}");
        assert!(e.to_string().contains("a dispatcher must repair it"), "{e}");
        assert_eq!(s.hooks.pickup(&a).unwrap_err().kind(), ErrorKind::Corrupt);
        assert_eq!(s.hooks.current(&a).unwrap_err().kind(), ErrorKind::Corrupt);
        assert_eq!(
            fs::symlink_metadata(s.hooks.path(&a)).unwrap().ino(),
            before,
            "{name} was rewritten"
        );
    }
    let read = s.hooks.read(&agent("c3")).unwrap();
    assert!(
        matches!(&read.corruption().unwrap().reason, CorruptReason::WrongShape(m) if m.contains("someone-else"))
    );
    let read = s.hooks.read(&agent("c5")).unwrap();
    assert_eq!(
        read.corruption().unwrap().reason,
        CorruptReason::NotARegularFile
    );

    // The listing reports them as corrupt; none is skipped.
    let listed = s.hooks.list().unwrap();
    let agents: Vec<_> = listed.keys().map(ToString::to_string).collect();
    assert_eq!(agents, names);
    assert!(listed.values().all(|read| read.corruption().is_some()));
}

#[test]
fn a_symlinked_hooks_directory_is_refused_and_not_taken_for_a_corrupt_hook() {
    let s = setup();
    let elsewhere = s.tmp.scratch("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, s.hooks.dir()).unwrap();
    let e = s
        .hooks
        .assign(&agent("a"), bead("b"), "t", None)
        .unwrap_err();
    // Only a symlink at the hook's own path is a corrupt hook (which repair
    // would move aside); a linked directory is the store refusing the path.
    assert!(e.kind() != ErrorKind::Corrupt, "{e}");
    assert!(
        matches!(&e, Error::Store(chipset_store::Error::Symlink { path }) if *path == s.hooks.dir().to_path_buf()),
        "{e:?}"
    );
    assert_eq!(
        fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "wrote through the link"
    );
}

#[test]
fn doctor_reports_then_fixes_corrupt_hooks_and_leaves_strays() {
    let s = setup();
    plant_corrupt_hooks(&s);
    s.hooks.assign(&agent("ok"), bead("b"), "t", None).unwrap();
    fs::write(s.hooks.dir().as_path().join("notes.txt"), "hi").unwrap();

    let report = s.hooks.doctor(DoctorMode::Check).unwrap();
    assert_eq!(report.scanned, 6);
    assert_eq!(report.findings.len(), 6);
    assert_eq!(unrepaired(&report), 5);
    let stray = report
        .findings
        .iter()
        .find(|f| f.fault == Defect::Stray)
        .unwrap();
    assert!(
        stray
            .to_string()
            .ends_with("notes.txt`: not a hook file (left alone)"),
        "{stray}"
    );
    assert!(
        s.hooks.read(&agent("c1")).unwrap().corruption().is_some(),
        "check changed something"
    );

    let report = s.hooks.doctor(DoctorMode::Fix).unwrap();
    assert_eq!(unrepaired(&report), 0);
    assert!(
        report
            .findings
            .iter()
            .filter(|f| f.subject.is_some())
            .all(|f| matches!(f.actions[0], Action::Quarantined { to: Some(_), .. }))
    );
    assert_eq!(tally(&s.hooks), (5, 1, 0, 0, 0, 0));
    assert_eq!(
        fs::read_to_string(s.hooks.dir().as_path().join("notes.txt")).unwrap(),
        "hi"
    );

    let report = s.hooks.doctor(DoctorMode::Fix).unwrap();
    assert_eq!(report.findings.len(), 1, "{:?}", report.findings);
    assert!(!report.is_clean());
}

/// The hook files [`Hooks::list`] finds, by kind: (empty, pending, active,
/// completed, corrupt, unsupported).
fn tally(hooks: &Hooks) -> (usize, usize, usize, usize, usize, usize) {
    let mut t = (0, 0, 0, 0, 0, 0);
    for read in hooks.list().unwrap().values() {
        match (read.status(), read) {
            (Some(HookStatus::Empty), _) => t.0 += 1,
            (Some(HookStatus::Pending), _) => t.1 += 1,
            (Some(HookStatus::Active), _) => t.2 += 1,
            (Some(HookStatus::Completed), _) => t.3 += 1,
            (Some(other), _) => panic!("a status this test does not know: {other}"),
            (None, ReadOutcome::Unsupported(_)) => t.5 += 1,
            (None, _) => t.4 += 1,
        }
    }
    t
}

#[test]
fn the_listing_holds_each_kind_of_hook_file_once() {
    let s = setup();
    let assign = |name| s.hooks.assign(&agent(name), bead("b"), "t", None).unwrap();
    let e = assign("e");
    s.hooks.activate(&e).unwrap();
    s.hooks.complete(&e).unwrap();
    s.hooks.clear(&e).unwrap();
    assign("p1");
    assign("p2");
    for name in ["a1", "a2", "a3"] {
        s.hooks.activate(&assign(name)).unwrap();
    }
    let c = assign("c");
    s.hooks.activate(&c).unwrap();
    s.hooks.complete(&c).unwrap();
    fs::write(s.hooks.path(&agent("x")), "{not json").unwrap();
    fs::write(
        s.hooks.path(&agent("u")),
        r#"{"agent_id":"u","status":"paused","work_item":null,"last_activity":"2026-03-05T10:32:00Z"}"#,
    )
    .unwrap();

    assert_eq!(s.hooks.list().unwrap().len(), 9);
    assert_eq!(tally(&s.hooks), (1, 2, 3, 1, 1, 1));
}
