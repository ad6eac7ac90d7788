//! The on-disk contract of an agent's own files: presence, control lines,
//! the registry built from them, and the reminder state.

use std::collections::BTreeMap;

use chipset_store::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{EventId, check_label};
use crate::error::{Error, Result};

/// A running agent's presence: `bus/{agent}/presence.json`.
///
/// Presence is transient and separate from availability (the queue exists):
/// a stale or missing presence never deletes or blocks a queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Presence {
    /// The process id of the session that registered.
    pub pid: u32,
    /// When that session started.
    pub started_at: Timestamp,
    /// When it last said it was alive.
    pub last_seen: Timestamp,
    /// Fields another writer added that this version does not know; a
    /// heartbeat keeps them, a new session starts without them.
    #[serde(flatten, default)]
    pub extra: Map<String, Value>,
}

/// What a control command does to the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ControlOp {
    /// Add the resource (a no-op when it is registered already).
    Register,
    /// Remove the resource (a no-op when it is not registered).
    Unregister,
}

/// A resource an agent wants watched: a chat, another queue, a hub…
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Resource {
    /// What sort of resource (`chat`, `queue`, `hub`…).
    pub kind: String,
    /// Where it is (a path such as `.nbs/chat/debug.chat`, an agent id…).
    pub target: String,
}

impl Resource {
    /// Returns a resource of `kind` at `target`.
    pub fn new(kind: impl Into<String>, target: impl Into<String>) -> Self {
        Resource {
            kind: kind.into(),
            target: target.into(),
        }
    }

    pub(crate) fn check(&self) -> Result<()> {
        check_label("resource kind", &self.kind)?;
        if self.target.is_empty() {
            return Err(Error::invalid(
                "resource target",
                &self.target,
                "must not be empty",
            ));
        }
        if self.target.len() > 4096 || self.target.contains(['\n', '\r', '\0']) {
            return Err(Error::invalid(
                "resource target",
                &self.target,
                "must be at most 4096 bytes without newlines or NUL",
            ));
        }
        Ok(())
    }
}

/// One command for the agent's wrapper: register or unregister a resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ControlCommand {
    /// What to do.
    pub(crate) op: ControlOp,
    /// To which resource.
    #[serde(flatten)]
    pub(crate) resource: Resource,
}

/// One line of `bus/{agent}/control.jsonl`: a command and when it was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ControlLine {
    /// When the command was appended.
    pub(crate) at: Timestamp,
    /// The command.
    #[serde(flatten)]
    pub(crate) command: ControlCommand,
}

/// The registry built from the control log: `bus/{agent}/registry.json`.
///
/// It stores the log offset it has applied up to, and both are replaced in
/// one atomic write, so a crash never applies a line twice or skips one.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Registry {
    /// The byte offset in `control.jsonl` up to which commands are applied.
    pub applied_offset: u64,
    /// The registered resources, sorted by kind then target, each with
    /// the time of the register command that added it. In the file, a
    /// list of `{kind, target, registered_at}` in that order.
    #[serde(with = "registered")]
    pub resources: BTreeMap<Resource, Timestamp>,
    /// Fields another writer added that this version does not know, kept
    /// when the registry is rewritten.
    #[serde(flatten, default)]
    pub extra: Map<String, Value>,
}

/// The registry's resources as the file lists them.
mod registered {
    use std::collections::BTreeMap;

    use chipset_store::Timestamp;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::Resource;

    /// One entry of the list.
    #[derive(Serialize, Deserialize)]
    struct Entry<R> {
        #[serde(flatten)]
        resource: R,
        registered_at: Timestamp,
    }

    pub(super) fn serialize<S: Serializer>(
        map: &BTreeMap<Resource, Timestamp>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(map.iter().map(|(resource, at)| Entry {
            resource,
            registered_at: *at,
        }))
    }

    /// Reads the list; a resource listed twice (by another writer) keeps
    /// its first time.
    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<Resource, Timestamp>, D::Error> {
        let mut map = BTreeMap::new();
        for e in Vec::<Entry<Resource>>::deserialize(d)? {
            map.entry(e.resource).or_insert(e.registered_at);
        }
        Ok(map)
    }
}

/// When each unacknowledged event was last reminded: `bus/{agent}/nag.json`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub(crate) struct NagState {
    /// Event id to the time of its last reminder.
    pub(crate) reminded: BTreeMap<EventId, Timestamp>,
    /// Fields another writer added that this version does not know.
    #[serde(flatten, default)]
    pub(crate) extra: Map<String, Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file lists the resources in kind-then-target order, and a
    /// resource another writer listed twice keeps its first time.
    #[test]
    fn a_registry_file_lists_its_resources_in_order() {
        let text = r#"{"applied_offset":7,"resources":[
            {"kind":"queue","target":"w","registered_at":"2026-03-05T10:35:00.002Z"},
            {"kind":"chat","target":"a","registered_at":"2026-03-05T10:35:00.001Z"},
            {"kind":"queue","target":"w","registered_at":"2026-03-05T10:35:00.003Z"}]}"#;
        let registry: Registry = serde_json::from_str(text).unwrap();
        let w = Resource::new("queue", "w");
        assert_eq!(
            registry.resources[&w],
            Timestamp::from_unix_ms(1_772_706_900_002)
        );
        let back = serde_json::to_value(&registry).unwrap();
        let kinds: Vec<_> = back["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["chat", "queue"]);
        assert_eq!(back["applied_offset"], 7);
    }
}
