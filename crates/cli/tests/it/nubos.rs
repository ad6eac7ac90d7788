//! A nubos-pilot project set up for chipset too (`chipset init` in it):
//! every command, and the MCP server, keeps mail in the project's
//! `.nubos-pilot/messages`, so chipset's agents and nubos-pilot's share
//! one mail store and one commit gate.

use std::fs;

use serde_json::{Value, json};

use crate::mail::{OPEN, Project, TASK, request};
use crate::mcp::{call, ok, runtime};

/// A notify from the critic to two agents: group mail.
const GROUP: [&str; 14] = [
    "mail",
    "send",
    "--from",
    "np-critic",
    "--to",
    "np-executor,np-orchestrator",
    "--kind",
    "notify",
    "--task",
    TASK,
    "--subject",
    "round",
    "--body",
    "go",
];

/// The messages in `doc`'s `copies` (group mail) or the one message.
fn ids(doc: &Value) -> Vec<String> {
    match doc["copies"].as_array() {
        Some(copies) => copies
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_owned())
            .collect(),
        None => vec![doc["id"].as_str().unwrap().to_owned()],
    }
}

#[test]
fn every_command_shares_a_nubos_projects_mail() {
    let mut p = Project::new();
    // Commands find the project as nubos-pilot does: its state root is
    // the project's, wherever in it they run.
    let missing = p.run("src", &["status"], "");
    assert_eq!(missing.code, 1, "{missing:?}");
    assert!(
        missing.stderr.contains("[PROJECT]/.chipset/state"),
        "{missing:?}"
    );
    let init = p
        .ok("src/deep", &["--json", "init", "--agent", "np-executor"])
        .json();
    assert_eq!(init["mail_dir"], "[PROJECT]/.nubos-pilot/messages");
    assert_eq!(
        init["mcp_json"]["mcpServers"]["chipset"]["args"],
        json!(["mcp", "--agent", "np-executor"])
    );
    let state = p.dir.join(".chipset/state");
    assert!(state.is_dir() && !p.dir.join("src/deep/.chipset").exists());

    // A request from chipset lands in nubos-pilot's folder, though
    // `.chipset/state` is beside it now.
    let id = p.ok("src", &request()).line();
    assert!(
        p.messages()
            .join(format!("inbox/np-executor/{id}.json"))
            .is_file()
    );
    let gate = p.run("src/deep", &["mail", "pending", "--check", TASK], "");
    assert_eq!(gate.code, 1, "{gate:?}");

    // Everything built over mail reads the folder: brief, status, search.
    let brief = p.ok("src/deep", &["--json", "brief", "np-executor"]).json();
    assert_eq!(brief["entries"][0]["kind"], "mail", "{brief}");
    assert_eq!(brief["entries"][0]["count"], 2, "{brief}");
    let status = p.ok(".", &["--json", "status"]).json();
    let line = status["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["agent"] == "np-executor")
        .unwrap();
    assert_eq!(line["inbox"], 2, "{status}");
    let hits = p.ok(".", &["--json", "search", "FoobarService"]).json();
    assert_eq!(hits["total"], 2, "{hits}");

    // Group mail needs the directory, which the state root beside the
    // folder keeps: each copy is a message in nubos-pilot's layout.
    for agent in ["np-critic", "np-executor", "np-orchestrator"] {
        p.ok(".", &["agent", "register", agent]);
    }
    let group = [&["--json"][..], &GROUP].concat();
    let sent = ids(&p.ok(".", &group).json());
    assert_eq!(sent.len(), 2);
    assert!(
        p.messages()
            .join(format!("inbox/np-orchestrator/{}.json", sent[1]))
            .is_file()
    );

    // An agent host's MCP server, started in the project as `init` says,
    // answers the open request in the folder; the gate sees the reply.
    let rt = runtime();
    rt.block_on(async {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_chipset"));
        cmd.args(["mcp", "--agent", "np-executor"])
            .current_dir(&p.dir)
            .env_remove("CHIPSET_ROOT")
            .env_remove("CHIPSET_AGENT");
        let transport = rmcp::transport::TokioChildProcess::new(cmd).unwrap();
        let client = rmcp::ServiceExt::serve((), transport).await.unwrap();
        let inbox = call(&client, "mail_inbox", json!({})).await;
        let listed: Vec<&str> = ok(&inbox)["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap())
            .collect();
        assert!(
            listed.contains(&OPEN) && listed.contains(&id.as_str()),
            "{listed:?}"
        );
        let reply = json!({"to": "np-critic", "kind": "response", "subject": "dead-code",
                           "body": "yes", "in_reply_to": OPEN});
        let answer = call(&client, "mail_send", reply).await;
        let answer = ok(&answer)["id"].as_str().unwrap().to_owned();
        assert!(
            p.messages()
                .join(format!("inbox/np-critic/{answer}.json"))
                .is_file()
        );
        client.cancel().await.unwrap();
    });
    let pending = p.ok(".", &["--json", "mail", "pending", TASK]).json();
    assert_eq!(
        ids_of(&pending),
        [id.as_str()],
        "only chipset's request is open"
    );

    p.ok(".", &["doctor"]);
    assert!(
        !state.join("mail").exists(),
        "the state root got mail of its own"
    );

    // A migration moves the state root only: it says so rather than leave
    // the project's mail behind unasked, and moves the rest when told.
    let target = tempfile::tempdir().unwrap();
    let to = target.path().join("state").display().to_string();
    let refused = p.fails(1, ".", &["migrate", "--to", &to]);
    assert!(refused.stderr.contains("--skip mail"), "{refused:?}");
    // So does `--from` naming the root that would be found, however spelt,
    // or from outside the project.
    let spelt = format!(
        "../{}/.chipset/state",
        p.dir.file_name().unwrap().to_str().unwrap()
    );
    let named = p.fails(
        1,
        "src",
        &["migrate", "--from", "../.chipset/state", "--to", &to],
    );
    assert!(named.stderr.contains("--skip mail"), "{named:?}");
    let named = p.fails(1, ".", &["migrate", "--from", &spelt, "--to", &to]);
    assert!(named.stderr.contains("--skip mail"), "{named:?}");
    let outside = p.dir.join(".chipset/state").display().to_string();
    let named = p.fails(1, "/", &["migrate", "--from", &outside, "--to", &to]);
    assert!(named.stderr.contains("--skip mail"), "{named:?}");
    assert!(!target.path().join("state").exists());
    let moved = p
        .ok(".", &["--json", "migrate", "--to", &to, "--skip", "mail"])
        .json();
    assert_eq!(moved["verified"], true, "{moved}");

    // --mail-dir names the folder for any command, from anywhere; a server
    // keeps its own mail, so the two together are a usage error.
    let root = state.display().to_string();
    let dir = p.messages().display().to_string();
    let status = p
        .ok(
            "/",
            &["--root", &root, "--mail-dir", &dir, "--json", "status"],
        )
        .json();
    assert_eq!(status, p.ok(".", &["--json", "status"]).json());
    let url = "postgres://nowhere.invalid/db";
    p.fails(2, ".", &["--root", url, "--mail-dir", &dir, "status"]);
}

fn ids_of(messages: &Value) -> Vec<&str> {
    messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect()
}

/// In a project not set up for chipset yet, a command that only reads
/// the state root refuses and makes nothing, not even the project's mail
/// folder; the mail commands still run in that folder alone.
#[test]
fn a_project_without_a_state_root_refuses_reads_and_makes_nothing() {
    let mut p = Project::empty();
    let refused = p.fails(1, "src", &["brief", "np-executor"]);
    assert!(
        refused.stderr.contains("`chipset init` creates it"),
        "{refused:?}"
    );
    let refused = p.fails(2, "src", &GROUP);
    assert!(
        refused.stderr.contains("`chipset init` makes one"),
        "{refused:?}"
    );
    assert!(!p.messages().exists());
    p.ok("src", &["mail", "inbox", "np-executor"]);
}

/// A nubos-pilot project inside a folder that has a chipset state root
/// (a team's, above the project) uses that root, never a second one of
/// its own, with the project's mail; `--mail-dir` with a mail command
/// uses it too, so group mail works there.
#[test]
fn a_project_under_a_state_root_shares_that_root() {
    let mut p = Project::new();
    let team = p.dir.parent().unwrap().join(".chipset/state");
    fs::create_dir_all(&team).unwrap();
    for agent in ["np-critic", "np-executor", "np-orchestrator"] {
        p.ok("src", &["agent", "register", agent]);
    }
    assert!(team.join("agents/np-critic.json").is_file());
    assert!(!p.dir.join(".chipset").exists(), "a second root was made");
    let group = [&["--json"][..], &GROUP].concat();
    let sent = ids(&p.ok("src", &group).json());
    assert!(
        p.messages()
            .join(format!("inbox/np-orchestrator/{}.json", sent[1]))
            .is_file()
    );
    let dir = p.messages().display().to_string();
    let named = [&["--mail-dir", dir.as_str()][..], &group].concat();
    assert_eq!(ids(&p.ok("src", &named).json()).len(), 2);
    assert!(!team.join("mail").exists());
}

/// Refusals write nothing: a `--mail-dir` that is a file refuses a
/// command that writes before its state root is made; a server root from
/// `$CHIPSET_ROOT` leaves the mail commands on `--mail-dir` alone, as
/// they were, and refuses the others by name.
#[test]
fn mail_dir_refusals_make_nothing_and_name_the_server() {
    let mut p = Project::empty();
    fs::write(p.dir.join("afile"), "").unwrap();
    let refused = p.fails(
        1,
        ".",
        &["--mail-dir", "afile", "agent", "register", "np-critic"],
    );
    assert!(refused.stderr.contains("is not a directory"), "{refused:?}");
    assert!(!p.dir.join(".chipset").exists());

    let messages = p.messages();
    fs::create_dir_all(&messages).unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_chipset"))
            .args(args)
            .current_dir(&p.dir)
            .env("CHIPSET_ROOT", "postgres://nowhere.invalid/db")
            .output()
            .unwrap()
    };
    let dir = messages.display().to_string();
    let inbox = run(&["--mail-dir", &dir, "mail", "inbox", "np-executor"]);
    assert_eq!(inbox.status.code(), Some(0), "{inbox:?}");
    let status = run(&["--mail-dir", &dir, "status"]);
    assert_eq!(status.status.code(), Some(2), "{status:?}");
    let stderr = String::from_utf8_lossy(&status.stderr);
    assert!(
        stderr.contains("CHIPSET_ROOT") && stderr.contains("nowhere.invalid"),
        "{stderr}"
    );
}
