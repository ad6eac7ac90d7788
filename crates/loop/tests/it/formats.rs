//! Golden files for the loop's on-disk contract: mail bodies, the incident
//! record, the ledger entry, the agent book and the round checkpoint.

use chipset_hook::Pickup;
use chipset_loop::{
    CriticFinding, CriticReport, Dispatcher, DispatcherConfig, Phase, Rounds, RoundsConfig, Topic,
    Witness, WitnessConfig, WorkOutcome, Worker, WorkerConfig,
};
use chipset_mail::NewMessage;
use chipset_store::TaskId;

use crate::{Setup, agent, bead, body_json, secs, setup};

/// Replaces `{unix-ms}-{uuid}` ids (random) with `[id]`.
fn redact(text: &str) -> String {
    let b = text.as_bytes();
    let shape = "0000000000000-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";
    let fits = |i: usize| {
        b.len() >= i + shape.len()
            && shape.bytes().enumerate().all(|(k, c)| {
                let x = b[i + k];
                match c {
                    b'0' => x.is_ascii_digit(),
                    b'x' => x.is_ascii_hexdigit(),
                    _ => x == c,
                }
            })
    };
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        if fits(i) {
            out.push_str("[id]");
            i += shape.len();
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

fn file(s: &Setup, rel: &str) -> String {
    let path = s.tmp.state.root().join("loop").join(rel);
    redact(&String::from_utf8(std::fs::read(path).unwrap()).unwrap())
}

/// A phase displays as the name written on disk.
#[test]
fn a_phase_displays_as_its_name_on_disk() {
    let phases = [
        (Phase::Executor, "executor"),
        (Phase::Critic, "critic"),
        (Phase::Routing, "routing"),
        (Phase::Committing, "committing"),
        (Phase::Committed, "committed"),
        (Phase::Escalated, "escalated"),
    ];
    for (phase, name) in phases {
        assert_eq!(
            serde_json::to_value(phase).unwrap(),
            serde_json::json!(name)
        );
        assert_eq!(phase.to_string(), name);
    }
}

#[test]
fn redact_replaces_ids_only() {
    assert_eq!(
        redact("a 1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab b"),
        "a [id] b"
    );
    assert_eq!(redact("gt-abc12"), "gt-abc12");
}

#[test]
fn loop_files_and_messages() {
    let s = setup();
    let d = Dispatcher::new(
        s.state(),
        agent("mayor"),
        [agent("polecat-alpha"), agent("polecat-bravo")],
        DispatcherConfig::default(),
    );
    d.submit(bead("gt-abc12"), "Add README section").unwrap();
    d.tick().unwrap();
    let Pickup::Started(a) = s.hooks.pickup(&agent("polecat-alpha")).unwrap() else {
        panic!()
    };
    let assignment = s
        .inbox(&agent("polecat-alpha"))
        .into_iter()
        .find(|m| m.subject == Topic::WorkAssignment.to_string())
        .unwrap();
    assert_eq!(
        body_json(&assignment.body)["assignment"],
        serde_json::to_value(&a).unwrap()
    );
    insta::assert_snapshot!("work_assignment", assignment.body);

    let w = Witness::new(
        s.state(),
        agent("witness-d3e4f"),
        agent("mayor"),
        WitnessConfig {
            grace: secs(0),
            ..WitnessConfig::default()
        },
    );
    for _ in 0..3 {
        s.advance(301);
        w.tick().unwrap();
    }
    insta::assert_snapshot!(
        "incident_escalated",
        file(&s, "witness/incidents/polecat-alpha.json")
    );
    let escalation = &s.inbox(&agent("mayor"))[0];
    insta::assert_snapshot!("health_escalation", escalation.body);
    assert_eq!(body_json(&escalation.body)["type"], "health_escalation");
    assert_eq!(escalation.subject, Topic::HealthEscalation.to_string());

    d.tick().unwrap();
    insta::assert_snapshot!("agents", file(&s, "dispatcher/agents.json"));
    let worker = Worker::new(
        s.state(),
        agent("polecat-bravo"),
        agent("mayor"),
        WorkerConfig::default(),
    );
    s.advance(60);
    let WorkOutcome::Completed { report, .. } = worker
        .run_once(|_| Ok("README section added".to_owned()))
        .unwrap()
    else {
        panic!()
    };
    let report = s.mail.find(&report).unwrap().unwrap();
    insta::assert_snapshot!("completion_report", report.body);
    assert_eq!(body_json(&report.body)["type"], "completion_report");
    assert_eq!(report.subject, Topic::CompletionReport.to_string());
    s.advance(1);
    d.tick().unwrap();
    insta::assert_snapshot!("ledger_done", file(&s, "dispatcher/beads/gt-abc12.json"));
}

#[test]
fn round_checkpoint() {
    let s = setup();
    let task = TaskId::new("M005-S007-T0002").unwrap();
    let rounds = Rounds::new(s.state(), RoundsConfig::default());
    let mut round = rounds.open(&task).unwrap();
    round.executor_done().unwrap();
    s.advance(30);
    s.mail
        .send(
            &NewMessage::request(
                agent("np-critic"),
                agent("np-executor"),
                task.clone(),
                "dead-code",
                "did you intend to delete FoobarService?",
            )
            .with_round(1),
        )
        .unwrap();
    round
        .critic_done(CriticReport {
            verify_exit_code: 0,
            findings: vec![CriticFinding {
                category: "style".into(),
                detail: "long line in foo.rs".into(),
            }],
        })
        .unwrap();
    s.advance(1);
    round.route().unwrap();
    insta::assert_snapshot!("round_checkpoint", file(&s, "rounds/M005-S007-T0002.json"));
}
