//! The async waits on a current-thread runtime: each is awaited while a
//! task on the same runtime signals another thread to publish. A wait that
//! blocked the runtime's one thread would keep that task from running, so
//! nothing would be published and the wait would time out.

#![cfg(feature = "tokio")]

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use chipset::Chipset;
use chipset::bus::NewEvent;
use chipset::r#loop::WorkKind;
use chipset::mail::NewMessage;
use chipset::store::AgentId;

/// Longer than any wake-up takes, shorter than the test harness's patience.
const LIMIT: Duration = Duration::from_secs(10);

fn agent(name: &str) -> AgentId {
    name.parse().unwrap()
}

fn current_thread() -> tokio::runtime::Runtime {
    // No timer driver on purpose: the async forms must not need one.
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

/// Returns a sender whose message makes another thread run `publish`.
fn publisher(
    publish: impl FnOnce() + Send + 'static,
) -> (mpsc::Sender<()>, thread::JoinHandle<()>) {
    let (go, rx) = mpsc::channel::<()>();
    let handle = thread::spawn(move || {
        if rx.recv_timeout(LIMIT).is_ok() {
            publish();
        }
    });
    (go, handle)
}

fn mail_for(door: &Chipset, to: &AgentId) {
    let draft = NewMessage::notify(
        agent("mayor"),
        to.clone(),
        "t1".parse().unwrap(),
        "heads-up",
        "b",
    );
    door.mail().send(&draft).unwrap();
}

#[test]
fn a_bus_event_from_another_thread_wakes_an_async_waiter() {
    let tmp = tempfile::tempdir().unwrap();
    let door = Chipset::open(tmp.path()).unwrap();
    let mayor = agent("mayor");
    let (go, handle) = publisher({
        let (door, mayor) = (door.clone(), mayor.clone());
        move || {
            let _ = door
                .bus()
                .publish(&mayor, &NewEvent::new("polecat-alpha", "done"))
                .unwrap();
        }
    });
    let events = current_thread().block_on(async {
        let mut waiter = door.bus().waiter_async(&mayor).await.unwrap();
        let wait = waiter.wait_async(LIMIT);
        let signal = async { go.send(()).unwrap() };
        let (wake, ()) = tokio::join!(wait, signal);
        wake.unwrap()
    });
    handle.join().unwrap();
    assert_eq!(events.len(), 1, "timed out: the wait blocked the runtime");
}

#[test]
fn an_attention_change_from_another_thread_ends_an_async_wait() {
    let tmp = tempfile::tempdir().unwrap();
    let door = Chipset::open(tmp.path()).unwrap();
    let alpha = agent("polecat-alpha");
    let (go, handle) = publisher({
        let (door, alpha) = (door.clone(), alpha.clone());
        move || mail_for(&door, &alpha)
    });
    let brief = current_thread().block_on(async {
        let wait = door.attention().wait_async(&alpha, LIMIT);
        let signal = async { go.send(()).unwrap() };
        let (brief, ()) = tokio::join!(wait, signal);
        brief.unwrap()
    });
    handle.join().unwrap();
    assert_eq!(
        brief.kinds(),
        vec![WorkKind::Mail],
        "an empty brief: the wait timed out"
    );
}

#[test]
fn a_subscription_starts_from_the_brief_now_and_streams_each_change() {
    let tmp = tempfile::tempdir().unwrap();
    let door = Chipset::open(tmp.path()).unwrap();
    let alpha = agent("polecat-alpha");
    let (go, handle) = publisher({
        let (door, alpha) = (door.clone(), alpha.clone());
        move || mail_for(&door, &alpha)
    });
    let (now, next) = current_thread().block_on(async {
        let (now, mut stream) = door.attention().subscribe(&alpha).await.unwrap();
        let signal = async { go.send(()).unwrap() };
        let (next, ()) = tokio::join!(stream.next(), signal);
        (now, next.expect("the stream goes on").unwrap())
    });
    handle.join().unwrap();
    assert!(now.is_empty(), "{now:?}");
    assert_eq!(next.kinds(), vec![WorkKind::Mail]);
}

#[test]
fn an_async_wait_returns_at_once_when_work_is_there_and_times_out_when_not() {
    let tmp = tempfile::tempdir().unwrap();
    let door = Chipset::open(tmp.path()).unwrap();
    let (alpha, beta) = (agent("polecat-alpha"), agent("polecat-beta"));
    mail_for(&door, &alpha);
    current_thread().block_on(async {
        let brief = door.attention().wait_async(&alpha, LIMIT).await.unwrap();
        assert_eq!(brief.kinds(), vec![WorkKind::Mail]);
        let idle = door
            .attention()
            .wait_async(&beta, Duration::from_millis(50))
            .await
            .unwrap();
        assert!(idle.is_empty(), "{idle:?}");
        let mut waiter = door.bus().waiter_async(&beta).await.unwrap();
        assert_eq!(
            waiter.wait_async(Duration::from_millis(50)).await.unwrap(),
            []
        );
    });
}

/// A channel's watch (here every hook's) awaited through
/// `backend::AsyncWait`: woken by an assignment another thread makes while
/// the runtime's one thread awaits it.
#[test]
fn a_hook_watch_awaited_wakes_for_an_assignment_from_another_thread() {
    use chipset::backend::{AsyncWait, Wake};
    let tmp = tempfile::tempdir().unwrap();
    let door = Chipset::open(tmp.path()).unwrap();
    door.hooks()
        .assign(&agent("w1"), "b-0".parse().unwrap(), "T", None)
        .unwrap();
    let (go, handle) = publisher({
        let door = door.clone();
        move || {
            door.hooks()
                .assign(&agent("w2"), "b-1".parse().unwrap(), "T", None)
                .unwrap();
        }
    });
    let watch = door.hooks().watch(Duration::from_secs(600)).unwrap();
    let mut wait = AsyncWait::new(watch).unwrap();
    let wake = current_thread().block_on(async {
        let idle = wait.wait(Duration::from_millis(50)).await.unwrap();
        assert_eq!(idle, Wake::TimedOut, "nothing changed yet");
        let woken = wait.wait(LIMIT);
        let signal = async { go.send(()).unwrap() };
        let (wake, ()) = tokio::join!(woken, signal);
        wake.unwrap()
    });
    handle.join().unwrap();
    assert_eq!(
        wake,
        Wake::Changed,
        "timed out: the wait blocked the runtime"
    );
}
