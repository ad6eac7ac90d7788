//! `chipset migrate` at issue 30's size: a state of
//! `CHIPSET_MIGRATE_MESSAGES` messages (10,000 by default) in 20 inboxes
//! and `CHIPSET_MIGRATE_EVENTS` bus events (1,000) in 10 queues, moved
//! from a directory to the PostgreSQL server `CHIPSET_BENCH_PG` (or
//! `CHIPSET_TEST_PG`) names, run again (nothing to write), and moved back
//! to a fresh directory. One run of each, timed; the state is built with
//! the channels' batch sends. Without a server it says so and exits.
//!
//! `cargo bench --bench migrate --features postgres`.

#![allow(clippy::print_stdout, reason = "a bench prints its figures")]

use std::time::Instant;

use chipset::bus::NewEvent;
use chipset::mail::NewMessage;
use chipset::migrate::{Migration, Report};
use chipset::{Chipset, Root, ServerOptions};

fn count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let Some(url) = ["CHIPSET_BENCH_PG", "CHIPSET_TEST_PG"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
    else {
        println!("migrate: skipped, no server (set CHIPSET_BENCH_PG or CHIPSET_TEST_PG)");
        return;
    };
    let (messages, events) = (
        count("CHIPSET_MIGRATE_MESSAGES", 10_000),
        count("CHIPSET_MIGRATE_EVENTS", 1_000),
    );
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let door = Chipset::open(&a).unwrap();
    let drafts: Vec<NewMessage> = (0..messages)
        .map(|i| {
            NewMessage::notify(
                format!("sender-{}", i % 7).parse().unwrap(),
                format!("agent-{}", i % 20).parse().unwrap(),
                format!("task-{}", i % 50).parse().unwrap(),
                "bulk",
                format!("message {i}"),
            )
        })
        .collect();
    for chunk in drafts.chunks(500) {
        door.mail().send_batch(chunk).unwrap();
    }
    for agent in 0..10 {
        let batch: Vec<NewEvent> = (0..events / 10)
            .map(|i| NewEvent::new("mayor", format!("k{i}")))
            .collect();
        door.bus()
            .publish_batch(&format!("agent-{agent}").parse().unwrap(), &batch)
            .unwrap();
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let mut options = ServerOptions::default();
    let schema = format!("bench_migrate_{nanos}");
    options.schema = Some(schema.clone());
    options.local = Some(tmp.path().join("local"));
    let server = Root::parse(&url);
    let timed = |from: &Root, to: &Root| -> (f64, Report) {
        let start = Instant::now();
        let report = Migration::new(from.clone(), to.clone())
            .server_options(options.clone())
            .run()
            .unwrap();
        assert!(report.verified(), "{report:#?}");
        (start.elapsed().as_secs_f64(), report)
    };
    let (up, report) = timed(&Root::Dir(a.clone()), &server);
    let (again, rerun) = timed(&Root::Dir(a), &server);
    assert_eq!(rerun.written(), 0);
    let (down, _) = timed(&server, &Root::Dir(b));
    println!(
        "migrate {messages} messages + {events} events ({} values and records): \
         to the server {up:.2} s, again (nothing written) {again:.2} s, back to a directory {down:.2} s",
        report.written()
    );
    if let Ok(mut c) = postgres::Client::connect(&url, postgres::NoTls) {
        let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
    }
}
