//! The operations behind the tools: each one a synchronous call (or a few)
//! into the libraries, acting as the server's agent, returning a [`Reply`]
//! or the [`Failure`] the command line would print.
//!
//! These run on tokio's blocking pool: every library call is file I/O.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chipset_bus::{AckOutcome, Bus, NewEvent, Pending, Problem, Published, Wake};
use chipset_failure::{Failure, plural};
use chipset_hook::{Assignment, HookRead, Hooks, Pickup};
use chipset_loop::{Attention, Brief, REMINDER_AGENT_FIELD};
use chipset_mail::{ArchiveOutcome, Draft, InboxFilter, Mail, Message};
use chipset_nudge::{
    Delivery, KindRegistry, NewReminder, Nudge, NudgeType, Nudges, Opened, Received, Reminder,
    ReminderFilter, ReminderKey, Reminders,
};
use chipset_store::{AgentId, StateDir};
use serde::Serialize;
use serde_json::{Value, json};

use crate::params::{
    BusAck, BusPublish, BusWait, MailArchive, MailInbox, MailKind, MailPending, MailSend,
    MailThread, NudgeRespond, NudgeSend, RemindList, RemindOpen, RemindResolve, RemindSnooze, Wait,
};

/// The tenant reminders belong to, as on the command line (one state root
/// is one organisation).
pub(crate) const TENANT: &str = "default";

/// The longest single wait handed to the bus waiter, so a cancelled call is
/// noticed soon.
const WAIT_SLICE: Duration = Duration::from_millis(250);

/// The longest `bus_wait` a caller may ask for, in seconds.
pub(crate) const MAX_WAIT_SECS: f64 = 3600.0;

/// What a tool returns: a short text rendering, the structured result, and
/// an optional failure that still comes with a result (a listing that met
/// unreadable files).
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) text: String,
    pub(crate) json: Value,
    pub(crate) failure: Option<Failure>,
}

impl Reply {
    fn new(text: impl Into<String>, json: Value) -> Self {
        Reply {
            text: text.into(),
            json,
            failure: None,
        }
    }

    fn noted(mut self, note: Option<String>) -> Self {
        if let Some(note) = note {
            self.text.push_str(&format!("note: {note}\n"));
            self.json["note"] = Value::String(note);
        }
        self
    }
}

/// A tool's outcome.
pub(crate) type Outcome = Result<Reply, Failure>;

/// Who the tools act as, and where.
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    pub(crate) state: StateDir,
    pub(crate) agent: AgentId,
}

fn to_json<T: Serialize + ?Sized>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn id<T: std::str::FromStr<Err = chipset_store::Error>>(text: &str) -> Result<T, Failure> {
    text.parse().map_err(Failure::from)
}

// --- hook ---

pub(crate) fn hook_pickup(ctx: &Ctx) -> Outcome {
    let pickup = Hooks::new(ctx.state.clone()).pickup(&ctx.agent)?;
    let (outcome, assignment) = match &pickup {
        Pickup::Idle => ("idle", None),
        Pickup::Started(a) => ("started", Some(a)),
        Pickup::Resumed(a) => ("resumed", Some(a)),
        Pickup::AwaitingClear(a) => ("awaiting_clear", Some(a)),
    };
    let text = match assignment {
        None => format!("no work for {}\n", ctx.agent),
        Some(a) => format!(
            "{outcome} {} ({}), generation {}\n",
            a.bead_id(),
            a.work().title(),
            a.generation()
        ),
    };
    Ok(Reply::new(
        text,
        json!({"outcome": outcome, "assignment": assignment.map(to_json)}),
    ))
}

fn held(hooks: &Hooks, agent: &AgentId, op: &str) -> Result<Assignment, Failure> {
    hooks
        .current(agent)?
        .ok_or_else(|| Failure::hook_empty(agent, op))
}

