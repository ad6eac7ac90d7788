//! Issue 12: nudge send and respond, mark processed, and reminder open,
//! resolve and snooze driven through the store's I/O seam: a fault (EIO,
//! ENOSPC) at every call, and every power-cut state. Each failure is plain
//! (nothing visible changed) or of unknown outcome, and a retry is then a
//! success that applied once.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chipset_nudge::{
    Error, KindRegistry, ManualResolution, NewNudge, NewReminder, NudgeId, NudgeType, Nudges,
    ReminderFilter, ReminderId, Reminders, Resolution,
};
use chipset_store::{
    ManualClock, ReadOutcome, RealIo, SharedIo, StateDir, StateOptions, Timestamp,
};
use chipset_testkit::{FaultCase, RecordIo, Visible, forgive_lock_folders, sweep_each};

use crate::support::DeliveryExt;
use crate::support::ReminderExt;
use crate::support::ReminderKey;
use crate::support::preset;
use crate::support::{T0, agent};

const NID: &str = "1772706900123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab";

struct World {
    nudges: Nudges,
    reminders: Reminders,
}

fn open(root: &Path, io: SharedIo, clock: &ManualClock) -> World {
    let state = StateDir::open_with(
        root,
        StateOptions {
            io,
            clock: Arc::new(clock.clone()),
            ..StateOptions::default()
        },
    )
    .unwrap();
    World {
        nudges: Nudges::new(state.clone()),
        reminders: Reminders::new(state, KindRegistry::preset()),
    }
}

fn key() -> ReminderKey {
    let st = KindRegistry::preset()
        .get(preset::SPEC_DRAFT)
        .unwrap()
        .source_type
        .clone();
    ReminderKey::new(preset::SPEC_DRAFT, st, "spec-1").unwrap()
}

fn new_reminder() -> NewReminder {
    crate::support::new_reminder("tenant", None, &key(), "draft the spec")
}

fn health_check() -> NewNudge {
    NewNudge::new(agent("witness"), NudgeType::HealthCheck, "are you there?").requiring_response()
}

/// The one reminder of the key, wherever it is.
fn the_reminder(w: &World) -> Option<chipset_nudge::Reminder> {
    let mut rows = records(w);
    assert!(rows.len() <= 1, "{rows:?}");
    rows.pop()
}

fn reminder_id(w: &World) -> ReminderId {
    the_reminder(w).unwrap().id
}

struct Case {
    name: &'static str,
    setup: fn(&World),
    /// Runs the operation, retry-safe; returns Err only for a failure.
    run: fn(&World) -> Result<(), Error>,
    /// The operation applied, once.
    applied: fn(&World) -> bool,
}

fn latest(w: &World, who: &str) -> Option<chipset_nudge::Nudge> {
    match w.nudges.read_latest(&agent(who)).unwrap() {
        ReadOutcome::Value(n) => Some(n),
        ReadOutcome::Missing => None,
        other => panic!("{other:?}"),
    }
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "nudge send",
            setup: |_| {},
            run: |w| {
                let d = w.nudges.send(
                    &agent("polecat"),
                    &health_check().with_id(NudgeId::new(NID).unwrap()),
                )?;
                assert!(d.sent().is_some(), "{d:?}");
                Ok(())
            },
            applied: |w| {
                latest(w, "polecat")
                    .is_some_and(|n| n.id.as_ref().map(NudgeId::as_str) == Some(NID))
            },
        },
        Case {
            name: "nudge respond",
            setup: |w| {
                drop(
                    w.nudges
                        .send(
                            &agent("polecat"),
                            &health_check().with_id(NudgeId::new(NID).unwrap()),
                        )
                        .unwrap(),
                )
            },
            run: |w| {
                let incoming = latest(w, "polecat").unwrap();
                w.nudges
                    .respond(&agent("polecat"), &incoming, "working on it")
                    .map(drop)
            },
            applied: |w| {
                let record = w
                    .nudges
                    .responses_since(&agent("witness"), Timestamp::from_unix_ms(0))
                    .unwrap();
                let answer = latest(w, "witness");
                record.items.len() == 1
                    && answer
                        .is_some_and(|n| n.in_reply_to.as_ref().map(NudgeId::as_str) == Some(NID))
            },
        },
        Case {
            name: "nudge mark processed",
            setup: |w| {
                drop(
                    w.nudges
                        .send(
                            &agent("polecat"),
                            &health_check().with_id(NudgeId::new(NID).unwrap()),
                        )
                        .unwrap(),
                )
            },
            run: |w| {
                let incoming = latest(w, "polecat").unwrap();
                w.nudges.mark_processed(&agent("polecat"), &incoming)
            },
            applied: |w| {
                matches!(
                    w.nudges.receive(&agent("polecat")).unwrap(),
                    ReadOutcome::Value(chipset_nudge::Received::Seen(_))
                )
            },
        },
        Case {
            name: "reminder open",
            setup: |_| {},
            run: |w| w.reminders.open(&new_reminder()).map(drop),
            applied: |w| the_reminder(w).is_some_and(|r| r.resolution.is_none()),
        },
        Case {
            name: "reminder resolve",
            setup: |w| drop(w.reminders.open(&new_reminder()).unwrap()),
            run: |w| {
                let id = reminder_id(w);
                w.reminders
                    .resolve(&id, ManualResolution::Completed, Some("done".into()))
                    .map(drop)
            },
            applied: |w| {
                the_reminder(w).is_some_and(|r| r.resolution == Some(Resolution::Completed))
            },
        },
        Case {
            name: "reminder snooze",
            setup: |w| drop(w.reminders.open(&new_reminder()).unwrap()),
            run: |w| {
                let id = reminder_id(w);
                w.reminders
                    .snooze(&id, Duration::from_secs(3600), None)
                    .map(drop)
            },
            applied: |w| the_reminder(w).is_some_and(|r| r.resolution == Some(Resolution::Snoozed)),
        },
        Case {
            name: "reminder auto-resolve",
            setup: |w| drop(w.reminders.open(&new_reminder()).unwrap()),
            run: auto_resolve,
            applied: auto_resolved,
        },
        Case {
            name: "reminder auto-resolve while snoozed",
            setup: |w| {
                let id = w
                    .reminders
                    .open(&new_reminder())
                    .unwrap()
                    .reminder()
                    .id
                    .clone();
                drop(
                    w.reminders
                        .snooze(&id, Duration::from_secs(3600), None)
                        .unwrap(),
                );
            },
            run: auto_resolve,
            // The snoozed record stays as it was, and one new record, naming
            // it in `reopened_from`, is cleared: a retry makes no second one.
            applied: |w| {
                let rows = records(w);
                rows.len() == 2
                    && rows[0].resolution == Some(Resolution::Snoozed)
                    && rows[1].resolution == Some(Resolution::AutoCleared)
                    && rows[1].resolved_by_verb.as_deref() == Some("prism_spec.update")
                    && rows[1].metadata.get("reopened_from")
                        == Some(&serde_json::json!(rows[0].id.as_str()))
            },
        },
    ]
}

