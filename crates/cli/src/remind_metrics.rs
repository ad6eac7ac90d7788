//! `chipset remind metrics`: the seed's §10.3 observability figures,
//! computed from every reminder record, the history included.

use std::collections::BTreeMap;
use std::time::Duration;

use chipset_nudge::{Reminder, ReminderFilter, Reminders, Resolution};
use chipset_store::Timestamp;

/// Counts and ages per kind (seed §10.3).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ReminderMetrics {
    /// `nudges_opened_total{kind}`: reminders created in the window.
    pub(crate) opened: BTreeMap<String, u64>,
    /// `nudges_resolved_total{kind, resolution}`: reminders resolved in the window.
    pub(crate) resolved: BTreeMap<String, BTreeMap<Resolution, u64>>,
    /// `nudges_open{kind}`: reminders open now.
    pub(crate) open: BTreeMap<String, u64>,
    /// Median age of the reminders open now, per kind.
    pub(crate) median_open_age: BTreeMap<String, Duration>,
}

/// Returns the metrics at `now`; counters count events at or after `since`
/// (the seed uses 30 days; everything when `None`), gauges are for now.
/// Reads the whole history.
pub(crate) fn metrics(
    reminders: &Reminders,
    now: Timestamp,
    since: Option<Timestamp>,
) -> chipset_nudge::Result<ReminderMetrics> {
    let all = reminders.all(&ReminderFilter::default())?;
    Ok(compute(&all.reminders, now, since))
}

/// Computes the metrics over `records` at `now`; counters count events at or
/// after `since` (everything when `None`).
fn compute<'a>(
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use chipset_nudge::{KindRegistry, ManualResolution, NewReminder, Reminders, Resolution};
    use chipset_store::Clock;
    use chipset_testkit::TempState;

    use super::metrics;

    const HOUR: Duration = Duration::from_secs(3600);

    fn new(kind: &str, source_id: &str) -> NewReminder {
        let source_type = KindRegistry::preset()
            .get(kind)
            .unwrap()
            .source_type
            .clone();
        NewReminder {
            tenant_id: "tenant".into(),
            project_id: Some("project".into()),
            kind: kind.into(),
            source_type,
            source_id: source_id.into(),
            message: format!("{kind} {source_id}"),
            ..NewReminder::default()
        }
    }

    #[test]
    fn metrics_per_kind() {
        let (t, clock) = TempState::manual();
        let r = Reminders::new(t.state.clone(), KindRegistry::preset());
        r.open(new("wrap_session", "a")).unwrap();
        clock.advance(HOUR);
        r.open(new("wrap_session", "b")).unwrap();
        clock.advance(HOUR);
        r.open(new("wrap_session", "c")).unwrap();
        let d = r.open(new("spec_draft", "d")).unwrap();
        r.auto_resolve("wrap_session", "session", "c", "prism_wrap")
            .unwrap();
        r.resolve(&d.reminder().id, ManualResolution::Ignored, None)
            .unwrap();
        let m = metrics(&r, clock.now(), None).unwrap();
        assert_eq!(m.opened["wrap_session"], 3);
        assert_eq!(m.opened["spec_draft"], 1);
        assert_eq!(m.resolved["wrap_session"][&Resolution::AutoCleared], 1);
        assert_eq!(m.resolved["spec_draft"][&Resolution::Ignored], 1);
        assert_eq!(m.open["wrap_session"], 2);
        assert!(!m.open.contains_key("spec_draft"));
        // Open ages 2 h and 1 h: median 1.5 h.
        assert_eq!(m.median_open_age["wrap_session"], Duration::from_secs(5400));
        let recent = metrics(&r, clock.now(), Some(clock.now())).unwrap();
        assert_eq!(recent.opened.get("wrap_session"), Some(&1));
        assert_eq!(r.open_counts().unwrap()["wrap_session"], 2);
    }

    /// With an odd number of open reminders the median age is the middle one.
    #[test]
    fn the_median_open_age_of_an_odd_count_is_the_middle_one() {
        for n in [1_u32, 3, 5] {
            let (t, clock) = TempState::manual();
            let r = Reminders::new(t.state.clone(), KindRegistry::preset());
            for i in 0..n {
                r.open(new("wrap_session", &format!("s{i}"))).unwrap();
                clock.advance(HOUR);
            }
            // Open ages n h, ..., 2 h, 1 h: the middle one is n / 2 + 1 h.
            let m = metrics(&r, clock.now(), None).unwrap();
            assert_eq!(m.median_open_age["wrap_session"], (n / 2 + 1) * HOUR, "{n}");
        }
    }
}
