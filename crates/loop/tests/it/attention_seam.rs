//! Attention on its place (issue 30): the brief reads each channel and a
//! wait is woken by another client's write, on a directory and on a
//! server from the same bodies. On a server the wake-up is the server's
//! `LISTEN/NOTIFY`, so it comes long before the rescan.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use chipset_bus::{Bus, BusConfig, NewEvent};
use chipset_lease::{LeaseMode, LeaseRequest, Leases};
use chipset_loop::{AttentionConfig, WorkKind};
use chipset_mail::{Mail, MailConfig, NewMessage};
use chipset_nudge::{NewNudge, NewReminder, NudgeType};
use chipset_pool::{NewItem, Pool};
use chipset_store::{TaskId, WatchConfig};
use serde_json::json;

use crate::{Setup, agent, bead};

/// The safety net's period in these tests: a wake-up must come well
/// before it.
const RESCAN: Duration = Duration::from_secs(8);

fn watched() -> AttentionConfig {
    AttentionConfig {
        watch: WatchConfig {
            notify: true,
            rescan_interval: RESCAN,
        },
    }
}

/// Mail and the bus of another client on the setup's place.
fn other(s: &Setup) -> (Mail, Bus) {
    let state = s.state();
    match s.other_client() {
        None => (Mail::new(state.clone()), Bus::new(state)),
        Some(b) => (
            Mail::with_backend(state.clone(), MailConfig::default(), Arc::clone(&b)),
            Bus::with_backend(state, BusConfig::default(), b),
        ),
    }
}

/// Waits for `who`'s brief on a thread, runs `write` once the wait is
/// under way, and returns the brief's kinds and how long after the write
/// it came.
fn woken_by(s: &Setup, who: &str, write: impl FnOnce()) -> (Vec<WorkKind>, Duration) {
    let attention = s.attention().with_config(watched());
    let who = agent(who);
    let waiter = thread::spawn(move || {
        let brief = attention.wait(&who, Duration::from_secs(60)).unwrap();
        (brief.kinds(), Instant::now())
    });
    // Not needed for correctness (work made earlier is found at once):
    // let the wait be under way, so the wake-up is what is measured.
    thread::sleep(Duration::from_millis(300));
    let sent = Instant::now();
    write();
    let (kinds, woke) = waiter.join().unwrap();
    (kinds, woke.saturating_duration_since(sent))
}

both!(
    a_wait_wakes_on_a_send_from_another_client,
    a_wait_wakes_on_a_publish_from_another_client,
    a_brief_reads_every_channel_on_its_place,
    a_post_to_the_pool_wakes_a_wait_and_shows_as_ready_work,
);

/// A message sent by another client wakes a waiting agent within a
/// quarter of the rescan (in practice milliseconds).
fn a_wait_wakes_on_a_send_from_another_client(s: Setup) {
    let (mail, _) = other(&s);
    let (kinds, took) = woken_by(&s, "alpha", || {
        mail.send(&NewMessage::notify(
            agent("mayor"),
            agent("alpha"),
            TaskId::new("t1").unwrap(),
            "status-update",
            "hello",
        ))
        .unwrap();
    });
    assert_eq!(kinds, vec![WorkKind::Mail]);
    assert!(took < RESCAN / 4, "woke {took:?} after the send");
}

/// The same for an event another client publishes.
fn a_wait_wakes_on_a_publish_from_another_client(s: Setup) {
    let (_, bus) = other(&s);
    let (kinds, took) = woken_by(&s, "beta", || {
        let published = bus
            .publish(&agent("beta"), &NewEvent::new("mayor", "work-assigned"))
            .unwrap();
        assert!(published.delivered().is_some());
    });
    assert_eq!(kinds, vec![WorkKind::Bus]);
    assert!(took < RESCAN / 4, "woke {took:?} after the publish");
}

/// Work on every channel of the place shows in the brief: the hook, a
/// nudge, mail, an event, a reminder for the agent and its lease about to
/// expire (the leases are the place's, not a local folder's).
fn a_brief_reads_every_channel_on_its_place(s: Setup) {
    let alpha = agent("alpha");
    let attention = s.attention();
    assert!(attention.brief(&alpha).unwrap().is_empty());
    s.hooks
        .assign(&alpha, bead("gt-1"), "Add README section", None)
        .unwrap();
    let _ = s
        .nudges
        .send(
            &alpha,
            &NewNudge::new(agent("witness"), NudgeType::HealthCheck, "alive?"),
        )
        .unwrap();
    s.mail
        .send(&NewMessage::notify(
            agent("mayor"),
            alpha.clone(),
            TaskId::new("t1").unwrap(),
            "status-update",
            "hello",
        ))
        .unwrap();
    let published = s
        .bus()
        .publish(&alpha, &NewEvent::new("mayor", "work-assigned"))
        .unwrap();
    assert!(published.delivered().is_some());
    let mut reminder = NewReminder {
        tenant_id: "default".into(),
        kind: "wrap_session".into(),
        source_type: "session".into(),
        source_id: "s1".into(),
        message: "Wrap this session".into(),
        ..NewReminder::default()
    };
    reminder.metadata.insert(
        chipset_loop::Attention::REMINDER_AGENT_FIELD.to_owned(),
        json!("alpha"),
    );
    s.reminders().open(&reminder).unwrap();
    let leases = match &s.pg {
        None => Leases::new(s.state()),
        Some(pg) => Leases::with_backend(s.state(), Arc::clone(&pg.backend)),
    };
    let req = LeaseRequest::new(alpha.clone(), LeaseMode::Exclusive, ["src/**"])
        .with_ttl(Duration::from_secs(60));
    let _ = leases.acquire(&req).unwrap();
    // Into the lease's warning window: the last fifth of its minute.
    s.advance(50);
    let kinds = attention.brief(&alpha).unwrap().kinds();
    for kind in [
        WorkKind::Hook,
        WorkKind::Nudge,
        WorkKind::Mail,
        WorkKind::Bus,
        WorkKind::Reminder,
        WorkKind::Lease,
    ] {
        assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}");
    }
}

/// Work posted to the place's pool (by another client on a server) wakes
/// an idle agent's wait and shows as ready work in its brief: the pool is
/// the place's, never a local folder's.
fn a_post_to_the_pool_wakes_a_wait_and_shows_as_ready_work(s: Setup) {
    let pool = match s.other_client() {
        None => Pool::new(s.state()),
        Some(b) => Pool::with_backend(s.state(), b),
    };
    // The pool is in use before the wait starts.
    pool.post(&agent("lead"), &NewItem::new("first")).unwrap();
    let kinds = s.attention().brief(&agent("beta")).unwrap().kinds();
    assert!(kinds.contains(&WorkKind::Pool), "{kinds:?}");
    // Beta takes it, so gamma's brief is empty until the next post.
    let claimed = pool
        .claim_next(&agent("beta"), &chipset_pool::ReadyFilter::new())
        .unwrap();
    assert!(claimed.is_some());
    assert!(s.attention().brief(&agent("gamma")).unwrap().is_empty());
    let (kinds, took) = woken_by(&s, "gamma", || {
        pool.post(&agent("lead"), &NewItem::new("second")).unwrap();
    });
    assert!(kinds.contains(&WorkKind::Pool), "{kinds:?}");
    assert!(took < RESCAN / 4, "woke after {took:?}");
}
