//! The on-disk contract: serde types for `nudge/` and `reminders/`.
//!
//! These types are a compatibility boundary. Nudges keep the seed's five
//! fields with the seed's names and types; the extra fields (`id`,
//! `in_reply_to`) are optional on read so a nudge written by a seed program
//! is read, and are ignored by seed readers. Golden files pin the bytes.

use std::fmt;

use chipset_store::Timestamp;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

chipset_store::define_id! {
    /// A nudge id (`{unix-ms}-{uuid-v4}` when made here): tells apart two
    /// nudges with the same timestamp.
    pub struct NudgeId("nudge id");
}

chipset_store::define_id! {
    /// A reminder id (`{unix-ms}-{uuid-v4}`), the name of its history file.
    pub struct ReminderId("reminder id");
}

/// How urgent a nudge type is, lowest first (see [`NudgeType::urgency`]):
/// the rank behind the send's abort precedence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Urgency {
    /// `nudge_response`: an answer.
    Response,
    /// `health_check`, `priority_change`, `sync_request`, and types this version does not know.
    Routine,
    /// `stall_warning`.
    Warning,
    /// `abort`: terminal; an unprocessed one is replaced only by another `abort`.
    Terminal,
}

/// A nudge's `type`.
///
/// The seed's five types plus `nudge_response`. A type this version does not
/// know (written by another agent) is kept verbatim as [`NudgeType::Unknown`]
/// and written back unchanged; it is not an error.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NudgeType {
    /// `health_check`: is the agent alive and working?
    HealthCheck,
    /// `stall_warning`: the agent has not reported activity.
    StallWarning,
    /// `priority_change`: a work item's priority changed.
    PriorityChange,
    /// `abort`: stop current work now.
    Abort,
    /// `sync_request`: synchronize state.
    SyncRequest,
    /// `nudge_response`: an answer to a nudge that required one.
    NudgeResponse,
    /// Any other type, kept verbatim.
    Unknown(String),
}

impl NudgeType {
    /// Returns the type for `name`; names this version does not know become [`NudgeType::Unknown`].
    pub(crate) fn from_name(name: &str) -> Self {
        match name {
            "health_check" => NudgeType::HealthCheck,
            "stall_warning" => NudgeType::StallWarning,
            "priority_change" => NudgeType::PriorityChange,
            "abort" => NudgeType::Abort,
            "sync_request" => NudgeType::SyncRequest,
            "nudge_response" => NudgeType::NudgeResponse,
            other => NudgeType::Unknown(other.to_owned()),
        }
    }

    /// Returns the name as written in `type` (and as displayed).
    pub(crate) fn as_str(&self) -> &str {
        match self {
            NudgeType::HealthCheck => "health_check",
            NudgeType::StallWarning => "stall_warning",
            NudgeType::PriorityChange => "priority_change",
            NudgeType::Abort => "abort",
            NudgeType::SyncRequest => "sync_request",
            NudgeType::NudgeResponse => "nudge_response",
            NudgeType::Unknown(name) => name,
        }
    }

    /// Returns how urgent this type is.
    ///
    /// The order is `abort` > `stall_warning` > `health_check` =
    /// `priority_change` = `sync_request` = unknown types > `nudge_response`.
    /// Only the top level holds: an unprocessed `abort` is replaced only by
    /// another `abort`.
    pub(crate) fn urgency(&self) -> Urgency {
        match NudgeType::from_name(self.as_str()) {
            NudgeType::Abort => Urgency::Terminal,
            NudgeType::StallWarning => Urgency::Warning,
            NudgeType::NudgeResponse => Urgency::Response,
            _ => Urgency::Routine,
        }
    }

    /// Returns true when an unprocessed nudge of this type must not be
    /// replaced by one of type `incoming`: the pending one is terminal
    /// (`abort`) and the incoming one is less urgent. Every other pending
    /// nudge is replaced (latest wins, as in the seed).
    pub(crate) fn holds_against(&self, incoming: &NudgeType) -> bool {
        self.urgency() == Urgency::Terminal && incoming.urgency() < Urgency::Terminal
    }
}

impl fmt::Display for NudgeType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for NudgeType {
    fn from(name: &str) -> Self {
        NudgeType::from_name(name)
    }
}

impl Serialize for NudgeType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for NudgeType {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Ok(NudgeType::from_name(&name))
    }
}

