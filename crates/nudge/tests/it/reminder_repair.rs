//! Reminders that meet interrupted changes, corrupt files and the doctor.

use chipset_nudge::{
    Error, KindRegistry, ManualResolution, Opened, Reminder, ReminderConfig, ReminderFilter,
    Reminders, Resolution,
};
use chipset_store::{Action, Defect, DoctorMode};

use crate::reminders::{HOUR, every_reminder, half_resolved, new, open_ids};
use crate::support::ReminderExt;
use crate::support::ReminderKey;
use crate::support::{ReminderPaths, preset};
use crate::support::{manual_state, temps_under};

/// A listing that meets a resolve cut off after its first step finishes it
/// rather than list the reminder as open.
#[test]
fn a_listing_finishes_an_interrupted_resolve() {
    let (t, _clock) = manual_state();
    let r = Reminders::new(t.state.clone(), KindRegistry::preset());
    let (a, key, resolved) = half_resolved(&t, &r);
    assert!(open_ids(&r).is_empty());
    assert!(!r.open_path(&key).exists());
    assert_eq!(
        t.state
            .read_json::<Reminder>(&r.history_path(&a.reminder().id))
            .unwrap()
            .value(),
        Some(resolved)
    );
}

/// A resolve that meets one cut off after its first step (the index file
/// already resolved) finishes that one first, then answers as for a retry:
/// the same change returns the record, another is `AlreadyResolved`.
#[test]
fn a_resolve_meeting_an_interrupted_one_finishes_it_then_answers_as_a_retry() {
    for (asked, same) in [
        (ManualResolution::Ignored, false),
        (ManualResolution::Completed, true),
    ] {
        let (t, _clock) = manual_state();
        let r = Reminders::new(t.state.clone(), KindRegistry::preset());
        let (a, key, mut resolved) = half_resolved(&t, &r);
        resolved.resolved_by_verb = Some(ReminderConfig::default().manual_verb);
        t.state.write_json(&r.open_path(&key), &resolved).unwrap();
        let got = r.resolve(&a.reminder().id, asked, None);
        if same {
            assert_eq!(got.unwrap(), resolved);
        } else {
            assert!(matches!(got, Err(Error::AlreadyResolved { .. })), "{got:?}");
        }
        assert!(!r.open_path(&key).exists());
        assert_eq!(r.get(&a.reminder().id).unwrap(), Some(resolved));
    }
}

/// A crash between the two durable steps of a resolve is finished later.
#[test]
fn interrupted_resolve_is_settled() {
    let (t, _clock) = manual_state();
    let r = Reminders::new(t.state.clone(), KindRegistry::preset());
    let (a, key, _) = half_resolved(&t, &r);
    let report = r.doctor(DoctorMode::Check).unwrap();
    assert!(
        matches!(report.findings[0].fault, Defect::Unfinished),
        "{report:?}"
    );
    let report = r.doctor(DoctorMode::Fix).unwrap();
    assert_eq!(
        report.findings[0].actions,
        [Action::Completed("completed".into())]
    );
    assert!(!r.open_path(&key).exists());
    assert_eq!(
        r.get(&a.reminder().id).unwrap().unwrap().resolution,
        Some(Resolution::Completed)
    );
    assert!(r.doctor(DoctorMode::Check).unwrap().is_clean());
    // And a new open works.
    assert!(matches!(
        r.open(&new(preset::WRAP_SESSION, "S")).unwrap(),
        Opened::New(_)
    ));
}

/// An interrupted resolve whose history already holds a *different* record
/// of the same id is not settled by moving the index file aside: only an
/// identical leftover is a duplicate. The index file and the history record
/// both stay, and the settle says why (today the doctor stops there with
/// the store's `AlreadyExists` for the history path, rather than reporting
/// a finding and going on).
#[test]
fn a_different_record_in_the_history_is_not_taken_for_a_duplicate() {
    let (t, _clock) = manual_state();
    let r = Reminders::new(t.state.clone(), KindRegistry::preset());
    let (a, key, resolved) = half_resolved(&t, &r);
    let mut other = resolved.clone();
    other.resolution = Some(Resolution::Ignored);
    let history = r.history_path(&a.reminder().id);
    t.state.write_json(&history, &other).unwrap();

    match r.doctor(DoctorMode::Fix) {
        Err(Error::Store(chipset_store::Error::AlreadyExists { path })) => {
            assert_eq!(path, history);
        }
        other => panic!("{other:?}"),
    }
    assert!(r.open_path(&key).exists(), "the index file was moved aside");
    assert_eq!(
        t.state
            .read_json::<chipset_nudge::Reminder>(&history)
            .unwrap()
            .value(),
        Some(other)
    );
    assert!(temps_under(t.state.root()).is_empty());
}

