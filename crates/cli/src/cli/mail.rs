//! `chipset mail ...`: the mail commands' arguments.

use std::path::PathBuf;
use std::time::Duration;

use chipset_mail::MessageId;
use chipset_store::{AgentId, TaskId, Timestamp};
use clap::{Args, Subcommand, ValueEnum};

use super::{DoctorArgs, Who, parse_duration};

/// `chipset mail ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum MailCommand {
    /// Send a message; prints the new id.
    Send(MailSend),
    /// List an agent's inbox.
    Inbox {
        #[command(flatten)]
        who: Who,
        /// Only this kind.
        #[arg(long, value_name = "K")]
        kind: Option<MailKind>,
        /// Only this task's messages.
        #[arg(long, visible_alias = "phase", value_name = "T")]
        task: Option<TaskId>,
        /// Only messages after this one: a message id in the seed's form
        /// (`{unix-ms}-{uuid}`, which sorts in send order) or an RFC 3339
        /// time with its offset (created strictly after it).
        #[arg(long, value_name = "ID|TIME", value_parser = parse_since)]
        since: Option<Since>,
    },
    /// Archive a message (a request only after it was answered).
    Archive {
        /// The message id.
        #[arg(required_unless_present = "id_opt", conflicts_with = "id_opt")]
        id: Option<MessageId>,
        /// The message id (as nubos-pilot's `messages-archive --id ID` takes it).
        #[arg(long = "id", id = "id_opt", value_name = "ID")]
        id_opt: Option<MessageId>,
    },
    /// Show the thread a message belongs to, in causal order.
    Thread {
        /// The message id.
        #[arg(required_unless_present = "id_opt", conflicts_with = "id_opt")]
        id: Option<MessageId>,
        /// The message id (as `--id ID`).
        #[arg(long = "id", id = "id_opt", value_name = "ID")]
        id_opt: Option<MessageId>,
    },
    /// List a task's requests still waiting for a reply (the commit gate).
    Pending {
        /// The task.
        task: TaskId,
        /// Exit 1 while any request waits (the gate is closed), for a
        /// commit hook or a script.
        #[arg(long)]
        check: bool,
        /// Wait up to DURATION (30s, 5m, 500ms) for the gate to open:
        /// return as soon as no request waits, or at the end with those
        /// still waiting then.
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        wait: Option<Duration>,
    },
    /// Move a committed task's messages into archive/by-task/.
    Sweep {
        /// The task.
        task: TaskId,
    },
    /// Find (and with --fix repair) problems in the mail folder only.
    Doctor(DoctorArgs),
}

/// Where `mail inbox --since` starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Since {
    /// Messages whose id sorts after this one.
    Id(MessageId),
    /// Messages created strictly after this instant.
    Time(Timestamp),
}

/// An RFC 3339 time, or a message id in the seed's form (the only ids
/// that sort in send order). Anything else is refused: taken as an id, a
/// date or an age would compare as text and hide every message.
fn parse_since(text: &str) -> Result<Since, String> {
    if let Ok(t) = text.parse::<Timestamp>() {
        return Ok(Since::Time(t));
    }
    MessageId::new(text)
        .ok()
        .filter(MessageId::is_seed_form)
        .map(Since::Id)
        .ok_or_else(|| {
            "neither an RFC 3339 time (2026-11-28T09:30:00Z) nor a message id \
             ({unix-ms}-{uuid})"
                .to_owned()
        })
}

