//! The front door: `Chipset`'s status view (the CLI's `--json` form and
//! the MCP tool's) and its one doctor report.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "tests plant corrupt files as another program would, outside the store's API"
)]

use std::time::Duration;

use chipset::bus::{NewEvent, Priority};
use chipset::mail::NewMessage;
use chipset::nudge::{NewNudge, NudgeType};
use chipset::store::{AgentId, DoctorMode};
use chipset::{Chipset, HookLine, NudgeLine, PresenceLine};
use serde_json::json;

fn agent(name: &str) -> AgentId {
    name.parse().unwrap()
}

fn door() -> (tempfile::TempDir, Chipset) {
    let tmp = tempfile::tempdir().unwrap();
    let door = Chipset::open(tmp.path().join("state")).unwrap();
    (tmp, door)
}

/// The view's JSON for every kind of line, with the age left out.
#[test]
fn status_serializes_as_the_command_lines_json() {
    let (_tmp, door) = door();
    let (mayor, alpha, beta) = (
        agent("mayor"),
        agent("polecat-alpha"),
        agent("polecat-beta"),
    );
    door.hooks()
        .assign(&alpha, "gt-1".parse().unwrap(), "README", Some(&mayor))
        .unwrap();
    let nudge = NewNudge::new(agent("witness"), NudgeType::StallWarning, "quiet");
    let _ = door.nudges().send(&beta, &nudge).unwrap();
    let _ = door
        .bus()
        .publish(
            &alpha,
            &NewEvent::new("mayor", "k").with_priority(Priority::Critical),
        )
        .unwrap();
    let note = NewMessage::notify(
        mayor.clone(),
        alpha.clone(),
        "t1".parse().unwrap(),
        "hi",
        "b",
    );
    door.mail().send(&note).unwrap();
    std::fs::write(door.state().root().join("hooks/polecat-gamma.json"), "{").unwrap();

    let status = door.status().unwrap();
    let names: Vec<&str> = status.agents.iter().map(|l| l.agent.as_str()).collect();
    assert_eq!(names, ["polecat-alpha", "polecat-beta", "polecat-gamma"]);
    assert!(matches!(status.agents[2].hook, HookLine::Corrupt(_)));
    assert_eq!(status.agents[0].bus.as_ref().unwrap().critical(), 1);

    let mut doc = serde_json::to_value(&status).unwrap();
    doc["agents"][0]["hook"]
        .as_object_mut()
        .unwrap()
        .remove("age_ms")
        .expect("a held hook has its age");
    doc["agents"][0]["hook"]
        .as_object_mut()
        .unwrap()
        .remove("last_activity");
    doc["agents"][1]["hook"]
        .as_object_mut()
        .unwrap()
        .remove("age_ms");
    doc["agents"][1]["hook"]
        .as_object_mut()
        .unwrap()
        .remove("last_activity");
    doc["agents"][2]["hook"]["error"] = json!("…");
    assert_eq!(
        doc,
        json!({
            "agents": [
                {
                    "agent": "polecat-alpha",
                    "hook": {"status": "pending", "bead_id": "gt-1", "generation": 1},
                    "nudge": null,
                    "inbox": 1,
                    "bus": {
                        "pending": 1,
                        "by_priority": {"critical": 1, "high": 0, "normal": 0, "low": 0},
                        "unreadable_names": 0,
                        "presence": "absent",
                    },
                },
                {
                    "agent": "polecat-beta",
                    "hook": {"status": "none"},
                    "nudge": {"pending": true, "type": "stall_warning", "from": "witness"},
                    "inbox": 0,
                    "bus": null,
                },
                {
                    "agent": "polecat-gamma",
                    "hook": {"status": "corrupt", "error": "…"},
                    "nudge": null,
                    "inbox": 0,
                    "bus": null,
                },
            ],
            "reminders": {"open": 0, "by_kind": {}},
        })
    );
}

