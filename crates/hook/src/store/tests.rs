//! The model test: random (actor, operation) sequences, invalid ones
//! included, through [`Hooks::apply`](crate::Hooks::apply) against a plain
//! in-memory model; the files and the model agree after every step. Also
//! the helpers the crate's other file-driven unit tests share.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "tests plant, corrupt and inspect files as another program would, outside the store's API"
)]

use std::fs;
use std::time::Duration;

use chipset_store::{Classify, ErrorKind, ManualClock, ReadOutcome, Timestamp};
use chipset_testkit::TempState;
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::transition::{Actor, HookEvent, Op};
use crate::{Assignment, Error, Hook, HookStatus, Hooks, Pickup};

pub(crate) use chipset_testkit::{T0, agent, bead};

/// A state root on a manual clock at [`T0`], and its hooks.
pub(crate) struct Setup {
    pub(crate) tmp: TempState,
    pub(crate) hooks: Hooks,
    pub(crate) clock: ManualClock,
}

pub(crate) fn setup() -> Setup {
    let (tmp, clock) = TempState::manual();
    let hooks = Hooks::new(tmp.state.clone());
    Setup { tmp, hooks, clock }
}

/// As [`setup`], on a store that skips its syncs: for the model tests.
pub(crate) fn setup_no_sync() -> Setup {
    let (tmp, clock) = TempState::manual_no_sync();
    let hooks = Hooks::new(tmp.state.clone());
    Setup { tmp, hooks, clock }
}

/// Short ways to look into a read in assertions.
pub(crate) trait ReadExt {
    /// The status the read shows ([`HookStatus::of`]).
    fn status(&self) -> Option<HookStatus>;
    /// The hook, when the file holds one.
    fn hook(&self) -> Option<&Hook>;
}

impl ReadExt for ReadOutcome<Hook> {
    fn status(&self) -> Option<HookStatus> {
        HookStatus::of(self)
    }

    fn hook(&self) -> Option<&Hook> {
        match self {
            ReadOutcome::Value(h) => Some(h),
            _ => None,
        }
    }
}

const AGENTS: [&str; 2] = ["a", "b"];
const BEADS: [&str; 3] = ["b0", "b1", "b2"];
const GARBAGE: &str = "{\"agent_id\": \"a\", \"status\": \"act";

/// A fence in the model: agent, generation, bead, assigned_at (ms).
type MFence = (usize, u64, usize, i64);

#[derive(Debug, Clone)]
enum FenceChoice {
    /// The assignment the hook holds now (a made-up one if none).
    Current(usize),
    /// One handed out earlier.
    History(usize),
    /// Anything, mostly stale; near the real values so it sometimes matches.
    Made(MFence),
    /// The current one with one field changed: agent, generation, bead or time.
    Perturbed(usize, u8),
}

#[derive(Debug, Clone)]
enum ActorChoice {
    Dispatcher(bool),
    Agent(usize),
}

#[derive(Debug, Clone)]
enum Step {
    Assign {
        agent: usize,
        bead: usize,
        by: bool,
    },
    Fenced {
        op: Op,
        fence: FenceChoice,
    },
    Apply {
        hook: usize,
        actor: ActorChoice,
        op: Op,
        bead: usize,
        fence: FenceChoice,
    },
    Pickup {
        agent: usize,
    },
    Advance {
        ms: u64,
    },
    Corrupt {
        agent: usize,
    },
    Repair {
        agent: usize,
    },
}

#[derive(Debug, Clone, PartialEq)]
struct MWork {
    bead: usize,
    at: i64,
    by: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum MFile {
    Missing,
    Corrupt,
    Hook {
        status: HookStatus,
        work: Option<MWork>,
        last: i64,
        generation: u64,
    },
}

/// What an operation came to, on either side.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Done,
    AlreadyAssigned,
    NotPermitted,
    NotOwner,
    WrongState,
    Stale,
    Corrupt,
    Idle,
    Started,
    Resumed,
    AwaitingClear,
    Repaired,
    Clean,
}