fn hook_changed(hook: &chipset_hook::Hook) -> Reply {
    let bead = hook
        .work()
        .map_or_else(String::new, |w| format!(" {}", w.bead_id()));
    Reply::new(
        format!("{}: {}{bead}\n", hook.agent(), hook.status()),
        to_json(hook),
    )
}

pub(crate) fn hook_touch(ctx: &Ctx) -> Outcome {
    let hooks = Hooks::new(ctx.state.clone());
    let held = held(&hooks, &ctx.agent, "touch")?;
    Ok(hook_changed(&hooks.touch(&held)?))
}

pub(crate) fn hook_complete(ctx: &Ctx) -> Outcome {
    let hooks = Hooks::new(ctx.state.clone());
    let held = held(&hooks, &ctx.agent, "complete")?;
    Ok(hook_changed(&hooks.complete(&held)?))
}

// --- nudge ---

fn nudge_id(nudge: &Nudge) -> String {
    nudge
        .id
        .as_ref()
        .map_or_else(|| nudge.timestamp.to_string(), ToString::to_string)
}

pub(crate) fn nudge_read(ctx: &Ctx) -> Outcome {
    let nudges = Nudges::new(ctx.state.clone());
    let agent = &ctx.agent;
    let received = nudges.read_and_mark(agent)?;
    let note = received.doubt();
    let (state, nudge) = match received {
        Received::Empty => {
            return Ok(Reply::new(
                format!("no nudge for {agent}\n"),
                json!({"state": "empty", "nudge": null}),
            ));
        }
        Received::Seen(n) => ("seen", n),
        Received::New(n) | Received::Unsure { nudge: n, .. } => ("new", n),
        Received::Corrupt(c) => return Err(Failure::nudge_unreadable(agent, &c)),
        _ => return Err(Failure::nudge_not_read(agent)),
    };
    let response = if nudge.requires_response {
        " (response required: nudge_respond)"
    } else {
        ""
    };
    let text = format!(
        "{state} {} from {} at {}{response}: {}\n",
        nudge.kind, nudge.from, nudge.timestamp, nudge.message
    );
    Ok(Reply::new(text, json!({"state": state, "nudge": to_json(&nudge)})).noted(note))
}

pub(crate) fn nudge_respond(ctx: &Ctx, p: NudgeRespond) -> Outcome {
    let nudges = Nudges::new(ctx.state.clone());
    let agent = &ctx.agent;
    let incoming = Failure::nudge_to_answer(agent, nudges.read_latest(agent)?)?;
    let message = p.message.unwrap_or_else(|| "Acknowledged".to_owned());
    let responded = nudges.respond(agent, &incoming, message)?;
    nudges.mark_processed(agent, &incoming)?;
    let outcome = responded.delivery.outcome();
    let text = format!(
        "answered {} from {} ({})\n",
        incoming.kind,
        incoming.from,
        nudge_id(&responded.response)
    );
    let note = responded.delivery.is_held().then(|| {
        format!(
            "`{}` has an unprocessed abort, so the answer is in its responses/{agent}.json \
             but not in its latest.json",
            incoming.from
        )
    });
    let doc = json!({
        "answered": to_json(&incoming),
        "response": to_json(&responded.response),
        "delivery": outcome,
    });
    Ok(Reply::new(text, doc).noted(note))
}

