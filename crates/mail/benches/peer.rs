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
//! - `gate`: `Mail::pending_replies` of a task with `PEER_GATE` (default
//!   10,000) open requests in one inbox, right after they were sent (the
//!   inbox's stamp inside the gate cache's racy window), against nubos's
//!   `pendingReplies`, `PEER_GATE_ROUNDS` rounds (default 3), each side
//!   sending into a fresh project just before its gate (chipset in batches
//!   of 100). Also timed: chipset's gate run again at once, and its
//!   `Mail::inbox` of the same inbox (the full scan the cache replaces).
//!   Goal (issue 31): ≥ 2.5× nubos, and never slower than the full scan.
//!   The gate and the full scan take turns going first.
//! - `settled`: the first gate of a task with `PEER_GATE` open requests
//!   on a state written long ago (stamps settled; no folder or task cache
//!   yet, as after a restart), on the state chipset's sends leave (with
//!   their sent journal) and on one without `mail/.gate/` (as another
//!   program leaves it), against `Mail::inbox` of the same files and
//!   nubos's `pendingReplies` (sent once, untimed). Goal (issue 31): never
//!   slower than the full scan.
//! - `archive`: archiving a notify just sent, 50 per round. Goal (issue
//!   31): ≥ 1.0.
//! - `answered`: archiving a request answered by a response another
//!   program wrote (nubos-pilot's form, straight into the requester's
//!   inbox: no reply index entry), with `PEER_REPLIES` (default 1,000)
//!   answered requests and their responses present, 10 per round (nubos:
//!   its own request and response, then its `archive`). Twice: with the
//!   response's `sent` event appended to the manifest after its file, as
//!   nubos-pilot's `send` does, and without (a writer that died between
//!   the two, or one that does not log). Goal (issue 31): ≥ 40×. Also
//!   timed in the same rotation: a bare durable move between two folders
//!   (`StateDir::move_noclobber`), the least an archive can cost; nubos's
//!   time over it is the highest ratio the disk allows.
//!
//! - `inbox`: `Mail::inbox` of one inbox of `PEER_INBOX` (default 10,000)
//!   messages that nubos-pilot's `send` wrote, against nubos-pilot's
//!   `inbox` of the same files, `PEER_ROUNDS` rounds. To keep: 2.9x in
//!   issue 31's measure. Then each side's first listing of the same files
//!   as new mail (access times set back to modification times, as a file
//!   just written has them: `relatime` writes them on the next read).
//!
//! `PEER_ONLY=gate,settled,inbox,archive,answered` runs only the named scenarios
//! (`sends` names `fresh`, `batch` and `fill`).
//!
//! `batch` runs `send_batch` under each sync order this filesystem allows,
//! in the same rotation (issue 15): `FileThenDir` (one round of concurrent
//! fsyncs), and `WriteBackThenDir` where that is the detected order: the
//! detected order on the real backend, as a user's batch runs; the other
//! through a fault that never fires (a test backend: temps on one thread).
//!
//! `PEER_DIR` chooses the directory the projects are made in (default: the
//! system temp directory), to compare filesystems. The store's publish
//! order for that directory (`IoBackend::sync_order`) is printed first.
//!
//! Before each scenario the bench syncs that filesystem (`syncfs`), so that
//! the writeback of the files an earlier scenario left (the gate scenarios
//! write tens of thousands) does not land in a later scenario's syncs: on
//! ext4 a journal commit also writes the dirty data of every file in its
//! transaction, so chipset's durable calls would pay for another
//! scenario's files while nubos, which does not sync, would not.

#![allow(clippy::print_stdout, reason = "a bench reports on stdout")]
#![allow(missing_docs, reason = "a bench binary")]

use std::path::{Path, PathBuf};
use std::time::Instant;

use chipset_mail::{Mail, NewMessage};
use chipset_store::{AgentId, IoBackend, RealIo, StateDir, StateOptions, SyncOrder, TaskId};
use chipset_testkit::{EIO, Fault, FaultIo};

#[path = "peer/nubos.rs"]
mod nubos;
use nubos::Nubos;
#[path = "peer/inbox.rs"]
mod inbox;

