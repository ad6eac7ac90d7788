//! Real processes: a worker process is killed with SIGKILL while working;
//! the witness escalates, the dispatcher reassigns, another worker process
//! completes the work, exactly once.

use std::io::Write;
use std::thread;
use std::time::{Duration, Instant};

use std::sync::Arc;

use chipset_hook::{HookStatus, Hooks};
use chipset_loop::{
    AttemptOutcome, Channels, Dispatcher, DispatcherConfig, Topic, Witness, WitnessConfig,
    WorkOutcome, Worker, WorkerConfig,
};
use chipset_mail::{Mail, ManifestEvent};
use chipset_store::{Classify, ErrorKind, StateDir, StateOptions};
use chipset_testkit::{self as kit, TempState};

use crate::{agent, bead, place};

const ENTRY: &str = "procs::worker_entry";

/// Runs a worker until it completes one work item, spending `work_ms` on
/// it with checkpoints. Says `working {bead}` on stdout when it starts.
fn run_worker(channels: Channels, me: &str, work_ms: u64) -> WorkOutcome {
    let config = WorkerConfig {
        touch_every: Duration::from_millis(50),
        poll_every: Duration::from_millis(50),
    };
    let worker = Worker::new(channels, agent(me), agent("mayor"), config);
    let mut done = None;
    worker
        .run_until(
            |work| {
                let mut out = std::io::stdout().lock();
                writeln!(out, "working {}", work.assignment().work.bead_id).unwrap();
                out.flush().unwrap();
                drop(out);
                let start = Instant::now();
                while start.elapsed() < Duration::from_millis(work_ms) {
                    work.checkpoint()?;
                    thread::sleep(Duration::from_millis(20));
                }
                Ok(format!("done by {me}"))
            },
            |result| {
                if let Ok(out @ WorkOutcome::Completed { .. }) = result {
                    done = Some(out.clone());
                    return true;
                }
                false
            },
        )
        .unwrap();
    done.expect("completed")
}

#[test]
fn worker_entry() {
    if let Some(role) = kit::child_role() {
        assert_eq!(role.name, "worker");
        let state = StateDir::open(role.arg(0)).unwrap();
        // Arguments 3 and 4: the server and the schema, or empty.
        let channels = match (role.arg(3), role.arg(4)) {
            ("", _) => Channels::new(state),
            (url, schema) => Channels::with_backend(state, place::server(url, schema)),
        };
        let _ = run_worker(channels, role.arg(1), role.parse(2));
        return;
    }
    // Not a child: the same role in-process, on a tiny input.
    let tmp = TempState::new();
    let d = Dispatcher::new(
        tmp.state.clone(),
        agent("mayor"),
        [agent("w1")],
        DispatcherConfig::default(),
    );
    d.submit(bead("b1"), "tiny").unwrap();
    d.tick().unwrap();
    let channels = Channels::new(tmp.state.clone());
    let out = thread::spawn(move || run_worker(channels, "w1", 10))
        .join()
        .unwrap();
    assert!(matches!(out, WorkOutcome::Completed { .. }));
    d.tick().unwrap();
    assert_eq!(
        d.entry(&bead("b1")).unwrap().unwrap().completed_by(),
        Some(&agent("w1"))
    );
}

/// A child that is killed if the test fails before it ends.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        kit::kill9(&mut self.0);
    }
}

/// Returns the first line the worker says (the test harness says other things too).
fn first_working(lines: &mut impl Iterator<Item = std::io::Result<String>>) -> String {
    lines
        .map(|l| l.unwrap())
        .find(|l| l.starts_with("working"))
        .expect("the worker started working")
}

fn sent(mail: &Mail, subject: &str) -> usize {
    mail.read_manifest()
        .unwrap()
        .iter()
        .filter(|e| matches!(e, ManifestEvent::Sent { subject: s, .. } if s == subject))
        .count()
}

/// A race's place: the state root's files (real clock), or a schema of
/// the test's own on the server (the server's clock).
pub(crate) struct Race {
    tmp: TempState,
    pg: Option<place::Schema>,
}

impl Race {
    fn channels(&self) -> Channels {
        match &self.pg {
            None => Channels::new(self.tmp.state.clone()),
            Some(pg) => Channels::with_backend(self.tmp.state.clone(), Arc::clone(&pg.backend)),
        }
    }

    fn hooks(&self) -> Hooks {
        match &self.pg {
            None => Hooks::new(self.tmp.state.clone()),
            Some(pg) => Hooks::with_backend(self.tmp.state.clone(), Arc::clone(&pg.backend)),
        }
    }