/// `chipset mail send ...`.
#[derive(Debug, Args)]
pub(crate) struct MailSend {
    /// The sender.
    #[arg(long, value_name = "A", env = super::AGENT_ENV)]
    pub(crate) from: AgentId,
    /// The addressee, or a group: agents and lists, comma-separated
    /// (`a,b,c`, `@list` for the agents on a list, `@all` for every
    /// registered agent but the sender). A group gets one copy per agent,
    /// each in its inbox; its names must be registered.
    #[arg(long, value_name = "B|A,B|@LIST|@all")]
    pub(crate) to: chipset::directory::Recipients,
    /// request (expects a reply), response (answers --in-reply-to) or notify.
    #[arg(long, value_name = "KIND")]
    pub(crate) kind: MailKind,
    /// A kebab-case topic.
    #[arg(long, value_name = "S")]
    pub(crate) subject: String,
    /// The text; `-` reads it from standard input.
    #[arg(long, value_name = "TEXT", required_unless_present = "body_file")]
    pub(crate) body: Option<String>,
    /// Read the text from this file.
    #[arg(long, value_name = "PATH", conflicts_with = "body")]
    pub(crate) body_file: Option<PathBuf>,
    /// The task (required for request and notify; a response takes its request's).
    #[arg(long, visible_alias = "phase", value_name = "T")]
    pub(crate) task: Option<TaskId>,
    /// For a request to a group: pending until `all` recipients answer
    /// (the default) or until `any` one does. Without a value, accepted for
    /// nubos-pilot's scripts: a request expects a reply anyway (refused with
    /// the other kinds, which cannot).
    #[arg(
        long,
        value_name = "all|any",
        num_args = 0..=1,
        require_equals = false,
        default_missing_value = "all"
    )]
    pub(crate) expects_reply: Option<MailExpects>,
    /// The round within the task, 0 to 2^53 [default: none, written `null`].
    #[arg(long, value_name = "N")]
    pub(crate) round: Option<u64>,
    /// The message this one replies to (required for a response).
    #[arg(long, value_name = "ID")]
    pub(crate) in_reply_to: Option<MessageId>,
    /// urgent, normal or low [default: normal].
    #[arg(long, value_name = "P")]
    pub(crate) priority: Option<MailPriority>,
    /// The message's id (`{unix-ms}-{uuid-v4}`), to make a retry safe:
    /// sending again with the same id and content (every field but the
    /// time) prints the first delivery's id and writes no second copy,
    /// wherever the message went since; other content is refused.
    #[arg(long, value_name = "ID")]
    pub(crate) id: Option<MessageId>,
}

/// `--expects-reply all|any`, as typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum MailExpects {
    /// Every recipient answers.
    All,
    /// Any one recipient answers.
    Any,
}

/// A mail kind, as typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum MailKind {
    /// Expects a reply.
    Request,
    /// Answers a request.
    Response,
    /// Expects no reply.
    Notify,
}

impl From<MailKind> for chipset_mail::Kind {
    fn from(k: MailKind) -> Self {
        match k {
            MailKind::Request => chipset_mail::Kind::Request,
            MailKind::Response => chipset_mail::Kind::Response,
            MailKind::Notify => chipset_mail::Kind::Notify,
        }
    }
}

/// A mail priority, as typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum MailPriority {
    /// Before anything else.
    Urgent,
    /// The default.
    Normal,
    /// Whenever convenient.
    Low,
}

impl From<MailPriority> for chipset_mail::MailPriority {
    fn from(p: MailPriority) -> Self {
        match p {
            MailPriority::Urgent => chipset_mail::MailPriority::Urgent,
            MailPriority::Normal => chipset_mail::MailPriority::Normal,
            MailPriority::Low => chipset_mail::MailPriority::Low,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_is_a_time_or_an_id() {
        assert_eq!(
            parse_since("2026-11-23T04:36:10.001Z"),
            Ok(Since::Time(Timestamp::from_unix_ms(1_795_408_570_001)))
        );
        assert_eq!(
            parse_since("1795408570001-af0bcc55-dbc3-4b45-a04f-312f26ea7034"),
            Ok(Since::Id(
                MessageId::new("1795408570001-af0bcc55-dbc3-4b45-a04f-312f26ea7034").unwrap()
            ))
        );
        // Neither a time nor an id that sorts: refused, not compared as
        // text (which hid every message).
        for bad in [
            "../x",
            "yesterday",
            "2026-11-28",
            "2026-11-28T00:00:00",
            "2h",
            "msg-42",
        ] {
            assert!(parse_since(bad).is_err(), "{bad}");
        }
    }
}
