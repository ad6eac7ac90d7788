//! The on-disk contract: golden files per state, the seed's example read
//! verbatim, and our files read the way a seed-style program reads them.

use std::fs;
use std::time::Duration;

use chipset_hook::{HookStatus, Pickup};
use chipset_store::ReadOutcome;
use serde_json::Value;

use crate::ReadExt;
use crate::{agent, bead, setup};

/// The seed's example hook, byte for byte as the seed prints it.
const SEED_EXAMPLE: &str = r#"{ "agent_id": "polecat-alpha", "status": "active", "work_item": { "bead_id": "gt-abc12", "title": "Add README section", "assigned_at": "2026-03-05T10:30:00Z" }, "last_activity": "2026-03-05T10:32:00Z" }"#;

fn file_text(s: &crate::Setup, name: &str) -> String {
    fs::read_to_string(s.hooks.path(&agent(name))).unwrap()
}

#[test]
fn golden_file_for_each_state() {
    let s = setup();
    let alpha = agent("polecat-alpha");
    let held = s
        .hooks
        .assign(
            &alpha,
            bead("gt-abc12"),
            "Add README section",
            Some(&agent("mayor")),
        )
        .unwrap();
    insta::assert_snapshot!("pending", file_text(&s, "polecat-alpha"));
    s.clock.advance(Duration::from_secs(60));
    assert!(matches!(
        s.hooks.pickup(&alpha).unwrap(),
        Pickup::Started(_)
    ));
    s.clock.advance(Duration::from_secs(60));
    s.hooks.touch(&held).unwrap();
    insta::assert_snapshot!("active", file_text(&s, "polecat-alpha"));
    s.clock.advance(Duration::from_secs(60));
    s.hooks.complete(&held).unwrap();
    insta::assert_snapshot!("completed", file_text(&s, "polecat-alpha"));
    s.clock.advance(Duration::from_secs(60));
    s.hooks.clear(&held).unwrap();
    insta::assert_snapshot!("empty", file_text(&s, "polecat-alpha"));
}

#[test]
fn assignment_without_dispatcher_writes_no_assigned_by() {
    let s = setup();
    s.hooks.assign(&agent("a"), bead("b"), "t", None).unwrap();
    let v: Value = serde_json::from_str(&file_text(&s, "a")).unwrap();
    assert!(v.get("assigned_by").is_none(), "{v}");
}

#[test]
fn seed_example_is_read_verbatim_and_can_be_worked_on() {
    let s = setup();
    let alpha = agent("polecat-alpha");
    fs::create_dir_all(s.hooks.dir()).unwrap();
    fs::write(s.hooks.path(&alpha), SEED_EXAMPLE).unwrap();

    let ReadOutcome::Value(hook) = s.hooks.read(&alpha).unwrap() else {
        panic!("seed example not read as a hook");
    };
    assert_eq!(hook.state.status(), HookStatus::Active);
    assert_eq!(hook.generation, 0);
    assert_eq!(hook.last_activity.to_string(), "2026-03-05T10:32:00.000Z");
    let work = hook.state.work().unwrap();
    assert_eq!(work.bead_id.as_str(), "gt-abc12");
    assert_eq!(work.title, "Add README section");
    assert_eq!(work.assigned_at.to_string(), "2026-03-05T10:30:00.000Z");
    assert_eq!(work.assigned_by, None);

    // The agent can carry on with it, and the dispatcher can clear it.
    let held = s.hooks.current(&alpha).unwrap().unwrap();
    assert_eq!(held.generation, 0);
    s.hooks.touch(&held).unwrap();
    s.hooks.complete(&held).unwrap();
    let empty = s.hooks.clear(&held).unwrap();
    assert_eq!(empty.generation, 1);
}

#[test]
fn seed_written_empty_and_pending_hooks_are_read() {
    let s = setup();
    fs::create_dir_all(s.hooks.dir()).unwrap();
    // As the seed's clearHook and setHook write them (with toISOString times).
    fs::write(
        s.hooks.path(&agent("a")),
        r#"{"agent_id":"a","last_activity":"2026-03-05T10:35:00.123Z","status":"empty","work_item":null}"#,
    )
    .unwrap();
    fs::write(
        s.hooks.path(&agent("b")),
        r#"{"agent_id":"b","last_activity":"2026-03-05T10:35:00.123Z","status":"pending","work_item":{"assigned_at":"2026-03-05T10:35:00.123Z","bead_id":"gt-1","title":"T"}}"#,
    )
    .unwrap();
    assert_eq!(
        s.hooks.read(&agent("a")).unwrap().status(),
        Some(HookStatus::Empty)
    );
    let Pickup::Started(held) = s.hooks.pickup(&agent("b")).unwrap() else {
        panic!("pending seed hook not picked up");
    };
    assert_eq!(held.work.bead_id.as_str(), "gt-1");
}

/// A seed-style reader: plain JSON, the four fields with the seed's types,
/// and `Date.parse`-able timestamps (RFC 3339 in UTC with `Z`).
fn check_seed_shape(v: &Value) {
    let obj = v.as_object().expect("an object");
    assert!(obj["agent_id"].is_string());
    let status = obj["status"].as_str().expect("status is a string");
    assert!(
        ["empty", "pending", "active", "completed"].contains(&status),
        "{status}"
    );
    let is_iso = |t: &Value| {
        let t = t.as_str().expect("timestamp is a string");
        t.len() == 24 && t.ends_with('Z') && t.parse::<chipset_store::Timestamp>().is_ok()
    };
    assert!(is_iso(&obj["last_activity"]));
    match &obj["work_item"] {
        Value::Null => assert_eq!(status, "empty"),
        Value::Object(w) => {
            assert_ne!(status, "empty");
            assert!(w["bead_id"].is_string());
            assert!(w["title"].is_string());
            assert!(is_iso(&w["assigned_at"]));
        }
        other => panic!("work_item is {other}"),
    }
    // Sorted keys, as the seed's serializeSorted writes them.
    let keys: Vec<&String> = obj.keys().collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
}

#[test]
fn our_files_have_the_seed_shape_in_every_state() {
    let s = setup();
    let a = agent("a");
    let check = || {
        let text = file_text(&s, "a");
        let v: Value = serde_json::from_str(&text).unwrap();
        check_seed_shape(&v);
        assert!(
            text.find("\"agent_id\"") < text.find("\"status\""),
            "keys not sorted: {text}"
        );
    };
    let held = s
        .hooks
        .assign(&a, bead("b"), "t", Some(&agent("mayor")))
        .unwrap();
    check();
    s.hooks.activate(&held).unwrap();
    check();
    s.hooks.complete(&held).unwrap();
    check();
    s.hooks.clear(&held).unwrap();
    check();
}

#[test]
fn a_seed_style_edit_of_our_file_keeps_the_fence() {
    // A seed program activates by parsing, setting `status`, and writing the
    // whole object back: our extra fields survive, and so does our fence.
    let s = setup();
    let a = agent("a");
    let held = s
        .hooks
        .assign(&a, bead("b"), "t", Some(&agent("mayor")))
        .unwrap();
    let mut v: Value = serde_json::from_str(&file_text(&s, "a")).unwrap();
    v["status"] = "active".into();
    v["last_activity"] = "2026-03-05T10:40:00.000Z".into();
    fs::write(s.hooks.path(&a), serde_json::to_vec(&v).unwrap()).unwrap();
    assert_eq!(s.hooks.read(&a).unwrap().status(), Some(HookStatus::Active));
    s.hooks.complete(&held).unwrap();
}
