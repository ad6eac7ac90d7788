//! Shared helpers.

use chipset_nudge::{
    Delivery, NewReminder, Nudge, Nudges, Received, Reminder, ReminderId, Reminders,
};
use chipset_store::{AgentId, Listing, ManualClock, StatePath};
use chipset_testkit::TempState;

pub(crate) use chipset_testkit::{T0, agent};

/// A fresh state root on a manual clock stopped at [`T0`].
pub(crate) fn manual_state() -> (TempState, ManualClock) {
    TempState::manual()
}

/// As [`manual_state`], on a store that skips its syncs: for the model tests.
pub(crate) fn manual_no_sync() -> (TempState, ManualClock) {
    TempState::manual_no_sync()
}

/// Names of the temp files (dot-files ending `.tmp`) under `dir`, recursively.
pub(crate) fn temps_under(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else if name.starts_with('.') && name.ends_with(".tmp") {
                out.push(name);
            }
        }
    }
    out
}

/// The nudge a send wrote, `None` when it was held: [`Delivery::nudge`]
/// unless the delivery is [`Delivery::Held`].
pub(crate) trait DeliveryExt {
    /// The nudge written, or `None` when held.
    fn sent(&self) -> Option<&chipset_nudge::Nudge>;
}

impl DeliveryExt for Delivery {
    fn sent(&self) -> Option<&chipset_nudge::Nudge> {
        (!matches!(self, Delivery::Held { .. })).then(|| self.nudge())
    }
}

/// The nudge to act on, looked up through the read outcome that
/// [`chipset_nudge::Nudges::receive`] returns.
pub(crate) trait ReceivedExt {
    /// [`Received::to_process`] of the value; `None` when there is none.
    fn to_process(&self) -> Option<&chipset_nudge::Nudge>;
}

impl ReceivedExt for chipset_store::ReadOutcome<Received> {
    fn to_process(&self) -> Option<&chipset_nudge::Nudge> {
        match self {
            chipset_store::ReadOutcome::Value(r) => r.to_process(),
            _ => None,
        }
    }
}

/// The seed's reminder kinds (§4.1) these tests name, as `KindRegistry::preset` registers them.
pub(crate) mod preset {
    pub(crate) const WRAP_SESSION: &str = "wrap_session";
    pub(crate) const SPEC_DRAFT: &str = "spec_draft";
    pub(crate) const WIP_UNSEALED: &str = "wip_unsealed";
    pub(crate) const HANDOFF_PENDING: &str = "handoff_pending";
}

/// Where the signal files are, spelled out as the crate docs' file layout
/// gives them, so the tests pin the layout rather than ask the crate.
pub(crate) trait NudgePaths {
    /// `nudge/{agent}/latest.json`.
    fn latest_path(&self, agent: &AgentId) -> StatePath;
    /// `nudge/{agent}/processed.json`.
    fn processed_path(&self, agent: &AgentId) -> StatePath;
    /// `nudge/{sender}/responses/{responder}.json`.
    fn response_path(&self, sender: &AgentId, responder: &AgentId) -> StatePath;
}

impl NudgePaths for Nudges {
    fn latest_path(&self, agent: &AgentId) -> StatePath {
        self.agent_dir(agent).join_static("latest.json")
    }

    fn processed_path(&self, agent: &AgentId) -> StatePath {
        self.agent_dir(agent).join_static("processed.json")
    }

    fn response_path(&self, sender: &AgentId, responder: &AgentId) -> StatePath {
        self.agent_dir(sender)
            .join_static("responses")
            .join_id(responder, ".json")
    }
}

/// A reminder's key as these tests name it: (kind, source type, source id),
/// the fields of a [`NewReminder`] that at most one open reminder shares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReminderKey {
    kind: String,
    source_type: String,
    source_id: String,
}

