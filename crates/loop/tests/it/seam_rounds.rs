//! The rounds' calls through the store's I/O seam: the cases of
//! [`crate::seam`] for `Rounds::open` and each step of a `Round`.

use chipset_loop::{CriticReport, Error, Phase, Round, Routing, Topic};
use chipset_mail::{Location, MessageId, NewMessage};

use crate::agent;
use crate::seam::{Case, Returned, World, power_cuts, sweep, task};

/// The id of the task's one message, which the commit sweeps.
fn note() -> MessageId {
    MessageId::new("1772706900123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab").unwrap()
}

fn critic_clean(w: &World) {
    w.reopen();
    w.step(Round::executor_done).unwrap();
    w.step(|r| r.critic_done(CriticReport::default())).unwrap();
}

fn critic_failing(w: &World) {
    w.reopen();
    w.step(Round::executor_done).unwrap();
    let failed = CriticReport {
        verify_exit_code: 1,
        ..CriticReport::default()
    };
    w.step(|r| r.critic_done(failed)).unwrap();
}

/// A clean round routed to commit, with a message of the task to sweep.
fn committing(w: &World) {
    w.mail
        .send(
            &NewMessage::notify(
                agent("critic"),
                agent("executor"),
                task(),
                "review-note",
                "looks good",
            )
            .with_id(note()),
        )
        .unwrap();
    critic_clean(w);
    assert_eq!(w.step(Round::route).unwrap(), Routing::Commit);
}

/// `Rounds::open` and each step of a round.
fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "rounds open",
            setup: |_| {},
            phase: None,
            run: |w| {
                let round = w.rounds.open(&task())?;
                *w.round.borrow_mut() = Some(round);
                w.returned(Returned::Stepped);
                Ok(())
            },
            applied: |w| at(w, Phase::Executor, 0),
            returned: handle_is_the_checkpoint,
        },
        Case {
            name: "round executor done",
            setup: |w| drop(w.rounds.open(&task()).unwrap()),
            phase: Some(Phase::Executor),
            run: |w| stepped(w, Round::executor_done),
            applied: |w| at(w, Phase::Critic, 0),
            returned: handle_is_the_checkpoint,
        },
        Case {
            name: "round critic done",
            setup: |w| {
                w.reopen();
                w.step(Round::executor_done).unwrap();
            },
            phase: Some(Phase::Critic),
            run: |w| stepped(w, |r| r.critic_done(CriticReport::default())),
            applied: |w| {
                at(w, Phase::Routing, 0)
                    && w.checkpoint().unwrap()["report"]["verify_exit_code"] == 0
            },
            returned: handle_is_the_checkpoint,
        },
        Case {
            name: "round route to commit",
            setup: critic_clean,
            phase: Some(Phase::Routing),
            run: route,
            applied: |w| at(w, Phase::Committing, 1) && routed(w) == "commit",
            returned: returned_the_routing,
        },
        Case {
            name: "round route to escalation",
            setup: critic_failing,
            phase: Some(Phase::Routing),
            run: route,
            applied: |w| {
                at(w, Phase::Escalated, 1)
                    && routed(w) == "escalate"
                    && w.events("human", Topic::RoundEscalation).len() == 1
            },
            returned: returned_the_routing,
        },
        Case {
            name: "round committed",
            setup: committing,
            phase: Some(Phase::Committing),
            run: |w| stepped(w, |r| r.committed().map(drop)),
            applied: |w| {
                at(w, Phase::Committed, 1)
                    && w.checkpoint().unwrap()["swept"] == 1
                    && matches!(w.mail.locate(&note()).unwrap(), Some(Location::ByTask(_)))
            },
            returned: handle_is_the_checkpoint,
        },
    ]
}

fn stepped(w: &World, f: impl FnOnce(&mut Round) -> Result<(), Error>) -> Result<(), Error> {
    w.step(f)?;
    w.returned(Returned::Stepped);
    Ok(())
}

fn route(w: &World) -> Result<(), Error> {
    let routing = w.step(Round::route)?;
    w.returned(Returned::Routed(routing));
    Ok(())
}

/// The checkpoint is in `phase`, round 1, with `history` rounds routed.
fn at(w: &World, phase: Phase, history: usize) -> bool {
    let Some(c) = w.checkpoint() else {
        return false;
    };
    let got = w.rounds.get(&task()).unwrap().unwrap();
    got.phase() == phase
        && got.number() == 1
        && c["history"].as_array().map_or(0, Vec::len) == history
}

/// How the one routed round was routed (`commit`, `escalate`…).
fn routed(w: &World) -> String {
    let c = w.checkpoint().unwrap();
    let r = &c["history"][0]["routing"];
    r.get("decision")
        .or_else(|| r.get("routing"))
        .and_then(|v| v.as_str())
        .map_or_else(|| r.to_string(), str::to_owned)
}

fn handle_is_the_checkpoint(w: &World, what: &str) {
    assert!(
        matches!(w.returned.borrow_mut().pop(), Some(Returned::Stepped)),
        "{what}: nothing returned"
    );
    let on_disk = w.rounds.get(&task()).unwrap();
    assert_eq!(w.round.borrow().as_ref(), on_disk.as_ref(), "{what}");
}

fn returned_the_routing(w: &World, what: &str) {
    let Some(Returned::Routed(routing)) = w.returned.borrow_mut().pop() else {
        panic!("{what}: no routing returned");
    };
    let c = w.checkpoint().unwrap();
    let recorded: Routing = serde_json::from_value(c["history"][0]["routing"].clone()).unwrap();
    assert_eq!(routing, recorded, "{what}");
    let on_disk = w.rounds.get(&task()).unwrap();
    assert_eq!(w.round.borrow().as_ref(), on_disk.as_ref(), "{what}");
}

#[test]
fn every_fault_in_a_round_call_is_safe_to_retry() {
    sweep(cases());
}

#[test]
fn every_power_cut_in_a_round_call_reads_clean_and_keeps_what_returned() {
    power_cuts(cases());
}
