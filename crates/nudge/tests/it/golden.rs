//! On-disk formats: golden files, and compatibility with seed programs.

use chipset_nudge::{
    KindRegistry, ManualResolution, NewNudge, NudgeType, Nudges, Received, Reminders,
};
use chipset_store::{ReadOutcome, Timestamp};
use serde_json::Value;

use crate::support::DeliveryExt;
use crate::support::{NudgePaths, ReminderPaths, preset};
use crate::support::{ReminderKey, new_reminder};
use crate::support::{agent, manual_state};

/// The seed's example nudge, byte for byte as the seed document shows it.
const SEED_NUDGE: &str = r#"{
  "from": "witness-d3e4f",
  "type": "health_check",
  "message": "You have hooked work (gt-abc12). Are you working on it?",
  "timestamp": "2026-03-05T10:35:00Z",
  "requires_response": true
}"#;

fn read(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn sent_nudge_golden() {
    let (t, _clock) = manual_state();
    let nudges = Nudges::new(t.state.clone());
    let d = nudges
        .send(
            &agent("polecat-alpha"),
            &NewNudge::new(
                agent("witness-d3e4f"),
                NudgeType::HealthCheck,
                "You have hooked work (gt-abc12). Are you working on it?",
            )
            .requiring_response(),
        )
        .unwrap();
    let id = d.sent().unwrap().id.clone().unwrap();
    let text = read(&nudges.latest_path(&agent("polecat-alpha")));
    insta::assert_snapshot!("latest_json", text.replace(id.as_str(), "<ID>"));
}

#[test]
fn response_and_processed_golden() {
    let (t, _clock) = manual_state();
    let nudges = Nudges::new(t.state.clone());
    let (witness, polecat) = (agent("witness-d3e4f"), agent("polecat-alpha"));
    let sent = nudges
        .send(
            &polecat,
            &NewNudge::new(witness.clone(), NudgeType::HealthCheck, "ok?").requiring_response(),
        )
        .unwrap();
    let incoming = sent.sent().unwrap().clone();
    let r = nudges.respond(&polecat, &incoming, "Working.").unwrap();
    nudges.mark_processed(&polecat, &incoming).unwrap();
    let redact = |s: String| {
        s.replace(incoming.id.as_ref().unwrap().as_str(), "<NUDGE-ID>")
            .replace(r.nudge().id.as_ref().unwrap().as_str(), "<RESPONSE-ID>")
    };
    insta::assert_snapshot!(
        "response_record",
        redact(read(&nudges.response_path(&witness, &polecat)))
    );
    insta::assert_snapshot!(
        "witness_latest",
        redact(read(&nudges.latest_path(&witness)))
    );
    insta::assert_snapshot!(
        "processed_json",
        redact(read(&nudges.processed_path(&polecat)))
    );
}

#[test]
fn reminder_golden() {
    let (t, clock) = manual_state();
    let reminders = Reminders::new(t.state.clone(), KindRegistry::preset());
    let key = ReminderKey::new(preset::WRAP_SESSION, "session", "sess/01").unwrap();
    let mut new = new_reminder(
        "tenant-1",
        Some("project-1".into()),
        &key,
        "Wrap this session before leaving",
    );
    new.metadata.insert("persona".into(), "Lola".into());
    new.metadata.insert("delta_count".into(), 3.into());
    let opened = reminders.open(&new).unwrap();
    let id = opened.reminder().id.clone();
    let path = reminders.open_path(&key);
    assert!(
        path.ends_with("open/wrap_session/session/sess%2F01.json"),
        "{}",
        path.display()
    );
    insta::assert_snapshot!("reminder_open", read(&path).replace(id.as_str(), "<ID>"));
    clock.advance(std::time::Duration::from_secs(90));
    reminders
        .resolve(&id, ManualResolution::Ignored, Some("not needed".into()))
        .unwrap();
    assert!(!path.exists());
    insta::assert_snapshot!(
        "reminder_resolved",
        read(&reminders.history_path(&id)).replace(id.as_str(), "<ID>")
    );
}

/// A nudge written by a seed program (second-precision time, no id) is read.
#[test]
fn seed_json_is_read_verbatim() {
    let (t, _clock) = manual_state();
    let nudges = Nudges::new(t.state.clone());
    let polecat = agent("polecat-alpha");
    let path = nudges.latest_path(&polecat);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, SEED_NUDGE).unwrap();
    let ReadOutcome::Value(Received::New(n)) = nudges.receive(&polecat).unwrap() else {
        panic!("seed nudge not read as new")
    };
    assert_eq!(n.from, "witness-d3e4f");
    assert_eq!(n.kind, NudgeType::HealthCheck);
    assert_eq!(
        n.timestamp,
        "2026-03-05T10:35:00.000Z".parse::<Timestamp>().unwrap()
    );
    assert!(n.requires_response);
    assert_eq!(n.id, None);
    // Processed once, then seen.
    nudges.mark_processed(&polecat, &n).unwrap();
    assert!(matches!(
        nudges.receive(&polecat).unwrap(),
        ReadOutcome::Value(Received::Seen(_))
    ));
}

