//! The product as its users reach it: through the `chipset` facade, and by
//! running the examples the README names.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "tests plant, corrupt and inspect files as another program would, outside the store's API"
)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use chipset::bus::Bus;
use chipset::hook::BeadId;
use chipset::hook::Pickup;
use chipset::r#loop::{
    AttemptOutcome, Dispatcher, DispatcherConfig, Topic, Witness, WitnessAction, WitnessConfig,
    WorkOutcome, Worker, WorkerConfig,
};
use chipset::mail::{Mail, ManifestEvent};
use chipset::store::{AgentId, ManualClock, StateDir, StateOptions, Timestamp};

fn id(name: &str) -> AgentId {
    AgentId::new(name).unwrap()
}

/// The gastown story on a manual clock, through the facade only: a
/// dispatcher, two workers (one hangs) and a witness; each work item is
/// completed exactly once, and the mail and the bus agree.
#[test]
fn the_gastown_story_through_the_facade() {
    let clock = ManualClock::new(Timestamp::from_unix_ms(1_772_706_900_000));
    let tmp = tempfile::tempdir().unwrap();
    let state = StateDir::open_with(
        tmp.path().join("state"),
        StateOptions {
            clock: Arc::new(clock.clone()),
            ..StateOptions::default()
        },
    )
    .unwrap();
    let (mayor, alpha, charlie) = (id("mayor"), id("polecat-alpha"), id("polecat-charlie"));
    let dispatcher = Dispatcher::new(
        state.clone(),
        mayor.clone(),
        [alpha.clone(), charlie.clone()],
        DispatcherConfig::default(),
    );
    let witness = Witness::new(
        state.clone(),
        id("witness"),
        mayor.clone(),
        WitnessConfig {
            stall_threshold: Duration::from_secs(300),
            nudge_interval: Duration::from_secs(60),
            grace: Duration::ZERO,
            ..WitnessConfig::default()
        },
    );
    let worker = |who: &AgentId| {
        Worker::new(
            state.clone(),
            who.clone(),
            mayor.clone(),
            WorkerConfig::default(),
        )
    };

    dispatcher
        .submit(BeadId::new("gt-001").unwrap(), "Add README section")
        .unwrap();
    dispatcher
        .submit(BeadId::new("gt-002").unwrap(), "Bump dependencies")
        .unwrap();
    assert_eq!(dispatcher.tick().unwrap().len(), 2, "both beads assigned");

    // Alpha works and completes; charlie picks its work up and hangs.
    let done = worker(&alpha).run_once(|_| Ok("done".to_owned())).unwrap();
    assert!(matches!(done, WorkOutcome::Completed { .. }), "{done:?}");
    let Pickup::Started(_) = state_hooks(&state).pickup(&charlie).unwrap() else {
        panic!("charlie had pending work")
    };
    dispatcher.tick().unwrap();

    // Hours pass in milliseconds: health check, stall warning, one escalation.
    let mut escalations = 0;
    for _ in 0..4 {
        clock.advance(Duration::from_secs(301));
        escalations += witness
            .tick()
            .unwrap()
            .iter()
            .filter(|a| matches!(a, WitnessAction::Escalated { .. }))
            .count();
    }
    assert_eq!(escalations, 1);

    // The dispatcher takes the work from charlie and alpha completes it.
    dispatcher.tick().unwrap();
    let done = worker(&alpha).run_once(|_| Ok("done".to_owned())).unwrap();
    assert!(matches!(done, WorkOutcome::Completed { .. }), "{done:?}");
    dispatcher.tick().unwrap();

    let ledger = dispatcher.ledger().unwrap();
    assert_eq!(ledger.items.len(), 2);
    for entry in &ledger.items {
        assert!(entry.is_done(), "{entry:?}");
        let completed: Vec<_> = entry
            .attempts
            .iter()
            .filter(|t| t.outcome == AttemptOutcome::Completed)
            .collect();
        assert_eq!(completed.len(), 1, "{entry:?}");
        assert_eq!(completed[0].agent, alpha);
    }
    let sent = |subject: &str| {
        Mail::new(state.clone())
            .read_manifest()
            .unwrap()
            .iter()
            .filter(|e| matches!(e, ManifestEvent::Sent { subject: s, .. } if s == subject))
            .count()
    };
    assert_eq!(sent(&Topic::HealthEscalation.to_string()), 1);
    assert_eq!(sent(&Topic::CompletionReport.to_string()), 2);
    // The dispatcher consumed its wake-ups: nothing is left for it on the bus.
    assert!(Bus::new(state.clone()).pending(&mayor).unwrap().is_empty());
}

fn state_hooks(state: &StateDir) -> chipset::hook::Hooks {
    chipset::hook::Hooks::new(state.clone())
}

/// The built example binaries sit in `target/<profile>/examples/`, beside
/// this test's `deps/` directory; `cargo test` builds them.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let path = profile_dir.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is missing: run the suite with `cargo test --workspace`, which builds the examples",
        path.display()
    );
    path
}

/// `cargo run --example nubosloop` (it takes no time from a clock, so its
/// story is the same on every machine).
#[test]
fn the_nubosloop_example_commits_one_task_and_escalates_the_other() {
    // A root of the test's own: without one the example keeps a temporary
    // directory for its reader, which a test run would leave behind.
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(example("nubosloop"))
        .arg("--root")
        .arg(tmp.path().join("state"))
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("commit blocked (pending replies: dead-code)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("M005-S007-T0001: committed after 2 round(s)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("stalemate: escalate to a human"),
        "{stdout}"
    );
    assert!(
        stdout.contains("M005-S007-T0002: escalated after 2 round(s)"),
        "{stdout}"
    );
}

/// `cargo run --example tour`: the front door's story, through `Chipset` only.
#[test]
fn the_tour_example_walks_through_the_front_door() {
    let out = Command::new(example("tour")).output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("gate: 1 request pending, 0 once answered"),
        "{stdout}"
    );
    assert!(
        stdout.contains("mayor woke to polecat-alpha's event: true"),
        "{stdout}"
    );
    let status: serde_json::Value =
        serde_json::from_str(&stdout[stdout.find('{').unwrap()..]).unwrap();
    assert_eq!(status["agents"][1]["hook"]["status"], "completed");
}

/// `cargo run --example gastown | head`: every example the README names
/// ends with success and no panic when its reader has gone (its stdout a
/// pipe whose read end is closed before it starts), as the `chipset`
/// commands do: a closed pipe is not a failure.
#[test]
fn every_example_ends_quietly_when_its_reader_has_gone() {
    let tmp = tempfile::tempdir().unwrap();
    for name in ["tour", "store_tour", "gastown", "nubosloop"] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let mut command = Command::new(example(name));
        if name != "tour" {
            command.arg("--root").arg(tmp.path().join(name));
        }
        let out = command
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {:?}\n{stderr}", out.status);
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
    }
}