    fn mail(&self) -> Mail {
        match &self.pg {
            None => Mail::new(self.tmp.state.clone()),
            Some(pg) => Mail::with_backend(
                self.tmp.state.clone(),
                chipset_mail::MailConfig::default(),
                Arc::clone(&pg.backend),
            ),
        }
    }

    /// The child's arguments after its root, name and pace.
    fn server_args(&self) -> [String; 2] {
        match &self.pg {
            None => [String::new(), String::new()],
            Some(pg) => [pg.at.url().to_owned(), pg.at.name().to_owned()],
        }
    }
}

mod fs {
    #[test]
    fn a_worker_killed_mid_work_is_escalated_and_its_work_completed_once_by_another() {
        super::killed_worker(super::Race {
            tmp: super::TempState::with_options(super::StateOptions::default()),
            pg: None,
        });
    }
}

mod pg {
    #[test]
    fn a_worker_killed_mid_work_is_escalated_and_its_work_completed_once_by_another() {
        let test = "a_worker_killed_mid_work_is_escalated_and_its_work_completed_once_by_another";
        if let Some(pg) = crate::place::Schema::open(test, None) {
            super::killed_worker(super::Race {
                tmp: super::TempState::with_options(super::StateOptions::default()),
                pg: Some(pg),
            });
        }
    }
}

/// A worker process killed with SIGKILL mid-work: the witness escalates,
/// the dispatcher reassigns, another worker process completes it, once.
fn killed_worker(race: Race) {
    let state = race.tmp.state.clone();
    let root = state.root().display().to_string();
    let [url, schema] = race.server_args();
    let d = Dispatcher::new(
        race.channels(),
        agent("mayor"),
        [agent("victim"), agent("rescuer")],
        DispatcherConfig::default(),
    );
    d.submit(bead("gt-abc12"), "Add README section").unwrap();
    d.tick().unwrap();
    let hooks = race.hooks();
    let held = hooks
        .current(&agent("victim"))
        .unwrap()
        .expect("assigned to the victim");

    // The victim starts working (for a minute), and is killed mid-work.
    let mut victim = Killed(kit::spawn(
        ENTRY,
        "worker",
        &[
            root.clone(),
            "victim".into(),
            "60000".into(),
            url.clone(),
            schema.clone(),
        ],
    ));
    let line = first_working(&mut kit::lines(&mut victim.0));
    assert_eq!(line, "working gt-abc12");
    assert_eq!(
        HookStatus::of(&hooks.read(&agent("victim")).unwrap()),
        Some(HookStatus::Active)
    );
    kit::kill9(&mut victim.0);

    // The rescuer is idle, waiting for work.
    let mut rescuer = Killed(kit::spawn(
        ENTRY,
        "worker",
        &[root, "rescuer".into(), "100".into(), url, schema],
    ));
    let mut rescuer_lines = kit::lines(&mut rescuer.0);

    let config = WitnessConfig {
        stall_threshold: Duration::from_millis(300),
        nudge_interval: Duration::from_millis(200),
        grace: Duration::ZERO,
        ..WitnessConfig::default()
    };
    let witness = Witness::new(race.channels(), agent("witness"), agent("mayor"), config);
    // A witness or worker that never acts fails here, not by timeout.
    let deadline = Instant::now() + kit::PATIENT;
    loop {
        witness.tick().unwrap();
        d.tick().unwrap();
        if d.entry(&bead("gt-abc12")).unwrap().unwrap().is_done() {
            break;
        }
        assert!(Instant::now() < deadline, "the work was never completed");
        thread::sleep(Duration::from_millis(25));
    }
    assert_eq!(first_working(&mut rescuer_lines), "working gt-abc12");
    kit::wait_ok(&mut rescuer.0, Duration::from_secs(60));

    let entry = d.entry(&bead("gt-abc12")).unwrap().unwrap();
    assert_eq!(entry.completed_by(), Some(&agent("rescuer")));
    let outcomes: Vec<_> = entry
        .attempts
        .iter()
        .map(|t| (t.agent.to_string(), t.outcome))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("victim".to_owned(), AttemptOutcome::Reassigned),
            ("rescuer".to_owned(), AttemptOutcome::Completed)
        ]
    );
    let mail = race.mail();
    assert_eq!(sent(&mail, &Topic::HealthEscalation.to_string()), 1);
    assert_eq!(sent(&mail, &Topic::CompletionReport.to_string()), 1);
    for who in ["victim", "rescuer"] {
        assert_eq!(
            HookStatus::of(&hooks.read(&agent(who)).unwrap()),
            Some(HookStatus::Empty)
        );
    }
    // Had the victim lived, its completion would be refused.
    assert_eq!(hooks.complete(&held).unwrap_err().kind(), ErrorKind::Stale);
}
