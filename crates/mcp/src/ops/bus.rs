//! The bus tools. `bus_pending` and `bus_wait` show at most `limit` events
//! (20 unless asked), critical first; `total` counts them all.

use chipset_bus::{NewEvent, Pending};
use chipset_failure::Failure;
use chipset_store::AgentId;
use serde_json::Value;

use super::{Ctx, Outcome, Reply, id};
use crate::params::{BusAck, BusPending, BusPublish, limit};
use crate::view::{Acked, BadEntry, Events, Published};

/// Returns the events reply of `bus_pending` and `bus_wait`.
pub(crate) fn events(
    agent: &AgentId,
    pending: &Pending,
    limit: usize,
    timed_out: Option<bool>,
) -> Reply {
    let all = &pending.events;
    let shown = &all[..all.len().min(limit)];
    let mut text = String::new();
    for e in shown {
        // The text keeps an agent's context small, as mail's does without
        // bodies: a long payload is cut there, whole in the result.
        let payload = match &e.payload {
            Value::Null => String::new(),
            v => {
                let v = v.to_string();
                match v.char_indices().nth(200) {
                    Some((at, _)) => format!(" {}… ({} bytes)", &v[..at], v.len()),
                    None => format!(" {v}"),
                }
            }
        };
        text.push_str(&format!(
            "{} {} {} {} at {}{payload}\n",
            e.id,
            e.priority.as_str(),
            e.source,
            e.kind,
            e.created_at
        ));
    }
    if shown.len() < all.len() {
        text.push_str(&format!(
            "… {} more ({} pending): acknowledge these, or pass a larger `limit`\n",
            all.len() - shown.len(),
            all.len()
        ));
    }
    if text.is_empty() {
        text = match timed_out {
            Some(true) => format!("timed out: no pending events for {agent}\n"),
            _ => format!("no pending events for {agent}\n"),
        };
    }
    let failure = Failure::unreadable_queue(agent, &pending.unreadable);
    let view = Events {
        events: shown.to_vec(),
        unreadable: pending.unreadable.iter().map(BadEntry::from).collect(),
        total: Some(all.len()),
        timed_out,
    };
    let mut reply = Reply::new(text, view);
    reply.failure = failure;
    reply
}

pub(crate) fn bus_publish(ctx: &Ctx, p: BusPublish) -> Outcome {
    let to: AgentId = id(&p.to)?;
    // The source is the server's agent: an agent cannot publish as another.
    let mut event = NewEvent::new(ctx.agent.to_string(), p.kind);
    if let Some(priority) = p.priority {
        event = event.with_priority(priority.into());
    }
    if let Some(key) = p.dedup_key {
        event = event.with_dedup_key(key);
    }
    if let Some(payload) = p.payload {
        event = event.with_payload(payload);
    }
    if let Some(chosen) = p.id.as_deref() {
        event = event.with_id(id(chosen)?);
    }
    let view = Published::from(ctx.bus().publish(&to, &event)?);
    let text = match &view {
        Published::Delivered { event } => format!("published {} to {to}\n", event.id),
        Published::Duplicate {
            key,
            original,
            accepted_at,
        } => format!(
            "duplicate: key `{key}` was accepted for `{to}` at {accepted_at} \
             (event {original}); nothing was published\n"
        ),
    };
    Ok(Reply::new(text, view))
}

pub(crate) fn bus_pending(ctx: &Ctx, p: BusPending) -> Outcome {
    let limit = limit(p.limit)?;
    let pending = ctx.bus().pending(&ctx.agent)?;
    Ok(events(&ctx.agent, &pending, limit, None))
}

pub(crate) fn bus_ack(ctx: &Ctx, p: BusAck) -> Outcome {
    let event_id: chipset_bus::EventId = id(&p.event_id)?;
    let acked = ctx.bus().ack(&ctx.agent, &event_id)?;
    let view = Acked::of(&ctx.agent, &event_id, acked);
    let text = match acked {
        true => format!("acked {event_id}\n"),
        false => format!("{event_id} was acknowledged already\n"),
    };
    Ok(Reply::new(text, view))
}
