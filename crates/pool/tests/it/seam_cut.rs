//! The power cuts of the pool's seam test (`seam.rs`): every state a cut
//! during an operation, or during the operations after it, could leave.
//! Each reads clean, keeps what an operation that returned promised, holds
//! no item on two hooks, and takes the retry of the same request.

use std::sync::Arc;

use chipset_store::{DoctorMode, RealIo, Report};
use chipset_testkit::RecordIo;

use crate::item;
use crate::seam::{
    Case, UNNAMED, World, answers, cases, claim, holds, post, states, unnamed_count,
};

/// What the pool's doctor may find after a cut, each with its documented
/// repair (`docs/pool.md`): an item file no table names (a post cut
/// before its commit point), item files and no table (the same, for the
/// first post into a pool: the doctor cannot tell it from a lost table,
/// and its rebuild posts them, as the post's retry would) and a hook
/// still holding, pending or active, an item recorded done (a done cut
/// before it cleared the hook).
const AFTER_A_CUT: [&str; 3] = [
    "pool-item-orphan",
    "pool-done-on-hook",
    "pool-table-missing",
];

/// The operations after the case's: a post that rewrites the table (and
/// folds the log into it) and another agent's claim.
fn later(w: &World) {
    post(w, &[item("z").with_priority(0)]);
    claim(w, "bob", "z");
}

fn codes(report: &Report) -> Vec<&'static str> {
    report.findings.iter().map(|f| f.code).collect()
}

/// Checks that `w` reads clean: the table, the log and the hooks parse,
/// no item is on two hooks, and the doctors find nothing but what a cut
/// may leave, each fixable.
fn reads_clean(w: &World, what: &str) {
    drop(states(w));
    drop(holds(w));
    let report = w.pool.doctor(DoctorMode::Check).unwrap();
    for f in &report.findings {
        assert!(
            AFTER_A_CUT.contains(&f.code) && f.fixable,
            "{what}: the doctor found {f:?}"
        );
    }
    let hooks = w.hooks.doctor(DoctorMode::Check).unwrap();
    assert!(hooks.is_clean(), "{what}: {:?}", codes(&hooks));
}

/// Runs `case` on a recorded root, then [`later`]; returns the recording
/// and the world it ran in.
fn record(case: &Case, root: &std::path::Path) -> (Arc<RecordIo>, World) {
    let clock = chipset_testkit::manual_clock();
    let setup = World::prepared(case, root, Arc::new(RealIo), &clock);
    let rec = RecordIo::start(root).unwrap();
    let w = World::open(root, rec.clone(), &clock);
    *w.held.borrow_mut() = setup.held.take();
    case.run(&w).unwrap();
    rec.mark(case.name);
    later(&w);
    rec.mark("later");
    (rec, w)
}

#[test]
#[allow(
    clippy::print_stderr,
    reason = "prints the figures for the report (shown with --nocapture)"
)]
fn every_power_cut_in_every_pool_operation_reads_clean_and_keeps_what_returned() {
    let mut total = 0;
    for case in cases() {
        let tmp = tempfile::tempdir().unwrap();
        let (rec, w) = record(&case, &tmp.path().join("state"));
        let states = rec.crash_states();
        assert!(states.len() > 1, "{}", case.name);
        for (i, cut) in states.iter().enumerate() {
            let what = format!("{}: cut {i} at call {}", case.name, cut.crash_point);
            let dir = tmp.path().join(format!("cut{i}"));
            cut.materialize(&dir).unwrap();
            let back = World::open(&dir, Arc::new(RealIo), &w.clock);
            back.held.borrow_mut().clone_from(&w.held.borrow());
            reads_clean(&back, &what);
            let returned = cut.returned.iter().any(|r| r == case.name);
            if returned {
                assert!((case.applied)(&back), "{what}: lost after returning");
                // The caller knows what the first attempt returned.
                back.known.borrow_mut().clone_from(&w.known.borrow());
            }
            if cut.returned.iter().any(|r| r == "later") {
                assert!(
                    holds(&back).get("bob")
                        == Some(&("z".to_owned(), chipset_hook::HookStatus::Pending)),
                    "{what}: the later claim is lost"
                );
            }
            let unnamed = unnamed_count(&back);
            w.clock.advance(std::time::Duration::from_secs(1));
            case.run(&back)
                .unwrap_or_else(|e| panic!("{what}: retry: {e}"));
            if case.name == "post without an id" && !returned {
                // The caller never learned the id: its retry is a new post.
                assert_eq!(unnamed_count(&back), unnamed + 1, "{what}: {UNNAMED}");
            } else {
                assert!(
                    (case.applied)(&back),
                    "{what}: the retry did not apply once"
                );
            }
            let got = back.got.borrow();
            let last = got.last().expect("the retry's result");
            answers(&back, last, &what);
            if returned {
                assert!(last.repeats(), "{what}: the retry did not say so: {last:?}");
            }
            // What a cut left, the documented repair clears.
            back.pool.doctor(DoctorMode::Fix).unwrap();
            let report = back.pool.doctor(DoctorMode::Check).unwrap();
            assert!(
                report.is_clean(),
                "{what}: after the fix: {:?}",
                codes(&report)
            );
        }
        total += states.len();
        eprintln!(
            "pool power cut {}: {} calls, {} distinct states",
            case.name,
            rec.calls(),
            states.len()
        );
    }
    eprintln!("pool power cut total: {total} states");
}
