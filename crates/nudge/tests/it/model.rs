//! Model-based property tests: each channel against a plain in-memory model.

use std::collections::BTreeMap;
use std::time::Duration;

use chipset_nudge::{
    Delivery, Error, ManualResolution, NewNudge, NudgeType, Opened, Received, ReminderFilter,
    ReminderId, Resolution,
};
use chipset_store::{Clock, ReadOutcome, StateDir};
use proptest::prelude::*;

use crate::place::{Place, ReminderPlace};
use crate::support::DeliveryExt;
use crate::support::ReceivedExt;
use crate::support::ReminderExt;
use crate::support::preset;
use crate::support::{ReminderKey, new_reminder};
use crate::support::{agent, manual_no_sync};

// ---------------------------------------------------------------- signals

#[derive(Debug, Clone)]
enum SigOp {
    Send { to: usize, kind: usize },
    Receive { who: usize },
    Mark { who: usize },
    Respond { who: usize },
    Restart,
    Tick,
}

const KINDS: [&str; 5] = [
    "health_check",
    "stall_warning",
    "abort",
    "sync_request",
    "custom_kind",
];
const AGENTS: usize = 3;

fn sig_op() -> impl Strategy<Value = SigOp> {
    prop_oneof![
        4 => (0..AGENTS, 0..KINDS.len()).prop_map(|(to, kind)| SigOp::Send { to, kind }),
        3 => (0..AGENTS).prop_map(|who| SigOp::Receive { who }),
        3 => (0..AGENTS).prop_map(|who| SigOp::Mark { who }),
        2 => (0..AGENTS).prop_map(|who| SigOp::Respond { who }),
        1 => Just(SigOp::Restart),
        2 => Just(SigOp::Tick),
    ]
}

/// The model of one agent's nudge directory: (id, type, from) of the latest
/// nudge, the id last processed, and who has answered this agent.
#[derive(Debug, Default, Clone)]
struct SigModel {
    latest: Option<(String, String, String)>,
    processed: Option<String>,
    responders: BTreeMap<String, String>,
}

fn name(i: usize) -> String {
    format!("agent-{i}")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn signals_match_the_model(ops in proptest::collection::vec(sig_op(), 1..40)) {
        signals_model(&Place::fs(), ops)?;
    }

    #[test]
    fn signals_match_the_model_on_postgres(ops in proptest::collection::vec(sig_op(), 1..40)) {
        // A fresh schema per case, as a fresh directory per case above.
        if let Some(place) = Place::pg("signals_match_the_model_on_postgres") {
            signals_model(&place, ops)?;
        }
    }
}

/// Runs `ops` on the signals at `place` and checks each against the model.
fn signals_model(place: &Place, ops: Vec<SigOp>) -> Result<(), TestCaseError> {
    let (t, clock) = manual_no_sync();
    let mut nudges = place.open(&t.state);
    let mut model: Vec<SigModel> = vec![SigModel::default(); AGENTS];
    let sender = agent("mayor");
    for op in ops {
        match op {
            SigOp::Send { to, kind } => {
                let kind_name = KINDS[kind];
                let d = nudges
                    .send(
                        &agent(&name(to)),
                        &NewNudge::new(sender.clone(), NudgeType::from(kind_name), "m"),
                    )
                    .unwrap();
                let m = &mut model[to];
                let pending = m
                    .latest
                    .clone()
                    .filter(|(id, ..)| m.processed.as_ref() != Some(id));
                match (&pending, &d) {
                    (None, Delivery::Delivered { .. }) => {}
                    (Some((pid, pkind, _)), Delivery::Held { pending, .. }) => {
                        prop_assert_eq!(pkind.to_string(), "abort");
                        prop_assert_ne!(kind_name, "abort");
                        prop_assert_eq!(pending.id.as_ref().unwrap().as_str(), pid.as_str());
                    }
                    (Some((pid, pkind, _)), Delivery::Replaced { previous, .. }) => {
                        prop_assert!(pkind != "abort" || kind_name == "abort");
                        prop_assert_eq!(previous.id.as_ref().unwrap().as_str(), pid.as_str());
                    }
                    (p, d) => prop_assert!(false, "model {:?} vs {:?}", p, d),
                }
                if let Some(sent) = d.sent() {
                    m.latest = Some((
                        sent.id.as_ref().unwrap().to_string(),
                        kind_name.to_owned(),
                        "mayor".to_owned(),
                    ));
                }
            }
            SigOp::Receive { who } | SigOp::Mark { who } | SigOp::Respond { who } => {
                let got = nudges.receive(&agent(&name(who))).unwrap();
                let m = &model[who];
                match (&m.latest, &got) {
                    (None, ReadOutcome::Missing) => {}
                    (Some((id, ..)), ReadOutcome::Value(Received::Seen(n))) => {
                        prop_assert_eq!(m.processed.as_ref(), Some(id));
                        prop_assert_eq!(n.id.as_ref().unwrap().as_str(), id.as_str());
                    }
                    (Some((id, ..)), ReadOutcome::Value(Received::New(n))) => {
                        prop_assert_ne!(m.processed.as_ref(), Some(id));
                        prop_assert_eq!(n.id.as_ref().unwrap().as_str(), id.as_str());
                    }
                    (l, g) => prop_assert!(false, "model {:?} vs {:?}", l, g),
                }
                let Some(n) = got.to_process().cloned() else {
                    continue;
                };
                if matches!(op, SigOp::Mark { .. }) {
                    nudges.mark_processed(&agent(&name(who)), &n).unwrap();
                    model[who].processed = n.id.map(|i| i.to_string());
                } else if matches!(op, SigOp::Respond { .. }) && n.from != name(who) {
                    // Answer whoever sent it (the mayor, or a responder).
                    let Ok(to) = chipset_store::AgentId::new(n.from.as_str()) else {
                        continue;
                    };
                    let r = nudges.respond(&agent(&name(who)), &n, "ok").unwrap();
                    let rid = r.nudge().id.clone().unwrap().to_string();
                    if let Some(idx) = (0..AGENTS).find(|i| name(*i) == to.as_str()) {
                        let m = &mut model[idx];
                        m.responders.insert(name(who), rid.clone());
                        let pending = m
                            .latest
                            .clone()
                            .filter(|(id, ..)| m.processed.as_ref() != Some(id));
                        let held = pending.is_some_and(|(_, k, _)| k == "abort");
                        prop_assert_eq!(matches!(r, Delivery::Held { .. }), held);
                        if !held {
                            m.latest = Some((rid, "nudge_response".into(), name(who)));
                        }
                    }
                }
            }
            SigOp::Restart => {
                nudges = place.open(&StateDir::open(t.state.root()).unwrap());
            }
            SigOp::Tick => clock.advance(Duration::from_millis(1)),
        }
    }
    // Every answer is visible to its addressee.
    for (i, m) in model.iter().enumerate() {
        let got = nudges
            .responses_since(&agent(&name(i)), chipset_store::Timestamp::EPOCH)
            .unwrap();
        let ids: BTreeMap<String, String> = got
            .items
            .into_iter()
            .filter(|n| n.from != "mayor")
            .map(|n| (n.from, n.id.unwrap().to_string()))
            .collect();
        prop_assert_eq!(&ids, &m.responders);
    }
    Ok(())
}

