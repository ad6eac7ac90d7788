//! The witness on a manual clock: nudges, signs of life, one escalation per
//! incident, restarts, grace, per-agent intervals, corrupt hooks.

use chipset_bus::Priority as BusPriority;
use chipset_hook::Pickup;
use chipset_loop::{Evidence, Topic, Witness, WitnessAction, WitnessConfig};
use chipset_mail::{Kind, MailPriority};
use chipset_nudge::{NudgeType, Received};
use chipset_store::{AgentId, ReadOutcome};

use crate::{Setup, agent, bead, body_json, escalation_body, secs, setup};

both!(
    a_corrupt_hook_is_reported_and_never_judged,
    silent_agent_gets_health_check_then_stall_warning_then_exactly_one_escalation,
    an_answer_resolves_the_incident_and_the_next_quiet_spell_is_measured_from_it,
    a_touch_after_the_nudge_counts_as_alive,
    a_pending_hook_never_picked_up_is_escalated_too,
    no_incident_opens_within_the_grace_period_after_an_assignment,
    a_restarted_witness_neither_repeats_nor_forgets_an_incident,
    a_witness_killed_before_its_escalation_mail_sends_it_on_restart,
    a_witness_killed_after_its_escalation_mail_does_not_send_it_again,
    per_agent_intervals_apply,
    a_corrupt_incident_record_skips_that_agent_only,
    an_incident_closes_when_the_hook_moves_on,
    two_witnesses_escalate_once,
    the_witness_log_records_every_action,
    run_until_ticks_until_told_to_stop,
);

fn config() -> WitnessConfig {
    WitnessConfig {
        stall_threshold: secs(300),
        nudge_interval: secs(60),
        grace: secs(0),
        ..WitnessConfig::default()
    }
}

fn witness(s: &Setup, config: WitnessConfig) -> Witness {
    witness_named(s, "witness", config)
}

fn witness_named(s: &Setup, me: &str, config: WitnessConfig) -> Witness {
    s.witness(me, config)
}

/// Assigns `bead` to `who` and activates it.
fn active(s: &Setup, who: &str, b: &str) -> chipset_hook::Assignment {
    s.hooks
        .assign(&agent(who), bead(b), "some work", Some(&agent("mayor")))
        .unwrap();
    let Pickup::Started(a) = s.hooks.pickup(&agent(who)).unwrap() else {
        panic!("expected started")
    };
    a
}

fn kinds(actions: &[WitnessAction]) -> Vec<&'static str> {
    actions
        .iter()
        .map(|a| match a {
            WitnessAction::HealthCheck { .. } => "health_check",
            WitnessAction::StallWarning { .. } => "stall_warning",
            WitnessAction::Alive { .. } => "alive",
            WitnessAction::Escalated { .. } => "escalated",
            WitnessAction::Closed { .. } => "closed",
            WitnessAction::Unreadable { .. } => "unreadable",
            _ => "other",
        })
        .collect()
}

fn latest_kind(s: &Setup, who: &AgentId) -> Option<NudgeType> {
    match s.nudges.read_latest(who).unwrap() {
        ReadOutcome::Value(n) => Some(n.kind),
        _ => None,
    }
}

