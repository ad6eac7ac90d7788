//! Issue 12: bus publish, ack, de-duplication, session start and control
//! commands driven through the store's I/O seam: a fault at every call, and
//! every power-cut state. Every failure is safe to retry with the same id.

use std::path::Path;

use chipset_bus::{Bus, ControlOp, Error, EventId, NewEvent, Published, Resource};
use chipset_store::{AgentId, Classify, ReadOutcome, SharedIo, StateDir, StateOptions};
use chipset_testkit::{EIO, Fault, FaultCase, FaultIo, RecordIo, Visible, sweep_each};
use serde_json::json;

use crate::agent;

use crate::EventName;

const ID: &str = "1772706900123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab";
const OTHER: &str = "1772706900124-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ac";

fn event(id: &str) -> NewEvent {
    NewEvent::new("worker-1", "task-done")
        .with_payload(json!({"m": 123_456_789_012_u64}))
        .with_id(EventId::new(id).unwrap())
}

/// Where the event with `id` is: (copies in the queue, copies processed).
fn copies(bus: &Bus, who: &AgentId, id: &str) -> (usize, usize) {
    let count = |v: Vec<String>| v.iter().filter(|e| e.id().as_str() == id).count();
    (
        count(crate::queued(bus, who)),
        count(crate::processed(bus, who)),
    )
}

/// A chosen id whose event file is unreadable is neither the first
/// delivery nor other content: the publish fails as corrupt (the doctor
/// moves the file aside, and the retry then publishes), and a caller that
/// treats a taken id as "published before" never takes it for one.
#[test]
fn a_chosen_id_over_an_unreadable_event_is_corrupt_not_taken() {
    let (_t, _clock, bus) = crate::manual();
    let bob = agent("bob");
    let _ = bus.publish(&bob, &event(ID)).unwrap();
    let name = crate::queued(&bus, &bob).remove(0);
    let path = bus.queue_dir(&bob).join(&name).unwrap();
    bus.state().write_bytes(&path, b"{oops").unwrap();
    for again in [event(ID), event(ID).with_payload(json!({"m": 2}))] {
        let err = bus.publish(&bob, &again).unwrap_err();
        assert_eq!(err.kind(), chipset_store::ErrorKind::Corrupt, "{err}");
        assert!(!matches!(err, Error::IdTaken { .. }), "{err}");
    }
    assert_eq!(
        bus.state().read_bytes(&path).unwrap().value().unwrap(),
        b"{oops",
        "nothing changed"
    );
}

#[test]
fn publishing_again_with_the_same_id_returns_the_first_delivery() {
    let (_t, clock, bus) = crate::manual();
    let bob = agent("bob");
    let first = bus.publish(&bob, &event(ID)).unwrap();
    clock.advance(std::time::Duration::from_secs(5));
    let again = bus.publish(&bob, &event(ID)).unwrap();
    assert_eq!(
        first, again,
        "the retry returns the first delivery, its time included"
    );
    assert_eq!(copies(&bus, &bob, ID), (1, 0));

    // Same id, other content: refused, nothing changes.
    let other = event(ID).with_payload(json!({"m": 2}));
    let err = bus.publish(&bob, &other).unwrap_err();
    assert!(matches!(err, Error::IdTaken { .. }), "{err}");
    let err = bus
        .publish(&bob, &event(ID).with_priority(chipset_bus::Priority::High))
        .unwrap_err();
    assert!(matches!(err, Error::IdTaken { .. }), "{err}");
    assert_eq!(copies(&bus, &bob, ID), (1, 0));

    // Acknowledged, then published again: still the first delivery, not a new one.
    let id = EventId::new(ID).unwrap();
    assert!(bus.ack(&bob, &id).unwrap());
    assert!(!bus.ack(&bob, &id).unwrap());
    assert_eq!(bus.publish(&bob, &event(ID)).unwrap(), first);
    assert_eq!(copies(&bus, &bob, ID), (0, 1));

    // To several recipients, and with a key, the same holds.
    let both = [agent("carol"), agent("dave")];
    let sent = bus.publish_to(&both, &event(OTHER)).unwrap();
    assert_eq!(bus.publish_to(&both, &event(OTHER)).unwrap(), sent);
    let keyed = event(ID).with_dedup_key("k1");
    let first = bus.publish(&agent("erin"), &keyed).unwrap();
    assert_eq!(bus.publish(&agent("erin"), &keyed).unwrap(), first);
    assert!(matches!(first, Published::Delivered(_)));
}

