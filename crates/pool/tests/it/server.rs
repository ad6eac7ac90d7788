//! The pool on a server: on PostgreSQL only (`CHIPSET_TEST_PG`), a claim
//! cut at commit, items as rows, the server's clock and the doctor on a
//! server; on a directory answering as a server ([`AsServer`]), the tries
//! of a claim that another claimer overtakes, and a swap of a record that
//! fails.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chipset_backend::testing::{Intercept, Op, Proxy};
use chipset_backend::{Backend, Dir, PgBackend};
use chipset_hook::{BeadId, HookStatus, Hooks};
use chipset_pool::{Error, NewItem, Pool, ReadyFilter, WorkState};
use chipset_store::{Classify, DoctorMode};
use chipset_testkit::TempState;

use crate::place::{AsServer, Place};
use crate::{agent, id, item};

fn dir(text: &str) -> Dir {
    let mut segments = text.split('/');
    let mut d = Dir::new(segments.next().unwrap()).unwrap();
    for s in segments {
        d = d.join(s).unwrap();
    }
    d
}

/// A claim whose `COMMIT` is cut is an unknown outcome; it committed, and
/// the claimer's retry returns it (`existing`) and writes nothing.
#[test]
fn a_claim_cut_at_commit_is_unknown_and_the_retry_returns_it() {
    let Some(place) = Place::pg("a_claim_cut_at_commit_is_unknown_and_the_retry_returns_it") else {
        return;
    };
    let schema = place.schema().unwrap();
    let (proxy, via) = Proxy::for_url(schema.url());
    let t = TempState::new();
    let mut options = schema.options();
    options.max_idle = 1;
    let cut = Pool::with_backend(
        t.state.clone(),
        Arc::new(PgBackend::open_with(&via, options).unwrap()),
    );
    let (direct, hooks) = place.open(&t.state);
    let (lead, alice) = (agent("lead"), agent("alice"));
    direct
        .post_many(&lead, &[item("warm"), item("a"), item("b")])
        .unwrap();
    // Prepare every statement on the proxied connection first.
    let warm = cut.claim(&alice, &id("warm")).unwrap();
    cut.done(&alice, &warm.entry.id).unwrap();

    proxy.cut_at_request_with("COMMIT");
    let err = cut
        .claim_next(&alice, &ReadyFilter::new())
        .expect_err("the commit was cut");
    assert!(err.is_outcome_unknown(), "{err}");
    let held = hooks.current(&alice).unwrap().expect("the claim committed");
    assert_eq!(held.work.bead_id.as_str(), "a");
    let again = cut
        .claim_next(&alice, &ReadyFilter::new())
        .unwrap()
        .unwrap();
    assert!(again.existing);
    assert_eq!((again.entry.id, again.assignment), (id("a"), held));
    assert_eq!(direct.ready(&ReadyFilter::new()).unwrap().len(), 1);
}

/// On a server each item is two small rows: nothing grows with the pool
/// (a directory's table holds every item), and there is no log.
#[test]
fn items_are_rows_and_no_value_grows_with_the_pool() {
    let Some(place) = Place::pg("items_are_rows_and_no_value_grows_with_the_pool") else {
        return;
    };
    let t = TempState::new();
    let (pool, _) = place.open(&t.state);
    let backend = place.seam().unwrap();
    let lead = agent("lead");
    for batch in 0..4 {
        let items: Vec<NewItem> = (0..500)
            .map(|n| {
                item(&format!("i{batch}-{n:03}"))
                    .with_labels(["bulk"])
                    .with_priority(u8::try_from(n % 5).unwrap())
            })
            .collect();
        pool.post_many(&lead, &items).unwrap();
    }
    for folder in ["pool/items", "pool/entries"] {
        let rows = backend.read_all(&dir(folder)).unwrap();
        assert_eq!(rows.len(), 2000, "{folder}");
        let largest = rows.iter().map(|(_, v)| v.value.len()).max().unwrap();
        assert!(largest < 1024, "{folder}: a row of {largest} bytes");
    }
    assert!(
        backend.list(&dir("pool")).unwrap().is_empty(),
        "no table, no log"
    );
    let first = pool
        .claim_next(&agent("a"), &ReadyFilter::new())
        .unwrap()
        .unwrap();
    assert_eq!(first.entry.id, id("i0-000"), "most urgent, then oldest");
    assert_eq!(pool.counts().unwrap().ready, 1999);
}

