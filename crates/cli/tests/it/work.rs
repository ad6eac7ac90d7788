//! `chipset work ...`: the work pool end to end from a shell, with its
//! conflicting, retried and refused cases.

use crate::{Env, snap};

/// Posts `id` titled `title` by `lead`, with `extra` arguments.
fn post(env: &mut Env, id: &str, title: &str, extra: &[&str]) {
    let mut args = vec!["work", "post", "--agent", "lead", "--id", id];
    args.extend_from_slice(extra);
    args.push(title);
    env.ok(&args);
}

#[test]
fn post_ready_claim_release_and_done_from_a_shell() {
    let mut env = Env::new();
    post(
        &mut env,
        "schema",
        "Design the schema",
        &["--priority", "1"],
    );
    post(
        &mut env,
        "api",
        "Write the API",
        &["--depends-on", "schema"],
    );
    post(
        &mut env,
        "docs",
        "Document it",
        &["--defer", "2h", "--label", "docs"],
    );
    assert_eq!(
        env.ok(&["work", "ready"]).stdout,
        "schema P1 [ready] Design the schema\n"
    );
    // A retried post with the same content is a success that changes nothing.
    let again = env.ok(&[
        "--json",
        "work",
        "post",
        "--agent",
        "lead",
        "--id",
        "schema",
        "--priority",
        "1",
        "Design the schema",
    ]);
    assert_eq!(again.json()["existing"], true);
    // So is a deferred one, a moment later: the deferral counts from the
    // first post, not from the retry.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let deferred = [
        "--json",
        "work",
        "post",
        "--agent",
        "lead",
        "--id",
        "docs",
        "--defer",
        "2h",
        "--label",
        "docs",
        "Document it",
    ];
    assert_eq!(env.ok(&deferred).json()["existing"], true);
    let claimed = env
        .ok(&["--json", "work", "claim", "--agent", "alice"])
        .json();
    assert_eq!(claimed["item"]["id"], "schema");
    assert_eq!(claimed["existing"], false);
    // Conflicting: another agent's claim of the claimed item is refused.
    let taken = env.fails(1, &["work", "claim", "--agent", "bob", "schema"]);
    assert!(
        taken.stderr.contains("claimed by `alice`"),
        "{}",
        taken.stderr
    );
    assert_eq!(
        env.ok(&["work", "claim", "--agent", "bob"]).stdout,
        "nothing ready\n"
    );
    // Retried: claiming again returns the held item.
    let retry = env
        .ok(&["--json", "work", "claim", "--agent", "alice"])
        .json();
    assert_eq!(
        (retry["item"]["id"].as_str(), retry["existing"].as_bool()),
        (Some("schema"), Some(true))
    );
    // Only the holder releases, with a reason; a release again is a success.
    let not_mine = env.fails(
        1,
        &[
            "work", "release", "--agent", "bob", "--reason", "x", "schema",
        ],
    );
    assert!(
        not_mine.stderr.contains("`alice` holds it"),
        "{}",
        not_mine.stderr
    );
    env.ok(&[
        "work",
        "release",
        "--agent",
        "alice",
        "--reason",
        "needs input",
        "schema",
    ]);
    let again = env.ok(&[
        "--json",
        "work",
        "release",
        "--agent",
        "alice",
        "--reason",
        "needs input",
        "schema",
    ]);
    assert_eq!(again.json()["existing"], true);
    // Bob takes it and finishes it; done again is a success; the
    // dependent item is ready.
    env.ok(&["work", "claim", "--agent", "bob"]);
    env.ok(&["work", "done", "--agent", "bob", "schema"]);
    let again = env.ok(&["--json", "work", "done", "--agent", "bob", "schema"]);
    assert_eq!(again.json()["existing"], true);
    let done = env.fails(1, &["work", "claim", "--agent", "carol", "schema"]);
    assert!(done.stderr.contains("is done"), "{}", done.stderr);
    assert_eq!(
        env.ok(&["work", "ready"]).stdout,
        "api P2 [ready] Write the API\n"
    );
    let list = env.ok(&["--json", "work", "list", "--open"]).json();
    assert_eq!(list["total"], 2);
    let state = env.ok(&["--json", "status"]).json();
    assert_eq!(state["pool"]["ready"], 1);
    assert_eq!(state["pool"]["deferred"], 1);
    assert_eq!(state["pool"]["done"], 1);
}

