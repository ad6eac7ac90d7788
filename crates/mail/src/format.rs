//! The on-disk contract: the message file, the manifest events and the
//! reply-index marker. Golden files in `tests/it/snapshots/` pin these bytes.

use std::fmt;

use std::path::Path;

use crate::MessageId;
use chipset_store::{AgentId, ReadOutcome, TaskId, Timestamp, Unsupported};
use serde::{Deserialize, Deserializer, Serialize};

/// What a message is for (the seed's `kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
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
    pub(crate) const ALL: [Kind; 3] = [Kind::Request, Kind::Response, Kind::Notify];

    /// Returns the name as written on disk (what `Display` writes).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Request => "request",
            Kind::Response => "response",
            Kind::Notify => "notify",
        }
    }

    /// Parses the on-disk name.
    pub(crate) fn from_name(name: &str) -> Option<Kind> {
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
#[non_exhaustive]
pub enum MailPriority {
    /// Act on it before anything else (health escalations, aborts).
    Urgent,
    /// The default.
    #[default]
    Normal,
    /// Whenever convenient.
    Low,
}

impl MailPriority {
    /// Returns the name as written on disk (what `Display` writes).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            MailPriority::Urgent => "urgent",
            MailPriority::Normal => "normal",
            MailPriority::Low => "low",
        }
    }

    /// Parses the on-disk name.
    pub(crate) fn from_name(name: &str) -> Option<MailPriority> {
        [
            MailPriority::Urgent,
            MailPriority::Normal,
            MailPriority::Low,
        ]
        .into_iter()
        .find(|p| p.as_str() == name)
    }
}

impl fmt::Display for MailPriority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One message, exactly the seed's schema plus the optional `priority`.
///
/// Written as canonical JSON (sorted keys, two-space indent) to
/// `inbox/{to}/{id}.json`. Readers accept files written by other programs per
/// the seed: keys in any order; a missing or `null` `round` reads as no round,
/// and any integer from 0 to 2^53 (what a JSON writer in any
/// language can produce exactly) is a round; a missing, `null` or empty
/// `in_reply_to` reads as none, a missing `priority` as normal, and unknown
/// fields are ignored (chipset never rewrites a message file: it only moves
/// it, so whatever else a file holds stays in it byte for byte).
/// Every field that becomes a path (ids, agents, task) is validated on read;
/// a file that fails is corrupt, never skipped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// The id (`{unix-ms}-{uuid-v4}` when written by chipset).
    pub id: MessageId,
    /// The sender.
    pub from: AgentId,
    /// The addressee.
    pub to: AgentId,
    pub(crate) phase: TaskId,
    /// The round within the task, or `None` when the message has no round
    /// (`"round": null`, or no `round` field).
    #[serde(default, deserialize_with = "round_or_null")]
    pub round: Option<u64>,
    /// The kind.
    pub kind: Kind,
    /// The kebab-case subject.
    pub subject: String,
    /// The body.
    pub body: String,
    /// The `expects_reply` field as written (see [`Message::needs_reply`]).
    pub expects_reply: bool,
    /// The message this one replies to.
    #[serde(default, deserialize_with = "empty_as_none")]
    pub in_reply_to: Option<MessageId>,
    /// When it was sent.
    pub created_at: Timestamp,
    /// The priority (normal when the file has none).
    #[serde(default)]
    pub priority: MailPriority,
    /// The format a foreign writer declares (`"schema": "message.v1"`, as
    /// nubos-pilot names its schema); chipset writes none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    // A boxed str, not a String: a message stays small enough to sit
    // unboxed in the enums that carry one.
    pub(crate) schema: Option<Box<str>>,
    /// The group this message is one copy of (an extension the seed's
    /// readers ignore; absent for a message to one agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) group: Option<Box<crate::group::Group>>,
}

/// The message format this version reads: nubos-pilot's name for the seed's schema.
pub(crate) const MESSAGE_SCHEMA: &str = "message.v1";

