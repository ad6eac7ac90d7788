//! The crate's one error type.

use chipset_store::{AgentId, Classify, Corruption, ErrorKind, Unsupported};

/// A specialized result for directory operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything a directory operation can fail with. When one is returned by
/// [`Directory::register`](crate::Directory::register), nothing was written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A role name is not a valid role.
    #[error("invalid role `{value}`: {reason}")]
    InvalidRole {
        /// The name given.
        value: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// A profile lists more roles than [`MAX_ROLES`](crate::MAX_ROLES).
    #[error("too many roles: {count}, at most {max}")]
    TooManyRoles {
        /// How many were given.
        count: usize,
        /// The bound.
        max: usize,
    },
    /// A text field is longer than its bound.
    #[error("the {field} is {len} bytes long, at most {max}")]
    TooLong {
        /// The field (`program`, `note`, …).
        field: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// A text field holds a control character (a line break outside the note).
    #[error("the {field} holds a control character")]
    ControlCharacter {
        /// The field.
        field: &'static str,
    },
    /// The agent has no profile.
    #[error("agent `{agent}` is not registered")]
    NotRegistered {
        /// The agent.
        agent: AgentId,
    },
    /// The profile file is corrupt: it is reported, never read as absent,
    /// and `register` refuses to overwrite it.
    #[error("cannot {op} the profile of `{agent}`: {corruption}")]
    Corrupt {
        /// The agent.
        agent: AgentId,
        /// What was being done.
        op: &'static str,
        /// The bad file and why it is bad.
        corruption: Corruption,
    },
    /// The profile file holds a value this version does not know.
    #[error("cannot {op} the profile of `{agent}`: {unsupported}")]
    Unsupported {
        /// The agent.
        agent: AgentId,
        /// What was being done.
        op: &'static str,
        /// The file and the value.
        unsupported: Unsupported,
    },
    /// A `--to` list that cannot be parsed (an empty item, a bad agent
    /// name, a list name that is not a role such as `@../x`).
    #[error("invalid recipients `{value}`: {reason}")]
    InvalidRecipients {
        /// The item (or the whole text) refused.
        value: String,
        /// Why.
        reason: String,
    },
    /// `all` names every agent (`@all`): no list may be called it.
    #[error("`all` is reserved for `@all`: choose another list name")]
    ReservedList,
    /// A recipient has no profile (register it first).
    #[error("unknown agent `{agent}`: it is not registered (`chipset agent register {agent}`)")]
    UnknownAgent {
        /// The agent.
        agent: AgentId,
    },
    /// No agent is on the list.
    #[error("list `@{list}` is empty: no agent holds the role `{list}`")]
    EmptyList {
        /// The list.
        list: crate::Role,
    },
    /// The recipients name nobody but the sender.
    #[error("no recipient but the sender `{sender}`")]
    NoOtherAgent {
        /// The sender.
        sender: AgentId,
    },
    /// A list change changed the profiles of `changed` (agents before the
    /// one that failed), then failed: the same change again finishes it,
    /// leaving those alone. An unknown outcome
    /// ([`Classify::is_outcome_unknown`]).
    #[error("the list changed for {} of the agents, then failed", changed.len())]
    PartlyChanged {
        /// The agents whose profiles changed.
        changed: Vec<AgentId>,
        /// Why the next one failed.
        #[source]
        source: Box<Error>,
    },
    /// A filesystem operation failed; it names the operation and the path.
    #[error(transparent)]
    Store(#[from] chipset_store::Error),
    /// Reading the agent's hook (for its last activity) failed.
    #[error(transparent)]
    Hook(#[from] chipset_hook::Error),
    /// Reading the agent's bus presence failed.
    #[error(transparent)]
    Bus(#[from] chipset_bus::Error),
    /// The storage backend failed (a PostgreSQL server, through
    /// [`Directory::with_backend`](crate::Directory::with_backend)); on a
    /// directory failures stay [`Error::Store`]. Boxed: the backend's error
    /// carries the value it found.
    #[error(transparent)]
    Backend(Box<chipset_backend::Error>),
}

impl Classify for Error {
    /// Classifies the failure. The change may have been made but not be
    /// known to be committed (the store's, a channel's or the backend's
    /// outcome is unknown), or made in part ([`Error::PartlyChanged`]):
    /// the same call again is then a retry.
    fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidRole { .. }
            | Error::TooManyRoles { .. }
            | Error::TooLong { .. }
            | Error::ControlCharacter { .. }
            | Error::InvalidRecipients { .. }
            | Error::ReservedList
            | Error::UnknownAgent { .. }
            | Error::EmptyList { .. }
            | Error::NoOtherAgent { .. } => ErrorKind::Invalid,
            Error::NotRegistered { .. } => ErrorKind::NotFound,
            Error::Corrupt { .. } => ErrorKind::Corrupt,
            Error::Unsupported { .. } => ErrorKind::Unsupported,
            Error::PartlyChanged { .. } => ErrorKind::OutcomeUnknown,
            Error::Store(e) => e.kind(),
            Error::Hook(e) => e.kind(),
            Error::Bus(e) => e.kind(),
            Error::Backend(e) => e.kind(),
        }
    }
}