struct Model {
    files: [MFile; 2],
    now: i64,
    history: Vec<MFence>,
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        Just(Op::Assign),
        Just(Op::Activate),
        Just(Op::Touch),
        Just(Op::Complete),
        Just(Op::Clear),
        Just(Op::Reassign),
    ]
}

fn fence_strategy() -> impl Strategy<Value = FenceChoice> {
    prop_oneof![
        3 => (0..2usize).prop_map(FenceChoice::Current),
        2 => (0..64usize).prop_map(FenceChoice::History),
        1 => (0..2usize, 0..6u64, 0..3usize, 0..4i64).prop_map(|(a, g, b, at)| FenceChoice::Made((a, g, b, T0 + at))),
        2 => (0..2usize, 0..4u8).prop_map(|(a, which)| FenceChoice::Perturbed(a, which)),
    ]
}

fn step_strategy() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..2usize, 0..3usize, any::<bool>()).prop_map(|(agent, bead, by)| Step::Assign { agent, bead, by }),
        6 => (prop_oneof![Just(Op::Activate), Just(Op::Touch), Just(Op::Complete), Just(Op::Clear), Just(Op::Reassign)], fence_strategy())
            .prop_map(|(op, fence)| Step::Fenced { op, fence }),
        2 => (0..2usize, prop_oneof![any::<bool>().prop_map(ActorChoice::Dispatcher), (0..2usize).prop_map(ActorChoice::Agent)], op_strategy(), 0..3usize, fence_strategy())
            .prop_map(|(hook, actor, op, bead, fence)| Step::Apply { hook, actor, op, bead, fence }),
        3 => (0..2usize).prop_map(|agent| Step::Pickup { agent }),
        3 => (0..3u64).prop_map(|ms| Step::Advance { ms }),
        1 => (0..2usize).prop_map(|agent| Step::Corrupt { agent }),
        1 => (0..2usize).prop_map(|agent| Step::Repair { agent }),
    ]
}

fn title(bead: usize) -> String {
    format!("work on {}", BEADS[bead])
}

impl Model {
    fn current(&self, agent: usize) -> Option<MFence> {
        match &self.files[agent] {
            MFile::Hook {
                work: Some(w),
                generation,
                ..
            } => Some((agent, *generation, w.bead, w.at)),
            _ => None,
        }
    }

    fn choose(&self, choice: &FenceChoice) -> MFence {
        match choice {
            FenceChoice::Current(a) => self.current(*a).unwrap_or((*a, 1, 0, T0)),
            FenceChoice::History(i) if !self.history.is_empty() => {
                self.history[i % self.history.len()]
            }
            FenceChoice::History(i) => self.current(i % 2).unwrap_or((i % 2, 0, 0, T0)),
            FenceChoice::Made(f) => *f,
            FenceChoice::Perturbed(a, which) => {
                let (agent, generation, bead, at) = self.current(*a).unwrap_or((*a, 1, 0, T0));
                match which {
                    0 => (1 - agent, generation, bead, at),
                    1 => (agent, generation.wrapping_sub(1), bead, at),
                    2 => (agent, generation, (bead + 1) % BEADS.len(), at),
                    _ => (agent, generation, bead, at + 1),
                }
            }
        }
    }

