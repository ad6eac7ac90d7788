//! The on-disk contract: golden files for a message and the manifest
//! events, and the seed's example message read as another program writes it.

use std::time::Duration;

use chipset_mail::{ArchiveOutcome, Error, Kind, Location, MailConfig, MailPriority};

use chipset_store::DoctorMode;

use crate::{agent, fixture, fixture_with, manifest_bytes, mid, notify, request, response, task};

/// Replaces every id in `text` with `<id-N>` in order of first appearance.
fn redact(text: &str, ids: &[&str]) -> String {
    let mut out = text.to_owned();
    for (i, id) in ids.iter().enumerate() {
        out = out.replace(id, &format!("<id-{}>", i + 1));
    }
    out
}

#[test]
fn message_file_golden() {
    let f = fixture();
    let q = f
        .mail
        .send(
            &request(
                "np-critic",
                "np-executor",
                "M005-S007-T0002",
                "filament-resource-policy-missing",
                "did you intend to delete FoobarService?\n\"quoted\", ümlaut",
            )
            .with_round(2)
            .with_priority(MailPriority::Urgent),
        )
        .unwrap();
    let r = f
        .mail
        .send(&response(
            "np-executor",
            "np-critic",
            &q.id,
            "filament-resource-policy-missing",
            "yes",
        ))
        .unwrap();
    let text = std::fs::read_to_string(f.mail.path_of(&r.id, &Location::Inbox(agent("np-critic"))))
        .unwrap();
    insta::assert_snapshot!(
        "response_file",
        redact(&text, &[r.id.as_str(), q.id.as_str()])
    );
    let text = std::fs::read_to_string(f.mail.path_of(&q.id, &Location::Archive)).unwrap();
    insta::assert_snapshot!("request_file", redact(&text, &[q.id.as_str()]));
}

#[test]
fn manifest_events_golden() {
    let f = fixture_with(MailConfig {
        in_flight_grace: Duration::ZERO,
        ..MailConfig::default()
    });
    let m = &f.mail;
    let q = m
        .send(&request("critic", "exec", "t1", "dead-code", "?").with_round(1))
        .unwrap();
    let a = m
        .send(&response("exec", "critic", &q.id, "dead-code", "!"))
        .unwrap();
    assert!(matches!(
        m.archive(&a.id).unwrap(),
        ArchiveOutcome::Archived(_)
    ));
    m.sweep_task_on_commit(&task("t1")).unwrap();
    let late = m
        .send(&notify("critic", "exec", "t1", "late", "").with_priority(MailPriority::Low))
        .unwrap();
    // A message that another program published without a `sent` event.
    let foreign = r#"{"id":"1772706900999-00000000-0000-4000-8000-000000000001","from":"np-critic","to":"exec","phase":"t2","round":0,"kind":"notify","subject":"x","body":"","expects_reply":false,"in_reply_to":null,"created_at":"2026-03-05T10:35:00.999Z"}"#;
    let dir = m.path_of(&late.id, &Location::Inbox(agent("exec")));
    std::fs::write(
        dir.with_file_name("1772706900999-00000000-0000-4000-8000-000000000001.json"),
        foreign,
    )
    .unwrap();
    m.doctor(DoctorMode::Fix).unwrap();
    let text = String::from_utf8(manifest_bytes(m)).unwrap();
    insta::assert_snapshot!(
        "manifest_events",
        redact(&text, &[q.id.as_str(), a.id.as_str(), late.id.as_str()])
    );
    // Every line reads back as a typed event.
    let manifest = m.read_manifest().unwrap();
    assert_eq!(crate::foreign(&manifest), 0);
    assert!(crate::manifest_log(m).bad_lines.is_empty());
    assert_eq!(manifest.len(), text.lines().count());
}

/// The seed's example message, with its elisions filled in, key order and all,
/// as a Node program following the seed writes it.
const SEED_EXAMPLE: &str = r#"{
  "id": "1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab",
  "from": "np-critic",
  "to": "np-executor",
  "phase": "M005-S007-T0002",
  "round": 2,
  "kind": "request",
  "subject": "filament-resource-policy-missing",
  "body": "...",
  "expects_reply": true,
  "in_reply_to": null,
  "created_at": "2026-05-08T09:15:00.000Z"
}"#;

