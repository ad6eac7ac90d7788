//! The peer operations on both backends, on this machine (issue 30): the
//! directory (`Mail::new`, the files) and PostgreSQL (`Mail::with_backend`).
//!
//! ```text
//! CHIPSET_BENCH_PG=postgres://… cargo bench -p chipset-mail --bench backends
//! ```
//!
//! `CHIPSET_BENCH_PG` (else `CHIPSET_TEST_PG`) names the server; without
//! either only the directory runs. Each run uses a fresh schema, dropped
//! at the end. Scenarios, one table row each:
//!
//! - `send`: 200 sequential sends, microseconds per send;
//! - `inbox 10k`: `Mail::inbox` of an inbox of 10,000 (median of 5);
//! - `pending`: `Mail::pending_replies` of a task with 100 open requests
//!   in that inbox (median of 5);
//! - `batch 100`: `Mail::send_batch` of 100, microseconds per message;
//! - `8 x 250`: eight threads, each with its own handle, 250 sends each
//!   at once: wall time and sends per second;
//! - `30 x 5`: thirty agents sending five messages each, all at once:
//!   p50 and p99 of one send (mcp_agent_mail reports p99 6.8 s).
//!
//! `BENCH_FILL` changes the inbox size (default 10,000).

#![allow(clippy::print_stdout, reason = "a bench reports on stdout")]
#![allow(missing_docs, reason = "a bench binary")]

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use chipset_backend::{PgBackend, PgOptions};
use chipset_mail::{Mail, MailConfig, NewMessage};
use chipset_store::{AgentId, StateDir, TaskId};

/// Where the mail lives.
enum Side {
    Dir,
    Pg { url: String, schema: String },
}

impl Side {
    fn name(&self) -> &'static str {
        match self {
            Side::Dir => "directory",
            Side::Pg { .. } => "PostgreSQL",
        }
    }

    /// A handle of its own (on a server: its own connections).
    fn mail(&self, root: &std::path::Path) -> Mail {
        let state = StateDir::open(root).unwrap();
        match self {
            Side::Dir => Mail::new(state),
            Side::Pg { url, schema } => Mail::with_backend(
                state,
                MailConfig::default(),
                Arc::new(PgBackend::open_with(url, PgOptions::with_schema(schema)).unwrap()),
            ),
        }
    }
}

impl Drop for Side {
    fn drop(&mut self) {
        if let Side::Pg { url, schema } = self {
            chipset_backend::testing::drop_schema(url, schema);
        }
    }
}

fn agent(name: &str) -> AgentId {
    AgentId::new(name).unwrap()
}

