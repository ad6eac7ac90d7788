//! `chipset hook ...`.

use std::fs;

use crate::{Env, snap};

const ASSIGN: &[&str] = &[
    "hook",
    "assign",
    "polecat-alpha",
    "--bead",
    "gt-abc12",
    "--title",
    "Add README section",
    "--by",
    "mayor",
];

#[test]
fn lifecycle_in_text() {
    let mut env = Env::new();
    env.ok(&["hook", "show", "polecat-alpha"]);
    env.ok(&["hook", "list"]);
    env.ok(ASSIGN);
    env.ok(&["hook", "show", "polecat-alpha"]);
    env.ok(&["hook", "activate", "polecat-alpha"]);
    env.ok(&["hook", "touch", "polecat-alpha"]);
    env.ok(&["hook", "list"]);
    env.ok(&["hook", "complete", "polecat-alpha"]);
    env.ok(&["hook", "clear", "polecat-alpha"]);
    env.ok(&[
        "hook",
        "assign",
        "polecat-alpha",
        "--bead",
        "gt-def34",
        "--title",
        "Fix CI",
    ]);
    env.ok(&["hook", "clear", "polecat-alpha", "--reassign"]);
    let show = env.ok(&["hook", "show", "polecat-alpha"]);
    assert!(show.stdout.contains("generation  4"), "{}", show.stdout);
    snap!("hook_lifecycle_text", env.take());
}

#[test]
fn lifecycle_in_json() {
    let mut env = Env::new();
    let missing = env.ok(&["--json", "hook", "show", "polecat-alpha"]).json();
    assert_eq!(missing["status"], "empty");
    assert_eq!(
        env.ok(&["--json", "hook", "list"]).json(),
        serde_json::json!([])
    );
    let mut args = vec!["--json"];
    args.extend_from_slice(ASSIGN);
    let assigned = env.ok(&args).json();
    assert_eq!(assigned["generation"], 1);
    assert_eq!(assigned["work"]["assigned_by"], "mayor");
    env.ok(&["--json", "hook", "show", "polecat-alpha"]);
    let active = env
        .ok(&["--json", "hook", "activate", "polecat-alpha"])
        .json();
    assert_eq!(active["status"], "active");
    env.ok(&["--json", "hook", "touch", "polecat-alpha"]);
    let list = env.ok(&["--json", "hook", "list"]).json();
    assert_eq!(list[0]["work_item"]["bead_id"], "gt-abc12");
    env.ok(&["--json", "hook", "complete", "polecat-alpha"]);
    let cleared = env.ok(&["--json", "hook", "clear", "polecat-alpha"]).json();
    assert_eq!(cleared["status"], "empty");
    env.ok(&[
        "--json",
        "hook",
        "assign",
        "polecat-alpha",
        "--bead",
        "gt-def34",
        "--title",
        "Fix CI",
    ]);
    let taken = env
        .ok(&["--json", "hook", "clear", "polecat-alpha", "--reassign"])
        .json();
    assert_eq!(taken["was"], "pending");
    assert_eq!(taken["hook"]["status"], "empty");
    snap!("hook_lifecycle_json", env.take());
}

#[test]
fn refusals_exit_1_and_change_nothing() {
    let mut env = Env::new();
    env.fails(1, &["hook", "activate", "polecat-alpha"]);
    env.fails(1, &["hook", "touch", "polecat-alpha"]);
    env.fails(1, &["hook", "complete", "polecat-alpha"]);
    env.fails(1, &["hook", "clear", "polecat-alpha"]);
    env.fails(1, &["hook", "clear", "polecat-alpha", "--reassign"]);
    env.ok(ASSIGN);
    // Issue 31: the same assign again is a retry and returns the first
    // assignment; another bead is refused.
    env.ok(ASSIGN);
    env.fails(
        1,
        &[
            "hook",
            "assign",
            "polecat-alpha",
            "--bead",
            "gt-def34",
            "--title",
            "Fix CI",
            "--by",
            "mayor",
        ],
    );
    env.fails(1, &["hook", "touch", "polecat-alpha"]);
    env.fails(1, &["hook", "complete", "polecat-alpha"]);
    env.fails(1, &["hook", "clear", "polecat-alpha"]);
    env.ok(&["hook", "activate", "polecat-alpha"]);
    // A retry of a transition that applied is a success that changes nothing.
    env.ok(&["hook", "activate", "polecat-alpha"]);
    env.ok(&["hook", "complete", "polecat-alpha"]);
    env.ok(&["hook", "complete", "polecat-alpha"]);
    env.fails(1, &["hook", "activate", "polecat-alpha"]);
    env.fails(1, &["hook", "clear", "polecat-alpha", "--reassign"]);
    env.fails(1, &["--json", "hook", "touch", "polecat-alpha"]);
    snap!("hook_refusals", env.take());
}