/// Times are the server's: posts carry its clock, and a deferred item
/// becomes ready when the server's clock passes `not_before`, whatever
/// the client's (here a manual clock at T0, months behind) says.
#[test]
fn the_server_clock_judges_deferral_and_stamps_posts() {
    let Some(place) = Place::pg("the_server_clock_judges_deferral_and_stamps_posts") else {
        return;
    };
    let (t, _clock) = TempState::manual();
    let (pool, _) = place.open(&t.state);
    let server_now = place.seam().unwrap().now().unwrap();
    let later = server_now + Duration::from_millis(1500);
    let posted = pool
        .post(&agent("lead"), &item("a").with_not_before(later))
        .unwrap();
    assert!(posted.entry.posted_at >= server_now, "the server's clock");
    assert!(posted.entry.posted_at > t.state.now() + Duration::from_secs(86_400));
    assert_eq!(
        pool.get(&id("a")).unwrap().state,
        WorkState::Deferred { until: later }
    );
    std::thread::sleep(Duration::from_millis(1600));
    assert_eq!(pool.get(&id("a")).unwrap().state, WorkState::Ready);
}

/// The doctor on a server: a clean pool is clean; a hook still holding an
/// item recorded done (a `done` cut between its two steps) is reported,
/// and cleared with a fix.
#[test]
fn the_doctor_on_a_server_clears_a_done_item_from_its_hook() {
    let Some(place) = Place::pg("the_doctor_on_a_server_clears_a_done_item_from_its_hook") else {
        return;
    };
    let t = TempState::new();
    let (pool, hooks) = place.open(&t.state);
    let backend = place.seam().unwrap();
    let alice = agent("alice");
    pool.post_many(&agent("lead"), &[item("a"), item("b")])
        .unwrap();
    let _ = pool.claim(&alice, &id("a")).unwrap();
    assert!(pool.doctor(DoctorMode::Check).unwrap().findings.is_empty());
    // The first step of a `done`: the entry's row records it done.
    let key = dir("pool/entries").key("a.json").unwrap();
    let row = backend.read(&key).unwrap().unwrap();
    let text = String::from_utf8(row.value).unwrap();
    let done = text.replacen(
        "\"depends_on\"",
        "\"done\": {\"at\": \"2026-03-05T10:35:00.123Z\", \"by\": \"alice\"}, \"depends_on\"",
        1,
    );
    backend.replace(&key, row.version, done.as_bytes()).unwrap();
    let report = pool.doctor(DoctorMode::Check).unwrap();
    let codes: Vec<&str> = report.findings.iter().map(|f| f.code).collect();
    assert_eq!(codes, ["pool-done-on-hook"]);
    pool.doctor(DoctorMode::Fix).unwrap();
    assert_eq!(hooks.current(&alice).unwrap(), None);
    assert!(pool.doctor(DoctorMode::Check).unwrap().findings.is_empty());
    let next = pool
        .claim_next(&alice, &ReadyFilter::new())
        .unwrap()
        .unwrap();
    assert_eq!(next.entry.id, id("b"));
}

/// What a test stages on an [`AsServer`] pool: a step run before its next
/// claim (another claimer committing between a claim's snapshot and its
/// row lock), and a failure of the n-th swap of an entry row from now.
#[derive(Default)]
struct Stage {
    before_claim: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    fail_swap: AtomicUsize,
}

impl fmt::Debug for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Stage")
    }
}

#[derive(Debug)]
struct Staged(Arc<Stage>);

