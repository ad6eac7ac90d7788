//! Issue 12: every hook transition driven through the store's I/O seam: a
//! fault (EIO, ENOSPC) at every call, and every power-cut state. Each failure
//! is plain (nothing visible changed) or of unknown outcome, and a retry
//! with the same assignment is then a success that applied once.

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chipset_hook::{Assignment, Error, HookStatus, Hooks, Pickup};
use chipset_store::ReadOutcome;
use chipset_store::{
    Classify, ErrorKind, ManualClock, RealIo, SharedIo, StateDir, StateOptions, Timestamp,
};
use chipset_testkit::{FaultCase, RecordIo, Visible, sweep_each};

use crate::ReadExt;
use crate::{T0, agent, bead};

fn open(root: &Path, io: SharedIo, clock: &ManualClock) -> Hooks {
    Hooks::new(
        StateDir::open_with(
            root,
            StateOptions {
                io,
                clock: Arc::new(clock.clone()),
                ..StateOptions::default()
            },
        )
        .unwrap(),
    )
}

/// Where the hook is before the operation.
#[derive(Clone, Copy)]
enum Before {
    Missing,
    Pending,
    Active,
    Completed,
}

fn prepare(h: &Hooks, before: Before) -> Option<Assignment> {
    let a = agent("polecat");
    let held = match before {
        Before::Missing => return None,
        _ => h.assign(&a, bead("gt-1"), "fix it", None).unwrap(),
    };
    if matches!(before, Before::Active | Before::Completed) {
        h.activate(&held).unwrap();
    }
    if matches!(before, Before::Completed) {
        h.complete(&held).unwrap();
    }
    Some(held)
}

struct Case {
    name: &'static str,
    before: Before,
    /// Runs the operation, retry-safe; returns Err only for a failure.
    run: fn(&Hooks, Option<&Assignment>) -> Result<(), Error>,
    /// The status after, and whether the generation moved on.
    after: (HookStatus, bool),
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "assign",
            before: Before::Missing,
            // Issue 31: the retry is the same request (bead, title, dispatcher)
            // and returns the first assignment, not AlreadyAssigned.
            run: |h, _| {
                h.assign(&agent("polecat"), bead("gt-1"), "fix it", None)
                    .map(drop)
            },
            after: (HookStatus::Pending, true),
        },
        Case {
            name: "activate",
            before: Before::Pending,
            run: |h, held| h.activate(held.unwrap()).map(drop),
            after: (HookStatus::Active, false),
        },
        Case {
            name: "pickup",
            before: Before::Pending,
            run: |h, _| match h.pickup(&agent("polecat"))? {
                Pickup::Started(_) | Pickup::Resumed(_) => Ok(()),
                other => panic!("picked up {other:?}"),
            },
            after: (HookStatus::Active, false),
        },
        Case {
            name: "touch",
            before: Before::Active,
            run: |h, held| h.touch(held.unwrap()).map(drop),
            after: (HookStatus::Active, false),
        },
        Case {
            name: "complete",
            before: Before::Active,
            run: |h, held| h.complete(held.unwrap()).map(drop),
            after: (HookStatus::Completed, false),
        },
        Case {
            name: "clear",
            before: Before::Completed,
            run: |h, held| h.clear(held.unwrap()).map(drop),
            after: (HookStatus::Empty, true),
        },
        Case {
            name: "reassign",
            before: Before::Active,
            run: |h, held| h.reassign(held.unwrap()).map(drop),
            after: (HookStatus::Empty, true),
        },
    ]
}

fn applied(h: &Hooks, case: &Case, generation_before: u64) -> bool {
    match h.read(&agent("polecat")).unwrap() {
        ReadOutcome::Value(hook) => {
            let (status, bump) = case.after;
            hook.state.status() == status && hook.generation == generation_before + u64::from(bump)
        }
        _ => false,
    }
}

fn generation(h: &Hooks) -> u64 {
    h.read(&agent("polecat"))
        .unwrap()
        .hook()
        .map_or(0, |h| h.generation)
}

/// One case's fresh state: the hooks, their clock, the assignment the
/// setup made, and the generation before the operation.
struct World {
    hooks: Hooks,
    clock: ManualClock,
    held: Option<Assignment>,
    generation: u64,
}

impl FaultCase for Case {
    type World = World;
    type Error = Error;

    fn name(&self) -> &str {
        self.name
    }

    fn open(&self, root: &Path, io: SharedIo) -> World {
        let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
        let hooks = open(root, io, &clock);
        let held = prepare(&hooks, self.before);
        let generation = generation(&hooks);
        clock.advance(Duration::from_secs(1));
        World {
            hooks,
            clock,
            held,
            generation,
        }
    }

    fn run(&self, w: &World) -> Result<(), Error> {
        (self.run)(&w.hooks, w.held.as_ref())
    }

    fn applied(&self, w: &World) -> bool {
        applied(&w.hooks, self, w.generation)
    }

    fn is_outcome_unknown(&self, e: &Error, _what: &str) -> bool {
        matches!(e, Error::Store(e) if e.is_outcome_unknown())
    }

    fn forgive(&self, _root: &Path, before: &Visible, after: &mut Visible, what: &str) {
        // The hook's lock lives in `hooks/`, and a lock file is never
        // removed: a failed first write may leave the directory, holding
        // nothing but the (dot-named) lock.
        if !before.contains_key(Path::new("hooks"))
            && let Some(entry) = after.remove(Path::new("hooks"))
        {
            assert!(entry.is_none(), "{what}: `hooks` is not a directory");
        }
    }

    fn before_retry(&self, w: &World) {
        w.clock.advance(Duration::from_secs(1));
    }
}

