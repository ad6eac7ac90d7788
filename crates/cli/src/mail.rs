//! `chipset mail ...`: [`chipset_mail::Mail`] from a shell.

use std::fmt::Write as _;
use std::io::Read as _;
use std::time::Duration;

use chipset_mail::MessageId;
use chipset_mail::{Kind, Mail, MailPriority, Message, NewMessage};
use chipset_mcp::view::Archived;

use crate::Ctx;
use crate::cli::{MailCommand, MailExpects, MailKind, MailSend, Since};
use crate::error::{CliError, Result};
use crate::output::{self, Cell, Output, Paint, Table, Tone};
use crate::view::{GroupSentView, LEFT_OUT, Swept};

/// Runs one mail command, on the mail folder `ctx.mail_folder` names when
/// it is set (`--mail-dir`, or a `.nubos-pilot/messages` found), else on
/// `mail/` under the state root.
pub(crate) fn run(ctx: &Ctx, command: MailCommand) -> Result<Output> {
    let mail = if ctx.mail_folder {
        Mail::in_folder(ctx.state.clone(), chipset_mail::MailConfig::default())
    } else {
        ctx.chipset.mail().clone()
    };
    match command {
        MailCommand::Send(args) if is_group(&args) => send_group(ctx, &mail, args),
        MailCommand::Send(args) => {
            let message = mail.send(&draft(args)?)?;
            Ok(Output::new(
                format!("{}\n", message.id),
                output::json(&message),
            ))
        }
        MailCommand::Inbox {
            who,
            kind,
            task,
            since,
        } => {
            let agent = who.agent()?;
            let (since, after) = match since {
                // Strictly after, as nubos-pilot compares: times have milliseconds.
                Some(Since::Time(t)) => (Some(t + Duration::from_millis(1)), None),
                Some(Since::Id(id)) => (None, Some(id)),
                None => (None, None),
            };
            let kind = kind.map(Kind::from);
            let mut inbox = mail.inbox_listing(&agent)?;
            inbox.items.retain(|m| {
                kind.is_none_or(|k| m.kind == k)
                    && since.is_none_or(|t| m.created_at >= t)
                    && task.as_ref().is_none_or(|t| m.task() == t)
                    && after.as_ref().is_none_or(|after| m.id > *after)
            });
            // What it read, then (exit 1) the files it could not: a message
            // may hide behind each.
            let unreadable = CliError::unreadable(&inbox, "message");
            let empty = match unreadable {
                None => format!("no messages for {agent}\n"),
                Some(_) => String::new(),
            };
            Ok(listing(ctx.paint, &inbox.items, true, &empty).with_failure(unreadable))
        }
        MailCommand::Doctor(args) => crate::doctor::mail(&mail, args.fix),
        MailCommand::Archive { id, id_opt } => {
            let id = id.or(id_opt).expect("clap requires one of them");
            archive(&mail, &id)
        }
        MailCommand::Thread { id, id_opt } => {
            let id = id.or(id_opt).expect("clap requires one of them");
            let messages = mail.thread(&id)?;
            Ok(listing(ctx.paint, &messages, true, "empty thread\n"))
        }
        MailCommand::Pending { task, check, wait } => {
            let messages = match wait {
                Some(timeout) => mail.wait_gate(&task, timeout)?,
                None => mail.pending_replies(&task)?,
            };
            let empty = format!("no pending replies for {task}\n");
            let closed = (check && !messages.is_empty()).then(|| {
                CliError::refused(format!(
                    "the commit gate of {task} is closed: {} waiting for a reply",
                    output::plural(messages.len(), "request")
                ))
            });
            Ok(listing(ctx.paint, &messages, false, &empty).with_failure(closed))
        }
        MailCommand::Sweep { task } => {
            let report = mail.sweep_task_on_commit(&task)?;
            let text = format!(
                "swept {} of {task} ({} in archive/by-task/{task})\n",
                output::plural(report.moved, "message"),
                report.total
            );
            let view = Swept {
                task,
                moved: report.moved,
                total: report.total,
            };
            Ok(Output::new(text, output::json(&view)))
        }
    }
}

fn archive(mail: &Mail, id: &MessageId) -> Result<Output> {
    let view = Archived::from(mail.archive(id)?);
    let text = match &view {
        Archived::Archived { .. } => format!("archived {id}\n"),
        Archived::AlreadyArchived { location } => {
            format!("{id} was archived already (in {location})\n")
        }
    };
    Ok(Output::new(text, output::json(&view)))
}

