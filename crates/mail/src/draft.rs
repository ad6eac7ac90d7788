//! Drafts (what a sender asks for), the configuration,
//! and the pure checks a draft must pass before anything touches the disk.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::MessageId;
use chipset_store::{AgentId, TaskId, Timestamp};

use crate::error::{Error, Result};
use crate::format::{
    Kind, MAX_ROUND, MailPriority, Message, validate_agent_name, validate_subject,
};
use crate::group::ExpectsReply;

/// The default body limit: 256 KiB.
pub(crate) const DEFAULT_MAX_BODY: usize = 256 * 1024;

/// How a [`Mail`](crate::Mail) handle behaves. Built by the embedding application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MailConfig {
    /// The largest body accepted, in bytes (default 256 KiB, as the seed's schema allows).
    pub max_body: usize,
    /// The recipient registry: when set, sending to an agent not in it is
    /// refused with [`Error::UnknownRecipient`], and the doctor treats
    /// inbox messages of agents not in it as orphans. `None` (the default)
    /// accepts any valid agent id.
    pub recipients: Option<BTreeSet<AgentId>>,
    /// When set, the doctor also treats inbox messages older than this as
    /// orphans (abandoned tasks). `None` by default: orphaning a request
    /// removes it from [`Mail::pending_replies`](crate::Mail::pending_replies),
    /// so only the embedding application can know a safe age.
    pub orphan_after: Option<Duration>,
    /// How young a message must be for the doctor to leave a missing `sent`
    /// event alone, because its sender may still be about to append it
    /// (default 10 s).
    pub in_flight_grace: Duration,
}

impl Default for MailConfig {
    fn default() -> Self {
        MailConfig {
            max_body: DEFAULT_MAX_BODY,
            recipients: None,
            orphan_after: None,
            in_flight_grace: Duration::from_secs(10),
        }
    }
}

/// A message to send: everything but the id and time, which
/// [`Mail::send`](crate::Mail::send) assigns. `To` is who it is for: one
/// agent ([`AgentId`], the default, sent by [`Mail::send`](crate::Mail::send)),
/// or a group (`Vec<AgentId>`, sent by [`Mail::send_group`](crate::Mail::send_group),
/// one copy per recipient).
///
/// ```
/// use chipset_mail::{NewMessage, Mail, MailPriority};
/// use chipset_store::StateDir;
///
/// let draft = NewMessage::request("np-critic".parse()?, "np-executor".parse()?, "M005-S007-T0002".parse()?,
///     "dead-code", "did you intend to delete FoobarService?")
///     .with_round(2)
///     .with_priority(MailPriority::Urgent);
/// let tmp = tempfile::tempdir()?;
/// let sent = Mail::new(StateDir::open(tmp.path())?).send(&draft)?;
/// assert!(sent.expects_reply);
/// assert_eq!((sent.round, sent.priority), (Some(2), MailPriority::Urgent));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// The recipient's type picks the door: a group's draft does not compile
/// with [`Mail::send`](crate::Mail::send) (nor one agent's with
/// [`Mail::send_group`](crate::Mail::send_group)), and only one agent's
/// draft has [`NewMessage::response`]: a response answers one message.
///
/// ```compile_fail,E0308
/// use chipset_mail::{Mail, NewMessage};
/// use chipset_store::{AgentId, StateDir, TaskId};
///
/// let tmp = tempfile::tempdir()?;
/// let mail = Mail::new(StateDir::open(tmp.path())?);
/// let team = vec![AgentId::new("ann")?, AgentId::new("bob")?];
/// let draft = NewMessage::notify("lead".parse()?, team, TaskId::new("t1")?, "shipped", "v1.2");
/// mail.send(&draft)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMessage<To = AgentId> {
    pub(crate) kind: Kind,
    pub(crate) from: AgentId,
    pub(crate) to: To,
    pub(crate) task: Option<TaskId>,
    pub(crate) subject: String,
    pub(crate) body: String,
    pub(crate) round: Option<u64>,
    pub(crate) in_reply_to: Option<MessageId>,
    pub(crate) priority: MailPriority,
    pub(crate) id: Option<MessageId>,
    /// The group the message is one copy of.
    pub(crate) group: Option<crate::group::Group>,
    /// True when `id` was just generated (a group's copy on a first send):
    /// no earlier delivery can exist, so none is looked for.
    pub(crate) fresh: bool,
    /// For a request to a group, when it stops holding up its task.
    pub(crate) expects: ExpectsReply,
}