/// A publish to several recipients that fails at its first recipient, before
/// anything was delivered, is a plain error (nothing happened; no
/// "partly published" with nobody delivered).
#[test]
fn a_publish_to_many_failing_at_the_first_is_a_plain_error() {
    let tmp = tempfile::tempdir().unwrap();
    let fault = FaultIo::passthrough();
    let bus = open(tmp.path(), fault.clone());
    fault.set(Fault::nth(1, EIO));
    let err = bus
        .publish_to(&[agent("bob"), agent("carol")], &event(ID))
        .unwrap_err();
    assert!(!matches!(err, Error::PartlyPublished { .. }), "{err:?}");
    assert!(!err.is_outcome_unknown(), "{err:?}");
    assert_eq!(copies(&bus, &agent("bob"), ID), (0, 0));
    assert_eq!(copies(&bus, &agent("carol"), ID), (0, 0));
}

fn open(root: &Path, io: SharedIo) -> Bus {
    Bus::new(
        StateDir::open_with(
            root,
            StateOptions {
                io,
                ..StateOptions::default()
            },
        )
        .unwrap(),
    )
}

struct Case {
    name: &'static str,
    setup: fn(&Bus),
    /// Runs the operation, retry-safe; returns Err only for a failure.
    run: fn(&Bus) -> Result<(), Error>,
    applied: fn(&Bus) -> bool,
    /// What a power cut may leave of an operation that returned, and what
    /// a retry after any cut reaches.
    whole: fn(&Bus) -> bool,
    /// Directories a failed attempt may leave (empty but for a lock file):
    /// the key's lock lives in `dedup/`, and a lock file is never removed.
    lock_dirs: &'static [&'static str],
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "publish",
            setup: |_| {},
            run: |b| b.publish(&agent("bob"), &event(ID)).map(drop),
            applied: |b| copies(b, &agent("bob"), ID) == (1, 0),
            whole: event_whole,
            lock_dirs: &[],
        },
        Case {
            name: "publish to an existing queue",
            setup: |b| drop(b.ensure_queue(&agent("bob")).unwrap()),
            run: |b| b.publish(&agent("bob"), &event(ID)).map(drop),
            applied: |b| copies(b, &agent("bob"), ID) == (1, 0),
            whole: event_whole,
            lock_dirs: &[],
        },
        Case {
            name: "publish to two",
            setup: |_| {},
            run: |b| {
                b.publish_to(&[agent("bob"), agent("carol")], &event(ID))
                    .map(drop)
            },
            applied: |b| {
                copies(b, &agent("bob"), ID) == (1, 0) && copies(b, &agent("carol"), ID) == (1, 0)
            },
            whole: event_whole,
            lock_dirs: &[],
        },
        Case {
            name: "publish with a dedup key",
            setup: |_| {},
            run: |b| {
                let first = b.publish(&agent("bob"), &event(ID).with_dedup_key("k1"))?;
                assert!(matches!(first, Published::Delivered(_)), "{first:?}");
                // A second event with the key is a duplicate once the first applied.
                match b.publish(&agent("bob"), &event(OTHER).with_dedup_key("k1"))? {
                    Published::Duplicate { .. } => Ok(()),
                    Published::Delivered(e) => panic!("dedup let {} through", e.id),
                }
            },
            applied: |b| {
                copies(b, &agent("bob"), ID) == (1, 0) && copies(b, &agent("bob"), OTHER) == (0, 0)
            },
            whole: event_whole,
            lock_dirs: &["bus", "bus/bob", "bus/bob/dedup"],
        },
        Case {
            name: "ack",
            setup: |b| drop(b.publish(&agent("bob"), &event(ID)).unwrap()),
            run: |b| b.ack(&agent("bob"), &EventId::new(ID).unwrap()).map(drop),
            applied: |b| copies(b, &agent("bob"), ID) == (0, 1),
            whole: event_whole,
            lock_dirs: &[],
        },
        Case {
            name: "start a session",
            setup: |b| drop(b.publish(&agent("bob"), &event(ID)).unwrap()),
            run: |b| {
                let started = b.start(&agent("bob"), 4242)?;
                assert_eq!(started.pending.events.len(), 1, "{started:?}");
                Ok(())
            },
            applied: started,
            whole: started,
            lock_dirs: &[],
        },
        // A command appended again by a retry is the same command: applied,
        // the registry holds the resource once, whatever the log repeats.
        // (Applying is idempotent: the check applies what the log holds.)
        Case {
            name: "control register",
            setup: |b| drop(b.ensure_queue(&agent("bob")).unwrap()),
            run: |b| b.control(&agent("bob"), ControlOp::Register, &chat()),
            applied: registered,
            whole: registered,
            lock_dirs: &[],
        },
        Case {
            name: "apply control",
            setup: |b| {
                b.control(&agent("bob"), ControlOp::Register, &chat())
                    .unwrap();
            },
            run: |b| b.apply_control(&agent("bob")).map(drop),
            applied: registered,
            whole: registered,
            lock_dirs: &[],
        },
    ]
}

