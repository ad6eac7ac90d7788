//! The on-disk contract: the message file, the manifest events and the
//! reply-index marker. Golden files in `tests/it/snapshots/` pin these bytes.

use std::fmt;

use chipset_store::{AgentId, MessageId, TaskId, Timestamp};
use serde::{Deserialize, Deserializer, Serialize};

/// What a message is for (the seed's `kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Expects a reply: the receiver must answer (or escalate) before the task may commit.
    Request,
    /// Answers a request (`in_reply_to`); sending it archives the request.
    Response,
    /// Expects no reply; the receiver archives it after reading.
    Notify,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 3] = [Kind::Request, Kind::Response, Kind::Notify];

    /// Returns the name as written on disk.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Request => "request",
            Kind::Response => "response",
            Kind::Notify => "notify",
        }
    }

    /// Parses the on-disk name.
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How urgent a message is (an extension to the seed; absent means normal).
///
/// Orders urgent first: sorting messages by priority ascending puts urgent
/// ones at the front.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    /// Act on it before anything else (health escalations, aborts).
    Urgent,
    /// The default.
    #[default]
    Normal,
    /// Whenever convenient.
    Low,
}

impl Priority {
    /// Returns the name as written on disk.
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Urgent => "urgent",
            Priority::Normal => "normal",
            Priority::Low => "low",
        }
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One message, exactly the seed's schema plus the optional `priority`.
///
/// Written as canonical JSON (sorted keys, two-space indent) to
/// `inbox/{to}/{id}.json`. Readers accept files written by other programs per
/// the seed: a missing `round` reads as 0, a missing or empty `in_reply_to`
/// as none, a missing `priority` as normal, and unknown fields are ignored.
/// Every field that becomes a path (ids, agents, task) is validated on read;
/// a file that fails is corrupt, never skipped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub(crate) id: MessageId,
    pub(crate) from: AgentId,
    pub(crate) to: AgentId,
    pub(crate) phase: TaskId,
    #[serde(default)]
    pub(crate) round: u32,
    pub(crate) kind: Kind,
    pub(crate) subject: String,
    pub(crate) body: String,
    pub(crate) expects_reply: bool,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub(crate) in_reply_to: Option<MessageId>,
    pub(crate) created_at: Timestamp,
    #[serde(default)]
    pub(crate) priority: Priority,
}

fn empty_as_none<'de, D: Deserializer<'de>>(d: D) -> Result<Option<MessageId>, D::Error> {
    let raw = Option::<String>::deserialize(d)?;
    match raw {
        None => Ok(None),
        Some(s) if s.is_empty() => Ok(None),
        Some(s) => MessageId::new(s)
            .map(Some)
            .map_err(serde::de::Error::custom),
    }
}

impl Message {
    /// Returns the id (`{unix-ms}-{uuid-v4}` when written by chipset).
    pub fn id(&self) -> &MessageId {
        &self.id
    }

    /// Returns the sender.
    pub fn from(&self) -> &AgentId {
        &self.from
    }

    /// Returns the addressee.
    pub fn to(&self) -> &AgentId {
        &self.to
    }

    /// Returns the task the message belongs to (the seed calls it `phase`).
    pub fn task(&self) -> &TaskId {
        &self.phase
    }

    /// Returns the round within the task.
    pub fn round(&self) -> u32 {
        self.round
    }

    /// Returns the kind.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Returns the kebab-case subject.
    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// Returns the body.
    pub fn body(&self) -> &str {
        &self.body
    }

    /// Returns the `expects_reply` field as written.
    pub fn expects_reply(&self) -> bool {
        self.expects_reply
    }

    /// Returns true when the message holds up its task until answered: it
    /// says it expects a reply, or it is a request. (Mail writes requests
    /// with `expects_reply: true`; a file from elsewhere that disagrees with
    /// itself is taken the cautious way.)
    pub fn needs_reply(&self) -> bool {
        self.expects_reply || self.kind == Kind::Request
    }

    /// Returns the message this one replies to.
    pub fn in_reply_to(&self) -> Option<&MessageId> {
        self.in_reply_to.as_ref()
    }

    /// Returns when it was sent.
    pub fn created_at(&self) -> Timestamp {
        self.created_at
    }

    /// Returns the priority (normal when the file has none).
    pub fn priority(&self) -> Priority {
        self.priority
    }
}

/// A record of `manifest.jsonl`, the append-only audit log.
///
/// One canonical JSON line each, tagged by `event`. Sending appends `sent`;
/// archiving appends `archived`; a sweep appends `task-swept`; the doctor
/// appends `orphaned` and, for messages it finds without one, a `sent` with
/// `reconciled: true`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ManifestEvent {
    /// A message was published into an inbox.
    Sent {
        /// The message id.
        id: MessageId,
        /// The sender.
        from: AgentId,
        /// The addressee (its inbox).
        to: AgentId,
        /// The task.
        task: TaskId,
        /// The round.
        round: u32,
        /// The kind.
        kind: Kind,
        /// The subject.
        subject: String,
        /// The message it replies to.
        in_reply_to: Option<MessageId>,
        /// The priority.
        priority: Priority,
        /// When it was sent (the message's `created_at`).
        at: Timestamp,
        /// True when the doctor appended it for a message found without one.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        reconciled: bool,
    },
    /// A message left an inbox for `archive/`.
    Archived {
        /// The message id.
        id: MessageId,
        /// The inbox it left.
        agent: AgentId,
        /// The task.
        task: TaskId,
        /// The response whose sending archived it, if that is how.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply: Option<MessageId>,
        /// When.
        at: Timestamp,
    },
    /// [`Mail::sweep_task_on_commit`](crate::Mail::sweep_task_on_commit) ran to the end.
    TaskSwept {
        /// The task.
        task: TaskId,
        /// How many messages this run moved into `archive/by-task/{task}/`.
        count: usize,
        /// How many messages `archive/by-task/{task}/` holds after the run.
        total: usize,
        /// When.
        at: Timestamp,
    },
    /// The doctor moved an orphaned inbox message to `archive/orphan/`.
    Orphaned {
        /// The message id.
        id: MessageId,
        /// The inbox it left.
        agent: AgentId,
        /// The task.
        task: TaskId,
        /// Why it was an orphan.
        reason: crate::OrphanReason,
        /// When.
        at: Timestamp,
    },
}

