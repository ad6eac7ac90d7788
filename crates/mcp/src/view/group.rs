//! The view of a group message sent: `mail send --to a,b` and `mail_send`
//! with several recipients.

use chipset_mail::{GroupSent, MessageId};
use chipset_store::{AgentId, TaskId};
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
}

impl GroupSentView {
    /// Returns the view of `sent`.
    pub fn of(sent: &GroupSent) -> Self {
        let first = sent.messages.first();
        GroupSentView {
            group: sent.id.clone(),
            kind: first.map_or("", |m| m.kind.as_str()).to_owned(),
            from: first.map(|m| m.from.clone()).expect("a group has a copy"),
            task: first.map(|m| m.task().clone()).expect("a group has a copy"),
            expects_reply: first
                .and_then(|m| m.group())
                .and_then(|g| g.expects)
                .map(|e| e.to_string()),
            copies: sent
                .messages
                .iter()
                .map(|m| GroupCopy {
                    id: m.id.clone(),
                    to: m.to.clone(),
                })
                .collect(),
            sender_skipped: sent.sender_skipped,
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
}
