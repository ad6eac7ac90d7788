//! The reminder tools. `remind_list` shows at most `limit` reminders (20
//! unless asked), oldest first; `total` counts them all.

use std::time::Duration;

use chipset_failure::Failure;
use chipset_loop::Attention;
use chipset_nudge::{NewReminder, ReminderFilter};
use chipset_store::{AgentId, Timestamp};

use super::{Ctx, Outcome, Reply, TENANT, id};
use crate::params::{RemindList, RemindOpen, RemindResolve, RemindSnooze, limit};
use crate::view::{ReminderOpened, Reminders};

pub(crate) fn remind_open(ctx: &Ctx, p: RemindOpen) -> Outcome {
    let to: AgentId = match &p.to {
        Some(to) => id(to)?,
        None => ctx.agent.clone(),
    };
    let mut new = NewReminder {
        tenant_id: TENANT.to_owned(),
        kind: p.kind,
        source_type: p.source_type,
        source_id: p.source_id,
        message: p.message,
        ..NewReminder::default()
    };
    new.metadata.insert(
        Attention::REMINDER_AGENT_FIELD.to_owned(),
        serde_json::Value::String(to.to_string()),
    );
    let (view, note) = ReminderOpened::of(ctx.reminders().open(&new)?);
    let text = format!("{} {}\n", view.outcome, view.reminder.id);
    Ok(Reply::noted(text, view, note.map(str::to_owned)))
}

pub(crate) fn remind_list(ctx: &Ctx, p: RemindList) -> Outcome {
    let limit = limit(p.limit)?;
    let filter = ReminderFilter {
        kind: p.kind,
        ..ReminderFilter::default()
    };
    let since = p
        .since
        .as_deref()
        .map(|t| {
            t.parse::<Timestamp>()
                .map_err(|e| Failure::usage(format!("`since`: expected an RFC 3339 time: {e}")))
        })
        .transpose()?;
    let mut listing = ctx.reminders().list(&filter)?;
    if let Some(since) = since {
        listing.items.retain(|r| r.created_at > since);
    }
    let view = Reminders::of(&listing, Some(limit));
    let mut text = String::new();
    for r in &view.reminders {
        text.push_str(&format!(
            "{} {} {}:{} since {}: {}\n",
            r.id, r.kind, r.source_type, r.source_id, r.created_at, r.message
        ));
    }
    let all = listing.items.len();
    if view.reminders.len() < all {
        text.push_str(&format!(
            "… {} more ({all} open): pass a larger `limit`\n",
            all - view.reminders.len(),
        ));
    }
    if text.is_empty() {
        text = "no open reminders\n".to_owned();
    }
    let failure = Failure::unreadable(&listing, "reminder");
    let mut reply = Reply::new(text, view);
    reply.failure = failure;
    Ok(reply)
}

pub(crate) fn remind_resolve(ctx: &Ctx, p: RemindResolve) -> Outcome {
    let id: chipset_nudge::ReminderId = id(&p.id)?;
    let r = ctx.reminders().resolve(&id, p.resolution.into(), p.note)?;
    let resolution = r
        .resolution
        .map_or_else(|| "open".to_owned(), |res| res.to_string());
    let text = format!("resolved {id} ({resolution})\n");
    let note =
        (r.id != id).then(|| format!("it was snoozed: recorded as {}, reopened from {id}", r.id));
    Ok(Reply::noted(text, r, note))
}

pub(crate) fn remind_snooze(ctx: &Ctx, p: RemindSnooze) -> Outcome {
    let id: chipset_nudge::ReminderId = id(&p.id)?;
    if p.hours == 0 {
        return Err(Failure::usage("hours must be at least 1"));
    }
    let r = ctx
        .reminders()
        .snooze(&id, Duration::from_secs(u64::from(p.hours) * 3600), None)?;
    let until = r
        .snooze_until
        .map_or_else(String::new, |t| format!(" until {t}"));
    Ok(Reply::new(format!("snoozed {}{until}\n", r.id), &r))
}
