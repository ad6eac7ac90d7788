//! `chipset nudge ...`: [`chipset_nudge::Nudges`] from a shell.

use chipset_nudge::{Delivery, NewNudge, Nudge, NudgeType, Nudges, Received};
use chipset_store::AgentId;
use serde_json::{Value, json};

use crate::Ctx;
use crate::cli::NudgeCommand;
use crate::error::{CliError, Result};
use crate::output::{self, Output};

/// Runs one nudge command.
pub(crate) fn run(ctx: &Ctx, command: NudgeCommand) -> Result<Output> {
    let nudges = Nudges::new(ctx.state.clone());
    match command {
        NudgeCommand::Send {
            from,
            to,
            kind,
            message,
            requires_response,
        } => {
            let mut draft = NewNudge::new(from, NudgeType::from_name(&kind), message);
            if requires_response {
                draft = draft.requiring_response();
            }
            send(&to, &nudges.send(&to, draft)?)
        }
        NudgeCommand::Read { agent } => read(ctx, &nudges, &agent),
        NudgeCommand::Respond { agent, message } => respond(&nudges, &agent, message),
    }
}

fn send(to: &AgentId, delivery: &Delivery) -> Result<Output> {
    let (outcome, note, extra) = match delivery {
        Delivery::Delivered { .. } => ("delivered", None, Value::Null),
        Delivery::Replaced { previous, .. } => (
            "replaced",
            Some(format!(
                "replaced an unprocessed {} from `{}` (latest wins)",
                previous.kind, previous.from
            )),
            output::json(previous),
        ),
        Delivery::RepairedCorrupt { quarantined, .. } => (
            "repaired-corrupt",
            Some(format!(
                "the unreadable latest.json of `{to}` was moved aside to `{}`",
                quarantined.display()
            )),
            json!(quarantined),
        ),
        Delivery::Held { pending, .. } => return Err(CliError::nudge_held(to, &pending.from)),
        _ => return Err(CliError::nudge_not_sent(to)),
    };
    let sent = delivery.sent().expect("a nudge that was not held was sent");
    let mut doc = json!({"outcome": outcome, "to": to, "nudge": output::json(sent)});
    match outcome {
        "replaced" => doc["previous"] = extra,
        "repaired-corrupt" => doc["quarantined"] = extra,
        _ => {}
    }
    let text = format!("{}\n", nudge_id(sent));
    let out = Output::new(text, doc);
    Ok(match note {
        Some(note) => out.with_note(note),
        None => out,
    })
}

fn read(ctx: &Ctx, nudges: &Nudges, agent: &AgentId) -> Result<Output> {
    let received = nudges.read_and_mark(agent)?;
    let note = received.doubt();
    let (state, nudge) = match received {
        Received::Empty => {
            return Ok(Output::new(
                format!("no nudge for {agent}\n"),
                json!({"state": "empty", "nudge": null}),
            ));
        }
        Received::Seen(n) => ("seen", n),
        Received::New(n) | Received::Unsure { nudge: n, .. } => ("new", n),
        Received::Corrupt(c) => return Err(CliError::nudge_unreadable(agent, &c)),
        _ => return Err(CliError::nudge_not_read(agent)),
    };
    let now = ctx.state.now();
    let mut pairs = vec![
        ("state", state.to_owned()),
        ("type", nudge.kind.to_string()),
        ("from", nudge.from.clone()),
        (
            "sent",
            format!(
                "{} ({} ago)",
                nudge.timestamp,
                output::age(now, nudge.timestamp)
            ),
        ),
    ];
    if nudge.requires_response {
        pairs.push(("response", "required (`chipset nudge respond`)".to_owned()));
    }
    pairs.push(("message", nudge.message.clone()));
    if let Some(id) = &nudge.id {
        pairs.push(("id", id.to_string()));
    }
    let out = Output::new(
        output::fields(&pairs),
        json!({"state": state, "nudge": output::json(&nudge)}),
    );
    Ok(match note {
        Some(note) => out.with_note(note),
        None => out,
    })
}

fn respond(nudges: &Nudges, agent: &AgentId, message: String) -> Result<Output> {
    let incoming = CliError::nudge_to_answer(agent, nudges.read_latest(agent)?)?;
    let responded = nudges.respond(agent, &incoming, message)?;
    nudges.mark_processed(agent, &incoming)?;
    let outcome = responded.delivery.outcome();
    let text = format!(
        "answered {} from {} ({})\n",
        incoming.kind,
        incoming.from,
        nudge_id(&responded.response)
    );
    let doc = json!({
        "answered": output::json(&incoming),
        "response": output::json(&responded.response),
        "delivery": outcome,
    });
    let out = Output::new(text, doc);
    Ok(if responded.delivery.is_held() {
        out.with_note(format!(
            "`{}` has an unprocessed abort, so the answer is in its responses/{agent}.json \
             but not in its latest.json",
            incoming.from
        ))
    } else {
        out
    })
}

fn nudge_id(nudge: &Nudge) -> String {
    nudge
        .id
        .as_ref()
        .map_or_else(|| nudge.timestamp.to_string(), ToString::to_string)
}
