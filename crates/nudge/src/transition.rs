//! The pure precedence rule applied by every send.

use crate::format::{Nudge, NudgeType, ProcessedRecord};

/// What a send does, given what is in `latest.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Nothing pending (no nudge, or the one there was processed): write.
    Deliver,
    /// Replace this unprocessed nudge: write.
    Replace(Nudge),
    /// Keep this unprocessed nudge; write nothing.
    Hold(Nudge),
}

/// Decides a send of a nudge of type `incoming` when `current` is in
/// `latest.json` and `record` is the recipient's processed record (`None`
/// when missing or unreadable: then the current nudge counts as unprocessed,
/// so an abort is never lost to a bad record).
pub(crate) fn precedence(
    current: Option<Nudge>,
    record: Option<&ProcessedRecord>,
    incoming: &NudgeType,
) -> Verdict {
    let Some(current) = current else {
        return Verdict::Deliver;
    };
    if record.is_some_and(|r| r.last.is_same(&current)) {
        Verdict::Deliver
    } else if current.kind.holds_against(incoming) {
        Verdict::Hold(current)
    } else {
        Verdict::Replace(current)
    }
}

#[cfg(test)]
mod tests {
    use chipset_store::Timestamp;

    use super::*;
    use crate::format::NudgeId;

    fn nudge(kind: NudgeType, id: &str) -> Nudge {
        Nudge {
            from: "mayor".into(),
            kind,
            message: String::new(),
            timestamp: Timestamp::from_unix_ms(0),
            requires_response: false,
            id: Some(NudgeId::new(id).unwrap()),
            in_reply_to: None,
            extra: serde_json::Map::new(),
        }
    }

    fn processed(n: &Nudge) -> ProcessedRecord {
        ProcessedRecord {
            last: n.clone(),
            processed_at: Timestamp::from_unix_ms(0),
            count: 1,
            extra: serde_json::Map::new(),
        }
    }

    #[track_caller]
    fn check(
        current: Option<Nudge>,
        record: Option<&ProcessedRecord>,
        incoming: NudgeType,
        expected: &str,
    ) {
        let got = match precedence(current, record, &incoming) {
            Verdict::Deliver => "deliver",
            Verdict::Replace(_) => "replace",
            Verdict::Hold(_) => "hold",
        };
        assert_eq!(got, expected);
    }

    #[test]
    fn rule_table() {
        use NudgeType::*;
        let abort = nudge(Abort, "a");
        let check_ = nudge(HealthCheck, "h");
        check(None, None, HealthCheck, "deliver");
        check(Some(check_.clone()), None, HealthCheck, "replace");
        check(
            Some(check_.clone()),
            Some(&processed(&check_)),
            Abort,
            "deliver",
        );
        check(Some(abort.clone()), None, HealthCheck, "hold");
        check(Some(abort.clone()), None, NudgeResponse, "hold");
        check(Some(abort.clone()), None, StallWarning, "hold");
        check(Some(abort.clone()), None, Abort, "replace");
        check(
            Some(abort.clone()),
            Some(&processed(&abort)),
            HealthCheck,
            "deliver",
        );
        // A record of another nudge does not count.
        check(Some(abort), Some(&processed(&check_)), HealthCheck, "hold");
    }
}
