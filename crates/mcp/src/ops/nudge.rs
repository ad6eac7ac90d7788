//! The nudge tools: read, respond, send.

use chipset_failure::Failure;
use chipset_nudge::{Delivery, Nudge, NudgeType, Nudges, Received};
use chipset_store::{AgentId, ReadOutcome};

use super::{Ctx, Outcome, Reply, id};
use crate::params::{NudgeRespond, NudgeSend};
use crate::view::{NudgeAnswered, NudgeRead, NudgeSent, NudgeState, nudge_id};

pub(crate) fn nudge_read(ctx: &Ctx) -> Outcome {
    let agent = &ctx.agent;
    let (read, note) = NudgeRead::of(agent, ctx.nudges().read_and_mark(agent)?)?;
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

pub(crate) fn nudge_respond(ctx: &Ctx, p: NudgeRespond) -> Outcome {
    let nudges = ctx.nudges();
    let message = p.message.unwrap_or_else(|| "Acknowledged".to_owned());
    let (view, note) = NudgeAnswered::respond(nudges, &ctx.agent, message)?;
    Ok(Reply::noted(view.line(), view, note))
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
    let delivery = ctx.nudges().send(&to, &draft)?;
    let (view, note) = NudgeSent::of(&to, delivery)?;
    let text = format!("{} {} to {to}\n", view.outcome, nudge_id(&view.nudge));
    Ok(Reply::noted(text, view, note))
}

impl NudgeRead {
    /// Returns the view of `agent`'s nudge as read and marked
    /// ([`Nudges::read_and_mark`](chipset_nudge::Nudges::read_and_mark)),
    /// and a note when the read is in doubt.
    ///
    /// # Errors
    ///
    /// The refusal of an unreadable or unusable `latest.json`.
    pub fn of(
        agent: &AgentId,
        read: ReadOutcome<Received>,
    ) -> Result<(Self, Option<String>), Failure> {
        let (state, nudge, note) = match read {
            ReadOutcome::Missing => (NudgeState::Empty, None, None),
            ReadOutcome::Value(Received::Seen(n)) => (NudgeState::Seen, Some(n), None),
            ReadOutcome::Value(Received::New(n)) => (NudgeState::New, Some(n), None),
            ReadOutcome::Value(Received::Unsure { nudge, record }) => {
                let note = format!(
                    "the processed record was unreadable ({}) and was moved aside; \
                     this nudge may have been seen before",
                    record.reason
                );
                (NudgeState::New, Some(nudge), Some(note))
            }
            ReadOutcome::Corrupt(c) => return Err(Failure::nudge_unreadable(agent, &c)),
            _ => return Err(Failure::nudge_not_read(agent)),
        };
        Ok((NudgeRead { state, nudge }, note))
    }
}

impl NudgeAnswered {
    /// Answers `agent`'s latest nudge with `message` and marks it
    /// processed: the `nudge respond` command and tool. Returns the view,
    /// and a note when the answer was held behind an abort or the nudge
    /// could not be marked processed.
    ///
    /// # Errors
    ///
    /// When there is no nudge to answer, or the answer was not recorded.
    /// Once it is, a failure to mark the nudge processed is a note, never
    /// a failure: a retry of an answer to a nudge without an id would send
    /// a second one.
    pub fn respond(
        nudges: &Nudges,
        agent: &AgentId,
        message: String,
    ) -> Result<(Self, Option<String>), Failure> {
        let incoming = Failure::nudge_to_answer(agent, nudges.read_latest(agent)?)?;
        let delivery = nudges.respond(agent, &incoming, message)?;
        let unmarked = nudges.mark_processed(agent, &incoming).err().map(|e| {
            format!(
                "answered, but the nudge could not be marked processed ({}); \
                 it shows as new until it is",
                Failure::from(e)
            )
        });
        let (view, held) = NudgeAnswered::of(agent, incoming, &delivery);
        let note = match (held, unmarked) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        };
        Ok((view, note))
    }

    /// Returns its line of text: what was answered, from whom, and the
    /// answer's id.
    pub fn line(&self) -> String {
        format!(
            "answered {} from {} ({})\n",
            self.answered.kind,
            self.answered.from,
            nudge_id(&self.response)
        )
    }

    /// Returns the view of `agent`'s answer to `answered`, delivered as
    /// `delivery` says, and a note when the answer was held behind the
    /// asker's unprocessed abort.
    pub fn of(agent: &AgentId, answered: Nudge, delivery: &Delivery) -> (Self, Option<String>) {
        let note = matches!(delivery, Delivery::Held { .. }).then(|| {
            format!(
                "`{}` has an unprocessed abort, so the answer is in its responses/{agent}.json \
                 but not in its latest.json",
                answered.from
            )
        });
        let view = NudgeAnswered {
            answered,
            response: delivery.nudge().clone(),
            delivery: delivery_word(delivery).to_owned(),
        };
        (view, note)
    }
}

/// What a send or an answer's delivery did, as one word: `delivered`,
/// `replaced`, `held` or `repaired-corrupt`.
fn delivery_word(delivery: &Delivery) -> &'static str {
    match delivery {
        Delivery::Delivered { .. } => "delivered",
        Delivery::Replaced { .. } => "replaced",
        Delivery::Held { .. } => "held",
        Delivery::RepairedCorrupt { .. } => "repaired-corrupt",
        _ => "unknown",
    }
}

