//! The nudge tools: read, respond, send.

use chipset_failure::Failure;
use chipset_nudge::{Nudge, NudgeType, Nudges, Received};
use chipset_store::{AgentId, ReadOutcome};

use super::{Ctx, Outcome, Reply, id};
use crate::params::{NudgeRespond, NudgeSend};
use crate::view::{NudgeAnswered, NudgeRead, NudgeSent, NudgeState};

/// Returns a nudge's id, or its timestamp when it has none (seed nudges).
pub(crate) fn nudge_id(nudge: &Nudge) -> String {
    nudge
        .id
        .as_ref()
        .map_or_else(|| nudge.timestamp.to_string(), ToString::to_string)
}

/// Reads the latest nudge and marks a new one processed; returns the view
/// and a note when the read is in doubt. Shared with the command line's
/// `nudge read`, which renders it its own way.
pub(crate) fn read(
    nudges: &Nudges,
    agent: &AgentId,
) -> Result<(NudgeRead, Option<String>), Failure> {
    let received = nudges.read_and_mark(agent)?;
    let note = match &received {
        ReadOutcome::Value(r) => r.doubt(),
        _ => None,
    };
    let (state, nudge) = match received {
        ReadOutcome::Missing => (NudgeState::Empty, None),
        ReadOutcome::Value(Received::Seen(n)) => (NudgeState::Seen, Some(n)),
        ReadOutcome::Value(Received::New(n) | Received::Unsure { nudge: n, .. }) => {
            (NudgeState::New, Some(n))
        }
        ReadOutcome::Corrupt(c) => return Err(Failure::nudge_unreadable(agent, &c)),
        _ => return Err(Failure::nudge_not_read(agent)),
    };
    Ok((NudgeRead { state, nudge }, note))
}

pub(crate) fn nudge_read(ctx: &Ctx) -> Outcome {
    let agent = &ctx.agent;
    let (read, note) = read(&ctx.nudges(), agent)?;
    let text = match &read.nudge {
        None => format!("no nudge for {agent}\n"),
        Some(nudge) => {
            let response = if nudge.requires_response {
                " (response required: nudge_respond)"
            } else {
                ""
            };
            format!(
                "{} {} from {} at {}{response}: {}\n",
                read.state.as_str(),
                nudge.kind,
                nudge.from,
                nudge.timestamp,
                nudge.message
            )
        }
    };
    Ok(Reply::noted(text, read, note))
}

/// Answers the latest nudge and marks it processed; returns the view and a
/// note when the answer was held behind an abort.
pub(crate) fn respond(
    nudges: &Nudges,
    agent: &AgentId,
    message: String,
) -> Result<(NudgeAnswered, Option<String>), Failure> {
    let incoming = Failure::nudge_to_answer(agent, nudges.read_latest(agent)?)?;
    let delivery = nudges.respond(agent, &incoming, message)?;
    nudges.mark_processed(agent, &incoming)?;
    let note = delivery.is_held().then(|| {
        format!(
            "`{}` has an unprocessed abort, so the answer is in its responses/{agent}.json \
             but not in its latest.json",
            incoming.from
        )
    });
    let view = NudgeAnswered {
        delivery: delivery.outcome().to_owned(),
        answered: incoming,
        response: delivery.nudge().clone(),
    };
    Ok((view, note))
}

pub(crate) fn nudge_respond(ctx: &Ctx, p: NudgeRespond) -> Outcome {
    let nudges = ctx.nudges();
    let message = p.message.unwrap_or_else(|| "Acknowledged".to_owned());
    let (view, note) = respond(&nudges, &ctx.agent, message)?;
    let text = format!(
        "answered {} from {} ({})\n",
        view.answered.kind,
        view.answered.from,
        nudge_id(&view.response)
    );
    Ok(Reply::noted(text, view, note))
}

pub(crate) fn nudge_send(ctx: &Ctx, p: NudgeSend) -> Outcome {
    let to: AgentId = id(&p.to)?;
    if p.kind.is_empty() {
        return Err(Failure::usage("a nudge needs a non-empty type"));
    }
    let mut draft = chipset_nudge::NewNudge::new(
        ctx.agent.clone(),
        NudgeType::from(p.kind.as_str()),
        p.message,
    );
    if p.requires_response.unwrap_or(false) {
        draft = draft.requiring_response();
    }
    let delivery = ctx.nudges().send(&to, draft)?;
    let (view, note) = NudgeSent::of(&to, delivery)?;
    let text = format!("{} {} to {to}\n", view.outcome, nudge_id(&view.nudge));
    Ok(Reply::noted(text, view, note))
}