/// The event is there once: a move may leave it in both places after a
/// cut, never in neither.
fn event_whole(b: &Bus) -> bool {
    let (q, p) = copies(b, &agent("bob"), ID);
    q + p >= 1 && q <= 1 && p <= 1
}

/// The session's presence is the pid given, and the event is still
/// pending, once.
fn started(b: &Bus) -> bool {
    matches!(b.presence(&agent("bob")).unwrap(), ReadOutcome::Value(p) if p.pid == 4242)
        && copies(b, &agent("bob"), ID) == (1, 0)
}

fn chat() -> Resource {
    Resource::new("chat", "room-1")
}

/// Whether the registry, applied from the log as any reader applies it,
/// holds the resource once. Applies through a bus of its own, on the real
/// I/O: a check must not meet the fault the run is swept with.
fn registered(b: &Bus) -> bool {
    let own = Bus::new(StateDir::open(b.state().root()).unwrap());
    let registry = own.apply_control(&agent("bob")).unwrap();
    registry.resources.keys().eq([&chat()])
}

impl FaultCase for Case {
    type World = Bus;
    type Error = Error;

    fn name(&self) -> &str {
        self.name
    }

    fn open(&self, root: &Path, io: SharedIo) -> Bus {
        let bus = open(root, io);
        (self.setup)(&bus);
        bus
    }

    fn run(&self, bus: &Bus) -> Result<(), Error> {
        (self.run)(bus)
    }

    fn applied(&self, bus: &Bus) -> bool {
        (self.applied)(bus)
    }

    fn forgive(&self, _root: &Path, before: &Visible, after: &mut Visible, what: &str) {
        for d in self.lock_dirs {
            if !before.contains_key(Path::new(d))
                && let Some(entry) = after.remove(Path::new(d))
            {
                assert!(entry.is_none(), "{what}: {d} is not a directory");
            }
        }
    }
}

#[test]
fn every_fault_in_publish_ack_and_dedup_is_safe_to_retry() {
    sweep_each("bus", cases());
}

#[test]
#[allow(
    clippy::print_stderr,
    reason = "prints the figures for the report (shown with --nocapture)"
)]
fn every_power_cut_in_publish_and_ack_reads_clean_and_keeps_what_returned() {
    for case in cases() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("state");
        (case.setup)(&Bus::new(StateDir::open(&root).unwrap()));
        let rec = RecordIo::start(&root).unwrap();
        let bus = open(&root, rec.clone());
        (case.run)(&bus).unwrap();
        rec.mark(case.name);
        let states = rec.crash_states();
        assert!(states.len() > 1, "{}", case.name);
        for (i, cut) in states.iter().enumerate() {
            let dir = tmp.path().join(format!("cut{i}"));
            cut.materialize(&dir).unwrap();
            let back = Bus::new(StateDir::open(&dir).unwrap());
            for who in ["bob", "carol"] {
                let pending = back.pending(&agent(who)).unwrap();
                assert!(
                    pending.unreadable.is_empty(),
                    "{}: cut {i}: {:?}",
                    case.name,
                    pending.unreadable
                );
            }
            if cut.returned.iter().any(|r| r == case.name) {
                assert!(
                    (case.whole)(&back),
                    "{}: lost after returning (cut {i})",
                    case.name
                );
            }
            (case.run)(&back).unwrap_or_else(|e| panic!("{}: retry after cut {i}: {e}", case.name));
            assert!(
                (case.whole)(&back),
                "{}: cut {i}: not whole after the retry",
                case.name
            );
        }
        eprintln!(
            "bus power cut {}: {} calls, {} distinct states",
            case.name,
            rec.calls(),
            states.len()
        );
    }
}

