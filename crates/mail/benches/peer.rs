//! chipset mail against nubos-pilot's messaging library (the peer behind
//! seed 002), side by side in one run on one disk: issue 15's goals.
//!
//! ```text
//! NUBOS_PILOT_DIR=/path/to/nubos-pilot cargo bench -p chipset-mail --bench peer
//! ```
//!
//! (or `scripts/peer-bench.sh`, which exports a checkout from a git mirror
//! first). Without `NUBOS_PILOT_DIR` the bench says so and does nothing.
//! nubos-pilot runs under `node` through `benches/peer/nubos-driver.cjs`, a
//! child process kept for the whole run; none of its code is in this
//! repository.
//!
//! Each scenario alternates the two sides (chipset first in even rounds,
//! nubos first in odd ones), so both see the same disk at the same time,
//! and reports microseconds per message and the ratio of nubos's time to
//! chipset's (above 1.0: chipset is faster):
//!
//! - `fresh`: 200 sequential sends into a new project, `PEER_ROUNDS`
//!   rounds (default 5). Goal: ≥ 1.0.
//! - `fill`: filling one inbox to `PEER_FILL` messages (default 10,000) one
//!   send at a time, in alternating chunks of 500. Goal: ≥ 1.0.
//! - `batch`: `Mail::send_batch` of 100 against 100 of chipset's own
//!   single sends and 100 of nubos's (nubos has no batch). Goals: ≥ 5× the
//!   single send per message, ≥ 10× nubos per message.
//!
//! `PEER_DIR` chooses the directory the projects are made in (default: the
//! system temp directory), to compare filesystems. The store's publish
//! order for that directory (`StateDir::sync_order`) is printed first.

#![allow(clippy::print_stdout, reason = "a bench reports on stdout")]
#![allow(missing_docs, reason = "a bench binary")]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use chipset_mail::{Draft, Mail};
use chipset_store::{AgentId, StateDir, TaskId};

fn note(i: usize) -> Draft {
    Draft::notify(
        AgentId::new("np-critic").unwrap(),
        AgentId::new("np-executor").unwrap(),
        TaskId::new("M005-S007-T0002").unwrap(),
        "weak-assertion",
        format!("finding {i}: the assertion in tests/foo.rs:42 cannot fail"),
    )
    .with_round(2)
}