fn silent_agent_gets_health_check_then_stall_warning_then_exactly_one_escalation(s: Setup) {
    let a = active(&s, "polecat-alpha", "gt-abc12");
    let w = witness(&s, config());
    let alpha = agent("polecat-alpha");

    s.advance(299);
    assert!(w.tick().unwrap().is_empty(), "not quiet yet");
    s.advance(2);
    let actions = w.tick().unwrap();
    assert_eq!(kinds(&actions), ["health_check"]);
    assert_eq!(latest_kind(&s, &alpha), Some(NudgeType::HealthCheck));
    let ReadOutcome::Value(n) = s.nudges.read_latest(&alpha).unwrap() else {
        panic!()
    };
    assert!(n.requires_response);
    assert_eq!(n.from, "witness");

    s.advance(59);
    assert!(w.tick().unwrap().is_empty(), "interval not over");
    s.advance(1);
    assert_eq!(kinds(&w.tick().unwrap()), ["stall_warning"]);
    assert_eq!(latest_kind(&s, &alpha), Some(NudgeType::StallWarning));

    s.advance(60);
    let actions = w.tick().unwrap();
    assert_eq!(kinds(&actions), ["escalated"]);
    let inbox = s.inbox(&agent("mayor"));
    assert_eq!(inbox.len(), 1);
    let m = &inbox[0];
    assert_eq!(m.subject, Topic::HealthEscalation.to_string());
    assert_eq!(m.kind, Kind::Notify);
    assert_eq!(m.priority, MailPriority::Urgent);
    assert_eq!(m.task().as_str(), "gt-abc12");
    let body = body_json(&m.body);
    assert_eq!(body["type"], "health_escalation");
    assert_eq!(body["assignment"], serde_json::to_value(&a).unwrap());
    let WitnessAction::Escalated {
        mail, recovered, ..
    } = &actions[0]
    else {
        panic!()
    };
    assert_eq!(mail, &m.id);
    assert!(!recovered);

    // The dispatcher is woken by a critical bus event.
    let pending = s.bus().pending(&agent("mayor")).unwrap();
    assert_eq!(pending.events.len(), 1);
    assert_eq!(pending.events[0].kind, Topic::HealthEscalation.to_string());
    assert_eq!(pending.events[0].priority, BusPriority::Critical);

    // Hours later, still silent: never a second escalation for this incident.
    for _ in 0..20 {
        s.advance(600);
        assert!(w.tick().unwrap().is_empty());
    }
    assert_eq!(s.sent(&Topic::HealthEscalation.to_string()).len(), 1);
    let incident = s.loop_json(&format!("witness/incidents/{alpha}.json"));
    assert_eq!(incident["step"], "escalated");
    assert_eq!(s.loop_names("witness/incidents"), ["polecat-alpha.json"]);
}

/// Issue 28: a stalled holder's pool item returns to the pool, once, with
/// the one escalation.
#[test]
fn a_stalled_holders_pool_item_returns_to_the_pool_with_the_escalation() {
    use chipset_pool::{NewItem, Pool, ReadyFilter, WorkState};
    let s = setup();
    let pool = Pool::new(s.state());
    let alpha = agent("polecat-alpha");
    let id = chipset_pool::ItemId::new("w-1").unwrap();
    pool.post(
        &agent("lead"),
        &NewItem::new("pooled work").with_id(id.clone()),
    )
    .unwrap();
    let claimed = pool
        .claim_next(&alpha, &ReadyFilter::new())
        .unwrap()
        .unwrap();
    s.hooks.activate(&claimed.assignment).unwrap();
    let w = witness(&s, config());
    s.advance(301);
    assert_eq!(kinds(&w.tick().unwrap()), ["health_check"]);
    s.advance(60);
    assert_eq!(kinds(&w.tick().unwrap()), ["stall_warning"]);
    s.advance(60);
    assert_eq!(kinds(&w.tick().unwrap()), ["escalated"]);
    assert_eq!(s.hooks.current(&alpha).unwrap(), None);
    let listed = pool.get(&id).unwrap();
    assert_eq!(listed.state, WorkState::Ready);
    let released = listed.entry.released.unwrap();
    assert_eq!((released.by, released.holder), (agent("witness"), alpha));
    assert_eq!(listed.entry.releases, 1);
    for _ in 0..5 {
        s.advance(600);
        w.tick().unwrap();
    }
    assert_eq!(s.sent(&Topic::HealthEscalation.to_string()).len(), 1);
    assert_eq!(pool.get(&id).unwrap().entry.releases, 1);
}

