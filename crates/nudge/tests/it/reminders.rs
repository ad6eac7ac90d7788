//! Reminders in one process: the seed's §13 acceptance list on a manual clock.

use std::time::Duration;

use chipset_nudge::{
    Error, KindRegistry, KindSpec, ManualResolution, NewReminder, Opened, Reminder, ReminderConfig,
    ReminderFilter, Reminders, Resolution, Severity,
};
use chipset_store::Clock;
use chipset_testkit::TempState;

use crate::support::ReminderExt;
use crate::support::{ReminderKey, new_reminder};
use crate::support::{ReminderPaths, preset};
use crate::support::{manual_state, temps_under};

pub(crate) const HOUR: Duration = Duration::from_secs(3600);

pub(crate) fn new(kind: &str, source_id: &str) -> NewReminder {
    let spec = KindRegistry::preset();
    let st = spec
        .get(kind)
        .map_or("session", |k| k.source_type.as_str())
        .to_owned();
    let key = ReminderKey::new(kind, st, source_id).unwrap();
    new_reminder(
        "tenant",
        Some("project".into()),
        &key,
        format!("{kind} {source_id}"),
    )
}

/// Every reminder of the table, open or in the history.
pub(crate) fn every_reminder(r: &Reminders) -> Vec<chipset_nudge::Reminder> {
    r.list(&ReminderFilter {
        history: true,
        ..ReminderFilter::default()
    })
    .unwrap()
    .items
}

pub(crate) fn open_ids(r: &Reminders) -> Vec<String> {
    r.list(&ReminderFilter::default())
        .unwrap()
        .items
        .into_iter()
        .map(|x| x.source_id)
        .collect()
}

/// Each of the six preset kinds through open, idempotent re-open,
/// auto-resolve (or its refusal), manual resolve, snooze and re-open.
#[test]
fn six_kinds_through_their_lifecycle() {
    let (t, clock) = manual_state();
    let r = Reminders::new(t.state.clone(), KindRegistry::preset());
    let registry = KindRegistry::preset();
    for spec in registry.kinds() {
        let kind = spec.name.as_str();
        let st = spec.source_type.as_str();
        // Write and idempotence.
        let a = r.open(&new(kind, "e-1")).unwrap();
        assert!(matches!(a, Opened::New(_)), "{kind}");
        assert_eq!(a.reminder().actions, spec.default_actions);
        let again = r.open(&new(kind, "e-1")).unwrap();
        assert!(
            matches!(&again, Opened::Existing(x) if x.id == a.reminder().id),
            "{kind}"
        );
        // Auto-resolve on the matching verb; a verb of another kind is refused.
        match spec.resolving_verbs.first() {
            Some(verb) => {
                let done = r.auto_resolve(kind, st, "e-1", verb).unwrap().unwrap();
                assert_eq!(done.resolution, Some(Resolution::AutoCleared));
                assert_eq!(done.resolved_by_verb.as_deref(), Some(verb.as_str()));
                assert_eq!(done.id, a.reminder().id);
                assert!(
                    r.auto_resolve(kind, st, "e-1", verb).unwrap().is_none(),
                    "nothing left"
                );
            }
            None => {
                let err = r.auto_resolve(kind, st, "e-1", "prism_wrap").unwrap_err();
                assert!(
                    matches!(err, Error::NotAResolvingVerb { .. }),
                    "{kind}: {err}"
                );
                r.resolve(&a.reminder().id, ManualResolution::Completed, None)
                    .unwrap();
            }
        }
        // Manual resolution with a note.
        let b = r.open(&new(kind, "e-1")).unwrap();
        assert!(
            matches!(b, Opened::New(_)),
            "a resolved reminder does not block a new one"
        );
        let done = r
            .resolve(
                &b.reminder().id,
                ManualResolution::Ignored,
                Some("not now".into()),
            )
            .unwrap();
        assert_eq!(done.resolution, Some(Resolution::Ignored));
        assert_eq!(done.resolution_note.as_deref(), Some("not now"));
        assert_eq!(
            done.resolved_by_verb.as_deref(),
            Some("prism_nudge.resolve")
        );
        // Snooze, then re-open on read once due.
        let c = r.open(&new(kind, "e-1")).unwrap();
        let snoozed = r.snooze(&c.reminder().id, HOUR, None).unwrap();
        assert_eq!(snoozed.resolution, Some(Resolution::Snoozed));
        assert_eq!(snoozed.snooze_until, Some(clock.now() + HOUR));
        assert!(open_ids(&r).is_empty(), "{kind}: snoozed shows as open");
        assert!(matches!(
            r.open(&new(kind, "e-1")).unwrap(),
            Opened::Snoozed(_)
        ));
        clock.advance(HOUR);
        let listed = r.list(&ReminderFilter::default()).unwrap().items;
        assert_eq!(listed.len(), 1, "{kind}");
        let reopened = &listed[0];
        assert_ne!(reopened.id, c.reminder().id);
        assert_eq!(reopened.reopened_from(), Some(c.reminder().id.as_str()));
        assert!(reopened.is_open());
        // The snoozed row stays, resolved, in the history.
        let old = r.get(&c.reminder().id).unwrap().unwrap();
        assert_eq!(old.resolution, Some(Resolution::Snoozed));
        r.resolve(&reopened.id, ManualResolution::Completed, None)
            .unwrap();
        // History retained: four rows for this kind, none open.
        let filter = ReminderFilter {
            kind: Some(kind.to_owned()),
            history: true,
            ..Default::default()
        };
        let all = r.list(&filter).unwrap().items;
        assert_eq!(all.len(), 4, "{kind}");
        assert!(all.iter().all(|x| !x.is_open()));
        clock.advance(Duration::from_secs(1));
    }
    assert!(temps_under(t.state.root()).is_empty());
}

