//! What only the crate's internals can reach: an actor acting outside its
//! role (through [`Hooks::apply`](crate::Hooks::apply); the typed methods
//! always act in role) and the repair of one corrupt hook, which
//! [`Hooks::doctor`](crate::Hooks::doctor) runs for every corrupt hook.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "tests plant, corrupt and inspect files as another program would, outside the store's API"
)]

use std::fs;

use chipset_store::ReadOutcome;

use crate::store::tests::{ReadExt, T0, agent, bead, setup};
use crate::transition::{Actor, HookEvent};
use crate::{Error, HookStatus};

#[test]
fn agents_cannot_act_on_other_hooks_or_as_dispatchers() {
    let s = setup();
    let a = agent("a");
    let held = s.hooks.assign(&a, bead("b1"), "t", None).unwrap();
    let e = s
        .hooks
        .apply(
            &a,
            HookEvent::Activate(held.clone()),
            &Actor::Agent(agent("b")),
        )
        .unwrap_err();
    assert!(matches!(e, Error::NotOwner { .. }), "{e}");
    let e = s
        .hooks
        .apply(
            &a,
            HookEvent::Reassign(held.clone()),
            &Actor::Agent(a.clone()),
        )
        .unwrap_err();
    assert!(matches!(e, Error::NotPermitted { .. }), "{e}");
    assert_eq!(
        s.hooks.read(&a).unwrap().status(),
        Some(HookStatus::Pending)
    );
}

/// Writes each kind of bad hook for agents c1..c5 and returns their names.
fn plant_corrupt_hooks(s: &crate::store::tests::Setup) -> Vec<&'static str> {
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
fn repair_quarantines_then_empties_and_work_can_resume() {
    let s = setup();
    plant_corrupt_hooks(&s);
    let a = agent("c1");
    let repaired = s.hooks.repair(&a).unwrap().expect("repaired");
    assert_eq!(
        fs::read_to_string(&repaired.quarantined).unwrap(),
        "{\"agent_id\": \"c1\", \"sta"
    );
    assert!(
        repaired
            .quarantined
            .starts_with(s.hooks.dir().as_path().join(".quarantine"))
    );
    assert_eq!(repaired.hook.state.status(), HookStatus::Empty);
    // No assignment from before the corruption can match the new generation.
    assert!(repaired.hook.generation >= T0 as u64);
    assert_eq!(
        s.hooks.read(&a).unwrap(),
        ReadOutcome::Value(repaired.hook.clone())
    );
    assert_eq!(
        s.hooks.repair(&a).unwrap(),
        None,
        "a legal hook is left alone"
    );
    let held = s.hooks.assign(&a, bead("b"), "t", None).unwrap();
    assert_eq!(held.generation, repaired.hook.generation + 1);

    // A symlink is moved aside itself; what it pointed to is untouched.
    let link = s.hooks.repair(&agent("c5")).unwrap().expect("repaired");
    assert!(
        fs::symlink_metadata(&link.quarantined)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        fs::read_to_string(s.tmp.scratch("elsewhere.json")).unwrap(),
        "outside"
    );
    assert_eq!(s.hooks.repair(&agent("nobody")).unwrap(), None);
    assert!(!s.hooks.path(&agent("nobody")).exists());
}
