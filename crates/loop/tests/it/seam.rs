//! The loops' writing calls driven through the store's I/O seam (issue
//! 12's standard): a fault (EIO, ENOSPC) at every call, and every
//! power-cut state. Each failure is plain (nothing a reader sees changed)
//! or of unknown outcome, and the retry then converges on what one clean
//! call leaves, applied once.
//!
//! What the retry is, and what "applied once" is, per call:
//!
//! - `Dispatcher::submit`: the retry is the same submit (bead and title).
//!   The ledger holds one entry for the bead, queued, as the first
//!   attempt that committed wrote it, and the retry returns that entry.
//! - a dispatcher tick that assigns: the retry is the next tick. The
//!   ledger entry is assigned to the idle agent's hook as the hook holds
//!   it (one attempt), the agent has one `work-assignment` mail, under
//!   the id the entry names, and one `work-assigned` wake-up about the
//!   assignment; the log holds no action twice.
//! - a dispatcher tick that mails an assignment whose entry names no
//!   `work-assignment` mail: the retry is the next tick. The entry names
//!   the agent's one `work-assignment` mail in its inbox.
//! - an idle worker's run that answers a health check: the retry is the
//!   next run. The check is processed and the witness has one answer.
//! - a witness tick that nudges: the retry is the next tick. The incident
//!   is `checking`, and the agent's one pending nudge is the witness's
//!   health check of that time.
//! - a witness tick that escalates: the retry is the next tick. The
//!   incident is `escalated` under the id of the dispatcher's one
//!   `health-escalation` mail, with one critical wake-up on its queue.
//! - `Rounds::open` and each step of a `Round` (executor done, critic
//!   done, route, committed): the retry is the same call on the same
//!   handle. The checkpoint is in the step's next phase with the step's
//!   record once; a route that escalates wakes `escalate_to` once;
//!   `committed` has moved the task's mail to its archive. After a power
//!   cut the round is reopened and the step taken if its phase is still
//!   the step's.
//!
//! After every retry the loop's doctor, the hooks', the mail's (once it
//! completes a send's follow-up), the bus's and the nudges' are clean.
//! The rounds' cases are in `seam_rounds.rs`, on this file's harness.

use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;

use chipset_bus::Bus;
use chipset_hook::{HookStatus, Hooks, Pickup};
use chipset_loop::{
    BeadState, Channels, DispatchAction, Dispatcher, DispatcherConfig, Error, LedgerEntry,
    LoopState, Phase, Round, Rounds, RoundsConfig, Routing, Topic, Witness, WitnessAction,
    WitnessConfig, WorkOutcome, Worker, WorkerConfig,
};
use chipset_mail::Mail;
use chipset_nudge::{NewNudge, NudgeType, Nudges, Received};
use chipset_store::{
    Clock, Defect, DoctorMode, ManualClock, ReadOutcome, RealIo, Report, SharedIo, StateDir,
    StateOptions, TaskId, Timestamp,
};
use chipset_testkit::{
    FaultCase, RecordIo, T0, Visible, forgive_lock_folders, state_path, sweep_each,
};

use crate::{agent, bead, secs};

/// One state root's loops and channels, on a manual clock, and what the
/// runs returned.
pub(crate) struct World {
    pub(crate) state: StateDir,
    pub(crate) clock: ManualClock,
    pub(crate) hooks: Hooks,
    pub(crate) mail: Mail,
    pub(crate) bus: Bus,
    pub(crate) nudges: Nudges,
    pub(crate) dispatcher: Dispatcher,
    pub(crate) witness: Witness,
    pub(crate) worker: Worker,
    pub(crate) rounds: Rounds,
    /// The round handle the round cases step.
    pub(crate) round: RefCell<Option<Round>>,
    /// What the runs that succeeded returned.
    pub(crate) returned: RefCell<Vec<Returned>>,
}

/// What a run returned.
#[derive(Debug)]
pub(crate) enum Returned {
    Submitted(LedgerEntry),
    Dispatched(Vec<DispatchAction>),
    Witnessed(Vec<WitnessAction>),
    Routed(Routing),
    Stepped,
}