pub(crate) fn nudge_send(ctx: &Ctx, p: NudgeSend) -> Outcome {
    let to: AgentId = id(&p.to)?;
    if p.kind.is_empty() {
        return Err(Failure::usage("a nudge needs a non-empty type"));
    }
    let mut draft =
        chipset_nudge::NewNudge::new(ctx.agent.clone(), NudgeType::from_name(&p.kind), p.message);
    if p.requires_response.unwrap_or(false) {
        draft = draft.requiring_response();
    }
    let delivery = Nudges::new(ctx.state.clone()).send(&to, draft)?;
    let (outcome, note, extra) = match &delivery {
        Delivery::Delivered { .. } => ("delivered", None, Value::Null),
        Delivery::Replaced { previous, .. } => (
            "replaced",
            Some(format!(
                "replaced an unprocessed {} from `{}` (latest wins)",
                previous.kind, previous.from
            )),
            to_json(previous),
        ),
        Delivery::RepairedCorrupt { quarantined, .. } => (
            "repaired-corrupt",
            Some(format!(
                "the unreadable latest.json of `{to}` was moved aside to `{}`",
                quarantined.display()
            )),
            json!(quarantined),
        ),
        Delivery::Held { pending, .. } => return Err(Failure::nudge_held(&to, &pending.from)),
        _ => return Err(Failure::nudge_not_sent(&to)),
    };
    let Some(sent) = delivery.sent() else {
        return Err(Failure::nudge_not_sent(&to));
    };
    let mut doc = json!({"outcome": outcome, "to": to, "nudge": to_json(sent)});
    match outcome {
        "replaced" => doc["previous"] = extra,
        "repaired-corrupt" => doc["quarantined"] = extra,
        _ => {}
    }
    let text = format!("{outcome} {} to {to}\n", nudge_id(sent));
    Ok(Reply::new(text, doc).noted(note))
}

// --- mail ---

fn message_lines(messages: &[Message], bodies: bool) -> String {
    let mut text = String::new();
    for m in messages {
        text.push_str(&format!(
            "{} {} {}→{} task {} round {} {} {}\n",
            m.id(),
            m.kind().as_str(),
            m.from(),
            m.to(),
            m.task(),
            m.round().map_or_else(|| "-".to_owned(), |r| r.to_string()),
            m.priority().as_str(),
            m.subject()
        ));
        if bodies {
            for line in m.body().lines() {
                text.push_str("    ");
                text.push_str(line);
                text.push('\n');
            }
        }
    }
    text
}

fn listing(messages: &[Message], bodies: bool, empty: String) -> Reply {
    let doc = json!({"messages": messages.iter().map(to_json).collect::<Vec<_>>()});
    if messages.is_empty() {
        Reply::new(empty, doc)
    } else {
        Reply::new(message_lines(messages, bodies), doc)
    }
}

pub(crate) fn mail_send(ctx: &Ctx, p: MailSend) -> Outcome {
    let to: AgentId = id(&p.to)?;
    let task = p.task.as_deref().map(id).transpose()?;
    let parent = p.in_reply_to.as_deref().map(id).transpose()?;
    let from = ctx.agent.clone();
    let mut draft = match p.kind {
        MailKind::Request | MailKind::Notify => {
            let Some(task) = task else {
                return Err(Failure::usage(format!(
                    "a {} needs a task",
                    chipset_mail::Kind::from(p.kind).as_str()
                )));
            };
            let draft = if p.kind == MailKind::Request {
                Draft::request(from, to, task, p.subject, p.body)
            } else {
                Draft::notify(from, to, task, p.subject, p.body)
            };
            match parent {
                Some(parent) => draft.replying_to(parent),
                None => draft,
            }
        }
        MailKind::Response => {
            let Some(request) = parent else {
                return Err(Failure::usage("a response needs in_reply_to"));
            };
            let draft = Draft::response(from, to, request, p.subject, p.body);
            match task {
                Some(task) => draft.with_task(task),
                None => draft,
            }
        }
    };
    if let Some(round) = p.round {
        draft = draft.with_round(round);
    }
    if let Some(priority) = p.priority {
        draft = draft.with_priority(priority.into());
    }
    let message = Mail::new(ctx.state.clone()).send(&draft)?;
    Ok(Reply::new(
        format!("sent {} to {}\n", message.id(), message.to()),
        to_json(&message),
    ))
}

