//! The pure rules of the reminder channel: what a resolution leaves, when a
//! snooze is due, how a snoozed reminder reopens, which reminders a filter
//! keeps and in what order they list. No I/O; the shell in `mod.rs` and
//! `query.rs` applies them under the key's lock.

use std::path::Path;
use std::time::Duration;

use chipset_store::Timestamp;
use serde_json::Value;

use super::ReminderFilter;
use crate::format::{REOPENED_FROM, Reminder, ReminderId, Resolution};
use crate::key::{ReminderKey, unescape};

/// A resolution to apply.
pub(super) struct Change {
    pub(super) resolution: Resolution,
    pub(super) verb: String,
    pub(super) note: Option<String>,
    pub(super) snooze_for: Option<Duration>,
}

impl Change {
    /// Returns true when `r` is what this change leaves: the same
    /// resolution, verb, note and snooze duration (a retry of a change that
    /// applied).
    pub(super) fn applied_to(&self, r: &Reminder) -> bool {
        let snoozed_for = match (r.resolved_at, r.snooze_until) {
            (Some(at), Some(until)) => Some(until.unix_ms() - at.unix_ms()),
            _ => None,
        };
        let wanted_for = self
            .snooze_for
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        r.resolution == Some(self.resolution)
            && r.resolved_by_verb.as_deref() == Some(self.verb.as_str())
            && r.resolution_note == self.note
            && snoozed_for == wanted_for
    }

    pub(super) fn apply(&self, mut r: Reminder, now: Timestamp) -> Reminder {
        r.resolved_at = Some(now);
        r.resolution = Some(self.resolution);
        r.resolved_by_verb = Some(self.verb.clone());
        r.resolution_note = self.note.clone();
        r.snooze_until = self.snooze_for.map(|d| now + d);
        r
    }
}

impl ReminderFilter {
    pub(super) fn matches(&self, r: &Reminder) -> bool {
        self.tenant_id.as_ref().is_none_or(|t| *t == r.tenant_id)
            && self
                .project_id
                .as_ref()
                .is_none_or(|p| r.project_id.as_ref() == Some(p))
            && self.kind.as_ref().is_none_or(|k| *k == r.kind)
    }
}

/// Returns a fresh open copy of a snoozed reminder, under the new `id`,
/// opened at `now`.
pub(super) fn reopened(snoozed: &Reminder, id: ReminderId, now: Timestamp) -> Reminder {
    let mut metadata = snoozed.metadata.clone();
    metadata.insert(
        REOPENED_FROM.to_owned(),
        Value::String(snoozed.id.to_string()),
    );
    Reminder {
        id,
        created_at: now,
        resolved_at: None,
        resolved_by_verb: None,
        resolution: None,
        resolution_note: None,
        snooze_until: None,
        metadata,
        ..snoozed.clone()
    }
}

pub(super) fn is_due(snoozed: &Reminder, now: Timestamp) -> bool {
    snoozed.snooze_until.is_none_or(|t| t <= now)
}

pub(super) fn sort(list: &mut [Reminder]) {
    list.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
}

/// Recovers the key from an index path `{area}/{kind}/{source_type}/{name}`.
pub(super) fn path_key(path: &Path) -> Option<ReminderKey> {
    let name = path.file_name()?.to_str()?;
    let st = path.parent()?.file_name()?.to_str()?;
    let kind = path.parent()?.parent()?.file_name()?.to_str()?;
    ReminderKey::new(kind, st, unescape(name)?).ok()
}

#[cfg(test)]
mod tests {
    use serde_json::Map;

