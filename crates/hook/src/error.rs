//! The crate's one error type.

use chipset_store::{AgentId, Classify, Corruption, ErrorKind, Unsupported};

use crate::state::{Assignment, HookStatus};
use crate::transition::{needs, role_of};

/// A specialized result for hook operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything a hook operation can fail with. When one is returned, nothing
/// was written.
///
/// The first five variants are refusals by the hook's rules (of kind
/// [`ErrorKind::Refused`], or [`ErrorKind::Stale`] for a stale assignment,
/// through [`Classify::kind`]); `op` names the operation tried (`"assign"`,
/// `"activate"`, `"touch"`, `"complete"`, `"clear"`, `"reassign"`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Assign onto a hook that already holds work (one work item per agent).
    #[error(
        "cannot assign to `{agent}`: its hook is already {status} with bead `{bead_id}`; \
         only an empty hook takes new work"
    )]
    AlreadyAssigned {
        /// The hook's agent.
        agent: AgentId,
        /// Its status (pending, active or completed).
        status: HookStatus,
        /// The bead it holds.
        bead_id: crate::BeadId,
    },
    /// The actor has the wrong role for the operation (an agent assigning, a
    /// dispatcher completing).
    #[error("{actor} may not {op} the hook of `{agent}`: only {} may", role_of(op))]
    NotPermitted {
        /// The hook's agent.
        agent: AgentId,
        /// Who tried, as a phrase (``dispatcher `mayor` ``, ``agent `a` ``).
        actor: String,
        /// What they tried.
        op: &'static str,
    },
    /// An agent acting on another agent's hook.
    #[error("agent `{actor}` may not {op} the hook of `{agent}`: only `{agent}` itself may")]
    NotOwner {
        /// The hook's agent.
        agent: AgentId,
        /// The agent that tried.
        actor: AgentId,
        /// What it tried.
        op: &'static str,
    },
    /// The assignment holds, but the hook is not in a state the operation
    /// starts from.
    #[error(
        "cannot {op} the hook of `{agent}`: it is {from}, and {op} needs {}",
        needs(op)
    )]
    WrongState {
        /// The hook's agent.
        agent: AgentId,
        /// What was tried.
        op: &'static str,
        /// The hook's status.
        from: HookStatus,
    },
    /// The assignment named is no longer the one the hook holds: it was
    /// cleared, reassigned or replaced in between.
    #[error("cannot {op}: {held} is stale; the hook of `{agent}` is now {}", Found(*status, current.as_deref()))]
    StaleAssignment {
        /// The hook's agent.
        agent: AgentId,
        /// What was tried.
        op: &'static str,
        /// The assignment the caller held.
        held: Box<Assignment>,
        /// The hook's status now.
        status: HookStatus,
        /// The assignment the hook holds now, if any.
        current: Option<Box<Assignment>>,
    },
    /// The hook file is corrupt, so the operation cannot know what it would
    /// overwrite; [`Hooks::doctor`](crate::Hooks::doctor) with
    /// [`DoctorMode::Fix`](chipset_store::DoctorMode::Fix) moves it aside first.
    #[error(
        "cannot {op} the hook of `{agent}`: {corruption}; \
         a dispatcher must repair it (quarantine, then empty) first"
    )]
    Corrupt {
        /// The hook's agent.
        agent: AgentId,
        /// What was being done ("assign", "read the assignment of", …).
        op: &'static str,
        /// The bad file and why it is bad.
        corruption: Corruption,
    },
    /// The hook file is well formed but holds a value this version does not
    /// know (a status written by a newer program). The operation refuses to
    /// guess, and repair leaves the file alone: the program that wrote it
    /// (or a newer chipset) must move it on.
    #[error(
        "cannot {op} the hook of `{agent}`: {unsupported}; \
         it is left as it is for the program that wrote it"
    )]
    Unsupported {
        /// The hook's agent.
        agent: AgentId,
        /// What was being done.
        op: &'static str,
        /// The file and the value this version does not know.
        unsupported: Unsupported,
    },
    /// A title [`Hooks::assign`](crate::Hooks::assign) refuses: empty,
    /// over 1024 bytes, or not one line
    /// (control characters). Nothing was read or written.
    #[error("invalid title: {reason}")]
    InvalidTitle {
        /// What is wrong with it.
        reason: String,
    },
    /// A filesystem operation failed; it names the operation and the path.
    #[error(transparent)]
    Store(#[from] chipset_store::Error),
    /// The storage backend failed (a PostgreSQL server, through
    /// [`Hooks::with_backend`](crate::Hooks::with_backend)); on a directory
    /// failures stay [`Error::Store`]. Boxed: the backend's error carries
    /// the value it found, and every hook result would pay for its size.
    #[error(transparent)]
    Backend(Box<chipset_backend::Error>),
}

impl Classify for Error {
    /// Classifies the failure: the hook's rules refused it
    /// ([`ErrorKind::Refused`], or [`ErrorKind::Stale`] for
    /// [`Error::StaleAssignment`]), a bad title, a corrupt or unsupported
    /// hook file, or the store's or the backend's own kind. Only an
    /// unknown outcome may have made the transition; a retry with the same
    /// request or assignment returns the first result.
    fn kind(&self) -> ErrorKind {
        match self {
            Error::AlreadyAssigned { .. }
            | Error::NotPermitted { .. }
            | Error::NotOwner { .. }
            | Error::WrongState { .. } => ErrorKind::Refused,
            Error::StaleAssignment { .. } => ErrorKind::Stale,
            Error::Corrupt { .. } => ErrorKind::Corrupt,
            Error::Unsupported { .. } => ErrorKind::Unsupported,
            Error::InvalidTitle { .. } => ErrorKind::Invalid,
            Error::Store(e) => e.kind(),
            Error::Backend(e) => e.kind(),
        }
    }
}

/// The hook's status and assignment now, for [`Error::StaleAssignment`].
struct Found<'a>(HookStatus, Option<&'a Assignment>);

impl std::fmt::Display for Found<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.1 {
            None => write!(f, "{}", self.0),
            Some(a) => write!(
                f,
                "{} with bead `{}` (generation {}, assigned {})",
                self.0, a.work.bead_id, a.generation, a.work.assigned_at
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use chipset_store::Classify;

    use super::Error;

    /// A backend commit whose answer was lost is an unknown outcome, as the
    /// store's is; any other backend failure is not.
    #[test]
    fn a_lost_backend_commit_is_an_unknown_outcome() {
        let lost = chipset_backend::Error::OutcomeUnknown {
            op: "replace",
            key: "hooks/alice.json".to_owned(),
            source: "connection closed".into(),
        };
        assert!(Error::Backend(Box::new(lost)).is_outcome_unknown());
        let refused = chipset_backend::Error::NotFound {
            key: "hooks/alice.json".to_owned(),
        };
        assert!(!Error::Backend(Box::new(refused)).is_outcome_unknown());
    }
}
