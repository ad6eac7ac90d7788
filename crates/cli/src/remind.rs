//! `chipset remind ...`: [`chipset_nudge::Reminders`] from a shell, with the
//! seed's six kinds ([`KindRegistry::preset`]).

use std::collections::BTreeMap;
use std::time::Duration;

use chipset_loop::Attention;
use chipset_mcp::view::{self, ReminderOpened};
use chipset_nudge::{NewReminder, Reminder, ReminderFilter, Reminders, Resolution};
use chipset_store::{Listing, Timestamp};

use crate::Ctx;
use crate::cli::RemindCommand;
use crate::error::{CliError, Result};
use crate::output::{self, Output, Table};
use crate::view::{KindMetrics, Metrics, NothingOpen};

/// The tenant every reminder opened from the command line belongs to (the
/// seed's `tenant_id` scopes reminders to an organisation; one state root is
/// one organisation here).
pub(crate) const TENANT: &str = "default";

/// Returns the reminder channel with the preset kinds.
pub(crate) fn reminders(ctx: &Ctx) -> Reminders {
    ctx.chipset.reminders().clone()
}

/// Runs one reminder command.
pub(crate) fn run(ctx: &Ctx, command: RemindCommand) -> Result<Output> {
    let reminders = reminders(ctx);
    match command {
        RemindCommand::Open {
            kind,
            source_type,
            source_id,
            message,
            agent,
        } => {
            let mut new = NewReminder {
                tenant_id: TENANT.to_owned(),
                kind,
                source_type,
                source_id,
                message,
                ..NewReminder::default()
            };
            if let Some(agent) = agent {
                new.metadata.insert(
                    Attention::REMINDER_AGENT_FIELD.to_owned(),
                    agent.to_string().into(),
                );
            }
            let (view, note) = ReminderOpened::of(reminders.open(&new)?);
            let out = Output::new(format!("{}\n", view.reminder.id), output::json(&view));
            Ok(out.with_note_if(note))
        }
        RemindCommand::List { kind } => {
            let filter = ReminderFilter {
                kind,
                ..ReminderFilter::default()
            };
            let listing = reminders.list(&filter)?;
            let now = ctx.state.now();
            let mut table = Table::new(&["ID", "KIND", "SOURCE", "AGE", "MESSAGE"]);
            for r in &listing.items {
                table.row(vec![
                    r.id.to_string().into(),
                    r.kind.clone().into(),
                    format!("{}:{}", r.source_type, r.source_id).into(),
                    output::age(now, r.created_at).into(),
                    r.message.clone().into(),
                ]);
            }
            let text = if table.is_empty() {
                "no open reminders\n".to_owned()
            } else {
                table.render(ctx.paint)
            };
            let failure = CliError::unreadable(&listing, "reminder");
            let doc = output::json(&view::Reminders::of(&listing, None));
            Ok(Output::new(text, doc).with_failure(failure))
        }
        RemindCommand::Resolve {
            id,
            resolution,
            note,
        } => {
            let r = reminders.resolve(&id, resolution.into(), note)?;
            let out = changed(&r, format!("resolved {id} ({})\n", resolution_of(&r)));
            // A snoozed reminder is reopened and resolved as a new record.
            Ok(if r.id == id {
                out
            } else {
                out.with_note(format!(
                    "it was snoozed: recorded as {}, reopened from {id}",
                    r.id
                ))
            })
        }
        RemindCommand::Snooze { id, hours } => {
            let r = reminders.snooze(&id, Duration::from_secs(u64::from(hours) * 3600), None)?;
            let until = r
                .snooze_until
                .map_or_else(String::new, |t| format!(" until {t}"));
            Ok(changed(&r, format!("snoozed {}{until}\n", r.id)))
        }
        RemindCommand::Clear {
            kind,
            source_type,
            source_id,
            verb,
        } => Ok(
            match reminders.auto_resolve(&kind, &source_type, &source_id, &verb)? {
                Some(r) => changed(
                    &r,
                    format!(
                        "cleared {} ({kind} {source_type}:{source_id}) by {verb}\n",
                        r.id
                    ),
                ),
                None => Output::new(
                    format!("nothing open for {kind} {source_type}:{source_id}\n"),
                    output::json(&NothingOpen {
                        outcome: "nothing-open",
                    }),
                ),
            },
        ),
        RemindCommand::History { kind } => {
            // An unknown kind is refused, not listed as nothing.
            let filter = ReminderFilter {
                kind,
                history: true,
                ..ReminderFilter::default()
            };
            let listing = reminders.list(&filter)?;
            let mut table = Table::new(&["ID", "KIND", "SOURCE", "CREATED", "STATE", "BY"]);
            for r in &listing.items {
                let state = match (r.resolution, r.snooze_until) {
                    (Some(res), _) => res.to_string(),
                    (None, Some(until)) => format!("snoozed until {until}"),
                    (None, None) => "open".to_owned(),
                };
                table.row(vec![
                    r.id.to_string().into(),
                    r.kind.clone().into(),
                    format!("{}:{}", r.source_type, r.source_id).into(),
                    r.created_at.to_string().into(),
                    state.into(),
                    r.resolved_by_verb.clone().unwrap_or_default().into(),
                ]);
            }
            let text = if table.is_empty() {
                "no reminders\n".to_owned()
            } else {
                table.render(ctx.paint)
            };
            let failure = CliError::unreadable(&listing, "reminder");
            let doc = output::json(&view::Reminders::of(&listing, None));
            Ok(Output::new(text, doc).with_failure(failure))
        }
        RemindCommand::Metrics { since } => {
            let all = history(&reminders)?;
            let m = compute(&all.items, ctx.chipset.now()?, since);
            let mut kinds: Vec<&String> = m
                .opened
                .keys()
                .chain(m.open.keys())
                .chain(m.resolved.keys())
                .collect();
            kinds.sort();
            kinds.dedup();
            let mut table = Table::new(&["KIND", "OPENED", "RESOLVED", "OPEN", "MEDIAN OPEN AGE"]);
            let mut doc = std::collections::BTreeMap::new();
            for kind in kinds {
                let opened = m.opened.get(kind).copied().unwrap_or(0);
                let resolved = m.resolved.get(kind);
                let by: Vec<String> = resolved
                    .into_iter()
                    .flatten()
                    .map(|(res, n)| format!("{n} {res}"))
                    .collect();
                let open = m.open.get(kind).copied().unwrap_or(0);
                let age = m.median_open_age.get(kind);
                table.row(vec![
                    kind.clone().into(),
                    opened.to_string().into(),
                    if by.is_empty() {
                        "0".to_owned()
                    } else {
                        by.join(", ")
                    }
                    .into(),
                    open.to_string().into(),
                    age.map_or_else(|| "-".to_owned(), |d| output::short_duration(*d))
                        .into(),
                ]);
                doc.insert(
                    kind.clone(),
                    KindMetrics {
                        opened,
                        resolved: resolved
                            .into_iter()
                            .flatten()
                            .map(|(res, n)| (res.to_string(), *n))
                            .collect(),
                        open,
                        median_open_age_ms: age
                            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
                    },
                );
            }
            let text = if table.is_empty() {
                "no reminders\n".to_owned()
            } else {
                table.render(ctx.paint)
            };
            // An unreadable record may count anywhere: the figures are
            // printed, and the command fails naming it.
            let view = Metrics {
                since,
                kinds: doc,
                unreadable: view::unreadable(&all),
            };
            let failure = CliError::unreadable(&all, "reminder");
            Ok(Output::new(text, output::json(&view)).with_failure(failure))
        }
    }
}