impl World {
    pub(crate) fn open(root: &Path, io: SharedIo, clock: &ManualClock) -> World {
        let state = StateDir::open_with(
            root,
            StateOptions {
                io,
                clock: Arc::new(clock.clone()),
                ..StateOptions::default()
            },
        )
        .unwrap();
        let channels = Channels::new(state.clone());
        let witness = WitnessConfig {
            stall_threshold: secs(300),
            nudge_interval: secs(60),
            grace: secs(0),
            ..WitnessConfig::default()
        };
        World {
            hooks: Hooks::new(state.clone()),
            mail: Mail::new(state.clone()),
            bus: Bus::new(state.clone()),
            nudges: Nudges::new(state.clone()),
            dispatcher: Dispatcher::new(
                channels.clone(),
                agent("mayor"),
                [agent("w1")],
                DispatcherConfig::default(),
            ),
            witness: Witness::new(channels.clone(), agent("witness"), agent("mayor"), witness),
            worker: Worker::new(
                channels.clone(),
                agent("w1"),
                agent("mayor"),
                WorkerConfig::default(),
            ),
            rounds: Rounds::new(
                channels,
                RoundsConfig {
                    max_rounds: 1,
                    escalate_to: Some(agent("human")),
                    ..RoundsConfig::default()
                },
            ),
            round: RefCell::new(None),
            returned: RefCell::new(Vec::new()),
            clock: clock.clone(),
            state,
        }
    }

    pub(crate) fn advance(&self, s: u64) {
        self.clock.advance(secs(s));
    }

    pub(crate) fn returned(&self, r: Returned) {
        self.returned.borrow_mut().push(r);
    }

    /// Runs `f` on the round handle.
    pub(crate) fn step<R>(
        &self,
        f: impl FnOnce(&mut Round) -> Result<R, Error>,
    ) -> Result<R, Error> {
        f(self.round.borrow_mut().as_mut().expect("the round is open"))
    }

    /// Opens the round handle from its checkpoint (as a restart does).
    pub(crate) fn reopen(&self) {
        *self.round.borrow_mut() = Some(self.rounds.open(&task()).unwrap());
    }

    /// The checkpoint of the task, as its file holds it.
    pub(crate) fn checkpoint(&self) -> Option<serde_json::Value> {
        let path = state_path(&self.state, "loop/rounds/T1.json");
        self.state.read_json(&path).unwrap().value()
    }

    pub(crate) fn incident(&self) -> Option<serde_json::Value> {
        let path = state_path(&self.state, "loop/witness/incidents/w1.json");
        self.state.read_json(&path).unwrap().value()
    }

    /// The records of the log `loop/{rel}`, asserting every line reads.
    pub(crate) fn log<T: serde::de::DeserializeOwned>(&self, rel: &str) -> Vec<T> {
        let path = state_path(&self.state, &format!("loop/{rel}"));
        if self.state.stat(&path).unwrap().is_none() {
            return Vec::new();
        }
        let read = self.state.log(&path).unwrap().read_from::<T>(0).unwrap();
        assert!(read.bad_lines.is_empty(), "{rel}: {:?}", read.bad_lines);
        read.records
    }

    /// The events of `kind` in `who`'s bus queue.
    pub(crate) fn events(&self, who: &str, kind: Topic) -> Vec<chipset_bus::Event> {
        let pending = self.bus.pending(&agent(who)).unwrap();
        assert!(pending.unreadable.is_empty(), "{:?}", pending.unreadable);
        let kind = kind.to_string();
        pending
            .events
            .into_iter()
            .filter(|e| e.kind == kind)
            .collect()
    }

    /// The mail of `subject` in `who`'s inbox.
    pub(crate) fn mail_to(&self, who: &str, subject: Topic) -> Vec<chipset_mail::Message> {
        let subject = subject.to_string();
        let inbox = self.mail.inbox(&agent(who)).unwrap();
        inbox.into_iter().filter(|m| m.subject == subject).collect()
    }
}

pub(crate) fn task() -> TaskId {
    TaskId::new("T1").unwrap()
}

