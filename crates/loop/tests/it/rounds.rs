//! Critic/executor rounds: the commit gate (fail closed), stalemate,
//! the round limit, the sweep, and resuming after a kill.

use chipset_loop::{
    Blocker, CriticFinding, CriticReport, EscalationReason, Phase, Rounds, RoundsConfig, Routing,
    Topic,
};
use chipset_mail::{Location, NewMessage};
use chipset_store::TaskId;

use crate::{Setup, agent, setup};

both!(
    the_commit_gate_blocks_until_the_answer_arrives_then_commits_and_sweeps,
    pending_replies_that_do_not_shrink_across_two_rounds_escalate_as_a_stalemate,
    too_many_rounds_escalate,
    a_killed_orchestrator_resumes_where_it_was,
    two_orchestrators_cannot_both_move_a_round,
    reopening_an_escalated_round_announces_it_again_once,
    rounds_write_and_read_back_the_checkpoint_of_each_task,
);

fn task(t: &str) -> TaskId {
    TaskId::new(t).unwrap()
}

fn rounds(s: &Setup) -> Rounds {
    s.rounds(RoundsConfig {
        escalate_to: Some(agent("human")),
        ..RoundsConfig::default()
    })
}

/// Returns `t`'s checkpoint file as JSON: the rounds' history is on disk,
/// not in the API.
fn checkpoint_file(s: &Setup, t: &TaskId) -> serde_json::Value {
    s.loop_json(&format!("rounds/{t}.json"))
}

fn ask(s: &Setup, t: &str, subject: &str, round: u32) -> chipset_mail::Message {
    s.mail
        .send(
            &NewMessage::request(
                agent("np-critic"),
                agent("np-executor"),
                task(t),
                subject,
                "why?",
            )
            .with_round(u64::from(round)),
        )
        .unwrap()
}

fn answer(s: &Setup, request: &chipset_mail::Message) {
    s.mail
        .send(&NewMessage::response(
            agent("np-executor"),
            agent("np-critic"),
            request.id.clone(),
            request.subject.clone(),
            "because",
        ))
        .unwrap();
}

fn the_commit_gate_blocks_until_the_answer_arrives_then_commits_and_sweeps(s: Setup) {
    let r = rounds(&s);
    let t = task("M005-S007-T0002");
    let mut round = r.open(&t).unwrap();
    assert_eq!((round.number(), round.phase()), (1, Phase::Executor));

    round.executor_done().unwrap();
    let question = ask(&s, t.as_str(), "dead-code", 1);
    round.critic_done(CriticReport::default()).unwrap();
    let routing = round.route().unwrap();
    assert_eq!(
        routing,
        Routing::AnotherRound {
            blockers: vec![Blocker::PendingReplies {
                pending_subjects: vec!["dead-code".to_owned()]
            }]
        }
    );
    assert_eq!((round.number(), round.phase()), (2, Phase::Executor));

    answer(&s, &question);
    round.executor_done().unwrap();
    round.critic_done(CriticReport::default()).unwrap();
    assert_eq!(round.route().unwrap(), Routing::Commit);
    assert_eq!(round.phase(), Phase::Committing);
    let swept = round.committed().unwrap();
    assert_eq!(swept.moved, 2, "the question and its answer");
    assert_eq!(round.phase(), Phase::Committed);
    assert!(matches!(
        s.mail.locate(&question.id).unwrap(),
        Some(Location::ByTask(_))
    ));
    let checkpoint = checkpoint_file(&s, &t);
    assert_eq!(checkpoint["history"].as_array().unwrap().len(), 2);
    assert_eq!(checkpoint["swept"], 2, "the sweep's count is kept");
}

#[test]
fn an_unreadable_gate_blocks_the_commit() {
    let s = setup();
    let r = rounds(&s);
    let t = task("T1");
    // A torn file in some inbox: it might be a request of this task.
    let inbox = s.tmp.at("mail/inbox/np-executor");
    s.tmp.state.ensure_dir(&inbox).unwrap();
    s.tmp
        .state
        .write_bytes(
            &inbox.join_static("1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab.json"),
            b"{ torn",
        )
        .unwrap();
    assert!(s.mail.pending_replies(&t).is_err());
    let mut round = r.open(&t).unwrap();
    round.executor_done().unwrap();
    round.critic_done(CriticReport::default()).unwrap();
    let routing = round.route().unwrap();
    let Routing::AnotherRound { blockers } = routing else {
        panic!("{routing:?}")
    };
    assert!(matches!(blockers[..], [Blocker::GateUnreadable { .. }]));
    assert_eq!(checkpoint_file(&s, &t)["history"][0]["gate"], "unreadable");
}

fn pending_replies_that_do_not_shrink_across_two_rounds_escalate_as_a_stalemate(s: Setup) {
    let r = rounds(&s);
    let t = task("T2");
    let mut round = r.open(&t).unwrap();
    round.executor_done().unwrap();
    let q1 = ask(&s, "T2", "scope-creep", 1);
    round.critic_done(CriticReport::default()).unwrap();
    assert!(matches!(
        round.route().unwrap(),
        Routing::AnotherRound { .. }
    ));

    // The executor answers; the critic is not satisfied and asks again.
    answer(&s, &q1);
    round.executor_done().unwrap();
    ask(&s, "T2", "scope-creep", 2);
    round.critic_done(CriticReport::default()).unwrap();
    let routing = round.route().unwrap();
    let Routing::Escalate { reason, .. } = &routing else {
        panic!("{routing:?}")
    };
    assert_eq!(
        reason,
        &EscalationReason::Stalemate {
            previous: 1,
            pending: 1,
            pending_subjects: vec!["scope-creep".to_owned()]
        }
    );
    assert_eq!(round.phase(), Phase::Escalated);
    assert!(round.executor_done().is_err(), "final");
    // The escalation woke the human.
    let pending = s.bus().pending(&agent("human")).unwrap();
    assert_eq!(pending.events[0].kind, Topic::RoundEscalation.to_string());
}