/// An interrupted resolve whose history already holds the *same* record (a
/// move a crash left visible in both places) is settled: the index copy is
/// moved aside, the history record stays.
#[test]
fn the_same_record_in_the_history_is_a_duplicate_moved_aside() {
    let (t, _clock) = manual_state();
    let r = Reminders::new(t.state.clone(), KindRegistry::preset());
    let (a, key, resolved) = half_resolved(&t, &r);
    let history = r.history_path(&a.reminder().id);
    t.state.write_json(&history, &resolved).unwrap();
    r.doctor(DoctorMode::Fix).unwrap();
    assert!(!r.open_path(&key).exists());
    assert_eq!(
        t.state.read_json::<Reminder>(&history).unwrap().value(),
        Some(resolved)
    );
    assert!(r.doctor(DoctorMode::Check).unwrap().is_clean());
}

/// A snoozed reminder reopens as a fresh open one: none of the snooze's
/// resolution columns (verb, resolution, note, time) come with it.
#[test]
fn a_reopened_reminder_carries_no_resolution() {
    let (t, clock) = manual_state();
    let r = Reminders::new(t.state.clone(), KindRegistry::preset());
    let a = r.open(&new(preset::WRAP_SESSION, "S")).unwrap();
    r.snooze(&a.reminder().id, HOUR, Some("after lunch".into()))
        .unwrap();
    clock.advance(HOUR);
    let listed = r.list(&ReminderFilter::default()).unwrap().items;
    let reopened = &listed[0];
    assert_eq!(reopened.reopened_from(), Some(a.reminder().id.as_str()));
    assert_eq!(
        (
            reopened.resolved_at,
            reopened.resolved_by_verb.as_deref(),
            reopened.resolution,
            reopened.resolution_note.as_deref(),
            reopened.snooze_until,
        ),
        (None, None, None, None, None)
    );
}

#[test]
fn corrupt_index_file_fails_closed() {
    let (t, _clock) = manual_state();
    let r = Reminders::new(t.state.clone(), KindRegistry::preset());
    r.open(&new(preset::WRAP_SESSION, "S")).unwrap();
    let key = ReminderKey::new(preset::WRAP_SESSION, "session", "S").unwrap();
    std::fs::write(r.open_path(&key), "{oops").unwrap();
    assert!(matches!(
        r.open(&new(preset::WRAP_SESSION, "S")),
        Err(Error::Corrupt(_))
    ));
    let listing = r.list(&ReminderFilter::default()).unwrap();
    assert_eq!(
        listing.corrupt.len(),
        1,
        "an unreadable reminder is reported, not hidden"
    );
    let report = r.doctor(DoctorMode::Fix).unwrap();
    assert!(matches!(
        report.findings[0].actions[..],
        [Action::Quarantined { to: Some(_), .. }]
    ));
    assert!(matches!(
        r.open(&new(preset::WRAP_SESSION, "S")).unwrap(),
        Opened::New(_)
    ));
}

#[test]
fn reopen_chain_names_its_predecessor_each_time() {
    let (t, clock) = manual_state();
    let r = Reminders::new(t.state.clone(), KindRegistry::preset());
    let mut id = r
        .open(&new(preset::WIP_UNSEALED, "w"))
        .unwrap()
        .reminder()
        .id
        .clone();
    for _ in 0..3 {
        r.snooze(&id, HOUR, None).unwrap();
        clock.advance(HOUR);
        // Listing reopens the due snooze.
        let reopened = r.list(&ReminderFilter::default()).unwrap().items;
        assert_eq!(reopened.len(), 1);
        assert_eq!(reopened[0].reopened_from(), Some(id.as_str()));
        id = reopened[0].id.clone();
    }
    assert_eq!(every_reminder(&r).len(), 4);
}