/// Mail under `root` with the detected order (what `StateDir::open`
/// gives), or a forced one.
fn mail_at(root: &Path, order: Option<SyncOrder>) -> Mail {
    match order {
        None => Mail::new(StateDir::open(root).unwrap()),
        // A fault that never fires: the real calls, in a forced order.
        Some(order) => Mail::new(
            StateDir::open_with(
                root,
                StateOptions {
                    io: FaultIo::with_order(Fault::nth(0, EIO), order),
                    ..StateOptions::default()
                },
            )
            .unwrap(),
        ),
    }
}

fn note(i: usize) -> NewMessage {
    NewMessage::notify(
        AgentId::new("np-critic").unwrap(),
        AgentId::new("np-executor").unwrap(),
        TaskId::new("M005-S007-T0002").unwrap(),
        "weak-assertion",
        format!("finding {i}: the assertion in tests/foo.rs:42 cannot fail"),
    )
    .with_round(2)
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

/// Whether `PEER_ONLY` (a comma-separated list) selects `name`; all are
/// selected without it.
fn selected(name: &str) -> bool {
    std::env::var("PEER_ONLY").map_or(true, |only| only.split(',').any(|n| n == name))
}

fn request(i: usize, task: &TaskId) -> NewMessage {
    NewMessage::request(
        AgentId::new("np-critic").unwrap(),
        AgentId::new("np-executor").unwrap(),
        task.clone(),
        "weak-assertion",
        format!("finding {i}: the assertion in tests/foo.rs:42 cannot fail"),
    )
    .with_round(2)
}

/// `gate`: the gate of a task with `n` open requests right after they
/// were sent, chipset against nubos, alternating.
fn gate_scenario(work: &Path, nubos: &mut Nubos, n: usize, rounds: usize) {
    let task = TaskId::new("M005-S007-T0003").unwrap();
    let (mut c_first, mut c_again, mut c_inbox, mut peer) = (0.0, 0.0, 0.0, 0.0);
    let executor = AgentId::new("np-executor").unwrap();
    for r in 0..rounds {
        let mail = mail_at(&work.join(format!("gate-c{r}")), None);
        let n_root = work.join(format!("gate-n{r}"));
        rotate(
            r,
            &mut [
                &mut || {
                    let mut i = 0;
                    while i < n {
                        let k = 100.min(n - i);
                        let drafts: Vec<NewMessage> =
                            (i..i + k).map(|j| request(j, &task)).collect();
                        mail.send_batch(&drafts).unwrap();
                        i += k;
                    }
                    // The gate and the full scan take turns going first
                    // (both inside the racy window), so that neither is
                    // favoured by what the other leaves in the caches.
                    let mut gate = || {
                        let t = Instant::now();
                        let pending = mail.pending_replies(&task).unwrap();
                        c_first += t.elapsed().as_secs_f64() * 1e6;
                        assert_eq!(pending.len(), n);
                    };
                    let mut scan = || {
                        let t = Instant::now();
                        let listed = mail.inbox(&executor).unwrap();
                        c_inbox += t.elapsed().as_secs_f64() * 1e6;
                        assert_eq!(listed.len(), n);
                    };
                    rotate(r, &mut [&mut gate, &mut scan]);
                    let t = Instant::now();
                    let pending = mail.pending_replies(&task).unwrap();
                    c_again += t.elapsed().as_secs_f64() * 1e6;
                    assert_eq!(pending.len(), n);
                },
                &mut || {
                    nubos.ask(&format!("requests {} {n} {task}", n_root.display()));
                    let words = nubos.ask(&format!("pending {} {task}", n_root.display()));
                    assert_eq!(
                        words.get(1).map(String::as_str),
                        Some(n.to_string().as_str())
                    );
                    peer += Nubos::micros(&words);
                },
            ],
        );
    }
    let ms = |t: f64| t / rounds as f64 / 1e3;
    println!(
        "gate {n}  chipset {:>8.1} ms (again {:>8.1} ms, inbox listing {:>8.1} ms)   nubos {:>8.1} ms   speed vs nubos {:.2}x",
        ms(c_first),
        ms(c_again),
        ms(c_inbox),
        ms(peer),
        peer / c_first
    );
}

/// `settled`: the first gate of a task with `n` open requests on a state
/// written long ago (every stamp settled, no folder or task cache yet: the
/// first gate after a restart), against the full scan (`Mail::inbox`) of
/// the same files and nubos's `pendingReplies`. Two chipset states: as its
/// own sends leave them (with their sent journal), and as another program
/// leaves them (`mail/.gate/` removed: every file is read). The gate and
/// the scan take turns going first, each on a fresh copy of the state.
fn settled_scenario(work: &Path, nubos: &mut Nubos, n: usize, rounds: usize) {
    let task = TaskId::new("M005-S007-T0005").unwrap();
    let executor = AgentId::new("np-executor").unwrap();
    // [journal, foreign] x [gate, scan], and the gate run again at once.
    let (mut gate, mut scan, mut again, mut peer) = ([0.0; 2], [0.0; 2], [0.0; 2], 0.0);
    let n_root = work.join("settled-n");
    nubos.ask(&format!("requests {} {n} {task}", n_root.display()));
    for (v, foreign) in [false, true].into_iter().enumerate() {
        for r in 0..rounds {
            // Two states with the same files: one for the gate, one for the scan.
            let roots: Vec<PathBuf> = (0..2)
                .map(|k| work.join(format!("settled-c{v}-{r}-{k}")))
                .collect();
            for root in &roots {
                let mail = mail_at(root, None);
                let mut i = 0;
                while i < n {
                    let k = 100.min(n - i);
                    let drafts: Vec<NewMessage> = (i..i + k).map(|j| request(j, &task)).collect();
                    mail.send_batch(&drafts).unwrap();
                    i += k;
                }
                if foreign {
                    #[allow(
                        clippy::disallowed_methods,
                        reason = "plays a state no gate cache was made for"
                    )]
                    std::fs::remove_dir_all(root.join("mail").join(".gate")).unwrap();
                }
            }
            // Past the gate cache's racy window (two seconds), and written
            // back, as a state written long ago is: the kernel's writeback
            // of this round's 20,000 new files does not land in the middle
            // of one of the timed reads.
            std::thread::sleep(std::time::Duration::from_millis(2_500));
            settle_disk(work);
            let (g, s) = (mail_at(&roots[0], None), mail_at(&roots[1], None));
            rotate(
                r,
                &mut [
                    &mut || {
                        let t = Instant::now();
                        let pending = g.pending_replies(&task).unwrap();
                        gate[v] += t.elapsed().as_secs_f64() * 1e6;
                        assert_eq!(pending.len(), n);
                        let t = Instant::now();
                        let pending = g.pending_replies(&task).unwrap();
                        again[v] += t.elapsed().as_secs_f64() * 1e6;
                        assert_eq!(pending.len(), n);
                    },
                    &mut || {
                        let t = Instant::now();
                        let listed = s.inbox(&executor).unwrap();
                        scan[v] += t.elapsed().as_secs_f64() * 1e6;
                        assert_eq!(listed.len(), n);
                    },
                    &mut || {
                        if v == 0 {
                            let words = nubos.ask(&format!("pending {} {task}", n_root.display()));
                            peer += Nubos::micros(&words);
                        }
                    },
                ],
            );
            for root in &roots {
                #[allow(clippy::disallowed_methods, reason = "a scratch state of the bench")]
                std::fs::remove_dir_all(root).unwrap();
            }
        }
    }
    let ms = |t: f64| t / rounds as f64 / 1e3;
    for (v, name) in ["journal", "foreign"].iter().enumerate() {
        println!(
            "settled {n} {name:<8} first gate {:>8.1} ms (again {:>8.1} ms)   inbox listing {:>8.1} ms   gate/scan {:.2}   nubos {:>8.1} ms   speed vs nubos {:.2}x",
            ms(gate[v]),
            ms(again[v]),
            ms(scan[v]),
            gate[v] / scan[v],
            ms(peer),
            peer / gate[v]
        );
    }
}

