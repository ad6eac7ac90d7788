//! Files written by the real programs that implement the seeds
//! (`shared/fixtures/peers/`, see its README), driven through the binary:
//! Tibsfox's camelCase hooks through their lifecycle, and every fixture
//! folder at once through `doctor --fix`, which must leave each file where
//! it was and every gate answering as its writer intended.

use std::fs;
use std::path::PathBuf;

use serde_json::{Value, json};

use crate::{Env, snap, tree};

const AGENT: &str = "polecat-alpha";

/// The Tibsfox hook fixtures and the status each was written in.
const TIBSFOX: [(&str, &str); 4] = [
    ("pending", "pending"),
    ("active", "active"),
    ("completed", "completed"),
    ("empty", "empty"),
];

/// The nubos-pilot request that is still open (sent with `"round": null`).
const NUBOS_OPEN_REQUEST: &str = "1795408569995-7a703292-f1d1-4900-b635-8fd9f1df7f88";
const NUBOS_TASK: &str = "M005-S007-T0002";

fn peers() -> PathBuf {
    chipset_testkit::peer_fixtures()
}

fn place_hook(env: &Env, fixture: &str) {
    let hooks = env.root().join("hooks");
    fs::create_dir_all(&hooks).unwrap();
    fs::copy(
        peers().join(format!("tibsfox/hooks/{fixture}.json")),
        hooks.join(format!("{AGENT}.json")),
    )
    .unwrap();
}

fn hook_status(env: &Env) -> Value {
    env.run(&["--json", "hook", "show", AGENT]).json()["status"].clone()
}

#[test]
fn tibsfox_hooks_go_through_their_lifecycle() {
    let mut transcript = String::new();
    for (fixture, status) in TIBSFOX {
        let mut env = Env::new();
        place_hook(&env, fixture);
        let shown = env.ok(&["--json", "hook", "show", AGENT]).json();
        assert_eq!(shown["status"], status, "{fixture}");
        assert_eq!(shown["generation"], 0, "{fixture}");
        if status != "empty" {
            assert_eq!(shown["work_item"]["bead_id"], "bead-b29c90a316");
            assert_eq!(
                shown["work_item"]["priority"], "P2",
                "{fixture}: extras shown"
            );
        }
        // Not in the transcript: its age column follows the wall clock.
        let list = env.run(&["hook", "list"]);
        assert_eq!(list.code, 0, "{fixture}: {list:?}");
        assert!(
            list.stdout.contains(&format!("{AGENT}  {status}")),
            "{list:?}"
        );
        let steps: &[&str] = match status {
            "pending" => &["activate", "touch", "complete", "clear"],
            "active" => &["touch", "complete", "clear"],
            "completed" => &["clear"],
            _ => &[],
        };
        for step in steps {
            env.ok(&["hook", step, AGENT]);
            let file: Value = serde_json::from_slice(
                &fs::read(env.root().join(format!("hooks/{AGENT}.json"))).unwrap(),
            )
            .unwrap();
            assert!(
                file.get("agentId").is_none() && file.get("workItem").is_none(),
                "{file}"
            );
            if *step != "clear" {
                assert_eq!(
                    file["work_item"]["description"], "one paragraph",
                    "{fixture} {step}"
                );
            }
        }
        assert_eq!(hook_status(&env), "empty", "{fixture}");
        env.ok(&[
            "hook", "assign", AGENT, "--bead", "gt-next", "--title", "Next", "--by", "mayor",
        ]);
        for step in ["activate", "touch", "complete", "clear"] {
            env.ok(&["hook", step, AGENT]);
        }
        assert_eq!(hook_status(&env), "empty");
        transcript.push_str(&format!("### {fixture}.json\n{}", env.take()));
    }
    snap!("peers_tibsfox_lifecycle", transcript);
}

#[test]
fn an_unsupported_hook_status_is_reported_never_repaired() {
    let mut env = Env::new();
    let hooks = env.root().join("hooks");
    fs::create_dir_all(&hooks).unwrap();
    let bytes = json!({
        "agentId": AGENT, "lastActivity": "2026-11-23T04:36:15.101Z", "status": "paused",
        "workItem": {"beadId": "bead-b29c90a316", "title": "Add README section"},
    })
    .to_string();
    fs::write(hooks.join(format!("{AGENT}.json")), &bytes).unwrap();
    env.fails(1, &["hook", "show", AGENT]);
    env.fails(1, &["hook", "activate", AGENT]);
    env.fails(1, &["hook", "assign", AGENT, "--bead", "b", "--title", "t"]);
    env.fails(1, &["hook", "list"]);
    let doctor = env.step(&["doctor", "--fix"]);
    assert_eq!(
        doctor.code, 1,
        "an unsupported file is a problem left for a person: {doctor:?}"
    );
    assert!(
        doctor
            .stdout
            .contains("unsupported by this version (left in place)"),
        "{doctor:?}"
    );
    assert_eq!(
        fs::read_to_string(hooks.join(format!("{AGENT}.json"))).unwrap(),
        bytes
    );
    assert!(!hooks.join(".quarantine").exists());
    snap!("peers_unsupported_hook", env.take());
}

