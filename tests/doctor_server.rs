//! The whole-state doctor on a PostgreSQL server (issue 30):
//! `Chipset::doctor` runs every part on its rows, finds what was damaged
//! through the backend, and `--fix` repairs it without touching the local
//! folder. Runs when `CHIPSET_TEST_PG` names a server.

#![cfg(feature = "postgres")]

use chipset::backend::{Backend, Dir, PgBackend, PgOptions};
use chipset::mail::NewMessage;
use chipset::store::{AgentId, DoctorMode, TaskId};

mod pg;

fn agent(name: &str) -> AgentId {
    name.parse().unwrap()
}

fn task(name: &str) -> TaskId {
    name.parse().unwrap()
}

#[test]
fn the_whole_doctor_checks_and_fixes_the_rows_on_the_server() {
    let Some(pg) = pg::Server::fresh("the_whole_doctor_checks_and_fixes_the_rows_on_the_server")
    else {
        return;
    };
    let local = tempfile::tempdir().unwrap();
    let door = pg.open(local.path());
    let raw =
        PgBackend::open_with(pg.url.expose(), PgOptions::with_schema(pg.schema.as_str())).unwrap();

    // A clean state first: every part runs, and finds nothing.
    let q = door
        .mail()
        .send(&NewMessage::request(
            agent("critic"),
            agent("exec"),
            task("t1"),
            "dead-code",
            "?",
        ))
        .unwrap();
    let clean = door.doctor(DoctorMode::Check).unwrap();
    let names: Vec<&str> = clean.areas.iter().map(|a| a.name).collect();
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
        ],
        "every part that runs on the server, none read locally"
    );
    assert!(clean.is_clean(), "{clean:#?}");

    // Damage: a corrupt hook row, and the open row of an unanswered request.
    let hooks = Dir::new("hooks").unwrap();
    let _ = raw
        .put(&hooks.key("polecat.json").unwrap(), b"{\"agent_id\": ")
        .unwrap();
    let open = Dir::new("mail")
        .and_then(|d| d.join("open"))
        .and_then(|d| d.join("t1"))
        .and_then(|d| d.key(&format!("{}.json", q.id)))
        .unwrap();
    let v = raw.read(&open).unwrap().unwrap();
    raw.remove(&open, v.version).unwrap();
    assert!(door.mail().pending_replies(&task("t1")).unwrap().is_empty());

    let mut streamed = Vec::new();
    let check = door
        .doctor_to(DoctorMode::Check, &mut |area, f| {
            streamed.push((area, f.code))
        })
        .unwrap();
    streamed.sort_unstable();
    assert_eq!(
        streamed,
        [
            ("hooks", "hook-corrupt"),
            ("mail", "messaging-missing-open-row")
        ]
    );
    assert_eq!(check.open(), 2);

    let fixed = door.doctor(DoctorMode::Fix).unwrap();
    assert!(fixed.findings().all(|(_, f)| f.is_fixed()), "{fixed:#?}");
    assert_eq!(door.mail().pending_replies(&task("t1")).unwrap(), [q]);
    assert!(door.doctor(DoctorMode::Check).unwrap().is_clean());
    // Nothing of the channels went to the local folder.
    for channel in ["hooks", "mail", "bus", "agents", "leases", "reminders"] {
        let there = chipset::store::StateDir::stat_outside(&local.path().join(channel)).unwrap();
        assert!(there.is_none(), "{channel}");
    }
}
