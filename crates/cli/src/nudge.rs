//! `chipset nudge ...`: [`chipset_nudge::Nudges`] from a shell.

use chipset_mcp::view::{NudgeAnswered, NudgeRead, NudgeSent, nudge_id};
use chipset_nudge::{Delivery, NewNudge, NudgeType, Nudges};
use chipset_store::AgentId;

use crate::Ctx;
use crate::cli::NudgeCommand;
use crate::error::Result;
use crate::output::{self, Output};

/// Runs one nudge command.
pub(crate) fn run(ctx: &Ctx, command: NudgeCommand) -> Result<Output> {
    let nudges = ctx.chipset.nudges().clone();
    match command {
        NudgeCommand::Send {
            from,
            to,
            kind,
            message,
            requires_response,
        } => {
            let mut draft = NewNudge::new(from, NudgeType::from(kind.as_str()), message);
            if requires_response {
                draft = draft.requiring_response();
            }
            send(&to, nudges.send(&to, &draft)?)
        }
        NudgeCommand::Read { who } => read(ctx, &nudges, &who.agent()?),
        NudgeCommand::Respond { who, message } => respond(&nudges, &who.agent()?, message),
    }
}

fn send(to: &AgentId, delivery: Delivery) -> Result<Output> {
    let (view, note) = NudgeSent::of(to, delivery)?;
    let out = Output::new(format!("{}\n", nudge_id(&view.nudge)), output::json(&view));
    Ok(out.with_note_if(note))
}

fn read(ctx: &Ctx, nudges: &Nudges, agent: &AgentId) -> Result<Output> {
    let (view, note) = NudgeRead::of(agent, nudges.read_and_mark(agent)?)?;
    let Some(nudge) = &view.nudge else {
        return Ok(Output::new(
            format!("no nudge for {agent}\n"),
            output::json(&view),
        ));
    };
    let now = ctx.state.now();
    let mut pairs = vec![
        ("state", view.state.as_str().to_owned()),
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
    let out = Output::new(output::fields(&pairs), output::json(&view));
    Ok(out.with_note_if(note))
}

fn respond(nudges: &Nudges, agent: &AgentId, message: String) -> Result<Output> {
    let (view, note) = NudgeAnswered::respond(nudges, agent, message)?;
    Ok(Output::new(view.line(), output::json(&view)).with_note_if(note))
}