/// `--bead` and `--generation` fence an agent's command on the work it
/// means: after the dispatcher took `b-1` away and assigned `b-2`, a
/// stale `complete --bead b-1` is refused and changes nothing, where a
/// bare `complete` would finish `b-2`; a retry of one that applied still
/// succeeds.
#[test]
fn a_fenced_command_refuses_work_taken_away() {
    let mut env = Env::new();
    let assign = |env: &mut Env, bead: &str| {
        let args = [
            "hook", "assign", "f1", "--bead", bead, "--title", "job", "--by", "mayor",
        ];
        env.ok(&args);
    };
    assign(&mut env, "b-1");
    env.ok(&[
        "hook",
        "activate",
        "f1",
        "--bead",
        "b-1",
        "--generation",
        "1",
    ]);
    env.ok(&["hook", "clear", "f1", "--reassign", "--bead", "b-1"]);
    assign(&mut env, "b-2");
    let stale = env.fails(1, &["hook", "activate", "f1", "--bead", "b-1"]);
    assert!(
        stale.stderr.contains(
            "cannot activate `b-1` on the hook of `f1`: it holds `b-2` (generation 3) now"
        ),
        "{}",
        stale.stderr
    );
    // With `--json`, the failure's kind tells a program to read the hook
    // again, which exit 1 alone does not.
    let stale = env.fails(1, &["--json", "hook", "activate", "f1", "--bead", "b-1"]);
    let doc = stale.json();
    assert_eq!(doc["kind"], "stale", "{doc}");
    assert_eq!(doc["class"], "refused", "{doc}");
    assert!(doc["error"].as_str().unwrap().contains("it holds `b-2`"));
    env.ok(&["hook", "activate", "f1", "--bead", "b-2"]);
    for args in [
        &["hook", "touch", "f1", "--bead", "b-1"][..],
        &["hook", "complete", "f1", "--bead", "b-1"],
        &["hook", "complete", "f1", "--generation", "1"],
        &[
            "hook",
            "complete",
            "f1",
            "--bead",
            "b-2",
            "--generation",
            "2",
        ],
        &["hook", "clear", "f1", "--reassign", "--bead", "b-1"],
    ] {
        env.fails(1, args);
        let show = env.ok(&["--json", "hook", "show", "f1"]).json();
        assert_eq!(show["status"], "active", "{args:?} changed nothing");
    }
    // Fenced on the work it holds, and again: a retry that changes nothing.
    let complete = [
        "hook",
        "complete",
        "f1",
        "--bead",
        "b-2",
        "--generation",
        "3",
    ];
    env.ok(&complete);
    env.ok(&complete);
    env.fails(1, &["hook", "clear", "f1", "--bead", "b-1"]);
    env.ok(&["hook", "clear", "f1", "--bead", "b-2"]);
    env.fails(2, &["hook", "complete", "f1", "--generation", "x"]);
    env.fails(2, &["hook", "complete", "f1", "--bead", "../b"]);
}

