//! Global flags: where the state root is, help, usage errors.

use std::process::Command;

use serde_json::json;

use crate::{Env, Run, tree};

fn chipset() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_chipset"));
    cmd.env_remove("CHIPSET_ROOT").env("NO_COLOR", "1");
    cmd
}

const ASSIGN: &[&str] = &["hook", "assign", "a", "--bead", "b", "--title", "t"];

#[test]
fn root_defaults_to_dot_chipset_state_under_the_current_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = chipset()
        .args(ASSIGN)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(dir.path().join(".chipset/state/hooks/a.json").is_file());
}

#[test]
fn an_empty_chipset_root_counts_as_unset() {
    let dir = tempfile::tempdir().unwrap();
    let out = chipset()
        .args(ASSIGN)
        .env("CHIPSET_ROOT", "")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(dir.path().join(".chipset/state/hooks/a.json").is_file());
}

#[test]
fn root_comes_from_chipset_root_and_the_flag_wins() {
    let dir = tempfile::tempdir().unwrap();
    let (from_env, from_flag) = (dir.path().join("env"), dir.path().join("flag"));
    let out = chipset()
        .args(ASSIGN)
        .env("CHIPSET_ROOT", &from_env)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(from_env.join("hooks/a.json").is_file());
    let out = chipset()
        .arg("--root")
        .arg(&from_flag)
        .args(ASSIGN)
        .env("CHIPSET_ROOT", &from_env)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(from_flag.join("hooks/a.json").is_file());
    // Global flags may also follow the subcommand.
    let out = chipset()
        .args(["hook", "show", "a", "--json", "--root"])
        .arg(&from_flag)
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["status"], "pending");
}

#[test]
fn a_root_that_cannot_be_opened_fails_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    let out = chipset()
        .arg("--root")
        .arg(&file)
        .args(["status"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("is not a directory"), "{stderr}");
    // A writing command says the same, naming what it was given: a state
    // root, or with --mail-dir a mail folder.
    let send = [
        "mail",
        "send",
        "--from",
        "a",
        "--to",
        "b",
        "--kind",
        "notify",
        "--task",
        "t",
        "--subject",
        "s",
        "--body",
        "x",
    ];
    for (flag, args, what) in [
        ("--root", ASSIGN, "state root"),
        ("--mail-dir", &send[..], "mail folder"),
    ] {
        let out = chipset().arg(flag).arg(&file).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(
            stderr,
            format!(
                "chipset: error: {what} `{}` is not a directory\n",
                file.display()
            )
        );
    }
    assert_eq!(
        std::fs::read(&file).unwrap(),
        b"",
        "the file is left as it was"
    );
}

