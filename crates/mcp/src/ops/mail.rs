//! The mail tools. Listings show at most `limit` messages (20 unless
//! asked), without their bodies unless asked (`bodies`); `mail_read` gives
//! one message whole.

use std::time::Duration;

use chipset::directory::Recipients;
use chipset_failure::Failure;
use chipset_mail::{Message, MessageId, NewMessage};
use chipset_store::{ErrorKind, Timestamp};

use super::{Ctx, Outcome, Reply, id};
use crate::params::{
    MailArchive, MailExpects, MailInbox, MailKind, MailPending, MailRead, MailSend, MailThread,
    limit,
};
use crate::view::{Archived, GroupSentView, LEFT_OUT, MailListing, MessageHead, one_line};

/// Renders at most `limit` of `messages` (all of which matched), with their
/// bodies when `bodies` is set; `more` says how to see the rest.
fn listing(messages: &[Message], limit: usize, bodies: bool, empty: String, more: &str) -> Reply {
    let shown = &messages[..messages.len().min(limit)];
    let mut text = String::new();
    for m in shown {
        text.push_str(&format!(
            "{} {} {}→{} task {} round {} {} {} ({} chars)\n",
            m.id,
            m.kind,
            m.from,
            m.to,
            m.task(),
            m.round.map_or_else(|| "-".to_owned(), |r| r.to_string()),
            m.priority,
            one_line(&m.subject),
            m.body.chars().count()
        ));
        if bodies {
            for line in m.body.lines() {
                text.push_str("    ");
                text.push_str(line);
                text.push('\n');
            }
        }
    }
    if messages.is_empty() {
        text = empty;
    } else if shown.len() < messages.len() {
        text.push_str(&format!(
            "… {} more ({} in all): {more}\n",
            messages.len() - shown.len(),
            messages.len()
        ));
    }
    let view = MailListing {
        messages: shown.iter().map(|m| MessageHead::of(m, bodies)).collect(),
        total: messages.len(),
    };
    Reply::new(text, view)
}