/// `hook clear` and `hook clear --reassign` again, naming the generation,
/// succeed once that work is off the hook: how a clear whose outcome was
/// unknown (exit 3, which says so) is finished. Without the generation,
/// or naming another, the empty hook is refused; work assigned since is
/// never taken for the retry.
#[test]
fn a_clear_again_naming_its_generation_finds_it_done() {
    let env = Env::new();
    let ok = |args: &[&str]| {
        let run = env.run(args);
        assert_eq!(run.code, 0, "{args:?}: {run:?}");
        run
    };
    let fails = |args: &[&str]| assert_eq!(env.run(args).code, 1, "{args:?}");
    ok(&["hook", "assign", "c1", "--bead", "b-1", "--title", "job"]);
    ok(&["hook", "activate", "c1"]);
    ok(&["hook", "complete", "c1"]);
    let clear = ["hook", "clear", "c1", "--bead", "b-1", "--generation", "1"];
    assert_eq!(ok(&clear).line(), "cleared b-1 from c1");
    assert_eq!(
        ok(&clear).line(),
        "the hook of c1 is empty: generation 1 is off it already"
    );
    let doc = ok(&["--json", "hook", "clear", "c1", "--generation", "1"]).json();
    assert_eq!(
        (&doc["status"], &doc["generation"]),
        (&"empty".into(), &2.into())
    );
    fails(&["hook", "clear", "c1"]);
    fails(&["hook", "clear", "c1", "--generation", "0"]);
    ok(&["hook", "assign", "c1", "--bead", "b-2", "--title", "job"]);
    let reassign = ["hook", "clear", "c1", "--reassign", "--generation", "3"];
    assert!(ok(&reassign).line().starts_with("took b-2"));
    assert!(ok(&reassign).line().ends_with("off it already"));
    ok(&["hook", "assign", "c1", "--bead", "b-3", "--title", "job"]);
    fails(&reassign);
    let show = ok(&["--json", "hook", "show", "c1"]).json();
    assert_eq!(show["status"], "pending", "{show}");
}

/// A title that is empty, not one line or over 1,024 bytes is a usage
/// error (exit 2) that assigns nothing, as `work post` refuses it.
#[test]
fn assign_refuses_a_bad_title() {
    let mut env = Env::new();
    let long = "x".repeat(1025);
    for title in ["", "multi\nline", long.as_str()] {
        let run = env.fails(2, &["hook", "assign", "a", "--bead", "b", "--title", title]);
        assert!(run.stderr.contains("invalid title"), "{}", run.stderr);
        let show = env.ok(&["--json", "hook", "show", "a"]).json();
        assert_eq!(show["status"], "empty");
    }
}

#[test]
fn invalid_ids_and_arguments_exit_2() {
    let mut env = Env::new();
    env.fails(2, &["hook", "show", "a/b"]);
    env.fails(2, &["hook", "show", ".hidden"]);
    env.fails(
        2,
        &[
            "hook",
            "assign",
            "polecat-alpha",
            "--bead",
            "../x",
            "--title",
            "t",
        ],
    );
    env.fails(2, &["hook", "assign", "polecat-alpha", "--title", "t"]);
    env.fails(
        2,
        &[
            "hook",
            "assign",
            "polecat-alpha",
            "--bead",
            "b",
            "--title",
            "t",
            "--by",
            "",
        ],
    );
    env.fails(2, &["hook", "explode", "polecat-alpha"]);
    env.fails(2, &["hook", "clear", "polecat-alpha", "--force"]);
    snap!("hook_usage_errors", env.take());
}

#[test]
fn corrupt_hooks_are_reported_never_taken_as_empty() {
    let mut env = Env::new();
    env.ok(ASSIGN);
    let hooks = env.root().join("hooks");
    fs::write(hooks.join("broken.json"), "{not json").unwrap();
    env.fails(1, &["hook", "show", "broken"]);
    env.fails(
        1,
        &["hook", "assign", "broken", "--bead", "b", "--title", "t"],
    );
    env.fails(1, &["hook", "activate", "broken"]);
    // The listing shows every hook, then fails on the corrupt one.
    let list = env.step(&["hook", "list"]);
    assert_eq!(list.code, 1);
    assert!(
        list.stdout.contains("broken         corrupt"),
        "{}",
        list.stdout
    );
    let json = env.step(&["--json", "hook", "list"]);
    assert_eq!(json.code, 1);
    assert_eq!(json.json()[0]["status"], "corrupt");
    snap!("hook_corrupt", env.take());
}