impl<To> NewMessage<To> {
    pub(crate) fn new(
        kind: Kind,
        from: AgentId,
        to: To,
        task: Option<TaskId>,
        subject: impl Into<String>,
        body: impl Into<String>,
    ) -> Self {
        NewMessage {
            kind,
            from,
            to,
            task,
            subject: subject.into(),
            body: body.into(),
            round: None,
            in_reply_to: None,
            priority: MailPriority::Normal,
            id: None,
            group: None,
            fresh: false,
            expects: ExpectsReply::All,
        }
    }

    /// Returns a request: it expects a reply and holds up `task` until
    /// answered. To a group, every recipient must answer its copy, unless
    /// [`NewMessage::answered_by_any`] says one answer is enough.
    pub fn request(
        from: AgentId,
        to: To,
        task: TaskId,
        subject: impl Into<String>,
        body: impl Into<String>,
    ) -> Self {
        Self::new(Kind::Request, from, to, Some(task), subject, body)
    }

    /// Returns a notification: it expects no reply.
    pub fn notify(
        from: AgentId,
        to: To,
        task: TaskId,
        subject: impl Into<String>,
        body: impl Into<String>,
    ) -> Self {
        Self::new(Kind::Notify, from, to, Some(task), subject, body)
    }

    /// Returns the draft with its round set. Without one, the message has
    /// no round (`"round": null`, as the seed's other writers put it).
    /// Sending refuses a round over 2^53, the largest integer every JSON
    /// writer writes exactly.
    #[must_use]
    pub fn with_round(mut self, round: u64) -> Self {
        self.round = Some(round);
        self
    }

    /// Returns the draft with its priority set (default normal).
    #[must_use]
    pub fn with_priority(mut self, priority: MailPriority) -> Self {
        self.priority = priority;
        self
    }

    /// Sends under a caller-chosen id instead of a fresh one, which makes the
    /// send safe to retry (after a failure, [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown)
    /// included, or the caller's own crash): when a message with this id
    /// already exists anywhere (an inbox, the archive, a by-task archive or
    /// the orphans) with the same content (every field but `created_at`
    /// and the declared `schema`), the send returns that first delivery as
    /// success and writes no second copy; with other content it is refused
    /// with [`Error::IdTaken`](crate::Error::IdTaken) and writes nothing.
    /// Choose the id with [`SortableId::generate`](chipset_store::SortableId::generate)
    /// and persist it before sending, so inboxes stay in time order. An id
    /// not in the seed's form ([`MessageId::is_seed_form`]) is refused with
    /// [`Error::InvalidMessageId`](crate::Error::InvalidMessageId)
    /// ([`Error::InvalidGroupId`](crate::Error::InvalidGroupId) for a group).
    ///
    /// For a group it is the group id: each copy's id is derived from it
    /// (see [`Mail::send_group`](crate::Mail::send_group)), which makes the
    /// whole group safe to retry.
    #[must_use]
    pub fn with_id(mut self, id: MessageId) -> Self {
        self.id = Some(id);
        self
    }
}

impl NewMessage {
    /// Returns a response to `request`. Its task is the request's unless
    /// [`NewMessage::with_task`] names one, which must then match. Sending it
    /// checks that `from` is the request's addressee and archives the request.
    pub fn response(
        from: AgentId,
        to: AgentId,
        request: MessageId,
        subject: impl Into<String>,
        body: impl Into<String>,
    ) -> Self {
        let mut d = Self::new(Kind::Response, from, to, None, subject, body);
        d.in_reply_to = Some(request);
        d
    }

    /// Returns the draft with its task set. For a response, the task must be
    /// the request's (it is checked when sent).
    #[must_use]
    pub fn with_task(mut self, task: TaskId) -> Self {
        self.task = Some(task);
        self
    }

    /// Returns the draft threaded under `parent` (for a request or a
    /// notification; a response names its request in [`NewMessage::response`]).
    /// The parent must exist and belong to the same task.
    #[must_use]
    pub fn replying_to(mut self, parent: MessageId) -> Self {
        self.in_reply_to = Some(parent);
        self
    }

