//! The seed's §10.3 observability figures, computed from reminder records.

use std::collections::BTreeMap;
use std::time::Duration;

use chipset_store::Timestamp;

use crate::format::{Reminder, Resolution};

/// Counts and ages per kind (seed §10.3).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReminderMetrics {
    /// `nudges_opened_total{kind}`: reminders created in the window.
    pub opened: BTreeMap<String, u64>,
    /// `nudges_resolved_total{kind, resolution}`: reminders resolved in the window.
    pub resolved: BTreeMap<String, BTreeMap<Resolution, u64>>,
    /// `nudges_open{kind}`: reminders open now.
    pub open: BTreeMap<String, u64>,
    /// Median age of the reminders open now, per kind.
    pub median_open_age: BTreeMap<String, Duration>,
}

/// Computes the metrics over `records` at `now`; counters count events at or
/// after `since` (everything when `None`).
pub(crate) fn compute<'a>(
    records: impl IntoIterator<Item = &'a Reminder>,
    now: Timestamp,
    since: Option<Timestamp>,
) -> ReminderMetrics {
    let in_window = |t: Timestamp| since.is_none_or(|s| t >= s);
    let mut m = ReminderMetrics::default();
    let mut ages: BTreeMap<String, Vec<Duration>> = BTreeMap::new();
    for r in records {
        if in_window(r.created_at) {
            *m.opened.entry(r.kind.clone()).or_default() += 1;
        }
        match (r.resolved_at, r.resolution) {
            (Some(at), Some(resolution)) => {
                if in_window(at) {
                    *m.resolved
                        .entry(r.kind.clone())
                        .or_default()
                        .entry(resolution)
                        .or_default() += 1;
                }
            }
            (None, _) => {
                *m.open.entry(r.kind.clone()).or_default() += 1;
                ages.entry(r.kind.clone())
                    .or_default()
                    .push(now.since(r.created_at));
            }
            (Some(_), None) => {}
        }
    }
    for (kind, mut list) in ages {
        list.sort_unstable();
        let n = list.len();
        let median = if n % 2 == 1 {
            list[n / 2]
        } else {
            (list[n / 2 - 1] + list[n / 2]) / 2
        };
        m.median_open_age.insert(kind, median);
    }
    m
}