/// Assigns `b1` to `w1` and has it picked up, at the clock's now.
fn active(w: &World) {
    w.hooks
        .assign(&agent("w1"), bead("b1"), "task b1", Some(&agent("mayor")))
        .unwrap();
    assert!(matches!(
        w.hooks.pickup(&agent("w1")).unwrap(),
        Pickup::Started(_)
    ));
}

/// A quiet agent, warned: a health check, then a stall warning.
fn warned(w: &World) {
    active(w);
    w.advance(301);
    assert!(matches!(
        w.witness.tick().unwrap()[..],
        [WitnessAction::HealthCheck { .. }]
    ));
    w.advance(60);
    assert!(matches!(
        w.witness.tick().unwrap()[..],
        [WitnessAction::StallWarning { .. }]
    ));
    w.advance(59);
}

pub(crate) struct Case {
    pub(crate) name: &'static str,
    /// Makes the state the call acts on (on a real disk in the power-cut
    /// sweep, through the fault backend in the fault sweep).
    pub(crate) setup: fn(&World),
    /// For a round step: the phase the step needs (the handle is opened
    /// from the checkpoint before the call, and after a power cut the step
    /// is taken only if the round is still in it).
    pub(crate) phase: Option<Phase>,
    /// Runs the call, retry-safe; Err only for a failure.
    pub(crate) run: fn(&World) -> Result<(), Error>,
    /// The call applied, once (what a reader sees).
    pub(crate) applied: fn(&World) -> bool,
    /// Checks what the last successful run returned against the state.
    pub(crate) returned: fn(&World, &str),
}

/// The dispatcher's calls.
fn dispatcher_cases() -> Vec<Case> {
    vec![
        Case {
            name: "submit",
            setup: |_| {},
            phase: None,
            run: |w| {
                let entry = w.dispatcher.submit(bead("b1"), "task b1")?;
                w.returned(Returned::Submitted(entry));
                Ok(())
            },
            applied: |w| {
                let ledger = w.dispatcher.ledger().unwrap();
                ledger.corrupt.is_empty()
                    && matches!(&ledger.items[..], [e] if e.bead_id == bead("b1")
                        && e.title == "task b1"
                        && e.state == BeadState::Queued
                        && e.attempts.is_empty())
            },
            returned: |w, what| {
                let Some(Returned::Submitted(got)) = w.returned.borrow_mut().pop() else {
                    panic!("{what}: no submit returned");
                };
                let entry = w.dispatcher.entry(&bead("b1")).unwrap();
                assert_eq!(
                    entry.as_ref(),
                    Some(&got),
                    "{what}: not the entry submitted"
                );
            },
        },
        Case {
            name: "dispatcher tick that assigns",
            setup: |w| drop(w.dispatcher.submit(bead("b1"), "task b1").unwrap()),
            phase: None,
            run: |w| {
                let actions = w.dispatcher.tick()?;
                w.returned(Returned::Dispatched(actions));
                Ok(())
            },
            applied: assigned_once,
            returned: dispatcher_log_holds_the_ticks,
        },
        Case {
            name: "dispatcher tick that mails an unmailed assignment",
            setup: unmailed,
            phase: None,
            run: |w| {
                let actions = w.dispatcher.tick()?;
                w.returned(Returned::Dispatched(actions));
                Ok(())
            },
            applied: mailed_once,
            returned: dispatcher_log_holds_the_ticks,
        },
    ]
}

/// `b1` assigned to `w1` by an entry that names no `work-assignment`
/// mail (one an older version wrote), and none in the inbox.
fn unmailed(w: &World) {
    drop(w.dispatcher.submit(bead("b1"), "task b1").unwrap());
    w.dispatcher.tick().unwrap();
    let path = state_path(&w.state, "loop/dispatcher/beads/b1.json");
    let mut entry: serde_json::Value = w.state.read_json(&path).unwrap().value().unwrap();
    entry.as_object_mut().unwrap().remove("mail");
    w.state.write_json(&path, &entry).unwrap();
    for m in w.mail_to("w1", Topic::WorkAssignment) {
        let archived = w.mail.archive(&m.id).unwrap();
        assert!(matches!(
            archived,
            chipset_mail::ArchiveOutcome::Archived(_)
        ));
    }
}

