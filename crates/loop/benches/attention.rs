//! Publish-to-wake for each channel: from the start of the call that makes
//! work for an agent (assign a hook, send a nudge, send mail, publish an
//! event, open a reminder) in this thread to the moment a `BriefWatch` in
//! another thread returns the brief with that work, on `Instant`.
//!
//! Beside each, `…/make_only` times the same call with nobody waiting: the
//! difference is the cost of the wake-up itself (inotify delivery, the
//! waiter's re-read of the channels). The goal is a publish-to-wake median
//! under 5 ms; a median of separate samples is printed to stderr too.

#![allow(
    clippy::print_stderr,
    reason = "a benchmark prints its own figures beside criterion's"
)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use chipset_bus::{Bus, NewEvent};
use chipset_hook::BeadId;
use chipset_hook::Hooks;
use chipset_loop::{Attention, AttentionConfig, WorkKind};
use chipset_mail::{Mail, NewMessage as MailDraft};
use chipset_nudge::{
    Delivery, KindRegistry, ManualResolution, NewNudge, NewReminder, NudgeType, Nudges, Opened,
    Reminders,
};
use chipset_store::{AgentId, StateDir, TaskId, WatchConfig};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::json;

/// Handles on every channel of one state root, and a counter for fresh ids.
struct Channels {
    hooks: Hooks,
    nudges: Nudges,
    mail: Mail,
    bus: Bus,
    reminders: Reminders,
    n: u64,
}

impl Channels {
    fn new(state: StateDir) -> Self {
        Channels {
            hooks: Hooks::new(state.clone()),
            nudges: Nudges::new(state.clone()),
            mail: Mail::new(state.clone()),
            bus: Bus::new(state.clone()),
            reminders: Reminders::new(state, KindRegistry::preset()),
            n: 0,
        }
    }

    /// Makes one piece of `kind` work for `to`.
    fn make(&mut self, kind: WorkKind, to: &AgentId) {
        self.n += 1;
        let n = self.n;
        let from = AgentId::new("mayor").unwrap();
        match kind {
            WorkKind::Hook => {
                let bead = BeadId::new(format!("gt-{n}")).unwrap();
                self.hooks.assign(to, bead, "bench", Some(&from)).unwrap();
            }
            WorkKind::Nudge => {
                let draft = NewNudge::new(from, NudgeType::HealthCheck, format!("n{n}"));
                assert!(!matches!(
                    self.nudges.send(to, &draft).unwrap(),
                    Delivery::Held { .. }
                ));
            }
            WorkKind::Mail => {
                let task = TaskId::new("bench").unwrap();
                self.mail
                    .send(&MailDraft::notify(from, to.clone(), task, "bench", "x"))
                    .unwrap();
            }
            WorkKind::Bus => {
                let published = self
                    .bus
                    .publish(to, &NewEvent::new("mayor", "bench"))
                    .unwrap();
                assert!(published.delivered().is_some());
            }
            WorkKind::Reminder => {
                let mut new = NewReminder {
                    tenant_id: "default".into(),
                    kind: "wrap_session".into(),
                    source_type: "session".into(),
                    source_id: format!("s{n}"),
                    message: "bench".into(),
                    ..NewReminder::default()
                };
                new.metadata.insert(
                    Attention::REMINDER_AGENT_FIELD.to_owned(),
                    json!(to.as_str()),
                );
                assert!(matches!(self.reminders.open(&new).unwrap(), Opened::New(_)));
            }
            _ => unreachable!("every kind is listed"),
        }
    }

