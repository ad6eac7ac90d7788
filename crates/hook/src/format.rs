//! The on-disk contract: `hooks/{agent}.json` as seed 001 defines it, plus
//! `generation` and `assigned_by`; read in either key style.
//!
//! Two programs write hooks in the wild: the seed's snake_case form
//! (`agent_id`, `work_item{bead_id,title,assigned_at}`, `last_activity`) and
//! the camelCase form of its author's `StateManager` (`agentId`,
//! `workItem{beadId,title,…}`, `lastActivity`, no `assigned_at`, and no
//! `workItem` at all when empty). Both read as the same [`Hook`]. Chipset
//! always writes the seed form: each camelCase key it understood is replaced
//! by its seed name, and every field it does not know (at the top level and
//! inside the work item) is written back unchanged.
//!
//! These serde types are a compatibility boundary with programs in other
//! languages; the golden files in `tests/it/snapshots/` pin them.

use std::fmt;

use crate::BeadId;
use chipset_store::{AgentId, Timestamp};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::state::{Hook, HookState, HookStatus, WorkItem};

/// The file as found on disk: any JSON object. [`parse`] turns it into a
/// hook; [`From<&Hook>`] writes the seed form with the hook's extra fields.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct HookFile(pub(crate) Map<String, Value>);

/// Why a JSON object is not a hook chipset can use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Invalid {
    /// Well-formed, but a value this version does not know (a new status).
    Unsupported(String),
    /// Not a legal hook: a missing or mistyped field, or an illegal state.
    Corrupt(String),
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Invalid::Unsupported(what) => write!(f, "{what}, which this version does not support"),
            Invalid::Corrupt(why) => f.write_str(why),
        }
    }
}

fn corrupt(why: impl Into<String>) -> Invalid {
    Invalid::Corrupt(why.into())
}

/// Removes the field under its seed name and its camelCase name; both may be
/// present when the two kinds of writer took turns on one file.
fn take_both(
    obj: &mut Map<String, Value>,
    seed: &str,
    camel: &str,
) -> (Option<Value>, Option<Value>) {
    (obj.remove(seed), obj.remove(camel))
}

fn typed<T: DeserializeOwned>(name: &str, v: Value) -> Result<T, Invalid> {
    serde_json::from_value(v).map_err(|e| corrupt(format!("field `{name}`: {e}")))
}

/// Reads a field that may be spelled either way; when both spellings are
/// there they must agree.
fn either<T: DeserializeOwned + PartialEq>(
    obj: &mut Map<String, Value>,
    seed: &str,
    camel: &str,
) -> Result<Option<T>, Invalid> {
    match take_both(obj, seed, camel) {
        (None, None) => Ok(None),
        (Some(v), None) => typed(seed, v).map(Some),
        (None, Some(v)) => typed(camel, v).map(Some),
        (Some(a), Some(b)) => {
            let a: T = typed(seed, a)?;
            let b: T = typed(camel, b)?;
            if a == b {
                Ok(Some(a))
            } else {
                Err(corrupt(format!("`{seed}` and `{camel}` disagree")))
            }
        }
    }
}

fn parse_status(v: Option<Value>) -> Result<HookStatus, Invalid> {
    match v {
        Some(Value::String(s)) => match s.as_str() {
            "empty" => Ok(HookStatus::Empty),
            "pending" => Ok(HookStatus::Pending),
            "active" => Ok(HookStatus::Active),
            "completed" => Ok(HookStatus::Completed),
            _ => Err(Invalid::Unsupported(format!("hook status `{s}`"))),
        },
        Some(other) => Err(corrupt(format!("field `status`: {other} is not a string"))),
        None => Err(corrupt("missing field `status`")),
    }
}

/// Reads the work item; `assigned_at` defaults to `fallback` (the hook's
/// `last_activity`) when the writer does not record it, as camelCase writers do not.
fn parse_work(
    name: &str,
    v: Value,
    fallback: Timestamp,
    by: Option<AgentId>,
) -> Result<Option<WorkItem>, Invalid> {
    let mut obj = match v {
        Value::Null => return Ok(None),
        Value::Object(obj) => obj,
        other => {
            return Err(corrupt(format!(
                "field `{name}`: {other} is not an object or null"
            )));
        }
    };
    let bead_id: BeadId = either(&mut obj, "bead_id", "beadId")?
        .ok_or_else(|| corrupt(format!("field `{name}`: missing field `bead_id`")))?;
    let title: String = match obj.remove("title") {
        Some(v) => typed("title", v)?,
        None => return Err(corrupt(format!("field `{name}`: missing field `title`"))),
    };
    let assigned_at: Timestamp = either(&mut obj, "assigned_at", "assignedAt")?.unwrap_or(fallback);
    Ok(Some(WorkItem {
        bead_id,
        title,
        assigned_at,
        assigned_by: by,
        extra: obj,
    }))
}

