//! The commands that cover the rest of the libraries: `bus start`,
//! `presence`, `control`, `nag`; `remind clear`, `history`, `metrics`;
//! `completions`.

use crate::{Env, snap};

fn publish<'a>(to: &'a str, kind: &'a str, priority: &'a str) -> Vec<&'a str> {
    vec![
        "bus",
        "publish",
        "--to",
        to,
        "--source",
        "worker-1",
        "--kind",
        kind,
        "--priority",
        priority,
    ]
}

#[test]
fn bus_start_presence_control_nag() {
    let mut env = Env::new();
    let absent = env.ok(&["bus", "presence", "alpha"]);
    assert_eq!(absent.stdout, "alpha: absent\n");
    env.ok(&publish("alpha", "status", "low"));
    env.ok(&publish("alpha", "needs-input", "critical"));
    // Restart semantics: pending in processing order, then presence.
    let start = env.ok(&["bus", "start", "alpha"]);
    let kinds: Vec<&str> = start
        .stdout
        .lines()
        .skip(2)
        .map(|l| l.split_whitespace().nth(3).unwrap())
        .collect();
    assert_eq!(kinds, ["needs-input", "status"]);
    assert!(
        start.stdout.starts_with("started alpha (pid "),
        "{}",
        start.stdout
    );
    assert!(
        env.ok(&["bus", "presence", "alpha"])
            .stdout
            .contains(": live")
    );
    let doc = env.ok(&["--json", "bus", "presence", "alpha"]).json();
    assert_eq!(doc["state"], "live");
    // The presence is the caller's (this test's), never the command's own,
    // which exits at once; or the agent's, given as --pid.
    assert_eq!(doc["presence"]["pid"], std::process::id());
    let started = env
        .ok(&["--json", "bus", "start", "alpha", "--pid", "4242"])
        .json();
    assert_eq!(started["presence"]["pid"], 4242);
    assert_eq!(started["previous"]["state"], "live");
    assert_eq!(started["events"].as_array().unwrap().len(), 2);
    // The control inbox: register twice is once; unregister removes.
    let args = ["--kind", "chat", "--target", ".nbs/chat/debug.chat"];
    let mut register = vec!["bus", "control", "register", "alpha"];
    register.extend(args);
    env.ok(&register);
    env.ok(&register);
    env.ok(&[
        "bus", "control", "register", "alpha", "--kind", "queue", "--target", "beta",
    ]);
    let registry = env.ok(&{
        let mut r = vec!["--json"];
        r.extend(&register);
        r
    });
    assert_eq!(registry.json()["resources"].as_array().unwrap().len(), 2);
    let mut unregister = vec!["bus", "control", "unregister", "alpha"];
    unregister.extend(args);
    let after = env.ok(&unregister);
    assert!(!after.stdout.contains("debug.chat"), "{}", after.stdout);
    // Nag, by the default schedule: a normal event is due at every poll, a
    // critical one every 30 s after it was published (not yet), and at a
    // natural pause only timed rules fire.
    env.ok(&publish("alpha", "mention", "normal"));
    let nag = env.ok(&["bus", "nag", "alpha", "--poll"]);
    assert!(nag.stdout.contains("mention"), "{}", nag.stdout);
    assert!(!nag.stdout.contains("needs-input"), "{}", nag.stdout);
    let pause = env.ok(&["bus", "nag", "alpha"]);
    assert_eq!(pause.stdout, "nothing due for a reminder for alpha\n");
    let doc = env.ok(&["--json", "bus", "nag", "alpha", "--poll"]).json();
    assert_eq!(doc["events"][0]["kind"], "mention");
    snap!("bus_coverage", env.take());
}

