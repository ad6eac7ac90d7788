//! Status counts and the doctor for `loop/`.

use chipset_loop::{
    CriticReport, Dispatcher, DispatcherConfig, LoopState, RoundsConfig, WitnessConfig,
};
use chipset_store::{Action, Defect, DoctorMode, TaskId};
use chipset_testkit::unrepaired;

use crate::{Setup, agent, bead, secs, setup};

both!(
    counts_follow_the_loops,
    counts_tally_each_state_of_each_loop_file
);

fn counts_follow_the_loops(s: Setup) {
    let loops = s.loop_state();
    assert_eq!(loops.counts().unwrap(), Default::default());

    let d = Dispatcher::new(
        s.channels(),
        agent("mayor"),
        [agent("w1")],
        DispatcherConfig::default(),
    );
    d.submit(bead("b1"), "t").unwrap();
    d.submit(bead("b2"), "t").unwrap();
    d.tick().unwrap();
    let _ = s.hooks.pickup(&agent("w1")).unwrap();
    let w = s.witness(
        "witness",
        WitnessConfig {
            grace: secs(0),
            ..WitnessConfig::default()
        },
    );
    s.advance(301);
    w.tick().unwrap();
    let rounds = s.rounds(RoundsConfig::default());
    let mut r = rounds.open(&TaskId::new("T1").unwrap()).unwrap();
    r.executor_done().unwrap();
    r.critic_done(CriticReport::default()).unwrap();
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
    if s.pg.is_none() {
        assert!(loops.doctor(DoctorMode::Check).unwrap().is_clean());
    }
}

/// An assignment as the loop files hold it.
fn assignment(a: &str, b: &str) -> serde_json::Value {
    serde_json::json!({
        "agent": a, "generation": 1,
        "work": {"assigned_at": "2026-03-05T10:35:00.123Z", "bead_id": b, "title": "t"}
    })
}

fn counts_tally_each_state_of_each_loop_file(s: Setup) {
    use serde_json::json;
    let write = |rel: String, v: serde_json::Value| {
        s.put_loop_bytes(&rel, v.to_string().as_bytes());
    };
    let t = "2026-03-05T10:40:01.123Z";
    let mail = "1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab";
    let steps = [
        json!({"step": "checking", "health_check_at": t}),
        json!({"step": "warned", "health_check_at": t, "stall_warning_at": t}),
        json!({"step": "escalating", "health_check_at": t, "stall_warning_at": t, "escalated_at": t, "mail": mail}),
        json!({"step": "escalated", "health_check_at": t, "stall_warning_at": t, "escalated_at": t, "mail": mail}),
        json!({"step": "escalated", "health_check_at": t, "stall_warning_at": t, "escalated_at": t, "mail": mail}),
        json!({"step": "resolved", "alive_at": t, "evidence": "touched"}),
    ];
    for (n, step) in steps.into_iter().enumerate() {
        let a = format!("w{n}");
        let mut incident = json!({
            "assignment": assignment(&a, "b"), "last_activity": t, "opened_at": t,
            "witness": "witness", "updated_at": t
        });
        incident
            .as_object_mut()
            .unwrap()
            .extend(step.as_object().unwrap().clone());
        write(format!("witness/incidents/{a}.json"), incident);
    }
    let states = [
        json!({"state": "queued"}),
        json!({"state": "assigning", "agent": "w1", "mail": mail}),
        json!({"state": "assigned", "assignment": assignment("w2", "b2")}),
        json!({"state": "reassigning", "taken": assignment("w3", "b3")}),
        json!({"state": "reassigning", "taken": assignment("w4", "b4")}),
        json!({"state": "done", "assignment": assignment("w5", "b5"), "completed_at": t, "cleared": true}),
    ];
    for (n, state) in states.into_iter().enumerate() {
        let b = format!("b{n}");
        let mut entry = json!({
            "bead_id": b, "title": "t", "submitted_at": t, "attempts": [], "updated_at": t
        });
        entry
            .as_object_mut()
            .unwrap()
            .extend(state.as_object().unwrap().clone());
        write(format!("dispatcher/beads/{b}.json"), entry);
    }
    write(
        "dispatcher/agents.json".to_owned(),
        json!({"suspended": {
            "w3": {"bead_id": "b3", "since": t},
            "w4": {"bead_id": "b4", "since": t}
        }}),
    );
    for (task, phase) in [
        ("T1", "executor"),
        ("T2", "critic"),
        ("T3", "committed"),
        ("T4", "escalated"),
        ("T5", "escalated"),
    ] {
        write(
            format!("rounds/{task}.json"),
            json!({"task": task, "round": 1, "phase": phase, "history": [], "started_at": t, "updated_at": t}),
        );
    }

    let c = s.loop_state().counts().unwrap();
    assert_eq!(c.corrupt, 0, "{c:?}");
    // Checking, warned and escalating are open; escalated is counted apart;
    // resolved is neither.
    assert_eq!((c.open_incidents, c.escalated_incidents), (3, 2));
    assert_eq!((c.queued, c.assigned, c.reassigning, c.done), (1, 2, 2, 1));
    assert_eq!(c.suspended_agents, 2);
    assert_eq!(
        (c.rounds_active, c.rounds_committed, c.rounds_escalated),
        (2, 1, 2)
    );

    // An unreadable agent book is counted as corrupt, not as no suspensions.
    write("dispatcher/agents.json".to_owned(), json!(["w3"]));
    let c = s.loop_state().counts().unwrap();
    assert_eq!((c.suspended_agents, c.corrupt), (0, 1));
}

