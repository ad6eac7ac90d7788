//! End-to-end simulation on a manual clock: a dispatcher, three workers and
//! a witness, one worker hanging, and the dispatcher and the witness
//! restarted before every single tick.

use std::collections::BTreeMap;

use chipset_hook::Pickup;
use chipset_loop::{
    AttemptOutcome, COMPLETION_REPORT, DispatchAction, Dispatcher, DispatcherConfig,
    HEALTH_ESCALATION, Witness, WitnessAction, WitnessConfig, WorkOutcome, Worker, WorkerConfig,
};

use crate::{agent, bead, secs, setup};

#[test]
fn every_bead_is_done_exactly_once_though_a_worker_hangs_and_the_loops_restart_every_tick() {
    let s = setup();
    let pool = ["w1", "w2", "w3"];
    let beads: Vec<String> = (1..=6).map(|i| format!("gt-{i:03}")).collect();
    {
        let d = Dispatcher::new(
            s.state(),
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
            let config = WorkerConfig::default().with_touch_every(secs(10));
            (w, Worker::new(s.state(), agent(w), agent("mayor"), config))
        })
        .collect();
    let witness_config = WitnessConfig::default()
        .with_stall_threshold(secs(300))
        .with_interval(secs(60))
        .with_grace(secs(0));

    let mut hung: Option<chipset_hook::Assignment> = None;
    let mut dispatched = Vec::new();
    let mut witnessed = Vec::new();
    let mut completed = 0;
    for _step in 0..400 {
        s.advance(20);
        // Every tick is taken by a freshly started dispatcher and witness:
        // all they know is on disk.
        let d = Dispatcher::new(
            s.state(),
            agent("mayor"),
            pool.map(agent),
            DispatcherConfig::default(),
        );
        let w = Witness::new(
            s.state(),
            agent("witness"),
            agent("mayor"),
            witness_config.clone(),
        );
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
                    Ok(format!("{} done", work.assignment().bead_id()))
                })
                .unwrap();
            if matches!(out, WorkOutcome::Completed { .. }) {
                completed += 1;
            }
        }
        let ledger = d.ledger().unwrap();
        if ledger.entries.iter().all(|e| e.is_done()) {
            break;
        }
    }

    let d = Dispatcher::new(
        s.state(),
        agent("mayor"),
        pool.map(agent),
        DispatcherConfig::default(),
    );
    let ledger = d.ledger().unwrap();
    assert_eq!(ledger.entries.len(), 6);
    assert!(ledger.corrupt.is_empty());
    for e in &ledger.entries {
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
    assert_eq!(s.sent(COMPLETION_REPORT).len(), 6);
    assert_eq!(
        dispatched
            .iter()
            .filter(|a| matches!(a, DispatchAction::Completed { .. }))
            .count(),
        6
    );

    // The hung worker's bead: escalated once, taken away, done by another.
    let hung = hung.expect("w2 picked up work");
    let entry = d.entry(hung.bead_id()).unwrap().unwrap();
    assert_eq!(entry.attempts[0].agent, agent("w2"));
    assert_eq!(entry.attempts[0].outcome, AttemptOutcome::Reassigned);
    assert_eq!(s.sent(HEALTH_ESCALATION).len(), 1);
    assert_eq!(
        witnessed
            .iter()
            .filter(|a| matches!(a, WitnessAction::Escalated { .. }))
            .count(),
        1
    );
    assert!(d.suspended().unwrap().suspended.contains_key(&agent("w2")));
    // It wakes up at last: its completion is refused.
    assert!(s.hooks.complete(&hung).unwrap_err().is_stale());
}
