//! A tour of `chipset-store`: durable writes, a locked counter shared by
//! threads, a typed read of a corrupt file, quarantine, and an append-only log.
//!
//! `cargo run --example store_tour [-- --root DIR]`
//!
//! Without `--root`, a fresh temporary state directory is made and kept, so
//! the files it prints the path of can be read afterwards.

#[macro_use]
mod support;

use std::path::PathBuf;
use std::thread;

use chipset::store::{Decision, Error, ReadOutcome, StateDir};
use serde_json::json;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let root = match args.iter().position(|a| a == "--root") {
        Some(i) => PathBuf::from(args.get(i + 1).ok_or("--root needs a directory")?),
        None => tempfile::Builder::new()
            .prefix("store-tour-")
            .tempdir()?
            .keep()
            .join("state"),
    };
    let state = StateDir::open(&root)?;
    let dir = state.channel_dir(chipset::store::Channel::new("loop"))?;
    say!("state directory: {}", state.root().display());

    // Eight threads, 25 locked increments each: none is lost.
    let counter = dir.join_static("counter.json");
    thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..25 {
                    state
                        .update(&counter, |cur: ReadOutcome<u64>| {
                            // A corrupt or unsupported file is an error, never "nothing there".
                            let n = cur.into_result()?.unwrap_or(0);
                            Ok::<_, Error>(Decision::Write(n + 1, ()))
                        })
                        .expect("increment");
                }
            });
        }
    });
    let total = state.read_json::<u64>(&counter)?.value();
    say!("counter after 8 x 25 locked increments: {total:?}");

    // A corrupt file is reported as corrupt, and repair moves it aside.
    let bad = dir.join_static("bad.json");
    state.write_bytes(&bad, b"{ not json")?;
    if let ReadOutcome::Corrupt(c) = state.read_json::<serde_json::Value>(&bad)? {
        say!("read: {c}");
        say!("quarantined to {}", state.quarantine(&bad)?.display());
    }

    // An append-only log: batch appends share one data sync.
    let log = state.log(&dir.join_static("events.jsonl"))?;
    let events: Vec<_> = (1..=3).map(|n| json!({"event": "tick", "n": n})).collect();
    log.append_batch(&events)?;
    say!(
        "log records: {}",
        log.read_from::<serde_json::Value>(0)?.records.len()
    );
    Ok(())
}
