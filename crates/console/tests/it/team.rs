//! A small team on a manual clock: every view has rows, one agent stalls,
//! the pool holds an item in each state.

use std::sync::Arc;
use std::time::Duration;

use chipset::Chipset;
use chipset::bus::{NewEvent, Priority};
use chipset::directory::{Registration, Role};
use chipset::lease::{LeaseMode, LeaseRequest};
use chipset::mail::{MessageId, NewMessage};
use chipset::nudge::{NewNudge, NewReminder, NudgeType};
use chipset::pool::{ItemId, NewItem};
use chipset::store::{AgentId, ManualClock, StateDir, StateOptions, TaskId, Timestamp};

pub(crate) fn id(name: &str) -> AgentId {
    AgentId::new(name).unwrap()
}

/// The team's handle, its clock and its folder.
pub(crate) struct Team {
    pub(crate) chipset: Chipset,
    pub(crate) _tmp: tempfile::TempDir,
}

/// 2026-03-05T10:00:00Z.
pub(crate) const START: i64 = 1_772_704_800_000;

pub(crate) fn team() -> Team {
    let clock = ManualClock::new(Timestamp::from_unix_ms(START));
    let tmp = tempfile::tempdir().unwrap();
    let state = StateDir::open_with(
        tmp.path().join("state"),
        StateOptions {
            clock: Arc::new(clock.clone()),
            ..StateOptions::default()
        },
    )
    .unwrap();
    let c = Chipset::from_state(state);
    let (alpha, beta, critic) = (id("polecat-alpha"), id("polecat-beta"), id("critic"));
    let mut reg = Registration::new();
    reg.roles = Some(vec![Role::new("worker").unwrap()]);
    c.directory().register(&alpha, &reg).unwrap();
    c.directory().register(&beta, &reg).unwrap();
    let held = c
        .hooks()
        .assign(
            &alpha,
            "bd-101".parse().unwrap(),
            "Fix the parser",
            Some(&id("mayor")),
        )
        .unwrap();
    c.hooks().activate(&held).unwrap();
    let lead = id("lead");
    let item = |id: &str, title: &str| NewItem::new(title).with_id(ItemId::new(id).unwrap());
    let pool = c.pool();
    pool.post(&lead, &item("bd-099", "Pin the toolchain").with_priority(1))
        .unwrap();
    pool.post(
        &lead,
        &item("bd-102", "Bump dependencies")
            .with_body("Cargo update, then the lock file.\nKeep MSRV.")
            .with_labels(["deps"]),
    )
    .unwrap();
    pool.post(
        &lead,
        &item("bd-103", "Write the changelog").with_priority(3),
    )
    .unwrap();
    pool.post(
        &lead,
        &item("bd-104", "Release 0.2").with_depends_on([
            ItemId::new("bd-102").unwrap(),
            ItemId::new("bd-103").unwrap(),
        ]),
    )
    .unwrap();
    pool.post(
        &lead,
        &item("bd-105", "Rotate the keys")
            .with_not_before(Timestamp::from_unix_ms(START + 2 * 86_400_000)),
    )
    .unwrap();
    clock.advance(Duration::from_secs(60));
    // Beta works the most urgent item through its hook.
    let pinned = pool.claim(&beta, &ItemId::new("bd-099").unwrap()).unwrap();
    c.hooks().activate(&pinned.assignment).unwrap();
    c.hooks().complete(&pinned.assignment).unwrap();
    let task = TaskId::new("T-7").unwrap();
    let request = NewMessage::request(
        critic.clone(),
        alpha.clone(),
        task.clone(),
        "review-parser",
        "The error path drops the span.\nPlease keep it.",
    )
    .with_id(MessageId::new("1772704860000-0b6c0e3a-8d1e-4c7e-9b51-2f0b8e7d1a01").unwrap());
    c.mail().send(&request).unwrap();
    let note = NewMessage::notify(critic.clone(), beta.clone(), task, "fyi-ci", "CI is green")
        .with_id(MessageId::new("1772704860001-0b6c0e3a-8d1e-4c7e-9b51-2f0b8e7d1a02").unwrap());
    c.mail().send(&note).unwrap();
    let _ = c
        .bus()
        .publish(
            &alpha,
            &NewEvent::new("witness", "health-check")
                .with_priority(Priority::Critical)
                .with_payload(serde_json::json!({"why": "quiet"})),
        )
        .unwrap();
    let _ = c
        .bus()
        .publish(&beta, &NewEvent::new("mayor", "work-assigned"))
        .unwrap();
    let _ = c
        .nudges()
        .send(
            &alpha,
            &NewNudge::new(
                id("witness"),
                NudgeType::from("stall_warning"),
                "are you there?",
            ),
        )
        .unwrap();
    c.reminders()
        .open(&NewReminder {
            tenant_id: "team".into(),
            kind: "wip_unsealed".into(),
            source_type: "wip_state".into(),
            source_id: "wip-7".into(),
            message: "Seal the parser WIP".into(),
            ..NewReminder::default()
        })
        .unwrap();
    let _ = c
        .leases()
        .acquire(
            &LeaseRequest::new(alpha.clone(), LeaseMode::Exclusive, ["src/parser/**"])
                .with_ttl(Duration::from_secs(3600))
                .with_reason("rewrite the parser"),
        )
        .unwrap();
    clock.advance(Duration::from_secs(9 * 60));
    // Its next claim records the first done and takes the next item.
    let _ = pool.claim(&beta, &ItemId::new("bd-102").unwrap()).unwrap();
    Team {
        chipset: c,
        _tmp: tmp,
    }
}