    /// The rules, restated plainly: corrupt, role, owner, fence, state.
    fn apply(
        &mut self,
        hook: usize,
        actor: &ActorChoice,
        op: Op,
        bead: usize,
        fence: MFence,
    ) -> Outcome {
        let (status, work, generation) = match &self.files[hook] {
            MFile::Corrupt => return Outcome::Corrupt,
            MFile::Missing => (HookStatus::Empty, None, 0),
            MFile::Hook {
                status,
                work,
                generation,
                ..
            } => (*status, work.clone(), *generation),
        };
        let dispatcher_op = matches!(op, Op::Assign | Op::Clear | Op::Reassign);
        match actor {
            ActorChoice::Dispatcher(_) if dispatcher_op => {}
            ActorChoice::Agent(a) if !dispatcher_op && *a == hook => {}
            ActorChoice::Agent(_) if !dispatcher_op => return Outcome::NotOwner,
            _ => return Outcome::NotPermitted,
        }
        use HookStatus::*;
        if op != Op::Assign {
            let holds = work
                .as_ref()
                .is_some_and(|w| fence == (hook, generation, w.bead, w.at));
            // A retry of a transition that applied: success, nothing changes.
            let applied = match (op, status) {
                (Op::Activate, Active) | (Op::Complete, Completed) => holds,
                (Op::Clear | Op::Reassign, Empty) => {
                    fence.0 == hook && fence.1.checked_add(1) == Some(generation)
                }
                _ => false,
            };
            if applied {
                return Outcome::Done;
            }
            if !holds {
                return Outcome::Stale;
            }
        }
        let (status, work, generation) = match (op, status) {
            (Op::Assign, Empty) => {
                let by = matches!(actor, ActorChoice::Dispatcher(true));
                (
                    Pending,
                    Some(MWork {
                        bead,
                        at: self.now,
                        by,
                    }),
                    generation + 1,
                )
            }
            // A retry of the same request (bead, title, dispatcher): success.
            (Op::Assign, _)
                if work.as_ref().is_some_and(|w| {
                    w.bead == bead && w.by == matches!(actor, ActorChoice::Dispatcher(true))
                }) =>
            {
                return Outcome::Done;
            }
            (Op::Assign, _) => return Outcome::AlreadyAssigned,
            (Op::Activate, Pending) => (Active, work, generation),
            (Op::Touch, Active) => (Active, work, generation),
            (Op::Complete, Active) => (Completed, work, generation),
            (Op::Clear, Completed) | (Op::Reassign, Pending | Active) => {
                (Empty, None, generation + 1)
            }
            _ => return Outcome::WrongState,
        };
        self.files[hook] = MFile::Hook {
            status,
            work,
            last: self.now,
            generation,
        };
        if op == Op::Assign {
            self.history.push(self.current(hook).expect("assigned"));
        }
        Outcome::Done
    }

    fn pickup(&mut self, agent: usize) -> Outcome {
        let me = ActorChoice::Agent(agent);
        let status = match &self.files[agent] {
            MFile::Corrupt => return Outcome::Corrupt,
            MFile::Missing => HookStatus::Empty,
            MFile::Hook { status, .. } => *status,
        };
        let fence = self.current(agent).unwrap_or((agent, 0, 0, 0));
        match status {
            HookStatus::Empty => Outcome::Idle,
            HookStatus::Pending => {
                assert_eq!(
                    self.apply(agent, &me, Op::Activate, 0, fence),
                    Outcome::Done
                );
                Outcome::Started
            }
            HookStatus::Active => {
                assert_eq!(self.apply(agent, &me, Op::Touch, 0, fence), Outcome::Done);
                Outcome::Resumed
            }
            HookStatus::Completed => Outcome::AwaitingClear,
        }
    }

    fn expected_json(&self, agent: usize) -> Option<Value> {
        let MFile::Hook {
            status,
            work,
            last,
            generation,
        } = &self.files[agent]
        else {
            return None;
        };
        let ts = |ms: i64| Timestamp::from_unix_ms(ms).to_string();
        let mut v = json!({
            "agent_id": AGENTS[agent],
            "status": status.as_str(),
            "work_item": work.as_ref().map(|w| json!({
                "bead_id": BEADS[w.bead],
                "title": title(w.bead),
                "assigned_at": ts(w.at),
            })),
            "last_activity": ts(*last),
            "generation": generation,
        });
        if work.as_ref().is_some_and(|w| w.by) {
            v["assigned_by"] = "mayor".into();
        }
        Some(v)
    }
}

