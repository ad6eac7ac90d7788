//! `chipset brief` and `chipset wait`.

use std::process::Stdio;
use std::thread;
use std::time::Duration;

use serde_json::Value;

use crate::{Env, snap};

/// The commands that make one kind of work for `alpha`.
fn work(kind: &str) -> Vec<&'static str> {
    match kind {
        "hook" => vec![
            "hook",
            "assign",
            "alpha",
            "--bead",
            "gt-1",
            "--title",
            "Fix login",
            "--by",
            "mayor",
        ],
        "nudge" => vec![
            "nudge",
            "send",
            "--from",
            "witness",
            "--to",
            "alpha",
            "--type",
            "health_check",
            "--message",
            "alive?",
            "--requires-response",
        ],
        "mail" => vec![
            "mail",
            "send",
            "--from",
            "mayor",
            "--to",
            "alpha",
            "--kind",
            "request",
            "--subject",
            "review-plan",
            "--body",
            "please",
            "--task",
            "t1",
            "--priority",
            "urgent",
        ],
        "bus" => vec![
            "bus",
            "publish",
            "--to",
            "alpha",
            "--source",
            "mayor",
            "--kind",
            "work-assigned",
            "--priority",
            "high",
        ],
        "reminder" => vec![
            "remind",
            "open",
            "--kind",
            "wrap_session",
            "--source-type",
            "session",
            "--source-id",
            "s1",
            "--message",
            "Wrap this session",
            "--agent",
            "alpha",
        ],
        _ => unreachable!(),
    }
}

const KINDS: [&str; 5] = ["hook", "nudge", "mail", "bus", "reminder"];

#[test]
fn brief_prints_nothing_for_an_idle_agent() {
    let mut env = Env::new();
    let idle = env.ok(&["brief", "alpha"]);
    assert_eq!(idle.stdout, "");
    assert_eq!(idle.stderr, "");
    // Work for someone else, and a reminder for no one, are not alpha's.
    env.ok(&[
        "bus", "publish", "--to", "beta", "--source", "s", "--kind", "k",
    ]);
    env.ok(&[
        "remind",
        "open",
        "--kind",
        "wrap_session",
        "--source-type",
        "session",
        "--source-id",
        "s9",
        "--message",
        "unaddressed",
    ]);
    assert_eq!(env.ok(&["brief", "alpha"]).stdout, "");
    let doc = env.ok(&["--json", "brief", "alpha"]).json();
    assert_eq!(doc["entries"], serde_json::json!([]));
    snap!("brief_idle", env.take());
}

#[test]
fn brief_prints_one_line_per_kind_of_work() {
    let mut env = Env::new();
    for kind in KINDS {
        env.run(&work(kind));
        let brief = env.ok(&["brief", "alpha"]);
        let last = brief.stdout.lines().last().unwrap().to_owned();
        assert!(last.starts_with(&format!("{kind} (1): ")), "{last}");
    }
    env.run(&work("bus"));
    let brief = env.ok(&["brief", "alpha"]);
    assert_eq!(brief.stdout.lines().count(), 5);
    assert!(brief.stdout.contains("bus (2): "), "{}", brief.stdout);
    let doc = env.ok(&["--json", "brief", "alpha"]).json();
    let kinds: Vec<&str> = doc["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, KINDS);
    snap!("brief_text", env.take());
}

#[test]
fn brief_and_wait_refusals() {
    let mut env = Env::new();
    env.fails(2, &["brief", "../alpha"]);
    env.fails(2, &["wait", "alpha", "--timeout", "soon"]);
    env.fails(2, &["wait", "a/b"]);
    env.fails(2, &["brief"]);
    // A mistyped root is not an idle agent.
    let missing = Env::new();
    std::fs::remove_dir(missing.root()).unwrap();
    let run = missing.run(&["brief", "alpha"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("does not exist"), "{}", run.stderr);
    let run = missing.run(&["wait", "alpha"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(!missing.root().exists());
    snap!("attention_refusals", env.take());
}

#[test]
fn wait_times_out_quietly() {
    let mut env = Env::new();
    let run = env.ok(&["wait", "alpha", "--timeout", "0.05"]);
    assert!(run.stdout.is_empty() && run.stderr.is_empty());
    let doc = env
        .ok(&["--json", "wait", "alpha", "--timeout", "0"])
        .json();
    assert_eq!(doc["timed_out"], true);
    assert_eq!(doc["entries"], serde_json::json!([]));
    // Work there already: wait returns it at once.
    env.run(&work("hook"));
    let run = env.ok(&["wait", "alpha", "--timeout", "30"]);
    assert!(
        run.stdout.starts_with("hook (1): pending work: Fix login"),
        "{}",
        run.stdout
    );
    snap!("wait_text", env.take());
}

/// `chipset wait` returns on each channel when another process makes work.
#[test]
fn wait_returns_on_each_channel() {
    for kind in KINDS {
        let env = Env::new();
        let child = env
            .command(&["--json", "wait", "alpha", "--timeout", "120"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Whether the work comes before the wait starts or during it, the
        // wait returns it (the waiter watches before it first reads).
        thread::sleep(Duration::from_millis(200));
        let made = env.run(&work(kind));
        assert_eq!(made.code, 0, "{made:?}");
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{kind}");
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["timed_out"], false, "{kind}");
        assert_eq!(doc["entries"][0]["kind"], kind);
    }
}

/// Ready pool work shows in the brief of an agent whose hook is free (the
/// three most urgent), a wait wakes when it is posted, and a claim puts it
/// on the hook instead.
#[test]
fn brief_and_wait_show_claimable_pool_work() {
    let mut env = Env::new();
    let child = env
        .command(&["--json", "wait", "alpha", "--timeout", "120"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    thread::sleep(Duration::from_millis(200));
    let post = |env: &mut Env, id: &str, priority: &str, title: &str| {
        env.ok(&[
            "work",
            "post",
            "--agent",
            "lead",
            "--id",
            id,
            "--priority",
            priority,
            title,
        ]);
    };
    post(&mut env, "schema", "1", "Design the schema");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["timed_out"], false);
    assert_eq!(doc["entries"][0]["kind"], "pool");
    assert_eq!(doc["entries"][0]["top"]["id"], "schema");
    post(&mut env, "api", "2", "Write the API");
    post(&mut env, "docs", "3", "Document it");
    post(&mut env, "ci", "0", "Fix CI");
    env.take();
    assert_eq!(
        env.ok(&["brief", "alpha"]).stdout,
        "pool (4): ready to claim: P0 Fix CI [ci]\n  P1 Design the schema [schema]\n  P2 Write the API [api]\n"
    );
    let doc = env.ok(&["--json", "brief", "alpha"]).json();
    assert_eq!(doc["entries"][0]["count"], 4);
    assert_eq!(doc["entries"][0]["more"].as_array().unwrap().len(), 2);
    env.ok(&["work", "claim", "--agent", "alpha"]);
    let brief = env.ok(&["brief", "alpha"]).stdout;
    assert!(
        brief.starts_with("hook (1): pending work: Fix CI"),
        "{brief}"
    );
    assert!(!brief.contains("pool"), "{brief}");
}
