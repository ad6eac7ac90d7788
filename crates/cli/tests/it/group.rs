//! Group mail from a shell and over MCP (issue 28): `--to a,b`, `@list`,
//! `@all`, `--expects-reply all|any`, lists kept with `agent list-add`,
//! and the refusals that send nothing.

use serde_json::json;

use crate::Env;
use crate::mcp::{call, ok, refused, runtime, stdio};

fn team(env: &mut Env) {
    for a in ["lead", "ann", "bob", "cid"] {
        env.ok(&["agent", "register", a]);
    }
}

fn send(to: &str, kind: &str, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "mail",
        "send",
        "--from",
        "lead",
        "--to",
        to,
        "--kind",
        kind,
        "--task",
        "t1",
        "--subject",
        "ship-it",
        "--body",
        "ok?",
    ]
    .map(str::to_owned)
    .to_vec();
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    args
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn copies(doc: &serde_json::Value) -> Vec<(String, String)> {
    doc["copies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_owned(),
                c["to"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_list_request_with_any_is_answered_by_one() {
    let mut env = Env::new();
    team(&mut env);
    let added = env.ok(&["agent", "list-add", "reviewers", "ann", "bob", "lead"]);
    assert!(
        added.stdout.contains("members: ann, bob, lead"),
        "{}",
        added.stdout
    );
    let again = env
        .ok(&["--json", "agent", "list-add", "@reviewers", "ann"])
        .json();
    assert_eq!(
        again["changed"], 0,
        "adding again, as `@list`, changes nothing"
    );
    // A profile that cannot be read may be on the list: named, never
    // dropped from the members in silence; the change itself succeeded.
    std::fs::write(env.root().join("agents/ann.json"), "{").unwrap();
    let removed = env.ok(&["agent", "list-remove", "reviewers", "lead"]);
    assert!(
        removed.stdout.contains("members: bob\n"),
        "{}",
        removed.stdout
    );
    let note = "note: 1 unreadable profile file (`[ROOT]/agents/ann.json` is corrupt";
    assert!(removed.stderr.contains(note), "{}", removed.stderr);
    assert!(
        removed.stderr.contains("; each may be on @reviewers too\n"),
        "{}",
        removed.stderr
    );
    let doc = env
        .ok(&["--json", "agent", "list-add", "reviewers", "lead"])
        .json();
    assert_eq!(doc["members"], json!(["bob", "lead"]));
    assert_eq!(doc["unreadable"].as_array().unwrap().len(), 1, "{doc}");
    std::fs::remove_file(env.root().join("agents/ann.json")).unwrap();
    env.ok(&["agent", "register", "ann"]);
    env.ok(&["agent", "list-add", "reviewers", "ann"]);
    let args = send("@reviewers", "request", &["--expects-reply", "any"]);
    let sent = env
        .ok(&[&["--json"], strs(&args).as_slice()].concat())
        .json();
    assert_eq!(sent["sender_skipped"], true);
    assert_eq!(sent["expects_reply"], "any");
    let copies = copies(&sent);
    let to: Vec<&str> = copies.iter().map(|(_, to)| to.as_str()).collect();
    assert_eq!(to, ["ann", "bob"]);
    let pending = env.ok(&["--json", "mail", "pending", "t1"]).json();
    assert_eq!(pending.as_array().map_or(0, Vec::len), 2, "{pending}");
    env.ok(&[
        "mail",
        "send",
        "--from",
        "bob",
        "--to",
        "lead",
        "--kind",
        "response",
        "--in-reply-to",
        &copies[1].0,
        "--subject",
        "ship-it",
        "--body",
        "yes",
    ]);
    let pending = env.ok(&["--json", "mail", "pending", "t1"]).json();
    assert_eq!(pending.as_array().map_or(0, Vec::len), 0, "{pending}");
    env.ok(&["mail", "archive", &copies[0].0]);
    env.ok(&["agent", "list-remove", "reviewers", "bob"]);
    let list = env
        .ok(&["--json", "agent", "list", "--role", "reviewers"])
        .json();
    assert_eq!(list["total"], 2);
}

#[test]
fn all_and_names_need_every_answer_and_a_retry_sends_nothing_twice() {
    let mut env = Env::new();
    team(&mut env);
    let id = "1772706900123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab";
    let args = send("@all", "request", &["--id", id]);
    let first = env.ok(&strs(&args));
    let lines: Vec<&str> = first.stdout.lines().collect();
    assert_eq!(lines[0], id, "the group id comes first");
    assert_eq!(lines.len(), 4, "{}", first.stdout);
    let again = env.ok(&strs(&args));
    assert_eq!(
        again.stdout, first.stdout,
        "a retry returns the first delivery"
    );
    for who in ["ann", "bob", "cid"] {
        let inbox = env.ok(&["--json", "mail", "inbox", who]).json();
        assert_eq!(inbox.as_array().unwrap().len(), 1, "{who}: {inbox}");
    }
    let names = send("ann,bob", "notify", &[]);
    let sent = env
        .ok(&[&["--json"], strs(&names).as_slice()].concat())
        .json();
    assert_eq!(sent["sender_skipped"], false);
    assert!(sent.get("expects_reply").is_none());
    assert_eq!(copies(&sent).len(), 2);
}

#[test]
fn bad_recipients_are_refused_and_send_nothing() {
    let mut env = Env::new();
    env.ok(&["agent", "register", "lead"]);
    let alone = env.fails(2, &strs(&send("@all", "notify", &[])));
    assert!(
        alone.stderr.contains("no recipient but the sender `lead`"),
        "{}",
        alone.stderr
    );
    team(&mut env);
    for (to, says) in [
        ("ann,zed", "unknown agent `zed`"),
        ("@../x", "not a list name"),
        ("@a/b", "not a list name"),
        ("@qa", "list `@qa` is empty"),
        ("ann,,bob", "empty item"),
    ] {
        let run = env.fails(2, &strs(&send(to, "notify", &[])));
        assert!(run.stderr.contains(says), "{to}: {}", run.stderr);
    }
    let response = env.fails(
        2,
        &strs(&send("ann,bob", "response", &["--in-reply-to", "1-x"])),
    );
    assert!(
        response.stderr.contains("cannot answer"),
        "{}",
        response.stderr
    );
    let notify_any = env.fails(
        2,
        &strs(&send("ann,bob", "notify", &["--expects-reply", "any"])),
    );
    assert!(
        notify_any.stderr.contains("request only"),
        "{}",
        notify_any.stderr
    );
    for all in ["all", "@all"] {
        let reserved = env.fails(2, &["agent", "list-add", all, "ann"]);
        assert!(reserved.stderr.contains("reserved"), "{}", reserved.stderr);
    }
    let twice = env.fails(2, &["agent", "list-add", "@@qa", "ann"]);
    assert!(twice.stderr.contains("invalid role"), "{}", twice.stderr);
    let stranger = env.fails(1, &["agent", "list-add", "qa", "ann", "zed"]);
    assert!(
        stranger.stderr.contains("`zed` is not registered"),
        "{}",
        stranger.stderr
    );
    let qa = env.ok(&["--json", "agent", "list", "--role", "qa"]).json();
    assert_eq!(qa["total"], 0, "nothing was added");
    assert!(!env.root().join("mail/inbox").exists(), "nothing was sent");
}

/// An agent registered under a name mail cannot address (the seed allows
/// only ASCII letters, digits, `_` and `-`) gets no copy of `@all` or of a
/// list, and the send says so, instead of failing for the whole team;
/// named on its own, its name is refused as before.
#[test]
fn lists_leave_out_names_mail_cannot_address() {
    let mut env = Env::new();
    team(&mut env);
    env.ok(&["agent", "register", "Bob.Smith", "--roles", "qa"]);
    env.ok(&["agent", "list-add", "qa", "ann"]);
    let all = env.ok(&strs(&send("@all", "notify", &[])));
    assert!(
        all.stdout
            .contains("left out Bob.Smith: mail cannot address this name"),
        "{}",
        all.stdout
    );
    let qa = env
        .ok(&[&["--json"], strs(&send("@qa", "notify", &[])).as_slice()].concat())
        .json();
    assert_eq!(qa["left_out"], json!(["Bob.Smith"]));
    assert_eq!(copies(&qa).len(), 1, "{qa}");
    for who in ["ann", "bob", "cid"] {
        let inbox = env.ok(&["--json", "mail", "inbox", who]).json();
        let want = if who == "ann" { 2 } else { 1 };
        assert_eq!(inbox.as_array().unwrap().len(), want, "{who}: {inbox}");
    }
    let named = env.fails(2, &strs(&send("ann,Bob.Smith", "notify", &[])));
    assert!(
        named.stderr.contains("invalid to agent `Bob.Smith`"),
        "{}",
        named.stderr
    );
    let plain = env
        .ok(&[
            "--json",
            "mail",
            "send",
            "--from",
            "lead",
            "--to",
            "@all",
            "--kind",
            "notify",
            "--task",
            "t2",
            "--subject",
            "s",
            "--body",
            "b",
        ])
        .json();
    assert_eq!(plain["left_out"], json!(["Bob.Smith"]));
}

#[test]
fn mcp_mail_send_takes_a_group() {
    let mut env = Env::new();
    team(&mut env);
    env.ok(&["agent", "list-add", "qa", "ann", "cid"]);
    runtime().block_on(async {
        let c = stdio(&env, "lead").await;
        let r = call(
            &c,
            "mail_send",
            json!({"to": "@qa, bob", "kind": "request", "task": "t1", "subject": "ship-it",
                   "body": "ok?", "expects_reply": "any"}),
        )
        .await;
        let doc = ok(&r);
        assert_eq!(doc["expects_reply"], "any");
        assert_eq!(copies(doc).len(), 3);
        let one = call(
            &c,
            "mail_send",
            json!({"to": "ann", "kind": "notify", "task": "t1", "subject": "s", "body": "b"}),
        )
        .await;
        assert_eq!(ok(&one)["to"], "ann", "one agent is an ordinary message");
        let bad = call(
            &c,
            "mail_send",
            json!({"to": "@qa,zed", "kind": "notify", "task": "t1", "subject": "s", "body": "b"}),
        )
        .await;
        assert!(refused(&bad).contains("unknown agent `zed`"));
        let added = call(
            &c,
            "agent_list_add",
            json!({"list": "ops", "agents": ["bob", "cid"]}),
        )
        .await;
        assert_eq!(ok(&added)["members"], json!(["bob", "cid"]));
        let removed = call(
            &c,
            "agent_list_remove",
            json!({"list": "@ops", "agents": ["bob"]}),
        )
        .await;
        assert_eq!(ok(&removed)["members"], json!(["cid"]));
        let reserved = call(
            &c,
            "agent_list_add",
            json!({"list": "all", "agents": ["bob"]}),
        )
        .await;
        assert!(refused(&reserved).contains("reserved"));
        c.cancel().await.unwrap();
    });
}

/// `status` shows registered agents with their lists (roles), program and
/// model, even an agent with no other file yet.
#[test]
fn status_shows_the_directory() {
    let mut env = Env::new();
    env.ok(&[
        "agent",
        "register",
        "ann",
        "--roles",
        "qa",
        "--program",
        "codex",
    ]);
    let status = env.ok(&["--json", "status"]).json();
    let agents = status["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 1, "{status}");
    assert_eq!(agents[0]["agent"], "ann");
    assert_eq!(agents[0]["profile"]["roles"], json!(["qa"]));
    assert_eq!(agents[0]["profile"]["program"], "codex");
    assert!(agents[0]["profile"].get("model").is_none());
}