/// Unknown fields and unknown types from other writers are tolerated and kept.
#[test]
fn unknown_fields_and_types_are_tolerated() {
    let (t, _clock) = manual_state();
    let nudges = Nudges::new(t.state.clone());
    let polecat = agent("polecat-alpha");
    let path = nudges.latest_path(&polecat);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let text = SEED_NUDGE
        .replace("health_check", "health_escalation")
        .replace("\"from\"", "\"priority\": 3,\n  \"from\"");
    std::fs::write(&path, text).unwrap();
    let ReadOutcome::Value(n) = nudges.read_latest(&polecat).unwrap() else {
        panic!("not read")
    };
    assert_eq!(n.kind, NudgeType::Unknown("health_escalation".into()));
    // Marked processed: the unknown type is written back verbatim.
    nudges.mark_processed(&polecat, &n).unwrap();
    let v: Value = serde_json::from_str(&read(&nudges.processed_path(&polecat))).unwrap();
    assert_eq!(v["last"]["type"], "health_escalation");
}

/// What we write is what a seed reader expects: the five fields with their
/// types, sorted keys, and no `to` field.
#[test]
fn our_nudge_is_readable_by_seed_readers() {
    let (t, _clock) = manual_state();
    let nudges = Nudges::new(t.state.clone());
    let _ = nudges
        .send(
            &agent("polecat-alpha"),
            &NewNudge::new(agent("mayor"), NudgeType::Abort, "stop"),
        )
        .unwrap();
    let text = read(&nudges.latest_path(&agent("polecat-alpha")));
    let v: Value = serde_json::from_str(&text).unwrap();
    let obj = v.as_object().unwrap();
    assert!(obj["from"].is_string());
    assert_eq!(obj["type"], "abort");
    assert!(obj["message"].is_string());
    assert!(obj["requires_response"].is_boolean());
    // JavaScript's Date parses it; RFC 3339 with milliseconds and Z.
    assert_eq!(obj["timestamp"], "2026-03-05T10:35:00.123Z");
    assert!(!obj.contains_key("to"));
    let keys: Vec<_> = obj.keys().cloned().collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
    assert!(text.find("\"from\"").unwrap() < text.find("\"type\"").unwrap());
}

/// Regression: another program's abort whose extra `id` was not a valid id
/// (a number, a path) read as corrupt: the agent never saw the abort, and the
/// next send quarantined and replaced it.
#[test]
fn an_abort_with_an_unusable_extra_id_is_still_read_and_held() {
    let (t, _clock) = manual_state();
    let nudges = Nudges::new(t.state.clone());
    let polecat = agent("polecat-alpha");
    let path = nudges.latest_path(&polecat);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    for id in ["42", "\"a/b\"", "null"] {
        std::fs::write(
            &path,
            format!(
                r#"{{"from": "mayor", "type": "abort", "message": "stop", "timestamp": "2026-03-05T10:35:00Z", "requires_response": false, "id": {id}, "in_reply_to": {id}}}"#
            ),
        )
        .unwrap();
        let ReadOutcome::Value(Received::New(n)) = nudges.receive(&polecat).unwrap() else {
            panic!("abort with id {id} not read as new")
        };
        assert_eq!(
            (n.kind.clone(), n.id.clone(), n.in_reply_to.clone()),
            (NudgeType::Abort, None, None)
        );
        // A lesser nudge does not replace it.
        let delivery = nudges
            .send(
                &polecat,
                &NewNudge::new(agent("witness"), NudgeType::HealthCheck, "working?"),
            )
            .unwrap();
        assert!(delivery.sent().is_none(), "id {id}: {delivery:?}");
    }
}
