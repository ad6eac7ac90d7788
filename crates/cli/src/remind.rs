//! `chipset remind ...`: [`chipset_nudge::Reminders`] from a shell, with the
//! seed's six kinds ([`KindRegistry::preset`]).

use std::time::Duration;

use chipset_loop::REMINDER_AGENT_FIELD;
use chipset_nudge::{
    KindRegistry, NewReminder, Opened, Reminder, ReminderFilter, ReminderKey, Reminders,
};
use serde_json::json;

use crate::Ctx;
use crate::cli::RemindCommand;
use crate::error::{CliError, Result};
use crate::output::{self, Output, Table};

/// The tenant every reminder opened from the command line belongs to (the
/// seed's `tenant_id` scopes reminders to an organisation; one state root is
/// one organisation here).
pub(crate) const TENANT: &str = "default";

/// Returns the reminder channel with the preset kinds.
pub(crate) fn reminders(ctx: &Ctx) -> Reminders {
    Reminders::new(ctx.state.clone(), KindRegistry::preset())
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
            let key = ReminderKey::new(kind, source_type, source_id)?;
            let mut new = NewReminder::new(TENANT, None, &key, message);
            if let Some(agent) = agent {
                new.metadata
                    .insert(REMINDER_AGENT_FIELD.to_owned(), json!(agent.as_str()));
            }
            let opened = reminders.open(new)?;
            let r = opened.reminder();
            let (outcome, note) = match &opened {
                Opened::New(_) => ("opened", None),
                Opened::Existing(_) => {
                    ("existing", Some("a reminder was open for this key already"))
                }
                Opened::Snoozed(_) => (
                    "snoozed",
                    Some("the reminder for this key is snoozed; it reopens when due"),
                ),
                _ => ("existing", None),
            };
            let out = Output::new(
                format!("{}\n", r.id),
                json!({"outcome": outcome, "reminder": output::json(r)}),
            );
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
            let doc = json!({
                "reminders": listing.reminders.iter().map(output::json).collect::<Vec<_>>(),
                "unreadable": listing.corrupt.iter().map(ToString::to_string).collect::<Vec<_>>(),
            });
            let failure = listing
                .corrupt
                .first()
                .map(|c| CliError::unreadable_reminders(listing.corrupt.len(), c));
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
    }
}

fn changed(r: &Reminder, text: String) -> Output {
    Output::new(text, output::json(r))
}

fn resolution_of(r: &Reminder) -> &'static str {
    r.resolution.map_or("open", |res| res.as_str())
}