#[test]
fn bus_coverage_refusals() {
    let mut env = Env::new();
    env.fails(2, &["bus", "start", "../x"]);
    env.fails(2, &["bus", "presence", "a/b"]);
    env.fails(
        2,
        &["bus", "control", "register", "alpha", "--kind", "chat"],
    );
    env.fails(2, &["bus", "control", "forget", "alpha"]);
    env.fails(
        2,
        &[
            "bus", "control", "register", "alpha", "--kind", "", "--target", "x",
        ],
    );
    env.fails(2, &["bus", "nag", "alpha", "--poll=maybe"]);
    // Fail closed: an unreadable presence file is reported and fails.
    std::fs::create_dir_all(env.root().join("bus/alpha")).unwrap();
    std::fs::write(env.root().join("bus/alpha/presence.json"), "{").unwrap();
    env.fails(1, &["bus", "presence", "alpha"]);
    snap!("bus_coverage_refusals", env.take());
}

fn open<'a>(kind: &'a str, source_type: &'a str, source_id: &'a str) -> Vec<&'a str> {
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
        "obligation",
    ]
}

#[test]
fn remind_clear_history_metrics() {
    let mut env = Env::new();
    env.ok(&["remind", "history"]);
    env.ok(&["remind", "metrics"]);
    env.ok(&open("wrap_session", "session", "s1"));
    let spec = env.ok(&open("spec_draft", "spec", "SPEC-1")).line();
    let clear = [
        "remind",
        "clear",
        "--kind",
        "wrap_session",
        "--source-type",
        "session",
        "--source-id",
        "s1",
        "--verb",
        "prism_wrap",
    ];
    assert!(env.ok(&clear).stdout.starts_with("cleared "));
    // Clearing again finds nothing open: not an error.
    assert!(env.ok(&clear).stdout.starts_with("nothing open"));
    env.ok(&["remind", "resolve", &spec, "--resolution", "ignored"]);
    env.ok(&open("adr_proposed", "adr", "ADR-7"));
    let history = env.ok(&["remind", "history"]);
    assert_eq!(history.stdout.lines().count(), 4, "{}", history.stdout);
    assert!(history.stdout.contains("auto_cleared"));
    let only = env
        .ok(&["--json", "remind", "history", "--kind", "spec_draft"])
        .json();
    assert_eq!(only["reminders"].as_array().unwrap().len(), 1);
    let metrics = env.ok(&["--json", "remind", "metrics"]).json();
    assert_eq!(
        metrics["kinds"]["wrap_session"]["resolved"]["auto_cleared"],
        1
    );
    assert_eq!(metrics["kinds"]["spec_draft"]["resolved"]["ignored"], 1);
    assert_eq!(metrics["kinds"]["adr_proposed"]["open"], 1);
    env.ok(&["remind", "metrics"]);
    env.ok(&["remind", "metrics", "--since", "2099-01-01T00:00:00Z"]);
    snap!("remind_coverage", env.take());
}

#[test]
fn remind_coverage_refusals() {
    let mut env = Env::new();
    env.ok(&open("wrap_session", "session", "s1"));
    let clear = |verb: &'static str, kind: &'static str| {
        vec![
            "remind",
            "clear",
            "--kind",
            kind,
            "--source-type",
            "session",
            "--source-id",
            "s1",
            "--verb",
            verb,
        ]
    };
    // Not this kind's resolving verb, and an unknown kind: refused, nothing changes.
    env.fails(2, &clear("prism_seal", "wrap_session"));
    env.fails(2, &clear("prism_wrap", "no_such_kind"));
    env.fails(2, &["remind", "history", "--kind", "no_such_kind"]);
    env.fails(2, &["remind", "metrics", "--since", "yesterday"]);
    snap!("remind_coverage_refusals", env.take());
}

#[test]
fn completions_for_each_shell() {
    let mut env = Env::new();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let run = env.run(&["completions", shell]);
        assert_eq!(run.code, 0, "{shell}: {}", run.stderr);
        assert!(run.stdout.contains("witness"), "{shell}");
        assert!(run.stdout.contains("brief"), "{shell}");
    }
    let bash = env.run(&["completions", "bash"]);
    let head: String = bash
        .stdout
        .lines()
        .take(3)
        .map(|l| format!("{l}\n"))
        .collect();
    env.record(
        &["completions", "bash", "|", "head", "-3"],
        &crate::Run {
            stdout: head,
            ..bash
        },
    );
    env.fails(2, &["completions", "tcsh"]);
    env.fails(2, &["completions"]);
    snap!("completions", env.take());
}