/// The seed's answer to it: no `priority`, a bare `Z` time, and a field this crate does not know.
const SEED_RESPONSE: &str = r#"{"id":"1730000000999-11111111-2222-4333-8444-555555555555","from":"np-executor","to":"np-critic","phase":"M005-S007-T0002","round":2,"kind":"response","subject":"filament-resource-policy-missing","body":"fixed","expects_reply":false,"in_reply_to":"1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab","created_at":"2026-05-08T09:20:00Z","x_node_pid":4242}"#;

#[test]
fn seed_example_is_listed_archived_and_threaded() {
    let f = fixture();
    let m = &f.mail;
    let id = mid("1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab");
    let inbox_dir = m.dir().as_path().join("inbox/np-executor");
    std::fs::create_dir_all(&inbox_dir).unwrap();
    std::fs::write(inbox_dir.join(format!("{id}.json")), SEED_EXAMPLE).unwrap();

    let listed = m.inbox(&agent("np-executor")).unwrap();
    assert_eq!(listed.len(), 1);
    let msg = &listed[0];
    assert_eq!(msg.id, id);
    assert_eq!(msg.from, agent("np-critic"));
    assert_eq!(msg.to, agent("np-executor"));
    assert_eq!(msg.task(), &task("M005-S007-T0002"));
    assert_eq!(msg.round, Some(2));
    assert_eq!(msg.kind, Kind::Request);
    assert_eq!(msg.subject, "filament-resource-policy-missing");
    assert_eq!(msg.body, "...");
    assert!(msg.expects_reply);
    assert_eq!(msg.in_reply_to, None);
    assert_eq!(msg.created_at.to_string(), "2026-05-08T09:15:00.000Z");
    assert_eq!(msg.priority, MailPriority::Normal);
    assert_eq!(m.pending_replies(&task("M005-S007-T0002")).unwrap(), listed);
    assert!(matches!(
        m.archive(&id),
        Err(Error::ArchiveWithoutReply { .. })
    ));

    // The other program answers, straight into the critic's inbox and
    // without our reply index or manifest: the thread still finds it.
    let critic_dir = m.dir().as_path().join("inbox/np-critic");
    std::fs::create_dir_all(&critic_dir).unwrap();
    let resp = mid("1730000000999-11111111-2222-4333-8444-555555555555");
    std::fs::write(critic_dir.join(format!("{resp}.json")), SEED_RESPONSE).unwrap();
    let thread: Vec<_> = m
        .thread(&id)
        .unwrap()
        .iter()
        .map(|x| x.id.clone())
        .collect();
    assert_eq!(thread, [id.clone(), resp.clone()]);
    assert_eq!(m.thread(&resp).unwrap().len(), 2);

    // The doctor indexes the foreign reply and archives the answered request.
    let report = m.doctor(DoctorMode::Fix).unwrap();
    let codes: Vec<&str> = report.findings.iter().map(|f| f.code).collect();
    assert!(
        codes.contains(&"messaging-missing-reply-index"),
        "{codes:?}"
    );
    assert!(
        codes.contains(&"messaging-answered-request-in-inbox"),
        "{codes:?}"
    );
    assert!(m.has_reply(&id).unwrap());
    assert_eq!(m.locate(&id).unwrap(), Some(Location::Archive));
    assert!(
        m.pending_replies(&task("M005-S007-T0002"))
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        m.archive(&resp).unwrap(),
        ArchiveOutcome::Archived(_)
    ));
    assert_eq!(
        m.sweep_task_on_commit(&task("M005-S007-T0002"))
            .unwrap()
            .moved,
        2
    );
}

#[test]
fn our_file_has_the_seed_fields_and_types() {
    let f = fixture();
    let n = f.mail.send(&notify("a", "b", "t", "s", "x")).unwrap();
    let v: serde_json::Value = serde_json::from_slice(
        &std::fs::read(f.mail.path_of(&n.id, &Location::Inbox(agent("b")))).unwrap(),
    )
    .unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "body",
            "created_at",
            "expects_reply",
            "from",
            "id",
            "in_reply_to",
            "kind",
            "phase",
            "priority",
            "round",
            "subject",
            "to"
        ]
    );
    assert!(v["round"].is_null() && v["expects_reply"].is_boolean() && v["in_reply_to"].is_null());
    assert_eq!(v["created_at"], "2026-03-05T10:35:00.123Z");
}
