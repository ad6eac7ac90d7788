//! Real processes: registrations that race on one profile lose no field,
//! and a SIGKILL mid-registration leaves every profile readable.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use chipset_directory::{Directory, Registration};
use chipset_store::{AgentId, ReadOutcome, StateDir};
use chipset_testkit as kit;

const ENTRY: &str = "procs::child_entry";

fn change(field: &str, value: String) -> Registration {
    let mut r = Registration::new();
    match field {
        "program" => r.program = Some(value),
        "model" => r.model = Some(value),
        "host" => r.host = Some(value),
        _ => r.note = Some(value),
    }
    r
}

#[test]
fn child_entry() {
    let Some(role) = kit::child_role() else {
        return;
    };
    let dir = Directory::new(StateDir::open(role.arg(0)).unwrap());
    let field = role.arg(1).to_owned();
    let rounds: u64 = role.parse(2);
    let agents = ["a", "b", "c"].map(|n| AgentId::new(n).unwrap());
    let mut out = std::io::stdout().lock();
    for n in 0..rounds {
        let agent = &agents[(n % 3) as usize];
        // Profiles of varying sizes, so a torn write would show.
        let value = format!("{field}-{n}-{}", "x".repeat((n as usize * 37) % 200));
        dir.register(agent, &change(&field, value)).unwrap();
        if n == 0 {
            writeln!(out, "dir> ready").unwrap();
            out.flush().unwrap();
        }
    }
}

fn started(entry_args: &[String], field: &str) -> std::process::Child {
    kit::spawn(ENTRY, field, entry_args)
}

fn args(root: &Path, field: &str, rounds: u64) -> Vec<String> {
    vec![
        root.display().to_string(),
        field.to_owned(),
        rounds.to_string(),
    ]
}

#[test]
fn racing_registrations_lose_no_field() {
    let tmp = tempfile::tempdir().unwrap();
    let fields = ["program", "model", "host", "note"];
    let mut children: Vec<_> = fields
        .iter()
        .map(|f| started(&args(tmp.path(), f, 30), f))
        .collect();
    for child in &mut children {
        kit::wait_ok(child, kit::PATIENT);
    }
    let dir = Directory::new(StateDir::open(tmp.path()).unwrap());
    // Each process's last write to `a` (round 27) is there: none was lost
    // to another process's read-modify-write.
    let ReadOutcome::Value(p) = dir.read(&AgentId::new("a").unwrap()).unwrap() else {
        panic!("profile a is not readable");
    };
    for (field, value) in [
        ("program", &p.program),
        ("model", &p.model),
        ("host", &p.host),
        ("note", &p.note),
    ] {
        let v = value.as_deref().unwrap_or_else(|| panic!("{field} lost"));
        assert!(v.starts_with(&format!("{field}-27-")), "{field}: {v}");
    }
}

#[test]
fn sigkill_mid_registration_leaves_every_profile_readable() {
    let tmp = tempfile::tempdir().unwrap();
    for round in 0..4u64 {
        let mut child = started(&args(tmp.path(), "note", 1_000_000), "note");
        let ready = kit::lines(&mut child)
            .map_while(Result::ok)
            .any(|l| l == "dir> ready");
        assert!(ready, "the child started");
        std::thread::sleep(Duration::from_millis(5 + round * 7));
        kit::kill9(&mut child);
        let dir = Directory::new(StateDir::open(tmp.path()).unwrap());
        let roster = dir.list(&Default::default()).unwrap();
        assert!(roster.corrupt.is_empty(), "{:?}", roster.corrupt);
        assert!(!roster.agents.is_empty());
    }
}
