//! The pure state machine: (hook, event, actor, now) → new hook or a typed error.

use std::fmt;

use crate::BeadId;
use chipset_store::{AgentId, Timestamp};

use crate::error::{Error, Result};
use crate::state::{Assignment, Hook, HookState, WorkItem};

/// Who is acting on a hook.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Actor {
    /// The mayor or a sling dispatcher; it may name itself (recorded as `assigned_by`).
    Dispatcher(Option<AgentId>),
    /// An agent, acting on its own hook.
    Agent(AgentId),
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Actor::Dispatcher(Some(id)) => write!(f, "dispatcher `{id}`"),
            Actor::Dispatcher(None) => f.write_str("a dispatcher"),
            Actor::Agent(id) => write!(f, "agent `{id}`"),
        }
    }
}

/// Who may perform an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Role {
    /// Any dispatcher.
    Dispatcher,
    /// Only the agent the hook belongs to.
    OwningAgent,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Dispatcher => "a dispatcher",
            Role::OwningAgent => "the agent that owns the hook",
        })
    }
}

/// The operations on a hook, named in errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Op {
    /// empty → pending (dispatcher).
    Assign,
    /// pending → active (owning agent).
    Activate,
    /// active → active with a new `last_activity` (owning agent).
    Touch,
    /// active → completed (owning agent).
    Complete,
    /// completed → empty (dispatcher).
    Clear,
    /// pending or active → empty, taking the work away (dispatcher).
    Reassign,
}

impl Op {
    /// Returns who may perform the operation.
    pub(crate) fn role(self) -> Role {
        match self {
            Op::Assign | Op::Clear | Op::Reassign => Role::Dispatcher,
            Op::Activate | Op::Touch | Op::Complete => Role::OwningAgent,
        }
    }

    /// Returns the operation's name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Op::Assign => "assign",
            Op::Activate => "activate",
            Op::Touch => "touch",
            Op::Complete => "complete",
            Op::Clear => "clear",
            Op::Reassign => "reassign",
        }
    }

    /// Returns the states the operation starts from, as a phrase for errors.
    pub(crate) fn needs(self) -> &'static str {
        match self {
            Op::Assign => "an empty hook",
            Op::Activate => "a pending hook",
            Op::Touch => "an active hook",
            Op::Complete => "an active hook",
            Op::Clear => "a completed hook (take pending or active work away with reassign)",
            Op::Reassign => "a pending or active hook (clear completed work with clear)",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What happens to a hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HookEvent {
    /// Give an empty hook new work (dispatcher).
    Assign {
        /// The bead to work on.
        bead_id: BeadId,
        /// Its short description.
        title: String,
    },
    /// Start the held assignment (owning agent).
    Activate(Assignment),
    /// Signal liveness on the held, active assignment (owning agent).
    Touch(Assignment),
    /// Finish the held, active assignment (owning agent).
    Complete(Assignment),
    /// Retire this completed assignment (dispatcher).
    Clear(Assignment),
    /// Take this pending or active assignment away (dispatcher).
    Reassign(Assignment),
}

impl HookEvent {
    /// Returns the operation.
    pub(crate) fn op(&self) -> Op {
        match self {
            HookEvent::Assign { .. } => Op::Assign,
            HookEvent::Activate(_) => Op::Activate,
            HookEvent::Touch(_) => Op::Touch,
            HookEvent::Complete(_) => Op::Complete,
            HookEvent::Clear(_) => Op::Clear,
            HookEvent::Reassign(_) => Op::Reassign,
        }
    }

    /// Returns the assignment the event is fenced on (all but assign).
    pub(crate) fn fence(&self) -> Option<&Assignment> {
        match self {
            HookEvent::Assign { .. } => None,
            HookEvent::Activate(a)
            | HookEvent::Touch(a)
            | HookEvent::Complete(a)
            | HookEvent::Clear(a)
            | HookEvent::Reassign(a) => Some(a),
        }
    }
}

/// Returns who may perform the operation named `op`, for error messages.
pub(crate) fn role_of(op: &str) -> Role {
    named(op).map_or(Role::Dispatcher, Op::role)
}

/// Returns the states the operation named `op` starts from, for error messages.
pub(crate) fn needs(op: &str) -> &'static str {
    named(op).map_or("another state", Op::needs)
}

fn named(op: &str) -> Option<Op> {
    [
        Op::Assign,
        Op::Activate,
        Op::Touch,
        Op::Complete,
        Op::Clear,
        Op::Reassign,
    ]
    .into_iter()
    .find(|o| o.as_str() == op)
}

