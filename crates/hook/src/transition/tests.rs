//! The rules checked exhaustively: every state, event and actor.

use super::*;
use crate::HookStatus;
use chipset_store::{Classify, ErrorKind};

fn t(ms: i64) -> Timestamp {
    Timestamp::from_unix_ms(1_772_706_600_000 + ms)
}

fn agent(name: &str) -> AgentId {
    AgentId::new(name).unwrap()
}

fn work(bead: &str) -> WorkItem {
    WorkItem::new(BeadId::new(bead).unwrap(), "title", t(0), None)
}

fn hook(state: HookState) -> Hook {
    Hook::new(agent("a"), state, t(0), 7)
}

/// Every state, with the assignment it holds (or a plausible old one for empty).
fn states() -> Vec<Hook> {
    vec![
        hook(HookState::Empty),
        hook(HookState::Pending(work("b1"))),
        hook(HookState::Active(work("b1"))),
        hook(HookState::Completed(work("b1"))),
    ]
}

fn fenced(op: Op, a: Assignment) -> HookEvent {
    match op {
        Op::Assign => HookEvent::Assign {
            bead_id: BeadId::new("b2").unwrap(),
            title: "new".into(),
        },
        Op::Activate => HookEvent::Activate(a),
        Op::Touch => HookEvent::Touch(a),
        Op::Complete => HookEvent::Complete(a),
        Op::Clear => HookEvent::Clear(a),
        Op::Reassign => HookEvent::Reassign(a),
    }
}

const OPS: [Op; 6] = [
    Op::Assign,
    Op::Activate,
    Op::Touch,
    Op::Complete,
    Op::Clear,
    Op::Reassign,
];

/// The whole table: for each state and operation by the right role with
/// the right fence, the expected new status or refusal.
#[test]
fn exhaustive_table_with_the_right_actor_and_fence() {
    use HookStatus::*;
    let expected = |from: HookStatus, op: Op| -> Option<HookStatus> {
        match (from, op) {
            (Empty, Op::Assign) => Some(Pending),
            (Pending, Op::Activate) => Some(Active),
            (Active, Op::Touch) => Some(Active),
            (Active, Op::Complete) => Some(Completed),
            (Completed, Op::Clear) => Some(Empty),
            (Pending | Active, Op::Reassign) => Some(Empty),
            _ => None,
        }
    };
    let old = Assignment {
        agent: agent("a"),
        generation: 7,
        work: work("b1"),
    };
    for h in states() {
        for op in OPS {
            let actor = match op.role() {
                Role::Dispatcher => Actor::Dispatcher(Some(agent("mayor"))),
                Role::OwningAgent => Actor::Agent(agent("a")),
            };
            let fence = h.assignment().unwrap_or_else(|| old.clone());
            let got = transition(&h, &fenced(op, fence), &actor, t(5));
            match (expected(h.state.status(), op), got) {
                (Some(status), Ok(new)) => {
                    assert_eq!(new.state.status(), status, "{} {op}", h.state.status());
                    assert_eq!(new.last_activity, t(5));
                    let bump = matches!(op, Op::Assign | Op::Clear | Op::Reassign);
                    assert_eq!(new.generation, 7 + u64::from(bump), "{op}");
                }
                (None, Err(e)) => match (h.state.status(), op) {
                    (Empty, _) => assert_eq!(e.kind(), ErrorKind::Stale, "{op}: {e}"),
                    (_, Op::Assign) => {
                        assert!(matches!(e, Error::AlreadyAssigned { .. }), "{e}")
                    }
                    _ => assert!(matches!(e, Error::WrongState { .. }), "{e}"),
                },
                (want, got) => panic!("{} {op}: expected {want:?}, got {got:?}", h.state.status()),
            }
        }
    }
}

