//! End-to-end simulation on a manual clock: a dispatcher, three workers and
//! a witness, one worker hanging, and the dispatcher and the witness
//! restarted before every single tick.

use std::collections::BTreeMap;

use chipset_hook::Pickup;
use chipset_loop::{
    AttemptOutcome, DispatchAction, Dispatcher, DispatcherConfig, Topic, WitnessAction,
    WitnessConfig, WorkOutcome, Worker, WorkerConfig,
};

use crate::{Setup, agent, bead, secs, setup_no_sync, setup_pg};
use chipset_store::{Classify, ErrorKind};

both!(every_bead_is_done_exactly_once_though_a_worker_hangs_and_the_loops_restart_every_tick);

fn every_bead_is_done_exactly_once_though_a_worker_hangs_and_the_loops_restart_every_tick(
    s: Setup,
) {
    let pool = ["w1", "w2", "w3"];
    let beads: Vec<String> = (1..=6).map(|i| format!("gt-{i:03}")).collect();
    {
        let d = Dispatcher::new(
            s.channels(),
            agent("mayor"),
            pool.map(agent),
            DispatcherConfig::default(),
        );
        for b in &beads {
            d.submit(bead(b), format!("work item {b}")).unwrap();
        }
    }
    let workers: BTreeMap<&str, Worker> = ["w1", "w3"]
        .into_iter()
        .map(|w| {
            let config = WorkerConfig {
                touch_every: secs(10),
                ..WorkerConfig::default()
            };
            (
                w,
                Worker::new(s.channels(), agent(w), agent("mayor"), config),
            )
        })
        .collect();
    let witness_config = WitnessConfig {
        stall_threshold: secs(300),
        nudge_interval: secs(60),
        grace: secs(0),
        ..WitnessConfig::default()
    };

    let mut hung: Option<chipset_hook::Assignment> = None;
    let mut dispatched = Vec::new();
    let mut witnessed = Vec::new();
    let mut completed = 0;
    for _step in 0..400 {
        s.advance(20);
        // Every tick is taken by a freshly started dispatcher and witness:
        // all they know is on disk.
        let d = Dispatcher::new(
            s.channels(),
            agent("mayor"),
            pool.map(agent),
            DispatcherConfig::default(),
        );
        let w = s.witness("witness", witness_config.clone());
        dispatched.extend(d.tick().unwrap());
        witnessed.extend(w.tick().unwrap());
        dispatched.extend(d.tick().unwrap());

        // w2 picks up its first work and hangs forever.
        if hung.is_none()
            && let Pickup::Started(a) = s.hooks.pickup(&agent("w2")).unwrap()
        {
            hung = Some(a);
        }
        for worker in workers.values() {
            let out = worker
                .run_once(|work| {
                    for _ in 0..3 {
                        s.advance(5);
                        work.checkpoint()?;
                    }
                    Ok(format!("{} done", work.assignment().work.bead_id))
                })
                .unwrap();
            if matches!(out, WorkOutcome::Completed { .. }) {
                completed += 1;
            }
        }
        let ledger = d.ledger().unwrap();
        if ledger.items.iter().all(|e| e.is_done()) {
            break;
        }
    }

    let d = Dispatcher::new(
        s.channels(),
        agent("mayor"),
        pool.map(agent),
        DispatcherConfig::default(),
    );
    let ledger = d.ledger().unwrap();
    assert_eq!(ledger.items.len(), 6);
    assert!(ledger.corrupt.is_empty());
    for e in &ledger.items {
        assert!(e.is_done(), "{e:?}");
        let wins = e
            .attempts
            .iter()
            .filter(|t| t.outcome == AttemptOutcome::Completed)
            .count();
        assert_eq!(wins, 1, "{}", e.bead_id);
        assert_ne!(e.completed_by(), Some(&agent("w2")));
    }
    assert_eq!(completed, 6);
    assert_eq!(s.sent(&Topic::CompletionReport.to_string()).len(), 6);
    assert_eq!(
        dispatched
            .iter()
            .filter(|a| matches!(a, DispatchAction::Completed { .. }))
            .count(),
        6
    );

    // The hung worker's bead: escalated once, taken away, done by another.
    let hung = hung.expect("w2 picked up work");
    let entry = d.entry(&hung.work.bead_id).unwrap().unwrap();
    assert_eq!(entry.attempts[0].agent, agent("w2"));
    assert_eq!(entry.attempts[0].outcome, AttemptOutcome::Reassigned);
    assert_eq!(s.sent(&Topic::HealthEscalation.to_string()).len(), 1);
    assert_eq!(
        witnessed
            .iter()
            .filter(|a| matches!(a, WitnessAction::Escalated { .. }))
            .count(),
        1
    );
    assert!(s.loop_json("dispatcher/agents.json")["suspended"]["w2"].is_object());
    // It wakes up at last: its completion is refused.
    assert_eq!(
        s.hooks.complete(&hung).unwrap_err().kind(),
        ErrorKind::Stale
    );
}

/// What one worker does at one step of a random schedule.
#[derive(Debug, Clone, Copy)]
enum Move {
    /// Picks up and works (with checkpoints), completing the work.
    Work,
    /// Picks up its work and hangs from then on.
    Hang,
    /// Does nothing this step.
    Rest,
}

fn arb_move() -> impl proptest::strategy::Strategy<Value = Move> {
    use proptest::prelude::*;
    prop_oneof![4 => Just(Move::Work), 1 => Just(Move::Hang), 3 => Just(Move::Rest)]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(16))]

    /// Random schedules of workers working, hanging and resting, with the
    /// dispatcher and the witness restarted at random: no bead is ever
    /// completed twice, and once the live workers keep working, every bead
    /// is done.
    #[test]
    fn random_schedules_complete_every_bead_exactly_once(steps in arb_steps(), survivor in 0usize..3) {
        random_schedule(setup_no_sync(), &steps, survivor)?;
    }
}

