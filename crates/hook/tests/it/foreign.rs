//! Hooks written by other programs: the camelCase files of Tibsfox's
//! `StateManager` (the seed author's public code), fields chipset does not
//! know, and statuses it does not support.

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use chipset_hook::{HookStatus, Hooks, Pickup};
use chipset_store::{AgentId, Timestamp};
use chipset_store::{Classify, ErrorKind, ReadOutcome};
use chipset_store::{Defect, DoctorMode};
use chipset_testkit::unrepaired;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

use crate::ReadExt;
use crate::{agent, bead, setup};

/// 2026-11-23T05:00:00.000Z, after the Tibsfox fixtures were written.
const AFTER_FIXTURES: i64 = 1_795_410_000_000;

const TIBSFOX_STATES: [(&str, HookStatus); 4] = [
    ("pending", HookStatus::Pending),
    ("active", HookStatus::Active),
    ("completed", HookStatus::Completed),
    ("empty", HookStatus::Empty),
];

/// The work-item fields Tibsfox writes that chipset does not know.
const TIBSFOX_ITEM_EXTRAS: [&str; 4] = ["description", "hookStatus", "priority", "status"];

fn tibsfox(name: &str) -> PathBuf {
    chipset_testkit::peer_fixtures().join(format!("tibsfox/hooks/{name}.json"))
}

fn file(hooks: &Hooks, a: &AgentId) -> Value {
    serde_json::from_slice(&fs::read(hooks.path(a)).unwrap()).unwrap()
}

/// Places `bytes` as `a`'s hook file.
fn plant(hooks: &Hooks, a: &AgentId, bytes: &[u8]) {
    fs::create_dir_all(hooks.dir()).unwrap();
    fs::write(hooks.path(a), bytes).unwrap();
}

fn copy_fixture(hooks: &Hooks, a: &AgentId, name: &str) {
    plant(hooks, a, &fs::read(tibsfox(name)).unwrap());
}

/// Checks that a chipset-written file is the seed form: no camelCase key it
/// understood is left, and the seed's four fields are there.
fn assert_seed_form(v: &Value) {
    for camel in ["agentId", "workItem", "lastActivity"] {
        assert!(v.get(camel).is_none(), "{camel} left in {v}");
    }
    for seed in ["agent_id", "status", "work_item", "last_activity"] {
        assert!(v.get(seed).is_some(), "{seed} missing from {v}");
    }
    if let Some(item) = v["work_item"].as_object() {
        assert!(item.get("beadId").is_none(), "{v}");
        for seed in ["bead_id", "title", "assigned_at"] {
            assert!(item.get(seed).is_some(), "{seed} missing from {v}");
        }
    }
}

fn assert_item_extras(v: &Value) {
    for key in TIBSFOX_ITEM_EXTRAS {
        assert!(v["work_item"].get(key).is_some(), "{key} lost: {v}");
    }
    assert_eq!(v["work_item"]["priority"], "P2");
    assert_eq!(
        v["work_item"]["status"], "open",
        "the item's own status is kept"
    );
}

#[test]
fn each_tibsfox_hook_reads_as_written() {
    let s = setup();
    for (name, status) in TIBSFOX_STATES {
        let a = agent("polecat-alpha");
        copy_fixture(&s.hooks, &a, name);
        let ReadOutcome::Value(hook) = s.hooks.read(&a).unwrap() else {
            panic!("{name}: {:?}", s.hooks.read(&a));
        };
        assert_eq!(hook.state.status(), status, "{name}");
        assert_eq!(hook.generation, 0, "{name}");
        let raw: Value = serde_json::from_slice(&fs::read(tibsfox(name)).unwrap()).unwrap();
        assert_eq!(
            hook.last_activity,
            raw["lastActivity"]
                .as_str()
                .unwrap()
                .parse::<Timestamp>()
                .unwrap()
        );
        match hook.state.work() {
            Some(w) => {
                assert_eq!(w.bead_id.as_str(), "bead-b29c90a316");
                assert_eq!(w.title, "Add README section");
                // No `assigned_at` in the file: the hook's last activity stands in.
                assert_eq!(w.assigned_at, hook.last_activity);
                assert_eq!(
                    w.extra.keys().map(String::as_str).collect::<Vec<_>>(),
                    TIBSFOX_ITEM_EXTRAS
                );
            }
            None => assert_eq!(status, HookStatus::Empty),
        }
    }
}

