//! The Nubosloop (seed 002): critic/executor rounds with addressed mail.
//!
//! Task one: the critic asks the executor a question; the commit gate
//! (verification passed, no findings, no pending replies) blocks until the
//! answer arrives; the orchestrator restarts in between and resumes from its
//! checkpoint; the task commits and its mail is swept into the by-task
//! archive. Task two: the executor answers, the critic asks again, pending
//! replies do not shrink across two rounds, and the round escalates
//! (stalemate).
//!
//! `cargo run --example nubosloop [-- --root DIR]`
//!
//! Without `--root`, a fresh temporary state directory is made and kept, so
//! the mail, manifest and loop state it prints the path of can be read
//! afterwards.

#[macro_use]
mod support;

use std::path::PathBuf;

use chipset::bus::Bus;
use chipset::r#loop::{
    Blocker, CriticReport, EscalationReason, Phase, Round, Rounds, RoundsConfig, Routing, Topic,
};
use chipset::mail::{Location, Mail, Message, NewMessage};
use chipset::store::{AgentId, StateDir, TaskId};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn say(round: &Round, role: &str, what: impl AsRef<str>) {
    say!("  round {}  {role:<9} {}", round.number(), what.as_ref());
}

struct Agents {
    critic: AgentId,
    executor: AgentId,
}

impl Agents {
    /// The critic sends a request to the executor: it holds up the task's commit.
    fn ask(&self, mail: &Mail, round: &Round, subject: &str, question: &str) -> Result<Message> {
        let m = mail.send(
            &NewMessage::request(
                self.critic.clone(),
                self.executor.clone(),
                round.task().clone(),
                subject,
                question,
            )
            .with_round(u64::from(round.number())),
        )?;
        say(
            round,
            "critic",
            format!(
                "asks {}: \"{question}\" ({subject}, expects a reply)",
                self.executor
            ),
        );
        Ok(m)
    }

    /// The executor reads its inbox for the task and answers every request.
    fn answer_all(&self, mail: &Mail, round: &Round, answer: &str) -> Result<()> {
        let requests: Vec<Message> = mail
            .inbox(&self.executor)?
            .into_iter()
            .filter(|m| m.task() == round.task() && m.needs_reply())
            .collect();
        say(
            round,
            "executor",
            format!("reads its inbox: {} open request(s)", requests.len()),
        );
        for r in requests {
            mail.send(&NewMessage::response(
                self.executor.clone(),
                self.critic.clone(),
                r.id.clone(),
                r.subject.clone(),
                answer,
            ))?;
            say(
                round,
                "executor",
                format!("answers {}: \"{answer}\"", r.subject),
            );
        }
        Ok(())
    }
}

fn route(round: &mut Round) -> Result<Routing> {
    let routing = round.route()?;
    let number = round.number();
    match &routing {
        Routing::Commit => say(
            round,
            "routing",
            "verified, no findings, no pending replies: commit",
        ),
        Routing::AnotherRound { blockers } => {
            let why: Vec<String> = blockers.iter().map(describe).collect();
            say!(
                "  round {}  {:<9} commit blocked ({}): back to the executor",
                number - 1,
                "routing",
                why.join("; ")
            );
        }
        Routing::Escalate { reason, .. } => {
            let why = match reason {
                EscalationReason::Stalemate {
                    previous, pending, ..
                } => format!("pending replies did not shrink ({previous} -> {pending}): stalemate"),
                EscalationReason::TooManyRounds { max_rounds } => {
                    format!("no commit after {max_rounds} rounds")
                }
                other => format!("{other:?}"),
            };
            say(round, "routing", format!("{why}: escalate to a human"));
        }
        other => say(round, "routing", format!("{other:?}")),
    }
    Ok(routing)
}

