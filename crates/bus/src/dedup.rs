//! The pure de-duplication decision.

use std::time::Duration;

use chipset_store::Timestamp;

use crate::format::{DedupRecord, EventId};

/// What the de-duplication check decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Publish, and record this publish as the key's last accepted one.
    Accept,
    /// Drop: the key was accepted within the window.
    Duplicate {
        original: EventId,
        accepted_at: Timestamp,
    },
}

/// Judges a publish of `key` at `now` against the key's last accepted
/// publish. The distance is taken both ways, so a clock stepped back does not
/// suppress the key for longer than the window.
pub(crate) fn judge(
    last: Option<&DedupRecord>,
    key: &str,
    now: Timestamp,
    window: Duration,
) -> Verdict {
    match last {
        // A different key in the same file is a hash collision: not a duplicate.
        Some(r) if r.key == key => {
            let distance = now.since(r.accepted_at).max(r.accepted_at.since(now));
            if distance < window {
                Verdict::Duplicate {
                    original: r.event_id.clone(),
                    accepted_at: r.accepted_at,
                }
            } else {
                Verdict::Accept
            }
        }
        _ => Verdict::Accept,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(key: &str, at: i64) -> DedupRecord {
        DedupRecord {
            key: key.to_owned(),
            accepted_at: Timestamp::from_unix_ms(at),
            event_id: EventId::new("1000-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab").unwrap(),
            window_ms: 0,
        }
    }

    #[track_caller]
    fn check(last: Option<DedupRecord>, now: i64, window_ms: u64, duplicate: bool) {
        let v = judge(
            last.as_ref(),
            "k",
            Timestamp::from_unix_ms(now),
            Duration::from_millis(window_ms),
        );
        assert_eq!(matches!(v, Verdict::Duplicate { .. }), duplicate);
    }

    #[test]
    fn window_rules() {
        check(None, 5_000, 60_000, false);
        check(Some(record("k", 1_000)), 1_000, 60_000, true);
        check(Some(record("k", 1_000)), 60_999, 60_000, true);
        // After the window the key works again.
        check(Some(record("k", 1_000)), 61_000, 60_000, false);
        // A zero window never drops.
        check(Some(record("k", 1_000)), 1_000, 0, false);
        // A collision on the file name with another key is not a duplicate.
        check(Some(record("other", 1_000)), 1_000, 60_000, false);
        // A clock stepped back far does not suppress forever.
        check(Some(record("k", 1_000_000)), 1_000, 60_000, false);
        check(Some(record("k", 10_000)), 1_000, 60_000, true);
    }
}