/// Every record of the key, open or in the history, oldest first.
fn records(w: &World) -> Vec<chipset_nudge::Reminder> {
    let all = w
        .reminders
        .list(&ReminderFilter {
            history: true,
            ..ReminderFilter::default()
        })
        .unwrap();
    assert!(all.corrupt.is_empty(), "{:?}", all.corrupt);
    let mut rows: Vec<_> = all
        .items
        .into_iter()
        .filter(|r| r.source_id == "spec-1")
        .collect();
    rows.sort_by_key(|r| r.created_at);
    rows
}

/// The spec's update clears its draft reminder (seed §6.1): a retry after
/// a clear that applied finds nothing open and answers `None`.
fn auto_resolve(w: &World) -> Result<(), Error> {
    let k = key();
    w.reminders
        .auto_resolve(
            k.kind(),
            k.source_type(),
            k.source_id(),
            "prism_spec.update",
        )
        .map(drop)
}

fn auto_resolved(w: &World) -> bool {
    the_reminder(w).is_some_and(|r| {
        r.resolution == Some(Resolution::AutoCleared)
            && r.resolved_by_verb.as_deref() == Some("prism_spec.update")
    })
}

impl FaultCase for Case {
    type World = World;
    type Error = Error;

    fn name(&self) -> &str {
        self.name
    }

    fn open(&self, root: &Path, io: SharedIo) -> World {
        let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
        let w = open(root, io, &clock);
        (self.setup)(&w);
        clock.advance(Duration::from_secs(1));
        w
    }

    fn run(&self, w: &World) -> Result<(), Error> {
        (self.run)(w)
    }

    fn applied(&self, w: &World) -> bool {
        (self.applied)(w)
    }

    fn forgive(&self, root: &Path, before: &Visible, after: &mut Visible, _what: &str) {
        forgive_lock_folders(root, before, after);
    }
}

#[test]
fn every_fault_in_nudges_and_reminders_is_safe_to_retry() {
    sweep_each("nudge", cases());
}

#[test]
#[allow(
    clippy::print_stderr,
    reason = "prints the figures for the report (shown with --nocapture)"
)]
fn every_power_cut_in_nudges_and_reminders_reads_clean_and_keeps_what_returned() {
    let mut total = 0;
    for case in cases() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("state");
        let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
        (case.setup)(&open(&root, std::sync::Arc::new(RealIo), &clock));
        clock.advance(Duration::from_secs(1));
        let rec = RecordIo::start(&root).unwrap();
        let w = open(&root, rec.clone(), &clock);
        (case.run)(&w).unwrap();
        rec.mark(case.name);
        let states = rec.crash_states();
        assert!(states.len() > 1, "{}", case.name);
        for (i, cut) in states.iter().enumerate() {
            let what = format!("{}: cut {i}", case.name);
            let dir = tmp.path().join(format!("cut{i}"));
            cut.materialize(&dir).unwrap();
            let back = open(&dir, std::sync::Arc::new(RealIo), &clock);
            // Reads without corruption (the reminder helpers assert it too).
            for who in ["polecat", "witness"] {
                assert!(
                    !matches!(
                        back.nudges.read_latest(&agent(who)).unwrap(),
                        ReadOutcome::Corrupt(_)
                    ),
                    "{what}"
                );
            }
            drop(records(&back));
            if cut.returned.iter().any(|r| r == case.name) {
                assert!((case.applied)(&back), "{what}: lost after returning");
            }
            (case.run)(&back).unwrap_or_else(|e| panic!("{what}: retry: {e}"));
            assert!(
                (case.applied)(&back),
                "{what}: the retry did not apply once"
            );
        }
        total += states.len();
        eprintln!(
            "nudge power cut {}: {} calls, {} distinct states",
            case.name,
            rec.calls(),
            states.len()
        );
    }
    eprintln!("nudge power cut total: {total} states");
}

