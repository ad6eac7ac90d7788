//! The on-disk contract: event files and de-duplication records here;
//! presence, control lines, the registry and the reminder state in
//! `agent.rs`. Golden files in the integration tests pin these shapes.

pub(crate) mod agent;

pub(crate) use agent::{
    ControlCommand, ControlLine, ControlOp, NagState, Presence, Registry, Resource,
};

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chipset_store::{Clock, ReadOutcome, SortableId, Timestamp, Unsupported};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::name;

/// How urgent an event is. Priority is triage, not privilege: it decides the
/// processing order, never who may read.
///
/// Ordered by processing order: `Critical < High < Normal < Low`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Priority {
    /// The sender is blocked and cannot proceed (a worker needs input). File digit `0`.
    Critical,
    /// Work completed, a next step is waiting. File digit `1`.
    High,
    /// Information available (a chat message, a status update). File digit `2`.
    Normal,
    /// A background signal (a heartbeat, a routine check). File digit `3`.
    Low,
}

impl Priority {
    /// Every priority, in processing order.
    pub const ALL: [Priority; 4] = [
        Priority::Critical,
        Priority::High,
        Priority::Normal,
        Priority::Low,
    ];

    /// Returns the digit that starts the event's file name (`0` critical … `3` low).
    pub(crate) fn digit(self) -> u8 {
        match self {
            Priority::Critical => 0,
            Priority::High => 1,
            Priority::Normal => 2,
            Priority::Low => 3,
        }
    }

    /// Returns the priority for a file-name digit.
    pub(crate) fn from_digit(digit: u8) -> Option<Self> {
        Priority::ALL.get(usize::from(digit)).copied()
    }

    /// Returns the lower-case name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Critical => "critical",
            Priority::High => "high",
            Priority::Normal => "normal",
            Priority::Low => "low",
        }
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Priority {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Priority::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| {
                Error::invalid(
                    "priority",
                    s,
                    "must be `critical`, `high`, `normal` or `low`",
                )
            })
    }
}

/// An event id: `{unix-ms}-{uuid-v4}` (a [`SortableId`]), sorting by creation time.
///
/// ```
/// use chipset_bus::EventId;
/// let earlier = EventId::new("1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab")?;
/// let later: EventId = "1730000000124-0b3e0c1a-5d2f-4e1b-8a6c-0123456789ab".parse()?;
/// assert!(earlier < later);
/// assert!(EventId::new("1730000000123").is_err());
/// # Ok::<(), chipset_store::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventId(String);

impl EventId {
    /// Returns a new id, greater than every id this process made before.
    pub fn generate(clock: &dyn Clock) -> Self {
        EventId(String::from(SortableId::generate(clock)))
    }

    /// Validates `value`, an id written by any writer that follows the
    /// format, and wraps it (as every other id's `new` does).
    ///
    /// # Errors
    ///
    /// [`chipset_store::Error::InvalidId`] when `value` is not `{digits}-{uuid}`.
    pub fn new(value: impl Into<String>) -> chipset_store::Result<Self> {
        let value = value.into();
        value.parse::<SortableId>()?;
        Ok(EventId(value))
    }

    /// Returns the id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl FromStr for EventId {
    type Err = chipset_store::Error;

    fn from_str(s: &str) -> chipset_store::Result<Self> {
        EventId::new(s)
    }
}

impl Serialize for EventId {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for EventId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        EventId::new(text).map_err(serde::de::Error::custom)
    }
}