#[test]
fn the_doctor_reports_then_quarantines_corrupt_files_and_cuts_torn_logs() {
    let s = setup();
    let root = s.tmp.state.root().join("loop");
    let at = |rel: &str| s.tmp.at(&format!("loop/{rel}"));
    let state = &s.tmp.state;
    state
        .write_bytes(&at("witness/incidents/w1.json"), b"{ nope")
        .unwrap();
    state
        .write_bytes(&at("dispatcher/beads/b1.json"), b"[]")
        .unwrap();
    state
        .write_bytes(&at("rounds/T1.json"), b"{\"task\": 3}")
        .unwrap();
    state
        .write_bytes(&at("rounds/notes.txt"), b"hello")
        .unwrap();
    state
        .write_bytes(&at("worker/reports/w1.json"), b"{\"summary\": 1}")
        .unwrap();
    state
        .write_bytes(&at("dispatcher/log.jsonl"), b"{\"action\":\"x\"}\n{\"torn")
        .unwrap();
    let loops = LoopState::new(s.state());
    assert_eq!(loops.counts().unwrap().corrupt, 4);

    let check = loops.doctor(DoctorMode::Check).unwrap();
    assert_eq!(check.findings.len(), 6, "{check:?}");
    assert_eq!(unrepaired(&check), 5);
    assert!(check.findings.iter().any(|f| f.fault == Defect::Stray));
    assert!(check.findings.iter().any(|f| f.code == "loop-torn-log"));
    assert!(
        root.join("witness/incidents/w1.json").exists(),
        "check changes nothing"
    );

    let fix = loops.doctor(DoctorMode::Fix).unwrap();
    assert_eq!(unrepaired(&fix), 0, "{fix:?}");
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
    // A torn tail alone is cut (a write that never finished), not quarantined
    // as the bad lines of a log are.
    assert_eq!(
        std::fs::read(root.join("dispatcher/log.jsonl")).unwrap(),
        b"{\"action\":\"x\"}\n"
    );
    assert!(!root.join("dispatcher/.quarantine").exists());
    let again = loops.doctor(DoctorMode::Check).unwrap();
    assert_eq!(again.findings.len(), 1, "only the stray remains: {again:?}");
}

#[test]
fn the_doctor_counts_what_it_scanned_and_moves_bad_log_lines_and_a_log_that_is_a_directory() {
    let s = setup();
    let root = s.tmp.state.root().join("loop");
    let at = |rel: &str| s.tmp.at(&format!("loop/{rel}"));
    let state = &s.tmp.state;
    state
        .write_bytes(
            &at("witness/log.jsonl"),
            b"{\"a\":1}\nnot json\n{\"a\":2}\n",
        )
        .unwrap();
    state
        .write_bytes(&at("rounds/T1.json"), b"{\"task\": 3}")
        .unwrap();
    std::fs::create_dir_all(root.join("dispatcher/log.jsonl")).unwrap();
    let loops = LoopState::new(s.state());

    let check = loops.doctor(DoctorMode::Check).unwrap();
    // Two logs and one round file; the missing agent book is not counted.
    assert_eq!(check.scanned, 3, "{check:?}");
    let codes: Vec<_> = check.findings.iter().map(|f| f.code).collect();
    assert_eq!(codes, ["loop-corrupt", "loop-corrupt", "loop-bad-line"]);
    assert_eq!(unrepaired(&check), 3);
    assert!(root.join("dispatcher/log.jsonl").is_dir(), "check moved it");

    let fix = loops.doctor(DoctorMode::Fix).unwrap();
    assert_eq!(unrepaired(&fix), 0, "{fix:?}");
    for f in &fix.findings {
        assert!(
            matches!(&f.actions[..], [Action::Quarantined { to: Some(to), .. }] if to.exists()),
            "{f:?}"
        );
    }
    assert!(!root.join("dispatcher/log.jsonl").exists());
    assert_eq!(
        std::fs::read(root.join("witness/log.jsonl")).unwrap(),
        b"{\"a\":1}\n{\"a\":2}\n"
    );
    let again = loops.doctor(DoctorMode::Check).unwrap();
    assert!(again.is_clean(), "{again:?}");
    assert_eq!(again.scanned, 1, "the witness log is left");
}

/// On a server the loop doctor reads the rows: a corrupt record is
/// reported and changed by nothing but the fix, which moves it into
/// `quarantine/` beside it.
#[test]
fn the_doctor_moves_a_corrupt_row_aside_on_postgres() {
    let Some(s) = crate::setup_pg("the_doctor_moves_a_corrupt_row_aside_on_postgres") else {
        return;
    };
    s.put_loop_bytes("dispatcher/beads/b1.json", b"{ torn");
    s.put_loop_bytes("dispatcher/agents.json", b"[1");
    let check = s.loop_state().doctor(DoctorMode::Check).unwrap();
    assert_eq!(check.findings.len(), 2, "{check:?}");
    assert_eq!(s.loop_bytes("dispatcher/beads/b1.json").unwrap(), b"{ torn");
    let fix = s.loop_state().doctor(DoctorMode::Fix).unwrap();
    assert_eq!(fix.findings.len(), 2, "{fix:?}");
    assert!(fix.findings.iter().all(|f| f.is_fixed()), "{fix:?}");
    assert_eq!(s.loop_bytes("dispatcher/beads/b1.json"), None);
    let aside = s.loop_names("dispatcher/beads/quarantine");
    assert!(
        aside.len() == 1 && aside[0].ends_with("-b1.json"),
        "{aside:?}"
    );
    let again = s.loop_state().doctor(DoctorMode::Check).unwrap();
    assert!(again.is_clean(), "{again:?}");
}