/// Builds the library's draft from the arguments; the kind decides which
/// of `--task` and `--in-reply-to` it needs.
fn draft(args: MailSend) -> Result<NewMessage> {
    let MailSend {
        from,
        to,
        kind,
        subject,
        body,
        body_file,
        task,
        expects_reply,
        round,
        in_reply_to,
        priority,
        id,
    } = args;
    let to = to
        .single()
        .cloned()
        .expect("a group is sent by `send_group`");
    if expects_reply.is_some() && kind != MailKind::Request {
        return Err(CliError::usage(format!(
            "--expects-reply is for --kind request only: a {} expects no reply",
            Kind::from(kind)
        )));
    }
    let body = read_body(body, body_file)?;
    let mut draft = match kind {
        MailKind::Request | MailKind::Notify => {
            let task = task.ok_or_else(|| {
                CliError::usage(format!("--kind {} needs --task T", Kind::from(kind)))
            })?;
            let draft = if kind == MailKind::Request {
                NewMessage::request(from, to, task, subject, body)
            } else {
                NewMessage::notify(from, to, task, subject, body)
            };
            match in_reply_to {
                Some(parent) => draft.replying_to(parent),
                None => draft,
            }
        }
        MailKind::Response => {
            let request = in_reply_to
                .ok_or_else(|| CliError::usage("--kind response needs --in-reply-to ID"))?;
            let draft = NewMessage::response(from, to, request, subject, body);
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
    if let Some(id) = id {
        draft = draft.with_id(id);
    }
    Ok(draft)
}

/// Whether `args` sends group mail: to several agents or a list, or
/// expecting any one reply.
fn is_group(args: &MailSend) -> bool {
    args.to.single().is_none() || args.expects_reply == Some(MailExpects::Any)
}

/// Refuses, before any folder is opened, group mail where there is no
/// state root (the mail commands on a mail folder alone): its agents and
/// lists are in the root's directory.
pub(crate) fn refuse_group_alone(command: &MailCommand) -> Result<()> {
    match command {
        MailCommand::Send(args) if is_group(args) => Err(CliError::usage(
            "group mail (`--to a,b`, `@list`, `@all`) needs a chipset state root: \
             its agents and lists are in the directory (`chipset init` makes one)",
        )),
        _ => Ok(()),
    }
}

/// `chipset mail send --to a,b|@list|@all`: resolves the recipients in
/// the directory and sends one copy to each (see [`Mail::send_group`]).
/// Prints the group id (what `--id` retries with), then each copy's id and
/// recipient.
fn send_group(ctx: &Ctx, mail: &Mail, args: MailSend) -> Result<Output> {
    let MailSend {
        from,
        to,
        kind,
        subject,
        body,
        body_file,
        task,
        expects_reply,
        round,
        in_reply_to,
        priority,
        id,
    } = args;
    let kind_name = Kind::from(kind);
    if kind == MailKind::Response || in_reply_to.is_some() {
        return Err(CliError::usage(format!(
            "a {kind_name} to a group cannot answer a message: --in-reply-to and responses \
             name one agent in --to"
        )));
    }
    if expects_reply.is_some() && kind != MailKind::Request {
        return Err(CliError::usage(format!(
            "--expects-reply is for --kind request only: a {kind_name} expects no reply"
        )));
    }
    let task = task.ok_or_else(|| CliError::usage(format!("--kind {kind_name} needs --task T")))?;
    let body = read_body(body, body_file)?;
    let resolved = ctx.chipset.directory().clone().resolve(&to, &from)?;
    let (agents, left_out) = (resolved.agents, resolved.left_out);
    let sender_skipped = agents.contains(&from);
    let mut draft = if kind == MailKind::Request {
        NewMessage::request(from, agents, task, subject, body)
    } else {
        NewMessage::notify(from, agents, task, subject, body)
    };
    if expects_reply == Some(MailExpects::Any) {
        draft = draft.answered_by_any();
    }
    if let Some(round) = round {
        draft = draft.with_round(round);
    }
    if let Some(priority) = priority {
        draft = draft.with_priority(priority.into());
    }
    if let Some(id) = id {
        draft = draft.with_id(id);
    }
    let copies = mail.send_group(&draft)?;
    let view = GroupSentView::of(&copies, sender_skipped, left_out);
    let mut text = format!("{}\n", view.group);
    for m in &copies {
        let _ = writeln!(text, "{} {}", m.id, m.to);
    }
    for agent in &view.left_out {
        let _ = writeln!(text, "left out {agent}: {LEFT_OUT}");
    }
    Ok(Output::new(text, output::json(&view)))
}

/// The most `--body-file` reads: far above any body mail accepts (its own
/// limit refuses a large body with a typed error), so only a runaway file
/// (`/dev/zero`) stops here.
const BODY_FILE_CAP: u64 = 64 * 1024 * 1024;

/// Returns the body: the `--body` text, standard input for `--body -`, or
/// the contents of `--body-file` (which argv's size limit does not bound).
fn read_body(body: Option<String>, file: Option<std::path::PathBuf>) -> Result<String> {
    match (body, file) {
        (Some(text), None) if text == "-" => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| CliError::usage(format!("cannot read the body from stdin: {e}")))?;
            Ok(text)
        }
        (Some(text), None) => Ok(text),
        (None, Some(path)) => chipset_store::StateDir::read_outside(&path, BODY_FILE_CAP)
            .and_then(|bytes| {
                String::from_utf8(bytes)
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
            })
            .map_err(|e| {
                CliError::usage(format!("cannot read --body-file `{}`: {e}", path.display()))
            }),
        _ => Err(CliError::usage("give one of --body and --body-file")),
    }
}

/// Renders messages as an aligned table, each row followed by its body
/// (indented) when `bodies` is set; JSON is the array of messages.
fn listing(paint: Paint, messages: &[Message], bodies: bool, empty: &str) -> Output {
    let doc = output::json(messages);
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
        let priority_tone = match m.priority {
            MailPriority::Urgent => Tone::Bad,
            MailPriority::Low => Tone::Dim,
            _ => Tone::Plain,
        };
        table.row(vec![
            m.id.to_string().into(),
            Cell::toned(m.kind.to_string(), kind_tone),
            m.from.to_string().into(),
            m.to.to_string().into(),
            m.task().to_string().into(),
            m.round
                .map_or_else(|| "-".to_owned(), |r| r.to_string())
                .into(),
            Cell::toned(m.priority.to_string(), priority_tone),
            m.subject.clone().into(),
        ]);
    }
    let rendered = table.render(paint);
    let mut text = String::new();
    for (i, line) in rendered.lines().enumerate() {
        text.push_str(line);
        text.push('\n');
        if bodies && i > 0 {
            for body_line in messages[i - 1].body.lines() {
                text.push_str("    ");
                text.push_str(body_line);
                text.push('\n');
            }
        }
    }
    Output::new(text, doc)
}