/// The entry names the one `work-assignment` mail in `w1`'s inbox.
fn mailed_once(w: &World) -> bool {
    let Some(entry) = w.dispatcher.entry(&bead("b1")).unwrap() else {
        return false;
    };
    let BeadState::Assigned {
        mail: Some(mail), ..
    } = &entry.state
    else {
        return false;
    };
    matches!(&w.mail_to("w1", Topic::WorkAssignment)[..], [m] if m.id == *mail)
}

/// The witness's calls, and the agent's answer to its health check.
fn witness_cases() -> Vec<Case> {
    vec![
        Case {
            name: "idle worker run that answers a health check",
            setup: |w| {
                let check = NewNudge::new(agent("witness"), NudgeType::HealthCheck, "alive?");
                let _ = w.nudges.send(&agent("w1"), &check.requiring_response());
            },
            phase: None,
            run: |w| {
                let out = w.worker.run_once(|_| unreachable!("no work is hooked"))?;
                assert_eq!(out, WorkOutcome::Idle);
                Ok(())
            },
            applied: answered_once,
            returned: |_, _| {},
        },
        Case {
            name: "witness tick that nudges",
            setup: |w| {
                active(w);
                w.advance(300);
            },
            phase: None,
            run: |w| {
                let actions = w.witness.tick()?;
                w.returned(Returned::Witnessed(actions));
                Ok(())
            },
            applied: checking_once,
            returned: witness_log_holds_the_ticks,
        },
        Case {
            name: "witness tick that escalates",
            setup: warned,
            phase: None,
            run: |w| {
                let actions = w.witness.tick()?;
                w.returned(Returned::Witnessed(actions));
                Ok(())
            },
            applied: escalated_once,
            returned: witness_log_holds_the_ticks,
        },
    ]
}

/// `b1` is on `w1`'s hook as the ledger says, mailed and woken once.
fn assigned_once(w: &World) -> bool {
    let Some(entry) = w.dispatcher.entry(&bead("b1")).unwrap() else {
        return false;
    };
    let BeadState::Assigned {
        assignment,
        mail: Some(mail),
    } = &entry.state
    else {
        return false;
    };
    let hook = w.hooks.read(&agent("w1")).unwrap();
    let on_hook = matches!(&hook, ReadOutcome::Value(h)
        if h.state.status() == HookStatus::Pending
            && h.assignment().is_some_and(|a| a.same_fence(assignment)));
    let mails = w.mail_to("w1", Topic::WorkAssignment);
    let wakes = w.events("w1", Topic::WorkAssigned);
    on_hook
        && assignment.generation == 1
        && entry.attempts.len() == 1
        && matches!(&mails[..], [m] if m.id == *mail)
        && matches!(&wakes[..], [e] if e.payload["assignment"] == serde_json::to_value(assignment).unwrap())
}

/// Every action in the dispatcher's log once, and every successful tick's
/// actions in it.
fn dispatcher_log_holds_the_ticks(w: &World, what: &str) {
    let log: Vec<DispatchAction> = w.log("dispatcher/log.jsonl");
    let assigned = log
        .iter()
        .filter(|a| matches!(a, DispatchAction::Assigned { .. }))
        .count();
    assert!(assigned <= 1, "{what}: {log:?}");
    for r in w.returned.borrow().iter() {
        if let Returned::Dispatched(actions) = r {
            for a in actions {
                assert!(log.contains(a), "{what}: {a:?} not in the log {log:?}");
            }
        }
    }
}

fn witness_log_holds_the_ticks(w: &World, what: &str) {
    let log: Vec<WitnessAction> = w.log("witness/log.jsonl");
    for kind in ["health_check", "stall_warning", "escalated"] {
        let n = log
            .iter()
            .filter(|a| serde_json::to_value(a).unwrap()["action"] == kind)
            .count();
        assert!(n <= 1, "{what}: {kind} {n} times in {log:?}");
    }
    for r in w.returned.borrow().iter() {
        if let Returned::Witnessed(actions) = r {
            for a in actions {
                assert!(log.contains(a), "{what}: {a:?} not in the log {log:?}");
            }
        }
    }
}