/// Parses a message file's bytes. A file that is a JSON object but holds a
/// value this version does not know (a `kind` other than request, response
/// and notify, a `priority` other than urgent, normal and low, a `schema`
/// other than `message.v1`) is [`ReadOutcome::Unsupported`], not corrupt:
/// it is what it claims to be, written by a newer or other program.
pub(crate) fn parse_message(path: &Path, bytes: &[u8]) -> ReadOutcome<Message> {
    /// Only what tells an unknown value from a broken file.
    #[derive(Deserialize)]
    struct Probe {
        kind: Option<serde_json::Value>,
        priority: Option<serde_json::Value>,
        schema: Option<serde_json::Value>,
    }
    let unsupported = |what: String| ReadOutcome::Unsupported(Unsupported::new(path, what));
    match ReadOutcome::<Message>::from_json(path, bytes) {
        ReadOutcome::Value(m) => match &m.schema {
            Some(schema) if &**schema != MESSAGE_SCHEMA => {
                unsupported(format!("message schema `{schema}`"))
            }
            _ => ReadOutcome::Value(m),
        },
        ReadOutcome::Corrupt(c) => {
            if let Some(foreign) = crate::foreign::foreign_task(path, bytes) {
                return foreign;
            }
            // Only a well-formed object is a candidate; anything else stays corrupt.
            let Ok(probe) = serde_json::from_slice::<Probe>(bytes) else {
                return ReadOutcome::Corrupt(c);
            };
            let string = |v: &Option<serde_json::Value>| {
                v.as_ref().and_then(|v| v.as_str()).map(str::to_owned)
            };
            if let Some(schema) = string(&probe.schema)
                && schema != MESSAGE_SCHEMA
            {
                return unsupported(format!("message schema `{schema}`"));
            }
            if let Some(kind) = string(&probe.kind)
                && Kind::from_name(&kind).is_none()
            {
                return unsupported(format!("message kind `{kind}`"));
            }
            if let Some(priority) = string(&probe.priority)
                && MailPriority::from_name(&priority).is_none()
            {
                return unsupported(format!("message priority `{priority}`"));
            }
            ReadOutcome::Corrupt(c)
        }
        other => other,
    }
}

/// The largest round accepted: 2^53, the largest integer every JSON writer
/// (JavaScript's numbers included) writes exactly.
pub(crate) const MAX_ROUND: u64 = 1 << 53;

fn round_or_null<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match Option::<u64>::deserialize(d)? {
        Some(r) if r > MAX_ROUND => Err(serde::de::Error::custom(format!(
            "round {r} is over the largest round, 2^53"
        ))),
        round => Ok(round),
    }
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
    /// Whether mail can address `agent`: the seed's message schema allows
    /// only ASCII letters, digits, `_` and `-` in `from` and `to`
    /// (`^[a-zA-Z0-9_-]+$`), narrower than an [`AgentId`]. A message
    /// from or to any other name is refused on send
    /// ([`Error::InvalidAgentName`](crate::Error::InvalidAgentName)); one
    /// already on disk is read.
    ///
    /// ```
    /// use chipset_mail::Message;
    /// use chipset_store::AgentId;
    /// assert!(Message::can_address(&"polecat-alpha".parse::<AgentId>()?));
    /// assert!(!Message::can_address(&"Bob.Smith".parse::<AgentId>()?));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn can_address(agent: &AgentId) -> bool {
        agent
            .as_str()
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    }

    /// Returns true when `other` is this message sent again: every field the
    /// sender chose is equal (id, from, to, task, round, kind, subject, body,
    /// `expects_reply`, `in_reply_to`, priority, group). `created_at` is not
    /// compared (a retry is stamped anew), nor the declared `schema` (a
    /// format label, not content). This is what "the same content" means for
    /// a retry with [`NewMessage::with_id`](crate::NewMessage::with_id).
    pub(crate) fn same_content(&self, other: &Message) -> bool {
        self.id == other.id
            && self.from == other.from
            && self.to == other.to
            && self.phase == other.phase
            && self.round == other.round
            && self.kind == other.kind
            && self.subject == other.subject
            && self.body == other.body
            && self.expects_reply == other.expects_reply
            && self.in_reply_to == other.in_reply_to
            && self.priority == other.priority
            && self.group == other.group
    }

    /// Returns the task the message belongs to (the seed calls it `phase`).
    pub fn task(&self) -> &TaskId {
        &self.phase
    }

    /// Returns true when `unsupported` is a message file whose phase no
    /// [`TaskId`] can be (another seed program's: nubos-pilot takes any
    /// non-empty phase, such as `plan/phase-1`): chipset cannot read it,
    /// and no task chipset can name is its task, so the commit gate leaves
    /// it out. Any other unreadable message file closes every gate.
    pub fn foreign_task(unsupported: &Unsupported) -> bool {
        let what = &unsupported.what;
        what.starts_with("message phase `") && what.ends_with(crate::foreign::FOREIGN_TASK)
    }

    /// Returns true when the message holds up its task until answered: it
    /// says it expects a reply, or it is a request. (Mail writes requests
    /// with `expects_reply: true`; a file from elsewhere that disagrees with
    /// itself is taken the cautious way.)
    pub fn needs_reply(&self) -> bool {
        self.expects_reply || self.kind == Kind::Request
    }

    /// Returns the group this message is one copy of, if any.
    pub fn group(&self) -> Option<&crate::group::Group> {
        self.group.as_deref()
    }
}

