//! `chipset agent ...`: the directory from a shell.

use std::fs;

use crate::{Env, snap};

#[test]
fn register_list_and_whois_in_text() {
    let mut env = Env::new();
    env.ok(&["agent", "list"]);
    env.ok(&[
        "agent",
        "register",
        "polecat-alpha",
        "--roles",
        "reviewer,builder",
        "--program",
        "claude-code",
        "--model",
        "opus-4",
        "--host",
        "box-1",
        "--task",
        "gt-abc12",
    ]);
    env.ok(&["agent", "register", "polecat-alpha", "--model", "opus-4"]);
    env.ok(&["agent", "register", "mayor", "--roles", "dispatcher"]);
    env.ok(&[
        "agent",
        "register",
        "polecat-alpha",
        "--task",
        "",
        "--note",
        "back at 2",
    ]);
    env.ok(&["agent", "whois", "polecat-alpha"]);
    env.ok(&["agent", "list"]);
    env.ok(&["agent", "list", "--role", "reviewer"]);
    env.ok(&["agent", "list", "--seen-within", "10m"]);
    snap!("agent_text", env.take());
}

#[test]
fn json_views() {
    let mut env = Env::new();
    let reg = env
        .ok(&[
            "--json", "agent", "register", "a", "--roles", "qa", "--model", "m",
        ])
        .json();
    assert_eq!(reg["name"], "a");
    assert_eq!(reg["roles"], serde_json::json!(["qa"]));
    assert!(reg.get("last_seen").is_none());
    let who = env.ok(&["--json", "agent", "whois", "a"]).json();
    assert_eq!(who["model"], "m");
    assert_eq!(who["last_seen"]["source"], "registered");
    env.ok(&["agent", "register", "b"]);
    let list = env.ok(&["--json", "agent", "list", "--role", "qa"]).json();
    assert_eq!(list["total"], 1);
    assert_eq!(list["agents"][0]["name"], "a");
    assert_eq!(list["unreadable"], serde_json::json!([]));
    snap!("agent_json", env.take());
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let mut env = Env::new();
    env.ok(&["agent", "register", "a", "--model", "m"]);
    env.fails(2, &["agent", "register", "a", "--roles", "../etc"]);
    env.fails(2, &["agent", "register", "a", "--roles", "Reviewer"]);
    // Over the note's bound (2048 bytes): checked outside the transcript.
    let before = crate::tree(env.root());
    let long = env.run(&["agent", "register", "a", "--note", &"x".repeat(2049)]);
    assert_eq!(long.code, 2, "{long:?}");
    assert!(long.stderr.contains("at most 2048"), "{}", long.stderr);
    assert_eq!(before, crate::tree(env.root()));
    env.fails(2, &["agent", "register", "a", "--host", "tab\there"]);
    env.fails(2, &["agent", "register", "../a"]);
    env.fails(2, &["agent", "list", "--role", "a/b"]);
    env.fails(1, &["agent", "whois", "ghost"]);
    fs::write(env.root().join("agents/a.json"), "{").unwrap();
    env.fails(1, &["agent", "whois", "a"]);
    env.fails(1, &["agent", "register", "a", "--model", "n"]);
    let listed = env.step(&["agent", "list"]);
    assert_eq!(listed.code, 1, "a listing with a corrupt profile fails");
    assert!(
        listed.stderr.contains("1 unreadable profile"),
        "{}",
        listed.stderr
    );
    snap!("agent_refusals", env.take());
}

#[test]
fn mcp_start_registers_the_agent() {
    let env = Env::new();
    let missing = env.run(&["agent", "whois", "a"]);
    assert_eq!(missing.code, 1);
    // A server whose stdin is closed at once starts, registers and ends.
    let out = env
        .command(&["mcp", "--agent", "a"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.stderr.is_empty() || !String::from_utf8_lossy(&out.stderr).contains("warning"));
    let who = env.run(&["--json", "agent", "whois", "a"]).json();
    assert_eq!(who["name"], "a");
    // A corrupt profile does not stop the server from starting.
    fs::write(env.root().join("agents/a.json"), "{").unwrap();
    let out = env
        .command(&["mcp", "--agent", "a"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("warning"),
        "{out:?}"
    );
}

#[test]
fn mcp_tools_whois_and_list() {
    use crate::mcp::{call, cli_error, ok, refusal, refused, runtime, stdio};
    use serde_json::json;

    let mut env = Env::new();
    env.ok(&["agent", "register", "b", "--roles", "qa", "--model", "m"]);
    env.ok(&["agent", "register", "c", "--roles", "dev"]);
    runtime().block_on(async {
        // The server registers its own agent on start.
        let c = stdio(&env, "a").await;
        let me = call(&c, "agent_whois", json!({})).await;
        assert_eq!(ok(&me)["name"], "a");
        assert_eq!(ok(&me)["last_seen"]["source"], "registered");
        let b = call(&c, "agent_whois", json!({"name": "b"})).await;
        assert_eq!(ok(&b)["model"], "m");
        let all = call(&c, "agent_list", json!({"limit": 2})).await;
        assert_eq!(ok(&all)["total"], 3);
        assert_eq!(ok(&all)["agents"].as_array().unwrap().len(), 2);
        let qa = call(
            &c,
            "agent_list",
            json!({"role": "qa", "seen_within_seconds": 600}),
        )
        .await;
        assert_eq!(ok(&qa)["total"], 1);
        assert_eq!(ok(&qa)["agents"][0]["name"], "b");
        // Bad input: the same refusal as the command line.
        let r = call(&c, "agent_whois", json!({"name": "ghost"})).await;
        assert_eq!(refused(&r), cli_error(&env, &["agent", "whois", "ghost"]).1);
        let r = call(&c, "agent_list", json!({"role": "QA"})).await;
        assert!(refused(&r).contains("role"), "{r:?}");
        let r = call(&c, "agent_list", json!({"colour": "red"})).await;
        assert!(refused(&r).contains("colour"), "{r:?}");
        // A corrupt profile is reported beside what could be read.
        fs::write(env.root().join("agents/c.json"), "{").unwrap();
        let r = call(&c, "agent_list", json!({})).await;
        assert!(refused(&r).contains("1 unreadable profile"), "{r:?}");
        let doc = refusal(&r);
        assert_eq!(doc["kind"], "corrupt", "{doc}");
        assert!(doc["total"].as_u64().is_some_and(|n| n > 0), "{doc}");
        c.cancel().await.unwrap();
    });
}

/// Durations take days wherever they are asked for, and `search --limit 0`
/// (which listed nothing and said "no matches") is a usage error.
#[test]
fn durations_take_days_and_a_search_limit_is_one_or_more() {
    let mut env = Env::new();
    env.ok(&["agent", "register", "ann"]);
    let seen = env
        .ok(&["--json", "agent", "list", "--seen-within", "7d"])
        .json();
    assert_eq!(seen["total"], 1, "{seen}");
    env.ok(&[
        "hook",
        "assign",
        "ann",
        "--bead",
        "b-1",
        "--title",
        "fix the parser",
    ]);
    let zero = env.fails(2, &["search", "--limit", "0", "parser"]);
    assert!(zero.stderr.contains("give 1 or more"), "{}", zero.stderr);
    let one = env
        .ok(&["--json", "search", "--limit", "1", "parser"])
        .json();
    assert_eq!(one["hits"].as_array().map(Vec::len), Some(1), "{one}");
}
