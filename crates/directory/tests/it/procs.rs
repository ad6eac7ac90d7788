//! Real processes: registrations that race on one profile lose no field,
//! a SIGKILL mid-registration (or mid list change) leaves every profile
//! readable, and a group send killed mid-fan-out is completed once by a
//! retry with its id. The registration races run on a directory and, when
//! `CHIPSET_TEST_PG` names a server, on PostgreSQL (issue 30) from the
//! same bodies; the group send's mail is still the local root's.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use chipset_directory::{Directory, Recipients, Registration, Role};
use chipset_mail::{Mail, MessageId, NewMessage};
use chipset_store::{AgentId, ReadOutcome, StateDir, TaskId};
use chipset_testkit as kit;

use crate::place::Place;

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

const GROUP: &str = "1772706900123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab";

fn group_send(dir: &Directory, root: &Path) -> Vec<chipset_mail::Message> {
    let lead = AgentId::new("lead").unwrap();
    let all: Recipients = "@all".parse().unwrap();
    let to = dir.resolve(&all, &lead).unwrap().agents;
    let draft = NewMessage::notify(lead, to, TaskId::new("t1").unwrap(), "shipped", "v1.2")
        .with_id(MessageId::new(GROUP).unwrap());
    Mail::new(StateDir::open(root).unwrap())
        .send_group(&draft)
        .unwrap()
}

#[test]
fn child_entry() {
    let Some(role) = kit::child_role() else {
        return;
    };
    let (dir, state) = Place::open_spec(role.arg(0));
    if role.arg(1) == "group" {
        kit::say("dir> ", "ready");
        group_send(&dir, state.root());
        return;
    }
    if role.arg(1) == "lists" {
        let agents = ["a", "b", "c"].map(|n| AgentId::new(n).unwrap());
        let rounds: u64 = role.parse(2);
        for n in 0..rounds {
            let list = Role::new(format!("l{}", n % 20)).unwrap();
            if n % 2 == 0 {
                dir.list_add(&list, &agents).unwrap();
            } else {
                dir.list_remove(&list, &agents[..2]).unwrap();
            }
            if n == 0 {
                kit::say("dir> ", "ready");
            }
        }
        return;
    }
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

fn args(place: &Place, root: &Path, field: &str, rounds: u64) -> Vec<String> {
    vec![place.spec(root), field.to_owned(), rounds.to_string()]
}

#[test]
fn racing_registrations_lose_no_field() {
    registrations_race(&Place::fs());
}

#[test]
fn racing_registrations_on_postgres_lose_no_field() {
    if let Some(place) = Place::pg("racing_registrations_on_postgres") {
        registrations_race(&place);
    }
}

/// Four processes each register one field of the same three profiles.
fn registrations_race(place: &Place) {
    let tmp = tempfile::tempdir().unwrap();
    let fields = ["program", "model", "host", "note"];
    let mut children: Vec<_> = fields
        .iter()
        .map(|f| started(&args(place, tmp.path(), f, 30), f))
        .collect();
    for child in &mut children {
        kit::wait_ok(child, kit::PATIENT);
    }
    let dir = place.open(&StateDir::open(tmp.path()).unwrap());
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
    if place.is_pg() {
        // Nothing went through the local root.
        assert!(!tmp.path().join("agents").exists());
    }
}

#[test]
fn sigkill_mid_registration_leaves_every_profile_readable() {
    sigkill_registrations(&Place::fs());
}

#[test]
fn sigkill_on_postgres_mid_registration_leaves_every_profile_readable() {
    if let Some(place) = Place::pg("sigkill_on_postgres_mid_registration") {
        sigkill_registrations(&place);
    }
}

/// A registering process killed at four points: every profile reads.
fn sigkill_registrations(place: &Place) {
    let tmp = tempfile::tempdir().unwrap();
    for round in 0..4u64 {
        let mut child = started(&args(place, tmp.path(), "note", 1_000_000), "note");
        let ready = kit::lines(&mut child)
            .map_while(Result::ok)
            .any(|l| l == "dir> ready");
        assert!(ready, "the child started");
        std::thread::sleep(Duration::from_millis(5 + round * 7));
        kit::kill9(&mut child);
        let dir = place.open(&StateDir::open(tmp.path()).unwrap());
        let roster = dir.list(&Default::default()).unwrap();
        assert!(roster.corrupt.is_empty(), "{:?}", roster.corrupt);
        assert!(!roster.items.is_empty());
    }
}

#[test]
fn sigkill_mid_list_changes_leaves_every_profile_readable() {
    sigkill_list_changes(&Place::fs());
}

#[test]
fn sigkill_on_postgres_mid_list_changes_leaves_every_profile_readable() {
    if let Some(place) = Place::pg("sigkill_on_postgres_mid_list_changes") {
        sigkill_list_changes(&place);
    }
}

/// A process changing lists killed at three points: every profile reads.
fn sigkill_list_changes(place: &Place) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = place.open(&StateDir::open(tmp.path()).unwrap());
    for a in ["a", "b", "c"] {
        dir.register(&AgentId::new(a).unwrap(), &Registration::new())
            .unwrap();
    }
    for round in 0..3u64 {
        let mut child = started(&args(place, tmp.path(), "lists", 1_000_000), "lists");
        let ready = kit::own_lines(&mut child, "dir> ").any(|l| l == "ready");
        assert!(ready, "the child started");
        std::thread::sleep(Duration::from_millis(5 + round * 11));
        kit::kill9(&mut child);
        let roster = dir.list(&Default::default()).unwrap();
        assert!(roster.corrupt.is_empty(), "{:?}", roster.corrupt);
        assert_eq!(roster.items.len(), 3);
    }
}

/// A group send to 120 agents killed at a random point of its fan-out;
/// the retry with the group id leaves exactly one copy in every inbox.
#[test]
fn a_group_send_killed_mid_fan_out_is_completed_once_by_a_retry() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = Directory::new(StateDir::open(tmp.path()).unwrap());
    let names: Vec<String> = (0..120).map(|i| format!("agent-{i:03}")).collect();
    for n in names.iter().map(String::as_str).chain(["lead"]) {
        dir.register(&AgentId::new(n).unwrap(), &Registration::new())
            .unwrap();
    }
    let seed = kit::Jitter::seed_from_time();
    let mut rng = kit::Jitter::new(seed);
    let mut child = started(&args(&Place::fs(), tmp.path(), "group", 0), "group");
    let ready = kit::own_lines(&mut child, "dir> ").any(|l| l == "ready");
    assert!(ready, "the child started");
    std::thread::sleep(Duration::from_millis(rng.below(40)));
    kit::kill9(&mut child);
    let delivered = names
        .iter()
        .filter(|n| tmp.path().join("mail/inbox").join(n).exists())
        .count();
    let sent = group_send(&dir, tmp.path());
    assert_eq!(
        sent.len(),
        120,
        "seed {seed}, {delivered} delivered before the kill"
    );
    for n in &names {
        let files: Vec<_> = std::fs::read_dir(tmp.path().join("mail/inbox").join(n))
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .collect();
        assert_eq!(files.len(), 1, "{n}: seed {seed}");
    }
}