pub(crate) fn mail_inbox(ctx: &Ctx, p: MailInbox) -> Outcome {
    let filter = InboxFilter {
        kind: p.kind.map(chipset_mail::Kind::from),
        since: None,
        task: p.task.as_deref().map(id).transpose()?,
    };
    let messages = Mail::new(ctx.state.clone()).inbox(&ctx.agent, &filter)?;
    Ok(listing(
        &messages,
        true,
        format!("no messages for {}\n", ctx.agent),
    ))
}

pub(crate) fn mail_archive(ctx: &Ctx, p: MailArchive) -> Outcome {
    let message_id: chipset_mail::MessageId = id(&p.id)?;
    let mail = Mail::new(ctx.state.clone());
    // Archiving is the addressee's act: an agent files its own messages only.
    if let Some(found) = mail.find(&message_id)?
        && found.message.to() != &ctx.agent
    {
        return Err(Failure::refused(format!(
            "cannot archive {message_id}: it is addressed to `{}`, not to `{}`",
            found.message.to(),
            ctx.agent
        )));
    }
    Ok(match mail.archive(&message_id)? {
        ArchiveOutcome::Archived(message) => Reply::new(
            format!("archived {message_id}\n"),
            json!({"outcome": "archived", "message": to_json(&message)}),
        ),
        ArchiveOutcome::AlreadyArchived(location) => Reply::new(
            format!("{message_id} was archived already (in {location})\n"),
            json!({"outcome": "already-archived", "location": location.to_string()}),
        ),
    })
}

pub(crate) fn mail_thread(ctx: &Ctx, p: MailThread) -> Outcome {
    let messages = Mail::new(ctx.state.clone()).thread(&id(&p.id)?)?;
    Ok(listing(&messages, true, "empty thread\n".to_owned()))
}

pub(crate) fn mail_pending(ctx: &Ctx, p: MailPending) -> Outcome {
    let task: chipset_store::TaskId = id(&p.task)?;
    let messages = Mail::new(ctx.state.clone()).pending_replies(&task)?;
    Ok(listing(
        &messages,
        false,
        format!("no pending replies for {task}\n"),
    ))
}

// --- bus ---

fn problem(p: &Problem) -> String {
    match p {
        Problem::Corrupt(reason) => reason.to_string(),
        Problem::ForeignName => "not an event file name".to_owned(),
        Problem::NameMismatch => "its id or priority differs from its file name".to_owned(),
        Problem::AckedCopyInQueue => "acknowledged, but a copy is still queued".to_owned(),
        Problem::StaleTemp => "stale temp file".to_owned(),
        Problem::TornLogTail { offset, len } => {
            format!("torn last line ({len} bytes at offset {offset})")
        }
        Problem::BadLogLine { offset, reason } => {
            format!("bad line at offset {offset}: {reason}")
        }
        _ => "unusable".to_owned(),
    }
}

fn events(agent: &AgentId, pending: &Pending, timed_out: Option<bool>) -> Reply {
    let mut text = String::new();
    for e in pending.events() {
        let payload = match e.payload() {
            Value::Null => String::new(),
            v => format!(" {v}"),
        };
        text.push_str(&format!(
            "{} {} {} {} at {}{payload}\n",
            e.id(),
            e.priority().as_str(),
            e.source(),
            e.kind(),
            e.created_at()
        ));
    }
    if text.is_empty() {
        text = match timed_out {
            Some(true) => format!("timed out: no pending events for {agent}\n"),
            _ => format!("no pending events for {agent}\n"),
        };
    }
    let unreadable: Vec<Value> = pending
        .unreadable()
        .iter()
        .map(|b| json!({"path": b.path, "problem": problem(&b.problem)}))
        .collect();
    let mut doc = json!({
        "events": pending.events().iter().map(to_json).collect::<Vec<_>>(),
        "unreadable": unreadable,
    });
    if let Some(t) = timed_out {
        doc["timed_out"] = json!(t);
    }
    let failure = pending.unreadable().first().map(|first| {
        Failure::unreadable_queue(
            agent,
            pending.unreadable().len(),
            &first.path,
            &problem(&first.problem),
        )
    });
    Reply {
        text,
        json: doc,
        failure,
    }
}