/// Drives `a`'s hook from whatever it holds through the rest of its
/// lifecycle and one whole new cycle, checking each file written.
fn drive_to_a_new_cycle(
    hooks: &Hooks,
    clock: &chipset_store::ManualClock,
    a: &AgentId,
    name: &str,
) {
    let tick = || clock.advance(Duration::from_secs(1));
    let status = || hooks.read(a).unwrap().status().unwrap();
    if status() == HookStatus::Pending {
        tick();
        let held = hooks.current(a).unwrap().unwrap();
        hooks.activate(&held).unwrap();
        let v = file(hooks, a);
        assert_seed_form(&v);
        assert_item_extras(&v);
        assert_eq!(v["status"], "active", "{name}");
    }
    if status() == HookStatus::Active {
        tick();
        let held = hooks.current(a).unwrap().unwrap();
        hooks.touch(&held).unwrap();
        assert_item_extras(&file(hooks, a));
        tick();
        hooks.complete(&held).unwrap();
        let v = file(hooks, a);
        assert_seed_form(&v);
        assert_item_extras(&v);
        assert_eq!(v["status"], "completed", "{name}");
    }
    if status() == HookStatus::Completed {
        tick();
        let held = hooks.current(a).unwrap().unwrap();
        hooks.clear(&held).unwrap();
        let v = file(hooks, a);
        assert_seed_form(&v);
        assert_eq!(v["work_item"], Value::Null, "{name}");
        // A late touch of the retired work is refused and writes nothing.
        assert_eq!(
            hooks.touch(&held).unwrap_err().kind(),
            ErrorKind::Stale,
            "{name}"
        );
    }
    assert_eq!(status(), HookStatus::Empty, "{name}");
    tick();
    let held = hooks
        .assign(a, bead("gt-next"), "Next", Some(&agent("mayor")))
        .unwrap();
    assert!(
        matches!(hooks.pickup(a).unwrap(), Pickup::Started(_)),
        "{name}"
    );
    tick();
    hooks.touch(&held).unwrap();
    hooks.complete(&held).unwrap();
    hooks.clear(&held).unwrap();
    let v = file(hooks, a);
    assert_seed_form(&v);
    assert_eq!(v["status"], "empty");
}

#[test]
fn each_tibsfox_hook_goes_through_its_lifecycle() {
    for (name, _) in TIBSFOX_STATES {
        let s = setup();
        s.clock.set(Timestamp::from_unix_ms(AFTER_FIXTURES));
        let a = agent("polecat-alpha");
        copy_fixture(&s.hooks, &a, name);
        drive_to_a_new_cycle(&s.hooks, &s.clock, &a, name);
    }
}

#[test]
fn a_rewritten_tibsfox_hook_is_the_seed_form_with_its_extras() {
    let s = setup();
    s.clock.set(Timestamp::from_unix_ms(AFTER_FIXTURES));
    let a = agent("polecat-alpha");
    copy_fixture(&s.hooks, &a, "active");
    let held = s.hooks.current(&a).unwrap().unwrap();
    s.hooks.touch(&held).unwrap();
    insta::assert_snapshot!(
        "tibsfox_active_touched",
        fs::read_to_string(s.hooks.path(&a)).unwrap()
    );
}