/// Seed §13: wrapping session X leaves session Y's reminder open.
#[test]
fn auto_resolve_touches_only_the_matching_key() {
    let (t, _clock) = manual_state();
    let r = Reminders::new(t.state.clone(), KindRegistry::preset());
    r.open(&new(preset::WRAP_SESSION, "X")).unwrap();
    r.open(&new(preset::WRAP_SESSION, "Y")).unwrap();
    r.open(&new(preset::SPEC_DRAFT, "X")).unwrap();
    let done = r
        .auto_resolve(preset::WRAP_SESSION, "session", "X", "prism_wrap")
        .unwrap();
    assert_eq!(done.unwrap().source_id, "X");
    let mut left: Vec<_> = r
        .list(&ReminderFilter::default())
        .unwrap()
        .items
        .into_iter()
        .map(|x| (x.kind, x.source_id))
        .collect();
    left.sort();
    assert_eq!(
        left,
        [
            ("spec_draft".to_owned(), "X".to_owned()),
            ("wrap_session".to_owned(), "Y".to_owned())
        ]
    );
}

/// A verb that clears an obligation also clears its snooze, so the snooze
/// does not bring the gone obligation back.
#[test]
fn auto_resolve_clears_a_snoozed_reminder() {
    let (t, clock) = manual_state();
    let r = Reminders::new(t.state.clone(), KindRegistry::preset());
    let a = r.open(&new(preset::WRAP_SESSION, "S")).unwrap();
    r.snooze(&a.reminder().id, HOUR, None).unwrap();
    let cleared = r
        .auto_resolve(preset::WRAP_SESSION, "session", "S", "prism_wrap")
        .unwrap()
        .unwrap();
    assert_eq!(cleared.resolution, Some(Resolution::AutoCleared));
    assert_eq!(cleared.reopened_from(), Some(a.reminder().id.as_str()));
    clock.advance(2 * HOUR);
    assert!(open_ids(&r).is_empty());
    assert_eq!(every_reminder(&r).len(), 2);
}

#[test]
fn bad_requests_are_refused_with_typed_errors() {
    let (t, _clock) = manual_state();
    let r = Reminders::new(t.state.clone(), KindRegistry::preset());
    let mut bad = new(preset::WRAP_SESSION, "S");
    bad.kind = "made_up".into();
    assert!(matches!(r.open(&bad), Err(Error::UnknownKind { .. })));
    let mut bad = new(preset::WRAP_SESSION, "S");
    bad.severity = Severity::Blocking;
    assert!(matches!(r.open(&bad), Err(Error::BlockingSeverity)));
    let mut bad = new(preset::WRAP_SESSION, "S");
    bad.source_id = String::new();
    assert!(matches!(r.open(&bad), Err(Error::EmptySourceId)));
    let mut bad = new(preset::WRAP_SESSION, "S");
    bad.source_type = "spec".into();
    assert!(matches!(
        r.open(&bad),
        Err(Error::SourceTypeMismatch { .. })
    ));
    let wrong = r
        .auto_resolve(preset::WRAP_SESSION, "session", "S", "prism_seal")
        .unwrap_err();
    assert!(
        matches!(&wrong, Error::NotAResolvingVerb { resolving, .. } if resolving == &["prism_wrap"]),
        "{wrong:?}"
    );
    // The refusal names the verbs that would do.
    assert!(
        wrong.to_string().ends_with("the verbs that do: prism_wrap"),
        "{wrong}"
    );
    let mut bad = new(preset::WRAP_SESSION, "S");
    bad.severity = Severity::Blocking;
    assert!(matches!(r.open(&bad), Err(Error::BlockingSeverity)));
    let mut bad = new(preset::WRAP_SESSION, "S");
    bad.message = "m".repeat(64 * 1024 + 1);
    let long = r.open(&bad).unwrap_err();
    assert!(
        matches!(
            &long,
            Error::InvalidField {
                field: "message",
                ..
            }
        ),
        "{long:?}"
    );
    assert!(
        long.to_string().len() < 200,
        "names the message by its start"
    );
    let mut bad = new(preset::WRAP_SESSION, "S");
    bad.metadata
        .insert("blob".into(), "m".repeat(64 * 1024).into());
    let big = r.open(&bad).unwrap_err();
    assert!(
        matches!(
            &big,
            Error::InvalidField {
                field: "metadata",
                ..
            }
        ),
        "{big:?}"
    );
    // Nothing was written by any of them.
    assert!(open_ids(&r).is_empty());
    let opened = r.open(&new(preset::WRAP_SESSION, "S")).unwrap();
    let Opened::New(reminder) = opened else {
        panic!("{opened:?}")
    };
    // A note as long as a message is refused too: one such record was
    // over the read cap, unreadable for every agent after it.
    let note = Some("n".repeat(64 * 1024 + 1));
    for e in [
        r.resolve(&reminder.id, ManualResolution::Completed, note.clone()),
        r.snooze(&reminder.id, HOUR, note),
    ] {
        let e = e.unwrap_err();
        assert!(
            matches!(&e, Error::InvalidField { field: "note", .. }),
            "{e:?}"
        );
    }
    assert_eq!(open_ids(&r), ["S"]);
}