/// Turns a JSON object in either key style into a legal [`Hook`], keeping
/// every field it does not know.
pub(crate) fn parse(file: HookFile) -> Result<Hook, Invalid> {
    let mut obj = file.0;
    let agent: AgentId = either(&mut obj, "agent_id", "agentId")?
        .ok_or_else(|| corrupt("missing field `agent_id`"))?;
    let status = parse_status(obj.remove("status"))?;
    // A file both kinds of writer touched keeps the newer activity: a camelCase
    // writer updates `lastActivity` and leaves `last_activity` as it found it.
    let last_activity = match take_both(&mut obj, "last_activity", "lastActivity") {
        (None, None) => return Err(corrupt("missing field `last_activity`")),
        (Some(v), None) => typed("last_activity", v)?,
        (None, Some(v)) => typed("lastActivity", v)?,
        (Some(a), Some(b)) => {
            let a: Timestamp = typed("last_activity", a)?;
            let b: Timestamp = typed("lastActivity", b)?;
            a.max(b)
        }
    };
    let generation: u64 = match obj.remove("generation") {
        Some(v) => typed("generation", v)?,
        None => 0,
    };
    let by: Option<AgentId> = match obj.remove("assigned_by") {
        Some(v) => typed("assigned_by", v)?,
        None => None,
    };
    let work = match take_both(&mut obj, "work_item", "workItem") {
        (None, None) => None,
        (Some(v), None) => parse_work("work_item", v, last_activity, by)?,
        (None, Some(v)) => parse_work("workItem", v, last_activity, by)?,
        (Some(a), Some(b)) => {
            let a = parse_work("work_item", a, last_activity, by.clone())?;
            let b = parse_work("workItem", b, last_activity, by)?;
            match (a, b) {
                (Some(a), Some(b)) if a.bead_id != b.bead_id => {
                    return Err(corrupt("`work_item` and `workItem` name different beads"));
                }
                (Some(w), _) | (None, Some(w)) => Some(w),
                (None, None) => None,
            }
        }
    };
    let illegal = |what: &str| corrupt(format!("illegal hook: status `{status}` {what}"));
    let state = match (status, work) {
        (HookStatus::Empty, None) => HookState::Empty,
        (HookStatus::Empty, Some(_)) => return Err(illegal("with a work item")),
        (_, None) => return Err(illegal("without a work item")),
        (HookStatus::Pending, Some(w)) => HookState::Pending(w),
        (HookStatus::Active, Some(w)) => HookState::Active(w),
        (HookStatus::Completed, Some(w)) => HookState::Completed(w),
    };
    Ok(Hook {
        agent,
        state,
        last_activity,
        generation,
        extra: obj,
    })
}

fn json<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("hook fields serialize to JSON")
}

impl From<&Hook> for HookFile {
    /// Writes the seed form: the seed's four fields (`work_item` is `null`
    /// when empty), `generation`, `assigned_by` when known, and the fields
    /// this version does not know, unchanged.
    fn from(hook: &Hook) -> Self {
        let mut obj = hook.extra.clone();
        let work = hook.state.work();
        let work_value = work.map_or(Value::Null, |w| {
            let mut item = w.extra.clone();
            item.insert("bead_id".into(), json(&w.bead_id));
            item.insert("title".into(), json(&w.title));
            item.insert("assigned_at".into(), json(&w.assigned_at));
            Value::Object(item)
        });
        obj.insert("agent_id".into(), json(&hook.agent));
        obj.insert("status".into(), json(&hook.state.status()));
        obj.insert("work_item".into(), work_value);
        obj.insert("last_activity".into(), json(&hook.last_activity));
        obj.insert("generation".into(), json(&hook.generation));
        if let Some(by) = work.and_then(|w| w.assigned_by.as_ref()) {
            obj.insert("assigned_by".into(), json(by));
        }
        HookFile(obj)
    }
}

