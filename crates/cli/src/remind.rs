//! `chipset remind ...`: [`chipset_nudge::Reminders`] from a shell, with the
//! seed's six kinds ([`KindRegistry::preset`]).

use std::time::Duration;

use chipset_loop::Attention;
use chipset_mcp::view::{self, ReminderOpened};
use chipset_nudge::{NewReminder, Reminder, ReminderFilter, Reminders};

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
            let (view, note) = ReminderOpened::of(reminders.open(new)?);
            let out = Output::new(format!("{}\n", view.reminder.id), output::json(&view));
            Ok(match note {
                Some(note) => out.with_note(note),
                None => out,
            })
        }
        RemindCommand::List { kind } => {
            let filter = ReminderFilter {
                kind,
                ..ReminderFilter::default()
            };
            let listing = reminders.list_open(&filter)?;
            let now = ctx.state.now();
            let mut table = Table::new(&["ID", "KIND", "SOURCE", "AGE", "MESSAGE"]);
            for r in &listing.reminders {
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
            let failure = listing
                .corrupt
                .first()
                .map(|c| CliError::unreadable_reminders(listing.corrupt.len(), c));
            let doc = listed(listing);
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
            if let Some(k) = kind
                .as_ref()
                .filter(|k| reminders.registry().get(k).is_none())
            {
                return Err(chipset_nudge::Error::UnknownKind { kind: k.clone() }.into());
            }
            let filter = ReminderFilter {
                kind,
                ..ReminderFilter::default()
            };
            let listing = reminders.all(&filter)?;
            let mut table = Table::new(&["ID", "KIND", "SOURCE", "CREATED", "STATE", "BY"]);
            for r in &listing.reminders {
                let state = match (r.resolution, r.snooze_until) {
                    (Some(res), _) => res.as_str().to_owned(),
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
            let failure = listing.corrupt.first().map(|c| {
                CliError::refused(format!(
                    "{} ({c}); `chipset doctor --fix` quarantines them",
                    output::plural(listing.corrupt.len(), "unreadable reminder file")
                ))
            });
            let doc = listed(listing);
            Ok(Output::new(text, doc).with_failure(failure))
        }
        RemindCommand::Metrics { since } => {
            let now = match ctx.chipset.backend() {
                Some(server) => server
                    .now()
                    .map_err(|e| chipset_nudge::Error::Backend(Box::new(e)))?,
                None => ctx.state.now(),
            };
            let m = crate::remind_metrics::metrics(&reminders, now, since)?;
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
                    .map(|(res, n)| format!("{n} {}", res.as_str()))
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
                            .map(|(res, n)| (res.as_str().to_owned(), *n))
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
            let view = Metrics { since, kinds: doc };
            Ok(Output::new(text, output::json(&view)))
        }
    }
}

/// Returns the view of a reminder listing (no limit on the command line).
fn listed(listing: chipset_nudge::Listing) -> serde_json::Value {
    output::json(&view::Reminders {
        unreadable: listing.corrupt.iter().map(ToString::to_string).collect(),
        reminders: listing.reminders,
        total: None,
    })
}

fn changed(r: &Reminder, text: String) -> Output {
    Output::new(text, output::json(r))
}

fn resolution_of(r: &Reminder) -> &'static str {
    r.resolution.map_or("open", |res| res.as_str())
}