impl NudgeSent {
    /// Returns the view of a delivery to `to` and its note (a nudge
    /// replaced, an unreadable file moved aside).
    ///
    /// # Errors
    ///
    /// The refusal of a nudge held behind an unprocessed abort.
    pub fn of(to: &AgentId, delivery: Delivery) -> Result<(Self, Option<String>), Failure> {
        let outcome = delivery_word(&delivery).to_owned();
        let (nudge, previous, quarantined, note) = match delivery {
            Delivery::Delivered { sent, .. } => (sent, None, None, None),
            Delivery::Replaced { sent, previous, .. } => {
                let note = format!(
                    "replaced an unprocessed {} from `{}` (latest wins)",
                    previous.kind, previous.from
                );
                (sent, Some(previous), None, Some(note))
            }
            Delivery::RepairedCorrupt {
                sent, quarantined, ..
            } => {
                let note = format!(
                    "the unreadable latest.json of `{to}` was moved aside to `{}`",
                    quarantined.display()
                );
                (sent, None, Some(quarantined), Some(note))
            }
            Delivery::Held { pending, .. } => return Err(Failure::nudge_held(to, &pending.from)),
            _ => return Err(Failure::nudge_not_sent(to)),
        };
        let view = NudgeSent {
            outcome,
            to: to.clone(),
            nudge,
            previous,
            quarantined,
        };
        Ok((view, note))
    }
}

#[cfg(test)]
mod tests {
    use chipset_nudge::{Delivery, NewNudge, NudgeType, Nudges};
    use chipset_store::{AgentId, StateDir};

    use super::delivery_word;
    use crate::view::{NudgeRead, NudgeState};

    fn agent(name: &str) -> AgentId {
        AgentId::new(name).unwrap()
    }

    fn send(nudges: &Nudges, kind: NudgeType, message: &str) -> Delivery {
        let draft = NewNudge::new(agent("mayor"), kind, message);
        nudges.send(&agent("polecat-alpha"), &draft).unwrap()
    }

    /// The one-word outcomes the CLI and MCP print are pinned: scripts match them.
    #[test]
    fn delivery_words_are_pinned() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path()).unwrap();
        let nudges = Nudges::new(state.clone());
        let word = |kind, message| delivery_word(&send(&nudges, kind, message));
        assert_eq!(word(NudgeType::HealthCheck, "a"), "delivered");
        assert_eq!(word(NudgeType::Abort, "b"), "replaced");
        assert_eq!(word(NudgeType::HealthCheck, "c"), "held");
        let latest = nudges
            .agent_dir(&agent("polecat-alpha"))
            .join_static("latest.json");
        state.write_bytes(&latest, b"garbage").unwrap();
        assert_eq!(word(NudgeType::HealthCheck, "d"), "repaired-corrupt");
    }

    /// A nudge read over an unreadable processed record is new, with a
    /// note that it may have been seen before; a plain read has no note.
    #[test]
    fn a_read_in_doubt_says_so() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path()).unwrap();
        let nudges = Nudges::new(state.clone());
        let p = agent("polecat-alpha");
        let _ = send(&nudges, NudgeType::HealthCheck, "ping");
        let (read, note) = NudgeRead::of(&p, nudges.read_and_mark(&p).unwrap()).unwrap();
        assert_eq!((read.state, note), (NudgeState::New, None));
        let processed = nudges.agent_dir(&p).join_static("processed.json");
        state.write_bytes(&processed, b"{").unwrap();
        let (read, note) = NudgeRead::of(&p, nudges.read_and_mark(&p).unwrap()).unwrap();
        assert_eq!(read.state, NudgeState::New);
        let note = note.unwrap();
        assert!(note.contains("may have been seen before"), "{note}");
    }

    /// An answer recorded and delivered stands when marking the nudge
    /// processed fails after it: a note, never a failure (a retry would
    /// answer a nudge without an id a second time).
    #[test]
    fn an_answer_stands_when_the_nudge_cannot_be_marked() {
        use chipset_testkit::{EIO, Fault, FaultIo, manual_state};

        use crate::view::NudgeAnswered;

        let tmp = tempfile::tempdir().unwrap();
        let asked = |root: &str| {
            let io = FaultIo::passthrough();
            let state = manual_state(&tmp.path().join(root), io.clone());
            let nudges = Nudges::new(state);
            let draft = NewNudge::new(agent("mayor"), NudgeType::HealthCheck, "alive?");
            let _ = nudges
                .send(&agent("polecat-alpha"), &draft.requiring_response())
                .unwrap();
            io.set(Fault::nth(0, EIO));
            (io, nudges)
        };
        // How many calls the answer makes before the mark.
        let (io, nudges) = asked("count");
        let me = agent("polecat-alpha");
        let incoming = nudges.read_latest(&me).unwrap().value().unwrap();
        let _ = nudges.respond(&me, &incoming, "yes").unwrap();
        let before_mark = io.counted();
        // Every call from the mark's first on fails.
        let (io, nudges) = asked("cut");
        io.set(Fault {
            sticky: true,
            ..Fault::nth(before_mark + 1, EIO)
        });
        let (view, note) = NudgeAnswered::respond(&nudges, &me, "yes".into()).unwrap();
        assert!(io.injected() > 0, "the mark was cut");
        assert_eq!(view.delivery, "delivered");
        let note = note.unwrap();
        assert!(note.contains("could not be marked processed"), "{note}");
        io.disarm();
        let answers = nudges.responses_since(&agent("mayor"), view.answered.timestamp);
        assert_eq!(answers.unwrap().items, [view.response]);
    }
}