fn an_answer_resolves_the_incident_and_the_next_quiet_spell_is_measured_from_it(s: Setup) {
    active(&s, "polecat-alpha", "gt-abc12");
    let w = witness(&s, config());
    let alpha = agent("polecat-alpha");
    s.advance(301);
    assert_eq!(kinds(&w.tick().unwrap()), ["health_check"]);

    s.advance(10);
    let ReadOutcome::Value(Received::New(n)) = s.nudges.receive(&alpha).unwrap() else {
        panic!()
    };
    let _ = s.nudges.respond(&alpha, &n, "working on gt-abc12").unwrap();
    let actions = w.tick().unwrap();
    assert_eq!(kinds(&actions), ["alive"]);
    assert!(matches!(
        actions[0],
        WitnessAction::Alive {
            evidence: Evidence::Answered,
            ..
        }
    ));
    // The answer in the witness's own latest.json is marked processed.
    assert!(matches!(
        s.nudges.receive(&agent("witness")).unwrap(),
        ReadOutcome::Value(Received::Seen(_))
    ));

    // No warning at the old deadline; a new check only 300 s after the answer.
    s.advance(60);
    assert!(w.tick().unwrap().is_empty());
    s.advance(240); // 299 s after the answer
    assert!(w.tick().unwrap().is_empty());
    s.advance(2);
    assert_eq!(kinds(&w.tick().unwrap()), ["health_check"]);
    assert!(s.sent(&Topic::HealthEscalation.to_string()).is_empty());
}

/// A tick whose health check went out but whose incident record was lost
/// (its write failed, or a crash cut it) is retried by the next tick under
/// the same nudge id: the agent, which already got and answered the check,
/// gets no second one, and its answer counts.
#[test]
fn a_health_check_whose_record_was_lost_is_not_sent_again() {
    let s = setup();
    active(&s, "polecat-alpha", "gt-abc12");
    let w = witness(&s, config());
    let alpha = agent("polecat-alpha");
    s.advance(301);
    assert_eq!(kinds(&w.tick().unwrap()), ["health_check"]);
    let state = s.state();
    let record = chipset_testkit::state_path(&state, "loop/witness/incidents/polecat-alpha.json");
    assert!(
        state.remove_file(&record).unwrap(),
        "the record was written"
    );

    s.advance(10);
    let ReadOutcome::Value(Received::New(first)) = s.nudges.receive(&alpha).unwrap() else {
        panic!("the health check is pending")
    };
    let _ = s.nudges.respond(&alpha, &first, "on it").unwrap();
    s.nudges.mark_processed(&alpha, &first).unwrap();
    s.advance(1);
    assert_eq!(
        kinds(&w.tick().unwrap()),
        ["health_check"],
        "recorded again"
    );
    assert!(
        matches!(
            s.nudges.receive(&alpha).unwrap(),
            ReadOutcome::Value(Received::Seen(n)) if n.id == first.id
        ),
        "a second health check was sent"
    );
    s.advance(1);
    assert_eq!(kinds(&w.tick().unwrap()), ["alive"], "the answer counts");
}

/// A witness under another name that finds the first one's health check
/// sent but not recorded (the first failed, or crashed, in between) takes
/// it as sent instead of failing its tick on the nudge's id, and the
/// incident goes on to its stall warning.
#[test]
fn another_witness_takes_a_health_check_it_did_not_send_as_sent() {
    let s = setup();
    active(&s, "polecat-alpha", "gt-abc12");
    let first = witness(&s, config());
    s.advance(301);
    assert_eq!(kinds(&first.tick().unwrap()), ["health_check"]);
    let state = s.state();
    let record = chipset_testkit::state_path(&state, "loop/witness/incidents/polecat-alpha.json");
    assert!(state.remove_file(&record).unwrap());

    let second = witness_named(&s, "witness-2", config());
    s.advance(1);
    assert_eq!(kinds(&second.tick().unwrap()), ["health_check"]);
    let ReadOutcome::Value(n) = s.nudges.read_latest(&agent("polecat-alpha")).unwrap() else {
        panic!("the health check is there")
    };
    assert_eq!(n.from, "witness", "the first witness's check stands");
    s.advance(61);
    assert_eq!(kinds(&second.tick().unwrap()), ["stall_warning"]);
}

