//! The reminders' doctor on both backends from one body (issue 30): a
//! record damaged through the backend (the directory's file, or the
//! server's row) is found, and the fix moves it aside, never deletes it.

use chipset_backend::Dir;
use chipset_nudge::KindRegistry;

use crate::place::ReminderPlace;
use crate::support::{ReminderKey, preset};
use chipset_store::{Action, DoctorMode};
use chipset_testkit::TempState;

fn open_dir(st: &str) -> Dir {
    Dir::new("reminders")
        .and_then(|d| d.join("open"))
        .and_then(|d| d.join(preset::SPEC_DRAFT))
        .and_then(|d| d.join(st))
        .unwrap()
}

fn corrupt_reminder_is_moved_aside(place: &ReminderPlace) {
    let t = TempState::new();
    let reminders = place.open(&t.state);
    let raw = place.backend(&t.state);
    let st = KindRegistry::preset()
        .get(preset::SPEC_DRAFT)
        .unwrap()
        .source_type
        .clone();
    let key = ReminderKey::new(preset::SPEC_DRAFT, st.clone(), "spec-1").unwrap();
    let _ = reminders
        .open(&crate::support::new_reminder("tenant", None, &key, "draft"))
        .unwrap();
    assert!(reminders.doctor(DoctorMode::Check).unwrap().is_clean());
    let dir = open_dir(&st);
    let names = raw.list(&dir).unwrap();
    assert_eq!(names.len(), 1, "{names:?}");
    raw.put(&dir.key(&names[0]).unwrap(), b"{\"id\": 7")
        .unwrap();

    let check = reminders.doctor(DoctorMode::Check).unwrap();
    let codes: Vec<_> = check.findings.iter().map(|f| f.code).collect();
    assert_eq!(codes, ["reminder-corrupt"], "{check:#?}");
    assert_eq!(raw.list(&dir).unwrap(), names, "checking moves nothing");

    let fixed = reminders.doctor(DoctorMode::Fix).unwrap();
    assert!(
        fixed.findings[0]
            .actions
            .iter()
            .any(|a| matches!(a, Action::Quarantined { .. })),
        "{fixed:#?}"
    );
    assert!(raw.list(&dir).unwrap().is_empty());
    if place.is_pg() {
        let aside = raw.list(&dir.join("quarantine").unwrap()).unwrap();
        assert_eq!(aside.len(), 1, "{aside:?}");
        assert!(aside[0].ends_with(&names[0]), "{aside:?}");
    }
    assert!(reminders.doctor(DoctorMode::Check).unwrap().is_clean());
}

#[test]
fn corrupt_reminder_is_moved_aside_on_a_directory() {
    corrupt_reminder_is_moved_aside(&ReminderPlace::fs());
}

#[test]
fn corrupt_reminder_is_moved_aside_on_postgres() {
    if let Some(place) = ReminderPlace::pg("corrupt_reminder_is_moved_aside_on_postgres") {
        corrupt_reminder_is_moved_aside(&place);
    }
}