pub(crate) fn bus_publish(ctx: &Ctx, p: BusPublish) -> Outcome {
    let to: AgentId = id(&p.to)?;
    // The source is the server's agent: an agent cannot publish as another.
    let mut event = NewEvent::new(ctx.agent.to_string(), p.kind);
    if let Some(priority) = p.priority {
        event = event.priority(priority.into());
    }
    if let Some(key) = p.dedup_key {
        event = event.dedup_key(key);
    }
    if let Some(payload) = p.payload {
        event = event.payload(payload);
    }
    Ok(match Bus::new(ctx.state.clone()).publish(&to, &event)? {
        Published::Delivered(event) => Reply::new(
            format!("published {} to {to}\n", event.id()),
            json!({"outcome": "delivered", "event": to_json(&event)}),
        ),
        Published::Duplicate {
            key,
            original,
            accepted_at,
        } => Reply::new(
            format!(
                "duplicate: key `{key}` was accepted for `{to}` at {accepted_at} \
                 (event {original}); nothing was published\n"
            ),
            json!({
                "outcome": "duplicate",
                "key": key,
                "original": original,
                "accepted_at": accepted_at,
            }),
        ),
    })
}

pub(crate) fn bus_pending(ctx: &Ctx) -> Outcome {
    let pending = Bus::new(ctx.state.clone()).pending(&ctx.agent)?;
    Ok(events(&ctx.agent, &pending, None))
}

pub(crate) fn bus_ack(ctx: &Ctx, p: BusAck) -> Outcome {
    let event_id: chipset_bus::EventId = id(&p.event_id)?;
    let (outcome, text) = match Bus::new(ctx.state.clone()).ack(&ctx.agent, &event_id)? {
        AckOutcome::Acked => ("acked", format!("acked {event_id}\n")),
        AckOutcome::AlreadyAcked => (
            "already-acked",
            format!("{event_id} was acknowledged already\n"),
        ),
    };
    Ok(Reply::new(
        text,
        json!({"outcome": outcome, "agent": ctx.agent, "id": event_id}),
    ))
}