fn a_touch_after_the_nudge_counts_as_alive(s: Setup) {
    let a = active(&s, "polecat-alpha", "gt-abc12");
    let w = witness(&s, config());
    s.advance(301);
    assert_eq!(kinds(&w.tick().unwrap()), ["health_check"]);
    s.advance(90); // past the interval, but it touched before the tick
    s.hooks.touch(&a).unwrap();
    let actions = w.tick().unwrap();
    assert!(matches!(
        actions[..],
        [WitnessAction::Alive {
            evidence: Evidence::Touched,
            ..
        }]
    ));
    s.advance(120);
    assert!(w.tick().unwrap().is_empty());
}

fn a_pending_hook_never_picked_up_is_escalated_too(s: Setup) {
    s.hooks
        .assign(&agent("polecat-bravo"), bead("gt-x"), "t", None)
        .unwrap();
    let w = witness(&s, config());
    s.advance(301);
    assert_eq!(kinds(&w.tick().unwrap()), ["health_check"]);
    s.advance(60);
    assert_eq!(kinds(&w.tick().unwrap()), ["stall_warning"]);
    s.advance(60);
    assert_eq!(kinds(&w.tick().unwrap()), ["escalated"]);
}

fn no_incident_opens_within_the_grace_period_after_an_assignment(s: Setup) {
    let w = witness(
        &s,
        WitnessConfig {
            grace: secs(600),
            ..config()
        },
    );
    s.advance(1000); // the witness's own start grace is over
    active(&s, "polecat-alpha", "gt-abc12");
    s.advance(400);
    assert!(w.tick().unwrap().is_empty(), "quiet, but within the grace");
    s.advance(200);
    assert_eq!(kinds(&w.tick().unwrap()), ["health_check"]);
}

fn a_restarted_witness_neither_repeats_nor_forgets_an_incident(s: Setup) {
    active(&s, "polecat-alpha", "gt-abc12");
    let first = witness(
        &s,
        WitnessConfig {
            grace: secs(30),
            ..config()
        },
    );
    s.advance(301);
    assert_eq!(kinds(&first.tick().unwrap()), ["health_check"]);
    s.advance(60);
    assert_eq!(kinds(&first.tick().unwrap()), ["stall_warning"]);
    drop(first);

    // A new witness process: it does not send the health check or the
    // warning again, and it waits out its start grace before escalating.
    s.advance(10);
    let second = witness(
        &s,
        WitnessConfig {
            grace: secs(120),
            ..config()
        },
    );
    let actions = second.tick().unwrap();
    assert!(actions.is_empty(), "{actions:?}");
    s.advance(50); // the warning's interval is over, the restart grace not yet
    assert!(second.tick().unwrap().is_empty());
    s.advance(69);
    assert!(second.tick().unwrap().is_empty());
    s.advance(1);
    assert_eq!(kinds(&second.tick().unwrap()), ["escalated"]);
    drop(second);

    let third = witness(&s, config());
    for _ in 0..5 {
        s.advance(600);
        assert!(third.tick().unwrap().is_empty());
    }
    assert_eq!(s.sent(&Topic::HealthEscalation.to_string()).len(), 1);
}

/// Rewrites `agent`'s incident record as "escalating" with a chosen mail id
/// (a witness killed between its intent and its mail), and returns the id.
fn make_escalating(s: &Setup, who: &str) -> chipset_mail::MessageId {
    let rel = format!("witness/incidents/{who}.json");
    let mut v = s.loop_json(&rel);
    assert_eq!(v["step"], "warned");
    let id = chipset_mail::MessageId::from(chipset_store::SortableId::generate(&s.clock));
    v["step"] = "escalating".into();
    v["escalated_at"] = v["updated_at"].clone();
    v["mail"] = id.as_str().into();
    s.put_loop_bytes(
        &rel,
        &chipset_store::StateDir::to_canonical_json(&v).unwrap(),
    );
    id
}

