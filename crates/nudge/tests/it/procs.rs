//! Many processes at once: senders, responders, reminder openers. The
//! signals' races run on a directory and, when `CHIPSET_TEST_PG` names a
//! server, on PostgreSQL (issue 30) from the same bodies.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use chipset_backend::testing;
use chipset_nudge::{Delivery, NewNudge, NudgeType, Opened, Received, ReminderFilter};
use chipset_store::{AgentId, ReadOutcome, Timestamp};
use chipset_testkit::{self as kit, TempState};
use serde_json::{Value, json};

use crate::place::{Place, ReminderPlace};
use crate::support::{ReminderKey, new_reminder};
use crate::support::{agent, temps_under};
use crate::support::{preset, responders};

const ENTRY: &str = "procs::child_entry";
const PROCS: usize = 8;

/// Runs one role on the place `spec` names ([`testing::Place::spec`]) and returns
/// the line it reports.
fn run_role(name: &str, spec: &str, i: usize, extra: &str) -> Value {
    let (nudges, state) = Place::open_spec(spec);
    match name {
        // Send to `target`: a health check, or an abort when `extra` names this sender.
        "send" => {
            let kind = if extra == i.to_string() {
                NudgeType::Abort
            } else {
                NudgeType::HealthCheck
            };
            let d = nudges
                .send(
                    &agent("target"),
                    &NewNudge::new(agent(&format!("sender-{i}")), kind, format!("m-{i}")),
                )
                .unwrap();
            let id = |n: &chipset_nudge::Nudge| json!(n.id.as_ref().unwrap().as_str());
            match d {
                Delivery::Delivered { sent } => json!({"sent": id(&sent), "previous": null}),
                Delivery::Replaced { sent, previous } => {
                    json!({"sent": id(&sent), "previous": id(&previous)})
                }
                Delivery::Held { pending, unsent } => {
                    json!({"held": id(&unsent), "pending": id(&pending)})
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        // Answer the witness's nudge in this agent's latest.json.
        "respond" => {
            let me = agent(&format!("agent-{i}"));
            let ReadOutcome::Value(Received::New(incoming)) = nudges.receive(&me).unwrap() else {
                panic!("no nudge")
            };
            let r = nudges.respond(&me, &incoming, "working").unwrap();
            nudges.mark_processed(&me, &incoming).unwrap();
            json!({"responded": r.nudge().id.clone().unwrap().as_str()})
        }
        // Open the same reminder key.
        "open" => {
            drop(state);
            let (reminders, _) = ReminderPlace::open_spec(spec);
            let key = ReminderKey::new(preset::WRAP_SESSION, "session", "sess-shared").unwrap();
            let o = reminders
                .open(&new_reminder("tenant", None, &key, format!("from {i}")))
                .unwrap();
            json!({"new": matches!(o, Opened::New(_)), "id": o.reminder().id.as_str()})
        }
        other => panic!("unknown role {other}"),
    }
}

#[test]
#[allow(clippy::print_stdout)] // reason: a child reports to its parent over stdout
fn child_entry() {
    if let Some(role) = kit::child_role() {
        kit::wait_for_file(Path::new(role.arg(1)));
        let out = run_role(&role.name, role.arg(0), role.parse(2), role.arg(3));
        println!("{out}");
        return;
    }
    // Not a child: run each role in-process once and check the result.
    let t = TempState::new();
    let root = t.state.root().to_str().unwrap();
    assert_eq!(run_role("send", root, 0, "-")["previous"], Value::Null);
    let second = run_role("send", root, 1, "-");
    assert!(second["previous"].is_string());
    let o = run_role("open", root, 0, "");
    assert_eq!(o["new"], true);
    assert_eq!(run_role("open", root, 1, "")["id"], o["id"]);
}

/// Starts `PROCS` children in `role` on `place`, releases them at once,
/// returns their lines.
fn race(t: &TempState, place: &testing::Place, role: &str, extra: &str) -> Vec<Value> {
    let start = t.scratch(&format!("start-{role}"));
    let root = place.spec(t.state.root());
    let mut children: Vec<_> = (0..PROCS)
        .map(|i| {
            let args = [
                root.clone(),
                start.to_string_lossy().into_owned(),
                i.to_string(),
                extra.to_owned(),
            ];
            kit::spawn(ENTRY, role, &args)
        })
        .collect();
    std::fs::write(&start, b"go").unwrap();
    let mut out = Vec::new();
    for child in &mut children {
        // Read to the end, so the child never writes into a closed pipe.
        let lines: Vec<String> = kit::lines(child).map(Result::unwrap).collect();
        let line = lines
            .iter()
            .find(|l| l.starts_with('{'))
            .expect("child reported");
        out.push(serde_json::from_str(line).unwrap());
        kit::wait_ok(child, Duration::from_secs(60));
    }
    out
}

#[test]
fn eight_senders_leave_one_whole_nudge_and_a_clean_chain() {
    senders_race(&Place::fs());
}

#[test]
fn eight_senders_on_postgres_leave_one_whole_nudge_and_a_clean_chain() {
    if let Some(place) = Place::pg("eight_senders_on_postgres") {
        senders_race(&place);
    }
}

/// Eight senders at once: one whole nudge, and the replacements one chain.
fn senders_race(place: &Place) {
    let t = TempState::new();
    let out = race(&t, place, "send", "none");
    let sent: BTreeSet<String> = out
        .iter()
        .map(|v| v["sent"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(sent.len(), PROCS);
    // Serialized by the swap: exactly one saw nothing, and every other saw a
    // distinct earlier one, so the replacements form one chain.
    let previous: Vec<_> = out.iter().filter_map(|v| v["previous"].as_str()).collect();
    assert_eq!(previous.len(), PROCS - 1);
    assert_eq!(previous.iter().collect::<BTreeSet<_>>().len(), PROCS - 1);
    let nudges = place.open(&t.state);
    let ReadOutcome::Value(latest) = nudges.read_latest(&agent("target")).unwrap() else {
        panic!("latest.json is not one whole nudge")
    };
    let last = latest.id.unwrap().to_string();
    assert!(sent.contains(&last));
    assert!(
        !previous.contains(&last.as_str()),
        "the survivor was replaced by no one"
    );
    assert!(temps_under(t.state.root()).is_empty());
    if place.is_pg() {
        // Nothing went through the local root.
        assert!(t.state.list_dirs(&t.state.root_path()).unwrap().is_empty());
    }
}

#[test]
fn abort_survives_seven_concurrent_health_checks() {
    abort_race(&Place::fs());
}

#[test]
fn abort_survives_seven_concurrent_health_checks_on_postgres() {
    if let Some(place) = Place::pg("abort_survives_seven_on_postgres") {
        abort_race(&place);
    }
}

/// An abort among seven health checks, all at once: the abort stays.
fn abort_race(place: &Place) {
    let t = TempState::new();
    let out = race(&t, place, "send", "3");
    let nudges = place.open(&t.state);
    let latest = nudges
        .read_latest(&agent("target"))
        .unwrap()
        .value()
        .unwrap();
    assert_eq!(
        latest.kind,
        NudgeType::Abort,
        "whatever the order, the abort stays"
    );
    let abort_id = latest.id.unwrap().to_string();
    for v in &out {
        if let Some(p) = v["pending"].as_str() {
            assert_eq!(p, abort_id, "only the abort holds");
        }
    }
}

#[test]
fn eight_responders_are_all_visible_to_the_witness() {
    responders_race(&Place::fs());
}

#[test]
fn eight_responders_on_postgres_are_all_visible_to_the_witness() {
    if let Some(place) = Place::pg("eight_responders_on_postgres") {
        responders_race(&place);
    }
}

/// Eight agents answer one witness at once: every answer is visible.
fn responders_race(place: &Place) {
    let t = TempState::new();
    let nudges = place.open(&t.state);
    let witness = agent("witness");
    // The backend's clock (the server's on PostgreSQL) stamps the sends.
    let mut t0: Option<Timestamp> = None;
    for i in 0..PROCS {
        let d =
            NewNudge::new(witness.clone(), NudgeType::HealthCheck, "working?").requiring_response();
        let sent = nudges.send(&agent(&format!("agent-{i}")), &d).unwrap();
        t0.get_or_insert(sent.nudge().timestamp);
    }
    let t0 = t0.unwrap();
    let out = race(&t, place, "respond", "");
    assert_eq!(out.len(), PROCS);
    let responses = nudges.responses_since(&witness, t0).unwrap();
    assert!(responses.corrupt.is_empty());
    let who = responders(&responses);
    let expected: Vec<_> = (0..PROCS).map(|i| format!("agent-{i}")).collect();
    assert_eq!(who, expected);
    for i in 0..PROCS {
        let a: AgentId = agent(&format!("agent-{i}"));
        assert!(nudges.response_from(&witness, &a, t0).unwrap().is_some());
    }
    // The seed copy in latest.json is one whole response.
    let latest = nudges.read_latest(&witness).unwrap().value().unwrap();
    assert_eq!(latest.kind, NudgeType::NudgeResponse);
}

#[test]
fn eight_openers_leave_exactly_one_open_reminder() {
    openers_race(&ReminderPlace::fs());
}

#[test]
fn eight_openers_on_postgres_leave_exactly_one_open_reminder() {
    if let Some(place) =
        ReminderPlace::pg("eight_openers_on_postgres_leave_exactly_one_open_reminder")
    {
        openers_race(&place);
    }
}

/// On PostgreSQL the key's stripe lock is the server's: eight clients.
fn openers_race(place: &ReminderPlace) {
    let t = TempState::new();
    let out = race(&t, place, "open", "");
    let new = out.iter().filter(|v| v["new"] == true).count();
    assert_eq!(new, 1, "{out:?}");
    let ids: BTreeSet<_> = out
        .iter()
        .map(|v| v["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 1, "every opener got the same reminder");
    let reminders = place.open(&t.state);
    let listing = reminders.list(&ReminderFilter::default()).unwrap();
    assert_eq!(listing.items.len(), 1);
    assert_eq!(crate::reminders::every_reminder(&reminders).len(), 1);
    assert!(temps_under(t.state.root()).is_empty());
}