#[test]
fn a_transition_that_applied_is_recognised_and_nothing_else_is() {
    let pending = hook(HookState::Pending(work("b1")));
    let held = pending.assignment().unwrap();
    let me = Actor::Agent(agent("a"));
    let active = transition(&pending, &HookEvent::Activate(held.clone()), &me, t(1)).unwrap();
    assert!(already_applied(
        &active,
        &HookEvent::Activate(held.clone()),
        &me
    ));
    assert!(!already_applied(
        &pending,
        &HookEvent::Activate(held.clone()),
        &me
    ));
    assert!(!already_applied(
        &active,
        &HookEvent::Complete(held.clone()),
        &me
    ));
    let done = transition(&active, &HookEvent::Complete(held.clone()), &me, t(2)).unwrap();
    assert!(already_applied(
        &done,
        &HookEvent::Complete(held.clone()),
        &me
    ));
    assert!(!already_applied(
        &done,
        &HookEvent::Activate(held.clone()),
        &me
    ));
    let mayor = Actor::Dispatcher(None);
    let empty = transition(&done, &HookEvent::Clear(held.clone()), &mayor, t(3)).unwrap();
    assert!(already_applied(
        &empty,
        &HookEvent::Clear(held.clone()),
        &mayor
    ));
    assert!(already_applied(
        &empty,
        &HookEvent::Reassign(held.clone()),
        &mayor
    ));
    // An assignment two generations back, or another agent's, is not this one.
    let mut old = held.clone();
    old.generation -= 1;
    assert!(!already_applied(&empty, &HookEvent::Clear(old), &mayor));
    let mut other = held.clone();
    other.agent = agent("z");
    assert!(!already_applied(&empty, &HookEvent::Clear(other), &mayor));
    // A new assignment of the same bead is not the old one.
    let again = transition(
        &empty,
        &HookEvent::Assign {
            bead_id: BeadId::new("b1").unwrap(),
            title: "title".into(),
        },
        &mayor,
        t(4),
    )
    .unwrap();
    let new_active = transition(
        &again,
        &HookEvent::Activate(again.assignment().unwrap()),
        &me,
        t(5),
    )
    .unwrap();
    assert!(!already_applied(
        &new_active,
        &HookEvent::Activate(held),
        &me
    ));
    // Assign: the same bead, title and dispatcher while the hook holds them.
    let assign = |bead: &str, title: &str| HookEvent::Assign {
        bead_id: BeadId::new(bead).unwrap(),
        title: title.into(),
    };
    for h in [&again, &new_active] {
        assert!(already_applied(h, &assign("b1", "title"), &mayor));
        assert!(!already_applied(h, &assign("b2", "title"), &mayor));
        assert!(!already_applied(h, &assign("b1", "other"), &mayor));
        let named = Actor::Dispatcher(Some(agent("mayor")));
        assert!(!already_applied(h, &assign("b1", "title"), &named));
        assert!(!already_applied(h, &assign("b1", "title"), &me));
    }
    assert!(!already_applied(&empty, &assign("b1", "title"), &mayor));
}

#[test]
fn wrong_roles_and_other_agents_are_refused_in_every_state() {
    let old = Assignment {
        agent: agent("a"),
        generation: 7,
        work: work("b1"),
    };
    for h in states() {
        for op in OPS {
            let event = fenced(op, h.assignment().unwrap_or_else(|| old.clone()));
            let (wrong_role, other_agent) = match op.role() {
                Role::Dispatcher => (Actor::Agent(agent("a")), None),
                Role::OwningAgent => (
                    Actor::Dispatcher(None),
                    Some(Actor::Agent(agent("intruder"))),
                ),
            };
            let e = transition(&h, &event, &wrong_role, t(1)).unwrap_err();
            assert!(matches!(e, Error::NotPermitted { .. }), "{e}");
            if let Some(other) = other_agent {
                let e = transition(&h, &event, &other, t(1)).unwrap_err();
                assert!(matches!(e, Error::NotOwner { .. }), "{e}");
            }
        }
    }
}