    /// Takes the work away again, so the agent's brief is empty.
    fn clear(&mut self, kind: WorkKind, to: &AgentId) {
        match kind {
            WorkKind::Hook => {
                let held = self.hooks.current(to).unwrap().unwrap();
                let _ = self.hooks.reassign(&held).unwrap();
            }
            WorkKind::Nudge => {
                let received = self.nudges.receive(to).unwrap();
                let n = received.value().unwrap().to_process().unwrap().clone();
                self.nudges.mark_processed(to, &n).unwrap();
            }
            WorkKind::Mail => {
                for m in self.mail.inbox(to).unwrap() {
                    let _ = self.mail.archive(&m.id).unwrap();
                }
            }
            WorkKind::Bus => {
                for e in self.bus.pending(to).unwrap().events {
                    let _ = self.bus.ack_event(to, &e).unwrap();
                }
            }
            WorkKind::Reminder => {
                let open = self
                    .reminders
                    .list(&chipset_nudge::ReminderFilter::default())
                    .unwrap();
                for r in open.items {
                    self.reminders
                        .resolve(&r.id, ManualResolution::Completed, None)
                        .unwrap();
                }
            }
            _ => unreachable!("every kind is listed"),
        }
    }
}

enum Seen {
    Work(Instant),
    Cleared,
}

/// A thread watching `agent`'s brief, saying when it changes.
fn start_waiter(state: &StateDir, agent: &AgentId) -> (mpsc::Receiver<Seen>, Arc<AtomicBool>) {
    // A rescan interval far beyond a sample: every wake-up timed here is a notification.
    let config = AttentionConfig {
        watch: WatchConfig {
            notify: true,
            rescan_interval: Duration::from_secs(600),
        },
    };
    let mut watch = Attention::from_state(state)
        .with_config(config)
        .watch(agent)
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = Arc::clone(&stop);
    thread::spawn(move || {
        while !stopped.load(Ordering::Relaxed) {
            if let Some(brief) = watch.next(Duration::from_millis(100)).unwrap() {
                let at = Instant::now();
                let seen = if brief.is_empty() {
                    Seen::Cleared
                } else {
                    Seen::Work(at)
                };
                if tx.send(seen).is_err() {
                    return;
                }
            }
        }
    });
    (rx, stop)
}

const KINDS: [WorkKind; 5] = [
    WorkKind::Hook,
    WorkKind::Nudge,
    WorkKind::Mail,
    WorkKind::Bus,
    WorkKind::Reminder,
];

fn bench_wake(c: &mut Criterion) {
    let mut g = c.benchmark_group("wake");
    g.sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(3));
    for kind in KINDS {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path()).unwrap();
        let agent = AgentId::new("alpha").unwrap();
        let mut ch = Channels::new(state.clone());
        let (rx, stop) = start_waiter(&state, &agent);
        let mut samples = Vec::new();
        g.bench_function(BenchmarkId::new("publish_to_wake", kind), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let t0 = Instant::now();
                    ch.make(kind, &agent);
                    let woke = loop {
                        match rx.recv().unwrap() {
                            Seen::Work(at) => break at,
                            Seen::Cleared => {}
                        }
                    };
                    let d = woke.saturating_duration_since(t0);
                    samples.push(d);
                    total += d;
                    ch.clear(kind, &agent);
                    while !matches!(rx.recv().unwrap(), Seen::Cleared) {}
                }
                total
            });
        });
        stop.store(true, Ordering::Relaxed);
        drop(rx);
        // The same calls with nobody waiting.
        let tmp2 = tempfile::tempdir().unwrap();
        let mut quiet = Channels::new(StateDir::open(tmp2.path()).unwrap());
        g.bench_function(BenchmarkId::new("make_only", kind), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let t0 = Instant::now();
                    quiet.make(kind, &agent);
                    total += t0.elapsed();
                    quiet.clear(kind, &agent);
                }
                total
            });
        });
        samples.sort();
        if let Some(median) = samples.get(samples.len() / 2) {
            eprintln!(
                "wake/{kind}: publish-to-wake median {:.3} ms over {} samples",
                median.as_secs_f64() * 1e3,
                samples.len()
            );
        }
    }
    g.finish();
}

criterion_group!(benches, bench_wake);
criterion_main!(benches);