fn describe(b: &Blocker) -> String {
    match b {
        Blocker::PendingReplies { pending_subjects } => {
            format!("pending replies: {}", pending_subjects.join(", "))
        }
        Blocker::VerificationFailed { exit_code } => format!("verification exit code {exit_code}"),
        Blocker::Findings { categories } => format!("findings: {}", categories.join(", ")),
        Blocker::GateUnreadable { error } => format!("gate unreadable: {error}"),
        other => format!("{other:?}"),
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let root = match args.iter().position(|a| a == "--root") {
        Some(i) => PathBuf::from(args.get(i + 1).ok_or("--root needs a directory")?),
        None => tempfile::Builder::new()
            .prefix("nubosloop-")
            .tempdir()?
            .keep()
            .join("state"),
    };
    let state = StateDir::open(&root)?;
    say!("state directory: {}", state.root().display());
    let mail = Mail::new(state.clone());
    let human = AgentId::new("human")?;
    let config = RoundsConfig {
        escalate_to: Some(human.clone()),
        ..RoundsConfig::default()
    };
    let agents = Agents {
        critic: AgentId::new("np-critic")?,
        executor: AgentId::new("np-executor")?,
    };

    // Task one: a question, a blocked gate, a restart, an answer, a commit.
    let task1 = TaskId::new("M005-S007-T0001")?;
    say!();
    say!("task {task1}");
    let rounds = Rounds::new(state.clone(), config.clone());
    let mut round = rounds.open(&task1)?;
    say(&round, "executor", "writes the change");
    round.executor_done()?;
    let question = agents.ask(
        &mail,
        &round,
        "dead-code",
        "did you intend to delete FoobarService?",
    )?;
    say(
        &round,
        "critic",
        "verification passed (exit 0), no findings",
    );
    round.critic_done(CriticReport::default())?;
    route(&mut round)?;
    drop((round, rounds));

    say!("  (the orchestrator is killed and restarted)");
    let rounds = Rounds::new(state.clone(), config.clone());
    let mut round = rounds.open(&task1)?;
    say(
        &round,
        "resume",
        format!(
            "checkpoint loop/rounds/{task1}.json: round {}, {} phase",
            round.number(),
            round.phase()
        ),
    );
    agents.answer_all(&mail, &round, "yes: it was unused")?;
    round.executor_done()?;
    say(
        &round,
        "critic",
        "verification passed (exit 0), no findings",
    );
    round.critic_done(CriticReport::default())?;
    let first = route(&mut round)?;
    let swept = round.committed()?;
    say(
        &round,
        "commit",
        format!(
            "committed; swept {} message(s) into mail/archive/by-task/{task1}/",
            swept.moved
        ),
    );
    let where_now = mail.locate(&question.id)?;

    // Task two: the answer does not satisfy the critic, who asks again.
    let task2 = TaskId::new("M005-S007-T0002")?;
    say!();
    say!("task {task2}");
    let mut round = rounds.open(&task2)?;
    say(&round, "executor", "writes the change");
    round.executor_done()?;
    agents.ask(
        &mail,
        &round,
        "scope-creep",
        "why does this touch the billing module?",
    )?;
    round.critic_done(CriticReport::default())?;
    route(&mut round)?;
    agents.answer_all(&mail, &round, "it needed a small refactor")?;
    round.executor_done()?;
    agents.ask(
        &mail,
        &round,
        "scope-creep",
        "the refactor is out of scope: please revert it",
    )?;
    round.critic_done(CriticReport::default())?;
    let second = route(&mut round)?;
    let woken = Bus::new(state.clone()).pending(&human)?;
    for event in &woken.events {
        say!(
            "  {:<17} woken by a {} {} event",
            human.as_str(),
            event.priority,
            event.kind
        );
    }

    // The outcome, checked.
    let one = rounds.get(&task1)?.ok_or("task one has no checkpoint")?;
    let two = rounds.get(&task2)?.ok_or("task two has no checkpoint")?;
    say!();
    say!("{task1}: {} after {} round(s)", one.phase(), one.number());
    say!("{task2}: {} after {} round(s)", two.phase(), two.number());
    let ok = first == Routing::Commit
        && one.phase() == Phase::Committed
        && swept.moved == 2
        && matches!(where_now, Some(Location::ByTask(_)))
        && two.phase() == Phase::Escalated
        && matches!(
            second,
            Routing::Escalate {
                reason: EscalationReason::Stalemate { .. },
                ..
            }
        )
        && woken
            .events
            .iter()
            .any(|e| e.kind == Topic::RoundEscalation.to_string());
    if !ok {
        return Err("unexpected outcome: see above".into());
    }
    Ok(())
}