fn assignment(f: MFence) -> Assignment {
    serde_json::from_value(json!({
        "agent": AGENTS[f.0],
        "generation": f.1,
        "work": {
            "bead_id": BEADS[f.2],
            "title": "whatever: the title is not part of the fence",
            "assigned_at": Timestamp::from_unix_ms(f.3).to_string(),
        },
    }))
    .unwrap()
}

/// The fields an assignment is fenced on.
fn fence_of(a: &Assignment) -> (String, u64, String, i64) {
    (
        a.agent.to_string(),
        a.generation,
        a.work.bead_id.to_string(),
        a.work.assigned_at.unix_ms(),
    )
}

fn outcome<T>(r: Result<T, Error>) -> Outcome {
    match r {
        Ok(_) => Outcome::Done,
        Err(e) if e.kind() == ErrorKind::Corrupt => Outcome::Corrupt,
        Err(Error::AlreadyAssigned { .. }) => Outcome::AlreadyAssigned,
        Err(Error::NotPermitted { .. }) => Outcome::NotPermitted,
        Err(Error::NotOwner { .. }) => Outcome::NotOwner,
        Err(Error::WrongState { .. }) => Outcome::WrongState,
        Err(Error::StaleAssignment { .. }) => Outcome::Stale,
        Err(e) => panic!("unexpected error {e}"),
    }
}

fn event(op: Op, bead: usize, fence: MFence) -> HookEvent {
    let a = assignment(fence);
    match op {
        Op::Assign => HookEvent::Assign {
            bead_id: self::bead(BEADS[bead]),
            title: title(bead),
        },
        Op::Activate => HookEvent::Activate(a),
        Op::Touch => HookEvent::Touch(a),
        Op::Complete => HookEvent::Complete(a),
        Op::Clear => HookEvent::Clear(a),
        Op::Reassign => HookEvent::Reassign(a),
    }
}