/// Regression: a kind filter with a typo listed nothing instead of saying so.
#[test]
fn listing_an_unregistered_kind_is_refused() {
    let (t, _clock) = manual_state();
    let r = Reminders::new(t.state.clone(), KindRegistry::preset());
    r.open(&new(preset::WRAP_SESSION, "s-1")).unwrap();
    let filter = ReminderFilter {
        kind: Some("wrap_sesion".into()),
        ..ReminderFilter::default()
    };
    assert!(matches!(r.list(&filter), Err(Error::UnknownKind { kind }) if kind == "wrap_sesion"));
    let filter = ReminderFilter {
        kind: Some(preset::WRAP_SESSION.into()),
        ..ReminderFilter::default()
    };
    assert_eq!(r.list(&filter).unwrap().items.len(), 1);
}

/// Regression: a corrupt snoozed reminder was skipped by the snooze sweep and
/// not listed, so a due obligation vanished from `list` without a trace.
#[test]
fn a_corrupt_snoozed_reminder_is_reported_by_listings() {
    let (t, clock) = manual_state();
    let r = Reminders::new(t.state.clone(), KindRegistry::preset());
    let opened = r.open(&new(preset::WRAP_SESSION, "s-1")).unwrap();
    r.snooze(&opened.reminder().id, HOUR, None).unwrap();
    let key = ReminderKey::new(preset::WRAP_SESSION, "session", "s-1").unwrap();
    let path = r.snoozed_path(&key);
    std::fs::write(&path, "{\"id\":").unwrap();
    clock.advance(2 * HOUR);

    let listing = r.list(&ReminderFilter::default()).unwrap();
    assert!(listing.items.is_empty());
    assert_eq!(listing.corrupt.len(), 1);
    assert_eq!(listing.corrupt[0].path, path);
    // A filter on the same kind reports it too; a filter on another kind does not.
    let of = |kind: &str| ReminderFilter {
        kind: Some(kind.into()),
        ..ReminderFilter::default()
    };
    assert_eq!(r.list(&of(preset::WRAP_SESSION)).unwrap().corrupt.len(), 1);
    assert!(r.list(&of(preset::SPEC_DRAFT)).unwrap().corrupt.is_empty());
}

/// Regression: looking a reminder up by id skipped unreadable index files, so
/// a corrupt open reminder was reported as not found instead of corrupt.
#[test]
fn lookups_by_id_report_corruption_instead_of_not_found() {
    let (t, _clock) = manual_state();
    let r = Reminders::new(t.state.clone(), KindRegistry::preset());
    let opened = r.open(&new(preset::SPEC_DRAFT, "spec-7")).unwrap();
    let id = opened.reminder().id.clone();
    let key = ReminderKey::new(preset::SPEC_DRAFT, "spec", "spec-7").unwrap();
    std::fs::write(r.open_path(&key), "{\"id\":").unwrap();
    assert!(matches!(r.get(&id), Err(Error::Corrupt(_))));
    assert!(matches!(
        r.resolve(&id, ManualResolution::Completed, None),
        Err(Error::Corrupt(_))
    ));
}