/// `w1`'s health check is processed, and the witness has one answer to it.
fn answered_once(w: &World) -> bool {
    let Ok(ReadOutcome::Value(Received::Seen(check))) = w.nudges.receive(&agent("w1")) else {
        return false;
    };
    let since = Timestamp::from_unix_ms(0);
    let answers = w.nudges.responses_since(&agent("witness"), since).unwrap();
    matches!(&answers.items[..], [a] if a.from == "w1" && a.in_reply_to == check.id)
}

/// The incident is checking, and `w1`'s pending nudge is that check.
fn checking_once(w: &World) -> bool {
    let Some(incident) = w.incident() else {
        return false;
    };
    let ReadOutcome::Value(n) = w.nudges.read_latest(&agent("w1")).unwrap() else {
        return false;
    };
    let at = serde_json::to_value(n.timestamp).unwrap();
    incident["step"] == "checking"
        && incident["health_check_at"] == at
        && n.kind == NudgeType::HealthCheck
        && n.from == "witness"
        && n.requires_response
}

/// The incident is escalated under the id of the one escalation mail,
/// with one wake-up.
fn escalated_once(w: &World) -> bool {
    let Some(incident) = w.incident() else {
        return false;
    };
    let mails = w.mail_to("mayor", Topic::HealthEscalation);
    let wakes = w.events("mayor", Topic::HealthEscalation);
    incident["step"] == "escalated"
        && matches!(&mails[..], [m] if incident["mail"] == m.id.as_str())
        && wakes.len() == 1
}

/// No finding but those `allowed`, and none corrupt.
fn only(report: &Report, allowed: &[&str], what: &str) {
    for f in &report.findings {
        assert!(
            allowed.contains(&f.code) && !matches!(f.fault, Defect::Corrupt(_)),
            "{what}: {f}"
        );
    }
}

/// Every doctor is clean once the mail's completes a send's follow-up
/// (and, after a power cut, a move that left a message in both places)
/// and the loop's cuts a torn log tail.
fn doctors_clean(w: &World, what: &str, power_cut: bool) {
    // Past the time a send may be in flight, as the mail's doctor waits.
    w.advance(60);
    let fix = DoctorMode::Fix;
    let mut follow_up = vec![
        "messaging-missing-sent-event",
        "messaging-missing-archived-event",
        "messaging-torn-manifest",
    ];
    if power_cut {
        follow_up.push("messaging-duplicate-message");
    }
    only(&w.mail.doctor(fix).unwrap(), &follow_up, what);
    let loops = LoopState::new(w.state.clone());
    only(&loops.doctor(fix).unwrap(), &["loop-torn-log"], what);
    let check = DoctorMode::Check;
    only(&loops.doctor(check).unwrap(), &[], what);
    only(&w.mail.doctor(check).unwrap(), &[], what);
    only(&w.hooks.doctor(check).unwrap(), &[], what);
    only(&w.bus.doctor(check).unwrap(), &[], what);
    only(&w.nudges.doctor(check).unwrap(), &[], what);
}

/// After a power cut: nothing reads corrupt (a torn log tail or a send's
/// follow-up not done yet is allowed: neither is read as a record).
fn reads_clean(w: &World, what: &str) {
    let check = DoctorMode::Check;
    let reports = [
        LoopState::new(w.state.clone()).doctor(check).unwrap(),
        w.mail.doctor(check).unwrap(),
        w.hooks.doctor(check).unwrap(),
        w.bus.doctor(check).unwrap(),
        w.nudges.doctor(check).unwrap(),
    ];
    for report in &reports {
        for f in &report.findings {
            assert!(!matches!(f.fault, Defect::Corrupt(_)), "{what}: {f}");
        }
    }
}

