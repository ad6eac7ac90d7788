//! Files written by other programs: fields this version does not know
//! survive every rewrite, and values it does not know are unsupported
//! (reported, refused, never quarantined), not corrupt.

use std::fs;
use std::time::Duration;

use chipset_nudge::{
    KindRegistry, ManualResolution, NewNudge, NudgeType, Nudges, Received, ReminderFilter,
    Reminders,
};
use chipset_store::{Defect, DoctorMode, ReadOutcome, Timestamp};
use serde_json::{Value, json};

use crate::support::DeliveryExt;
use crate::support::{NudgePaths, ReminderPaths};
use crate::support::{ReminderKey, new_reminder};
use crate::support::{agent, manual_state};

fn json_of(path: &std::path::Path) -> Value {
    serde_json::from_slice(&fs::read(path).unwrap()).unwrap()
}

fn write(path: &std::path::Path, v: &Value) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, serde_json::to_vec_pretty(v).unwrap()).unwrap();
}

#[test]
fn a_nudges_extra_fields_survive_processing_and_relaying() {
    let (t, _clock) = manual_state();
    let nudges = Nudges::new(t.state.clone());
    let me = agent("polecat-alpha");
    let latest = nudges.latest_path(&me);
    write(
        &latest,
        &json!({"from": "witness", "type": "health_check", "message": "alive?",
                "timestamp": "2026-03-05T10:35:00Z", "requires_response": true,
                "trace": {"span": 7}, "priority": 3}),
    );
    let ReadOutcome::Value(Received::New(n)) = nudges.receive(&me).unwrap() else {
        panic!("a new nudge")
    };
    assert_eq!(n.extra["priority"], 3);
    nudges.mark_processed(&me, &n).unwrap();
    let processed = json_of(&nudges.processed_path(&me));
    assert_eq!(
        processed["last"]["trace"],
        json!({"span": 7}),
        "{processed}"
    );
    insta::assert_snapshot!(
        "foreign_processed_json",
        fs::read_to_string(nudges.processed_path(&me)).unwrap()
    );
    assert!(matches!(
        nudges.receive(&me).unwrap(),
        ReadOutcome::Value(Received::Seen(_))
    ));

    // The record's own extra field survives the next rewrite of the record.
    let mut record = processed;
    record["host"] = json!("box-1");
    write(&nudges.processed_path(&me), &record);
    let d = nudges
        .send(
            &me,
            &NewNudge::new(agent("mayor"), NudgeType::SyncRequest, "sync"),
        )
        .unwrap();
    nudges.mark_processed(&me, d.sent().unwrap()).unwrap();
    let record = json_of(&nudges.processed_path(&me));
    assert_eq!(record["host"], "box-1", "{record}");
    assert_eq!(record["count"], 2);
    assert!(
        record["last"].get("trace").is_none(),
        "a new nudge starts clean"
    );
}

#[test]
fn a_response_records_extra_fields_are_read() {
    let (t, _clock) = manual_state();
    let nudges = Nudges::new(t.state.clone());
    let witness = agent("witness");
    write(
        &nudges.response_path(&witness, &agent("polecat-alpha")),
        &json!({"from": "polecat-alpha", "type": "nudge_response", "message": "yes",
                "timestamp": "2026-03-05T10:36:00Z", "requires_response": false, "mood": "fine"}),
    );
    let got = nudges.responses_since(&witness, Timestamp::EPOCH).unwrap();
    assert_eq!(got.items.len(), 1, "{got:?}");
    assert_eq!(got.items[0].extra["mood"], "fine");
    assert!(got.corrupt.is_empty() && got.unsupported.is_empty());
}

fn reminder(r: &Reminders, source: &str) -> chipset_nudge::Reminder {
    let key = ReminderKey::new("spec_draft", "spec", source).unwrap();
    r.open(&new_reminder("tenant", None, &key, "approve?"))
        .unwrap()
        .reminder()
        .clone()
}

#[test]
fn a_reminders_extra_columns_survive_resolve_and_snooze() {
    let (t, clock) = manual_state();
    let r = Reminders::new(t.state.clone(), KindRegistry::preset());
    let a = reminder(&r, "e-1");
    let key = ReminderKey::new("spec_draft", "spec", "e-1").unwrap();
    let path = r.open_path(&key);
    let mut v = json_of(&path);
    v["escalation_level"] = json!(2);
    write(&path, &v);

    let snoozed = r.snooze(&a.id, Duration::from_secs(60), None).unwrap();
    assert_eq!(snoozed.extra["escalation_level"], 2);
    clock.advance(Duration::from_secs(120));
    // Listing reopens the due snooze.
    let reopened = r.list(&ReminderFilter::default()).unwrap().items;
    assert_eq!(reopened.len(), 1);
    assert_eq!(
        reopened[0].extra["escalation_level"], 2,
        "the reopened copy keeps it"
    );
    let done = r
        .resolve(&reopened[0].id, ManualResolution::Completed, None)
        .unwrap();
    let history = json_of(&r.history_path(&done.id));
    assert_eq!(history["escalation_level"], 2, "{history}");
    let text = fs::read_to_string(r.history_path(&done.id))
        .unwrap()
        .replace(done.id.as_str(), "<ID>")
        .replace(a.id.as_str(), "<SNOOZED-ID>");
    insta::assert_snapshot!("foreign_reminder_history_json", text);
    assert_eq!(json_of(&r.history_path(&a.id))["escalation_level"], 2);
}

#[test]
fn an_unknown_severity_or_resolution_is_unsupported_and_left_in_place() {
    let (t, _clock) = manual_state();
    let r = Reminders::new(t.state.clone(), KindRegistry::preset());
    for (field, value) in [("severity", "urgent"), ("resolution", "escalated")] {
        let a = reminder(&r, field);
        let key = ReminderKey::new("spec_draft", "spec", field).unwrap();
        let path = r.open_path(&key);
        let mut v = json_of(&path);
        v[field] = json!(value);
        write(&path, &v);
        let bytes = fs::read(&path).unwrap();

        let listing = r.list(&ReminderFilter::default()).unwrap();
        assert!(listing.corrupt.is_empty(), "{listing:?}");
        let u = listing
            .unsupported
            .iter()
            .find(|u| u.path == path)
            .expect("listed");
        assert_eq!(u.what, format!("reminder {field} `{value}`"));

        let err = r
            .resolve(&a.id, ManualResolution::Completed, None)
            .unwrap_err();
        assert!(
            matches!(
                &err,
                chipset_nudge::Error::Store(chipset_store::Error::Unsupported(_))
            ),
            "{err}"
        );
        let report = r.doctor(DoctorMode::Fix).unwrap();
        let f = report
            .findings
            .iter()
            .find(|f| f.path.as_ref() == Some(&path.clone().into_path_buf()))
            .expect("reported");
        assert_eq!(f.fault, Defect::Unsupported(u.what.clone()));
        assert_eq!(f.code, "reminder-unsupported");
        assert_eq!(
            f.message,
            format!(
                "`{}`: holds {}, unsupported by this version (left in place)",
                path.display(),
                u.what
            )
        );
        assert!(f.actions.is_empty(), "{f:?}");
        assert_eq!(fs::read(&path).unwrap(), bytes, "never moved or rewritten");
    }
}
