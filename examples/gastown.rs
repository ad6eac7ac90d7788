//! Gastown: a dispatcher, three workers and a witness, as threads on one
//! state directory. One worker hangs mid-work; the witness checks on it,
//! warns it and escalates; the dispatcher takes the work away and gives it
//! to an idle worker; every work item is completed exactly once.
//!
//! `cargo run --example gastown [-- --root DIR]`
//!
//! Without `--root`, a fresh temporary state directory is made and kept, so
//! the files can be read afterwards (`hooks/`, `nudge/`, `mail/`, `bus/`,
//! `loop/`).

#[macro_use]
mod support;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use chipset::hook::BeadId;
use chipset::r#loop::{
    AttemptOutcome, Channels, DispatchAction, Dispatcher, DispatcherConfig, Topic, Witness,
    WitnessAction, WitnessConfig, WorkOutcome, Worker, WorkerConfig,
};
use chipset::mail::{Mail, ManifestEvent};
use chipset::store::{AgentId, StateDir, Timestamp};
use chipset::{Classify, ErrorKind};

/// One timeline event: when, in what order it was said, who, what.
type Event = (Timestamp, usize, String, String);

/// The shared timeline: events with their time on the state's clock,
/// printed in time order once the story is over (threads report what they
/// did after doing it, so live printing would shuffle cause and effect).
#[derive(Clone)]
struct Timeline {
    state: StateDir,
    start: Timestamp,
    events: Arc<Mutex<Vec<Event>>>,
}

impl Timeline {
    fn say(&self, who: &str, what: impl Into<String>) {
        self.say_at(self.state.now(), who, what);
    }

    fn say_at(&self, at: Timestamp, who: &str, what: impl Into<String>) {
        let mut events = self.events.lock().expect("timeline lock");
        let seq = events.len();
        events.push((at, seq, who.to_owned(), what.into()));
    }

    fn print(&self) {
        let mut events = self.events.lock().expect("timeline lock").clone();
        events.sort();
        for (at, _, who, what) in events {
            let t = at.since(self.start).as_secs_f64();
            say!("{t:>7.3}s  {who:<16} {what}");
        }
    }
}

