//! `chipset remind ...`.

use crate::{Env, snap};

pub(crate) fn open<'a>(kind: &'a str, source_type: &'a str, source_id: &'a str) -> Vec<&'a str> {
    vec![
        "remind",
        "open",
        "--kind",
        kind,
        "--source-type",
        source_type,
        "--source-id",
        source_id,
        "--message",
        "Session ended without a wrap",
    ]
}

#[test]
fn open_list_snooze_resolve_in_text() {
    let mut env = Env::new();
    env.ok(&["remind", "list"]);
    let id = env.ok(&open("wrap_session", "session", "sess-1")).line();
    // Opening the same key again is idempotent: the same id, and a note.
    let again = env.ok(&open("wrap_session", "session", "sess-1"));
    assert_eq!(again.line(), id);
    assert!(again.stderr.contains("open for this key already"));
    let spec = env.ok(&open("spec_draft", "spec", "SPEC-029")).line();
    env.ok(&["remind", "list"]);
    env.ok(&["remind", "list", "--kind", "spec_draft"]);
    env.ok(&["remind", "snooze", &id, "--hours", "2"]);
    // Snoozed: not open, and opening its key is a no-op until it is due.
    env.ok(&["remind", "list"]);
    let snoozed = env.ok(&open("wrap_session", "session", "sess-1"));
    assert_eq!(snoozed.line(), id);
    // Resolving a snoozed reminder records it as a new, resolved reminder.
    let resolved = env.ok(&[
        "remind",
        "resolve",
        &id,
        "--resolution",
        "completed",
        "--note",
        "wrapped",
    ]);
    assert!(
        resolved.stderr.contains("it was snoozed"),
        "{}",
        resolved.stderr
    );
    env.ok(&["remind", "resolve", &spec, "--resolution", "ignored"]);
    env.ok(&["remind", "list"]);
    snap!("remind_text", env.take());
}

#[test]
fn open_list_snooze_resolve_in_json() {
    let mut env = Env::new();
    let mut args = vec!["--json"];
    args.extend(open("handoff_pending", "handoff", "h-7"));
    let opened = env.ok(&args).json();
    assert_eq!(opened["outcome"], "opened");
    assert_eq!(opened["reminder"]["tenant_id"], "default");
    assert_eq!(opened["reminder"]["severity"], "nudge");
    let id = opened["reminder"]["id"].as_str().unwrap().to_owned();
    assert_eq!(env.ok(&args).json()["outcome"], "existing");
    let list = env.ok(&["--json", "remind", "list"]).json();
    assert_eq!(list["reminders"][0]["id"], id.as_str());
    let snoozed = env
        .ok(&["--json", "remind", "snooze", &id, "--hours", "1"])
        .json();
    assert_eq!(snoozed["resolution"], "snoozed");
    assert!(snoozed["snooze_until"].is_string());
    let resolved = env
        .ok(&[
            "--json",
            "remind",
            "resolve",
            &id,
            "--resolution",
            "ignored",
        ])
        .json();
    assert_eq!(resolved["resolution"], "ignored");
    assert_eq!(resolved["metadata"]["reopened_from"], id.as_str());
    snap!("remind_json", env.take());
}

#[test]
fn refusals() {
    let mut env = Env::new();
    let id = env.ok(&open("adr_proposed", "adr", "ADR-0015")).line();
    env.fails(2, &open("gossip", "session", "s"));
    env.fails(2, &open("wrap_session", "spec", "s"));
    env.fails(2, &open("wrap_session", "session", ""));
    env.fails(2, &["remind", "list", "--kind", "gossip"]);
    env.fails(2, &["remind", "resolve", &id, "--resolution", "snoozed"]);
    env.fails(2, &["remind", "snooze", &id, "--hours", "0"]);
    env.fails(2, &["remind", "snooze", "../x", "--hours", "1"]);
    env.fails(
        1,
        &[
            "remind",
            "resolve",
            "1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab",
            "--resolution",
            "completed",
        ],
    );
    env.ok(&["remind", "resolve", &id, "--resolution", "completed"]);
    // Resolving again the same way is a retry: success, nothing changes.
    env.ok(&["remind", "resolve", &id, "--resolution", "completed"]);
    env.fails(1, &["remind", "resolve", &id, "--resolution", "ignored"]);
    env.fails(1, &["remind", "snooze", &id, "--hours", "1"]);
    snap!("remind_refusals", env.take());
}

/// A reminder file holding a value this version does not know (a newer
/// program's severity) is never listed as nothing: `list`, `history` and
/// `metrics` name it and fail, in text and in JSON, and leave it in place.
#[test]
fn a_reminder_this_version_cannot_read_fails_the_listing() {
    let mut env = Env::new();
    env.ok(&open("spec_draft", "spec", "s1"));
    let kept = env.ok(&open("adr_proposed", "adr", "a1")).line();
    let file = env.root().join("reminders/open/spec_draft/spec/s1.json");
    let text = std::fs::read_to_string(&file).unwrap();
    let newer = text.replace("\"severity\": \"nudge\"", "\"severity\": \"catastrophic\"");
    assert_ne!(newer, text, "the file names its severity");
    std::fs::write(&file, &newer).unwrap();
    // `metrics` counts what it read, and names what it could not.
    let metrics = ["remind", "metrics"];
    for command in [&["remind", "list"][..], &["remind", "history"], &metrics] {
        let run = env.fails(1, command);
        let shown = if command == metrics {
            "adr_proposed"
        } else {
            &kept
        };
        assert!(run.stdout.contains(shown), "{}", run.stdout);
        let named = "1 unreadable reminder file (`[ROOT]/reminders/open/spec_draft/spec/s1.json` \
                     holds reminder severity `catastrophic`";
        assert!(run.stderr.contains(named), "{}", run.stderr);
        assert!(
            run.stderr.contains("`chipset doctor` names them"),
            "{}",
            run.stderr
        );
        let json = env.fails(1, &[&["--json"][..], command].concat()).json();
        if command == metrics {
            assert_eq!(json["kinds"]["adr_proposed"]["open"], 1, "{json}");
        } else {
            assert_eq!(json["reminders"][0]["id"], kept.as_str(), "{json}");
        }
        let unreadable = json["unreadable"].as_array().unwrap();
        assert_eq!(unreadable.len(), 1, "{json}");
        let why = unreadable[0].as_str().unwrap();
        assert!(why.contains("severity `catastrophic`"), "{why}");
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), newer);
}