/// One nudge: the contents of `nudge/{agent}/latest.json` (and of a
/// per-responder record, for responses).
///
/// The recipient is the directory, never a field. Fields this version does
/// not know are kept in [`Nudge::extra`] and written back with the nudge
/// (into `processed.json`'s `last`); a new nudge starts without them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Nudge {
    /// The sender's agent id (seed field).
    pub from: String,
    /// The nudge type (seed field `type`).
    #[serde(rename = "type")]
    pub kind: NudgeType,
    /// Human-readable content (seed field).
    pub message: String,
    /// When it was sent (seed field), RFC 3339.
    pub timestamp: Timestamp,
    /// Whether the recipient must answer (seed field).
    pub requires_response: bool,
    /// Extra field: a unique id, so two nudges with one timestamp are told
    /// apart. Absent in nudges written by seed programs. A value another
    /// program wrote that is not a valid id reads as absent: it is our extra,
    /// and must not make the seed's nudge (an abort, say) unreadable.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_id"
    )]
    pub id: Option<NudgeId>,
    /// Extra field on responses: the id of the nudge answered, when it had
    /// one. Read as leniently as `id`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_id"
    )]
    pub in_reply_to: Option<NudgeId>,
    /// Fields written by another program that this version does not know,
    /// kept as they are.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Reads an optional id, taking anything that is not a valid id as absent.
fn lenient_id<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<NudgeId>, D::Error> {
    let value = serde_json::Value::deserialize(d)?;
    Ok(value.as_str().and_then(|s| NudgeId::new(s).ok()))
}

impl Nudge {
    /// Returns true when `other` is the same nudge: the same id when both
    /// have one, otherwise every field equal (two seed-written nudges that
    /// agree in every field, timestamp included, cannot be told apart).
    pub(crate) fn is_same(&self, other: &Nudge) -> bool {
        match (&self.id, &other.id) {
            (Some(a), Some(b)) => a == b,
            _ => self == other,
        }
    }
}

/// What a recipient has processed: `nudge/{agent}/processed.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ProcessedRecord {
    /// The last nudge processed, as it was read.
    pub(crate) last: Nudge,
    /// When it was marked processed.
    pub(crate) processed_at: Timestamp,
    /// How many nudges this agent has marked processed in all.
    pub(crate) count: u64,
    /// Fields written by another program that this version does not know,
    /// kept when the record is rewritten.
    #[serde(flatten)]
    pub(crate) extra: Map<String, Value>,
}

/// A reminder's severity (seed §4: `info | nudge`, default `nudge`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Severity {
    /// Informational.
    Info,
    /// A nudge (the default).
    #[default]
    Nudge,
    /// Reserved by the seed for a future spec; opening a reminder with it is
    /// refused with [`Error::BlockingSeverity`](crate::Error::BlockingSeverity).
    Blocking,
}

/// How a reminder was resolved (seed §4 `resolution`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Resolution {
    /// Done, by hand.
    Completed,
    /// Dismissed, by hand.
    Ignored,
    /// Put off until `snooze_until`; it then reopens as a new reminder.
    Snoozed,
    /// Cleared by the resolving verb of its kind.
    AutoCleared,
}

impl Resolution {
    /// Returns the name as written in `resolution` (and as displayed).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Resolution::Completed => "completed",
            Resolution::Ignored => "ignored",
            Resolution::Snoozed => "snoozed",
            Resolution::AutoCleared => "auto_cleared",
        }
    }
}

impl fmt::Display for Resolution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One reminder: a row of the seed's `nudges` table, every column, written
/// with `null` for unset ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reminder {
    /// Its id (seed `id`).
    pub id: ReminderId,
    /// Organisation scope (seed `tenant_id`).
    pub tenant_id: String,
    /// Project scope (seed `project_id`); `null` for organisation-level reminders.
    pub project_id: Option<String>,
    /// A registered kind (seed `kind`).
    pub kind: String,
    /// What it refers to (seed `source_type`): the kind's canonical source type.
    pub source_type: String,
    /// Which one (seed `source_id`).
    pub source_id: String,
    /// Human-readable prompt (seed `message`).
    pub message: String,
    /// Offered actions (seed `actions`).
    pub actions: Vec<String>,
    /// Severity (seed `severity`).
    pub severity: Severity,
    /// When it was opened (seed `created_at`).
    pub created_at: Timestamp,
    /// When it was resolved; `null` while open (seed `resolved_at`).
    pub resolved_at: Option<Timestamp>,
    /// The verb that resolved it (seed `resolved_by_verb`).
    pub resolved_by_verb: Option<String>,
    /// How it was resolved; `null` while open (seed `resolution`).
    pub resolution: Option<Resolution>,
    /// A note given on manual resolution (seed `resolution_note`).
    pub resolution_note: Option<String>,
    /// When a snoozed reminder reopens (seed `snooze_until`).
    pub snooze_until: Option<Timestamp>,
    /// Kind-specific extras (seed `metadata`); a reopened reminder has
    /// `reopened_from` naming the one it came from.
    pub metadata: Map<String, Value>,
    /// Columns written by another program that this version does not know,
    /// kept through every rewrite (resolve, snooze, reopen).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Reminder {
    /// Returns what a reminder record holds that this version does not know:
    /// a `severity` or `resolution` outside the seed's values. Such a record
    /// is unsupported, not corrupt.
    pub(crate) fn unsupported(value: &Value) -> Option<String> {
        let unknown = |field: &str, known: &[&str]| match value.get(field) {
            Some(Value::String(s)) if !known.contains(&s.as_str()) => {
                Some(format!("reminder {field} `{s}`"))
            }
            _ => None,
        };
        unknown("severity", &["info", "nudge", "blocking"]).or_else(|| {
            unknown(
                "resolution",
                &["completed", "ignored", "snoozed", "auto_cleared"],
            )
        })
    }
}

