//! The typed hook: a state that always carries its work item when it has one.

use std::fmt;

use crate::BeadId;
use chipset_store::{AgentId, ReadOutcome, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The four lifecycle states, as written in the file's `status` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum HookStatus {
    /// No work assigned; the agent is idle.
    Empty,
    /// Work assigned, not started yet.
    Pending,
    /// The agent is executing the work.
    Active,
    /// The work is finished and awaits the dispatcher's clear.
    Completed,
}

impl HookStatus {
    /// Returns the status `read` shows, counting a missing hook as empty;
    /// `None` when the file is corrupt or unsupported.
    pub fn of(read: &ReadOutcome<Hook>) -> Option<HookStatus> {
        match read {
            ReadOutcome::Missing => Some(HookStatus::Empty),
            ReadOutcome::Value(h) => Some(h.state.status()),
            ReadOutcome::Corrupt(_) | ReadOutcome::Unsupported(_) => None,
        }
    }

    /// Returns the name written in the file (`"empty"`, `"pending"`, …).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            HookStatus::Empty => "empty",
            HookStatus::Pending => "pending",
            HookStatus::Active => "active",
            HookStatus::Completed => "completed",
        }
    }
}

impl fmt::Display for HookStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The work a hook holds: the seed's `work_item` (bead id, title, when it was
/// assigned), plus who assigned it when that is known, and any fields another
/// writer put in the work item that chipset does not know (kept as they are).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct WorkItem {
    /// The bead (work item) id.
    pub bead_id: BeadId,
    /// The short description of the work.
    pub title: String,
    /// When the work was assigned.
    pub assigned_at: Timestamp,
    /// The dispatcher that assigned the work, when it said so (a hook
    /// written by a seed-style program does not record it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assigned_by: Option<AgentId>,
    /// The work item's fields that chipset does not know (such as
    /// `description` or `priority` written by another program), which every
    /// rewrite keeps.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl WorkItem {
    /// Returns a work item. The title is free text; the bead id is validated by its type.
    pub fn new(
        bead_id: BeadId,
        title: impl Into<String>,
        assigned_at: Timestamp,
        assigned_by: Option<AgentId>,
    ) -> Self {
        WorkItem {
            bead_id,
            title: title.into(),
            assigned_at,
            assigned_by,
            extra: Map::new(),
        }
    }
}

/// Where a hook is in its lifecycle. Every state but [`HookState::Empty`]
/// carries its work item, so "pending without work" cannot be written down.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HookState {
    /// No work.
    Empty,
    /// Work assigned, not started.
    Pending(WorkItem),
    /// Work in progress.
    Active(WorkItem),
    /// Work finished, awaiting the dispatcher's clear.
    Completed(WorkItem),
}

impl HookState {
    /// Returns the status name of this state.
    pub fn status(&self) -> HookStatus {
        match self {
            HookState::Empty => HookStatus::Empty,
            HookState::Pending(_) => HookStatus::Pending,
            HookState::Active(_) => HookStatus::Active,
            HookState::Completed(_) => HookStatus::Completed,
        }
    }

    /// Returns the work item, if the hook holds one.
    pub fn work(&self) -> Option<&WorkItem> {
        match self {
            HookState::Empty => None,
            HookState::Pending(w) | HookState::Active(w) | HookState::Completed(w) => Some(w),
        }
    }
}

/// One agent's hook: whose it is, where it is in its lifecycle, when it last
/// changed, and its generation.
///
/// The generation grows on every assignment and on every clear or
/// reassignment, so an [`Assignment`] taken from an earlier cycle never
/// matches the hook again (see [`Assignment::same_fence`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Hook {
    /// The agent this hook belongs to.
    pub agent: AgentId,
    /// The lifecycle state with its work item.
    pub state: HookState,
    /// When the hook last changed (or was touched).
    pub last_activity: Timestamp,
    /// The generation counter (0 for a file that does not record one).
    pub generation: u64,
    /// The top-level fields chipset does not know, written by another
    /// program; every transition keeps them and every rewrite writes them back.
    pub extra: Map<String, Value>,
}

impl Hook {
    /// Returns a hook in `state`. Every value of [`HookState`] is legal, so
    /// this cannot build an illegal hook; use it for tests and simulations.
    pub fn new(
        agent: AgentId,
        state: HookState,
        last_activity: Timestamp,
        generation: u64,
    ) -> Self {
        Hook {
            agent,
            state,
            last_activity,
            generation,
            extra: Map::new(),
        }
    }

    /// Returns the empty hook a missing file stands for: generation 0, last
    /// activity at the Unix epoch.
    pub fn missing(agent: AgentId) -> Self {
        Hook::new(agent, HookState::Empty, Timestamp::EPOCH, 0)
    }

    /// Returns the assignment the hook holds now (pending, active or
    /// completed), the value the agent and the dispatcher act on.
    pub fn assignment(&self) -> Option<Assignment> {
        self.state.work().map(|work| Assignment {
            agent: self.agent.clone(),
            generation: self.generation,
            work: work.clone(),
        })
    }
}

/// One assignment of one work item to one agent: the fence that
/// [`activate`](crate::Hooks::activate), [`touch`](crate::Hooks::touch),
/// [`complete`](crate::Hooks::complete), [`clear`](crate::Hooks::clear) and
/// [`reassign`](crate::Hooks::reassign) name.
///
/// Returned by [`Hooks::assign`](crate::Hooks::assign),
/// [`Hooks::pickup`](crate::Hooks::pickup) and
/// [`Hooks::current`](crate::Hooks::current). It serializes, so an agent or
/// a dispatcher can persist what it holds across a restart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Assignment {
    /// The agent whose hook holds the work.
    pub agent: AgentId,
    /// The hook's generation when the work was assigned.
    pub generation: u64,
    /// The work item.
    pub work: WorkItem,
}

impl Assignment {
    /// Returns true when `hook` still holds this assignment, by
    /// [`Assignment::same_fence`] with the hook's own (without building it).
    pub(crate) fn matches(&self, hook: &Hook) -> bool {
        hook.state
            .work()
            .is_some_and(|work| self.fences(&hook.agent, hook.generation, work))
    }

    /// Returns true when `other` is the same fence: the same agent,
    /// generation, bead and assignment time (the title and who assigned it
    /// are not part of it). This is the one definition of "the same
    /// assignment" that every fenced operation uses: a hook still holds
    /// `held` when `hook.assignment()` is `Some(a)` with
    /// `a.same_fence(&held)`.
    ///
    /// The assignment time is part of the fence so that even a program that
    /// rewrites the file without a `generation` (resetting it to 0) cannot
    /// make an old assignment of the same bead match a new one.
    pub fn same_fence(&self, other: &Assignment) -> bool {
        self.fences(&other.agent, other.generation, &other.work)
    }

    fn fences(&self, agent: &AgentId, generation: u64, work: &WorkItem) -> bool {
        self.agent == *agent
            && self.generation == generation
            && self.work.bead_id == work.bead_id
            && self.work.assigned_at == work.assigned_at
    }
}

impl fmt::Display for Assignment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bead `{}` on `{}` (generation {}, assigned {})",
            self.work.bead_id, self.agent, self.generation, self.work.assigned_at
        )
    }
}