impl Intercept for Staged {
    fn before(&self, _inner: &dyn Backend, op: Op<'_>) -> chipset_backend::Result<()> {
        match op {
            Op::Claim => {
                let step = self.0.before_claim.lock().unwrap().take();
                if let Some(step) = step {
                    step();
                }
            }
            Op::Replace(key) if key.to_string().starts_with("pool/entries/") => {
                let n = self.0.fail_swap.load(Ordering::SeqCst);
                if n > 0 {
                    self.0.fail_swap.store(n - 1, Ordering::SeqCst);
                }
                if n == 1 {
                    return Err(chipset_backend::Error::Server {
                        op: "replace",
                        key: key.to_string(),
                        source: "the staged failure".into(),
                    });
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// A pool on a directory answering as a server, where `alice` completed
/// `x` on her hook and `y` is ready.
fn alice_finished_x_and_y_is_ready() -> (TempState, Arc<Stage>, Pool, Hooks) {
    let t = TempState::new();
    let stage = Arc::new(Stage::default());
    let (pool, hooks) = AsServer::open(&t.state, Staged(Arc::clone(&stage)));
    pool.post_many(&agent("lead"), &[item("x"), item("y")])
        .unwrap();
    let x = pool.claim(&agent("alice"), &id("x")).unwrap().assignment;
    hooks.activate(&x).unwrap();
    hooks.complete(&x).unwrap();
    (t, stage, pool, hooks)
}

/// Bob's claim of `y` commits after the next claim's snapshot, before it
/// takes `y`'s row: that claim's first try finds `y` taken.
fn bob_takes_y_first(t: &TempState, stage: &Stage) {
    let hooks = Hooks::new(t.state.clone());
    *stage.before_claim.lock().unwrap() = Some(Box::new(move || {
        let bob = agent("bob");
        hooks
            .assign(&bob, BeadId::new("y").unwrap(), "do y", Some(&bob))
            .unwrap();
    }));
}

/// `x` is recorded done, and still on alice's completed hook.
fn x_done_on_the_hook(pool: &Pool, hooks: &Hooks) -> bool {
    let hook = hooks.read(&agent("alice")).unwrap().value().unwrap();
    pool.get(&id("x")).unwrap().entry.done.is_some()
        && hook.state.status() == HookStatus::Completed
        && hook.state.work().is_some_and(|w| w.bead_id.as_str() == "x")
}

/// Then alice claims `z`: the claim that takes work is the one that takes
/// `x` off her hook, in the same swap, and says so.
fn the_next_claim_takes_x_off(pool: &Pool, hooks: &Hooks) {
    pool.post_many(&agent("lead"), &[item("z")]).unwrap();
    let claimed = pool
        .claim_next(&agent("alice"), &ReadyFilter::new())
        .unwrap()
        .unwrap();
    assert_eq!(
        (claimed.entry.id, claimed.finished),
        (id("z"), Some(id("x")))
    );
    let held = hooks.current(&agent("alice")).unwrap().unwrap();
    assert_eq!(held.work.bead_id.as_str(), "z");
}

/// Regression: a claim's first try on a server cleared the claimer's
/// finished item off its hook, then found its candidate taken; the second
/// try's refusal said nothing changed. The finished item now leaves the
/// hook only in the swap that assigns the next work: the refusal is true,
/// and nothing but `x`'s done record (which its completed hook implied)
/// was written.
#[test]
fn a_claim_refused_after_its_item_was_taken_leaves_the_hook_as_it_was() {
    let (t, stage, pool, hooks) = alice_finished_x_and_y_is_ready();
    bob_takes_y_first(&t, &stage);
    let e = pool.claim(&agent("alice"), &id("y")).unwrap_err();
    assert!(matches!(e, Error::NotReady { .. }), "{e:?}");
    assert!(!e.is_outcome_unknown(), "{e}");
    assert!(x_done_on_the_hook(&pool, &hooks));
    the_next_claim_takes_x_off(&pool, &hooks);
}

/// Regression: the same race for `claim_next`, its later try finding
/// nothing ready, answered "nothing ready" after clearing alice's hook,
/// and dropped `finished`. Nothing ready now changes nothing.
#[test]
fn a_claim_next_that_finds_every_item_taken_leaves_the_hook_as_it_was() {
    let (t, stage, pool, hooks) = alice_finished_x_and_y_is_ready();
    bob_takes_y_first(&t, &stage);
    let none = pool.claim_next(&agent("alice"), &ReadyFilter::new());
    assert!(matches!(none, Ok(None)), "{none:?}");
    assert!(x_done_on_the_hook(&pool, &hooks));
    the_next_claim_takes_x_off(&pool, &hooks);
}

/// With nothing ready from the start, a claim on a server decides so
/// before it clears the claimer's finished item (as on a directory).
#[test]
fn a_claim_next_with_nothing_ready_leaves_the_hook_on_a_server() {
    let t = TempState::new();
    let (pool, hooks) = AsServer::open(&t.state, Staged(Arc::default()));
    crate::lifecycle::nothing_ready_keeps_the_finished_item(&pool, &hooks);
}

/// Regression: a claim records each completed hook's item done with a
/// swap of its entry row; a failure after the first swap committed was
/// a plain error. It is an unknown outcome naming what was recorded,
/// and the retry records the rest.
#[test]
fn a_claim_whose_records_fail_after_the_first_swap_is_unknown() {
    let t = TempState::new();
    let stage = Arc::new(Stage::default());
    let (pool, hooks) = AsServer::open(&t.state, Staged(Arc::clone(&stage)));
    pool.post_many(&agent("lead"), &[item("a"), item("b"), item("c")])
        .unwrap();
    let a = pool.claim(&agent("alice"), &id("a")).unwrap().assignment;
    let b = pool.claim(&agent("bob"), &id("b")).unwrap().assignment;
    for held in [a, b] {
        hooks.activate(&held).unwrap();
        hooks.complete(&held).unwrap();
    }
    stage.fail_swap.store(2, Ordering::SeqCst);
    let carol = agent("carol");
    let e = pool.claim_next(&carol, &ReadyFilter::new()).unwrap_err();
    assert!(e.is_outcome_unknown(), "{e}");
    assert!(
        matches!(&e, Error::OutcomeUnknown { ids, .. } if *ids == [id("a")]),
        "{e:?}"
    );
    assert!(pool.get(&id("a")).unwrap().entry.done.is_some());
    assert!(pool.get(&id("b")).unwrap().entry.done.is_none());
    let c = pool
        .claim_next(&carol, &ReadyFilter::new())
        .unwrap()
        .unwrap();
    assert_eq!(c.entry.id, id("c"));
    assert!(pool.get(&id("b")).unwrap().entry.done.is_some());
    let held = hooks.current(&carol).unwrap().unwrap();
    assert_eq!(held.work.bead_id.as_str(), "c");
}
