//! The front door on a PostgreSQL server (issue 30): `Chipset::open` with a
//! URL puts the channels on the seam on the server, and refuses the parts
//! that do not run there yet. The server half runs when `CHIPSET_TEST_PG`
//! names a server; without it those tests say so and pass.
//!
//! The file needs the `postgres` feature, which links the system's OpenSSL
//! for TLS. `cargo test --workspace` has it (the CLI turns it on); it is not
//! a dev-dependency of this crate, so `cargo run --example tour` builds on a
//! machine with nothing but the Rust toolchain.

#![cfg(feature = "postgres")]

use chipset::nudge::{NewNudge, NudgeType};
use chipset::store::AgentId;
use chipset::{Chipset, Error, Part};

mod pg;

fn agent(name: &str) -> AgentId {
    name.parse().unwrap()
}

#[test]
fn two_handles_on_one_server_share_hooks_and_nudges() {
    let Some(pg) = pg::Server::fresh("two_handles_on_one_server_share_hooks_and_nudges") else {
        return;
    };
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (pg.open(a_dir.path()), pg.open(b_dir.path()));
    assert!(a.server().is_some());
    let (mayor, polecat) = (agent("mayor"), agent("polecat"));
    a.hooks()
        .assign(
            &polecat,
            "bd-1".parse().unwrap(),
            "Fix the parser",
            Some(&mayor),
        )
        .unwrap();
    let work = b
        .hooks()
        .current(&polecat)
        .unwrap()
        .expect("the hook is on the server");
    assert_eq!(work.work.bead_id.as_str(), "bd-1");
    b.nudges()
        .send(
            &mayor,
            NewNudge::new(polecat.clone(), NudgeType::HealthCheck, "still there?"),
        )
        .unwrap();
    assert!(matches!(
        a.nudges().read_latest(&mayor).unwrap(),
        chipset::store::ReadOutcome::Value(_)
    ));
    // Nothing went to either local folder.
    for dir in [a_dir.path(), b_dir.path()] {
        for channel in ["hooks", "nudge", "mail"] {
            let there = chipset::store::StateDir::stat_outside(&dir.join(channel)).unwrap();
            assert!(there.is_none(), "{channel} in {}", dir.display());
        }
    }
}

#[test]
fn every_part_runs_on_the_server() {
    let Some(pg) = pg::Server::fresh("every_part_runs_on_the_server") else {
        return;
    };
    let local = tempfile::tempdir().unwrap();
    let door = pg.open(local.path());
    assert!(door.has(Part::Hooks) && door.has(Part::Nudges));
    for part in [
        Part::Mail,
        Part::Bus,
        Part::Reminders,
        Part::Attention,
        Part::Directory,
        Part::Leases,
        Part::Pool,
        Part::Doctor,
        Part::Loops,
        Part::Status,
        Part::Search,
    ] {
        door.require(part).unwrap();
    }
}

#[test]
fn an_unreachable_server_is_a_typed_error_without_the_password() {
    let err =
        Chipset::open("postgres://agent:s3cret-pw@127.0.0.1:1/team?connect_timeout=2").unwrap_err();
    assert!(
        matches!(
            err,
            Error::Backend(chipset::backend::Error::Unreachable { .. })
        ),
        "{err:?}"
    );
    let mut text = format!("{err} {err:?}");
    let mut source = std::error::Error::source(&err);
    while let Some(s) = source {
        text.push_str(&s.to_string());
        source = s.source();
    }
    assert!(!text.contains("s3cret-pw"), "{text}");
}

#[test]
fn a_directory_root_has_every_part() {
    let tmp = tempfile::tempdir().unwrap();
    let door = Chipset::open(tmp.path().join("state")).unwrap();
    assert!(door.server().is_none());
    for part in [
        Part::Mail,
        Part::Bus,
        Part::Status,
        Part::Doctor,
        Part::Search,
        Part::Loops,
    ] {
        door.require(part).unwrap();
    }
    assert!(door.mail().inbox_len(&agent("a")).unwrap() == 0);
}