/// Issue 15: a batch of events to one queue shares its syncs: one directory
/// sync, and a single round of file syncs (none at all, only write-backs,
/// where the journal commits in order), however many events.
#[test]
fn a_batch_publish_costs_a_constant_number_of_sync_rounds_and_retries_cleanly() {
    use chipset_store::SyncOrder;
    use chipset_testkit::IoOp;
    for (order, file_syncs, dir_syncs) in [
        (SyncOrder::FileThenDir, 40, 1),
        (SyncOrder::WriteBackThenDir, 0, 1),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let fault = FaultIo::with_order(Fault::nth(0, EIO), order);
        let bus = open(tmp.path(), fault.clone());
        let bob = agent("bob");
        bus.ensure_queue(&bob).unwrap();
        let events: Vec<NewEvent> = (0..40)
            .map(|i| {
                let id = format!("1772706900{:03}-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab", i);
                event(&id)
            })
            .collect();
        let before = fault.calls().len();
        let out = bus.publish_batch(&bob, &events).unwrap();
        let calls = fault.calls()[before..].to_vec();
        assert_eq!(out.len(), 40);
        assert!(out.iter().all(|p| matches!(p, Published::Delivered(_))));
        assert_eq!(crate::queued(&bus, &bob).len(), 40, "{order:?}");
        let count = |op: IoOp| calls.iter().filter(|c| **c == op).count();
        assert_eq!(count(IoOp::SyncDir), dir_syncs, "{order:?}: {calls:?}");
        assert_eq!(count(IoOp::Sync), file_syncs, "{order:?}");
        // A retry of the whole batch writes nothing and returns the first deliveries.
        let before = fault.calls().len();
        let again = bus.publish_batch(&bob, &events).unwrap();
        assert_eq!(again, out, "{order:?}");
        assert_eq!(
            fault.calls().len(),
            before,
            "{order:?}: the retry wrote nothing"
        );
        assert_eq!(crate::queued(&bus, &bob).len(), 40);
    }
}

/// Regression: a batch whose events without a key were published and
/// whose keyed event then failed returned a plain error, and the same
/// batch again (without chosen ids, as a plain error invites) published
/// them twice. A fault at any call now leaves nothing, or names each
/// event that is (or may be) in the queue, and the batch again with
/// those ids has every event delivered once.
#[test]
fn a_batch_failing_part_way_names_what_it_published_and_its_retry_adds_no_copy() {
    let bob = agent("bob");
    let batch = || {
        vec![
            NewEvent::new("w", "plain").with_payload(json!({"n": 1})),
            NewEvent::new("w", "keyed")
                .with_payload(json!({"n": 2}))
                .with_dedup_key("k1"),
        ]
    };
    let kinds = |bus: &Bus| {
        let queued = crate::queued(bus, &bob);
        let count = |kind: &str| queued.iter().filter(|n| n.ends_with(kind)).count();
        (count("-w-plain.json"), count("-w-keyed.json"))
    };
    let probe = tempfile::tempdir().unwrap();
    let fault = FaultIo::passthrough();
    open(probe.path(), fault.clone())
        .publish_batch(&bob, &batch())
        .unwrap();
    let mut named = 0;
    for n in 1..=fault.counted() {
        let tmp = tempfile::tempdir().unwrap();
        let fault = FaultIo::passthrough();
        let bus = open(tmp.path(), fault.clone());
        fault.set(Fault::nth(n, EIO));
        let got = bus.publish_batch(&bob, &batch());
        fault.disarm();
        let Err(e) = got else {
            continue;
        };
        let mut again = batch();
        if let Error::BatchPartlyPublished { published, .. } = &e {
            assert!(e.is_outcome_unknown(), "call {n}: {e}");
            named += 1;
            for (i, id) in published {
                again[*i] = again[*i].clone().with_id(id.clone());
            }
        } else {
            assert_eq!(kinds(&bus), (0, 0), "call {n}: {e}, with events out");
        }
        bus.publish_batch(&bob, &again)
            .unwrap_or_else(|e| panic!("call {n}: retry: {e}"));
        assert_eq!(kinds(&bus), (1, 1), "call {n}: after the retry of {e}");
    }
    assert!(named > 0, "no fault fell after a publish");
}