/// Returns true when `event` by `actor` has already been applied to `hook`:
/// what a retry of a transition that took effect finds. The store's
/// idempotent-retry rule makes such a retry a success that changes nothing
/// (the typed methods of [`Hooks`](crate::Hooks) call this
/// when [`transition`] refuses with [`Error::AlreadyAssigned`],
/// [`Error::WrongState`] or [`Error::StaleAssignment`]).
///
/// - assign: the hook holds work (pending, active or completed) with the
///   same bead and title, assigned by the same dispatcher (`assigned_by`,
///   or none when the actor named none). Assign names no assignment, so the
///   request itself is what a retry is recognised by; another bead, title
///   or dispatcher is [`Error::AlreadyAssigned`];
/// - activate: the hook is active with the same assignment;
/// - complete: the hook is completed with the same assignment;
/// - clear and reassign: the hook is empty at the generation after the
///   assignment's (what either leaves; the hook cannot tell which of the two
///   emptied it, and either way the assignment is retired).
///
/// Touch is never "already applied": on an active hook it simply applies
/// again.
pub(crate) fn already_applied(hook: &Hook, event: &HookEvent, actor: &Actor) -> bool {
    match (event, &hook.state) {
        (HookEvent::Assign { bead_id, title }, state) => {
            let by = match actor {
                Actor::Dispatcher(by) => by.as_ref(),
                Actor::Agent(_) => return false,
            };
            state.work().is_some_and(|w| {
                w.bead_id == *bead_id && w.title == *title && w.assigned_by.as_ref() == by
            })
        }
        (HookEvent::Activate(a), HookState::Active(_))
        | (HookEvent::Complete(a), HookState::Completed(_)) => a.matches(hook),
        (HookEvent::Clear(a) | HookEvent::Reassign(a), HookState::Empty) => {
            a.agent == hook.agent && a.generation.checked_add(1) == Some(hook.generation)
        }
        _ => false,
    }
}

fn next_generation(g: u64) -> u64 {
    g.saturating_add(1)
}

/// Applies `event` by `actor` at `now` to `hook` and returns the new hook.
///
/// The rules, checked in this order:
///
/// 1. Role: assign, clear and reassign are for a dispatcher; activate, touch
///    and complete for the agent that owns the hook
///    ([`Error::NotPermitted`], [`Error::NotOwner`]).
/// 2. Fence: every event but assign names an [`Assignment`]; it must still
///    be the hook's ([`Assignment::same_fence`]), else
///    [`Error::StaleAssignment`].
/// 3. State: assign needs empty ([`Error::AlreadyAssigned`]),
///    activate pending, touch and complete active, clear completed, reassign
///    pending or active ([`Error::WrongState`]).
///
/// Every successful event sets `last_activity` to `now`. Assign, clear and
/// reassign add one to the generation.
///
/// # Errors
///
/// A refusal ([`ErrorKind::Refused`](chipset_store::ErrorKind::Refused), or [`ErrorKind::Stale`](chipset_store::ErrorKind::Stale)) naming the hook's state and who may do what.
pub(crate) fn transition(
    hook: &Hook,
    event: &HookEvent,
    actor: &Actor,
    now: Timestamp,
) -> Result<Hook> {
    let op = event.op();
    let name = op.as_str();
    let agent = &hook.agent;
    match (op.role(), actor) {
        (Role::Dispatcher, Actor::Dispatcher(_)) => {}
        (Role::OwningAgent, Actor::Agent(id)) if id == agent => {}
        (Role::OwningAgent, Actor::Agent(id)) => {
            return Err(Error::NotOwner {
                agent: agent.clone(),
                actor: id.clone(),
                op: name,
            });
        }
        _ => {
            return Err(Error::NotPermitted {
                agent: agent.clone(),
                actor: actor.to_string(),
                op: name,
            });
        }
    }
    if let Some(held) = event.fence()
        && !held.matches(hook)
    {
        return Err(Error::StaleAssignment {
            agent: agent.clone(),
            op: name,
            held: Box::new(held.clone()),
            status: hook.state.status(),
            current: hook.assignment().map(Box::new),
        });
    }
    let moved = |state, generation| {
        Ok(Hook {
            agent: agent.clone(),
            state,
            last_activity: now,
            generation,
            // Fields another writer added stay with the hook through every change.
            extra: hook.extra.clone(),
        })
    };
    let generation = hook.generation;
    match (event, &hook.state) {
        (HookEvent::Assign { bead_id, title }, HookState::Empty) => {
            let by = match actor {
                Actor::Dispatcher(by) => by.clone(),
                Actor::Agent(_) => None,
            };
            let work = WorkItem::new(bead_id.clone(), title.clone(), now, by);
            moved(HookState::Pending(work), next_generation(generation))
        }
        (HookEvent::Assign { .. }, state) => Err(Error::AlreadyAssigned {
            agent: agent.clone(),
            status: state.status(),
            bead_id: state
                .work()
                .map(|w| w.bead_id.clone())
                .expect("a non-empty state carries work"),
        }),
        (HookEvent::Activate(_), HookState::Pending(w)) => {
            moved(HookState::Active(w.clone()), generation)
        }
        (HookEvent::Touch(_), HookState::Active(w)) => {
            moved(HookState::Active(w.clone()), generation)
        }
        (HookEvent::Complete(_), HookState::Active(w)) => {
            moved(HookState::Completed(w.clone()), generation)
        }
        (HookEvent::Clear(_), HookState::Completed(_))
        | (HookEvent::Reassign(_), HookState::Pending(_) | HookState::Active(_)) => {
            moved(HookState::Empty, next_generation(generation))
        }
        (_, state) => Err(Error::WrongState {
            agent: agent.clone(),
            op: name,
            from: state.status(),
        }),
    }
}

#[cfg(test)]
mod tests;