/// A record of `manifest.jsonl`, the append-only audit log.
///
/// One canonical JSON line each, tagged by `event`. Sending appends `sent`;
/// archiving appends `archived`; a sweep appends `task-swept`; the doctor
/// appends `orphaned` and, for messages it finds without one, a `sent` (and
/// for messages in `archive/`, an `archived`) with `reconciled: true`.
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
        /// The round (`null` for none).
        round: Option<u64>,
        /// The kind.
        kind: Kind,
        /// The subject.
        subject: String,
        /// The message it replies to.
        in_reply_to: Option<MessageId>,
        /// The priority.
        priority: MailPriority,
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
        /// When (for a reconciled event, when the doctor appended it).
        at: Timestamp,
        /// True when the doctor appended it for a message found in
        /// `archive/` without one.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        reconciled: bool,
    },
    /// [`Mail::sweep_task_on_commit`](crate::Mail::sweep_task_on_commit) ran to the end.
    TaskSwept {
        /// The task.
        task: TaskId,
        /// How many messages this run moved into `archive/by-task/{task}/`.
        count: usize,
        /// How many messages `archive/by-task/{task}/` holds after the run.
        total: usize,
        /// When (for a reconciled event, when the doctor appended it).
        at: Timestamp,
        /// True when the doctor appended it for a by-task folder found
        /// without one (then `count` is 0 and `total` what it found).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        reconciled: bool,
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
    /// A whole record of another shape, as it is: written by another
    /// implementation of the seed (nubos-pilot logs its own events), or by
    /// a newer version. [`Mail::read_manifest`](crate::Mail::read_manifest)
    /// returns it; this crate never writes one.
    #[serde(skip)]
    Foreign(serde_json::Value),
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

/// Checks that `agent` is a name the seed's message schema accepts in `from`
/// and `to`: ASCII letters, digits, `_` and `-` only (`^[a-zA-Z0-9_-]+$`).
///
/// Other programs that follow the seed skip or refuse a message whose
/// names fall outside this, so [`Mail::send`](crate::Mail::send) refuses to
/// write one; reading accepts any valid [`AgentId`] already on disk.
///
/// # Errors
///
/// [`Error::InvalidAgentName`](crate::Error::InvalidAgentName).
pub(crate) fn validate_agent_name(field: &'static str, agent: &AgentId) -> crate::Result<()> {
    if Message::can_address(agent) {
        Ok(())
    } else {
        Err(crate::Error::InvalidAgentName {
            field,
            agent: agent.clone(),
        })
    }
}

/// The longest subject accepted, in bytes.
pub(crate) const MAX_SUBJECT_LEN: usize = 128;

/// Checks that `subject` is kebab-case: lower-case ASCII letters and digits in
/// words joined by single hyphens, at most [`MAX_SUBJECT_LEN`] bytes
/// (`dead-code`, `missing-test`, `health-escalation`).
///
/// # Errors
///
/// [`Error::InvalidSubject`](crate::Error::InvalidSubject) naming the broken rule.
pub(crate) fn validate_subject(subject: &str) -> crate::Result<()> {
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
        Some(rule) => Err(crate::Error::InvalidSubject {
            subject: subject.to_owned(),
            rule,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A priority's name is the one serde writes, it displays as that name,
    /// and the name parses back; an unknown name does not.
    #[test]
    fn a_priority_is_named_as_written_and_parses_back() {
        for (p, name) in [
            (MailPriority::Urgent, "urgent"),
            (MailPriority::Normal, "normal"),
            (MailPriority::Low, "low"),
        ] {
            assert_eq!(p.as_str(), name);
            assert_eq!(p.to_string(), name);
            assert_eq!(serde_json::to_value(p).unwrap(), name);
            assert_eq!(MailPriority::from_name(name), Some(p));
        }
        assert_eq!(MailPriority::from_name("high"), None);
    }

    /// A broken message that names this version's schema is corrupt; one
    /// naming another schema is unsupported (a later version may read it).
    #[test]
    fn a_broken_message_is_unsupported_only_under_another_schema() {
        let path = Path::new("mail/inbox/exec/1-a.json");
        let ours = format!(r#"{{"schema": "{MESSAGE_SCHEMA}", "id": 7}}"#);
        assert!(parse_message(path, ours.as_bytes()).is_corrupt());
        let theirs = br#"{"schema": "message.v9", "id": 7}"#;
        assert!(matches!(
            parse_message(path, theirs),
            ReadOutcome::Unsupported(u) if u.what == "message schema `message.v9`"
        ));
    }

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
        assert_eq!(m.in_reply_to, None);
        assert_eq!(m.round, None);
        assert_eq!(m.priority, MailPriority::Normal);
        assert_eq!(m.created_at.to_string(), "2026-05-08T08:00:00.000Z");
    }

    #[track_caller]
    fn round_of(value: &str) -> Result<Option<u64>, String> {
        let json = format!(
            r#"{{"created_at":"2026-05-08T10:00:00Z","round":{value},"id":"1-a","from":"a",
            "to":"b","phase":"t","kind":"notify","subject":"x","body":"","expects_reply":false}}"#
        );
        serde_json::from_str::<Message>(&json)
            .map(|m| m.round)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn rounds_are_null_or_integers_up_to_2_pow_53() {
        assert_eq!(round_of("null"), Ok(None));
        assert_eq!(round_of("0"), Ok(Some(0)));
        assert_eq!(round_of("4294967296"), Ok(Some(1 << 32)));
        assert_eq!(round_of("9007199254740992"), Ok(Some(MAX_ROUND)));
        assert!(round_of("9007199254740993").unwrap_err().contains("2^53"));
        assert!(round_of("-1").is_err());
        assert!(round_of("1.5").is_err());
        assert!(round_of("\"2\"").is_err());
    }

    #[test]
    fn agent_names_follow_the_seed_schema() {
        for good in ["np-critic", "np_executor", "A1", "-", "_x"] {
            assert!(
                validate_agent_name("from", &AgentId::new(good).unwrap()).is_ok(),
                "{good}"
            );
        }
        for bad in ["np.critic", "np executor", "ümlaut", "a+b", "x@y"] {
            assert!(
                matches!(
                    validate_agent_name("to", &AgentId::new(bad).unwrap()),
                    Err(crate::Error::InvalidAgentName { field: "to", .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn path_fields_are_validated_on_read() {
        let json = r#"{"id":"1-a","from":"a","to":"../b","phase":"t","kind":"notify",
            "subject":"x","body":"","expects_reply":false,"in_reply_to":null,
            "created_at":"2026-05-08T10:00:00Z"}"#;
        assert!(serde_json::from_str::<Message>(json).is_err());
    }

    #[track_caller]
    fn outcome(json: &str) -> &'static str {
        match parse_message(Path::new("m.json"), json.as_bytes()) {
            ReadOutcome::Value(_) => "value",
            ReadOutcome::Corrupt(_) => "corrupt",
            ReadOutcome::Unsupported(_) => "unsupported",
            ReadOutcome::Missing => "missing",
        }
    }

    #[test]
    fn unknown_values_are_unsupported_and_broken_files_corrupt() {
        let with = |extra: &str| {
            format!(
                r#"{{"id":"1-a","from":"a","to":"b","phase":"t","subject":"x","body":"",
                "expects_reply":false,"created_at":"2026-05-08T10:00:00Z",{extra}}}"#
            )
        };
        assert_eq!(outcome(&with(r#""kind":"notify""#)), "value");
        assert_eq!(
            outcome(&with(r#""kind":"notify","schema":"message.v1""#)),
            "value"
        );
        assert_eq!(outcome(&with(r#""kind":"question""#)), "unsupported");
        assert_eq!(
            outcome(&with(r#""kind":"notify","priority":"critical""#)),
            "unsupported"
        );
        assert_eq!(
            outcome(&with(r#""kind":"notify","schema":"message.v2""#)),
            "unsupported"
        );
        // A new kind in a file that is broken anyway is still unsupported
        // (the kind decides what the rest should be).
        assert_eq!(
            outcome(&with(r#""kind":"question","round":"x""#)),
            "unsupported"
        );
        assert_eq!(outcome(&with(r#""kind":7"#)), "corrupt");
        assert_eq!(outcome(&with(r#""kind":"notify","round":"x""#)), "corrupt");
        assert_eq!(outcome(r#"["kind","question"]"#), "corrupt");
        assert_eq!(outcome("{"), "corrupt");
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
        assert!(
            MailPriority::Urgent < MailPriority::Normal && MailPriority::Normal < MailPriority::Low
        );
    }
}