#[test]
fn unknown_fields_survive_every_rewrite() {
    let s = setup();
    let a = agent("a");
    let seed_file = json!({
        "agent_id": "a", "status": "empty", "work_item": null,
        "last_activity": "2026-03-05T10:00:00Z", "color": "blue", "meta": {"x": [1, 2]},
    });
    plant(&s.hooks, &a, seed_file.to_string().as_bytes());
    let top = |v: &Value| {
        assert_eq!(v["color"], "blue", "{v}");
        assert_eq!(v["meta"], json!({"x": [1, 2]}), "{v}");
    };
    let held = s.hooks.assign(&a, bead("b1"), "t", None).unwrap();
    top(&file(&s.hooks, &a));
    // Now a work item with a field of its own, as another writer would add.
    let mut v = file(&s.hooks, &a);
    v["work_item"]["priority"] = json!("P1");
    plant(&s.hooks, &a, v.to_string().as_bytes());
    let steps: [(&str, &dyn Fn() -> chipset_hook::Result<chipset_hook::Hook>); 3] = [
        ("activate", &|| s.hooks.activate(&held)),
        ("touch", &|| {
            s.clock.advance(Duration::from_secs(1));
            s.hooks.touch(&held)
        }),
        ("complete", &|| s.hooks.complete(&held)),
    ];
    for (op, step) in steps {
        let hook = step().unwrap();
        assert_eq!(hook.state.work().unwrap().extra["priority"], "P1", "{op}");
        let v = file(&s.hooks, &a);
        top(&v);
        assert_eq!(v["work_item"]["priority"], "P1", "{op}: {v}");
    }
    s.hooks.clear(&held).unwrap();
    top(&file(&s.hooks, &a));
    // Pickup and reassign write too.
    let held = s.hooks.assign(&a, bead("b2"), "t", None).unwrap();
    let v = file(&s.hooks, &a);
    top(&v);
    assert!(
        v["work_item"].get("priority").is_none(),
        "a new bead starts clean: {v}"
    );
    assert!(matches!(s.hooks.pickup(&a).unwrap(), Pickup::Started(_)));
    top(&file(&s.hooks, &a));
    s.hooks.reassign(&held).unwrap();
    top(&file(&s.hooks, &a));
}

fn paused(a: &str) -> String {
    json!({
        "agent_id": a, "status": "paused",
        "work_item": {"bead_id": "b1", "title": "t", "assigned_at": "2026-03-05T10:00:00Z"},
        "last_activity": "2026-03-05T10:00:00Z",
    })
    .to_string()
}