/// One agent's status reads only its files and always shows its nudge
/// and queue; it serializes as its line with the reminders beside it.
#[test]
fn agent_status_is_the_agents_line_with_the_reminders() {
    let (_tmp, door) = door();
    let alpha = agent("polecat-alpha");
    let report = door.agent_status(&alpha).unwrap();
    assert_eq!(report.line.hook, HookLine::None);
    assert_eq!(report.line.nudge, Some(NudgeLine::None));
    assert_eq!(
        report.line.bus.as_ref().unwrap().presence,
        PresenceLine::Absent
    );
    let doc = serde_json::to_value(&report).unwrap();
    assert_eq!(doc["agent"], "polecat-alpha");
    assert_eq!(doc["nudge"], json!({"pending": false}));
    assert_eq!(doc["bus"]["pending"], 0);
    assert_eq!(doc["reminders"], json!({"open": 0, "by_kind": {}}));
    assert!(
        door.status().unwrap().agents.is_empty(),
        "reading created nothing"
    );
}

/// The doctor runs every channel's doctor: a check reports, a fix repairs,
/// and a second check is clean.
#[test]
fn the_doctor_checks_every_channel_and_fixes_into_one_report() {
    let (_tmp, door) = door();
    let root = door.state().root().to_owned();
    std::fs::create_dir_all(root.join("hooks")).unwrap();
    std::fs::write(root.join("hooks/broken.json"), "{").unwrap();
    std::fs::create_dir_all(root.join("loop/dispatcher/beads")).unwrap();
    std::fs::write(root.join("loop/dispatcher/beads/gt-1.json"), "{\"state\":").unwrap();

    let check = door.doctor(DoctorMode::Check).unwrap();
    let names: Vec<&str> = check.areas.iter().map(|a| a.name).collect();
    assert_eq!(
        names,
        [
            "hooks",
            "nudge",
            "reminders",
            "mail",
            "bus",
            "loop",
            "leases",
            "directory",
            "pool"
        ]
    );
    let areas: Vec<&str> = check.findings().map(|(area, _)| area).collect();
    assert_eq!(areas, ["hooks", "loop"]);
    assert_eq!(check.open(), 2);
    assert!(!check.is_clean());
    assert_eq!(check.failures().count(), 0);
    assert_eq!(check.in_flight(), (0, Duration::ZERO));

    let fix = door.doctor(DoctorMode::Fix).unwrap();
    assert_eq!(fix.open(), 0, "{fix:?}");
    assert!(door.doctor(DoctorMode::Check).unwrap().is_clean());
}

/// The door's leases share its root: a lease taken through it shows in
/// its status and blocks another agent's commit check.
#[test]
fn leases_through_the_door_show_in_its_status() {
    use chipset::lease::{LeaseMode, LeaseRequest};
    let (_tmp, door) = door();
    let req = LeaseRequest::new(agent("alice"), LeaseMode::Exclusive, ["src/auth/**"]);
    let granted = door.leases().acquire(&req).unwrap().lease;
    let status = door.status().unwrap();
    assert_eq!(status.leases.len(), 1);
    assert_eq!(status.leases[0].token, granted.token);
    let blocked = door
        .leases()
        .check(&agent("bob"), &["src/auth/login.rs"])
        .unwrap();
    assert_eq!(blocked.len(), 1);
}

