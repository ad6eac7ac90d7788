//! `chipset top` at the scale: 200 agents and 100,000 messages
//! (`CHIPSET_TOP_MESSAGES` to change).
//!
//! `cargo bench -p chipset-console --bench top` builds the state once under
//! `target/top-scale/` (or `CHIPSET_TOP_STATE`), then measures in this
//! process, with the same model and drawing `chipset top` uses:
//!
//! - **first frame**: a fresh [`Loader`]'s quick load (every view but the
//!   open requests) and one 120x40 frame drawn: what `top` shows first;
//! - **full first load**: a fresh loader's load with the open requests
//!   (every inbox read once, every gate with a request asked);
//! - **idle rescan**: the same loader's load again with nothing changed
//!   (after the stamps settled): what each rescan of an idle root costs;
//! - **one change**: a load after one hook changed.
//!
//! With `CHIPSET_TOP_BUILD_ONLY=1` it only builds the state and prints its
//! root, for `scripts/top-scale.sh`, which times the real binary.
//!
//! The messages are written as `benches/scale.rs` writes them (the same
//! file and manifest line, every message in an inbox, one in ten a
//! request, 1,000 tasks), with plain writes and no sync; the hooks,
//! profiles, bus events and pool items go through the library.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "a bench builds its fixture with plain writes, as benches/scale.rs does"
)]
#![allow(clippy::print_stdout, reason = "a benchmark reports its figures")]

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chipset::Chipset;
use chipset::bus::NewEvent;
use chipset::directory::Registration;
use chipset::pool::{ItemId, NewItem};
use chipset::store::AgentId;
use chipset_console::{Loader, Screen, View};
use chipset_testkit::scale::{MailWriter, agent_name};

const AGENTS: usize = 200;
const TASKS: usize = 1_000;
const ITEMS: usize = 60;
/// Builds the state under `base` unless a complete one is there; returns
/// its root.
fn build(base: &Path, messages: usize) -> PathBuf {
    let done = base.join(".complete");
    let state = base.join("state");
    if done.exists() {
        return state;
    }
    let _ = fs::remove_dir_all(base);
    let started = Instant::now();
    let mut mail = MailWriter::create(&state, AGENTS);
    mail.spread(AGENTS, TASKS, messages);
    mail.finish();
    let c = Chipset::open(&state).unwrap();
    let lead = AgentId::new("lead").unwrap();
    let items: Vec<NewItem> = (0..ITEMS)
        .map(|i| {
            let item = NewItem::new(format!("Work item {i}"))
                .with_id(ItemId::new(format!("w-{i:03}")).unwrap())
                .with_priority(u8::try_from(i % 5).unwrap());
            if i % 6 == 5 {
                item.with_depends_on([ItemId::new(format!("w-{:03}", i - 1)).unwrap()])
            } else {
                item
            }
        })
        .collect();
    c.pool().post_many(&lead, &items).unwrap();
    for a in 0..AGENTS {
        let agent = AgentId::new(agent_name(a)).unwrap();
        c.directory()
            .register(&agent, &Registration::new())
            .unwrap();
        if a < 20 {
            c.pool()
                .claim_next(&agent, &chipset::pool::ReadyFilter::new())
                .unwrap();
        } else {
            c.hooks()
                .assign(
                    &agent,
                    format!("bd-{a}").parse().unwrap(),
                    "Work through the findings",
                    Some(&lead),
                )
                .unwrap();
        }
        let _ = c
            .bus()
            .publish(&agent, &NewEvent::new("witness", "health-check"))
            .unwrap();
    }
    fs::write(&done, b"").unwrap();
    println!(
        "built {} ({messages} messages) in {:.1} s",
        state.display(),
        started.elapsed().as_secs_f64()
    );
    state
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed())
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    // `cargo bench` passes `--bench`; nothing here takes arguments.
    let messages: usize = std::env::var("CHIPSET_TOP_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let base = std::env::var_os("CHIPSET_TOP_STATE").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/top-scale"),
        PathBuf::from,
    );
    let state = build(&base, messages);
    if std::env::var_os("CHIPSET_TOP_BUILD_ONLY").is_some() {
        println!("{}", state.display());
        return;
    }
    let chipset = Chipset::open(&state).unwrap();
    println!(
        "top: {AGENTS} agents, {messages} messages at {}",
        state.display()
    );

    let (frame, first) = timed(|| {
        let snapshot = Loader::new().load_quick(&chipset).unwrap();
        chipset_console::text(&Screen::new(View::Agents), &snapshot, 120, 40)
    });
    assert!(frame.contains("[a] Agents 200"), "{frame}");
    println!("first frame (quick load + draw): {}", ms(first));

    let loader = Loader::new();
    let (snapshot, full) = timed(|| loader.load(&chipset).unwrap());
    println!(
        "full first load (every inbox and gate): {} ({} open requests)",
        ms(full),
        snapshot.table(View::Requests).rows.len()
    );
    // Let every stamp settle, then load again with nothing changed.
    std::thread::sleep(Duration::from_millis(2_200));
    let _ = loader.load(&chipset).unwrap();
    let idle: Vec<Duration> = (0..7)
        .map(|_| timed(|| loader.load(&chipset).unwrap()).1)
        .collect();
    println!("idle rescan (median of 7): {}", ms(median(idle)));
    let agent = AgentId::new(agent_name(AGENTS - 1)).unwrap();
    let held = chipset.hooks().current(&agent).unwrap().unwrap();
    // Pending the first time; a later run finds it active and touches it.
    if chipset.hooks().activate(&held).is_err() {
        chipset.hooks().touch(&held).unwrap();
    }
    let (_, one) = timed(|| loader.load(&chipset).unwrap());
    println!("load after one hook changed: {}", ms(one));
}