#[test]
fn custom_registry_is_closed() {
    let (t, _clock) = manual_state();
    let mut kinds = KindRegistry::default();
    kinds
        .register(KindSpec {
            resolving_verbs: vec!["review.close".to_owned()],
            ..KindSpec::new("review_pending", "review")
        })
        .unwrap();
    let r = Reminders::new(t.state.clone(), kinds);
    let key = ReminderKey::new("review_pending", "review", "pr-7").unwrap();
    assert!(matches!(
        r.open(&new_reminder("t", None, &key, "review")).unwrap(),
        Opened::New(_)
    ));
    assert!(matches!(
        r.open(&new(preset::WRAP_SESSION, "S")),
        Err(Error::UnknownKind { .. })
    ));
}

#[test]
fn resolving_twice_and_unknown_ids() {
    let (t, _clock) = manual_state();
    let r = Reminders::new(t.state.clone(), KindRegistry::preset());
    let a = r.open(&new(preset::HANDOFF_PENDING, "h")).unwrap();
    r.resolve(&a.reminder().id, ManualResolution::Completed, None)
        .unwrap();
    let err = r
        .resolve(&a.reminder().id, ManualResolution::Ignored, None)
        .unwrap_err();
    assert!(matches!(err, Error::AlreadyResolved { .. }), "{err}");
    let missing = chipset_nudge::ReminderId::new("nope").unwrap();
    assert!(matches!(
        r.resolve(&missing, ManualResolution::Ignored, None),
        Err(Error::ReminderNotFound { .. })
    ));
}

/// The config a handle was made with is the one it resolves by hand with.
#[test]
fn a_handle_resolves_with_its_own_config() {
    let (t, _clock) = manual_state();
    let config = ReminderConfig {
        manual_verb: "orchestrator.close".to_owned(),
    };
    let by_hand = |r: &Reminders, source_id: &str| {
        let a = r.open(&new(preset::HANDOFF_PENDING, source_id)).unwrap();
        r.resolve(&a.reminder().id, ManualResolution::Completed, None)
            .unwrap()
            .resolved_by_verb
    };
    let r = Reminders::with_config(t.state.clone(), KindRegistry::preset(), config);
    assert_eq!(by_hand(&r, "h-1").as_deref(), Some("orchestrator.close"));
    let default = Reminders::new(t.state.clone(), KindRegistry::preset());
    assert_eq!(
        by_hand(&default, "h-2").as_deref(),
        Some("prism_nudge.resolve")
    );
    assert_eq!(default.registry(), &KindRegistry::preset());
    let mut kinds = KindRegistry::default();
    kinds
        .register(chipset_nudge::KindSpec::new("review_due", "review"))
        .unwrap();
    let custom = Reminders::new(t.state.clone(), kinds.clone());
    assert_eq!(custom.registry(), &kinds);
}

/// A reminder whose resolve stopped after its first durable step: the
/// index file rewritten as resolved (completed), not yet moved on.
pub(crate) fn half_resolved(t: &TempState, r: &Reminders) -> (Opened, ReminderKey, Reminder) {
    let a = r.open(&new(preset::WRAP_SESSION, "S")).unwrap();
    let key = ReminderKey::new(preset::WRAP_SESSION, "session", "S").unwrap();
    let mut resolved = a.reminder().clone();
    resolved.resolved_at = Some(resolved.created_at);
    resolved.resolution = Some(Resolution::Completed);
    t.state.write_json(&r.open_path(&key), &resolved).unwrap();
    (a, key, resolved)
}