struct Nubos {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Nubos {
    fn start(dir: &str) -> Nubos {
        let driver = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/peer/nubos-driver.cjs");
        let mut child = Command::new("node")
            .arg(driver)
            .env("NUBOS_PILOT_DIR", dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start node with the nubos-pilot driver");
        let stdin = child.stdin.take().expect("driver stdin");
        let stdout = BufReader::new(child.stdout.take().expect("driver stdout"));
        Nubos {
            child,
            stdin,
            stdout,
        }
    }

    /// `n` sequential sends into `project`; returns the microseconds they took.
    fn send(&mut self, project: &Path, n: usize) -> f64 {
        writeln!(self.stdin, "send {} {n}", project.display()).expect("write to the driver");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read the driver");
        line.trim()
            .parse()
            .unwrap_or_else(|_| panic!("the nubos driver answered {line:?}"))
    }
}

impl Drop for Nubos {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `n` sequential chipset sends; returns the microseconds they took.
fn chipset_sends(mail: &Mail, n: usize, seq: &mut usize) -> f64 {
    let start = Instant::now();
    for _ in 0..n {
        *seq += 1;
        mail.send(&note(*seq)).unwrap();
    }
    start.elapsed().as_secs_f64() * 1e6
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Pair {
    chipset: f64,
    nubos: f64,
    messages: usize,
}

impl Pair {
    fn report(&self, name: &str) {
        let per = |t: f64| t / self.messages as f64;
        println!(
            "{name:<8} chipset {:>9.1} µs/msg   nubos {:>9.1} µs/msg   speed vs nubos {:.2}x",
            per(self.chipset),
            per(self.nubos),
            self.nubos / self.chipset
        );
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument selects nothing here.
    let Ok(nubos_dir) = std::env::var("NUBOS_PILOT_DIR") else {
        println!("peer: NUBOS_PILOT_DIR is not set (a nubos-pilot checkout); skipped");
        return;
    };
    let rounds = env_usize("PEER_ROUNDS", 5);
    let fill = env_usize("PEER_FILL", 10_000);
    let base: PathBuf = std::env::var_os("PEER_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let work = tempfile::tempdir_in(&base).expect("a scratch directory");
    let mut nubos = Nubos::start(&nubos_dir);
    let mut seq = 0;
    let order = StateDir::open(work.path().join("probe"))
        .unwrap()
        .sync_order();
    println!(
        "peer: projects under {}; chipset publishes with {order:?}",
        base.display()
    );

    // fresh: 200 sends into a new project.
    let mut fresh = Pair {
        chipset: 0.0,
        nubos: 0.0,
        messages: 0,
    };
    for r in 0..rounds {
        let c_root = work.path().join(format!("fresh-c{r}"));
        let n_root = work.path().join(format!("fresh-n{r}"));
        let mail = Mail::new(StateDir::open(&c_root).unwrap());
        let mut c = || chipset_sends(&mail, 200, &mut seq);
        let (tc, tn) = if r % 2 == 0 {
            let tc = c();
            (tc, nubos.send(&n_root, 200))
        } else {
            let tn = nubos.send(&n_root, 200);
            (c(), tn)
        };
        fresh.chipset += tc;
        fresh.nubos += tn;
        fresh.messages += 200;
    }
    fresh.report("fresh");

    // batch: one batch of 100 vs 100 single sends vs 100 nubos sends.
    let c_root = work.path().join("batch-c");
    let n_root = work.path().join("batch-n");
    let mail = Mail::new(StateDir::open(&c_root).unwrap());
    chipset_sends(&mail, 1, &mut seq);
    nubos.send(&n_root, 1);
    let (mut batch, mut single, mut peer) = (0.0, 0.0, 0.0);
    for r in 0..rounds {
        let drafts: Vec<Draft> = (0..100).map(|i| note(seq + i)).collect();
        seq += 100;
        let b = || {
            let start = Instant::now();
            mail.send_batch(&drafts).unwrap();
            start.elapsed().as_secs_f64() * 1e6
        };
        if r % 2 == 0 {
            batch += b();
            single += chipset_sends(&mail, 100, &mut seq);
            peer += nubos.send(&n_root, 100);
        } else {
            peer += nubos.send(&n_root, 100);
            single += chipset_sends(&mail, 100, &mut seq);
            batch += b();
        }
    }
    let per = |t: f64| t / (100 * rounds) as f64;
    println!(
        "batch    send_batch(100) {:>7.1} µs/msg   single send {:>7.1} µs/msg   nubos {:>7.1} µs/msg   \
         batch vs single {:.2}x   batch vs nubos {:.2}x",
        per(batch),
        per(single),
        per(peer),
        single / batch,
        peer / batch
    );

    // fill: one inbox each to `fill` messages, alternating chunks of 500.
    let c_root = work.path().join("fill-c");
    let n_root = work.path().join("fill-n");
    let mail = Mail::new(StateDir::open(&c_root).unwrap());
    let mut filled = Pair {
        chipset: 0.0,
        nubos: 0.0,
        messages: 0,
    };
    let chunk = 500;
    let mut r = 0;
    while filled.messages < fill {
        let n = chunk.min(fill - filled.messages);
        if r % 2 == 0 {
            filled.chipset += chipset_sends(&mail, n, &mut seq);
            filled.nubos += nubos.send(&n_root, n);
        } else {
            filled.nubos += nubos.send(&n_root, n);
            filled.chipset += chipset_sends(&mail, n, &mut seq);
        }
        filled.messages += n;
        r += 1;
    }
    filled.report(&format!("fill {fill}"));
}
