//! The crate's one error enum.

use chipset_store::{Classify, Corruption, ErrorKind};

use crate::format::Reminder;

/// A specialized result for nudge and reminder operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in `chipset-nudge`.
///
/// Store failures (I/O with the path and the operation, symlinks, lock
/// timeouts) arrive as [`Error::Store`]; a file that must be readable to go on
/// but is not arrives as [`Error::Corrupt`], never as "nothing there".
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A filesystem operation failed.
    #[error(transparent)]
    Store(#[from] chipset_store::Error),
    /// The storage backend failed (a PostgreSQL server, through
    /// [`Nudges::with_backend`](crate::Nudges::with_backend)); on a
    /// directory failures stay [`Error::Store`]. Boxed: the backend's
    /// error carries the value it found, and every result would pay for
    /// its size.
    #[error(transparent)]
    Backend(Box<chipset_backend::Error>),
    /// A file this operation depends on is there but unreadable; repair it
    /// with a doctor (which quarantines it) and retry.
    #[error(transparent)]
    Corrupt(Corruption),
    /// A nudge's `from` cannot be used as a directory name, so it cannot be answered.
    #[error("cannot answer a nudge from {from:?}: not a valid agent id")]
    InvalidSender {
        /// The refused sender.
        from: String,
    },
    /// A reminder kind that the application did not register.
    #[error("unregistered reminder kind {kind:?}")]
    UnknownKind {
        /// The refused kind.
        kind: String,
    },
    /// A reminder written with another source type than its kind's canonical one.
    #[error("reminder kind {kind:?} takes source type {expected:?}, not {found:?}")]
    SourceTypeMismatch {
        /// The kind.
        kind: String,
        /// Its registered source type.
        expected: String,
        /// The one given.
        found: String,
    },
    /// The `blocking` severity is reserved: reminders never hard-gate.
    #[error("severity `blocking` is reserved; reminders are `info` or `nudge`")]
    BlockingSeverity,
    /// A reminder without a source id.
    #[error("reminder source id must not be empty")]
    EmptySourceId,
    /// A field refused by validation (a kind name, a source id, a verb, a tenant id).
    #[error("invalid {field} {value:?}: {rule}")]
    InvalidField {
        /// Which field.
        field: &'static str,
        /// The refused value.
        value: String,
        /// The rule it broke.
        rule: &'static str,
    },
    /// A kind registered twice.
    #[error("reminder kind {kind:?} is registered twice")]
    DuplicateKind {
        /// The kind.
        kind: String,
    },
    /// Auto-resolution by a verb that does not resolve that kind.
    #[error(
        "verb {verb:?} does not resolve reminder kind {kind:?}; the verbs that do: {}",
        resolving.join(", ")
    )]
    NotAResolvingVerb {
        /// The kind.
        kind: String,
        /// The refused verb.
        verb: String,
        /// The verbs that resolve the kind.
        resolving: Vec<String>,
    },
    /// No reminder has this id.
    #[error("no reminder with id `{id}`")]
    ReminderNotFound {
        /// The id looked for.
        id: String,
    },
    /// The reminder was resolved already (and is not snoozed) in another
    /// way: another resolution or note. (Resolving again the same way is a
    /// retry, and succeeds.)
    #[error("reminder `{}` is already resolved", .reminder.id)]
    AlreadyResolved {
        /// The resolved reminder, as it is on disk.
        reminder: Box<Reminder>,
    },
    /// A response was recorded (its commit point) but its copy in the
    /// sender's `latest.json` was not written. Respond again with the same
    /// message: the recorded response is reused and delivered.
    #[error("the response to `{sender}` is recorded, but it was not delivered")]
    ResponseNotDelivered {
        /// The sender of the nudge answered.
        sender: chipset_store::AgentId,
        /// Why the delivery failed.
        #[source]
        source: Box<Error>,
    },
    /// A send with a chosen id ([`NewNudge::with_id`](crate::NewNudge::with_id))
    /// found a nudge with that id and other content; nothing was written.
    #[error("nudge `{id}` exists with other content")]
    IdTaken {
        /// The id.
        id: crate::NudgeId,
    },
}

impl Classify for Error {
    /// Classifies the failure. Only an unknown outcome may have taken
    /// effect ([`Error::ResponseNotDelivered`], or the store's or the
    /// backend's): retry it rather than report a plain failure.
    fn kind(&self) -> ErrorKind {
        match self {
            Error::UnknownKind { .. }
            | Error::SourceTypeMismatch { .. }
            | Error::BlockingSeverity
            | Error::EmptySourceId
            | Error::InvalidField { .. }
            | Error::DuplicateKind { .. }
            | Error::NotAResolvingVerb { .. } => ErrorKind::Invalid,
            Error::ReminderNotFound { .. } => ErrorKind::NotFound,
            Error::InvalidSender { .. } | Error::AlreadyResolved { .. } | Error::IdTaken { .. } => {
                ErrorKind::Refused
            }
            Error::Corrupt(_) => ErrorKind::Corrupt,
            Error::ResponseNotDelivered { .. } => ErrorKind::OutcomeUnknown,
            Error::Store(e) => e.kind(),
            Error::Backend(e) => e.kind(),
        }
    }
}

impl From<Corruption> for Error {
    fn from(c: Corruption) -> Self {
        Error::Corrupt(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chipset_store::Classify;

    /// Only a failure after the commit point asks for a retry: a response
    /// recorded but not delivered, or the store's unknown outcome; a refusal
    /// (here a taken id, or a store error before anything was written)
    /// changed nothing and says so.
    #[test]
    fn only_an_unknown_outcome_asks_for_a_retry() {
        let unknown = || chipset_store::Error::OutcomeUnknown {
            op: "sync",
            path: "nudge/a/latest.json".into(),
            source: std::io::Error::other("EIO"),
        };
        assert!(Error::Store(unknown()).is_outcome_unknown());
        assert!(
            Error::ResponseNotDelivered {
                sender: chipset_store::AgentId::new("witness").unwrap(),
                source: Box::new(Error::Store(unknown())),
            }
            .is_outcome_unknown()
        );
        let taken = Error::IdTaken {
            id: crate::NudgeId::new("n1").unwrap(),
        };
        assert!(!taken.is_outcome_unknown());
        let refused = Error::Store(chipset_store::Error::NotFound {
            path: "nudge/a/latest.json".into(),
        });
        assert!(!refused.is_outcome_unknown());
    }
}