// ---------------------------------------------------------------- reminders

#[derive(Debug, Clone)]
enum RemOp {
    Open(usize),
    Auto(usize),
    Resolve(usize, bool),
    Snooze(usize, u64),
    Advance(u64),
    List,
}

/// Keys: three wrap_session keys (auto-resolved by prism_wrap), one handoff (manual only).
const KEYS: usize = 4;

fn key(i: usize) -> ReminderKey {
    if i == 3 {
        ReminderKey::new(preset::HANDOFF_PENDING, "handoff", "h").unwrap()
    } else {
        ReminderKey::new(preset::WRAP_SESSION, "session", format!("s/{i}")).unwrap()
    }
}

fn rem_op() -> impl Strategy<Value = RemOp> {
    prop_oneof![
        4 => (0..KEYS).prop_map(RemOp::Open),
        2 => (0..KEYS).prop_map(RemOp::Auto),
        2 => (0..KEYS, any::<bool>()).prop_map(|(k, c)| RemOp::Resolve(k, c)),
        2 => (0..KEYS, 1..3u64).prop_map(|(k, h)| RemOp::Snooze(k, h)),
        2 => (0..3u64).prop_map(RemOp::Advance),
        2 => Just(RemOp::List),
    ]
}

#[derive(Debug, Clone)]
enum Live {
    None,
    Open(ReminderId),
    /// Id, snoozed until, for how many hours.
    Snoozed(ReminderId, i64, u64),
}

const HOUR_MS: i64 = 3_600_000;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn reminders_match_the_model(ops in proptest::collection::vec(rem_op(), 1..30)) {
        reminders_model(&ReminderPlace::fs(), ops)?;
    }
}

proptest! {
    // Fewer cases on a server: each opens a fresh schema (a migration).
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn reminders_match_the_model_on_postgres(ops in proptest::collection::vec(rem_op(), 1..30)) {
        if let Some(place) = ReminderPlace::pg("reminders_match_the_model_on_postgres") {
            reminders_model(&place, ops)?;
        }
    }
}