fn run_step(
    hooks: &Hooks,
    clock: &chipset_store::ManualClock,
    m: &mut Model,
    step: &Step,
) -> (Outcome, Outcome) {
    let mayor = agent("mayor");
    match step {
        Step::Assign {
            agent: a,
            bead: b,
            by,
        } => {
            let got = hooks.assign(
                &agent(AGENTS[*a]),
                bead(BEADS[*b]),
                title(*b),
                by.then_some(&mayor),
            );
            let want = m.apply(
                *a,
                &ActorChoice::Dispatcher(*by),
                Op::Assign,
                *b,
                (0, 0, 0, 0),
            );
            if let Ok(held) = &got {
                let f = m.current(*a).expect("model assigned too");
                assert_eq!(fence_of(held), fence_of(&assignment(f)));
                assert!(
                    assignment(f)
                        .matches(&hooks.read(&held.agent).unwrap().hook().unwrap().clone())
                );
            }
            (outcome(got), want)
        }
        Step::Fenced { op, fence } => {
            let f = m.choose(fence);
            let held = assignment(f);
            let got = match op {
                Op::Activate => outcome(hooks.activate(&held)),
                Op::Touch => outcome(hooks.touch(&held)),
                Op::Complete => outcome(hooks.complete(&held)),
                Op::Clear => outcome(hooks.clear(&held)),
                Op::Reassign => {
                    let r = hooks.reassign(&held);
                    if let Ok(r) = &r {
                        assert_eq!(fence_of(&r.taken), fence_of(&held));
                    }
                    outcome(r)
                }
                _ => unreachable!(),
            };
            let actor = if matches!(op, Op::Clear | Op::Reassign) {
                ActorChoice::Dispatcher(false)
            } else {
                ActorChoice::Agent(f.0)
            };
            (got, m.apply(f.0, &actor, *op, 0, f))
        }
        Step::Apply {
            hook,
            actor,
            op,
            bead,
            fence,
        } => {
            let f = m.choose(fence);
            let real_actor = match actor {
                ActorChoice::Dispatcher(by) => Actor::Dispatcher(by.then(|| mayor.clone())),
                ActorChoice::Agent(a) => Actor::Agent(agent(AGENTS[*a])),
            };
            let got = hooks.apply(&agent(AGENTS[*hook]), event(*op, *bead, f), &real_actor);
            (outcome(got), m.apply(*hook, actor, *op, *bead, f))
        }
        Step::Pickup { agent: a } => {
            let got = match hooks.pickup(&agent(AGENTS[*a])) {
                Ok(Pickup::Idle) => Outcome::Idle,
                Ok(Pickup::Started(_)) => Outcome::Started,
                Ok(Pickup::Resumed(_)) => Outcome::Resumed,
                Ok(Pickup::AwaitingClear(_)) => Outcome::AwaitingClear,
                Err(e) => outcome::<()>(Err(e)),
            };
            (got, m.pickup(*a))
        }
        Step::Advance { ms } => {
            clock.advance(Duration::from_millis(*ms));
            m.now += *ms as i64;
            (Outcome::Done, Outcome::Done)
        }
        Step::Corrupt { agent: a } => {
            fs::create_dir_all(hooks.dir()).unwrap();
            fs::write(hooks.path(&agent(AGENTS[*a])), GARBAGE).unwrap();
            m.files[*a] = MFile::Corrupt;
            (Outcome::Done, Outcome::Done)
        }
        Step::Repair { agent: a } => {
            let got = match hooks.repair(&agent(AGENTS[*a])).unwrap() {
                Some(_) => Outcome::Repaired,
                None => Outcome::Clean,
            };
            let want = if m.files[*a] == MFile::Corrupt {
                m.files[*a] = MFile::Hook {
                    status: HookStatus::Empty,
                    work: None,
                    last: m.now,
                    generation: m.now as u64,
                };
                Outcome::Repaired
            } else {
                Outcome::Clean
            };
            (got, want)
        }
    }
}

fn check_files(hooks: &Hooks, m: &Model, ctx: &str) {
    for (i, name) in AGENTS.iter().enumerate() {
        let path = hooks.path(&agent(name));
        match (&m.files[i], m.expected_json(i)) {
            (MFile::Missing, _) => assert!(!path.exists(), "{ctx}: {name} should not exist"),
            (MFile::Corrupt, _) => assert_eq!(fs::read_to_string(&path).unwrap(), GARBAGE, "{ctx}"),
            (MFile::Hook { .. }, Some(want)) => {
                let bytes = fs::read(&path).unwrap();
                let got: Value = serde_json::from_slice(&bytes).unwrap();
                assert_eq!(got, want, "{ctx}: {name}");
                assert_eq!(
                    bytes,
                    chipset_store::StateDir::to_canonical_json(&got).unwrap(),
                    "{ctx}: not canonical"
                );
            }
            (MFile::Hook { .. }, None) => unreachable!(),
        }
        let status = hooks.read(&agent(name)).unwrap().status();
        let want = match &m.files[i] {
            MFile::Missing => Some(HookStatus::Empty),
            MFile::Corrupt => None,
            MFile::Hook { status, .. } => Some(*status),
        };
        assert_eq!(status, want, "{ctx}: {name}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn files_and_model_agree_after_every_step(steps in prop::collection::vec(step_strategy(), 1..40)) {
        let s = setup_no_sync();
        let mut m = Model { files: [MFile::Missing, MFile::Missing], now: T0, history: Vec::new() };
        for (i, step) in steps.iter().enumerate() {
            let (got, want) = run_step(&s.hooks, &s.clock, &mut m, step);
            prop_assert_eq!(&got, &want, "step {} {:?}", i, step);
            check_files(&s.hooks, &m, &format!("step {i} {step:?}"));
        }
    }
}