impl ReminderKey {
    /// The key; the crate checks it when a reminder is opened, so this
    /// cannot fail (a `Result` keeps the call sites' `unwrap`).
    pub(crate) fn new(
        kind: impl Into<String>,
        source_type: impl Into<String>,
        source_id: impl Into<String>,
    ) -> Result<Self, std::convert::Infallible> {
        Ok(ReminderKey {
            kind: kind.into(),
            source_type: source_type.into(),
            source_id: source_id.into(),
        })
    }

    pub(crate) fn kind(&self) -> &str {
        &self.kind
    }

    pub(crate) fn source_type(&self) -> &str {
        &self.source_type
    }

    pub(crate) fn source_id(&self) -> &str {
        &self.source_id
    }
}

/// A request to open the reminder of `key` for `tenant`, with the
/// defaults of [`NewReminder`].
pub(crate) fn new_reminder(
    tenant: &str,
    project: Option<String>,
    key: &ReminderKey,
    message: impl Into<String>,
) -> NewReminder {
    NewReminder {
        tenant_id: tenant.to_owned(),
        project_id: project,
        kind: key.kind.clone(),
        source_type: key.source_type.clone(),
        source_id: key.source_id.clone(),
        message: message.into(),
        ..NewReminder::default()
    }
}

/// Where the reminder files are, spelled out as the crate docs' file layout
/// gives them.
pub(crate) trait ReminderPaths {
    /// `reminders/open/{kind}/{source_type}/{source_id}.json`.
    fn open_path(&self, key: &ReminderKey) -> StatePath;
    /// `reminders/snoozed/{kind}/{source_type}/{source_id}.json`.
    fn snoozed_path(&self, key: &ReminderKey) -> StatePath;
    /// `reminders/history/{id}.json`.
    fn history_path(&self, id: &ReminderId) -> StatePath;
}

fn index_path(r: &Reminders, area: &str, key: &ReminderKey) -> StatePath {
    r.state()
        .channel(Reminders::CHANNEL)
        .join(area)
        .and_then(|p| p.join(key.kind()))
        .and_then(|p| p.join(key.source_type()))
        .and_then(|p| p.join(format!("{}.json", escape(key.source_id()))))
        .unwrap()
}

/// Escapes a source id as the crate docs' file layout says: ASCII letters,
/// digits, `-`, `_`, non-ASCII characters and `.` (except first) stay;
/// every other byte is `%XX`.
fn escape(id: &str) -> String {
    let mut out = String::new();
    for (i, c) in id.chars().enumerate() {
        if c.is_ascii_alphanumeric() || c == '-' || c == '_' || !c.is_ascii() || (c == '.' && i > 0)
        {
            out.push(c);
        } else {
            out.push_str(&format!("%{:02X}", c as u32));
        }
    }
    out
}

impl ReminderPaths for Reminders {
    fn open_path(&self, key: &ReminderKey) -> StatePath {
        index_path(self, "open", key)
    }

    fn snoozed_path(&self, key: &ReminderKey) -> StatePath {
        index_path(self, "snoozed", key)
    }

    fn history_path(&self, id: &ReminderId) -> StatePath {
        self.state()
            .channel(Reminders::CHANNEL)
            .join_static("history")
            .join_id(id, ".json")
    }
}

/// Short ways to look into a reminder in assertions.
pub(crate) trait ReminderExt {
    /// The id of the snoozed reminder this one reopened: its
    /// `metadata.reopened_from`, as the crate docs name it.
    fn reopened_from(&self) -> Option<&str>;
}

impl ReminderExt for Reminder {
    fn reopened_from(&self) -> Option<&str> {
        self.metadata
            .get("reopened_from")
            .and_then(serde_json::Value::as_str)
    }
}

/// The responders' ids, in the order a listing of responses holds them.
pub(crate) fn responders(responses: &Listing<Nudge>) -> Vec<&str> {
    responses.items.iter().map(|n| n.from.as_str()).collect()
}