fn a_witness_killed_before_its_escalation_mail_sends_it_on_restart(s: Setup) {
    active(&s, "polecat-alpha", "gt-abc12");
    let first = witness(&s, config());
    s.advance(301);
    first.tick().unwrap();
    s.advance(60);
    first.tick().unwrap();
    let id = make_escalating(&s, "polecat-alpha");
    drop(first);

    let second = witness(&s, config());
    let actions = second.tick().unwrap();
    let [
        WitnessAction::Escalated {
            mail,
            recovered: true,
            ..
        },
    ] = &actions[..]
    else {
        panic!("{actions:?}")
    };
    assert_eq!(mail, &id);
    assert_eq!(s.sent(&Topic::HealthEscalation.to_string()), [id]);
    assert!(second.tick().unwrap().is_empty());
}

fn a_witness_killed_after_its_escalation_mail_does_not_send_it_again(s: Setup) {
    let a = active(&s, "polecat-alpha", "gt-abc12");
    let first = witness(&s, config());
    s.advance(301);
    first.tick().unwrap();
    s.advance(60);
    first.tick().unwrap();
    let id = make_escalating(&s, "polecat-alpha");
    // The predecessor's mail went out under the persisted id ...
    let body = escalation_body(&a);
    let sent = s
        .mail
        .send(
            &chipset_mail::NewMessage::notify(
                agent("witness"),
                agent("mayor"),
                "gt-abc12".parse().unwrap(),
                Topic::HealthEscalation.to_string(),
                body.clone(),
            )
            .with_id(id.clone()),
        )
        .unwrap();
    // ... and the dispatcher even archived it already.
    let _ = s.mail.archive(&sent.id).unwrap();
    drop(first);

    let second = witness(&s, config());
    let actions = second.tick().unwrap();
    let [
        WitnessAction::Escalated {
            mail,
            recovered: true,
            ..
        },
    ] = &actions[..]
    else {
        panic!("{actions:?}")
    };
    assert_eq!(mail, &id);
    assert_eq!(
        s.sent(&Topic::HealthEscalation.to_string()).len(),
        1,
        "not sent again"
    );
    let incident = s.loop_json("witness/incidents/polecat-alpha.json");
    assert_eq!(incident["step"], "escalated");
}

fn per_agent_intervals_apply(s: Setup) {
    active(&s, "polecat-alpha", "gt-a");
    active(&s, "polecat-slow", "gt-b");
    let w = witness(&s, {
        let mut c = config();
        c.nudge_intervals.insert(agent("polecat-slow"), secs(600));
        c
    });
    s.advance(301);
    assert_eq!(kinds(&w.tick().unwrap()), ["health_check", "health_check"]);
    s.advance(60);
    let actions = w.tick().unwrap();
    assert_eq!(kinds(&actions), ["stall_warning"]);
    assert_eq!(actions[0].key().unwrap().agent, agent("polecat-alpha"));
    s.advance(60);
    assert_eq!(kinds(&w.tick().unwrap()), ["escalated"]);
    s.advance(479);
    assert!(
        w.tick().unwrap().is_empty(),
        "the slow agent's interval is not over"
    );
    s.advance(1);
    let actions = w.tick().unwrap();
    assert_eq!(kinds(&actions), ["stall_warning"]);
    assert_eq!(actions[0].key().unwrap().agent, agent("polecat-slow"));
}

fn a_corrupt_hook_is_reported_and_never_judged(s: Setup) {
    s.put_hook_bytes(&agent("polecat-broken"), b"{ not json");
    let w = witness(&s, config());
    s.advance(10_000);
    let actions = w.tick().unwrap();
    assert_eq!(kinds(&actions), ["unreadable"]);
    assert!(s.nudges.read_latest(&agent("polecat-broken")).unwrap() == ReadOutcome::Missing);
}

