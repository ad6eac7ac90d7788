//! The crate's one error type.

use chipset_store::{AgentId, Corruption, Unsupported};

use crate::transition::TransitionError;

/// A specialized result for hook operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything a hook operation can fail with. When one is returned, nothing
/// was written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The hook's rules refuse the operation (wrong state, wrong actor, stale assignment).
    #[error(transparent)]
    Transition(#[from] TransitionError),
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
    /// A filesystem operation failed; it names the operation and the path.
    #[error(transparent)]
    Store(#[from] chipset_store::Error),
}

impl Error {
    /// Returns the refused transition, if this is one.
    pub fn transition(&self) -> Option<&TransitionError> {
        match self {
            Error::Transition(e) => Some(e),
            _ => None,
        }
    }

    /// Returns true when the assignment named was stale (cleared, reassigned or replaced).
    pub fn is_stale(&self) -> bool {
        self.transition().is_some_and(TransitionError::is_stale)
    }

    /// Returns true when the hook file is corrupt.
    pub fn is_corrupt(&self) -> bool {
        matches!(self, Error::Corrupt { .. })
    }

    /// Returns true when the hook file holds a value this version does not know.
    pub fn is_unsupported(&self) -> bool {
        matches!(self, Error::Unsupported { .. })
    }
}
