//! The view of a group message sent: `mail send --to a,b` and `mail_send`
//! with several recipients.

use chipset::directory::Role;
use chipset_mail::{Message, MessageId};
use chipset_store::{AgentId, Listing, TaskId};
use schemars::JsonSchema;
use serde::Serialize;

/// One recipient's copy of a group message.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct GroupCopy {
    /// The copy's own id (in the recipient's inbox).
    #[schemars(with = "String")]
    pub id: MessageId,
    /// The recipient.
    #[schemars(with = "String")]
    pub to: AgentId,
}

/// A group message sent: the group id (what a retry passes as `id`), and
/// each recipient's copy.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct GroupSentView {
    /// The group's id.
    #[schemars(with = "String")]
    pub group: MessageId,
    /// request or notify.
    pub kind: String,
    /// The sender.
    #[schemars(with = "String")]
    pub from: AgentId,
    /// The task.
    #[schemars(with = "String")]
    pub task: TaskId,
    /// For a request: `all` (every recipient answers) or `any` (one does).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expects_reply: Option<String>,
    /// Each copy, by recipient name.
    pub copies: Vec<GroupCopy>,
    /// True when the sender was among the recipients and was left out.
    pub sender_skipped: bool,
    /// Members of a `@list` or of `@all` that got no copy: mail cannot
    /// address their names (see [`LEFT_OUT`]).
    #[schemars(with = "Vec<String>")]
    pub left_out: Vec<AgentId>,
}

/// Why a member of a list was left out of a group message.
pub const LEFT_OUT: &str =
    "mail cannot address this name (the seed allows only ASCII letters, digits, `_` and `-`)";

impl GroupSentView {
    /// Returns the view of the `copies`
    /// [`Mail::send_group`](chipset_mail::Mail::send_group) returned;
    /// `sender_skipped` when the sender was among the recipients asked for;
    /// `left_out`, the list members mail could not address.
    ///
    /// # Panics
    ///
    /// When `copies` is empty or its first names no group: `send_group`
    /// returns at least one copy, each naming its group.
    pub fn of(copies: &[Message], sender_skipped: bool, left_out: Vec<AgentId>) -> Self {
        let first = copies.first().expect("a group has a copy");
        let group = first.group().expect("a group's copy names its group");
        GroupSentView {
            group: group.id.clone(),
            kind: first.kind.to_string(),
            from: first.from.clone(),
            task: first.task().clone(),
            expects_reply: group
                .answered_by_any()
                .map(|any| if any { "any" } else { "all" }.to_owned()),
            copies: copies
                .iter()
                .map(|m| GroupCopy {
                    id: m.id.clone(),
                    to: m.to.clone(),
                })
                .collect(),
            sender_skipped,
            left_out,
        }
    }
}

/// A list after `agent list-add|list-remove` and `agent_list_add|remove`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ListMembers {
    /// The list.
    pub list: String,
    /// How many agents' profiles changed (0 for a retry).
    pub changed: usize,
    /// Its members now, sorted.
    #[schemars(with = "Vec<String>")]
    pub members: Vec<AgentId>,
    /// Why each profile that could not be read could not be, each of
    /// which may be a member too (or why none could be).
    pub unreadable: Vec<String>,
}

impl ListMembers {
    /// Returns the view of `list` after `changed` profiles changed, with
    /// its members as [`Directory::members`](chipset::directory::Directory::members)
    /// read them, and a note naming the profiles that could not be read
    /// (each may be a member too), if any. The change is made: a failure
    /// to read the members after it is a note too, never a failure.
    pub fn of(
        list: &Role,
        changed: usize,
        members: Result<Listing<AgentId>, chipset::directory::Error>,
    ) -> (Self, Option<String>) {
        let (members, unreadable, note) = match members {
            Ok(members) => {
                let note = chipset_failure::Failure::unreadable(&members, "profile")
                    .map(|f| format!("{f}; each may be on @{list} too"));
                let unreadable = super::unreadable(&members);
                (members.items, unreadable, note)
            }
            Err(e) => {
                let e = chipset_failure::Failure::from(e).to_string();
                let note = format!("the members could not be read: {e}");
                (Vec::new(), vec![e], Some(note))
            }
        };
        let view = ListMembers {
            list: list.to_string(),
            changed,
            members,
            unreadable,
        };
        (view, note)
    }

    /// Returns its line of text: `add`, agents were added, else removed.
    pub fn text(&self, add: bool) -> String {
        let names: Vec<String> = self.members.iter().map(ToString::to_string).collect();
        format!(
            "{} {} @{}; members: {}\n",
            chipset_failure::plural(self.changed, "agent"),
            if add { "added to" } else { "removed from" },
            self.list,
            match (names.is_empty(), self.unreadable.is_empty()) {
                (true, true) => "none".to_owned(),
                (true, false) => "none readable".to_owned(),
                (false, _) => names.join(", "),
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list() -> Role {
        "reviewers".parse().unwrap()
    }

    #[test]
    fn members_read_after_the_change_are_listed_with_no_note() {
        let mut members = Listing::default();
        for a in ["ann", "bob"] {
            members.items.push(a.parse().unwrap());
        }
        let (view, note) = ListMembers::of(&list(), 1, Ok(members));
        assert_eq!(note, None);
        assert!(view.unreadable.is_empty());
        assert_eq!(
            view.text(true),
            "1 agent added to @reviewers; members: ann, bob\n"
        );
        assert_eq!(
            view.text(false),
            "1 agent removed from @reviewers; members: ann, bob\n"
        );
    }

    /// The change is made: a failure to read the members after it is a
    /// note and an unreadable entry, never an empty list said to be whole.
    #[test]
    fn members_that_cannot_be_read_after_the_change_are_a_note() {
        let e = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let failed =
            chipset::directory::Error::Store(chipset_store::Error::io("list", "/state/agents", e));
        let (view, note) = ListMembers::of(&list(), 2, Err(failed));
        let note = note.expect("a note");
        assert!(
            note.starts_with("the members could not be read: "),
            "{note}"
        );
        assert!(note.contains("/state/agents"), "{note}");
        assert_eq!(view.changed, 2);
        assert!(view.members.is_empty());
        assert_eq!(view.unreadable.len(), 1, "{view:?}");
        assert_eq!(
            view.text(true),
            "2 agents added to @reviewers; members: none readable\n"
        );
    }
}
