//! The crate's one error enum.

use crate::MessageId;
use chipset_store::{AgentId, Classify, Corruption, ErrorKind, TaskId, Unsupported};

use crate::format::Kind;

/// A specialized result for mail operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in `chipset-mail`.
///
/// Refusals (a bad draft, a response that does not fit its request, an
/// archive without reply) change nothing on disk. [`Error::Corrupt`] names
/// the file that is there but unreadable: mail never reads such a file as
/// "nothing there".
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A filesystem operation failed (the store error names the path and operation).
    #[error(transparent)]
    Store(#[from] chipset_store::Error),
    /// A message file (or an entry where one belongs) cannot be read as a message.
    #[error(transparent)]
    Corrupt(#[from] Corruption),
    /// A message file that is well-formed but holds a value this version does
    /// not know (a new kind, priority or schema). Not corrupt: the doctor
    /// leaves it where it is; the gate and other readers that need its
    /// answer fail closed on it.
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
    /// The subject is not a kebab-case topic id.
    #[error("invalid subject {subject:?}: {rule}")]
    InvalidSubject {
        /// The refused subject.
        subject: String,
        /// The rule it broke.
        rule: &'static str,
    },
    /// An agent name that the seed's message schema refuses (`from` and `to`
    /// must match `^[a-zA-Z0-9_-]+$`): other programs would never see the message.
    #[error(
        "invalid {field} agent `{agent}`: the seed's message schema allows only ASCII letters, \
         digits, `_` and `-`, so other programs would not see this message"
    )]
    InvalidAgentName {
        /// `from` or `to`.
        field: &'static str,
        /// The refused name.
        agent: AgentId,
    },
    /// A round over 2^53, the largest integer every JSON writer writes exactly.
    #[error("round {round} is over the largest round, 2^53")]
    RoundTooLarge {
        /// The refused round.
        round: u64,
    },
    /// The body is over [`MailConfig::max_body`](crate::MailConfig::max_body).
    #[error("body of {size} bytes is over the {cap}-byte limit")]
    BodyTooLarge {
        /// The body's size in bytes.
        size: usize,
        /// The limit.
        cap: usize,
    },
    /// The whole message file would be over the state root's read cap, so it
    /// could not be read back.
    #[error("message file of {size} bytes is over the {cap}-byte read cap")]
    MessageTooLarge {
        /// The serialized size.
        size: usize,
        /// The read cap of the state root.
        cap: u64,
    },
    /// The recipient registry is enabled and does not list the recipient.
    #[error("unknown recipient `{agent}`: it is not in the recipient registry")]
    UnknownRecipient {
        /// The refused recipient.
        agent: AgentId,
    },
    /// A group message has no recipient but its sender.
    #[error("the group has no recipient but the sender")]
    EmptyGroup,
    /// A group message has more recipients than 4096, the most one group has.
    #[error("a group of {count} recipients is over the limit of {max}")]
    GroupTooLarge {
        /// How many were given.
        count: usize,
        /// The bound.
        max: usize,
    },
    /// A chosen message id is not in the seed's form
    /// ([`MessageId::is_seed_form`]): other programs would not see the message.
    #[error(
        "invalid message id `{id}`: the seed's form is `{{unix-ms}}-{{uuid}}` with a lower-case \
         UUID, so other programs would not see this message"
    )]
    InvalidMessageId {
        /// The refused id.
        id: MessageId,
    },
    /// A chosen group id is not `{unix-ms}-{uuid}`, the form every copy's
    /// id must keep for the seed's other readers.
    #[error("invalid group id `{id}`: must be `{{unix-ms}}-{{uuid}}`")]
    InvalidGroupId {
        /// The refused id.
        id: MessageId,
    },
    /// No message has this id (in any inbox, the archive, the by-task or orphan archive).
    #[error("message `{id}` does not exist")]
    NotFound {
        /// The id looked for.
        id: MessageId,
    },
    /// `in_reply_to` names a message that does not exist.
    #[error("cannot reply to message `{id}`: it does not exist")]
    ParentNotFound {
        /// The missing parent.
        id: MessageId,
    },
    /// A response must answer a request (a message that expects a reply).
    #[error("cannot respond to message `{id}`: it is a {kind} that expects no reply")]
    NotARequest {
        /// The message answered.
        id: MessageId,
        /// Its kind.
        kind: Kind,
    },
    /// Only a request's addressee may respond to it.
    #[error(
        "`{responder}` cannot respond to request `{request}`: it is addressed to `{addressee}`"
    )]
    NotAddressee {
        /// The request.
        request: MessageId,
        /// Who tried to respond.
        responder: AgentId,
        /// Whom the request is addressed to.
        addressee: AgentId,
    },
    /// A reply must belong to the same task as the message it replies to.
    #[error(
        "reply for task `{reply_task}` cannot reply to message `{parent}` of task `{parent_task}`"
    )]
    TaskMismatch {
        /// The message replied to.
        parent: MessageId,
        /// Its task.
        parent_task: TaskId,
        /// The task the reply was given.
        reply_task: TaskId,
    },
    /// The seed's `messages-archive-without-reply` refusal: a request that
    /// expects a reply cannot be archived before one was sent.
    #[error("messages-archive-without-reply: request `{id}` expects a reply and none was sent")]
    ArchiveWithoutReply {
        /// The request.
        id: MessageId,
    },
    /// A freshly generated id was taken already (a clock or id generator fault);
    /// nothing was overwritten.
    #[error("message id collision at `{path}`: nothing was overwritten")]
    IdCollision {
        /// The path that already existed.
        path: std::path::PathBuf,
    },
    /// An inbox holds quarantined files (moved aside by the doctor because
    /// they were unreadable). Any of them could be an open request, so the
    /// commit gate stays closed until a person inspects them and restores a
    /// repaired copy into the inbox or removes them.
    #[error(
        "`{path}` holds a quarantined inbox message that could be an open request: \
         inspect it, then restore a repaired copy or remove it"
    )]
    QuarantinedInbox {
        /// The quarantined file.
        path: std::path::PathBuf,
    },
    /// A draft sent with a caller-chosen id ([`NewMessage::with_id`](crate::NewMessage::with_id))
    /// whose id is in use by a message with other content (any field but
    /// `created_at` and the declared `schema` differs): the
    /// idempotent-retry rule refuses it. Nothing was written. (The same id
    /// with the same content is not an error: the send returns the first
    /// delivery.)
    #[error("message id `{id}` is taken: a message with other content is already in {location}")]
    IdTaken {
        /// The chosen id.
        id: MessageId,
        /// Where the existing message is.
        location: crate::Location,
    },
    /// A send passed its commit point (the no-clobber publish of the message
    /// file) but making it durable failed: the messages may have been
    /// delivered. Retry with the same ids ([`NewMessage::with_id`](crate::NewMessage::with_id)):
    /// a message that was delivered is then returned as it is, without a
    /// second copy.
    #[error("message {} may have been sent", join(ids))]
    OutcomeUnknown {
        /// The ids of the messages that may have been delivered (one for
        /// [`Mail::send`](crate::Mail::send); the batch's new ones for
        /// [`Mail::send_batch`](crate::Mail::send_batch)).
        ids: Vec<MessageId>,
        /// The store's [`chipset_store::Error::OutcomeUnknown`].
        #[source]
        source: chipset_store::Error,
    },
    /// A sweep moved some of the task's messages (each move is its own
    /// commit point, and every message is whole in one place), then failed.
    /// Running the sweep again moves the rest; when it stopped at a file it
    /// could not read (corrupt, or unsupported), once the doctor or a
    /// person has dealt with that file.
    #[error("sweep of task `{task}` moved {moved} messages, then failed")]
    PartlySwept {
        /// The task.
        task: TaskId,
        /// How many messages this run moved before the failure.
        moved: usize,
        /// Why it stopped.
        #[source]
        source: Box<Error>,
    },
    /// A batch ([`Mail::send_batch`](crate::Mail::send_batch), or the
    /// copies of [`Mail::send_group`](crate::Mail::send_group)) published
    /// some of its messages, then failed on another: a chosen id that a
    /// concurrent sender took meanwhile (with other content, or its message
    /// nowhere to be found), a fresh id taken, or a failure to read what is
    /// there. The messages `ids` were delivered and stay so (with their
    /// follow-up done), so the outcome counts as unknown, never as
    /// "nothing changed". A retry with the same ids returns them as first
    /// delivered; `source` says why the rest was not sent.
    #[error("message {} sent, then the batch failed", join(ids))]
    PartlySent {
        /// The messages this call delivered before the failure.
        ids: Vec<MessageId>,
        /// Why the rest was not sent.
        #[source]
        source: Box<Error>,
    },
    /// The storage backend failed, for mail on a server
    /// ([`Mail::with_backend`](crate::Mail::with_backend)); on a directory
    /// failures stay [`Error::Store`]. When the backend's error is an
    /// unknown outcome (the connection was lost at commit), the messages
    /// `ids` may have been sent, all of them or none: retry with the same
    /// ids ([`NewMessage::with_id`](crate::NewMessage::with_id)) and the
    /// first delivery is returned. A send whose chosen id is recorded while
    /// its message is nowhere (moved aside by the doctor, or a send on a
    /// directory backend cut after its first step) is refused with the
    /// backend's [`Exists`](chipset_backend::Error::Exists) of the id
    /// record, naming the ids, never answered as sent: the
    /// [`Mail::doctor`](crate::Mail::doctor)'s fix removes such a record.
    /// Boxed: the backend's error carries the value it found.
    #[error("{}{source}", unknown_prefix(ids, source))]
    Backend {
        /// The messages a send was writing (empty for other operations).
        ids: Vec<MessageId>,
        /// The backend's error.
        #[source]
        source: Box<chipset_backend::Error>,
    },
    /// An operation mail offers only on a server
    /// ([`Mail::import`](crate::Mail::import)): nothing was read or
    /// changed.
    #[error("mail can {op} only on a server backend")]
    ServerOnly {
        /// The operation.
        op: &'static str,
    },
}

