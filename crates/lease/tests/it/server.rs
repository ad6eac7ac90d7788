//! Leases on PostgreSQL only (issue 30): expiry judged on the server's
//! clock, and an acquire whose connection is cut at commit. Each runs when
//! `CHIPSET_TEST_PG` names a server and says it was skipped otherwise.

use std::sync::Arc;
use std::time::Duration;

use chipset_backend::{PgBackend, PgOptions};
use chipset_lease::{Error, Leases};
use chipset_store::Classify;
use chipset_testkit::TempState;

use crate::place::Place;
use crate::{agent, exclusive};
use chipset_backend::testing::Proxy;

/// Expiry is the server's judgement: a client whose own clock is stuck
/// years in the past still sees a lease expire, and the lease's times are
/// the server's.
#[test]
fn the_server_clock_judges_expiry() {
    let Some(place) = Place::pg("the_server_clock_judges_expiry") else {
        return;
    };
    // The local clock stands still at the test kit's start time.
    let (t, _clock) = TempState::manual();
    let leases = place.open(&t.state);
    let (a, b) = (agent("alice"), agent("bob"));
    let wall = || {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        i64::try_from(d.as_millis()).unwrap()
    };
    let held = leases
        .acquire(&exclusive(&a, &["src"]).with_ttl(Duration::from_secs(1)))
        .unwrap()
        .lease;
    assert_ne!(held.acquired_at, t.state.now(), "the local clock was used");
    // The server runs on this machine: its clock is the wall clock.
    assert!(
        (held.acquired_at.unix_ms() - wall()).abs() < 60_000,
        "{} is not the server's now",
        held.acquired_at
    );
    assert!(matches!(
        leases.acquire(&exclusive(&b, &["src/a.rs"])),
        Err(Error::Conflict { .. })
    ));
    std::thread::sleep(Duration::from_millis(1_300));
    // Expired on the server's clock: it no longer blocks, and once another
    // grant pruned it, its holder is fenced.
    assert!(leases.live().unwrap().is_empty());
    let taken = leases.acquire(&exclusive(&b, &["src/a.rs"])).unwrap().lease;
    assert!(taken.token > held.token);
    assert!(matches!(
        leases.renew(&a, held.token, Duration::from_secs(60)),
        Err(Error::Fenced { .. })
    ));
}

/// An acquire whose connection is cut after the server committed it: the
/// outcome is unknown, the lease is granted, and the retry with the same
/// request returns that lease.
#[test]
fn an_acquire_cut_at_commit_is_unknown_and_the_retry_returns_the_lease() {
    let Some(place) = Place::pg("an_acquire_cut_at_commit") else {
        return;
    };
    let url = std::env::var("CHIPSET_TEST_PG").unwrap();
    let (proxy, via) = Proxy::for_url(&url);
    let t = TempState::new();
    let schema = place
        .spec(t.state.root())
        .split('\t')
        .nth(2)
        .unwrap()
        .to_owned();
    let mut options = PgOptions::with_schema(&schema);
    options.max_idle = 1;
    let cut = Leases::with_backend(
        t.state.clone(),
        Arc::new(PgBackend::open_with(&via, options).unwrap()),
    );
    let direct = place.open(&t.state);
    let a = agent("alice");
    // Prepare every statement on the proxied connection first, so the cut
    // falls on the write's execution (and its commit).
    let warm = cut.acquire(&exclusive(&a, &["warm"])).unwrap().lease;
    let _ = cut.release(&a, warm.token).unwrap();

    let req = exclusive(&a, &["src/auth/**"]).with_reason("cut-at-commit");
    proxy.cut_at_request_with("cut-at-commit");
    let err = cut.acquire(&req).unwrap_err();
    assert!(err.is_outcome_unknown(), "{err}");
    let granted = direct.live().unwrap();
    assert_eq!(granted.len(), 1, "the grant committed: {granted:?}");
    let again = cut.acquire(&req).unwrap();
    assert!(again.existing);
    assert_eq!(again.lease, granted[0]);
}

/// A forced release on a server mails the holder on the server: a holder
/// on another host (another local root) finds the notice in its inbox.
#[test]
fn a_forced_release_mails_the_holder_on_the_server() {
    let Some(place) = Place::pg("a_forced_release_mails_the_holder_on_the_server") else {
        return;
    };
    let (here, there) = (TempState::new(), TempState::new());
    let (a, b) = (agent("alice"), agent("bob"));
    let leases = place.open(&here.state);
    let held = leases.acquire(&exclusive(&a, &["src"])).unwrap().lease;
    let _ = leases
        .force_release(&b, held.token, "alice crashed")
        .unwrap();
    let mail = chipset_mail::Mail::with_backend(
        there.state.clone(),
        chipset_mail::MailConfig::default(),
        place.backend(&there.state),
    );
    let inbox = mail.inbox(&a).unwrap();
    assert_eq!(inbox.len(), 1);
    assert_eq!(inbox[0].subject, "lease-force-released");
    // Nothing went through either local root.
    assert!(!here.state.root().join("mail").exists());
}