#[test]
fn a_hook_in_an_unknown_status_is_reported_and_never_judged() {
    let s = setup();
    let path = s.hooks.path(&agent("polecat-new"));
    let paused = r#"{"agent_id":"polecat-new","status":"paused","work_item":{"bead_id":"b","title":"t","assigned_at":"2026-03-05T10:00:00Z"},"last_activity":"2026-03-05T10:00:00Z"}"#;
    s.tmp.state.write_bytes(&path, paused.as_bytes()).unwrap();
    let w = witness(&s, config());
    s.advance(10_000);
    let actions = w.tick().unwrap();
    assert_eq!(kinds(&actions), ["unreadable"]);
    assert!(
        matches!(&actions[0], WitnessAction::Unreadable { reason, .. } if reason.contains("hook status `paused`")),
        "{actions:?}"
    );
    assert!(s.nudges.read_latest(&agent("polecat-new")).unwrap() == ReadOutcome::Missing);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), paused);
}

fn a_corrupt_incident_record_skips_that_agent_only(s: Setup) {
    active(&s, "polecat-alpha", "gt-a");
    active(&s, "polecat-bravo", "gt-b");
    let w = witness(&s, config());
    s.put_loop_bytes("witness/incidents/polecat-alpha.json", b"{ torn");
    s.advance(301);
    let actions = w.tick().unwrap();
    assert_eq!(kinds(&actions), ["unreadable", "health_check"]);
    assert_eq!(actions[1].key().unwrap().agent, agent("polecat-bravo"));
}

fn an_incident_closes_when_the_hook_moves_on(s: Setup) {
    let a = active(&s, "polecat-alpha", "gt-abc12");
    let w = witness(&s, config());
    s.advance(301);
    w.tick().unwrap();
    s.hooks.reassign(&a).unwrap();
    s.advance(60);
    let actions = w.tick().unwrap();
    assert_eq!(kinds(&actions), ["closed"]);
    s.advance(600);
    assert!(w.tick().unwrap().is_empty());
    assert!(s.sent(&Topic::HealthEscalation.to_string()).is_empty());
}

fn two_witnesses_escalate_once(s: Setup) {
    active(&s, "polecat-alpha", "gt-abc12");
    let one = witness(&s, config());
    let two = witness_named(&s, "witness-2", config());
    s.advance(301);
    let mut all = one.tick().unwrap();
    all.extend(two.tick().unwrap());
    s.advance(60);
    std::thread::scope(|sc| {
        let a = sc.spawn(|| one.tick().unwrap());
        let b = sc.spawn(|| two.tick().unwrap());
        all.extend(a.join().unwrap());
        all.extend(b.join().unwrap());
    });
    s.advance(60);
    std::thread::scope(|sc| {
        let a = sc.spawn(|| one.tick().unwrap());
        let b = sc.spawn(|| two.tick().unwrap());
        all.extend(a.join().unwrap());
        all.extend(b.join().unwrap());
    });
    assert_eq!(kinds(&all), ["health_check", "stall_warning", "escalated"]);
    assert_eq!(s.sent(&Topic::HealthEscalation.to_string()).len(), 1);
}

fn the_witness_log_records_every_action(s: Setup) {
    active(&s, "polecat-alpha", "gt-abc12");
    let w = witness(&s, config());
    let mut all = Vec::new();
    for _ in 0..3 {
        s.advance(301);
        all.extend(w.tick().unwrap());
    }
    let log: Vec<WitnessAction> = s.loop_log("witness/log.jsonl");
    assert_eq!(log, all);
    assert_eq!(all.len(), 3);
}

impl Setup {
    pub(crate) fn clock_now(&self) -> chipset_store::Timestamp {
        use chipset_store::Clock;
        self.clock.now()
    }
}

/// `run_until` ticks until its caller says stop: a silent agent gets its
/// health check by the time it returns.
fn run_until_ticks_until_told_to_stop(s: Setup) {
    active(&s, "polecat-alpha", "gt-1");
    let w = witness(&s, config());
    s.advance(301);
    let mut ticks = 0;
    w.run_until(secs(0), |actions| {
        ticks += 1;
        !actions.is_empty() || ticks == 50
    })
    .unwrap();
    assert_eq!(ticks, 1);
    assert_eq!(
        latest_kind(&s, &agent("polecat-alpha")),
        Some(NudgeType::HealthCheck)
    );
}