/// Bad input is refused with exit 2 and writes nothing.
#[test]
fn bad_work_input_is_refused_and_changes_nothing() {
    let mut env = Env::new();
    post(&mut env, "a", "First", &[]);
    for args in [
        &["work", "post", "--agent", "lead", "--priority", "5", "x"][..],
        &[
            "work",
            "post",
            "--agent",
            "lead",
            "--depends-on",
            "nope",
            "x",
        ],
        &[
            "work",
            "post",
            "--agent",
            "lead",
            "--id",
            "b",
            "--depends-on",
            "b",
            "x",
        ],
        &["work", "post", "--agent", "lead", "--id", "../b", "x"],
        &["work", "post", "--agent", "lead", "--label", "a b", "x"],
        &["work", "post", "--agent", "lead", "  "],
        &["work", "release", "--agent", "lead", "--reason", "", "a"],
    ] {
        env.fails(2, args);
    }
    for priority in ["high", "P", "P9", "300"] {
        let bad = [
            "work",
            "post",
            "--agent",
            "lead",
            "--priority",
            priority,
            "x",
        ];
        let run = env.fails(2, &bad);
        assert!(
            run.stderr.contains("priority"),
            "{priority}: {}",
            run.stderr
        );
    }
    // An id posted with other content is refused as mail's and the bus's
    // are: exit 1, as every refusal.
    let taken = env.fails(
        1,
        &[
            "work",
            "post",
            "--agent",
            "lead",
            "--id",
            "a",
            "Other content",
        ],
    );
    assert!(taken.stderr.contains("other content"), "{}", taken.stderr);
}

/// A post is made once it is written: an unreadable hook met when its
/// state is read back is a note, never a failure that a retry without
/// `--id` would answer with a second item.
#[test]
fn a_post_stands_when_its_state_cannot_be_read_back() {
    let mut env = Env::new();
    std::fs::create_dir_all(env.root().join("hooks")).unwrap();
    std::fs::write(env.root().join("hooks/zed.json"), "{").unwrap();
    let posted = env.ok(&["--json", "work", "post", "--agent", "lead", "Write it"]);
    let doc = posted.json();
    assert_eq!(doc["item"]["state"], "unknown", "{doc}");
    assert_eq!(doc["item"]["title"], "Write it");
    assert!(
        posted.stderr.contains(
            "note: its state could not be read: cannot list the work on the hook of `zed`"
        ),
        "{}",
        posted.stderr
    );
    let id = doc["item"]["id"].as_str().unwrap();
    let table = std::fs::read_to_string(env.root().join("pool/table.json")).unwrap();
    assert!(table.contains(id), "{table}");
}

/// A corrupt hook hides no item from `work list`: it prints every item,
/// the ones the hook might hold unconfirmed, then fails (exit 1) naming
/// the hook, as `mail inbox` does. Claims and `work ready` still fail
/// closed on it and change nothing.
#[test]
fn work_list_shows_the_pool_past_a_corrupt_hook_and_fails_naming_it() {
    let mut env = Env::new();
    post(&mut env, "done", "Pin the toolchain", &[]);
    post(&mut env, "held", "Fix the parser", &[]);
    post(&mut env, "free", "Write the docs", &[]);
    post(
        &mut env,
        "after",
        "Review the docs",
        &["--depends-on", "free"],
    );
    env.ok(&["work", "claim", "--agent", "bob", "done"]);
    env.ok(&["work", "done", "--agent", "bob", "done"]);
    env.ok(&["work", "claim", "--agent", "alice", "held"]);
    env.take();
    std::fs::write(env.root().join("hooks/ghost.json"), "{").unwrap();
    let text = env.fails(1, &["work", "list"]);
    assert!(
        text.stdout.contains("free P2 [ready, unconfirmed]"),
        "{text:?}"
    );
    assert!(text.stderr.contains("hooks/ghost.json"), "{text:?}");
    let doc = env.fails(1, &["--json", "work", "list"]).json();
    assert_eq!(doc["total"], 4, "{doc}");
    assert_eq!(doc["items"][2]["unconfirmed"], true, "{doc}");
    assert!(doc["items"][1].get("unconfirmed").is_none(), "{doc}");
    let unreadable = doc["unreadable"].as_array().unwrap();
    assert_eq!(unreadable.len(), 1, "{doc}");
    assert!(
        unreadable[0].as_str().unwrap().contains("hooks/ghost.json"),
        "{doc}"
    );
    env.fails(1, &["work", "list", "--open"]);
    env.fails(1, &["work", "claim", "--agent", "carol"]);
    env.fails(1, &["work", "claim", "--agent", "carol", "free"]);
    env.fails(1, &["work", "ready"]);
    snap!("work_unreadable_hook", env.take());
}