#[test]
fn an_unknown_status_is_unsupported_refused_and_left_in_place() {
    let s = setup();
    let a = agent("a");
    let bytes = paused("a");
    plant(&s.hooks, &a, bytes.as_bytes());
    let read = s.hooks.read(&a).unwrap();
    let u = read.unsupported().expect("unsupported");
    assert_eq!(u.what, "hook status `paused`");
    assert_eq!(read.status(), None);
    assert!(read.corruption().is_none());

    let err = s.hooks.assign(&a, bead("b2"), "t", None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
    assert_eq!(
        err.to_string(),
        format!(
            "cannot assign the hook of `a`: `{}` holds hook status `paused`, which this version of \
             chipset does not support; it is left as it is for the program that wrote it",
            s.hooks.path(&a).display()
        )
    );
    assert_eq!(
        s.hooks.current(&a).unwrap_err().kind(),
        ErrorKind::Unsupported
    );
    assert_eq!(
        s.hooks.pickup(&a).unwrap_err().kind(),
        ErrorKind::Unsupported
    );

    let listed = s.hooks.list().unwrap();
    assert_eq!(listed.len(), 1);
    assert!(listed[&a].unsupported().is_some());

    let report = s.hooks.doctor(DoctorMode::Fix).unwrap();
    assert_eq!(report.findings.len(), 1);
    let f = &report.findings[0];
    assert_eq!(f.fault, Defect::Unsupported("hook status `paused`".into()));
    assert_eq!(f.actions, []);
    assert_eq!(
        unrepaired(&report),
        0,
        "not corrupt, so not counted as an unrepaired corrupt hook"
    );
    assert!(
        f.to_string()
            .ends_with("unsupported by this version (left in place)"),
        "{f}"
    );

    assert_eq!(
        fs::read_to_string(s.hooks.path(&a)).unwrap(),
        bytes,
        "never rewritten"
    );
    assert!(!s.hooks.dir().as_path().join(".quarantine").exists());
}

#[test]
fn a_tibsfox_hook_in_another_agents_file_is_still_corrupt() {
    let s = setup();
    let other = agent("pending");
    copy_fixture(&s.hooks, &other, "pending");
    let c = s.hooks.read(&other).unwrap();
    let c = c
        .corruption()
        .expect("agentId polecat-alpha in pending.json");
    assert!(
        c.to_string().contains("does not match the file's agent"),
        "{c}"
    );
}

fn key_name() -> impl Strategy<Value = String> {
    // Names no hook writer uses, so they are extras in either key style.
    "x[a-zA-Z_]{0,8}".prop_map(|s| s)
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            prop::collection::btree_map(key_name(), inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn extras() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map(key_name(), json_value(), 0..4)
        .prop_map(|m| m.into_iter().collect())
}

/// Builds a pending hook file in the seed's or Tibsfox's key style.
fn pending_file(camel: bool, top: &Map<String, Value>, item: &Map<String, Value>) -> Value {
    let mut work = item.clone();
    let mut hook = top.clone();
    if camel {
        work.insert("beadId".into(), json!("b1"));
        work.insert("title".into(), json!("t"));
        hook.insert("agentId".into(), json!("a"));
        hook.insert("lastActivity".into(), json!("2026-03-05T10:00:00.000Z"));
        hook.insert("workItem".into(), Value::Object(work));
    } else {
        work.insert("bead_id".into(), json!("b1"));
        work.insert("title".into(), json!("t"));
        work.insert("assigned_at".into(), json!("2026-03-05T09:00:00Z"));
        hook.insert("agent_id".into(), json!("a"));
        hook.insert("last_activity".into(), json!("2026-03-05T10:00:00Z"));
        hook.insert("work_item".into(), Value::Object(work));
    }
    hook.insert("status".into(), json!("pending"));
    Value::Object(hook)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Extra fields in either key style survive every transition; the work
    /// item's own extras go only when the work item does.
    #[test]
    fn extras_round_trip_through_transitions(camel in any::<bool>(), top in extras(), item in extras()) {
        let s = setup();
        let a = agent("a");
        plant(&s.hooks, &a, pending_file(camel, &top, &item).to_string().as_bytes());
        let check = |with_item: bool| -> Result<(), TestCaseError> {
            let v = file(&s.hooks, &a);
            assert_seed_form(&v);
            for (k, val) in &top {
                prop_assert_eq!(v.get(k), Some(val), "top-level `{}` in {}", k, v);
            }
            if with_item {
                for (k, val) in &item {
                    prop_assert_eq!(v["work_item"].get(k), Some(val), "item `{}` in {}", k, v);
                }
            }
            Ok(())
        };
        let held = s.hooks.current(&a).unwrap().unwrap();
        prop_assert_eq!(&held.work.extra, &item);
        s.hooks.activate(&held).unwrap();
        check(true)?;
        s.clock.advance(Duration::from_millis(5));
        s.hooks.touch(&held).unwrap();
        check(true)?;
        s.hooks.complete(&held).unwrap();
        check(true)?;
        s.hooks.clear(&held).unwrap();
        check(false)?;
        let v = file(&s.hooks, &a);
        prop_assert_eq!(&v["work_item"], &Value::Null);
        // Read back, the extras are the hook's again.
        let hook = s.hooks.read(&a).unwrap();
        prop_assert_eq!(&hook.hook().unwrap().extra, &top);
    }
}

/// What Tibsfox's `completeHook` wrote over a chipset-written active hook, in
/// a side-by-side run: it keeps the object it read and adds `lastActivity`.
const TIBSFOX_COMPLETED_OVER_CHIPSET: &str = r#"{
  "agent_id": "polecat-alpha",
  "assigned_by": "mayor",
  "generation": 2,
  "lastActivity": "2026-11-23T06:03:45.619Z",
  "last_activity": "2026-11-23T06:03:36.929Z",
  "status": "completed",
  "work_item": {
    "assigned_at": "2026-11-23T06:03:36.929Z",
    "bead_id": "gt-abc12",
    "title": "From chipset"
  }
}
"#;

#[test]
fn a_hook_both_programs_wrote_reads_the_newer_activity_and_clears() {
    let s = setup();
    s.clock.set(Timestamp::from_unix_ms(AFTER_FIXTURES));
    let a = agent("polecat-alpha");
    plant(&s.hooks, &a, TIBSFOX_COMPLETED_OVER_CHIPSET.as_bytes());
    let hook = s.hooks.read(&a).unwrap().hook().cloned().unwrap();
    assert_eq!(hook.state.status(), HookStatus::Completed);
    assert_eq!(hook.generation, 2);
    assert_eq!(
        hook.last_activity,
        "2026-11-23T06:03:45.619Z".parse::<Timestamp>().unwrap()
    );
    assert!(
        hook.extra.is_empty(),
        "`lastActivity` is understood, not an extra"
    );
    let held = s.hooks.current(&a).unwrap().unwrap();
    s.hooks.clear(&held).unwrap();
    let v = file(&s.hooks, &a);
    assert_seed_form(&v);
    assert_eq!(
        (v["status"].as_str(), v["generation"].as_u64()),
        (Some("empty"), Some(3))
    );
}