/// Regression: a mistyped root was created on the spot and read as empty,
/// so `mail pending` passed a commit gate while requests were open elsewhere.
#[test]
fn reading_commands_refuse_a_missing_root_and_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("typo").join("state");
    for args in [
        &["mail", "pending", "T1"][..],
        &["mail", "inbox", "a"],
        &["hook", "list"],
        &["hook", "show", "a"],
        &["bus", "pending", "a"],
        &["bus", "wait", "a", "--timeout", "0"],
        &["nudge", "read", "a"],
        &["remind", "list"],
        &["status"],
        &["doctor"],
    ] {
        let out = chipset()
            .arg("--root")
            .arg(&typo)
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("does not exist"), "{args:?}: {stderr}");
        assert!(
            !dir.path().join("typo").exists(),
            "{args:?} created the root"
        );
    }
    // The first writing command creates it.
    let out = chipset()
        .arg("--root")
        .arg(&typo)
        .args(ASSIGN)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = chipset()
        .arg("--root")
        .arg(&typo)
        .args(["mail", "pending", "T1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

#[test]
fn help_exits_0_and_a_missing_subcommand_exits_2() {
    let out = chipset().arg("--help").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8(out.stdout).unwrap();
    for command in ["hook", "nudge", "mail", "bus", "remind", "status", "doctor"] {
        assert!(help.contains(command), "{help}");
    }
    let out = chipset().arg("mail").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let env = Env::new();
    let run = env.run(&["--json", "frobnicate"]);
    assert_eq!(run.code, 2);
    // With `--json`, a failure is also the one document on stdout, on one
    // line: the MCP tools' `error`, `class` and `kind`.
    assert_eq!(
        run.stdout,
        "{\"error\":\"unrecognized subcommand 'frobnicate' (try --help)\",\
         \"class\":\"usage\",\"kind\":\"invalid\"}\n"
    );
    assert_eq!(
        run.stderr,
        "chipset: error: unrecognized subcommand 'frobnicate' (try --help)\n"
    );
    // A missing subcommand shows the help on stderr, and the failure.
    let run = env.run(&["--json", "hook"]);
    assert_eq!(run.code, 2);
    assert_eq!(run.json()["error"], "a subcommand is missing (try --help)");
    assert!(run.stderr.contains("Usage: chipset hook"), "{}", run.stderr);
    // An argument spelled `mcp` is not the command.
    let run = env.run(&["--json", "hook", "show", "mcp", "--bogus"]);
    assert_eq!(run.code, 2);
    assert_eq!(run.json()["class"], "usage");
    // `mcp`'s stdout is the protocol's: nothing else is written there.
    let run = env.run(&["--json", "mcp", "--bogus"]);
    assert_eq!(run.code, 2);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    // A `--json` after `--` is a value, not the flag.
    let run = env.run(&["hook", "show", "a", "--", "--json"]);
    assert_eq!(run.code, 2);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
}

/// Colour follows anstream's rules for stdout: none through a pipe (as
/// every other test runs), forced by `CLICOLOR_FORCE`, and `NO_COLOR` wins.
#[test]
fn colour_honours_no_color_and_clicolor_force() {
    let mut env = Env::new();
    env.ok(&[
        "bus",
        "publish",
        "--to",
        "supervisor",
        "--source",
        "worker-2",
        "--kind",
        "needs-input",
        "--priority",
        "critical",
    ]);
    let pending = |vars: &[(&str, &str)]| {
        let mut cmd = env.command(&["bus", "pending", "supervisor"]);
        cmd.env_remove("NO_COLOR")
            .env_remove("CLICOLOR_FORCE")
            .env_remove("CLICOLOR");
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let red = "\x1b[31mcritical\x1b[0m";
    assert!(!pending(&[]).contains('\x1b'), "a pipe is not a terminal");
    assert!(pending(&[("CLICOLOR_FORCE", "1")]).contains(red));
    assert!(!pending(&[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")]).contains('\x1b'));
}

/// Every command whose one positional argument is the agent also takes it
/// as `--agent`, as `work`, `lease` and nubos-pilot's scripts name it: one
/// of the two, never both, never neither.
#[test]
fn an_agent_by_position_may_be_given_as_agent_instead() {
    let mut env = Env::new();
    let same = |env: &mut Env, args: &[&str]| {
        let by_position = env.ok(&[&["--json"], args, &["ann"]].concat()).json();
        let by_flag = env
            .ok(&[&["--json"], args, &["--agent", "ann"]].concat())
            .json();
        assert_eq!(by_position, by_flag, "{args:?}");
        by_flag
    };
    env.ok(&["agent", "register", "--agent", "ann", "--role", "qa"]);
    assert_eq!(same(&mut env, &["agent", "whois"])["roles"], json!(["qa"]));

    env.ok(&[
        "hook", "assign", "--agent", "ann", "--bead", "b-1", "--title", "T",
    ]);
    assert_eq!(same(&mut env, &["hook", "show"])["status"], "pending");
    for step in ["activate", "touch", "complete", "clear"] {
        env.ok(&["hook", step, "--agent", "ann", "--bead", "b-1"]);
    }
    assert_eq!(same(&mut env, &["hook", "show"])["status"], "empty");

    let nudge = ["nudge", "send", "--from", "bob", "--to", "ann"];
    env.ok(&[&nudge[..], &["--type", "health_check", "--message", "m"]].concat());
    let read = env
        .ok(&["--json", "nudge", "read", "--agent", "ann"])
        .json();
    assert_eq!(read["nudge"]["message"], "m", "{read}");
    env.ok(&["nudge", "respond", "--agent", "ann"]);

    let event = [
        "bus", "publish", "--to", "ann", "--source", "bob", "--kind", "k",
    ];
    env.ok(&event);
    let pending = same(&mut env, &["bus", "pending"]);
    assert_eq!(pending["events"].as_array().unwrap().len(), 1, "{pending}");
    let waited = env.ok(&["bus", "wait", "--agent", "ann", "--timeout", "0"]);
    assert!(waited.stdout.contains(" k"), "{}", waited.stdout);
    env.ok(&["bus", "start", "--agent", "ann", "--pid", "1"]);
    assert_eq!(same(&mut env, &["bus", "presence"])["presence"]["pid"], 1);
    env.ok(&["bus", "nag", "--agent", "ann"]);
    let control = ["bus", "control", "register", "--agent", "ann"];
    env.ok(&[&control[..], &["--kind", "chat", "--target", "x"]].concat());

    let mail = [
        "mail", "send", "--from", "bob", "--to", "ann", "--kind", "notify",
    ];
    env.ok(&[
        &mail[..],
        &["--task", "t1", "--subject", "s", "--body", "b"],
    ]
    .concat());
    assert_eq!(
        same(&mut env, &["mail", "inbox"]).as_array().unwrap().len(),
        1
    );
    let brief = env.ok(&["brief", "--agent", "ann"]);
    assert_eq!(brief.stdout, env.ok(&["brief", "ann"]).stdout);
    assert!(brief.stdout.contains("mail (1)"), "{}", brief.stdout);
    let waited = env.ok(&["wait", "--agent", "ann", "--timeout", "0"]);
    assert_eq!(waited.stdout, brief.stdout);

    let both = env.fails(2, &["hook", "show", "ann", "--agent", "ann"]);
    assert!(
        both.stderr.contains("cannot be used with"),
        "{}",
        both.stderr
    );
    let neither = env.fails(2, &["brief"]);
    assert!(
        neither.stderr.contains("name the agent"),
        "{}",
        neither.stderr
    );
}

/// `$CHIPSET_AGENT` names the agent a command acts as or is about when the
/// command line does not, as an agent host sets it once: by position, by
/// `--agent` and as the sender (`--from`). What the command line names
/// wins; an empty one is unset, an invalid one a usage error that changes
/// nothing.
#[test]
fn chipset_agent_names_the_agent_the_command_line_leaves_out() {
    let mut env = Env::new();
    let ok = |run: Run| {
        assert_eq!(run.code, 0, "{run:?}");
        run
    };
    env.ok(&["agent", "register", "bob"]);
    ok(env.run_as("ann", &["agent", "register"]));
    let whois = ok(env.run_as("ann", &["--json", "agent", "whois"])).json();
    assert_eq!(whois["name"], "ann", "{whois}");
    let bob = ok(env.run_as("ann", &["--json", "agent", "whois", "bob"])).json();
    assert_eq!(bob["name"], "bob", "the command line wins: {bob}");

    let assign = ["hook", "assign", "--bead", "b-1", "--title", "T"];
    ok(env.run_as("ann", &[&assign[..], &["--agent", "ann"]].concat()));
    ok(env.run_as("ann", &["hook", "activate"]));
    let hook = ok(env.run_as("ann", &["--json", "hook", "show"])).json();
    assert_eq!(hook["status"], "active", "{hook}");

    let lease = ok(env.run_as("ann", &["--json", "lease", "acquire", "src"])).json();
    assert_eq!(lease["lease"]["holder"], "ann", "{lease}");
    let post = ["--json", "work", "post", "Fix it", "--priority", "P1"];
    let posted = ok(env.run_as("bob", &post)).json();
    assert_eq!(posted["item"]["priority"], 1, "{posted}");

    let send = [
        "mail", "send", "--to", "bob", "--kind", "notify", "--task", "t1",
    ];
    ok(env.run_as(
        "ann",
        &[&send[..], &["--subject", "s", "--body", "b"]].concat(),
    ));
    let inbox = env.ok(&["--json", "mail", "inbox", "bob"]).json();
    assert_eq!(inbox[0]["from"], "ann", "{inbox}");
    let nudge = [
        "nudge",
        "send",
        "--to",
        "bob",
        "--type",
        "abort",
        "--message",
        "m",
    ];
    ok(env.run_as("ann", &nudge));
    let read = ok(env.run_as("bob", &["--json", "nudge", "read"])).json();
    assert_eq!(read["nudge"]["from"], "ann", "{read}");
    let brief = ok(env.run_as("ann", &["brief"]));
    assert_eq!(brief.stdout, env.ok(&["brief", "ann"]).stdout);

    // `bus ack` takes the agent by position before the event id, or from
    // --agent or the variable with the event id alone.
    let publish = ["bus", "publish", "--to", "ann", "--source", "bob", "--kind"];
    env.ok(&[&publish[..], &["k1"]].concat());
    env.ok(&[&publish[..], &["k2"]].concat());
    let pending = env.ok(&["--json", "bus", "pending", "ann"]).json();
    let ids: Vec<String> = pending["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 2, "{pending}");
    let twice = env.fails(2, &["bus", "ack", "ann", &ids[0], "--agent", "ann"]);
    assert!(twice.stderr.contains("the agent twice"), "{}", twice.stderr);
    let nobody = env.fails(2, &["bus", "ack", &ids[0]]);
    assert!(
        nobody.stderr.contains("name the agent"),
        "{}",
        nobody.stderr
    );
    ok(env.run_as("ann", &["bus", "ack", &ids[0]]));
    env.ok(&["bus", "ack", "ann", &ids[1]]);
    let left = env.ok(&["--json", "bus", "pending", "ann"]).json();
    assert_eq!(left["events"], json!([]), "{left}");

    // A dispatcher's command on another agent's hook never falls back to
    // the caller: a target left out is refused, not taken as itself.
    let before = tree(env.root());
    for args in [
        &["hook", "assign", "--bead", "b-2", "--title", "T"][..],
        &["hook", "clear"],
        &["hook", "clear", "--reassign"],
    ] {
        let run = env.run_as("ann", args);
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        assert!(
            run.stderr.contains("name the agent whose hook"),
            "{}",
            run.stderr
        );
    }
    assert_eq!(before, tree(env.root()), "nothing changed");
    // Their help says so, and claims no default from the variable; the
    // commands that take it say so in the words `--root` uses.
    for command in ["assign", "clear"] {
        let help = env.ok(&["hook", command, "--help"]).stdout;
        assert!(help.contains("$CHIPSET_AGENT is not used"), "{help}");
        assert!(!help.contains("default: $CHIPSET_AGENT"), "{help}");
    }
    for command in [["work", "post"], ["lease", "acquire"], ["hook", "show"]] {
        let help = env.ok(&[&command[..], &["--help"]].concat()).stdout;
        assert!(
            help.contains("[default: $CHIPSET_AGENT if set and not empty]"),
            "{help}"
        );
        assert!(!help.contains("[env: "), "{help}");
    }
    for (agent, says) in [("", "name the agent"), ("a/b", "invalid $CHIPSET_AGENT")] {
        let run = env.run_as(agent, &["hook", "show"]);
        assert_eq!(run.code, 2, "{run:?}");
        assert!(run.stderr.contains(says), "{agent:?}: {}", run.stderr);
        let run = env.run_as(agent, &["lease", "acquire", "docs"]);
        assert_eq!(run.code, 2, "{agent:?}: {run:?}");
    }
    assert_eq!(before, tree(env.root()), "a refused agent changed nothing");
    // Empty is unset for the options too: `init` prints its placeholder.
    let init = env.run_as("", &["init"]);
    assert_eq!(init.code, 0, "{init:?}");
    assert!(init.stdout.contains("\"AGENT\""), "{}", init.stdout);
    let named = env.run_as("ann", &["init"]);
    assert!(named.stdout.contains("\"ann\""), "{}", named.stdout);
}