impl Reminder {
    /// Returns true while it is open (not resolved).
    pub fn is_open(&self) -> bool {
        self.resolved_at.is_none()
    }

    /// Returns the id of the snoozed reminder this one reopened, if any.
    pub(crate) fn reopened_from(&self) -> Option<&str> {
        self.metadata.get(REOPENED_FROM).and_then(Value::as_str)
    }
}

/// The metadata key that names the reminder a reopened one came from.
pub(crate) const REOPENED_FROM: &str = "reopened_from";

#[cfg(test)]
mod tests {
    use super::*;

    /// A type displays as its seed name (what the CLI prints and logs say).
    #[test]
    fn a_type_displays_as_its_name() {
        assert_eq!(
            NudgeType::from_name("stall_warning").to_string(),
            "stall_warning"
        );
        assert_eq!(
            NudgeType::from_name("custom_kind").to_string(),
            "custom_kind"
        );
    }

    #[test]
    fn types_round_trip_and_unknown_is_kept() {
        for name in [
            "health_check",
            "stall_warning",
            "priority_change",
            "abort",
            "sync_request",
            "nudge_response",
            "health_escalation",
        ] {
            let t = NudgeType::from_name(name);
            assert_eq!(t.as_str(), name);
            let json = serde_json::to_string(&t).unwrap();
            assert_eq!(serde_json::from_str::<NudgeType>(&json).unwrap(), t);
        }
        assert_eq!(
            NudgeType::from_name("health_escalation"),
            NudgeType::Unknown("health_escalation".into())
        );
    }

    #[test]
    fn urgency_order() {
        use NudgeType::*;
        assert!(Abort.urgency() > StallWarning.urgency());
        assert!(StallWarning.urgency() > HealthCheck.urgency());
        assert_eq!(HealthCheck.urgency(), PriorityChange.urgency());
        assert_eq!(SyncRequest.urgency(), Unknown("x".into()).urgency());
        assert!(HealthCheck.urgency() > NudgeResponse.urgency());
        // An unknown spelling of a known name behaves as the known type.
        assert_eq!(Unknown("abort".into()).urgency(), Urgency::Terminal);
    }

    #[test]
    fn only_a_pending_abort_holds() {
        use NudgeType::*;
        let all = [
            HealthCheck,
            StallWarning,
            PriorityChange,
            Abort,
            SyncRequest,
            NudgeResponse,
            Unknown("x".into()),
        ];
        for pending in &all {
            for incoming in &all {
                let expected = *pending == Abort && *incoming != Abort;
                assert_eq!(
                    pending.holds_against(incoming),
                    expected,
                    "{pending} vs {incoming}"
                );
            }
        }
    }

    #[test]
    fn identity_uses_id_then_content() {
        let base = Nudge {
            from: "witness".into(),
            kind: NudgeType::HealthCheck,
            message: "m".into(),
            timestamp: Timestamp::from_unix_ms(1000),
            requires_response: true,
            id: None,
            in_reply_to: None,
            extra: Map::new(),
        };
        let mut other = base.clone();
        assert!(base.is_same(&other));
        other.message = "n".into();
        assert!(!base.is_same(&other), "same timestamp, different content");
        let mut a = base.clone();
        a.id = Some(NudgeId::new("1").unwrap());
        let mut b = base.clone();
        b.id = Some(NudgeId::new("2").unwrap());
        assert!(!a.is_same(&b), "same content and timestamp, different ids");
        assert!(!a.is_same(&base));
        let mut again = a.clone();
        again.message = "n".into();
        again.timestamp = Timestamp::from_unix_ms(2000);
        assert!(a.is_same(&again), "the same id, whatever the content");
    }

    /// A resolution's name is the one serde writes (the seed's column
    /// value), and it displays as that name.
    #[test]
    fn a_resolution_is_named_as_the_seed_writes_it() {
        for (r, name) in [
            (Resolution::Completed, "completed"),
            (Resolution::Ignored, "ignored"),
            (Resolution::Snoozed, "snoozed"),
            (Resolution::AutoCleared, "auto_cleared"),
        ] {
            assert_eq!(r.as_str(), name);
            assert_eq!(r.to_string(), name);
            assert_eq!(serde_json::to_value(r).unwrap(), name);
        }
    }
}