/// `archive`: archiving a notify just sent, chipset against nubos,
/// alternating.
fn archive_scenario(work: &Path, nubos: &mut Nubos, rounds: usize, seq: &mut usize) {
    let mail = mail_at(&work.join("archive-c"), None);
    let n_root = work.join("archive-n");
    let (mut c, mut peer) = (0.0, 0.0);
    let per_round = 50;
    for r in 0..rounds {
        for k in 0..per_round {
            rotate(
                r + k,
                &mut [
                    &mut || {
                        *seq += 1;
                        let sent = mail.send(&note(*seq)).unwrap();
                        let t = Instant::now();
                        let archived = mail.archive(&sent.id).unwrap();
                        c += t.elapsed().as_secs_f64() * 1e6;
                        assert!(matches!(
                            archived,
                            chipset_mail::ArchiveOutcome::Archived(_)
                        ));
                    },
                    &mut || {
                        let id = nubos.ask(&format!("notify {}", n_root.display()));
                        let words = nubos.ask(&format!("archive {} {}", n_root.display(), id[0]));
                        peer += Nubos::micros(&words);
                    },
                ],
            );
        }
    }
    report("archive", c, peer, rounds * per_round);
}

/// A response to `request` as another program writes it (nubos-pilot's
/// shape), straight into the requester's inbox: no reply index entry, so
/// archiving the request looks for it among the files. With `event`, its
/// `sent` event is appended to the manifest afterwards, as nubos-pilot's
/// `send` does (seed 002: "each send() ... appends a sent event").
fn foreign_response(mail: &Mail, request: &chipset_mail::Message, seq: usize, event: bool) {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        + 1;
    let id = format!("{ms}-{seq:08x}-0000-4000-8000-{seq:012x}");
    let json = format!(
        r#"{{
  "id": "{id}",
  "from": "{}",
  "to": "{}",
  "phase": "{}",
  "round": 2,
  "kind": "response",
  "subject": "weak-assertion",
  "body": "fixed {seq}",
  "expects_reply": false,
  "in_reply_to": "{}",
  "created_at": "{}"
}}
"#,
        request.to,
        request.from,
        request.task(),
        request.id,
        request.created_at,
    );
    let path = mail
        .inbox_dir(&request.from)
        .join(format!("{id}.json"))
        .unwrap();
    mail.state().create_new(&path, json.as_bytes()).unwrap();
    if event {
        let sent = serde_json::json!({
            "event": "sent", "id": id, "from": request.to.as_str(),
            "to": request.from.as_str(), "kind": "response",
            "phase": request.task().as_str(), "round": 2,
            "in_reply_to": request.id.as_str(), "expects_reply": false,
            "created_at": request.created_at.to_string(), "run_id": "bench",
        });
        mail.state()
            .log(&mail.manifest_path())
            .unwrap()
            .append(&sent)
            .unwrap();
    }
}