fn unknown_prefix(ids: &[MessageId], source: &chipset_backend::Error) -> String {
    if chipset_store::Classify::is_outcome_unknown(source) && !ids.is_empty() {
        format!("message {} may have been sent: ", join(ids))
    } else {
        String::new()
    }
}

fn join(ids: &[MessageId]) -> String {
    ids.iter()
        .map(|id| format!("`{id}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Error {
    /// Returns the unsupported file's description when this error is about
    /// one (also when it stopped a sweep or a batch part way).
    pub fn unsupported(&self) -> Option<&Unsupported> {
        match self {
            Error::Unsupported(u) | Error::Store(chipset_store::Error::Unsupported(u)) => Some(u),
            Error::PartlySwept { source, .. } | Error::PartlySent { source, .. } => {
                source.unsupported()
            }
            _ => None,
        }
    }

    /// Returns the corrupt file's description when this error is about one
    /// (also when it stopped a sweep or a batch part way).
    pub fn corruption(&self) -> Option<&Corruption> {
        match self {
            Error::Corrupt(c) | Error::Store(chipset_store::Error::Corrupt(c)) => Some(c),
            Error::PartlySwept { source, .. } | Error::PartlySent { source, .. } => {
                source.corruption()
            }
            _ => None,
        }
    }
}

impl Classify for Error {
    /// Classifies the failure. Only an unknown outcome may have taken
    /// effect: retry it (a send with the same ids) rather than report a
    /// plain failure.
    fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidSubject { .. }
            | Error::InvalidAgentName { .. }
            | Error::RoundTooLarge { .. }
            | Error::BodyTooLarge { .. }
            | Error::MessageTooLarge { .. }
            | Error::UnknownRecipient { .. }
            | Error::EmptyGroup
            | Error::GroupTooLarge { .. }
            | Error::InvalidGroupId { .. }
            | Error::InvalidMessageId { .. } => ErrorKind::Invalid,
            Error::NotFound { .. } | Error::ParentNotFound { .. } => ErrorKind::NotFound,
            Error::NotARequest { .. }
            | Error::NotAddressee { .. }
            | Error::TaskMismatch { .. }
            | Error::ArchiveWithoutReply { .. }
            | Error::IdCollision { .. }
            | Error::QuarantinedInbox { .. }
            | Error::IdTaken { .. }
            | Error::ServerOnly { .. } => ErrorKind::Refused,
            Error::Corrupt(_) => ErrorKind::Corrupt,
            Error::Unsupported(_) => ErrorKind::Unsupported,
            Error::OutcomeUnknown { .. } | Error::PartlySwept { .. } | Error::PartlySent { .. } => {
                ErrorKind::OutcomeUnknown
            }
            Error::Store(e) => e.kind(),
            Error::Backend { source, .. } => source.kind(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chipset_store::Classify;

    fn store_unknown() -> chipset_store::Error {
        chipset_store::Error::OutcomeUnknown {
            op: "sync directory",
            path: "mail/inbox/exec".into(),
            source: std::io::Error::other("EIO"),
        }
    }

    /// An unknown outcome names every message that may have been sent, and
    /// only a failure past a commit point asks for a retry.
    #[test]
    fn an_unknown_outcome_names_its_messages_and_asks_for_a_retry() {
        let ids = vec![
            MessageId::new("1-a").unwrap(),
            MessageId::new("2-b").unwrap(),
        ];
        let e = Error::OutcomeUnknown {
            ids: ids.clone(),
            source: store_unknown(),
        };
        // The reason is the source, never repeated in the message, so a
        // printed chain (anyhow's `{:#}`) says it once.
        assert_eq!(e.to_string(), "message `1-a`, `2-b` may have been sent");
        let source = std::error::Error::source(&e).map(ToString::to_string);
        assert_eq!(source, Some(store_unknown().to_string()));
        assert!(e.is_outcome_unknown());
        assert!(matches!(&e, Error::OutcomeUnknown { ids: got, .. } if *got == ids));
        let swept = Error::PartlySwept {
            task: TaskId::new("t1").unwrap(),
            moved: 2,
            source: Box::new(Error::Store(store_unknown())),
        };
        assert!(swept.is_outcome_unknown());
        // A batch that delivered some messages and then was refused on
        // another changed state: never a plain refusal.
        let sent = Error::PartlySent {
            ids: ids.clone(),
            source: Box::new(Error::IdTaken {
                id: MessageId::new("3-c").unwrap(),
                location: crate::Location::Archive,
            }),
        };
        assert!(sent.is_outcome_unknown());
        assert_eq!(
            sent.to_string(),
            "message `1-a`, `2-b` sent, then the batch failed"
        );
        assert!(Error::Store(store_unknown()).is_outcome_unknown());
        let refused = Error::BodyTooLarge { size: 5, cap: 4 };
        assert!(!refused.is_outcome_unknown());
    }
}