impl Serialize for Hook {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        HookFile::from(self).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Hook {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        parse(HookFile::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<Hook, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    fn raw(json: &str) -> Result<Hook, Invalid> {
        super::parse(serde_json::from_str(json).unwrap())
    }

    #[test]
    fn seed_example_reads_as_active_generation_zero() {
        let hook = parse(
            r#"{ "agent_id": "polecat-alpha", "status": "active", "work_item": { "bead_id": "gt-abc12", "title": "Add README section", "assigned_at": "2026-03-05T10:30:00Z" }, "last_activity": "2026-03-05T10:32:00Z" }"#,
        )
        .unwrap();
        assert_eq!(hook.state.status(), HookStatus::Active);
        assert_eq!(hook.generation, 0);
        assert_eq!(hook.state.work().unwrap().bead_id.as_str(), "gt-abc12");
        assert_eq!(hook.state.work().unwrap().assigned_by, None);
        assert!(hook.extra.is_empty());
    }

    #[test]
    fn unknown_fields_are_kept_and_written_back() {
        let hook = parse(
            r#"{"agent_id":"a","status":"empty","work_item":null,"last_activity":"2026-03-05T10:32:00Z","color":"blue"}"#,
        )
        .unwrap();
        assert_eq!(hook.state.status(), HookStatus::Empty);
        assert_eq!(hook.extra.get("color"), Some(&Value::from("blue")));
        let back = serde_json::to_value(&hook).unwrap();
        assert_eq!(back["color"], "blue");
    }

    #[test]
    fn camel_case_reads_as_the_same_hook_and_writes_the_seed_form() {
        let hook = parse(
            r#"{"agentId":"polecat-alpha","lastActivity":"2026-11-23T04:36:15.101Z","status":"active",
                "workItem":{"beadId":"bead-1","description":"d","hookStatus":"empty","priority":"P2","status":"open","title":"T"}}"#,
        )
        .unwrap();
        let work = hook.state.work().unwrap();
        assert_eq!(work.bead_id.as_str(), "bead-1");
        assert_eq!(work.assigned_at, hook.last_activity);
        assert_eq!(work.extra.len(), 4);
        let back = serde_json::to_value(&hook).unwrap();
        assert_eq!(
            back,
            serde_json::json!({
                "agent_id": "polecat-alpha", "generation": 0, "last_activity": "2026-11-23T04:36:15.101Z",
                "status": "active",
                "work_item": {"assigned_at": "2026-11-23T04:36:15.101Z", "bead_id": "bead-1", "description": "d",
                              "hookStatus": "empty", "priority": "P2", "status": "open", "title": "T"}
            })
        );
        let empty =
            parse(r#"{"agentId":"a","lastActivity":"2026-11-23T04:36:15.107Z","status":"empty"}"#)
                .unwrap();
        assert_eq!(empty.state.status(), HookStatus::Empty);
    }

    #[test]
    fn mixed_styles_keep_the_newer_activity_and_refuse_disagreement() {
        let hook = parse(
            r#"{"agent_id":"a","status":"empty","work_item":null,"last_activity":"2026-03-05T10:32:00Z","lastActivity":"2026-03-05T10:40:00Z"}"#,
        )
        .unwrap();
        assert_eq!(hook.last_activity.to_string(), "2026-03-05T10:40:00.000Z");
        let err = parse(r#"{"agent_id":"a","agentId":"b","status":"empty","last_activity":"2026-03-05T10:32:00Z"}"#)
            .unwrap_err();
        assert!(err.contains("`agent_id` and `agentId` disagree"), "{err}");
    }

    #[test]
    fn both_work_item_spellings_must_name_one_bead_and_the_seed_form_wins() {
        let both = |camel_bead: &str| {
            raw(&format!(
                r#"{{"agent_id":"a","status":"pending","last_activity":"2026-03-05T10:32:00Z",
                    "work_item":{{"bead_id":"b1","title":"seed","assigned_at":"2026-03-05T10:30:00Z"}},
                    "workItem":{{"beadId":"{camel_bead}","title":"camel"}}}}"#
            ))
        };
        let hook = both("b1").unwrap();
        assert_eq!(hook.state.work().unwrap().title, "seed");
        assert_eq!(
            both("b2").unwrap_err(),
            corrupt("`work_item` and `workItem` name different beads")
        );
    }

    #[test]
    fn an_unknown_status_is_unsupported_not_corrupt() {
        let r = raw(
            r#"{"agent_id":"a","status":"paused","work_item":null,"last_activity":"2026-03-05T10:32:00Z"}"#,
        );
        assert_eq!(
            r.unwrap_err(),
            Invalid::Unsupported("hook status `paused`".into())
        );
        let r = raw(
            r#"{"agent_id":"a","status":7,"work_item":null,"last_activity":"2026-03-05T10:32:00Z"}"#,
        );
        assert!(matches!(r.unwrap_err(), Invalid::Corrupt(_)));
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
        assert!(parse(r#"{"agent_id":"../x","status":"empty","work_item":null,"last_activity":"2026-03-05T10:32:00Z"}"#).is_err());
        assert!(parse(r#"{"agent_id":"a","status":"pending","work_item":{"title":"t"},"last_activity":"2026-03-05T10:32:00Z"}"#).is_err());
        assert!(parse(r#"["a"]"#).is_err());
        assert!(
            parse(
                r#"{"agent_id":"a","status":"empty","work_item":null,"last_activity":"yesterday"}"#
            )
            .is_err()
        );
    }
}