fn id(name: &str) -> AgentId {
    AgentId::new(name).expect("valid agent id")
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let root = match args.iter().position(|a| a == "--root") {
        Some(i) => PathBuf::from(args.get(i + 1).ok_or("--root needs a directory")?),
        None => tempfile::Builder::new()
            .prefix("gastown-")
            .tempdir()?
            .keep()
            .join("state"),
    };
    let state = StateDir::open(&root)?;
    if !state.list(&state.root_path())?.is_empty() {
        return Err(format!("{} is not empty: give a fresh directory", root.display()).into());
    }
    say!("state directory: {}", state.root().display());
    say!("dispatcher, three workers and a witness at work (a few seconds)...");
    say!();

    let mayor = id("mayor");
    let workers = [
        id("polecat-alpha"),
        id("polecat-bravo"),
        id("polecat-charlie"),
    ];
    let hanging = workers[2].clone();
    let beads = [
        ("gt-001", "Add README section"),
        ("gt-002", "Fix flaky test"),
        ("gt-003", "Bump dependencies"),
    ];

    let timeline = Timeline {
        start: state.now(),
        state: state.clone(),
        events: Arc::default(),
    };
    let all_done = Arc::new(AtomicBool::new(false));

    // Every loop works through these handles: swap in a `Mail` or `Bus` with
    // its own config (`with_mail`, `with_bus`) and all three loops use it.
    let channels = Channels::new(state.clone());
    let dispatcher = Dispatcher::new(
        channels.clone(),
        mayor.clone(),
        workers.clone(),
        DispatcherConfig {
            poll_every: Duration::from_millis(100),
        },
    );
    for (bead, title) in beads {
        dispatcher.submit(BeadId::new(bead)?, title)?;
        timeline.say("dispatcher", format!("submitted {bead} \"{title}\""));
    }

    // Short intervals so the story takes seconds: quiet after 500 ms, 300 ms per nudge.
    let witness = Witness::new(
        channels.clone(),
        id("witness"),
        mayor.clone(),
        WitnessConfig {
            stall_threshold: Duration::from_millis(500),
            nudge_interval: Duration::from_millis(300),
            grace: Duration::from_millis(200),
            ..WitnessConfig::default()
        },
    );

    let mut threads = Vec::new();

    // The dispatcher: woken by the bus, ticking at least every 100 ms.
    {
        let (tl, done, d) = (timeline.clone(), all_done.clone(), dispatcher.clone());
        threads.push(thread::spawn(move || -> chipset::r#loop::Result<()> {
            d.run_until(|actions| {
                for a in actions {
                    tl.say_at(
                        dispatch_time(a).unwrap_or_else(|| tl.state.now()),
                        "dispatcher",
                        describe_dispatch(a),
                    );
                }
                let finished = d
                    .ledger()
                    .map(|l| l.items.iter().all(|e| e.is_done()))
                    .unwrap_or(false);
                if finished {
                    done.store(true, Ordering::SeqCst);
                }
                finished
            })
        }));
    }

    // The witness: ticks every 50 ms.
    {
        let (tl, done) = (timeline.clone(), all_done.clone());
        threads.push(thread::spawn(move || -> chipset::r#loop::Result<()> {
            witness.run_until(Duration::from_millis(50), |actions| {
                for a in actions {
                    tl.say_at(
                        witness_time(a).unwrap_or_else(|| tl.state.now()),
                        "witness",
                        describe_witness(a),
                    );
                }
                done.load(Ordering::SeqCst)
            })
        }));
    }

    // Three workers. Charlie hangs as soon as it starts.
    for (n, me) in workers.iter().enumerate() {
        let (tl, done) = (timeline.clone(), all_done.clone());
        let worker = Worker::new(
            channels.clone(),
            me.clone(),
            mayor.clone(),
            WorkerConfig {
                touch_every: Duration::from_millis(100),
                poll_every: Duration::from_millis(100),
            },
        );
        let hangs = *me == hanging;
        let steps = 3 + 2 * n;
        let name = me.to_string();
        threads.push(thread::spawn(move || -> chipset::r#loop::Result<()> {
            worker.run_until(
                |work| {
                    let bead = work.assignment().work.bead_id.clone();
                    tl.say(&name, format!("activated {bead} (pending -> active)"));
                    if hangs {
                        tl.say(&name, "hangs: no heartbeat, no answer to nudges");
                        while !done.load(Ordering::SeqCst) {
                            thread::sleep(Duration::from_millis(20));
                        }
                        tl.say(&name, format!("wakes up and tries to complete {bead}"));
                        return Ok("finished late".to_owned());
                    }
                    for step in 1..=steps {
                        thread::sleep(Duration::from_millis(100));
                        work.checkpoint()?;
                        if step % 2 == 0 {
                            tl.say(&name, format!("heartbeat on {bead} (hook touched)"));
                        }
                    }
                    Ok(format!("{bead} done"))
                },
                |result| {
                    match result {
                        Ok(WorkOutcome::Completed {
                            assignment,
                            completed_at,
                            ..
                        }) => tl.say_at(
                            *completed_at,
                            &name,
                            format!(
                                "completed {} and mailed the completion report",
                                assignment.work.bead_id
                            ),
                        ),
                        Err(e) if e.kind() == ErrorKind::Stale => {
                            tl.say(&name, format!("late completion refused: {e}"));
                            return true;
                        }
                        Err(e) => tl.say(&name, format!("error: {e}")),
                        Ok(_) => {}
                    }
                    done.load(Ordering::SeqCst)
                },
            )
        }));
    }

    for t in threads {
        t.join().map_err(|_| "a thread panicked")??;
    }

    timeline.print();

    // The outcome, checked.
    say!();
    let ledger = dispatcher.ledger()?;
    for entry in &ledger.items {
        let attempts: Vec<String> = entry
            .attempts
            .iter()
            .map(|t| format!("{} {}", t.agent, t.outcome))
            .collect();
        say!(
            "{:<8} {:<20} {:<6} {}",
            entry.bead_id,
            entry.title,
            entry.state,
            attempts.join(", ")
        );
    }
    let mail = Mail::new(state.clone());
    let sent = |subject: &str| -> Result<usize, Box<dyn std::error::Error>> {
        Ok(mail
            .read_manifest()?
            .iter()
            .filter(|e| matches!(e, ManifestEvent::Sent { subject: s, .. } if s == subject))
            .count())
    };
    let (escalations, reports) = (
        sent(&Topic::HealthEscalation.to_string())?,
        sent(&Topic::CompletionReport.to_string())?,
    );
    say!();
    say!("health escalations sent: {escalations}; completion reports sent: {reports}");
    say!("state directory: {}", state.root().display());

    let once = ledger.items.iter().all(|e| {
        e.is_done()
            && e.attempts
                .iter()
                .filter(|t| t.outcome == AttemptOutcome::Completed)
                .count()
                == 1
    });
    let hung_reassigned = ledger.items.iter().any(|e| {
        e.attempts
            .iter()
            .any(|t| t.agent == hanging && t.outcome == AttemptOutcome::Reassigned)
            && e.completed_by() != Some(&hanging)
    });
    if ledger.items.len() != beads.len()
        || !once
        || !hung_reassigned
        || escalations != 1
        || reports != beads.len()
    {
        return Err("unexpected outcome: see the timeline above".into());
    }
    Ok(())
}