/// A nubos-pilot project's mail folder given as the door's mail folder is
/// every part's mail: the fixture's open request closes the gate and
/// shows in the brief, status, search and the directory's last activity;
/// what chipset sends (a message, a forced lease release's notice) lands
/// in the folder, a message another program writes there wakes a wait,
/// the doctor checks the folder, and the state root gets no `mail/`.
#[test]
fn a_mail_folder_is_every_parts_mail() {
    use chipset::directory::Registration;
    use chipset::directory::Source;
    use chipset::lease::{LeaseMode, LeaseRequest, Released};
    use chipset::mail::{Mail, MailConfig};
    use chipset::search::Query;
    use chipset::store::{Clock, ManualClock, StateDir, StateOptions, Timestamp};
    use std::sync::Arc;

    let tmp = tempfile::tempdir().unwrap();
    let folder = chipset_testkit::nubos_messages(tmp.path());
    let root = tmp.path().join(".chipset/state");
    // One manual clock: a send after a registration is later, not a tie.
    let clock = Arc::new(ManualClock::new(Timestamp::from_unix_ms(1_795_500_000_000)));
    let open = |dir: &std::path::Path| {
        let clock: Arc<dyn Clock> = clock.clone();
        StateDir::open_with(
            dir,
            StateOptions {
                clock,
                ..StateOptions::default()
            },
        )
        .unwrap()
    };
    let mut config = chipset::Config::default();
    config.mail_folder = Some(open(&folder));
    let door = Chipset::with_config(open(&root), config);
    let (critic, executor) = (agent("np-critic"), agent("np-executor"));
    let task = "M005-S007-T0002".parse().unwrap();

    // The fixture's unanswered request: the gate, the brief, status, search.
    assert_eq!(door.mail().pending_replies(&task).unwrap().len(), 1);
    let brief = door.attention().brief(&executor).unwrap();
    assert!(!brief.is_empty(), "{brief:?}");
    let status = door.status().unwrap();
    let line = status.agents.iter().find(|l| l.agent == executor).unwrap();
    assert_eq!(line.inbox, 1);
    let hits = door.search(&Query::new("FoobarService")).unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    door.directory()
        .register(&critic, &Registration::new())
        .unwrap();
    clock.advance(Duration::from_secs(1));

    // What chipset sends lands in the folder, and its manifest says when
    // the critic was last active.
    let sent = door
        .mail()
        .send(&NewMessage::notify(
            critic.clone(),
            executor.clone(),
            task.clone(),
            "s",
            "b",
        ))
        .unwrap();
    let inbox = folder.join("inbox/np-executor");
    assert!(inbox.join(format!("{}.json", sent.id)).is_file());
    let status = door.status().unwrap();
    let line = status.agents.iter().find(|l| l.agent == critic).unwrap();
    let seen = line.profile.as_ref().and_then(|p| p.last_seen.as_ref());
    assert_eq!(
        seen.map(|s| (s.at, s.source)),
        Some((sent.created_at, Source::Sent))
    );
    let req = LeaseRequest::new(executor.clone(), LeaseMode::Exclusive, ["src/**"]);
    let lease = door.leases().acquire(&req).unwrap().lease;
    let released = door.leases().force_release(&critic, lease.token, "stuck");
    assert!(
        matches!(released, Ok(Released::Released(_))),
        "{released:?}"
    );
    let notices = door.mail().inbox(&executor).unwrap();
    assert!(
        notices.iter().any(|m| m.subject == "lease-force-released"),
        "{notices:?}"
    );

    // Another program's message in the folder wakes a wait on the brief.
    let empty = agent("np-orchestrator");
    assert!(door.attention().brief(&empty).unwrap().is_empty());
    let peer = Mail::in_folder(StateDir::open(&folder).unwrap(), MailConfig::default());
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        let note = NewMessage::notify(
            agent("np-critic"),
            agent("np-orchestrator"),
            "M005-S007-T0002".parse().unwrap(),
            "s",
            "b",
        );
        peer.send(&note).unwrap();
    });
    let woke = door
        .attention()
        .wait(&empty, Duration::from_secs(30))
        .unwrap();
    writer.join().unwrap();
    assert!(!woke.is_empty(), "the wait timed out");

    assert!(door.doctor(DoctorMode::Check).unwrap().is_clean());
    assert!(
        !root.join("mail").exists(),
        "the state root got its own mail"
    );

    // The doctor looks in the folder: a damaged message, a stale temp,
    // and mail under the root that nothing reads any more.
    let damaged = inbox.join("1795400000000-00000000-0000-4000-8000-000000000000.json");
    std::fs::write(&damaged, "{").unwrap();
    let temp = inbox.join(".x.json.1.2.deadbeef.tmp");
    std::fs::write(&temp, "").unwrap();
    let old = std::time::SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&temp)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let own = Mail::new(open(&root));
    own.send(&NewMessage::notify(
        critic.clone(),
        executor.clone(),
        task,
        "s",
        "b",
    ))
    .unwrap();
    let check = door.doctor(DoctorMode::Check).unwrap();
    let mail: Vec<(&str, Option<&std::path::Path>)> = check
        .findings()
        .filter(|(area, _)| *area == "mail")
        .map(|(_, f)| (f.code, f.path.as_deref()))
        .collect();
    assert!(
        mail.contains(&("mail-elsewhere", Some(root.join("mail").as_path()))),
        "{mail:?}"
    );
    assert!(
        mail.iter()
            .any(|(_, path)| *path == Some(damaged.as_path())),
        "{mail:?}"
    );
    assert_eq!(check.stale_temps, [temp], "{check:?}");
}