#[test]
fn any_fence_field_mismatch_is_stale() {
    let h = hook(HookState::Active(work("b1")));
    let good = h.assignment().unwrap();
    let mut variants = vec![];
    let mut a = good.clone();
    a.generation = 6;
    variants.push(a);
    let mut a = good.clone();
    a.work.bead_id = BeadId::new("b9").unwrap();
    variants.push(a);
    let mut a = good.clone();
    a.work.assigned_at = t(1);
    variants.push(a);
    let mut a = good.clone();
    a.agent = agent("z");
    variants.push(a);
    for held in variants {
        let e =
            transition(&h, &HookEvent::Touch(held), &Actor::Agent(agent("a")), t(2)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Stale, "{e}");
    }
    // The title and assigned_by are not part of the fence.
    let mut a = good;
    a.work.title = "renamed".into();
    a.work.assigned_by = Some(agent("mayor"));
    assert!(transition(&h, &HookEvent::Touch(a), &Actor::Agent(agent("a")), t(2)).is_ok());
}

#[test]
fn assign_records_the_dispatcher_and_time() {
    let h = hook(HookState::Empty);
    let event = HookEvent::Assign {
        bead_id: BeadId::new("gt-1").unwrap(),
        title: "Fix".into(),
    };
    let new = transition(&h, &event, &Actor::Dispatcher(Some(agent("mayor"))), t(9)).unwrap();
    let w = new.state.work().unwrap();
    assert_eq!(w.assigned_at, t(9));
    assert_eq!(w.assigned_by.as_ref().map(AgentId::as_str), Some("mayor"));
    assert_eq!(w.title, "Fix");
}

#[test]
fn error_messages_say_state_and_who_may() {
    let h = hook(HookState::Pending(work("b1")));
    let a = h.assignment().unwrap();
    let check = |event: HookEvent, actor: Actor, expected: &str| {
        let e = transition(&h, &event, &actor, t(1)).unwrap_err();
        assert_eq!(e.to_string(), expected);
    };
    check(
        fenced(Op::Assign, a.clone()),
        Actor::Dispatcher(None),
        "cannot assign to `a`: its hook is already pending with bead `b1`; only an empty hook takes new work",
    );
    check(
        HookEvent::Activate(a.clone()),
        Actor::Dispatcher(Some(agent("mayor"))),
        "dispatcher `mayor` may not activate the hook of `a`: only the agent that owns the hook may",
    );
    check(
        HookEvent::Activate(a.clone()),
        Actor::Agent(agent("b")),
        "agent `b` may not activate the hook of `a`: only `a` itself may",
    );
    check(
        HookEvent::Complete(a.clone()),
        Actor::Agent(agent("a")),
        "cannot complete the hook of `a`: it is pending, and complete needs an active hook",
    );
    check(
        HookEvent::Clear(a),
        Actor::Dispatcher(None),
        "cannot clear the hook of `a`: it is pending, and clear needs a completed hook (take pending or active work away with reassign)",
    );
}

/// The walk-through the pure core's docs used to show: assign, a refused
/// activate by a dispatcher, then the owner's activate.
#[test]
fn assign_then_only_the_owner_activates() {
    let agent = agent("polecat-alpha");
    let now = "2026-03-05T10:30:00Z".parse::<Timestamp>().unwrap();
    let empty = Hook::missing(agent.clone());
    let assign = HookEvent::Assign {
        bead_id: BeadId::new("gt-abc12").unwrap(),
        title: "Add README section".into(),
    };
    let pending = transition(&empty, &assign, &Actor::Dispatcher(None), now).unwrap();
    assert_eq!(pending.state.status(), HookStatus::Pending);

    // Only the owning agent may activate, and only with the assignment it holds.
    let held = pending.assignment().unwrap();
    let err = transition(
        &pending,
        &HookEvent::Activate(held.clone()),
        &Actor::Dispatcher(None),
        now,
    );
    assert!(matches!(err, Err(Error::NotPermitted { .. })), "{err:?}");
    let active = transition(
        &pending,
        &HookEvent::Activate(held),
        &Actor::Agent(agent),
        now,
    )
    .unwrap();
    assert_eq!(active.state.status(), HookStatus::Active);
}