/// What `chipset doctor` prints for reminders: every index and history file
/// counts as scanned, and each finding carries its code, class, path and
/// words. A resolved record left in the open index is finished by Fix; an
/// unsnoozed record in the snooze index is unfixable (a person decides); a
/// record under another key's name is a stray; a good record is no finding.
#[test]
fn the_doctor_codes_words_and_counts_each_reminder_file() {
    let (t, _clock) = manual_state();
    let r = Reminders::new(t.state.clone(), KindRegistry::preset());
    let key = |id: &str| ReminderKey::new(preset::WRAP_SESSION, "session", id).unwrap();
    // A: open and good. B: its record copied under C's name (a stray).
    r.open(&new(preset::WRAP_SESSION, "A")).unwrap();
    let b = r.open(&new(preset::WRAP_SESSION, "B")).unwrap();
    let stray = r.open_path(&key("C"));
    std::fs::copy(r.open_path(&key("B")), &stray).unwrap();
    // D: resolved, but still in the open index (a crash between the steps).
    let d = r.open(&new(preset::WRAP_SESSION, "D")).unwrap();
    let mut resolved = d.reminder().clone();
    resolved.resolved_at = Some(resolved.created_at);
    resolved.resolution = Some(Resolution::Completed);
    let unfinished_open = r.open_path(&key("D"));
    t.state.write_json(&unfinished_open, &resolved).unwrap();
    // E: snoozed and good. F: in the snooze index, but not snoozed.
    let e = r.open(&new(preset::WRAP_SESSION, "E")).unwrap();
    r.snooze(&e.reminder().id, HOUR, None).unwrap();
    let f = r.open(&new(preset::WRAP_SESSION, "F")).unwrap();
    r.snooze(&f.reminder().id, HOUR, None).unwrap();
    let unsnoozed = r.snoozed_path(&key("F"));
    let mut not_snoozed = r.get(&f.reminder().id).unwrap().unwrap();
    not_snoozed.resolution = Some(Resolution::Completed);
    t.state.write_json(&unsnoozed, &not_snoozed).unwrap();
    // G: open, and also in the snooze index (superseded).
    let g = r.open(&new(preset::WRAP_SESSION, "G")).unwrap();
    r.snooze(&g.reminder().id, HOUR, None).unwrap();
    let superseded = r.open_path(&key("G"));
    t.state.write_json(&superseded, g.reminder()).unwrap();
    // H: resolved into the history, then its history file torn.
    let h = r.open(&new(preset::WRAP_SESSION, "H")).unwrap();
    r.resolve(&h.reminder().id, ManualResolution::Completed, None)
        .unwrap();
    let torn = r.history_path(&h.reminder().id);
    std::fs::write(&torn, "{").unwrap();

    let report = r.doctor(DoctorMode::Check).unwrap();
    // Open: A, B, C, D, G; snoozed: E, F, G; history: H.
    assert_eq!(report.scanned, 9, "{report:?}");
    let found: Vec<_> = report
        .findings
        .iter()
        .map(|f| {
            (
                f.code,
                f.path.clone().unwrap(),
                f.fixable,
                f.message.clone(),
            )
        })
        .collect();
    let line = |path: &std::path::Path, what: &str| format!("`{}`: {what}", path.display());
    let resolved_words = "unfinished: resolved or superseded record still in the index";
    let Defect::Corrupt(reason) = &report.findings.last().unwrap().fault else {
        panic!("{report:?}")
    };
    assert_eq!(
        found,
        [
            (
                "reminder-stray",
                stray.clone().into_path_buf(),
                false,
                line(&stray, "not written by chipset (left alone)")
            ),
            (
                "reminder-unfinished",
                unfinished_open.clone().into_path_buf(),
                true,
                line(&unfinished_open, resolved_words)
            ),
            (
                "reminder-unfinished",
                superseded.clone().into_path_buf(),
                true,
                line(&superseded, resolved_words)
            ),
            (
                "reminder-unfinished",
                unsnoozed.clone().into_path_buf(),
                false,
                line(
                    &unsnoozed,
                    "unfinished: unsnoozed record in the snooze index"
                )
            ),
            (
                "reminder-corrupt",
                torn.clone().into_path_buf(),
                true,
                line(&torn, &format!("corrupt ({reason})"))
            ),
        ],
        "{report:?}"
    );
    assert!(report.findings.iter().all(|f| f.actions.is_empty()));
    assert!(stray.exists() && b.reminder().is_open());

    let fixed = r.doctor(DoctorMode::Fix).unwrap();
    let actions: Vec<_> = fixed
        .findings
        .iter()
        .map(|f| (f.code, f.actions.len()))
        .collect();
    assert_eq!(
        actions,
        [
            ("reminder-stray", 0),
            ("reminder-unfinished", 1),
            ("reminder-unfinished", 1),
            ("reminder-unfinished", 0),
            ("reminder-corrupt", 1),
        ],
        "{fixed:?}"
    );
    assert_eq!(
        fixed.findings[1].actions,
        [Action::Completed("completed".into())]
    );
    assert!(!unfinished_open.exists(), "the resolve was finished");
    assert!(unsnoozed.exists(), "left for a person");
    assert!(!torn.exists(), "moved aside");
}