/// The loops and the status view run on the server: a witness ticks
/// through the door's channels on one handle, and another handle's status
/// and loop counts see the team's state, with nothing in either local
/// folder.
#[test]
fn status_and_the_loops_run_on_the_server() {
    let Some(pg) = pg::Server::fresh("status_and_the_loops_run_on_the_server") else {
        return;
    };
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (pg.open(a_dir.path()), pg.open(b_dir.path()));
    let (mayor, polecat) = (agent("mayor"), agent("polecat"));
    a.hooks()
        .assign(
            &polecat,
            "bd-1".parse().unwrap(),
            "Fix the parser",
            Some(&mayor),
        )
        .unwrap();
    a.mail()
        .send(&chipset::mail::NewMessage::notify(
            mayor.clone(),
            polecat.clone(),
            "t1".parse().unwrap(),
            "status-update",
            "hello",
        ))
        .unwrap();
    a.nudges()
        .send(
            &polecat,
            NewNudge::new(mayor.clone(), NudgeType::HealthCheck, "still there?"),
        )
        .unwrap();
    let mut registration = chipset::directory::Registration::default();
    registration.program = Some("claude-code".into());
    a.directory().register(&mayor, &registration).unwrap();
    a.leases()
        .acquire(&chipset::lease::LeaseRequest::new(
            polecat.clone(),
            chipset::lease::LeaseMode::Exclusive,
            ["src/**"],
        ))
        .unwrap();
    let witness = chipset::r#loop::Witness::with_channels(
        a.channels(),
        agent("witness"),
        mayor.clone(),
        chipset::r#loop::WitnessConfig::default(),
    );
    witness.tick().unwrap();

    let status = b.status().unwrap();
    let line = |who: &AgentId| {
        status
            .agents
            .iter()
            .find(|l| &l.agent == who)
            .unwrap_or_else(|| panic!("no line for {who}: {status:?}"))
    };
    let p = line(&polecat);
    assert!(
        matches!(&p.hook, chipset::HookLine::Held { bead_id: Some(b), .. } if b.as_str() == "bd-1"),
        "{p:?}"
    );
    assert_eq!(p.inbox, 1);
    assert!(
        matches!(p.nudge, Some(chipset::NudgeLine::Pending { .. })),
        "{p:?}"
    );
    let m = line(&mayor);
    assert_eq!(
        m.profile.as_ref().unwrap().program.as_deref(),
        Some("claude-code")
    );
    assert_eq!(status.leases.len(), 1);
    let report = b.agent_status(&polecat).unwrap();
    assert_eq!(report.line.inbox, 1);
    // The loops' records are on the server: the other handle counts the
    // dispatcher's queued bead.
    let dispatcher = chipset::r#loop::Dispatcher::new(
        a.channels(),
        mayor.clone(),
        [agent("alpha")],
        chipset::r#loop::DispatcherConfig::default(),
    );
    dispatcher
        .submit("bd-9".parse().unwrap(), "Write the docs")
        .unwrap();
    let counts = b.loop_state().counts().unwrap();
    assert_eq!((counts.queued, counts.corrupt), (1, 0));
    for dir in [a_dir.path(), b_dir.path()] {
        for channel in ["hooks", "nudge", "mail", "bus", "loop", "leases", "agents"] {
            let there = chipset::store::StateDir::stat_outside(&dir.join(channel)).unwrap();
            assert!(there.is_none(), "{channel} in {}", dir.display());
        }
    }
}

/// Search on a server: each handle's index is a cache in its own local
/// folder, caught up from the server's rows; what one handle writes the
/// other finds, and a change of the hooks is seen at the next query.
#[test]
fn search_finds_what_another_handle_wrote_on_the_server() {
    let Some(pg) = pg::Server::fresh("search_finds_what_another_handle_wrote_on_the_server") else {
        return;
    };
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (pg.open(a_dir.path()), pg.open(b_dir.path()));
    let query = |words: &str| chipset::search::Query::new(words);
    let (mayor, polecat) = (agent("mayor"), agent("polecat"));
    assert!(b.search(&query("parser")).unwrap().is_empty());
    a.hooks()
        .assign(
            &polecat,
            "bd-1".parse().unwrap(),
            "Fix the flaky parser",
            None,
        )
        .unwrap();
    a.mail()
        .send(&chipset::mail::NewMessage::notify(
            mayor.clone(),
            polecat.clone(),
            "t1".parse().unwrap(),
            "status-update",
            "the lexer rewrite landed",
        ))
        .unwrap();
    let published = a
        .bus()
        .publish(
            &mayor,
            &chipset::bus::NewEvent::new("polecat", "work-completed")
                .payload(serde_json::json!({"note": "tokenizer benchmarks"})),
        )
        .unwrap();
    assert!(published.delivered().is_some());
    let hits = b.search(&query("parser")).unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0].id, "polecat");
    assert_eq!(b.search(&query("lexer")).unwrap().len(), 1);
    assert_eq!(b.search(&query("tokenizer")).unwrap().len(), 1);
    // A change on the server is seen at the next query.
    a.mail()
        .send(&chipset::mail::NewMessage::notify(
            polecat.clone(),
            mayor.clone(),
            "t1".parse().unwrap(),
            "status-update",
            "the lexer tests pass",
        ))
        .unwrap();
    assert_eq!(b.search(&query("lexer")).unwrap().len(), 2);
    // The index is in the local folder, the channels are not.
    assert!(b.search_index().path().starts_with(b_dir.path()));
    for channel in ["hooks", "mail", "bus"] {
        let there = chipset::store::StateDir::stat_outside(&b_dir.path().join(channel)).unwrap();
        assert!(there.is_none(), "{channel}");
    }
}