    use super::*;
    use crate::format::Severity;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_unix_ms(1_772_706_900_123 + ms)
    }

    fn id(n: u8) -> ReminderId {
        ReminderId::new(format!(
            "1772706900123-0000000{n}-aaaa-4bbb-8ccc-dddddddddddd"
        ))
        .unwrap()
    }

    fn open() -> Reminder {
        Reminder {
            id: id(1),
            tenant_id: "t".into(),
            project_id: None,
            kind: "handoff".into(),
            source_type: "session".into(),
            source_id: "s-1".into(),
            message: "m".into(),
            actions: Vec::new(),
            severity: Severity::Nudge,
            created_at: at(0),
            resolved_at: None,
            resolved_by_verb: None,
            resolution: None,
            resolution_note: None,
            snooze_until: None,
            metadata: Map::new(),
            extra: Map::new(),
        }
    }

    fn snooze(secs: u64) -> Change {
        Change {
            resolution: Resolution::Snoozed,
            verb: "snooze".into(),
            note: None,
            snooze_for: Some(Duration::from_secs(secs)),
        }
    }

    /// A change applied is recognised as applied (a retry), and one with
    /// another duration, verb or note is not.
    #[test]
    fn a_change_recognises_what_it_left() {
        let snoozed = snooze(60).apply(open(), at(1_000));
        assert_eq!(snoozed.snooze_until, Some(at(61_000)));
        assert!(snooze(60).applied_to(&snoozed));
        assert!(!snooze(61).applied_to(&snoozed));
        let other_verb = Change {
            verb: "later".into(),
            ..snooze(60)
        };
        assert!(!other_verb.applied_to(&snoozed));
        assert!(!snooze(60).applied_to(&open()));
    }

    /// A snooze is due at its time, not before; one with no time is due.
    #[test]
    fn a_snooze_is_due_at_its_time() {
        let snoozed = snooze(60).apply(open(), at(0));
        assert!(!is_due(&snoozed, at(59_999)));
        assert!(is_due(&snoozed, at(60_000)));
        assert!(is_due(&open(), at(0)));
    }

    /// The reopened copy is open, new, and names the snoozed one.
    #[test]
    fn a_reopened_copy_is_open_and_names_its_origin() {
        let snoozed = snooze(60).apply(open(), at(0));
        let fresh = reopened(&snoozed, id(2), at(60_000));
        assert!(fresh.is_open());
        assert_eq!((fresh.id.clone(), fresh.created_at), (id(2), at(60_000)));
        assert_eq!(fresh.snooze_until, None);
        assert_eq!(
            fresh.metadata[REOPENED_FROM],
            Value::String(snoozed.id.to_string())
        );
        assert_eq!(fresh.source_id, snoozed.source_id);
    }

    /// A filter keeps what every field it sets agrees with; an unset field
    /// keeps everything.
    #[test]
    fn a_filter_keeps_what_each_set_field_agrees_with() {
        let filter =
            |tenant: Option<&str>, project: Option<&str>, kind: Option<&str>| ReminderFilter {
                tenant_id: tenant.map(Into::into),
                project_id: project.map(Into::into),
                kind: kind.map(Into::into),
                history: false,
            };
        let mut r = open();
        r.project_id = Some("p".into());
        let keeps = |t, p, k| filter(t, p, k).matches(&r);
        assert!(keeps(None, None, None));
        assert!(keeps(Some("t"), Some("p"), Some("handoff")));
        assert!(!keeps(Some("u"), None, None));
        assert!(!keeps(None, Some("q"), None));
        assert!(!keeps(None, None, Some("spec")));
        r.project_id = None;
        assert!(
            !filter(None, Some("p"), None).matches(&r),
            "no project is not project p"
        );
    }

    /// Listings are oldest first, and by id within one instant.
    #[test]
    fn reminders_sort_by_creation_then_id() {
        let make = |n: u8, ms: i64| Reminder {
            id: id(n),
            created_at: at(ms),
            ..open()
        };
        let mut list = vec![make(3, 5), make(2, 0), make(1, 5), make(4, -1)];
        sort(&mut list);
        let order: Vec<_> = list.iter().map(|r| r.id.clone()).collect();
        assert_eq!(order, [id(4), id(2), id(1), id(3)]);
    }

    /// An index path names its key: kind and source type are its folders,
    /// the escaped source id its file name; a path too short for that, or
    /// with a folder that is no kind name, names none.
    #[test]
    fn an_index_path_names_its_key() {
        assert_eq!(
            path_key(Path::new("open/handoff_pending/handoff/a%2Fb.json")),
            Some(ReminderKey::new("handoff_pending", "handoff", "a/b").unwrap())
        );
        assert_eq!(path_key(Path::new("open/Bad-Kind/handoff/a.json")), None);
        assert_eq!(path_key(Path::new("a.json")), None);
    }
}