    /// Returns what the message will say in `expects_reply`: true for requests only.
    pub(crate) fn expects_reply(&self) -> bool {
        self.kind == Kind::Request
    }
}

/// Checks what can be checked without the disk: names, subject, round, body
/// size, recipient.
pub(crate) fn check_draft(draft: &NewMessage, config: &MailConfig) -> Result<()> {
    validate_agent_name("from", &draft.from)?;
    validate_agent_name("to", &draft.to)?;
    if let Some(id) = draft.id.as_ref().filter(|id| !id.is_seed_form()) {
        return Err(Error::InvalidMessageId { id: id.clone() });
    }
    validate_subject(&draft.subject)?;
    if let Some(round) = draft.round
        && round > MAX_ROUND
    {
        return Err(Error::RoundTooLarge { round });
    }
    if draft.body.len() > config.max_body {
        return Err(Error::BodyTooLarge {
            size: draft.body.len(),
            cap: config.max_body,
        });
    }
    if let Some(registry) = &config.recipients
        && !registry.contains(&draft.to)
    {
        return Err(Error::UnknownRecipient {
            agent: draft.to.clone(),
        });
    }
    Ok(())
}

/// Checks a draft against the message it replies to and returns the task
/// the new message belongs to.
pub(crate) fn check_parent(draft: &NewMessage, parent: &Message) -> Result<TaskId> {
    if draft.kind == Kind::Response {
        if !parent.needs_reply() {
            return Err(Error::NotARequest {
                id: parent.id.clone(),
                kind: parent.kind,
            });
        }
        if draft.from != parent.to {
            return Err(Error::NotAddressee {
                request: parent.id.clone(),
                responder: draft.from.clone(),
                addressee: parent.to.clone(),
            });
        }
    }
    match &draft.task {
        Some(task) if *task != parent.phase => Err(Error::TaskMismatch {
            parent: parent.id.clone(),
            parent_task: parent.phase.clone(),
            reply_task: task.clone(),
        }),
        _ => Ok(parent.phase.clone()),
    }
}

