//! `chipset bus ...`.

use std::fs;
use std::process::Stdio;
use std::thread;
use std::time::Duration;

use chipset_bus::{Bus, NewEvent, Priority};
use chipset_store::AgentId;

use crate::{Env, snap};

fn publish<'a>(source: &'a str, kind: &'a str, priority: &'a str) -> Vec<&'a str> {
    vec![
        "bus",
        "publish",
        "--to",
        "supervisor",
        "--source",
        source,
        "--kind",
        kind,
        "--priority",
        priority,
    ]
}

#[test]
fn publish_pending_ack_in_text() {
    let mut env = Env::new();
    env.ok(&["bus", "pending", "supervisor"]);
    env.ok(&publish("worker-1", "status", "low"));
    let mut critical = publish("worker-2", "needs-input", "critical");
    critical.extend(["--payload", r#"{"question": "which branch?"}"#]);
    let needs_input = env.ok(&critical).line();
    let mut mention = publish("chat-watcher", "chat-mention", "normal");
    mention.extend(["--dedup-key", "debug.chat#42"]);
    env.ok(&mention);
    // A duplicate is an outcome, not an error: nothing on stdout, a note on stderr.
    let dup = env.ok(&mention);
    assert!(dup.stdout.is_empty());
    assert!(
        dup.stderr.starts_with("chipset: note: duplicate"),
        "{}",
        dup.stderr
    );
    let pending = env.ok(&["bus", "pending", "supervisor"]);
    let kinds: Vec<&str> = pending
        .stdout
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().nth(3).unwrap())
        .collect();
    assert_eq!(kinds, ["needs-input", "chat-mention", "status"]);
    env.ok(&["bus", "ack", "supervisor", &needs_input]);
    env.ok(&["bus", "ack", "supervisor", &needs_input]);
    env.ok(&["bus", "pending", "supervisor"]);
    // Events are pending, so wait returns them at once.
    env.ok(&["bus", "wait", "supervisor", "--timeout", "30"]);
    // Nothing pending: wait times out quietly, exit 0.
    let waited = env.ok(&["bus", "wait", "idle", "--timeout", "0"]);
    assert!(waited.stdout.is_empty() && waited.stderr.is_empty());
    snap!("bus_text", env.take());
}

#[test]
fn publish_pending_ack_in_json() {
    let mut env = Env::new();
    let mut args = vec!["--json"];
    args.extend(publish("worker-2", "needs-input", "high"));
    args.extend(["--payload", "[1, 2]", "--dedup-key", "k"]);
    // The same view as MCP's `bus_publish`: tagged by outcome.
    let published = env.ok(&args).json();
    assert_eq!(published["outcome"], "delivered");
    let event = &published["event"];
    assert_eq!(event["priority"], "high");
    assert_eq!(event["payload"], serde_json::json!([1, 2]));
    let dup = env.ok(&args).json();
    assert_eq!(dup["outcome"], "duplicate");
    assert_eq!(dup["original"], event["id"]);
    let pending = env.ok(&["--json", "bus", "pending", "supervisor"]).json();
    assert_eq!(pending["events"][0]["id"], event["id"]);
    let id = event["id"].as_str().unwrap().to_owned();
    let acked = env.ok(&["--json", "bus", "ack", "supervisor", &id]).json();
    assert_eq!(acked["outcome"], "acked");
    let again = env.ok(&["--json", "bus", "ack", "supervisor", &id]).json();
    assert_eq!(again["outcome"], "already-acked");
    let timed_out = env
        .ok(&["--json", "bus", "wait", "supervisor", "--timeout", "0.05"])
        .json();
    assert_eq!(timed_out["timed_out"], true);
    assert_eq!(timed_out["events"], serde_json::json!([]));
    snap!("bus_json", env.take());
}

#[test]
fn wait_blocks_until_an_event_arrives() {
    let env = Env::new();
    let child = env
        .command(&["--json", "bus", "wait", "supervisor", "--timeout", "120"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The waiter creates the queue before it first reads it, so publishing
    // after the queue appears is never missed, whichever way the race goes.
    let queue = env.root().join("bus/supervisor/queue");
    for _ in 0..6000 {
        if queue.is_dir() {
            break;
        }
        thread::sleep(Duration::from_millis(10));
    }
    assert!(queue.is_dir(), "the waiter made the queue");
    let bus = Bus::new(env.state());
    let published = bus
        .publish(
            &AgentId::new("supervisor").unwrap(),
            &NewEvent::new("worker-1", "task-done").with_priority(Priority::High),
        )
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["timed_out"], false);
    assert_eq!(
        doc["events"][0]["id"].as_str(),
        Some(published.delivered().unwrap().id.as_str())
    );
}

#[test]
fn refusals() {
    let mut env = Env::new();
    env.ok(&publish("worker-1", "status", "low"));
    let mut bad_payload = publish("w", "k", "low");
    bad_payload.extend(["--payload", "{bad"]);
    env.fails(2, &bad_payload);
    env.fails(2, &publish("", "k", "low"));
    env.fails(2, &publish("w", "k", "urgent"));
    env.fails(
        2,
        &[
            "bus", "publish", "--to", "a/b", "--source", "w", "--kind", "k",
        ],
    );
    env.fails(2, &["bus", "ack", "supervisor", "not-an-id"]);
    env.fails(2, &["bus", "wait", "supervisor", "--timeout", "soon"]);
    env.fails(
        1,
        &[
            "bus",
            "ack",
            "supervisor",
            "1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab",
        ],
    );
    // Fail closed: an unreadable queue file is listed and fails the command.
    fs::write(
        env.root().join(
            "bus/supervisor/queue/2-1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab-w-k.json",
        ),
        "{",
    )
    .unwrap();
    let pending = env.step(&["bus", "pending", "supervisor"]);
    assert_eq!(pending.code, 1);
    assert!(
        pending.stdout.contains("status"),
        "the readable event is still listed"
    );
    let json = env.step(&["--json", "bus", "pending", "supervisor"]);
    assert_eq!(json.code, 1);
    assert_eq!(json.json()["unreadable"].as_array().unwrap().len(), 1);
    snap!("bus_refusals", env.take());
}