/// `answered`: archiving a request answered by a response another program
/// wrote, with `replies` answered requests (and their responses) present,
/// chipset against nubos, alternating.
fn answered_scenario(work: &Path, nubos: &mut Nubos, replies: usize, rounds: usize, event: bool) {
    let task = TaskId::new("M005-S007-T0004").unwrap();
    let mail = mail_at(&work.join(format!("answered-c-{event}")), None);
    let n_root = work.join(format!("answered-n-{event}"));
    let mut i = 0;
    while i < replies {
        let k = 100.min(replies - i);
        let asked = mail
            .send_batch(&(i..i + k).map(|j| request(j, &task)).collect::<Vec<_>>())
            .unwrap();
        let answers: Vec<NewMessage> = asked
            .iter()
            .map(|q| {
                NewMessage::response(
                    AgentId::new("np-executor").unwrap(),
                    AgentId::new("np-critic").unwrap(),
                    q.id.clone(),
                    "weak-assertion",
                    "fixed",
                )
            })
            .collect();
        mail.send_batch(&answers).unwrap();
        i += k;
    }
    nubos.ask(&format!("replies {} {replies}", n_root.display()));
    // The durable move alone (`StateDir::move_noclobber`, what the archive
    // does to the request's file), between two folders of the same state:
    // no archive can cost less, so nubos's time over it is the highest
    // ratio this disk allows.
    let state = mail.state();
    let (from_dir, to_dir) = (
        state.root_path().join("move-from").unwrap(),
        state.root_path().join("move-to").unwrap(),
    );
    state.ensure_dir(&from_dir).unwrap();
    state.ensure_dir(&to_dir).unwrap();
    let (mut c, mut peer, mut bare) = (0.0, 0.0, 0.0);
    let per_round = 10;
    let mut seq = 0;
    let mut moved = 0;
    for r in 0..rounds {
        for k in 0..per_round {
            rotate(
                r + k,
                &mut [
                    &mut || {
                        moved += 1;
                        let name = format!("{moved}.json");
                        let (from, to) =
                            (from_dir.join(&name).unwrap(), to_dir.join(&name).unwrap());
                        state.create_new(&from, b"{}\n").unwrap();
                        let t = Instant::now();
                        state.move_noclobber(&from, &to).unwrap();
                        bare += t.elapsed().as_secs_f64() * 1e6;
                    },
                    &mut || {
                        seq += 1;
                        let q = mail.send(&request(seq, &task)).unwrap();
                        foreign_response(&mail, &q, seq, event);
                        let t = Instant::now();
                        let archived = mail.archive(&q.id).unwrap();
                        c += t.elapsed().as_secs_f64() * 1e6;
                        assert!(matches!(
                            archived,
                            chipset_mail::ArchiveOutcome::Archived(_)
                        ));
                    },
                    &mut || {
                        let id = nubos.ask(&format!("answered {}", n_root.display()));
                        let words = nubos.ask(&format!("archive {} {}", n_root.display(), id[0]));
                        peer += Nubos::micros(&words);
                    },
                ],
            );
        }
    }
    let name = if event {
        "with its sent event"
    } else {
        "no sent event"
    };
    report(
        &format!("answered {replies} ({name})"),
        c,
        peer,
        rounds * per_round,
    );
    let per = |t: f64| t / (rounds * per_round) as f64;
    println!(
        "answered {replies} ({name}): the durable move alone {:>7.1} µs   nubos / move {:.1}x (the highest ratio this disk allows)   archive / move {:.2}",
        per(bare),
        peer / bare,
        c / bare
    );
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs `steps` in an order rotated by `round`, so each goes first in turn.
/// Writes back everything dirty on the filesystem of `dir` (see the module
/// docs), so that the next scenario starts on a quiet disk.
#[allow(
    clippy::disallowed_types,
    clippy::disallowed_methods,
    reason = "a directory handle for syncfs; the store has no call for it"
)]
fn settle_disk(dir: &Path) {
    let dir = std::fs::File::open(dir).expect("the scratch directory");
    rustix::fs::syncfs(&dir).expect("syncfs of the scratch filesystem");
}