fn dispatch_time(a: &DispatchAction) -> Option<Timestamp> {
    match a {
        DispatchAction::Assigned { at, .. }
        | DispatchAction::Completed { at, .. }
        | DispatchAction::Reassigned { at, .. }
        | DispatchAction::Requeued { at, .. } => Some(*at),
        _ => None,
    }
}

fn witness_time(a: &WitnessAction) -> Option<Timestamp> {
    match a {
        WitnessAction::HealthCheck { at, .. }
        | WitnessAction::StallWarning { at, .. }
        | WitnessAction::Alive { at, .. }
        | WitnessAction::Escalated { at, .. }
        | WitnessAction::Closed { at, .. } => Some(*at),
        _ => None,
    }
}

fn describe_dispatch(a: &DispatchAction) -> String {
    match a {
        DispatchAction::Assigned {
            bead_id,
            agent,
            generation,
            ..
        } => format!(
            "assigned {bead_id} to {agent} (generation {generation}), work_assignment mailed"
        ),
        DispatchAction::Completed { bead_id, agent, .. } => {
            format!("verified {bead_id} completed by {agent}; hook cleared")
        }
        DispatchAction::Reassigned { bead_id, from, .. } => {
            format!(
                "escalation: took {bead_id} away from {from} (fenced), sent abort, suspended it"
            )
        }
        DispatchAction::Requeued { bead_id, agent, .. } => {
            format!("{bead_id} left {agent}'s hook without completion: queued again")
        }
        DispatchAction::Ignored {
            kind,
            bead_id,
            agent,
            reason,
            ..
        } => format!("ignored {kind} for {bead_id} from {agent}: {reason:?}"),
        DispatchAction::Unreadable { path, reason } => {
            format!("unreadable {}: {reason}", path.display())
        }
        other => format!("{other:?}"),
    }
}

fn describe_witness(a: &WitnessAction) -> String {
    match a {
        WitnessAction::HealthCheck { key, .. } => {
            format!("{} quiet on {}: health_check sent", key.agent, key.bead_id)
        }
        WitnessAction::StallWarning { key, .. } => {
            format!("no answer from {}: stall_warning sent", key.agent)
        }
        WitnessAction::Alive { key, evidence, .. } => {
            format!("{} is alive ({evidence})", key.agent)
        }
        WitnessAction::Escalated { key, .. } => format!(
            "{} silent: health_escalation mailed to the dispatcher (urgent) + critical bus event",
            key.agent
        ),
        WitnessAction::Closed { key, .. } => {
            format!("incident on {} closed: hook moved on", key.agent)
        }
        WitnessAction::Unreadable { path, reason } => {
            format!("unreadable {}: {reason}", path.display())
        }
        other => format!("{other:?}"),
    }
}