impl ManifestEvent {
    pub(crate) fn sent(message: &Message, reconciled: bool) -> Self {
        ManifestEvent::Sent {
            id: message.id.clone(),
            from: message.from.clone(),
            to: message.to.clone(),
            task: message.phase.clone(),
            round: message.round,
            kind: message.kind,
            subject: message.subject.clone(),
            in_reply_to: message.in_reply_to.clone(),
            priority: message.priority,
            at: message.created_at,
            reconciled,
        }
    }

    /// Returns the event's name as written (`sent`, `archived`, `task-swept`, `orphaned`).
    pub fn name(&self) -> &'static str {
        match self {
            ManifestEvent::Sent { .. } => "sent",
            ManifestEvent::Archived { .. } => "archived",
            ManifestEvent::TaskSwept { .. } => "task-swept",
            ManifestEvent::Orphaned { .. } => "orphaned",
        }
    }

    /// Returns the message id for per-message events.
    pub fn message_id(&self) -> Option<&MessageId> {
        match self {
            ManifestEvent::Sent { id, .. }
            | ManifestEvent::Archived { id, .. }
            | ManifestEvent::Orphaned { id, .. } => Some(id),
            ManifestEvent::TaskSwept { .. } => None,
        }
    }
}

/// The contents of a reply-index marker, `replies/{parent}/{kind}-{id}.json`.
/// Only its name is load-bearing; the contents help people and the doctor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ReplyMarker {
    pub(crate) id: MessageId,
    pub(crate) kind: Kind,
    pub(crate) to: AgentId,
    pub(crate) parent: MessageId,
}

/// The longest subject accepted, in bytes.
pub const MAX_SUBJECT_LEN: usize = 128;

/// Checks that `subject` is kebab-case: lower-case ASCII letters and digits in
/// words joined by single hyphens, at most [`MAX_SUBJECT_LEN`] bytes
/// (`dead-code`, `missing-test`, `health-escalation`).
///
/// # Errors
///
/// [`MailError::InvalidSubject`](crate::MailError::InvalidSubject) naming the broken rule.
pub fn validate_subject(subject: &str) -> crate::Result<()> {
    let rule = if subject.is_empty() {
        Some("must not be empty")
    } else if subject.len() > MAX_SUBJECT_LEN {
        Some("must be at most 128 bytes")
    } else if !subject
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        Some("must be kebab-case: lower-case letters, digits and hyphens")
    } else if subject.starts_with('-') || subject.ends_with('-') || subject.contains("--") {
        Some("must be kebab-case: words joined by single hyphens")
    } else {
        None
    };
    match rule {
        Some(rule) => Err(crate::MailError::InvalidSubject {
            subject: subject.to_owned(),
            rule,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(subject: &str, ok: bool) {
        assert_eq!(validate_subject(subject).is_ok(), ok, "{subject:?}");
    }

    #[test]
    fn subjects() {
        for good in [
            "style",
            "dead-code",
            "missing-test",
            "weak-assertion",
            "unmet-criterion",
            "scope-creep",
            "health-escalation",
            "r2-follow-up",
            &"a".repeat(128),
        ] {
            check(good, true);
        }
        for bad in [
            "",
            "Dead-Code",
            "dead_code",
            "dead code",
            "-dead",
            "dead-",
            "dead--code",
            "ümlaut",
            "../x",
            &"a".repeat(129),
        ] {
            check(bad, false);
        }
    }

    #[test]
    fn foreign_fields_are_lenient_where_the_seed_is_loose() {
        let json = r#"{"id":"1-a","from":"a","to":"b","phase":"t","kind":"notify",
            "subject":"x","body":"","expects_reply":false,"in_reply_to":"",
            "created_at":"2026-05-08T10:00:00+02:00","extra":1}"#;
        let m: Message = serde_json::from_str(json).unwrap();
        assert_eq!(m.in_reply_to(), None);
        assert_eq!(m.round(), 0);
        assert_eq!(m.priority(), Priority::Normal);
        assert_eq!(m.created_at().to_string(), "2026-05-08T08:00:00.000Z");
    }

    #[test]
    fn path_fields_are_validated_on_read() {
        let json = r#"{"id":"1-a","from":"a","to":"../b","phase":"t","kind":"notify",
            "subject":"x","body":"","expects_reply":false,"in_reply_to":null,
            "created_at":"2026-05-08T10:00:00Z"}"#;
        assert!(serde_json::from_str::<Message>(json).is_err());
    }

    #[test]
    fn needs_reply_is_cautious() {
        let json = r#"{"id":"1-a","from":"a","to":"b","phase":"t","kind":"request",
            "subject":"x","body":"","expects_reply":false,"in_reply_to":null,
            "created_at":"2026-05-08T10:00:00Z"}"#;
        let m: Message = serde_json::from_str(json).unwrap();
        assert!(m.needs_reply());
    }

    #[test]
    fn priority_orders_urgent_first() {
        assert!(Priority::Urgent < Priority::Normal && Priority::Normal < Priority::Low);
    }
}
