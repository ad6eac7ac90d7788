//! The crate's one error type.

use std::io;
use std::path::PathBuf;

use chipset_store::AgentId;

use crate::format::EventId;

/// A specialized result for bus operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in `chipset-bus`.
///
/// A duplicate publish is not an error (it is [`Published::Duplicate`](crate::Published::Duplicate)),
/// and neither is acknowledging twice ([`AckOutcome::AlreadyAcked`](crate::AckOutcome::AlreadyAcked)).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A store operation failed; the store error names the path and the operation.
    #[error(transparent)]
    Store(#[from] chipset_store::Error),
    /// A caller-supplied field (source, kind, de-duplication key, resource) was refused.
    #[error("invalid {field} {value:?}: {rule}")]
    InvalidField {
        /// Which field.
        field: &'static str,
        /// The refused value.
        value: String,
        /// The rule it broke.
        rule: &'static str,
    },
    /// An acknowledgement named an event that is neither queued nor processed for that agent.
    #[error("no event `{id}` in the queue or processed area of `{agent}`")]
    UnknownEvent {
        /// The agent whose queue was searched.
        agent: AgentId,
        /// The event id.
        id: EventId,
    },
    /// An I/O operation the bus does itself (removing a pruned file) failed.
    #[error("failed to {op} `{path}`")]
    Io {
        /// What was being done, as a verb phrase.
        op: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

impl Error {
    pub(crate) fn invalid(field: &'static str, value: &str, rule: &'static str) -> Self {
        Error::InvalidField {
            field,
            value: value.to_owned(),
            rule,
        }
    }
}