fn changed(r: &Reminder, text: String) -> Output {
    Output::new(text, output::json(r))
}

fn resolution_of(r: &Reminder) -> String {
    r.resolution
        .map_or_else(|| "open".to_owned(), |res| res.to_string())
}

/// What `remind metrics` shows: counts and ages per kind, the seed's
/// §10.3 figures, computed from every reminder record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct ReminderMetrics {
    /// `nudges_opened_total{kind}`: reminders created in the window.
    opened: BTreeMap<String, u64>,
    /// `nudges_resolved_total{kind, resolution}`: reminders resolved in the window.
    resolved: BTreeMap<String, BTreeMap<Resolution, u64>>,
    /// `nudges_open{kind}`: reminders open now.
    open: BTreeMap<String, u64>,
    /// Median age of the reminders open now, per kind.
    median_open_age: BTreeMap<String, Duration>,
}

/// Returns every reminder ever opened, and the records that could not be
/// read: what `remind metrics` counts. Reads the whole history.
fn history(reminders: &Reminders) -> chipset_nudge::Result<Listing<Reminder>> {
    reminders.list(&ReminderFilter {
        history: true,
        ..ReminderFilter::default()
    })
}

/// Returns the metrics at `now`; counters count events at or after `since`
/// (the seed uses 30 days; everything when `None`), gauges are for now.
#[cfg(test)]
fn metrics(
    reminders: &Reminders,
    now: Timestamp,
    since: Option<Timestamp>,
) -> chipset_nudge::Result<ReminderMetrics> {
    Ok(compute(&history(reminders)?.items, now, since))
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
        r.open(&new("wrap_session", "a")).unwrap();
        clock.advance(HOUR);
        r.open(&new("wrap_session", "b")).unwrap();
        clock.advance(HOUR);
        r.open(&new("wrap_session", "c")).unwrap();
        let d = r.open(&new("spec_draft", "d")).unwrap();
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
                r.open(&new("wrap_session", &format!("s{i}"))).unwrap();
                clock.advance(HOUR);
            }
            // Open ages n h, ..., 2 h, 1 h: the middle one is n / 2 + 1 h.
            let m = metrics(&r, clock.now(), None).unwrap();
            assert_eq!(m.median_open_age["wrap_session"], (n / 2 + 1) * HOUR, "{n}");
        }
    }
}