/// The reminders' model. On a server the time is the server's clock,
/// which a test cannot move: the model's clock stays put there (no
/// `Advance`), so a snooze is never due, on both sides.
fn reminders_model(place: &ReminderPlace, ops: Vec<RemOp>) -> Result<(), TestCaseError> {
    {
        let (t, clock) = manual_no_sync();
        let r = place.open(&t.state);
        let mut live: Vec<Live> = vec![Live::None; KEYS];
        let mut rows = 0usize;
        let now = |c: &chipset_store::ManualClock| c.now().unix_ms();
        for op in ops {
            match op {
                RemOp::Open(k) => {
                    let got = r.open(&new_reminder("t", None, &key(k), "m")).unwrap();
                    match (live[k].clone(), got) {
                        (Live::None, Opened::New(x)) => {
                            rows += 1;
                            live[k] = Live::Open(x.id);
                        }
                        (Live::Open(id), Opened::Existing(x)) => prop_assert_eq!(id, x.id),
                        (Live::Snoozed(id, until, _), Opened::Snoozed(x))
                            if until > now(&clock) =>
                        {
                            prop_assert_eq!(id, x.id)
                        }
                        (Live::Snoozed(id, until, _), Opened::Existing(x))
                            if until <= now(&clock) =>
                        {
                            prop_assert_eq!(x.reopened_from(), Some(id.as_str()));
                            rows += 1;
                            live[k] = Live::Open(x.id);
                        }
                        (m, g) => prop_assert!(false, "model {:?} vs {:?}", m, g),
                    }
                }
                RemOp::Auto(k) => {
                    let key = key(k);
                    let got = r.auto_resolve(
                        key.kind(),
                        key.source_type(),
                        key.source_id(),
                        "prism_wrap",
                    );
                    if k == 3 {
                        let refused = matches!(got, Err(Error::NotAResolvingVerb { .. }));
                        prop_assert!(refused, "handoff has no resolving verb: {:?}", got);
                        continue;
                    }
                    let got = got.unwrap();
                    match live[k].clone() {
                        Live::None => prop_assert!(got.is_none()),
                        Live::Open(id) => prop_assert_eq!(got.unwrap().id, id),
                        Live::Snoozed(id, ..) => {
                            let g = got.unwrap();
                            prop_assert_eq!(g.reopened_from(), Some(id.as_str()));
                            rows += 1;
                        }
                    }
                    live[k] = Live::None;
                }
                RemOp::Resolve(k, _) | RemOp::Snooze(k, _) if matches!(live[k], Live::None) => {}
                RemOp::Resolve(k, completed) => {
                    let (Live::Open(id) | Live::Snoozed(id, ..)) = live[k].clone() else {
                        unreachable!()
                    };
                    let how = if completed {
                        ManualResolution::Completed
                    } else {
                        ManualResolution::Ignored
                    };
                    let got = r.resolve(&id, how, None).unwrap();
                    prop_assert_eq!(got.resolution, Some(Resolution::from(how)));
                    if matches!(live[k], Live::Snoozed(..)) {
                        prop_assert_eq!(got.reopened_from(), Some(id.as_str()));
                        rows += 1;
                    }
                    live[k] = Live::None;
                }
                // Snoozing again for as long, before it is due: a retry, nothing changes.
                RemOp::Snooze(k, hours) if matches!(&live[k], Live::Snoozed(_, until, h) if *h == hours && *until > now(&clock)) =>
                {
                    let Live::Snoozed(id, ..) = live[k].clone() else {
                        unreachable!()
                    };
                    let got = r
                        .snooze(&id, Duration::from_secs(hours * 3600), None)
                        .unwrap();
                    prop_assert_eq!(got.id, id);
                }
                RemOp::Snooze(k, hours) => {
                    let (Live::Open(id) | Live::Snoozed(id, ..)) = live[k].clone() else {
                        unreachable!()
                    };
                    let got = r
                        .snooze(&id, Duration::from_secs(hours * 3600), None)
                        .unwrap();
                    if matches!(live[k], Live::Snoozed(..)) {
                        prop_assert_eq!(got.reopened_from(), Some(id.as_str()));
                        rows += 1;
                    }
                    live[k] = Live::Snoozed(got.id, now(&clock) + hours as i64 * HOUR_MS, hours);
                }
                RemOp::Advance(_) if place.is_pg() => {}
                RemOp::Advance(hours) => clock.advance(Duration::from_secs(hours * 3600)),
                RemOp::List => {
                    let listing = r.list(&ReminderFilter::default()).unwrap();
                    prop_assert!(listing.corrupt.is_empty());
                    for (k, l) in live.iter_mut().enumerate() {
                        if let Live::Snoozed(id, until, _) = l.clone()
                            && until <= now(&clock)
                        {
                            let x = listing
                                .items
                                .iter()
                                .find(|x| x.source_id == key(k).source_id())
                                .unwrap();
                            prop_assert_eq!(x.reopened_from(), Some(id.as_str()));
                            rows += 1;
                            *l = Live::Open(x.id.clone());
                        }
                    }
                    let mut got: Vec<_> = listing.items.iter().map(|x| x.id.clone()).collect();
                    let mut want: Vec<_> = live
                        .iter()
                        .filter_map(|l| match l {
                            Live::Open(id) => Some(id.clone()),
                            _ => None,
                        })
                        .collect();
                    got.sort();
                    want.sort();
                    prop_assert_eq!(got, want);
                }
            }
        }
        // History retained: every row ever written is still there, once.
        let all = r
            .list(&ReminderFilter {
                history: true,
                ..ReminderFilter::default()
            })
            .unwrap();
        prop_assert_eq!(all.items.len(), rows);
        let open = all.items.iter().filter(|x| x.is_open()).count();
        prop_assert_eq!(
            open,
            live.iter().filter(|l| matches!(l, Live::Open(_))).count()
        );
    }
    Ok(())
}