#[test]
fn every_fault_in_every_hook_transition_is_safe_to_retry() {
    sweep_each("hook", cases());
}

#[test]
#[allow(
    clippy::print_stderr,
    reason = "prints the figures for the report (shown with --nocapture)"
)]
fn every_power_cut_in_a_hook_transition_reads_clean_and_keeps_what_returned() {
    let mut total = 0;
    for case in cases() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("state");
        let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
        let setup = open(&root, std::sync::Arc::new(RealIo), &clock);
        let held = prepare(&setup, case.before);
        let g = generation(&setup);
        clock.advance(Duration::from_secs(1));
        let rec = RecordIo::start(&root).unwrap();
        let hooks = open(&root, rec.clone(), &clock);
        (case.run)(&hooks, held.as_ref()).unwrap();
        rec.mark(case.name);
        let states = rec.crash_states();
        assert!(states.len() > 1, "{}", case.name);
        for (i, cut) in states.iter().enumerate() {
            let what = format!("{}: cut {i}", case.name);
            let dir = tmp.path().join(format!("cut{i}"));
            cut.materialize(&dir).unwrap();
            let back = open(&dir, std::sync::Arc::new(RealIo), &clock);
            let read = back.read(&agent("polecat")).unwrap();
            assert!(read.corruption().is_none(), "{what}: {read:?}");
            if cut.returned.iter().any(|r| r == case.name) {
                assert!(applied(&back, &case, g), "{what}: lost after returning");
            }
            (case.run)(&back, held.as_ref()).unwrap_or_else(|e| panic!("{what}: retry: {e}"));
            assert!(
                applied(&back, &case, g),
                "{what}: the retry did not apply once"
            );
        }
        total += states.len();
        eprintln!(
            "hook power cut {}: {} calls, {} distinct states",
            case.name,
            rec.calls(),
            states.len()
        );
    }
    eprintln!("hook power cut total: {total} states");
}

#[test]
fn repeating_a_transition_that_applied_is_a_success_that_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
    let hooks = open(tmp.path(), std::sync::Arc::new(RealIo), &clock);
    let held = prepare(&hooks, Before::Pending).unwrap();
    let file = hooks.path(&agent("polecat"));
    let active = hooks.activate(&held).unwrap();
    clock.advance(Duration::from_secs(1));
    let bytes = fs::read(&file).unwrap();
    assert_eq!(hooks.activate(&held).unwrap(), active);
    assert_eq!(fs::read(&file).unwrap(), bytes, "a repeated activate wrote");
    let done = hooks.complete(&held).unwrap();
    let bytes = fs::read(&file).unwrap();
    assert_eq!(hooks.complete(&held).unwrap(), done);
    assert_eq!(fs::read(&file).unwrap(), bytes, "a repeated complete wrote");
    let cleared = hooks.clear(&held).unwrap();
    let bytes = fs::read(&file).unwrap();
    assert_eq!(hooks.clear(&held).unwrap(), cleared);
    let again = hooks.reassign(&held).unwrap();
    assert_eq!((again.taken, again.was), (held.clone(), HookStatus::Empty));
    assert_eq!(fs::read(&file).unwrap(), bytes, "a repeated clear wrote");
    // Touch and complete of the cleared assignment are still stale.
    assert_eq!(hooks.touch(&held).unwrap_err().kind(), ErrorKind::Stale);
    assert_eq!(hooks.complete(&held).unwrap_err().kind(), ErrorKind::Stale);
}

/// Issue 31: `hook assign` retried after an outcome-unknown failure was
/// refused with AlreadyAssigned; the same request now returns the first
/// assignment while the hook holds it, and any other request is refused.
#[test]
fn an_assign_repeated_with_the_same_request_returns_the_first_assignment() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
    let hooks = open(tmp.path(), std::sync::Arc::new(RealIo), &clock);
    let (a, mayor) = (agent("polecat"), agent("mayor"));
    let assign = |b: &str, title: &str, by: Option<&_>| hooks.assign(&a, bead(b), title, by);
    let first = assign("gt-1", "fix it", Some(&mayor)).unwrap();
    let file = hooks.path(&a);
    let bytes = fs::read(&file).unwrap();
    clock.advance(Duration::from_secs(1));
    let refused = |b: &str, title: &str, by: Option<&_>| {
        let e = assign(b, title, by).unwrap_err();
        assert!(
            matches!(&e, Error::AlreadyAssigned { bead_id, .. } if *bead_id == bead("gt-1")),
            "{b} {title} {by:?}: {e}"
        );
    };
    for step in ["pending", "active", "completed"] {
        match step {
            "active" => drop(hooks.activate(&first).unwrap()),
            "completed" => drop(hooks.complete(&first).unwrap()),
            _ => {}
        }
        let bytes = if step == "pending" {
            bytes.clone()
        } else {
            fs::read(&file).unwrap()
        };
        assert_eq!(
            assign("gt-1", "fix it", Some(&mayor)).unwrap(),
            first,
            "{step}"
        );
        assert_eq!(fs::read(&file).unwrap(), bytes, "{step}: the retry wrote");
        // Another bead, title or dispatcher is another request.
        refused("gt-2", "fix it", Some(&mayor));
        refused("gt-1", "fix that", Some(&mayor));
        refused("gt-1", "fix it", None);
        refused("gt-1", "fix it", Some(&agent("deacon")));
    }
    // Once cleared, the same request is a new assignment.
    hooks.clear(&first).unwrap();
    let again = assign("gt-1", "fix it", Some(&mayor)).unwrap();
    assert_eq!(again.generation, first.generation + 2);
}