proptest::proptest! {
    // A fresh schema per case: fewer cases than on a directory.
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(6))]

    /// As `random_schedules_complete_every_bead_exactly_once`, with every
    /// channel and the loops' records on PostgreSQL (`CHIPSET_TEST_PG`).
    #[test]
    fn random_schedules_complete_every_bead_exactly_once_on_postgres(steps in arb_steps(), survivor in 0usize..3) {
        if let Some(s) = setup_pg("random_schedules_complete_every_bead_exactly_once_on_postgres") {
            random_schedule(s, &steps, survivor)?;
        }
    }
}

/// A schedule: each step the three workers' moves, the seconds that pass,
/// and whether the dispatcher and the witness restart.
type Steps = Vec<(Vec<Move>, u64, bool)>;

fn arb_steps() -> impl proptest::strategy::Strategy<Value = Steps> {
    proptest::collection::vec(
        (
            proptest::collection::vec(arb_move(), 3),
            10u64..200,
            proptest::bool::ANY,
        ),
        5..30,
    )
}

/// Runs one random schedule on `s`.
fn random_schedule(
    s: Setup,
    steps: &Steps,
    survivor: usize,
) -> Result<(), proptest::test_runner::TestCaseError> {
    {
        let pool = ["w1", "w2", "w3"];
        let new_dispatcher = || {
            Dispatcher::new(
                s.channels(),
                agent("mayor"),
                pool.map(agent),
                DispatcherConfig::default(),
            )
        };
        let witness_config = WitnessConfig {
            stall_threshold: secs(300),
            nudge_interval: secs(60),
            grace: secs(0),
            ..WitnessConfig::default()
        };
        let new_witness = || s.witness("witness", witness_config.clone());
        {
            let d = new_dispatcher();
            for i in 1..=4 {
                d.submit(bead(&format!("b{i}")), "t").unwrap();
            }
        }
        let workers: Vec<Worker> = pool
            .iter()
            .map(|w| {
                Worker::new(
                    s.channels(),
                    agent(w),
                    agent("mayor"),
                    WorkerConfig {
                        touch_every: secs(10),
                        ..WorkerConfig::default()
                    },
                )
            })
            .collect();
        let mut hung = [false; 3];
        let (mut d, mut w) = (new_dispatcher(), new_witness());
        let act = |i: usize, hung: &mut [bool; 3], m: Move| {
            if hung[i] {
                return;
            }
            match m {
                Move::Work => {
                    let _ = workers[i]
                        .run_once(|work| {
                            s.advance(5);
                            work.checkpoint()?;
                            Ok("done".to_owned())
                        })
                        .or_else(|e| {
                            if e.kind() == ErrorKind::Stale {
                                Ok(WorkOutcome::Idle)
                            } else {
                                Err(e)
                            }
                        })
                        .unwrap();
                }
                Move::Hang => {
                    if i != survivor && s.hooks.pickup(&agent(pool[i])).unwrap().work().is_some() {
                        hung[i] = true;
                    }
                }
                Move::Rest => {}
            }
        };
        for (moves, advance, restart) in steps {
            s.advance(*advance);
            if *restart {
                d = new_dispatcher();
                w = new_witness();
            }
            d.tick().unwrap();
            w.tick().unwrap();
            for (i, m) in moves.iter().enumerate() {
                act(i, &mut hung, *m);
            }
        }
        // Settle: the live workers keep working until everything is done; the
        // operator reinstates live workers the witness found resting too long.
        for _ in 0..200 {
            for (i, name) in pool.iter().enumerate() {
                if !hung[i] {
                    d.reinstate(&agent(name)).unwrap();
                }
            }
            s.advance(60);
            d.tick().unwrap();
            w.tick().unwrap();
            for i in 0..3 {
                act(i, &mut hung, Move::Work);
            }
            if d.ledger().unwrap().items.iter().all(|e| e.is_done()) {
                break;
            }
        }
        let ledger = d.ledger().unwrap();
        let mut completions = 0;
        for e in &ledger.items {
            proptest::prop_assert!(e.is_done(), "{:?}", e);
            let wins = e
                .attempts
                .iter()
                .filter(|t| t.outcome == AttemptOutcome::Completed)
                .count();
            proptest::prop_assert_eq!(wins, 1);
            completions += wins;
        }
        proptest::prop_assert_eq!(completions, 4);
        proptest::prop_assert_eq!(s.sent(&Topic::CompletionReport.to_string()).len(), 4);
        // Every hung worker lost its work through an escalation (a resting one may too).
        for (i, name) in pool.iter().enumerate() {
            if hung[i] {
                let taken = ledger.items.iter().any(|e| {
                    e.attempts.iter().any(|t| {
                        t.agent.as_str() == *name && t.outcome == AttemptOutcome::Reassigned
                    })
                });
                proptest::prop_assert!(taken, "{} hung and kept its work", name);
            }
        }
        let escalations = s.sent(&Topic::HealthEscalation.to_string()).len();
        let reassigned: usize = ledger
            .items
            .iter()
            .map(|e| {
                e.attempts
                    .iter()
                    .filter(|t| t.outcome == AttemptOutcome::Reassigned)
                    .count()
            })
            .sum();
        // An escalation whose agent completed just in time is accepted as a completion.
        proptest::prop_assert!(
            escalations >= reassigned,
            "{} escalations, {} reassigned",
            escalations,
            reassigned
        );
    }
    Ok(())
}