/// `mail-elsewhere` is for a folder beside the root (a project's): a
/// folder that is the root's own `mail/` is no folder of its own, and one
/// elsewhere (a project below a wider folder's root) leaves the root's
/// mail to the commands run outside the project.
#[test]
fn only_a_folder_beside_the_root_leaves_its_mail_unread() {
    use chipset::mail::Mail;
    use chipset::store::StateDir;

    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join(".chipset/state");
    let note = NewMessage::notify(agent("a"), agent("b"), "t-1".parse().unwrap(), "s", "b");
    Mail::new(StateDir::open(&root).unwrap())
        .send(&note)
        .unwrap();
    let with_folder = |folder: &std::path::Path| {
        let mut config = chipset::Config::default();
        config.mail_folder = Some(StateDir::open(folder).unwrap());
        Chipset::with_config(StateDir::open(&root).unwrap(), config)
    };
    let codes = |door: &Chipset| -> Vec<&'static str> {
        let check = door.doctor(DoctorMode::Check).unwrap();
        check.findings().map(|(_, f)| f.code).collect()
    };
    let own = with_folder(&root.join("mail"));
    assert!(own.mail_folder().is_none());
    assert_eq!(own.mail().inbox(&agent("b")).unwrap().len(), 1);
    assert!(codes(&own).is_empty(), "{:?}", codes(&own));
    let below = with_folder(&tmp.path().join("sub/project/.nubos-pilot/messages"));
    assert!(below.mail_folder().is_some());
    assert!(codes(&below).is_empty(), "{:?}", codes(&below));
    let beside = with_folder(&tmp.path().join(".nubos-pilot/messages"));
    assert_eq!(codes(&beside), ["mail-elsewhere"]);
}

/// `open_with` reads its root as `open` does: a server's root is refused,
/// naming `open_server`, and no folder of that name appears (it made
/// `./postgres:/u@localhost/team`).
#[test]
fn open_with_refuses_a_server_root_and_makes_no_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let back = std::env::current_dir().unwrap();
    // Every other test here works under absolute temp paths.
    std::env::set_current_dir(tmp.path()).unwrap();
    let opened: Vec<_> = [
        "postgres://u:s3cret@localhost/team",
        "postgresql://u@localhost/team",
        "host=localhost dbname=team",
    ]
    .into_iter()
    .map(|root| (root, Chipset::open_with(root, Default::default())))
    .collect();
    let made: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    std::env::set_current_dir(back).unwrap();
    for (root, opened) in opened {
        match opened {
            Err(e @ chipset::Error::ServerRoot { .. }) => {
                let text = e.to_string();
                assert!(text.contains("Chipset::open_server"), "{text}");
                assert!(!text.contains("s3cret"), "{text}");
                let kind = chipset::Classify::kind(&e);
                assert_eq!(kind, chipset::ErrorKind::Invalid);
            }
            other => panic!("{root}: expected ServerRoot, got {:?}", other.map(drop)),
        }
    }
    assert!(made.is_empty(), "{made:?}");
    // A folder is still opened with the options.
    let dir = tmp.path().join("state");
    let door = Chipset::open_with(&dir, Default::default()).unwrap();
    assert!(door.server().is_none() && door.state().root().ends_with("state"));
}
