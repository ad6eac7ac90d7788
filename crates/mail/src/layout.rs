//! Where mail's files live under `mail/`, and where a message can be.

use std::fmt;

use crate::MessageId;
use chipset_store::{AgentId, StatePath, TaskId};

use crate::format::Kind;

/// Where a message is now. A message is in exactly one place; it moves only
/// forward: inbox → archive → by-task, or inbox → by-task, or inbox → orphan.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Location {
    /// Unread (or read but not archived) in `inbox/{agent}/`.
    Inbox(AgentId),
    /// Archived in `archive/`.
    Archive,
    /// Swept with its committed task into `archive/by-task/{task}/`.
    ByTask(TaskId),
    /// Moved aside by the doctor into `archive/orphan/`.
    Orphan,
}

impl Location {
    /// The order in which a search must look so that a message moving
    /// forward at the same time is never missed.
    pub(crate) fn stage(&self) -> u8 {
        match self {
            Location::Inbox(_) => 0,
            Location::Archive => 1,
            Location::Orphan => 2,
            Location::ByTask(_) => 3,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Inbox(agent) => write!(f, "inbox/{agent}"),
            Location::Archive => f.write_str("archive"),
            Location::ByTask(task) => write!(f, "archive/by-task/{task}"),
            Location::Orphan => f.write_str("archive/orphan"),
        }
    }
}

pub(crate) const INBOX: &str = "inbox";
pub(crate) const ARCHIVE: &str = "archive";
pub(crate) const BY_TASK: &str = "by-task";
pub(crate) const ORPHAN: &str = "orphan";
pub(crate) const REPLIES: &str = "replies";
pub(crate) const MANIFEST: &str = "manifest.jsonl";
const EXT: &str = ".json";

/// Paths under the `mail/` channel directory, each a [`StatePath`]: the
/// channel's directory and checked segments (agents, tasks and message ids
/// are validated ids; the rest are this file's constants).
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    mail: StatePath,
}

impl Layout {
    pub(crate) fn new(mail: StatePath) -> Self {
        Layout { mail }
    }

    pub(crate) fn mail(&self) -> &StatePath {
        &self.mail
    }

    pub(crate) fn inbox_root(&self) -> StatePath {
        self.mail.join_static(INBOX)
    }

    pub(crate) fn inbox(&self, agent: &AgentId) -> StatePath {
        self.inbox_root().join_id(agent, "")
    }

    pub(crate) fn archive_root(&self) -> StatePath {
        self.mail.join_static(ARCHIVE)
    }

    pub(crate) fn by_task_root(&self) -> StatePath {
        self.archive_root().join_static(BY_TASK)
    }

    pub(crate) fn by_task(&self, task: &TaskId) -> StatePath {
        self.by_task_root().join_id(task, "")
    }

    pub(crate) fn orphan_root(&self) -> StatePath {
        self.archive_root().join_static(ORPHAN)
    }

    pub(crate) fn dir_of(&self, location: &Location) -> StatePath {
        match location {
            Location::Inbox(agent) => self.inbox(agent),
            Location::Archive => self.archive_root(),
            Location::ByTask(task) => self.by_task(task),
            Location::Orphan => self.orphan_root(),
        }
    }

    pub(crate) fn file(&self, location: &Location, id: &MessageId) -> StatePath {
        self.dir_of(location).join_id(id, EXT)
    }

    pub(crate) fn replies_root(&self) -> StatePath {
        self.mail.join_static(REPLIES)
    }

    pub(crate) fn replies(&self, parent: &MessageId) -> StatePath {
        self.replies_root().join_id(parent, "")
    }

    pub(crate) fn reply_marker(
        &self,
        parent: &MessageId,
        kind: Kind,
        child: &MessageId,
    ) -> StatePath {
        self.replies(parent)
            .join(marker_name(kind, child))
            .expect("a kind's name, `-` and a message id make one safe segment")
    }

    pub(crate) fn manifest(&self) -> StatePath {
        self.mail.join_static(MANIFEST)
    }
}

#[cfg(test)]
pub(crate) fn file_name(id: &MessageId) -> String {
    format!("{id}{EXT}")
}

/// Returns the id a message file name stands for, or `None` for a name that
/// is not `{id}.json` with a valid id.
pub(crate) fn id_of(name: &str) -> Option<MessageId> {
    name.strip_suffix(EXT).and_then(|s| MessageId::new(s).ok())
}

/// The id part of `name` when it is `{id}.json` with a valid id, as
/// [`id_of`] checks it, without making the id: for walks over thousands of
/// names.
pub(crate) fn message_stem(name: &str) -> Option<&str> {
    let stem = name.strip_suffix(EXT)?;
    chipset_store::__private::validate_segment(MessageId::KIND, stem).ok()?;
    Some(stem)
}

/// Returns true for a name no program of the seed reads as a message: it
/// does not end in `.json` (`notes.txt`, an editor's swap file). Listings
/// and the gate skip it; the doctor reports it.
pub(crate) fn never_a_message(name: &str) -> bool {
    !name.ends_with(EXT)
}

pub(crate) fn marker_name(kind: Kind, child: &MessageId) -> String {
    format!("{kind}-{child}{EXT}")
}

/// Parses a reply-marker name, `{kind}-{id}.json`.
pub(crate) fn parse_marker(name: &str) -> Option<(Kind, MessageId)> {
    let (kind, rest) = name.split_once('-')?;
    Some((Kind::from_name(kind)?, id_of(rest)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let id = MessageId::new("1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab").unwrap();
        assert_eq!(id_of(&file_name(&id)), Some(id.clone()));
        assert_eq!(
            parse_marker(&marker_name(Kind::Response, &id)),
            Some((Kind::Response, id))
        );
        assert_eq!(id_of("notes.txt"), None);
        assert_eq!(id_of(".json"), None);
        assert_eq!(parse_marker("answer-1-a.json"), None);
    }
}