/// Builds the message a checked draft becomes.
pub(crate) fn to_message(
    draft: &NewMessage,
    id: MessageId,
    task: TaskId,
    created_at: Timestamp,
) -> Message {
    Message {
        id,
        from: draft.from.clone(),
        to: draft.to.clone(),
        phase: task,
        round: draft.round,
        kind: draft.kind,
        subject: draft.subject.clone(),
        body: draft.body.clone(),
        expects_reply: draft.expects_reply(),
        in_reply_to: draft.in_reply_to.clone(),
        created_at,
        priority: draft.priority,
        schema: None,
        group: draft.group.clone().map(Box::new),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(s: &str) -> AgentId {
        AgentId::new(s).unwrap()
    }

    fn task(s: &str) -> TaskId {
        TaskId::new(s).unwrap()
    }

    fn request() -> Message {
        let d = NewMessage::request(agent("critic"), agent("exec"), task("t1"), "q", "?");
        to_message(
            &d,
            MessageId::new("1-r").unwrap(),
            task("t1"),
            Timestamp::EPOCH,
        )
    }

    /// Each getter returns what the draft was built with.
    #[test]
    fn a_draft_reads_back_what_it_was_built_with() {
        let id = MessageId::new("1795408569000-7a703292-f1d1-4900-b635-8fd9f1df7f88").unwrap();
        let parent = MessageId::new("1795408568000-7a703292-f1d1-4900-b635-8fd9f1df7f88").unwrap();
        let d = NewMessage::request(
            agent("critic"),
            agent("exec"),
            task("t1"),
            "the subject",
            "the body",
        )
        .with_round(7)
        .with_id(id.clone())
        .replying_to(parent.clone())
        .with_priority(MailPriority::Urgent);
        assert_eq!(d.kind, Kind::Request);
        assert_eq!((&d.from, &d.to), (&agent("critic"), &agent("exec")));
        assert_eq!(d.task, Some(task("t1")));
        assert_eq!(
            (d.subject.as_str(), d.body.as_str()),
            ("the subject", "the body")
        );
        assert_eq!(d.round, Some(7));
        assert_eq!(d.id, Some(id.clone()));
        assert_eq!(d.in_reply_to, Some(parent.clone()));
        assert_eq!(d.priority, MailPriority::Urgent);
        assert!(d.expects_reply());
        let sent = to_message(&d, id.clone(), task("t1"), Timestamp::EPOCH);
        assert_eq!(sent.priority, MailPriority::Urgent, "the message keeps it");
        let n = NewMessage::notify(agent("critic"), agent("exec"), task("t1"), "s", "b");
        assert_eq!((n.round, &n.id, &n.in_reply_to), (None, &None, &None));
        assert!(!n.expects_reply());
        let r = NewMessage::response(agent("exec"), agent("critic"), parent.clone(), "re", "b");
        assert_eq!((r.kind, &r.task), (Kind::Response, &None));
        assert_eq!(r.in_reply_to, Some(parent.clone()));
    }

    #[test]
    fn draft_checks() {
        let config = MailConfig {
            max_body: 4,
            recipients: Some([agent("exec")].into()),
            ..MailConfig::default()
        };
        let ok = NewMessage::notify(agent("a"), agent("exec"), task("t"), "fine", "1234");
        assert!(check_draft(&ok, &config).is_ok());
        let long = NewMessage::notify(agent("a"), agent("exec"), task("t"), "fine", "12345");
        assert!(matches!(
            check_draft(&long, &config),
            Err(Error::BodyTooLarge { size: 5, cap: 4 })
        ));
        let stranger = NewMessage::notify(agent("a"), agent("who"), task("t"), "fine", "");
        assert!(matches!(
            check_draft(&stranger, &config),
            Err(Error::UnknownRecipient { .. })
        ));
        let dotted = NewMessage::notify(agent("np.critic"), agent("exec"), task("t"), "fine", "");
        assert!(matches!(
            check_draft(&dotted, &config),
            Err(Error::InvalidAgentName { field: "from", .. })
        ));
        let spaced = NewMessage::notify(agent("a"), agent("np executor"), task("t"), "fine", "");
        assert!(matches!(
            check_draft(&spaced, &config),
            Err(Error::InvalidAgentName { field: "to", .. })
        ));
        let huge = ok.clone().with_round(MAX_ROUND + 1);
        assert!(matches!(
            check_draft(&huge, &config),
            Err(Error::RoundTooLarge { .. })
        ));
        assert!(check_draft(&ok.clone().with_round(MAX_ROUND), &config).is_ok());
        let seed_id = MessageId::new("1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab").unwrap();
        assert!(check_draft(&ok.clone().with_id(seed_id), &config).is_ok());
        for bad in ["garbage", "1730000000123-zzzz", "2026-11-28"] {
            let chosen = ok.clone().with_id(MessageId::new(bad).unwrap());
            assert!(
                matches!(
                    check_draft(&chosen, &config),
                    Err(Error::InvalidMessageId { id }) if id.as_str() == bad
                ),
                "{bad}"
            );
        }
        let subject = NewMessage::notify(agent("a"), agent("exec"), task("t"), "Not Kebab", "");
        assert!(matches!(
            check_draft(&subject, &config),
            Err(Error::InvalidSubject { .. })
        ));
    }

    #[test]
    fn response_checks() {
        let req = request();
        let good = NewMessage::response(agent("exec"), agent("critic"), req.id.clone(), "a", "");
        assert_eq!(check_parent(&good, &req).unwrap(), task("t1"));
        let wrong_responder =
            NewMessage::response(agent("critic"), agent("exec"), req.id.clone(), "a", "");
        assert!(matches!(
            check_parent(&wrong_responder, &req),
            Err(Error::NotAddressee { .. })
        ));
        let wrong_task = good.clone().with_task(task("t2"));
        assert!(matches!(
            check_parent(&wrong_task, &req),
            Err(Error::TaskMismatch { .. })
        ));
        let mut notice = req.clone();
        notice.kind = Kind::Notify;
        notice.expects_reply = false;
        assert!(matches!(
            check_parent(&good, &notice),
            Err(Error::NotARequest { .. })
        ));
        let follow_up = NewMessage::request(agent("critic"), agent("exec"), task("t2"), "q", "")
            .replying_to(req.id.clone());
        assert!(matches!(
            check_parent(&follow_up, &req),
            Err(Error::TaskMismatch { .. })
        ));
    }
}
