//! The on-disk contract: `hooks/{agent}.json` exactly as seed 001 defines it,
//! plus `generation` and `assigned_by`.
//!
//! These serde types are a compatibility boundary with programs in other
//! languages; the golden files in `tests/it/snapshots/` pin them.

use std::fmt;

use chipset_store::{AgentId, BeadId, Timestamp};
use serde::{Deserialize, Serialize};

use crate::state::{Hook, HookState, HookStatus, WorkItem};

/// The file as written: the seed's four fields and two additions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct HookFile {
    agent_id: AgentId,
    status: HookStatus,
    /// Always written (`null` when empty), as the seed requires.
    #[serde(default)]
    work_item: Option<WorkItemFile>,
    last_activity: Timestamp,
    /// Absent in seed-written files, which read as generation 0.
    #[serde(default)]
    generation: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    assigned_by: Option<AgentId>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct WorkItemFile {
    bead_id: BeadId,
    title: String,
    assigned_at: Timestamp,
}

/// Why a well-formed JSON hook still describes an illegal state.
#[derive(Debug)]
pub(crate) struct IllegalHook(&'static str, HookStatus);

impl fmt::Display for IllegalHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "illegal hook: status `{}` {}", self.1, self.0)
    }
}

impl TryFrom<HookFile> for Hook {
    type Error = IllegalHook;

    fn try_from(file: HookFile) -> Result<Self, IllegalHook> {
        let work = file.work_item.map(|w| WorkItem {
            bead_id: w.bead_id,
            title: w.title,
            assigned_at: w.assigned_at,
            assigned_by: file.assigned_by,
        });
        let state = match (file.status, work) {
            (HookStatus::Empty, None) => HookState::Empty,
            (HookStatus::Empty, Some(_)) => {
                return Err(IllegalHook("with a work item", HookStatus::Empty));
            }
            (status, None) => return Err(IllegalHook("without a work item", status)),
            (HookStatus::Pending, Some(w)) => HookState::Pending(w),
            (HookStatus::Active, Some(w)) => HookState::Active(w),
            (HookStatus::Completed, Some(w)) => HookState::Completed(w),
        };
        Ok(Hook {
            agent: file.agent_id,
            state,
            last_activity: file.last_activity,
            generation: file.generation,
        })
    }
}

impl From<&Hook> for HookFile {
    fn from(hook: &Hook) -> Self {
        let work = hook.work();
        HookFile {
            agent_id: hook.agent.clone(),
            status: hook.status(),
            work_item: work.map(|w| WorkItemFile {
                bead_id: w.bead_id.clone(),
                title: w.title.clone(),
                assigned_at: w.assigned_at,
            }),
            last_activity: hook.last_activity,
            generation: hook.generation,
            assigned_by: work.and_then(|w| w.assigned_by.clone()),
        }
    }
}

impl Serialize for Hook {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        HookFile::from(self).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Hook {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Hook::try_from(HookFile::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<Hook, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    #[test]
    fn seed_example_reads_as_active_generation_zero() {
        let hook = parse(
            r#"{ "agent_id": "polecat-alpha", "status": "active", "work_item": { "bead_id": "gt-abc12", "title": "Add README section", "assigned_at": "2026-03-05T10:30:00Z" }, "last_activity": "2026-03-05T10:32:00Z" }"#,
        )
        .unwrap();
        assert_eq!(hook.status(), HookStatus::Active);
        assert_eq!(hook.generation(), 0);
        assert_eq!(hook.work().unwrap().bead_id().as_str(), "gt-abc12");
        assert_eq!(hook.work().unwrap().assigned_by(), None);
    }

    #[test]
    fn unknown_fields_are_ignored() {
        let hook = parse(
            r#"{"agent_id":"a","status":"empty","work_item":null,"last_activity":"2026-03-05T10:32:00Z","color":"blue"}"#,
        )
        .unwrap();
        assert_eq!(hook.status(), HookStatus::Empty);
    }

    #[test]
    fn illegal_combinations_are_refused() {
        let err = parse(
            r#"{"agent_id":"a","status":"pending","work_item":null,"last_activity":"2026-03-05T10:32:00Z"}"#,
        )
        .unwrap_err();
        assert!(
            err.contains("illegal hook: status `pending` without a work item"),
            "{err}"
        );
        let err = parse(
            r#"{"agent_id":"a","status":"empty","work_item":{"bead_id":"b","title":"t","assigned_at":"2026-03-05T10:30:00Z"},"last_activity":"2026-03-05T10:32:00Z"}"#,
        )
        .unwrap_err();
        assert!(err.contains("with a work item"), "{err}");
        assert!(parse(r#"{"agent_id":"a","status":"failed","work_item":null,"last_activity":"2026-03-05T10:32:00Z"}"#).is_err());
        assert!(parse(r#"{"agent_id":"../x","status":"empty","work_item":null,"last_activity":"2026-03-05T10:32:00Z"}"#).is_err());
        assert!(
            parse(
                r#"{"agent_id":"a","status":"empty","work_item":null,"last_activity":"yesterday"}"#
            )
            .is_err()
        );
    }
}