fn too_many_rounds_escalate(s: Setup) {
    let r = s.rounds(RoundsConfig {
        max_rounds: 2,
        ..RoundsConfig::default()
    });
    let mut round = r.open(&task("T3")).unwrap();
    let failing = CriticReport {
        verify_exit_code: 1,
        findings: vec![CriticFinding {
            category: "missing-test".into(),
            detail: "no test for X".into(),
        }],
    };
    round.executor_done().unwrap();
    round.critic_done(failing.clone()).unwrap();
    assert!(
        matches!(round.route().unwrap(), Routing::AnotherRound { ref blockers } if blockers.len() == 2)
    );
    round.executor_done().unwrap();
    round.critic_done(failing).unwrap();
    assert!(matches!(
        round.route().unwrap(),
        Routing::Escalate {
            reason: EscalationReason::TooManyRounds { max_rounds: 2 },
            ..
        }
    ));
}

fn a_killed_orchestrator_resumes_where_it_was(s: Setup) {
    let t = task("T4");
    {
        let r = rounds(&s);
        let mut round = r.open(&t).unwrap();
        round.executor_done().unwrap();
        round.critic_done(CriticReport::default()).unwrap();
        assert_eq!(round.route().unwrap(), Routing::Commit);
        // Killed after routing, before the commit and the sweep.
    }
    s.mail
        .send(&NewMessage::notify(
            agent("np-critic"),
            agent("np-executor"),
            t.clone(),
            "style",
            "fyi",
        ))
        .unwrap();
    let r = rounds(&s);
    let mut round = r.open(&t).unwrap();
    assert_eq!(round.phase(), Phase::Committing);
    assert_eq!(round.number(), 1);
    assert!(round.executor_done().is_err());
    assert_eq!(round.committed().unwrap().moved, 1);
    assert!(s.mail.inbox(&agent("np-executor")).unwrap().is_empty());
    // And again after a kill mid-routing-phase.
    let mut other = r.open(&task("T5")).unwrap();
    other.executor_done().unwrap();
    drop(other);
    let mut other = r.open(&task("T5")).unwrap();
    assert_eq!(other.phase(), Phase::Critic);
    other.critic_done(CriticReport::default()).unwrap();
    assert_eq!(other.route().unwrap(), Routing::Commit);
}

fn two_orchestrators_cannot_both_move_a_round(s: Setup) {
    let r = rounds(&s);
    let mut one = r.open(&task("T6")).unwrap();
    let mut two = r.open(&task("T6")).unwrap();
    one.executor_done().unwrap();
    assert!(matches!(
        two.executor_done().unwrap_err(),
        chipset_loop::Error::Conflict { .. }
    ));
}

/// Regression: a crash between checkpointing an escalation and publishing its
/// wake-up lost the wake-up for good; reopening the round now announces it.
fn reopening_an_escalated_round_announces_it_again_once(s: Setup) {
    let t = task("T9");
    // A process that escalates but never publishes: as if killed in between.
    let silent = s.rounds(RoundsConfig::default());
    let mut round = silent.open(&t).unwrap();
    round.executor_done().unwrap();
    let q1 = ask(&s, "T9", "scope-creep", 1);
    round.critic_done(CriticReport::default()).unwrap();
    round.route().unwrap();
    answer(&s, &q1);
    round.executor_done().unwrap();
    ask(&s, "T9", "scope-creep", 2);
    round.critic_done(CriticReport::default()).unwrap();
    assert!(matches!(round.route().unwrap(), Routing::Escalate { .. }));
    let bus = s.bus();
    assert!(bus.pending(&agent("human")).unwrap().is_empty());

    // The restarted orchestrator opens the round: the human is woken.
    let round = rounds(&s).open(&t).unwrap();
    assert_eq!(round.phase(), Phase::Escalated);
    let pending = bus.pending(&agent("human")).unwrap();
    assert_eq!(pending.events.len(), 1);
    assert_eq!(pending.events[0].kind, Topic::RoundEscalation.to_string());
    // Opening it again does not wake the human twice, nor does an
    // orchestrator under another name, whose announcement would differ.
    rounds(&s).open(&t).unwrap();
    let renamed = s.rounds(RoundsConfig {
        escalate_to: Some(agent("human")),
        orchestrator: "conductor".to_owned(),
        ..RoundsConfig::default()
    });
    assert_eq!(renamed.open(&t).unwrap().phase(), Phase::Escalated);
    assert_eq!(bus.pending(&agent("human")).unwrap().events.len(), 1);
}

/// A rounds handle writes one checkpoint per task it opened, and reads each
/// back.
fn rounds_write_and_read_back_the_checkpoint_of_each_task(s: Setup) {
    let r = rounds(&s);
    // The names of the checkpoints (not the lock files beside them).
    let tasks = || s.loop_names("rounds");
    assert_eq!(tasks(), Vec::<String>::new());
    assert_eq!(r.get(&task("t2")).unwrap(), None);
    let two = r.open(&task("t2")).unwrap();
    let one = r.open(&task("t1")).unwrap();
    assert_eq!(tasks(), ["t1.json", "t2.json"]);
    assert_eq!(r.get(&task("t1")).unwrap(), Some(one));
    assert_eq!(r.get(&task("t2")).unwrap(), Some(two));
}
