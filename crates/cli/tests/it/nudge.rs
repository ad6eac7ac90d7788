//! `chipset nudge ...`.

use std::fs;

use crate::{Env, snap};

fn send<'a>(kind: &'a str, message: &'a str) -> Vec<&'a str> {
    vec![
        "nudge",
        "send",
        "--from",
        "witness",
        "--to",
        "polecat-alpha",
        "--type",
        kind,
        "--message",
        message,
    ]
}

#[test]
fn send_read_respond_in_text() {
    let mut env = Env::new();
    env.ok(&["nudge", "read", "polecat-alpha"]);
    let mut ask = send("health_check", "Are you working?");
    ask.push("--requires-response");
    let id = env.ok(&ask).line();
    let read = env.ok(&["nudge", "read", "polecat-alpha"]);
    assert!(read.stdout.contains("state     new"), "{}", read.stdout);
    assert!(read.stdout.contains(&id));
    // Read once, it is processed: the next read says seen.
    let again = env.ok(&["nudge", "read", "polecat-alpha"]);
    assert!(again.stdout.contains("state     seen"), "{}", again.stdout);
    env.ok(&[
        "nudge",
        "respond",
        "polecat-alpha",
        "--message",
        "Working on gt-abc12",
    ]);
    let answer = env.ok(&["nudge", "read", "witness"]);
    assert!(
        answer.stdout.contains("nudge_response"),
        "{}",
        answer.stdout
    );
    // Latest wins: an unprocessed nudge is replaced, with a note.
    env.ok(&send("sync_request", "sync"));
    let replaced = env.ok(&send("priority_change", "gt-abc12 is urgent"));
    assert!(
        replaced
            .stderr
            .contains("replaced an unprocessed sync_request")
    );
    snap!("nudge_text", env.take());
}

#[test]
fn send_read_respond_in_json() {
    let mut env = Env::new();
    let empty = env.ok(&["--json", "nudge", "read", "polecat-alpha"]).json();
    assert_eq!(empty["state"], "empty");
    let mut ask = vec!["--json"];
    ask.extend(send("health_check", "Are you working?"));
    ask.push("--requires-response");
    let sent = env.ok(&ask).json();
    assert_eq!(sent["outcome"], "delivered");
    assert_eq!(sent["nudge"]["requires_response"], true);
    let read = env.ok(&["--json", "nudge", "read", "polecat-alpha"]).json();
    assert_eq!(read["state"], "new");
    assert_eq!(read["nudge"]["id"], sent["nudge"]["id"]);
    let answered = env
        .ok(&["--json", "nudge", "respond", "polecat-alpha"])
        .json();
    assert_eq!(answered["delivery"], "delivered");
    assert_eq!(answered["response"]["in_reply_to"], sent["nudge"]["id"]);
    assert_eq!(answered["response"]["message"], "Acknowledged");
    snap!("nudge_json", env.take());
}

#[test]
fn refusals() {
    let mut env = Env::new();
    env.fails(1, &["nudge", "respond", "polecat-alpha"]);
    env.ok(&send("abort", "stop now"));
    // An unprocessed abort holds against anything less urgent.
    env.fails(1, &send("health_check", "are you there?"));
    env.fails(1, &{
        let mut a = vec!["--json"];
        a.extend(send("stall_warning", "stalled?"));
        a
    });
    env.ok(&send("abort", "really stop"));
    env.fails(
        2,
        &[
            "nudge",
            "send",
            "--from",
            "w",
            "--to",
            "a/b",
            "--type",
            "abort",
            "--message",
            "x",
        ],
    );
    env.fails(
        2,
        &[
            "nudge",
            "send",
            "--from",
            "w",
            "--to",
            "b",
            "--type",
            "",
            "--message",
            "x",
        ],
    );
    env.fails(
        2,
        &[
            "nudge",
            "send",
            "--from",
            "w",
            "--to",
            "b",
            "--message",
            "x",
        ],
    );
    env.fails(2, &["nudge", "read", ".."]);
    let latest = env.root().join("nudge/polecat-alpha/latest.json");
    fs::write(&latest, "{").unwrap();
    env.fails(1, &["nudge", "read", "polecat-alpha"]);
    env.fails(1, &["nudge", "respond", "polecat-alpha"]);
    // A send is what repairs it: the bad file is moved aside, with a note.
    let repaired = env.ok(&send("abort", "stop, again"));
    assert!(
        repaired.stderr.contains("moved aside"),
        "{}",
        repaired.stderr
    );
    env.ok(&["nudge", "read", "polecat-alpha"]);
    snap!("nudge_refusals", env.take());
}