/// An event as stored in a queue file: `bus/{agent}/queue/{name}.json`.
///
/// The recipient is the directory the file lives in, never a field.
/// Fields another writer added that this version does not know are kept
/// ([`Event::extra`]) and written back with the event. A `priority` outside
/// the four names is unsupported, not corrupt ([`Problem::Unsupported`](crate::Problem::Unsupported)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Event {
    /// The id.
    pub id: EventId,
    /// Who caused the event (an agent id, a watcher's name…).
    pub source: String,
    /// What kind of event it is (`chat-mention`, `task-done`…).
    pub kind: String,
    /// The priority.
    pub priority: Priority,
    /// When it was published.
    pub created_at: Timestamp,
    /// The de-duplication key the publisher chose, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup_key: Option<String>,
    /// The payload (`null` when none was given).
    #[serde(default)]
    pub payload: serde_json::Value,
    /// The fields another writer added that this version does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Event {
    /// Returns true when `other` is the same event published again: the same
    /// id, source, kind, priority, key and payload (the time may differ, as
    /// a retry is stamped anew).
    pub(crate) fn same_content(&self, other: &Event) -> bool {
        self.id == other.id
            && self.source == other.source
            && self.kind == other.kind
            && self.priority == other.priority
            && self.dedup_key == other.dedup_key
            && self.payload == other.payload
    }

    /// Returns the name of this event's file in a queue or processed directory.
    pub fn file_name(&self) -> String {
        name::event_file_name(self.priority, &self.id, &self.source, &self.kind)
    }
}

/// An event to publish: build it, then hand it to [`Bus::publish`](crate::Bus::publish).
///
/// ```
/// use std::time::Duration;
/// use chipset_bus::{NewEvent, Priority};
/// let event = NewEvent::new("chat-watcher", "chat-mention")
///     .with_priority(Priority::High)
///     .with_payload(serde_json::json!({"chat": "debug.chat"}))
///     .with_dedup_key("debug.chat#42")
///     .with_dedup_window(Duration::from_secs(300));
/// assert!(format!("{event:?}").contains("High"));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    source: String,
    kind: String,
    priority: Priority,
    payload: serde_json::Value,
    dedup_key: Option<String>,
    dedup_window: Option<Duration>,
    id: Option<EventId>,
}

impl NewEvent {
    /// Starts an event of `kind` caused by `source`, at normal priority, with a `null` payload.
    pub fn new(source: impl Into<String>, kind: impl Into<String>) -> Self {
        NewEvent {
            source: source.into(),
            kind: kind.into(),
            priority: Priority::Normal,
            payload: serde_json::Value::Null,
            dedup_key: None,
            dedup_window: None,
            id: None,
        }
    }

    /// Sets the event's id, chosen by the caller so a retry can be recognised
    /// (the bus twin of mail's `NewMessage::with_id`): publishing again with the
    /// same id and the same content returns the first delivery as success;
    /// the same id with other content is refused ([`Error::IdTaken`]).
    /// Make one with [`EventId::generate`] and keep it for the retries.
    #[must_use]
    pub fn with_id(mut self, id: EventId) -> Self {
        self.id = Some(id);
        self
    }

    /// Returns the caller-chosen id, if any.
    pub(crate) fn chosen_id(&self) -> Option<&EventId> {
        self.id.as_ref()
    }

    /// Sets the priority.
    #[must_use]
    pub fn with_priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// Sets the JSON payload: at most 256 KiB as JSON, or the publish is
    /// refused ([`Error::InvalidField`](crate::Error::InvalidField)).
    #[must_use]
    pub fn with_payload(mut self, payload: serde_json::Value) -> Self {
        self.payload = payload;
        self
    }

    /// Sets the de-duplication key: within the window, a second publish with
    /// the same key to the same recipient is dropped.
    #[must_use]
    pub fn with_dedup_key(mut self, key: impl Into<String>) -> Self {
        self.dedup_key = Some(key.into());
        self
    }

    /// Sets this publish's de-duplication window (otherwise the bus's
    /// [`BusConfig::dedup_window`](crate::BusConfig::dedup_window)).
    #[must_use]
    pub fn with_dedup_window(mut self, window: Duration) -> Self {
        self.dedup_window = Some(window);
        self
    }

    /// Returns the de-duplication key, if any.
    pub(crate) fn key(&self) -> Option<&str> {
        self.dedup_key.as_deref()
    }

    /// Returns the de-duplication window set on this publish, if any.
    pub(crate) fn window(&self) -> Option<Duration> {
        self.dedup_window
    }

