//! The live view on its place (issue 30): a load reads the team through
//! the front door, and the team watch wakes on another client's write
//! well before the rescan, on a directory and on a PostgreSQL server
//! (`CHIPSET_TEST_PG`) from the same body.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use chipset::{Chipset, Root, ServerOptions};
use chipset_console::{Change, Loader, View, watch_team};

/// The safety net's period here: a wake-up must come well before it.
const RESCAN: Duration = Duration::from_secs(8);

/// Two handles on one team (two clients), and a cleanup.
type Place = (Chipset, Chipset, Box<dyn FnOnce()>);

fn directory() -> Place {
    let tmp = tempfile::tempdir().unwrap();
    let a = Chipset::open(tmp.path()).unwrap();
    let b = Chipset::open(tmp.path()).unwrap();
    (a, b, Box::new(move || drop(tmp)))
}

fn server(test: &str) -> Option<Place> {
    let Some(url) = std::env::var("CHIPSET_TEST_PG")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        #[allow(clippy::print_stderr, reason = "a skipped half must say so")]
        {
            eprintln!("{test}: SKIPPED on PostgreSQL: CHIPSET_TEST_PG is not set");
        }
        return None;
    };
    let Root::Server(server) = Root::parse(&url) else {
        panic!("CHIPSET_TEST_PG is not a server URL");
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let schema = format!("console_{}_{nanos}", std::process::id());
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let open = |local: &std::path::Path| {
        let mut options = ServerOptions::default();
        options.schema = Some(schema.clone());
        options.local = Some(local.to_owned());
        Chipset::open_server(&server, &options).unwrap()
    };
    let (a, b) = (open(a_dir.path()), open(b_dir.path()));
    let cleanup = move || {
        drop((a_dir, b_dir));
        if let Ok(mut c) = postgres::Client::connect(&url, postgres::NoTls) {
            // The schema's name is ours: lower-case letters, digits and `_`.
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
        }
    };
    Some((a, b, Box::new(cleanup)))
}

#[test]
fn the_team_watch_wakes_on_another_clients_write_on_a_directory() {
    wakes_on_another_clients_write(directory());
}

#[test]
fn the_team_watch_wakes_on_another_clients_write_on_a_server() {
    if let Some(place) = server("the_team_watch_wakes_on_another_clients_write_on_a_server") {
        wakes_on_another_clients_write(place);
    }
}

/// A hook assigned by another client wakes the watch within a quarter of
/// the rescan, and the next load shows it.
fn wakes_on_another_clients_write((a, b, cleanup): Place) {
    let (tx, rx) = mpsc::channel();
    let _watch = watch_team(&a, RESCAN, move |change| {
        tx.send((change, Instant::now())).is_ok()
    })
    .unwrap();
    // The first call comes at once.
    let (first, _) = rx.recv_timeout(RESCAN).unwrap();
    assert_eq!(first, Change::Rescan);
    let loader = Loader::new();
    assert!(loader.load(&a).unwrap().table(View::Agents).rows.is_empty());
    std::thread::sleep(Duration::from_millis(300));
    let sent = Instant::now();
    b.hooks()
        .assign(
            &"polecat".parse().unwrap(),
            "bd-1".parse().unwrap(),
            "Fix the parser",
            None,
        )
        .unwrap();
    let (change, at) = rx.recv_timeout(RESCAN * 2).unwrap();
    let took = at.saturating_duration_since(sent);
    assert_eq!(change, Change::Changed, "after {took:?}");
    assert!(took < RESCAN / 4, "woke {took:?} after the write");
    let snapshot = loader.load(&a).unwrap();
    let agents = snapshot.table(View::Agents);
    assert_eq!(agents.rows[0].cells[..3], ["polecat", "pending", "bd-1"]);
    drop(_watch);
    cleanup();
}
