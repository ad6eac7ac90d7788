//! The crate's one error type.

use std::io;
use std::path::PathBuf;

use chipset_store::{AgentId, Classify, ErrorKind};

use crate::format::EventId;

/// A specialized result for bus operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in `chipset-bus`.
///
/// A duplicate publish is not an error (it is [`Published::Duplicate`](crate::Published::Duplicate)),
/// and neither is acknowledging twice ([`Bus::ack`](crate::Bus::ack) returns false).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A store operation failed; the store error names the path and the operation.
    #[error(transparent)]
    Store(#[from] chipset_store::Error),
    /// A caller-supplied field (source, kind, de-duplication key, payload,
    /// resource) was refused.
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
    /// A publish with a caller-chosen id found an event with that id and
    /// other content (the idempotent-retry rule refuses it); nothing changed.
    #[error("event `{id}` for `{agent}` exists with other content: {path}")]
    IdTaken {
        /// The recipient.
        agent: AgentId,
        /// The id.
        id: EventId,
        /// The existing event's file.
        path: PathBuf,
    },
    /// The publish passed its commit point (the event's no-clobber create)
    /// but its durability is unknown: the event may be delivered. Retry with
    /// the same id ([`NewEvent::with_id`](crate::NewEvent::with_id)): if it
    /// was delivered, the retry returns it as success.
    #[error("event `{id}` may have been published")]
    OutcomeUnknown {
        /// The id of the event that may be delivered.
        id: EventId,
        /// What failed: on a directory the store's
        /// [`chipset_store::Error::OutcomeUnknown`], on a server the
        /// backend's (the connection lost while the server committed).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// The backend of [`Bus::with_backend`](crate::Bus::with_backend) (a
    /// PostgreSQL server) failed; boxed, as a conflict error carries the
    /// value it found.
    #[error(transparent)]
    Backend(Box<chipset_backend::Error>),
    /// A publish to several recipients delivered to some of them, then
    /// failed: those copies stay. Retry with the same id
    /// ([`NewEvent::with_id`](crate::NewEvent::with_id)): the delivered copies
    /// are returned as they are and the rest are published.
    #[error("event `{id}` was published to {} of its recipients, then failed", delivered.len())]
    PartlyPublished {
        /// The event's id.
        id: EventId,
        /// The recipients that have it.
        delivered: Vec<AgentId>,
        /// Why the next one failed.
        #[source]
        source: Box<Error>,
    },
    /// A batch ([`Bus::publish_batch`](crate::Bus::publish_batch)) failed
    /// with some of its events published, or maybe published (those of a
    /// step whose outcome is unknown): they stay. The same batch again
    /// without chosen ids would publish them twice: publish it again with
    /// ids ([`NewEvent::with_id`](crate::NewEvent::with_id)), these for
    /// the events listed, and their first deliveries are returned as they
    /// are; or publish only the events not listed.
    #[error("{} published to `{agent}`, then failed", listed(published))]
    BatchPartlyPublished {
        /// The recipient.
        agent: AgentId,
        /// The events of the batch in the queue when it failed, or that
        /// may be, in batch order: each one's position in the batch and
        /// its id. Published by this call, or for a chosen id by an
        /// earlier one.
        published: Vec<(usize, EventId)>,
        /// Why the batch stopped.
        #[source]
        source: Box<Error>,
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

/// "event `a` of the batch was", or "events `a`, `b` of the batch were".
fn listed(published: &[(usize, EventId)]) -> String {
    let ids: Vec<String> = published.iter().map(|(_, id)| format!("`{id}`")).collect();
    match ids.len() {
        1 => format!("event {} of the batch was", ids[0]),
        _ => format!("events {} of the batch were", ids.join(", ")),
    }
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

impl Classify for Error {
    /// Classifies the failure. Only an unknown outcome may have taken
    /// effect ([`Error::OutcomeUnknown`], [`Error::PartlyPublished`],
    /// [`Error::BatchPartlyPublished`], or the store's or the backend's).
    fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidField { .. } => ErrorKind::Invalid,
            Error::UnknownEvent { .. } => ErrorKind::NotFound,
            Error::IdTaken { .. } => ErrorKind::Refused,
            Error::OutcomeUnknown { .. }
            | Error::PartlyPublished { .. }
            | Error::BatchPartlyPublished { .. } => ErrorKind::OutcomeUnknown,
            Error::Io { .. } => ErrorKind::Io,
            Error::Store(e) => e.kind(),
            Error::Backend(e) => e.kind(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chipset_store::{ManualClock, Timestamp};

    /// A failure past the commit point names the event that may be out.
    #[test]
    fn an_unknown_outcome_names_its_event() {
        let id = EventId::generate(&ManualClock::new(Timestamp::from_unix_ms(1_000)));
        let unknown = || chipset_store::Error::OutcomeUnknown {
            op: "sync",
            path: "bus/a/queue".into(),
            source: io::Error::other("EIO"),
        };
        let e = Error::OutcomeUnknown {
            id: id.clone(),
            source: Box::new(unknown()),
        };
        assert!(matches!(&e, Error::OutcomeUnknown { id: named, .. } if *named == id));
        assert!(e.is_outcome_unknown());
        let partly = Error::PartlyPublished {
            id: id.clone(),
            delivered: vec![AgentId::new("a").unwrap()],
            source: Box::new(Error::Store(unknown())),
        };
        assert!(matches!(&partly, Error::PartlyPublished { id: named, .. } if *named == id));
        assert!(partly.is_outcome_unknown());
        // The store's own unknown outcome is one too, though it names no event.
        assert!(Error::Store(unknown()).is_outcome_unknown());
        let batch = Error::BatchPartlyPublished {
            agent: AgentId::new("a").unwrap(),
            published: vec![(0, id.clone()), (2, id.clone())],
            source: Box::new(Error::Store(unknown())),
        };
        assert!(batch.is_outcome_unknown());
        // The reason is the source, never repeated in the message.
        assert_eq!(
            batch.to_string(),
            format!("events `{id}`, `{id}` of the batch were published to `a`, then failed")
        );
        let source = std::error::Error::source(&batch).map(ToString::to_string);
        assert_eq!(source, Some(Error::Store(unknown()).to_string()));
    }
}