/// Copies every fixture folder to where chipset reads it; fails on a folder
/// it does not know, so a new fixture cannot be skipped silently.
/// `hook` names the Tibsfox hook to place as `hooks/polecat-alpha.json`
/// (all four were written for that one agent).
fn copy_every_fixture(env: &Env, hook: &str) {
    let root = peers();
    let mut peers_seen = Vec::new();
    for peer in fs::read_dir(&root).unwrap() {
        let peer = peer.unwrap();
        if !peer.file_type().unwrap().is_dir() {
            continue; // the README
        }
        let name = peer.file_name().to_string_lossy().into_owned();
        for folder in fs::read_dir(peer.path()).unwrap() {
            let folder = folder.unwrap().file_name().to_string_lossy().into_owned();
            match (name.as_str(), folder.as_str()) {
                ("nubos-pilot", "messages") => {
                    chipset_testkit::copy_dir(
                        &peer.path().join("messages"),
                        &env.root().join("mail"),
                    );
                }
                ("tibsfox", "hooks") => place_hook(env, hook),
                other => panic!("fixture folder {other:?} has no place in a state root yet"),
            }
        }
        peers_seen.push(name);
    }
    peers_seen.sort();
    assert_eq!(peers_seen, ["nubos-pilot", "tibsfox"]);
}

#[test]
fn doctor_fix_leaves_every_peer_file_in_place_and_every_gate_as_written() {
    for (fixture, status) in TIBSFOX {
        let mut env = Env::new();
        copy_every_fixture(&env, fixture);
        let before = tree(env.root());
        assert!(before.len() >= 6, "{before:?}");

        let doctor = env.step(&["doctor", "--fix"]);
        assert_eq!(doctor.code, 0, "{fixture}: {doctor:?}");
        let after = tree(env.root());
        let lost: Vec<_> = before
            .iter()
            .filter(|(path, bytes)| after.get(*path) != Some(*bytes))
            .map(|(path, _)| path.display().to_string())
            .collect();
        assert!(
            lost.is_empty(),
            "{fixture}: moved or changed by doctor --fix: {lost:?}\n{doctor:?}"
        );
        assert!(
            after
                .keys()
                .all(|p| !p.to_string_lossy().contains(".quarantine")),
            "{fixture}: {:?}",
            after.keys().collect::<Vec<_>>()
        );

        // The gates answer as the writers intended.
        assert_eq!(hook_status(&env), status, "{fixture}");
        let pending = env.step(&["--json", "mail", "pending", NUBOS_TASK]);
        assert_eq!(pending.code, 0, "{fixture}: {pending:?}");
        let ids: Vec<String> = pending
            .json()
            .as_array()
            .expect("a list of open requests")
            .iter()
            .map(|m| m["id"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(ids, [NUBOS_OPEN_REQUEST], "{fixture}: {pending:?}");
        let inbox = env.step(&["--json", "mail", "inbox", "np-executor"]);
        assert_eq!(inbox.code, 0, "{fixture}: {inbox:?}");
        assert!(
            inbox.stdout.contains(NUBOS_OPEN_REQUEST),
            "{fixture}: {inbox:?}"
        );
        assert_eq!(
            tree(env.root()),
            after,
            "{fixture}: the gates changed nothing"
        );
    }
}

/// A reminder row holding a severity this version does not know.
#[test]
fn an_unsupported_reminder_is_reported_never_quarantined() {
    let mut env = Env::new();
    env.ok(&[
        "remind",
        "open",
        "--kind",
        "spec_draft",
        "--source-type",
        "spec",
        "--source-id",
        "s-1",
        "--message",
        "review the spec",
    ]);
    let files: Vec<PathBuf> = tree(env.root())
        .into_keys()
        .filter(|p| p.starts_with("reminders") && p.extension().is_some_and(|e| e == "json"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let path = env.root().join(&files[0]);
    let mut v: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    v["severity"] = json!("urgent");
    fs::write(&path, v.to_string()).unwrap();
    let doctor = env.step(&["doctor", "--fix"]);
    assert_eq!(doctor.code, 1, "{doctor:?}");
    assert!(
        doctor.stdout.contains(
            "holds reminder severity `urgent`, unsupported by this version (left in place)"
        ),
        "{doctor:?}"
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), v.to_string());
}