#[test]
fn resolving_snoozing_and_responding_again_are_successes_that_change_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
    let w = open(tmp.path(), std::sync::Arc::new(RealIo), &clock);
    // Resolve twice the same way: the same record; another way: refused.
    w.reminders.open(&new_reminder()).unwrap();
    let id = reminder_id(&w);
    let done = w
        .reminders
        .resolve(&id, ManualResolution::Completed, None)
        .unwrap();
    clock.advance(Duration::from_secs(5));
    assert_eq!(
        w.reminders
            .resolve(&id, ManualResolution::Completed, None)
            .unwrap(),
        done
    );
    assert!(matches!(
        w.reminders.resolve(&id, ManualResolution::Ignored, None),
        Err(Error::AlreadyResolved { .. })
    ));
    // Snooze twice for as long: the same record, the same snooze_until.
    let r = w.reminders.open(&new_reminder()).unwrap();
    let id = r.reminder().id.clone();
    let snoozed = w
        .reminders
        .snooze(&id, Duration::from_secs(3600), None)
        .unwrap();
    clock.advance(Duration::from_secs(5));
    assert_eq!(
        w.reminders
            .snooze(&id, Duration::from_secs(3600), None)
            .unwrap(),
        snoozed
    );
    // A nudge sent twice with one id is delivered once; other content is refused.
    let nid = NudgeId::new(NID).unwrap();
    let chosen = health_check().with_id(nid.clone());
    let first = w.nudges.send(&agent("polecat"), &chosen).unwrap();
    clock.advance(Duration::from_secs(5));
    assert_eq!(w.nudges.send(&agent("polecat"), &chosen).unwrap(), first);
    let other = NewNudge::new(agent("witness"), NudgeType::HealthCheck, "other");
    assert!(matches!(
        w.nudges
            .send(&agent("polecat"), &other.with_id(nid.clone())),
        Err(Error::IdTaken { .. })
    ));
    // Responding twice with the same message: one response, the same one.
    let incoming = latest(&w, "polecat").unwrap();
    let once = w
        .nudges
        .respond(&agent("polecat"), &incoming, "yes")
        .unwrap();
    clock.advance(Duration::from_secs(5));
    let twice = w
        .nudges
        .respond(&agent("polecat"), &incoming, "yes")
        .unwrap();
    assert_eq!(once.nudge(), twice.nudge());
    // Once processed, neither a send nor a respond retry delivers it again.
    let answer = latest(&w, "witness").unwrap();
    w.nudges.mark_processed(&agent("witness"), &answer).unwrap();
    w.nudges.mark_processed(&agent("witness"), &answer).unwrap();
    let _ = w
        .nudges
        .respond(&agent("polecat"), &incoming, "yes")
        .unwrap();
    assert!(matches!(
        w.nudges.receive(&agent("witness")).unwrap(),
        ReadOutcome::Value(chipset_nudge::Received::Seen(_))
    ));
}

/// Issue 31: resolving a snoozed reminder, retried after an outcome-unknown
/// failure, found the snoozed record in the history (superseded by the
/// resolved one under a new id) and was refused with AlreadyResolved; the
/// retry now returns the resolved record, and another change is refused.
#[test]
fn resolving_a_snoozed_reminder_again_returns_the_record_that_resolved_it() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
    let w = open(tmp.path(), std::sync::Arc::new(RealIo), &clock);
    let id = w
        .reminders
        .open(&new_reminder())
        .unwrap()
        .reminder()
        .id
        .clone();
    w.reminders
        .snooze(&id, Duration::from_secs(3600), None)
        .unwrap();
    clock.advance(Duration::from_secs(5));
    let note = || Some("done".to_owned());
    let done = w
        .reminders
        .resolve(&id, ManualResolution::Completed, note())
        .unwrap();
    assert_eq!(done.reopened_from(), Some(id.as_str()));
    clock.advance(Duration::from_secs(5));
    let again = w
        .reminders
        .resolve(&id, ManualResolution::Completed, note())
        .unwrap();
    assert_eq!(again, done);
    assert!(matches!(
        w.reminders.resolve(&id, ManualResolution::Ignored, note()),
        Err(Error::AlreadyResolved { .. })
    ));
}