/// Returns the timeout a waiting tool asked for, refusing one out of range.
fn timeout(secs: Option<f64>) -> Result<Duration, Failure> {
    let secs = secs.unwrap_or(60.0);
    if !(0.0..=MAX_WAIT_SECS).contains(&secs) {
        return Err(Failure::usage(format!(
            "timeout_seconds must be between 0 and {MAX_WAIT_SECS}, not {secs}"
        )));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Waits as `chipset bus wait` does (waiter first, then the queue, then
/// wait), in short slices so that `cancelled` is noticed soon.
pub(crate) fn bus_wait(ctx: &Ctx, p: &BusWait, cancelled: &dyn Fn() -> bool) -> Outcome {
    let deadline = Instant::now() + timeout(p.timeout_seconds)?;
    let bus = Bus::new(ctx.state.clone());
    let mut waiter = bus.waiter(&ctx.agent)?;
    let mut pending = bus.pending(&ctx.agent)?;
    while pending.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || cancelled() {
            return Ok(events(&ctx.agent, &pending, Some(true)));
        }
        if let Wake::Arrived(_) = waiter.wait(left.min(WAIT_SLICE))? {
            pending = bus.pending(&ctx.agent)?;
        }
    }
    Ok(events(&ctx.agent, &pending, Some(false)))
}

// --- remind ---

fn reminders(ctx: &Ctx) -> Reminders {
    Reminders::new(ctx.state.clone(), KindRegistry::preset())
}

pub(crate) fn remind_open(ctx: &Ctx, p: RemindOpen) -> Outcome {
    let key = ReminderKey::new(p.kind, p.source_type, p.source_id)?;
    let to: AgentId = match &p.to {
        Some(to) => id(to)?,
        None => ctx.agent.clone(),
    };
    let mut new = NewReminder::new(TENANT, None, &key, p.message);
    new.metadata
        .insert(REMINDER_AGENT_FIELD.to_owned(), json!(to.as_str()));
    let opened = reminders(ctx).open(new)?;
    let r = opened.reminder();
    let (outcome, note) = match &opened {
        Opened::New(_) => ("opened", None),
        Opened::Existing(_) => ("existing", Some("a reminder was open for this key already")),
        Opened::Snoozed(_) => (
            "snoozed",
            Some("the reminder for this key is snoozed; it reopens when due"),
        ),
        _ => ("existing", None),
    };
    Ok(Reply::new(
        format!("{outcome} {}\n", r.id),
        json!({"outcome": outcome, "reminder": to_json(r)}),
    )
    .noted(note.map(str::to_owned)))
}

pub(crate) fn remind_list(ctx: &Ctx, p: RemindList) -> Outcome {
    let filter = ReminderFilter {
        kind: p.kind,
        ..ReminderFilter::default()
    };
    let listing = reminders(ctx).list_open(&filter)?;
    let mut text = String::new();
    for r in &listing.reminders {
        text.push_str(&format!(
            "{} {} {}:{} since {}: {}\n",
            r.id, r.kind, r.source_type, r.source_id, r.created_at, r.message
        ));
    }
    if text.is_empty() {
        text = "no open reminders\n".to_owned();
    }
    let doc = json!({
        "reminders": listing.reminders.iter().map(to_json).collect::<Vec<_>>(),
        "unreadable": listing.corrupt.iter().map(ToString::to_string).collect::<Vec<_>>(),
    });
    let failure = listing
        .corrupt
        .first()
        .map(|c| Failure::unreadable_reminders(listing.corrupt.len(), c));
    Ok(Reply {
        text,
        json: doc,
        failure,
    })
}

fn reminder_changed(r: &Reminder, text: String) -> Reply {
    Reply::new(text, to_json(r))
}

pub(crate) fn remind_resolve(ctx: &Ctx, p: RemindResolve) -> Outcome {
    let id: chipset_nudge::ReminderId = id(&p.id)?;
    let r = reminders(ctx).resolve(&id, p.resolution.into(), p.note)?;
    let resolution = r.resolution.map_or("open", |res| res.as_str());
    let out = reminder_changed(&r, format!("resolved {id} ({resolution})\n"));
    let note =
        (r.id != id).then(|| format!("it was snoozed: recorded as {}, reopened from {id}", r.id));
    Ok(out.noted(note))
}

pub(crate) fn remind_snooze(ctx: &Ctx, p: RemindSnooze) -> Outcome {
    let id: chipset_nudge::ReminderId = id(&p.id)?;
    if p.hours == 0 {
        return Err(Failure::usage("hours must be at least 1"));
    }
    let r = reminders(ctx).snooze(&id, Duration::from_secs(u64::from(p.hours) * 3600), None)?;
    let until = r
        .snooze_until
        .map_or_else(String::new, |t| format!(" until {t}"));
    Ok(reminder_changed(&r, format!("snoozed {}{until}\n", r.id)))
}

// --- status ---

/// The agent's own line of `chipset status`: its hook, whether a nudge is
/// waiting, its inbox and bus counts, and the open reminders.
pub(crate) fn status(ctx: &Ctx) -> Outcome {
    let agent = &ctx.agent;
    let hook = match Hooks::new(ctx.state.clone()).read(agent)? {
        HookRead::Missing => json!({"status": "none"}),
        HookRead::Corrupt(c) => json!({"status": "corrupt", "error": c.to_string()}),
        HookRead::Unsupported(u) => json!({"status": "unsupported", "error": u.to_string()}),
        HookRead::Hook(h) => json!({
            "status": h.status(),
            "bead_id": h.work().map(|w| w.bead_id()),
            "title": h.work().map(|w| w.title()),
            "last_activity": h.last_activity(),
            "generation": h.generation(),
        }),
    };
    let nudge = match Nudges::new(ctx.state.clone()).receive(agent)? {
        Received::New(n) | Received::Unsure { nudge: n, .. } => {
            json!({"pending": true, "type": n.kind, "from": n.from})
        }
        Received::Corrupt(c) => json!({"pending": null, "error": c.to_string()}),
        Received::Unsupported(u) => json!({"pending": null, "error": u.to_string()}),
        _ => json!({"pending": false}),
    };
    let inbox = Mail::new(ctx.state.clone()).inbox_len(agent)?;
    let counts = Bus::new(ctx.state.clone()).counts(agent)?;
    let by_priority: BTreeMap<&str, usize> = chipset_bus::Priority::ALL
        .iter()
        .map(|p| (p.as_str(), counts.pending_at(*p)))
        .collect();
    let open = reminders(ctx).open_counts()?;
    let total: usize = open.values().sum();
    let hook_text = match (hook["status"].as_str(), hook["bead_id"].as_str()) {
        (Some(s), Some(bead)) => format!("{s} {bead}"),
        (Some(s), None) => s.to_owned(),
        _ => "unknown".to_owned(),
    };
    let nudge_text = match nudge["pending"].as_bool() {
        Some(true) => format!("new {}", nudge["type"].as_str().unwrap_or("nudge")),
        Some(false) => "none".to_owned(),
        None => "unreadable".to_owned(),
    };
    let text = format!(
        "agent {agent}\nhook: {hook_text}\nnudge: {nudge_text}\ninbox: {}\nbus: {} pending\nreminders: {total} open\n",
        plural(inbox, "message"),
        counts.pending_total(),
    );
    let doc = json!({
        "agent": agent,
        "hook": hook,
        "nudge": nudge,
        "inbox": inbox,
        "bus": {"pending": counts.pending_total(), "by_priority": by_priority},
        "reminders": {"open": total, "by_kind": open},
    });
    Ok(Reply::new(text, doc))
}

// --- attention ---

/// Renders a brief: its lines, or a line saying nothing needs the agent.
pub(crate) fn brief_reply(brief: &Brief, timed_out: Option<bool>) -> Reply {
    let text = if brief.is_empty() {
        match timed_out {
            Some(true) => format!("timed out: nothing needs {}\n", brief.agent),
            _ => format!("nothing needs {}\n", brief.agent),
        }
    } else {
        brief.to_string()
    };
    let mut doc = to_json(brief);
    if let Some(t) = timed_out {
        doc["timed_out"] = json!(t);
    }
    Reply::new(text, doc)
}

/// What needs this agent now, across every channel ([`Attention::brief`]).
pub(crate) fn brief(ctx: &Ctx) -> Outcome {
    let brief = Attention::from_state(&ctx.state).brief(&ctx.agent)?;
    Ok(brief_reply(&brief, None))
}

/// Returns as soon as anything needs this agent, as `chipset wait` does,
/// watching in short slices so that `cancelled` is noticed soon.
pub(crate) fn wait(ctx: &Ctx, p: &Wait, cancelled: &dyn Fn() -> bool) -> Outcome {
    let deadline = Instant::now() + timeout(p.timeout_seconds)?;
    // Watch first, read second (the watch's first brief): nothing is missed.
    let mut watch = Attention::from_state(&ctx.state).watch(&ctx.agent)?;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if let Some(brief) = watch.next(left.min(WAIT_SLICE))?
            && !brief.is_empty()
        {
            return Ok(brief_reply(&brief, Some(false)));
        }
        if deadline <= Instant::now() || cancelled() {
            return Ok(brief_reply(&Brief::empty(ctx.agent.clone()), Some(true)));
        }
    }
}