    /// Checks the fields and stamps the event with an id and a time.
    pub(crate) fn build(&self, clock: &dyn Clock) -> Result<Event> {
        check_label("source", &self.source)?;
        check_label("kind", &self.kind)?;
        if let Some(key) = &self.dedup_key {
            check_key(key)?;
        }
        // Far below the read cap of an event file: a payload over it made
        // the event unreadable in the recipient's queue.
        let payload = self.payload.to_string();
        if payload.len() > MAX_PAYLOAD {
            let start: String = payload.chars().take(40).collect();
            let rule = "must be at most 262144 bytes as JSON";
            return Err(Error::invalid("payload", &format!("{start}…"), rule));
        }
        // The id's millisecond never goes back within a process (it may run
        // ahead of a clock that stepped back); created_at is the clock's word.
        let created_at = clock.now();
        let id = match &self.id {
            Some(id) => id.clone(),
            None => EventId::generate(clock),
        };
        Ok(Event {
            created_at,
            id,
            source: self.source.clone(),
            kind: self.kind.clone(),
            priority: self.priority,
            dedup_key: self.dedup_key.clone(),
            payload: self.payload.clone(),
            extra: Map::new(),
        })
    }
}

/// The longest source or kind accepted, in bytes.
pub(crate) const MAX_LABEL_LEN: usize = 128;
/// The longest de-duplication key accepted, in bytes.
pub(crate) const MAX_KEY_LEN: usize = 1024;
/// The largest payload accepted, in bytes of JSON.
pub(crate) const MAX_PAYLOAD: usize = 256 * 1024;

fn check_label(field: &'static str, value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(Error::invalid(field, value, "must not be empty"));
    }
    if value.len() > MAX_LABEL_LEN {
        return Err(Error::invalid(field, value, "must be at most 128 bytes"));
    }
    if value.chars().any(char::is_control) {
        return Err(Error::invalid(
            field,
            value,
            "must not contain control characters",
        ));
    }
    Ok(())
}

fn check_key(value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(Error::invalid(
            "de-duplication key",
            value,
            "must not be empty",
        ));
    }
    if value.len() > MAX_KEY_LEN {
        return Err(Error::invalid(
            "de-duplication key",
            value,
            "must be at most 1024 bytes",
        ));
    }
    Ok(())
}

/// The last accepted publish of one de-duplication key to one recipient:
/// `bus/{agent}/dedup/{escaped key}.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct DedupRecord {
    /// The full key (the file name may be a truncated, hashed form of it).
    pub(crate) key: String,
    /// When the accepted event was published.
    pub(crate) accepted_at: Timestamp,
    /// The accepted event.
    pub(crate) event_id: EventId,
    /// The window that publish asked for, in milliseconds (informative).
    pub(crate) window_ms: u64,
}

/// Reads an event file (bounded by the state's read cap). A well-formed event whose
/// `priority` is not one of the four names (written by a newer program) is
/// [`ReadOutcome::Unsupported`]: reported, never quarantined.
///
/// # Errors
///
/// As [`StateDir::read_bytes`](chipset_store::StateDir::read_bytes).
pub(crate) fn read_event_json(
    state: &chipset_store::StateDir,
    path: &chipset_store::StatePath,
) -> chipset_store::Result<ReadOutcome<Event>> {
    Ok(state
        .read_bytes(path)?
        .and_then(|bytes| parse_event(path.as_path(), &bytes)))
}

