//! The front door on a PostgreSQL server (issue 30): `Chipset::open` with a
//! URL puts every channel on the server. The server half runs when
//! `CHIPSET_TEST_PG` names a server; without it those tests say so and
//! pass.
//!
//! The file needs the `postgres` feature, which links the system's OpenSSL
//! for TLS. `cargo test --workspace` has it (the CLI turns it on); it is not
//! a dev-dependency of this crate, so `cargo run --example tour` builds on a
//! machine with nothing but the Rust toolchain.

#![cfg(feature = "postgres")]

use chipset::nudge::{NewNudge, NudgeType};
use chipset::store::AgentId;
use chipset::{Chipset, Error};

mod pg;

fn agent(name: &str) -> AgentId {
    name.parse().unwrap()
}

/// A handle on the server and its local folder.
type Handle = (Chipset, tempfile::TempDir);

/// Two handles on one fresh schema for `test`, each with a local folder of
/// its own, or `None` (saying so) without a server. Bind the server
/// first: it drops the schema last.
fn two_handles(test: &str) -> Option<(pg::Server, Handle, Handle)> {
    let pg = pg::Server::fresh(test)?;
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (pg.open(a_dir.path()), pg.open(b_dir.path()));
    Some((pg, (a, a_dir), (b, b_dir)))
}

/// Hangs the bead `bd-1`, titled `title`, on `agent`'s hook.
fn assign(door: &Chipset, agent: &AgentId, title: &str, by: Option<&AgentId>) {
    door.hooks()
        .assign(agent, "bd-1".parse().unwrap(), title, by)
        .unwrap();
}

/// Sends a `status-update` note on task `t1`.
fn note(door: &Chipset, from: &AgentId, to: &AgentId, body: &str) {
    door.mail()
        .send(&chipset::mail::NewMessage::notify(
            from.clone(),
            to.clone(),
            "t1".parse().unwrap(),
            "status-update",
            body,
        ))
        .unwrap();
}

/// Asserts that none of `channels` went to the local folder `dir`.
fn nothing_local(dir: &std::path::Path, channels: &[&str]) {
    for channel in channels {
        let there = chipset::store::StateDir::stat_outside(&dir.join(channel)).unwrap();
        assert!(there.is_none(), "{channel} in {}", dir.display());
    }
}

#[test]
fn two_handles_on_one_server_share_hooks_and_nudges() {
    let Some((_pg, (a, a_dir), (b, b_dir))) =
        two_handles("two_handles_on_one_server_share_hooks_and_nudges")
    else {
        return;
    };
    assert!(a.server().is_some());
    let (mayor, polecat) = (agent("mayor"), agent("polecat"));
    assign(&a, &polecat, "Fix the parser", Some(&mayor));
    let work = b
        .hooks()
        .current(&polecat)
        .unwrap()
        .expect("the hook is on the server");
    assert_eq!(work.work.bead_id.as_str(), "bd-1");
    let _ = b
        .nudges()
        .send(
            &mayor,
            &NewNudge::new(polecat.clone(), NudgeType::HealthCheck, "still there?"),
        )
        .unwrap();
    assert!(matches!(
        a.nudges().read_latest(&mayor).unwrap(),
        chipset::store::ReadOutcome::Value(_)
    ));
    // Nothing went to either local folder.
    for dir in [a_dir.path(), b_dir.path()] {
        nothing_local(dir, &["hooks", "nudge", "mail"]);
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

/// The loops and the status view run on the server: a witness ticks
/// through the door's channels on one handle, and another handle's status
/// and loop counts see the team's state, with nothing in either local
/// folder.
#[test]
fn status_and_the_loops_run_on_the_server() {
    let Some((_pg, (a, a_dir), (b, b_dir))) = two_handles("status_and_the_loops_run_on_the_server")
    else {
        return;
    };
    let (mayor, polecat) = (agent("mayor"), agent("polecat"));
    assign(&a, &polecat, "Fix the parser", Some(&mayor));
    note(&a, &mayor, &polecat, "hello");
    let _ = a
        .nudges()
        .send(
            &polecat,
            &NewNudge::new(mayor.clone(), NudgeType::HealthCheck, "still there?"),
        )
        .unwrap();
    let mut registration = chipset::directory::Registration::default();
    registration.program = Some("claude-code".into());
    a.directory().register(&mayor, &registration).unwrap();
    let _ = a
        .leases()
        .acquire(&chipset::lease::LeaseRequest::new(
            polecat.clone(),
            chipset::lease::LeaseMode::Exclusive,
            ["src/**"],
        ))
        .unwrap();
    let witness = chipset::r#loop::Witness::new(
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
        nothing_local(
            dir,
            &["hooks", "nudge", "mail", "bus", "loop", "leases", "agents"],
        );
    }
}

/// Search on a server: each handle's index is a cache in its own local
/// folder, caught up from the server's rows; what one handle writes the
/// other finds, and a change of the hooks is seen at the next query.
#[test]
fn search_finds_what_another_handle_wrote_on_the_server() {
    let Some((_pg, (a, _a_dir), (b, b_dir))) =
        two_handles("search_finds_what_another_handle_wrote_on_the_server")
    else {
        return;
    };
    let query = |words: &str| chipset::search::Query::new(words);
    let (mayor, polecat) = (agent("mayor"), agent("polecat"));
    assert!(b.search(&query("parser")).unwrap().is_empty());
    assign(&a, &polecat, "Fix the flaky parser", None);
    note(&a, &mayor, &polecat, "the lexer rewrite landed");
    let published = a
        .bus()
        .publish(
            &mayor,
            &chipset::bus::NewEvent::new("polecat", "work-completed")
                .with_payload(serde_json::json!({"note": "tokenizer benchmarks"})),
        )
        .unwrap();
    assert!(published.delivered().is_some());
    let hits = b.search(&query("parser")).unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0].id, "polecat");
    assert_eq!(b.search(&query("lexer")).unwrap().len(), 1);
    assert_eq!(b.search(&query("tokenizer")).unwrap().len(), 1);
    // A change on the server is seen at the next query.
    note(&a, &polecat, &mayor, "the lexer tests pass");
    assert_eq!(b.search(&query("lexer")).unwrap().len(), 2);
    // The index is in the local folder, the channels are not.
    assert!(b.search_index().path().starts_with(b_dir.path()));
    nothing_local(b_dir.path(), &["hooks", "mail", "bus"]);
}
