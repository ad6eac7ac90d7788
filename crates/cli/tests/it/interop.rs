//! A state root written by the command line is read by the libraries, and
//! the other way round.

use chipset_bus::{Bus, NewEvent, Priority};
use chipset_hook::BeadId;
use chipset_hook::{HookStatus, Hooks};
use chipset_mail::MessageId;
use chipset_mail::{Mail, NewMessage};
use chipset_nudge::{
    KindRegistry, NewNudge, NewReminder, NudgeType, Nudges, Received, ReminderFilter, ReminderId,
    Reminders, Resolution,
};
use chipset_store::{AgentId, ReadOutcome, TaskId};

use crate::Env;

fn agent(name: &str) -> AgentId {
    AgentId::new(name).unwrap()
}

#[test]
fn the_libraries_read_what_the_command_line_wrote() {
    let mut env = Env::new();
    env.ok(&[
        "hook",
        "assign",
        "polecat-alpha",
        "--bead",
        "gt-abc12",
        "--title",
        "README",
    ]);
    env.ok(&["hook", "activate", "polecat-alpha"]);
    env.ok(&[
        "nudge",
        "send",
        "--from",
        "witness",
        "--to",
        "polecat-alpha",
        "--type",
        "health_check",
        "--message",
        "Are you working?",
        "--requires-response",
    ]);
    let request = env
        .ok(&[
            "mail",
            "send",
            "--from",
            "np-critic",
            "--to",
            "np-executor",
            "--kind",
            "request",
            "--subject",
            "dead-code",
            "--body",
            "why?",
            "--task",
            "T1",
        ])
        .line();
    let event = env
        .ok(&[
            "bus",
            "publish",
            "--to",
            "supervisor",
            "--source",
            "worker",
            "--kind",
            "needs-input",
            "--priority",
            "critical",
            "--payload",
            r#"{"n": 1}"#,
        ])
        .line();
    let reminder = env
        .ok(&[
            "remind",
            "open",
            "--kind",
            "spec_draft",
            "--source-type",
            "spec",
            "--source-id",
            "SPEC-1",
            "--message",
            "finish the spec",
        ])
        .line();

    let state = env.state();
    let held = Hooks::new(state.clone())
        .current(&agent("polecat-alpha"))
        .unwrap()
        .unwrap();
    assert_eq!(held.work.bead_id.as_str(), "gt-abc12");
    assert_eq!(
        HookStatus::of(
            &Hooks::new(state.clone())
                .read(&agent("polecat-alpha"))
                .unwrap()
        ),
        Some(HookStatus::Active)
    );
    // The library can go on where the command line left off.
    Hooks::new(state.clone()).complete(&held).unwrap();

    let ReadOutcome::Value(Received::New(nudge)) = Nudges::new(state.clone())
        .receive(&agent("polecat-alpha"))
        .unwrap()
    else {
        panic!("expected a new nudge");
    };
    assert_eq!(
        (nudge.kind, nudge.requires_response),
        (NudgeType::HealthCheck, true)
    );

    let pending = Mail::new(state.clone())
        .pending_replies(&TaskId::new("T1").unwrap())
        .unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].id.as_str(), request);

    let queued = Bus::new(state.clone())
        .pending(&agent("supervisor"))
        .unwrap();
    assert_eq!(queued.events[0].id.as_str(), event);
    assert_eq!(queued.events[0].payload["n"], 1);

    let reminders = Reminders::new(state, KindRegistry::preset());
    let open = reminders.list(&ReminderFilter::default()).unwrap();
    assert_eq!(open.items[0].id.as_str(), reminder);
}

#[test]
fn the_command_line_reads_what_the_libraries_wrote() {
    let mut env = Env::new();
    let state = env.state();
    Hooks::new(state.clone())
        .assign(
            &agent("polecat-alpha"),
            BeadId::new("gt-abc12").unwrap(),
            "README",
            None,
        )
        .unwrap();
    let _ = Nudges::new(state.clone())
        .send(
            &agent("polecat-alpha"),
            &NewNudge::new(agent("witness"), NudgeType::Abort, "stop"),
        )
        .unwrap();
    let request = Mail::new(state.clone())
        .send(&NewMessage::request(
            agent("np-critic"),
            agent("np-executor"),
            TaskId::new("T1").unwrap(),
            "dead-code",
            "why?",
        ))
        .unwrap();
    let published = Bus::new(state.clone())
        .publish(
            &agent("supervisor"),
            &NewEvent::new("worker", "task-done").with_priority(Priority::High),
        )
        .unwrap();
    let reminders = Reminders::new(state.clone(), KindRegistry::preset());
    let opened = reminders
        .open(&NewReminder {
            tenant_id: "default".into(),
            kind: "wip_unsealed".into(),
            source_type: "wip_state".into(),
            source_id: "wip-9".into(),
            message: "seal it".into(),
            ..NewReminder::default()
        })
        .unwrap();

    let hook = env.ok(&["--json", "hook", "show", "polecat-alpha"]).json();
    assert_eq!(hook["status"], "pending");
    env.ok(&["hook", "activate", "polecat-alpha"]);
    assert_eq!(
        HookStatus::of(
            &Hooks::new(state.clone())
                .read(&agent("polecat-alpha"))
                .unwrap()
        ),
        Some(HookStatus::Active)
    );

    let read = env.ok(&["--json", "nudge", "read", "polecat-alpha"]).json();
    assert_eq!(
        (read["state"].as_str(), read["nudge"]["type"].as_str()),
        (Some("new"), Some("abort"))
    );
    assert!(matches!(
        Nudges::new(state.clone())
            .receive(&agent("polecat-alpha"))
            .unwrap(),
        ReadOutcome::Value(Received::Seen(_))
    ));

    let inbox = env.ok(&["--json", "mail", "inbox", "np-executor"]).json();
    assert_eq!(inbox[0]["id"], request.id.as_str());
    env.ok(&[
        "mail",
        "send",
        "--from",
        "np-executor",
        "--to",
        "np-critic",
        "--kind",
        "response",
        "--subject",
        "dead-code",
        "--body",
        "unused",
        "--in-reply-to",
        request.id.as_str(),
    ]);
    let mail = Mail::new(state.clone());
    assert!(
        mail.has_reply(&MessageId::new(request.id.as_str()).unwrap())
            .unwrap()
    );
    assert!(
        mail.pending_replies(&TaskId::new("T1").unwrap())
            .unwrap()
            .is_empty()
    );

    let id = published.delivered().unwrap().id.to_string();
    let pending = env.ok(&["--json", "bus", "pending", "supervisor"]).json();
    assert_eq!(pending["events"][0]["id"], id.as_str());
    env.ok(&["bus", "ack", "supervisor", &id]);
    assert!(
        Bus::new(state)
            .pending(&agent("supervisor"))
            .unwrap()
            .is_empty()
    );

    let rid = opened.reminder().id.to_string();
    let list = env
        .ok(&["--json", "remind", "list", "--kind", "wip_unsealed"])
        .json();
    assert_eq!(list["reminders"][0]["id"], rid.as_str());
    env.ok(&["remind", "resolve", &rid, "--resolution", "completed"]);
    let resolved = reminders
        .get(&ReminderId::new(rid).unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(resolved.resolution, Some(Resolution::Completed));
}