pub(crate) fn mail_send(ctx: &Ctx, p: MailSend) -> Outcome {
    // Checked first, whatever `to` holds: bad input changes nothing.
    let chosen: Option<MessageId> = p.id.as_deref().map(id).transpose()?;
    let recipients: Recipients =
        p.to.parse()
            .map_err(|e: chipset::directory::Error| Failure::from(e))?;
    let Some(to) = recipients
        .single()
        .filter(|_| p.expects_reply != Some(MailExpects::Any))
        .cloned()
    else {
        return mail_send_group(ctx, p, &recipients, chosen);
    };
    let task = p.task.as_deref().map(id).transpose()?;
    let parent = p.in_reply_to.as_deref().map(id).transpose()?;
    let from = ctx.agent.clone();
    let mut draft = match p.kind {
        MailKind::Request | MailKind::Notify => {
            let Some(task) = task else {
                return Err(Failure::usage(format!(
                    "a {} needs a task",
                    chipset_mail::Kind::from(p.kind)
                )));
            };
            let draft = if p.kind == MailKind::Request {
                NewMessage::request(from, to, task, p.subject, p.body)
            } else {
                NewMessage::notify(from, to, task, p.subject, p.body)
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
            let draft = NewMessage::response(from, to, request, p.subject, p.body);
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
    if let Some(chosen) = chosen {
        draft = draft.with_id(chosen);
    }
    let message = ctx.mail().send(&draft)?;
    Ok(Reply::new(
        format!("sent {} to {}\n", message.id, message.to),
        &message,
    ))
}

/// `mail_send` to a group: one copy per recipient, resolved in the directory.
fn mail_send_group(ctx: &Ctx, p: MailSend, to: &Recipients, chosen: Option<MessageId>) -> Outcome {
    let kind = chipset_mail::Kind::from(p.kind);
    if p.kind == MailKind::Response || p.in_reply_to.is_some() {
        return Err(Failure::usage(format!(
            "a {kind} to a group cannot answer a message: in_reply_to and responses name one agent in `to`"
        )));
    }
    if p.expects_reply.is_some() && p.kind != MailKind::Request {
        return Err(Failure::usage(format!(
            "expects_reply is for a request only: a {kind} expects no reply"
        )));
    }
    let Some(task) = p.task.as_deref().map(id).transpose()? else {
        return Err(Failure::usage(format!("a {kind} needs a task")));
    };
    let resolved = ctx.directory().resolve(to, &ctx.agent)?;
    let (agents, left_out) = (resolved.agents, resolved.left_out);
    let from = ctx.agent.clone();
    let sender_skipped = agents.contains(&from);
    let mut draft = if p.kind == MailKind::Request {
        NewMessage::request(from, agents, task, p.subject, p.body)
    } else {
        NewMessage::notify(from, agents, task, p.subject, p.body)
    };
    if p.expects_reply == Some(MailExpects::Any) {
        draft = draft.answered_by_any();
    }
    if let Some(round) = p.round {
        draft = draft.with_round(round);
    }
    if let Some(priority) = p.priority {
        draft = draft.with_priority(priority.into());
    }
    if let Some(chosen) = chosen {
        draft = draft.with_id(chosen);
    }
    let copies = ctx.mail().send_group(&draft)?;
    let view = GroupSentView::of(&copies, sender_skipped, left_out);
    let names: Vec<String> = copies.iter().map(|m| m.to.to_string()).collect();
    let mut text = format!("sent {} to {}\n", view.group, names.join(", "));
    for agent in &view.left_out {
        text.push_str(&format!("left out {agent}: {LEFT_OUT}\n"));
    }
    Ok(Reply::new(text, view))
}

/// Where a listing starts: after a message id (ids sort in send order) or
/// strictly after a time.
enum Since {
    Id(MessageId),
    Time(Timestamp),
}

/// As the command line's `--since`: an RFC 3339 time, or a message id in
/// the seed's form (the only ids that sort in send order).
fn since(text: &str) -> Result<Since, Failure> {
    if let Ok(t) = text.parse::<Timestamp>() {
        return Ok(Since::Time(t));
    }
    MessageId::new(text)
        .ok()
        .filter(MessageId::is_seed_form)
        .map(Since::Id)
        .ok_or_else(|| {
            Failure::usage(format!(
                "`since`: `{text}` is neither an RFC 3339 time (2026-11-28T09:30:00Z) \
                 nor a message id ({{unix-ms}}-{{uuid}})"
            ))
        })
}

pub(crate) fn mail_inbox(ctx: &Ctx, p: MailInbox) -> Outcome {
    let limit = limit(p.limit)?;
    let start = p.since.as_deref().map(since).transpose()?;
    let kind = p.kind.map(chipset_mail::Kind::from);
    let task: Option<chipset_store::TaskId> = p.task.as_deref().map(id).transpose()?;
    let mut inbox = ctx.mail().inbox_listing(&ctx.agent)?;
    inbox.items.retain(|m| {
        kind.is_none_or(|k| m.kind == k)
            && task.as_ref().is_none_or(|t| m.task() == t)
            && match &start {
                // Strictly after, as the command line's `--since`: times have milliseconds.
                Some(Since::Time(t)) => m.created_at >= *t + Duration::from_millis(1),
                Some(Since::Id(after)) => m.id > *after,
                None => true,
            }
    });
    // What it read, and a failure naming the files it could not.
    let unreadable = Failure::unreadable(&inbox, "message");
    let empty = match unreadable {
        None => format!("no messages for {}\n", ctx.agent),
        Some(_) => String::new(),
    };
    let bodies = p.bodies.unwrap_or(false);
    let next = "pass `since` = the last id shown for the next ones";
    let mut reply = listing(&inbox.items, limit, bodies, empty, next);
    reply.failure = unreadable;
    Ok(reply)
}

pub(crate) fn mail_read(ctx: &Ctx, p: MailRead) -> Outcome {
    let message_id: MessageId = id(&p.id)?;
    let m = &ctx.mail().find(&message_id)?.ok_or_else(|| {
        Failure::new(
            ErrorKind::NotFound,
            format!("no message {message_id} in any inbox or the archive"),
        )
    })?;
    let text = format!(
        "{} {} {}→{} task {} {}\n{}\n",
        m.id,
        m.kind,
        m.from,
        m.to,
        m.task(),
        one_line(&m.subject),
        m.body
    );
    Ok(Reply::new(text, m))
}

pub(crate) fn mail_archive(ctx: &Ctx, p: MailArchive) -> Outcome {
    let message_id: MessageId = id(&p.id)?;
    let mail = ctx.mail();
    // Archiving is the addressee's act: an agent files its own messages only.
    if let Some(found) = mail.find(&message_id)?
        && found.to != ctx.agent
    {
        return Err(Failure::refused(format!(
            "cannot archive {message_id}: it is addressed to `{}`, not to `{}`",
            found.to, ctx.agent
        )));
    }
    let view = Archived::from(mail.archive(&message_id)?);
    let text = match &view {
        Archived::Archived { .. } => format!("archived {message_id}\n"),
        Archived::AlreadyArchived { location } => {
            format!("{message_id} was archived already (in {location})\n")
        }
    };
    Ok(Reply::new(text, view))
}

pub(crate) fn mail_thread(ctx: &Ctx, p: MailThread) -> Outcome {
    let limit = limit(p.limit)?;
    let messages = ctx.mail().thread(&id(&p.id)?)?;
    Ok(listing(
        &messages,
        limit,
        p.bodies.unwrap_or(false),
        "empty thread\n".to_owned(),
        "pass a larger `limit`",
    ))
}

pub(crate) fn mail_pending(ctx: &Ctx, p: MailPending) -> Outcome {
    let limit = limit(p.limit)?;
    let task: chipset_store::TaskId = id(&p.task)?;
    let messages = ctx.mail().pending_replies(&task)?;
    Ok(listing(
        &messages,
        limit,
        false,
        format!("no pending replies for {task}\n"),
        "pass a larger `limit`",
    ))
}