fn note(from: &str, to: &str, task: &str, i: usize) -> NewMessage {
    NewMessage::notify(
        agent(from),
        agent(to),
        TaskId::new(task).unwrap(),
        "weak-assertion",
        format!("finding {i}: the assertion in tests/foo.rs:42 cannot fail"),
    )
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One side's figures, in the table's order.
struct Row {
    send_us: f64,
    inbox_ms: f64,
    pending_ms: f64,
    batch_us: f64,
    eight_s: f64,
    eight_rate: f64,
    p50_ms: f64,
    p99_ms: f64,
}

fn run(side: &Side, fill: usize) -> Row {
    let tmp = tempfile::tempdir().unwrap();
    // `StateDir::open` makes each root.
    let root = |name: &str| tmp.path().join(name);
    // Every scenario in a project (or schema folder) of its own: on a
    // server the agents' names keep them apart.
    let mail = side.mail(&root("main"));

    let start = Instant::now();
    for i in 0..200 {
        mail.send(&note("critic", "seq", "T-send", i)).unwrap();
    }
    let send_us = start.elapsed().as_secs_f64() * 1e6 / 200.0;

    let mut i = 0;
    while i < fill {
        let k = 100.min(fill - i);
        let drafts: Vec<NewMessage> = (i..i + k)
            .map(|j| {
                if j % (fill / 100).max(1) == 0 {
                    NewMessage::request(
                        agent("critic"),
                        agent("big"),
                        TaskId::new("T-gate").unwrap(),
                        "check",
                        format!("request {j}"),
                    )
                } else {
                    note("critic", "big", "T-fill", j)
                }
            })
            .collect();
        mail.send_batch(&drafts).unwrap();
        i += k;
    }
    let inbox_ms = median(
        (0..5)
            .map(|_| {
                let start = Instant::now();
                let n = mail.inbox(&agent("big")).unwrap().len();
                assert_eq!(n, fill);
                ms(start.elapsed())
            })
            .collect(),
    );
    let pending_ms = median(
        (0..5)
            .map(|_| {
                let start = Instant::now();
                let n = mail
                    .pending_replies(&TaskId::new("T-gate").unwrap())
                    .unwrap()
                    .len();
                assert_eq!(n, 100.min(fill));
                ms(start.elapsed())
            })
            .collect(),
    );

    let batch_us = median(
        (0..5)
            .map(|r| {
                let drafts: Vec<NewMessage> = (0..100)
                    .map(|j| note("critic", &format!("batch{r}"), "T-batch", j))
                    .collect();
                let start = Instant::now();
                mail.send_batch(&drafts).unwrap();
                start.elapsed().as_secs_f64() * 1e6 / 100.0
            })
            .collect(),
    );

    // 8 x 250: one handle per thread, all released at once.
    let barrier = Arc::new(Barrier::new(8));
    let dir8 = root("eight");
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let mail = side.mail(&dir8);
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                barrier.wait();
                for i in 0..250 {
                    mail.send(&note(&format!("sender{t}"), "eight", "T-eight", i))
                        .unwrap();
                }
            })
        })
        .collect();
    let start = Instant::now();
    for h in handles {
        h.join().unwrap();
    }
    let eight = start.elapsed();
    assert_eq!(side.mail(&dir8).inbox_len(&agent("eight")).unwrap(), 2000);

    // 30 agents x 5 messages, all at once: the latency of each send.
    let barrier = Arc::new(Barrier::new(30));
    let dir30 = root("thirty");
    let handles: Vec<_> = (0..30)
        .map(|a| {
            let mail = side.mail(&dir30);
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                barrier.wait();
                (0..5)
                    .map(|i| {
                        let to = format!("agent{}", (a + i + 1) % 30);
                        let start = Instant::now();
                        mail.send(&note(&format!("agent{a}"), &to, "T-thirty", i))
                            .unwrap();
                        ms(start.elapsed())
                    })
                    .collect::<Vec<f64>>()
            })
        })
        .collect();
    let mut lat: Vec<f64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    lat.sort_by(f64::total_cmp);

    Row {
        send_us,
        inbox_ms,
        pending_ms,
        batch_us,
        eight_s: eight.as_secs_f64(),
        eight_rate: 2000.0 / eight.as_secs_f64(),
        p50_ms: percentile(&lat, 0.5),
        p99_ms: percentile(&lat, 0.99),
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs it as a
    // test with no arguments: then only check that it builds.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let fill: usize = std::env::var("BENCH_FILL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let mut sides = vec![Side::Dir];
    match std::env::var("CHIPSET_BENCH_PG").or_else(|_| std::env::var("CHIPSET_TEST_PG")) {
        Ok(url) if !url.is_empty() => sides.push(Side::Pg {
            url,
            schema: format!("bench_mail_{}", std::process::id()),
        }),
        _ => println!("CHIPSET_BENCH_PG is not set: the directory only"),
    }
    let rows: Vec<(&str, Row)> = sides.iter().map(|s| (s.name(), run(s, fill))).collect();
    println!();
    println!(
        "| backend | send (µs) | inbox of {fill} (ms) | pending, 100 open (ms) | batch of 100 (µs/msg) | 8 x 250 (s, sends/s) | 30 x 5 p50 / p99 (ms) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (name, r) in rows {
        println!(
            "| {name} | {:.0} | {:.1} | {:.2} | {:.0} | {:.2}, {:.0} | {:.1} / {:.1} |",
            r.send_us,
            r.inbox_ms,
            r.pending_ms,
            r.batch_us,
            r.eight_s,
            r.eight_rate,
            r.p50_ms,
            r.p99_ms
        );
    }
}