impl Case {
    fn world(&self, root: &Path, io: SharedIo) -> World {
        let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
        let w = World::open(root, io, &clock);
        (self.setup)(&w);
        w.advance(1);
        if self.phase.is_some() {
            w.reopen();
        }
        w
    }

    /// The call after a restart: a round is reopened, and its step taken
    /// if it is still due.
    fn resume(&self, w: &World) -> Result<(), Error> {
        let Some(phase) = self.phase else {
            return (self.run)(w);
        };
        w.reopen();
        if w.step(|r| Ok(r.phase()))? == phase {
            (self.run)(w)
        } else {
            Ok(())
        }
    }
}

impl FaultCase for Case {
    type World = World;
    type Error = Error;

    fn name(&self) -> &str {
        self.name
    }

    fn open(&self, root: &Path, io: SharedIo) -> World {
        self.world(root, io)
    }

    fn run(&self, w: &World) -> Result<(), Error> {
        (self.run)(w)
    }

    fn applied(&self, w: &World) -> bool {
        (self.applied)(w)
    }

    fn forgive(&self, root: &Path, before: &Visible, after: &mut Visible, _what: &str) {
        forgive_lock_folders(root, before, after);
    }

    fn before_retry(&self, w: &World) {
        w.advance(1);
    }

    fn after_retry(&self, w: &World, what: &str) {
        (self.returned)(w, what);
        doctors_clean(w, what, false);
    }
}

/// Sweeps faults through each of `cases`, printing each tally.
pub(crate) fn sweep(cases: Vec<Case>) {
    sweep_each("loop", cases);
}

/// Replays every power cut of each of `cases`: each state reads clean,
/// keeps what a returned call promised, and the call's retry after a
/// restart applies it once.
#[allow(
    clippy::print_stderr,
    reason = "prints the figures for the report (shown with --nocapture)"
)]
pub(crate) fn power_cuts(cases: Vec<Case>) {
    let mut total = 0;
    for case in cases {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("state");
        let setup = case.world(&root, Arc::new(RealIo));
        let ran_at = setup.clock.now();
        let rec = RecordIo::start(&root).unwrap();
        let w = World::open(&root, rec.clone(), &setup.clock);
        if case.phase.is_some() {
            w.reopen();
        }
        (case.run)(&w).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        assert!(
            (case.applied)(&w),
            "{}: a clean run did not apply",
            case.name
        );
        rec.mark(case.name);
        let states = rec.crash_states();
        assert!(states.len() > 1, "{}", case.name);
        for (i, cut) in states.iter().enumerate() {
            let what = format!("{}: cut {i}", case.name);
            let dir = tmp.path().join(format!("cut{i}"));
            cut.materialize(&dir).unwrap();
            // A restart at the time of the call (the doctors move the clock on).
            let clock = ManualClock::new(ran_at);
            let back = World::open(&dir, Arc::new(RealIo), &clock);
            reads_clean(&back, &what);
            if cut.returned.iter().any(|r| r == case.name) {
                assert!((case.applied)(&back), "{what}: lost after returning");
            }
            case.resume(&back)
                .unwrap_or_else(|e| panic!("{what}: retry: {e}"));
            // The doctors first: after a cut the mail's completes a move
            // its sweep left in both places.
            doctors_clean(&back, &what, true);
            assert!(
                (case.applied)(&back),
                "{what}: the retry did not apply once"
            );
        }
        total += states.len();
        eprintln!(
            "loop power cut {}: {} calls, {} distinct states",
            case.name,
            rec.calls(),
            states.len()
        );
    }
    eprintln!("loop power cut total: {total} states");
}

#[test]
fn every_fault_in_a_dispatcher_call_is_safe_to_retry() {
    sweep(dispatcher_cases());
}

#[test]
fn every_power_cut_in_a_dispatcher_call_reads_clean_and_keeps_what_returned() {
    power_cuts(dispatcher_cases());
}

#[test]
fn every_fault_in_a_witness_tick_or_an_answer_is_safe_to_retry() {
    sweep(witness_cases());
}

#[test]
fn every_power_cut_in_a_witness_tick_or_an_answer_reads_clean_and_keeps_what_returned() {
    power_cuts(witness_cases());
}
