//! `chipset mail ...`: [`chipset_mail::Mail`] from a shell.

use chipset_mail::{ArchiveOutcome, Draft, InboxFilter, Kind, Mail, Message, Priority};
use serde_json::json;

use crate::Ctx;
use crate::cli::{MailCommand, MailKind, MailSend};
use crate::error::{CliError, Result};
use crate::output::{self, Cell, Output, Paint, Table, Tone};

/// Runs one mail command.
pub(crate) fn run(ctx: &Ctx, command: MailCommand) -> Result<Output> {
    let mail = Mail::new(ctx.state.clone());
    match command {
        MailCommand::Send(args) => {
            let message = mail.send(&draft(args)?)?;
            Ok(Output::new(
                format!("{}\n", message.id()),
                output::json(&message),
            ))
        }
        MailCommand::Inbox { agent, kind, task } => {
            let filter = InboxFilter {
                kind: kind.map(Kind::from),
                since: None,
                task,
            };
            let messages = mail.inbox(&agent, &filter)?;
            let empty = format!("no messages for {agent}\n");
            Ok(listing(ctx.paint, &messages, true, &empty))
        }
        MailCommand::Archive { id } => match mail.archive(&id)? {
            ArchiveOutcome::Archived(message) => Ok(Output::new(
                format!("archived {id}\n"),
                json!({"outcome": "archived", "message": output::json(&message)}),
            )),
            ArchiveOutcome::AlreadyArchived(location) => Ok(Output::new(
                format!("{id} was archived already (in {location})\n"),
                json!({"outcome": "already-archived", "location": location.to_string()}),
            )),
        },
        MailCommand::Thread { id } => {
            let messages = mail.thread(&id)?;
            Ok(listing(ctx.paint, &messages, true, "empty thread\n"))
        }
        MailCommand::Pending { task } => {
            let messages = mail.pending_replies(&task)?;
            let empty = format!("no pending replies for {task}\n");
            Ok(listing(ctx.paint, &messages, false, &empty))
        }
        MailCommand::Sweep { task } => {
            let report = mail.sweep_task_on_commit(&task)?;
            let text = format!(
                "swept {} of {task} ({} in archive/by-task/{task})\n",
                output::plural(report.moved, "message"),
                report.total
            );
            Ok(Output::new(
                text,
                json!({"task": task, "moved": report.moved, "total": report.total}),
            ))
        }
    }
}

/// Builds the library's draft from the arguments; the kind decides which
/// of `--task` and `--in-reply-to` it needs.
fn draft(args: MailSend) -> Result<Draft> {
    let MailSend {
        from,
        to,
        kind,
        subject,
        body,
        task,
        round,
        in_reply_to,
        priority,
    } = args;
    let mut draft = match kind {
        MailKind::Request | MailKind::Notify => {
            let task = task.ok_or_else(|| {
                CliError::usage(format!(
                    "--kind {} needs --task T",
                    Kind::from(kind).as_str()
                ))
            })?;
            let draft = if kind == MailKind::Request {
                Draft::request(from, to, task, subject, body)
            } else {
                Draft::notify(from, to, task, subject, body)
            };
            match in_reply_to {
                Some(parent) => draft.replying_to(parent),
                None => draft,
            }
        }
        MailKind::Response => {
            let request = in_reply_to
                .ok_or_else(|| CliError::usage("--kind response needs --in-reply-to ID"))?;
            let draft = Draft::response(from, to, request, subject, body);
            match task {
                Some(task) => draft.with_task(task),
                None => draft,
            }
        }
    };
    if let Some(round) = round {
        draft = draft.with_round(round);
    }
    if let Some(priority) = priority {
        draft = draft.with_priority(priority.into());
    }
    Ok(draft)
}

/// Renders messages as an aligned table, each row followed by its body
/// (indented) when `bodies` is set; JSON is the array of messages.
fn listing(paint: Paint, messages: &[Message], bodies: bool, empty: &str) -> Output {
    let doc = serde_json::Value::Array(messages.iter().map(output::json).collect());
    if messages.is_empty() {
        return Output::new(empty, doc);
    }
    let mut table = Table::new(&[
        "ID", "KIND", "FROM", "TO", "TASK", "ROUND", "PRIORITY", "SUBJECT",
    ]);
    for m in messages {
        let kind_tone = if m.needs_reply() {
            Tone::Warn
        } else {
            Tone::Plain
        };
        let priority_tone = match m.priority() {
            Priority::Urgent => Tone::Bad,
            Priority::Low => Tone::Dim,
            _ => Tone::Plain,
        };
        table.row(vec![
            m.id().to_string().into(),
            Cell::toned(m.kind().as_str(), kind_tone),
            m.from().to_string().into(),
            m.to().to_string().into(),
            m.task().to_string().into(),
            m.round()
                .map_or_else(|| "-".to_owned(), |r| r.to_string())
                .into(),
            Cell::toned(m.priority().as_str(), priority_tone),
            m.subject().into(),
        ]);
    }
    let rendered = table.render(paint);
    let mut text = String::new();
    for (i, line) in rendered.lines().enumerate() {
        text.push_str(line);
        text.push('\n');
        if bodies && i > 0 {
            for body_line in messages[i - 1].body().lines() {
                text.push_str("    ");
                text.push_str(body_line);
                text.push('\n');
            }
        }
    }
    Output::new(text, doc)
}