fn rotate(round: usize, steps: &mut [&mut dyn FnMut()]) {
    let n = steps.len();
    for k in 0..n {
        (steps[(round + k) % n])();
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
    let probe = StateDir::open(work.path().join("probe")).unwrap();
    let order = RealIo.sync_order(probe.root());
    println!(
        "peer: projects under {}; chipset publishes with {order:?}",
        base.display()
    );

    if selected("gate") {
        settle_disk(work.path());
        let n = env_usize("PEER_GATE", 10_000);
        gate_scenario(work.path(), &mut nubos, n, env_usize("PEER_GATE_ROUNDS", 3));
    }
    if selected("settled") {
        settle_disk(work.path());
        let n = env_usize("PEER_GATE", 10_000);
        settled_scenario(work.path(), &mut nubos, n, env_usize("PEER_GATE_ROUNDS", 3));
    }
    if selected("inbox") {
        settle_disk(work.path());
        let n = env_usize("PEER_INBOX", 10_000);
        inbox::inbox_scenario(work.path(), &mut nubos, n, rounds);
    }
    if selected("archive") {
        settle_disk(work.path());
        archive_scenario(work.path(), &mut nubos, rounds, &mut seq);
    }
    if selected("answered") {
        let replies = env_usize("PEER_REPLIES", 1_000);
        for event in [true, false] {
            settle_disk(work.path());
            answered_scenario(work.path(), &mut nubos, replies, rounds, event);
        }
    }
    if !selected("sends") {
        return;
    }

    // fresh: 200 sends into a new project.
    settle_disk(work.path());
    let (mut c, mut n) = (0.0, 0.0);
    for r in 0..rounds {
        let mail = mail_at(&work.path().join(format!("fresh-c{r}")), None);
        let n_root = work.path().join(format!("fresh-n{r}"));
        rotate(
            r,
            &mut [
                &mut || c += chipset_sends(&mail, 200, &mut seq),
                &mut || n += nubos.send(&n_root, 200),
            ],
        );
    }
    report("fresh", c, n, rounds * 200);

    // batch: one batch of 100 under each order vs 100 single sends vs 100 nubos sends.
    let mut orders = vec![SyncOrder::FileThenDir];
    if order == SyncOrder::WriteBackThenDir {
        orders.insert(0, SyncOrder::WriteBackThenDir);
    }
    // Only an order other than the detected one is forced (see the docs).
    let forced = |o: SyncOrder| (o != order).then_some(o);
    let batch_mails: Vec<Mail> = orders
        .iter()
        .map(|o| mail_at(&work.path().join(format!("batch-{o:?}")), forced(*o)))
        .collect();
    let mail = mail_at(&work.path().join("batch-c"), None);
    let n_root = work.path().join("batch-n");
    for m in batch_mails.iter().chain([&mail]) {
        chipset_sends(m, 1, &mut seq);
    }
    nubos.send(&n_root, 1);
    settle_disk(work.path());
    let mut batch = vec![0.0; orders.len()];
    let (mut single, mut peer) = (0.0, 0.0);
    for r in 0..rounds {
        let seq_cell = std::cell::Cell::new(seq);
        let mut steps: Vec<Box<dyn FnMut() + '_>> = Vec::new();
        for (m, slot) in batch_mails.iter().zip(batch.iter_mut()) {
            let seq_cell = &seq_cell;
            steps.push(Box::new(move || {
                let s = seq_cell.get();
                let drafts: Vec<NewMessage> = (0..100).map(|i| note(s + i)).collect();
                seq_cell.set(s + 100);
                let start = Instant::now();
                m.send_batch(&drafts).unwrap();
                *slot += start.elapsed().as_secs_f64() * 1e6;
            }));
        }
        let (single, peer, nubos, mail, n_root) =
            (&mut single, &mut peer, &mut nubos, &mail, &n_root);
        let seq_ref = &seq_cell;
        steps.push(Box::new(move || {
            let mut s = seq_ref.get();
            *single += chipset_sends(mail, 100, &mut s);
            seq_ref.set(s);
        }));
        steps.push(Box::new(move || *peer += nubos.send(n_root, 100)));
        let mut refs: Vec<&mut dyn FnMut()> = steps
            .iter_mut()
            .map(|b| &mut **b as &mut dyn FnMut())
            .collect();
        rotate(r, &mut refs);
        drop(refs);
        drop(steps);
        seq = seq_cell.get();
    }
    let per = |t: f64| t / (100 * rounds) as f64;
    println!(
        "batch    single send {:>7.1} µs/msg   nubos {:>7.1} µs/msg",
        per(single),
        per(peer)
    );
    for (o, t) in orders.iter().zip(&batch) {
        let name = format!("{o:?}");
        println!(
            "batch    send_batch(100) {:<22} {:>7.1} µs/msg   vs single {:.2}x   vs nubos {:.2}x",
            name,
            per(*t),
            single / t,
            peer / t
        );
    }

    // fill: one inbox each to `fill` messages, alternating chunks of 500.
    settle_disk(work.path());
    let mail = mail_at(&work.path().join("fill-c"), None);
    let n_root = work.path().join("fill-n");
    let (mut c, mut n) = (0.0, 0.0);
    let chunk = 500;
    let (mut done, mut r) = (0, 0);
    while done < fill {
        let k = chunk.min(fill - done);
        rotate(
            r,
            &mut [&mut || c += chipset_sends(&mail, k, &mut seq), &mut || {
                n += nubos.send(&n_root, k)
            }],
        );
        done += k;
        r += 1;
    }
    report(&format!("fill {fill}"), c, n, fill);
}

/// Prints µs per message for chipset and nubos, and the speed ratio
/// (above 1.0: chipset is faster).
fn report(name: &str, c: f64, n: f64, messages: usize) {
    let per = |t: f64| t / messages as f64;
    println!(
        "{name:<10} chipset {:>8.1} µs/msg   nubos {:>8.1} µs/msg   speed vs nubos {:.2}x",
        per(c),
        per(n),
        n / c
    );
}
