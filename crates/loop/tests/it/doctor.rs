//! Status counts and the doctor for `loop/`.

use chipset_loop::{
    CriticReport, Dispatcher, DispatcherConfig, LoopState, Rounds, RoundsConfig, Witness,
    WitnessConfig,
};
use chipset_store::{Action, Defect, DoctorMode, TaskId};

use crate::{agent, bead, secs, setup};

#[test]
fn counts_follow_the_loops() {
    let s = setup();
    let loops = LoopState::new(s.state());
    assert_eq!(loops.counts().unwrap(), Default::default());

    let d = Dispatcher::new(
        s.state(),
        agent("mayor"),
        [agent("w1")],
        DispatcherConfig::default(),
    );
    d.submit(bead("b1"), "t").unwrap();
    d.submit(bead("b2"), "t").unwrap();
    d.tick().unwrap();
    let _ = s.hooks.pickup(&agent("w1")).unwrap();
    let w = Witness::new(
        s.state(),
        agent("witness"),
        agent("mayor"),
        WitnessConfig::default().with_grace(secs(0)),
    );
    s.advance(301);
    w.tick().unwrap();
    let rounds = Rounds::new(s.mail.clone(), RoundsConfig::default());
    let mut r = rounds.open(&TaskId::new("T1").unwrap()).unwrap();
    r.executor_done().unwrap();
    r.critic_done(CriticReport::clean()).unwrap();
    r.route().unwrap();
    r.committed().unwrap();
    rounds.open(&TaskId::new("T2").unwrap()).unwrap();

    let c = loops.counts().unwrap();
    assert_eq!((c.queued, c.assigned, c.done), (1, 1, 0));
    assert_eq!((c.open_incidents, c.escalated_incidents), (1, 0));
    assert_eq!(
        (c.rounds_active, c.rounds_committed, c.rounds_escalated),
        (1, 1, 0)
    );
    assert_eq!(c.corrupt, 0);
    assert!(loops.doctor(DoctorMode::Check).unwrap().is_clean());
}

#[test]
fn the_doctor_reports_then_quarantines_corrupt_files_and_cuts_torn_logs() {
    let s = setup();
    let root = s.tmp.state.channel_path(chipset_loop::LOOP_CHANNEL);
    let state = &s.tmp.state;
    state
        .write_bytes(&root.join("witness/incidents/w1.json"), b"{ nope")
        .unwrap();
    state
        .write_bytes(&root.join("dispatcher/beads/b1.json"), b"[]")
        .unwrap();
    state
        .write_bytes(&root.join("rounds/T1.json"), b"{\"task\": 3}")
        .unwrap();
    state
        .write_bytes(&root.join("rounds/notes.txt"), b"hello")
        .unwrap();
    state
        .write_bytes(
            &root.join("dispatcher/log.jsonl"),
            b"{\"action\":\"x\"}\n{\"torn",
        )
        .unwrap();
    let loops = LoopState::new(s.state());
    assert_eq!(loops.counts().unwrap().corrupt, 3);

    let check = loops.doctor(DoctorMode::Check).unwrap();
    assert_eq!(check.findings.len(), 5, "{check:?}");
    assert_eq!(check.unrepaired(), 4);
    assert!(check.findings.iter().any(|f| f.fault == Defect::Stray));
    assert!(check.findings.iter().any(|f| f.code == "loop-torn-log"));
    assert!(
        root.join("witness/incidents/w1.json").exists(),
        "check changes nothing"
    );

    let fix = loops.doctor(DoctorMode::Fix).unwrap();
    assert_eq!(fix.unrepaired(), 0, "{fix:?}");
    for f in &fix.findings {
        if f.code == "loop-corrupt" {
            let [Action::Quarantined { to: Some(to), .. }] = &f.actions[..] else {
                panic!("{f:?}");
            };
            assert!(to.exists());
            assert!(!f.path.as_ref().unwrap().exists());
        }
        assert!(!f.to_string().is_empty());
    }
    assert_eq!(loops.counts().unwrap().corrupt, 0);
    let again = loops.doctor(DoctorMode::Check).unwrap();
    assert_eq!(again.findings.len(), 1, "only the stray remains: {again:?}");
}