/// Parses an event's bytes, named `path` in what it reports: as
/// [`read_event_json`], for a value read through the storage seam too.
pub(crate) fn parse_event(path: &std::path::Path, bytes: &[u8]) -> ReadOutcome<Event> {
    // The common case parses once; only a file that fails is looked at again.
    let read = chipset_store::ReadOutcome::<Event>::from_json(path, bytes);
    if !read.is_corrupt() {
        return read;
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(value) => match value.get("priority") {
            Some(Value::String(p)) if !Priority::ALL.iter().any(|k| k.as_str() == p) => {
                ReadOutcome::Unsupported(Unsupported::new(
                    path,
                    format!("bus event priority `{p}`"),
                ))
            }
            _ => read,
        },
        Err(_) => read,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chipset_store::{Clock, ManualClock};

    #[test]
    fn priority_digits_and_names_round_trip() {
        for p in Priority::ALL {
            assert_eq!(Priority::from_digit(p.digit()), Some(p));
            assert_eq!(p.as_str().parse::<Priority>().unwrap(), p);
        }
        assert_eq!(Priority::from_digit(4), None);
        assert!("urgent".parse::<Priority>().is_err());
        assert!(Priority::Critical < Priority::Low);
    }

    /// A draft answers what it was given.
    #[test]
    fn a_draft_reports_its_fields() {
        let e = NewEvent::new("chat-watcher", "chat-mention").with_priority(Priority::High);
        assert_eq!(e.source, "chat-watcher");
        assert_eq!(e.kind, "chat-mention");
        assert_eq!(e.priority, Priority::High);
    }

    /// An event id debugs as its quoted text (what a log line shows).
    #[test]
    fn an_event_id_debugs_as_its_text() {
        let clock = ManualClock::new(Timestamp::from_unix_ms(1_000));
        let id = EventId::generate(&clock);
        assert_eq!(format!("{id:?}"), format!("{:?}", id.to_string()));
        assert!(format!("{id:?}").len() > 2);
    }

    #[test]
    fn build_checks_fields() {
        let clock = ManualClock::new(Timestamp::from_unix_ms(1_000));
        assert!(NewEvent::new("", "k").build(&clock).is_err());
        assert!(NewEvent::new("s", "a\nb").build(&clock).is_err());
        assert!(NewEvent::new("s", "k".repeat(129)).build(&clock).is_err());
        assert!(
            NewEvent::new("s", "k")
                .with_dedup_key("")
                .build(&clock)
                .is_err()
        );
        let e = NewEvent::new("s", "k").build(&clock).unwrap();
        assert_eq!(e.created_at, clock.now());
        assert_eq!(e.priority, Priority::Normal);
    }

    #[test]
    fn event_id_refuses_garbage() {
        assert!(EventId::new("x-y").is_err());
        assert!(serde_json::from_str::<EventId>("\"../etc\"").is_err());
    }

    #[test]
    fn resource_checks() {
        assert!(Resource::new("chat", ".nbs/chat/a.chat").check().is_ok());
        assert!(Resource::new("", "x").check().is_err());
        assert!(Resource::new("chat", "").check().is_err());
        assert!(Resource::new("chat", "a\nb").check().is_err());
        assert!(Resource::new("chat", "t".repeat(4096)).check().is_ok());
        assert!(Resource::new("chat", "t".repeat(4097)).check().is_err());
        assert!(Resource::new("chat", "t".repeat(4098)).check().is_err());
    }

    /// A label or key as long as its bound is accepted; one byte more is not.
    #[test]
    fn labels_and_keys_of_their_bound_are_the_longest_allowed() {
        let clock = ManualClock::new(Timestamp::from_unix_ms(1_000));
        let label = "k".repeat(MAX_LABEL_LEN);
        let key = "d".repeat(MAX_KEY_LEN);
        let e = NewEvent::new(label.clone(), label.clone())
            .with_dedup_key(key.clone())
            .build(&clock)
            .unwrap();
        assert_eq!(e.dedup_key.as_deref(), Some(key.as_str()));
        let long_key = "d".repeat(MAX_KEY_LEN + 1);
        assert!(
            NewEvent::new("s", "k")
                .with_dedup_key(long_key)
                .build(&clock)
                .is_err()
        );
        // A payload of 256 KiB as JSON (the string and its two quotes).
        let payload = |n: usize| serde_json::Value::String("p".repeat(n - 2));
        let fits = NewEvent::new("s", "k").with_payload(payload(MAX_PAYLOAD));
        assert!(fits.build(&clock).is_ok());
        let over = NewEvent::new("s", "k").with_payload(payload(MAX_PAYLOAD + 1));
        let e = over.build(&clock).unwrap_err();
        assert!(
            matches!(
                e,
                Error::InvalidField {
                    field: "payload",
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().len() < 200, "names the payload by its start");
        assert!(Resource::new(label, "x").check().is_ok());
        assert!(
            NewEvent::new("s", "k")
                .build(&clock)
                .unwrap()
                .dedup_key
                .is_none()
        );
    }

    /// A priority displays as its name.
    #[test]
    fn a_priority_displays_as_its_name() {
        for p in Priority::ALL {
            assert_eq!(p.to_string(), p.as_str());
        }
        assert_eq!(Priority::Critical.to_string(), "critical");
    }
}
