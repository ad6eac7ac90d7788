//! Every lease operation that writes, driven through the store's I/O seam
//! (issue 12's standard): a fault (EIO, ENOSPC) at every call, and every
//! power-cut state. Each failure is plain (nothing a reader sees changed)
//! or of unknown outcome, and a retry of the same request is then a
//! success that applied once, returning what the first attempt granted.
//!
//! What "applied once" is per operation:
//!
//! - acquire: the table holds the one lease of the request, under the
//!   token the first attempt drew (no token burnt, no second lease), the
//!   other holders' leases and no expired one; a retry returns that lease
//!   and its token (`existing` when the first attempt had committed).
//! - renew: the one lease of the token, granted when it was, renewed at
//!   the last call's time for the TTL asked (a renewal sets the expiry, it
//!   does not add to it, so a retry later extends from the later time).
//! - release: the lease is gone; a retry answers `AlreadyGone`.
//! - forced release: the lease is gone and its holder has exactly one
//!   `lease-force-released` notice; a retry neither fails nor mails again.

use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chipset_lease::{Acquired, Error, Lease, LeaseMode, Leases, Released};
use chipset_mail::Mail;
use chipset_store::{
    Classify, DoctorMode, ManualClock, RealIo, SharedIo, StateDir, StateOptions, Timestamp,
};
use chipset_testkit::{FaultCase, RecordIo, T0, Visible, forgive_lock_folders, sweep_each};

use crate::{agent, exclusive, shared};

fn open(root: &Path, io: SharedIo, clock: &ManualClock) -> (Leases, Mail) {
    let state = StateDir::open_with(
        root,
        StateOptions {
            io,
            clock: Arc::new(clock.clone()),
            ..StateOptions::default()
        },
    )
    .unwrap();
    (Leases::new(state.clone()), Mail::new(state))
}

/// One case's state: the leases, the mail the notices go to, the clock,
/// the lease the setup granted to `alice` (the one renewed, released or
/// forced), and what each run returned.
struct World {
    leases: Leases,
    mail: Mail,
    clock: ManualClock,
    held: Option<Lease>,
    answers: RefCell<Vec<Answer>>,
}

/// What a run returned.
#[derive(Debug)]
enum Answer {
    Acquired(Acquired),
    Renewed(Lease),
    Released(Released),
}

impl World {
    fn answer(&self, a: Answer) {
        self.answers.borrow_mut().push(a);
    }

    fn last(&self) -> Option<Answer> {
        self.answers.borrow_mut().pop()
    }
}

/// The request the acquire cases grant to `alice`.
fn alice_exclusive() -> chipset_lease::LeaseRequest {
    exclusive(&agent("alice"), &["src/auth/**", "Cargo.toml"]).with_reason("rewrite login")
}

fn alice_shared() -> chipset_lease::LeaseRequest {
    shared(&agent("alice"), &["docs"])
}

/// The recorded leases, asserting the table reads (a corrupt table is an
/// error, never an empty list).
fn recorded(w: &World) -> Vec<Lease> {
    w.leases
        .list()
        .unwrap_or_else(|e| panic!("the table reads: {e}"))
}

/// The `lease-force-released` notices in `alice`'s inbox about `token`.
fn notices(mail: &Mail, token: u64) -> usize {
    let task = format!("lease-{token}");
    mail.inbox(&agent("alice"))
        .unwrap()
        .iter()
        .filter(|m| m.subject == "lease-force-released" && m.task().as_str() == task)
        .count()
}

struct Case {
    name: &'static str,
    /// Grants what the operation acts on; returns alice's lease, if any.
    setup: fn(&Leases, &ManualClock) -> Option<Lease>,
    /// Runs the operation, retry-safe; returns Err only for a failure.
    run: fn(&World) -> Result<(), Error>,
    /// The operation applied, once.
    applied: fn(&World) -> bool,
    /// Checks what the last run returned against the table.
    returned: fn(&World, &str),
}

/// Bob's shared lease on `docs/a.md` (kept by every grant) and Carol's
/// one-second lease on `old` (expired by the time the case runs, so the
/// next grant drops it): tokens 1 and 2.
fn others(l: &Leases, _: &ManualClock) -> Option<Lease> {
    let _ = l.acquire(&shared(&agent("bob"), &["docs/a.md"])).unwrap();
    let _ = l
        .acquire(&exclusive(&agent("carol"), &["old"]).with_ttl(Duration::from_secs(1)))
        .unwrap();
    None
}

/// Alice's exclusive lease on `src` for a minute: token 1.
fn alice_holds(l: &Leases, _: &ManualClock) -> Option<Lease> {
    let req = exclusive(&agent("alice"), &["src"]).with_ttl(Duration::from_secs(60));
    Some(l.acquire(&req).unwrap().lease)
}

/// Alice's lease on `src`, expired two minutes ago.
fn alice_expired(l: &Leases, clock: &ManualClock) -> Option<Lease> {
    let held = alice_holds(l, clock);
    clock.advance(Duration::from_secs(180));
    held
}

fn acquire(w: &World, req: &chipset_lease::LeaseRequest) -> Result<(), Error> {
    let got = w.leases.acquire(req)?;
    w.answer(Answer::Acquired(got));
    Ok(())
}

/// The table is `want` (holder, token, mode) in token order, and alice's
/// lease names `paths` and is live.
fn table_is(w: &World, want: &[(&str, u64, LeaseMode)], paths: &[&str]) -> bool {
    let all = recorded(w);
    let got: Vec<(&str, u64, LeaseMode)> = all
        .iter()
        .map(|l| (l.holder.as_str(), l.token, l.mode))
        .collect();
    let alice = all.iter().find(|l| l.holder.as_str() == "alice");
    got == want
        && alice.is_some_and(|l| {
            l.paths.iter().map(|p| p.as_str()).eq(paths.iter().copied())
                && l.is_live(w.leases.state().now())
        })
}

/// The last acquire returned the lease the table holds for alice: the one
/// the first attempt granted when it had committed.
fn returned_the_granted_lease(w: &World, what: &str) {
    let Some(Answer::Acquired(got)) = w.last() else {
        panic!("{what}: no acquire answered");
    };
    let table = recorded(w);
    let alice: Vec<&Lease> = table
        .iter()
        .filter(|l| l.holder.as_str() == "alice")
        .collect();
    assert_eq!(alice, [&got.lease], "{what}: {got:?}");
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "acquire exclusive",
            setup: others,
            run: |w| acquire(w, &alice_exclusive()),
            applied: |w| {
                table_is(
                    w,
                    &[
                        ("bob", 1, LeaseMode::Shared),
                        ("alice", 3, LeaseMode::Exclusive),
                    ],
                    &["src/auth/**", "Cargo.toml"],
                )
            },
            returned: returned_the_granted_lease,
        },
        Case {
            name: "acquire shared on a fresh root",
            setup: |_, _| None,
            run: |w| acquire(w, &alice_shared()),
            applied: |w| table_is(w, &[("alice", 1, LeaseMode::Shared)], &["docs"]),
            returned: returned_the_granted_lease,
        },
        Case {
            name: "acquire, then the same request again",
            setup: others,
            run: |w| {
                let first = w.leases.acquire(&alice_shared())?;
                let again = w.leases.acquire(&alice_shared())?;
                assert!(again.existing, "{again:?}");
                assert_eq!(again.lease, first.lease);
                w.answer(Answer::Acquired(again));
                Ok(())
            },
            applied: |w| {
                table_is(
                    w,
                    &[
                        ("bob", 1, LeaseMode::Shared),
                        ("alice", 3, LeaseMode::Shared),
                    ],
                    &["docs"],
                )
            },
            returned: returned_the_granted_lease,
        },
        Case {
            name: "renew",
            setup: alice_holds,
            run: |w| renew(w),
            applied: renewed_once,
            returned: returned_the_renewal,
        },
        Case {
            name: "renew an expired lease nobody took",
            setup: alice_expired,
            run: |w| renew(w),
            applied: renewed_once,
            returned: returned_the_renewal,
        },
        Case {
            name: "release",
            setup: alice_holds,
            run: |w| {
                let held = w.held.as_ref().unwrap();
                let r = w.leases.release(&agent("alice"), held.token)?;
                w.answer(Answer::Released(r));
                Ok(())
            },
            applied: |w| recorded(w).is_empty(),
            returned: returned_the_release,
        },
        Case {
            name: "force release an expired lease",
            setup: alice_expired,
            run: |w| {
                let held = w.held.as_ref().unwrap();
                let r = w
                    .leases
                    .force_release(&agent("bob"), held.token, "alice crashed")?;
                w.answer(Answer::Released(r));
                Ok(())
            },
            applied: |w| recorded(w).is_empty() && notices(&w.mail, 1) == 1,
            returned: returned_the_release,
        },
    ]
}

fn renew(w: &World) -> Result<(), Error> {
    let held = w.held.as_ref().unwrap();
    let l = w
        .leases
        .renew(&agent("alice"), held.token, Duration::from_secs(600))?;
    w.answer(Answer::Renewed(l));
    Ok(())
}

/// The one lease, granted when it was, renewed now for ten minutes.
fn renewed_once(w: &World) -> bool {
    let held = w.held.as_ref().unwrap();
    let now = w.leases.state().now();
    match recorded(w).as_slice() {
        [l] => {
            l.token == held.token
                && l.acquired_at == held.acquired_at
                && l.renewed_at == now
                && l.expires_at == now + Duration::from_secs(600)
        }
        _ => false,
    }
}

fn returned_the_renewal(w: &World, what: &str) {
    let Some(Answer::Renewed(l)) = w.last() else {
        panic!("{what}: no renewal answered");
    };
    assert_eq!(recorded(w), [l], "{what}");
}

/// The last release returned the lease, or (when an attempt before it
/// had committed) that it was gone.
fn returned_the_release(w: &World, what: &str) {
    let held = w.held.as_ref().unwrap();
    match w.last() {
        Some(Answer::Released(Released::Released(l))) => assert_eq!(&l, held, "{what}"),
        Some(Answer::Released(Released::AlreadyGone)) => {}
        other => panic!("{what}: {other:?}"),
    }
}

impl FaultCase for Case {
    type World = World;
    type Error = Error;

    fn name(&self) -> &str {
        self.name
    }

    fn open(&self, root: &Path, io: SharedIo) -> World {
        let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
        let (leases, mail) = open(root, io, &clock);
        let held = (self.setup)(&leases, &clock);
        clock.advance(Duration::from_secs(1));
        World {
            leases,
            mail,
            clock,
            held,
            answers: RefCell::new(Vec::new()),
        }
    }

    fn run(&self, w: &World) -> Result<(), Error> {
        (self.run)(w)
    }

    fn applied(&self, w: &World) -> bool {
        (self.applied)(w)
    }

    fn forgive(&self, root: &Path, before: &Visible, after: &mut Visible, _what: &str) {
        forgive_lock_folders(root, before, after);
    }

    fn before_retry(&self, w: &World) {
        w.clock.advance(Duration::from_secs(1));
    }

    fn after_retry(&self, w: &World, what: &str) {
        (self.returned)(w, what);
        assert!(
            w.leases.doctor(DoctorMode::Check).unwrap().is_clean(),
            "{what}"
        );
    }
}

#[test]
fn every_fault_in_every_lease_operation_is_safe_to_retry() {
    sweep_each("lease", cases());
}

#[test]
#[allow(
    clippy::print_stderr,
    reason = "prints the figures for the report (shown with --nocapture)"
)]
fn every_power_cut_in_a_lease_operation_reads_clean_and_keeps_what_returned() {
    let mut total = 0;
    for case in cases() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("state");
        let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
        let (setup, _) = open(&root, Arc::new(RealIo), &clock);
        let held = (case.setup)(&setup, &clock);
        clock.advance(Duration::from_secs(1));
        let rec = RecordIo::start(&root).unwrap();
        let (leases, mail) = open(&root, rec.clone(), &clock);
        let w = World {
            leases,
            mail,
            clock: clock.clone(),
            held: held.clone(),
            answers: RefCell::new(Vec::new()),
        };
        (case.run)(&w).unwrap();
        rec.mark(case.name);
        let states = rec.crash_states();
        assert!(states.len() > 1, "{}", case.name);
        for (i, cut) in states.iter().enumerate() {
            let what = format!("{}: cut {i}", case.name);
            let dir = tmp.path().join(format!("cut{i}"));
            cut.materialize(&dir).unwrap();
            let (leases, mail) = open(&dir, Arc::new(RealIo), &clock);
            let back = World {
                leases,
                mail,
                clock: clock.clone(),
                held: held.clone(),
                answers: RefCell::new(Vec::new()),
            };
            // Reads clean: the table parses, the doctors find nothing
            // (the mail's only what a send's follow-up may leave undone).
            drop(recorded(&back));
            let report = back.leases.doctor(DoctorMode::Check).unwrap();
            assert!(report.is_clean(), "{what}: {:?}", report.findings);
            let report = back.mail.doctor(DoctorMode::Check).unwrap();
            for f in &report.findings {
                assert!(
                    !matches!(f.fault, chipset_store::Defect::Corrupt(_)),
                    "{what}: {f}"
                );
            }
            if cut.returned.iter().any(|r| r == case.name) {
                assert!((case.applied)(&back), "{what}: lost after returning");
            }
            (case.run)(&back).unwrap_or_else(|e| panic!("{what}: retry: {e}"));
            assert!(
                (case.applied)(&back),
                "{what}: the retry did not apply once"
            );
            (case.returned)(&back, &what);
        }
        total += states.len();
        eprintln!(
            "lease power cut {}: {} calls, {} distinct states",
            case.name,
            rec.calls(),
            states.len()
        );
    }
    eprintln!("lease power cut total: {total} states");
}

/// A forced release mails its notice before it removes the lease, under an
/// id the lease fixes: cut between the two, the holder has been told, the
/// error says so (an unknown outcome), and whoever finishes the release,
/// by the same call or another agent's, the holder gets no second notice.
/// (Before: the lease was removed first, and a retry after a failed or
/// uncertain write found it gone and never mailed.)
#[test]
fn a_forced_release_cut_after_its_notice_is_finished_without_a_second_notice() {
    use chipset_testkit::{EIO, Fault, FaultIo, IoOp};
    let (alice, bob) = (agent("alice"), agent("bob"));
    let tmp = tempfile::tempdir().unwrap();
    let set_up = |name: &str| {
        let fault = FaultIo::passthrough();
        let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
        let (leases, mail) = open(&tmp.path().join(name), fault.clone(), &clock);
        let held = alice_expired(&leases, &clock).unwrap();
        // Count (and fail) only the forced release's calls.
        fault.set(Fault::nth(0, EIO));
        (fault, clock, leases, mail, held)
    };
    // The table's replace is the last rename of a clean forced release.
    let (fault, _, leases, _, held) = set_up("clean");
    let clean = leases.force_release(&bob, held.token, "alice crashed");
    assert!(matches!(clean, Ok(Released::Released(_))), "{clean:?}");
    let counted: Vec<IoOp> = fault
        .calls()
        .into_iter()
        .filter(|c| *c != IoOp::StartWriteBack)
        .collect();
    let rename = counted.iter().rposition(|c| *c == IoOp::Rename).unwrap();

    let (fault, clock, leases, mail, held) = set_up("cut");
    fault.set(Fault::nth(rename as u64 + 1, EIO));
    let err = leases
        .force_release(&bob, held.token, "alice crashed")
        .unwrap_err();
    fault.disarm();
    assert!(matches!(err, Error::PartlyReleased { .. }), "{err}");
    assert!(err.is_outcome_unknown(), "{err}");
    assert_eq!(notices(&mail, held.token), 1, "the holder was told");
    assert_eq!(leases.list().unwrap().len(), 1, "not released yet");
    // The notice's id is in the seed's form, at the grant's time.
    let notice = mail.inbox(&alice).unwrap().remove(0);
    assert!(notice.id.is_seed_form(), "{}", notice.id);
    let ms = format!("{:013}-", held.acquired_at.unix_ms());
    assert!(notice.id.as_str().starts_with(&ms), "{}", notice.id);
    // Alice renews it meanwhile; Carol finishes the release for another
    // reason: the lease is gone, and the one notice is still Bob's.
    clock.advance(Duration::from_secs(1));
    leases
        .renew(&alice, held.token, Duration::from_secs(1))
        .unwrap();
    clock.advance(Duration::from_secs(2));
    let done = leases
        .force_release(&agent("carol"), held.token, "stale")
        .unwrap();
    assert!(
        matches!(&done, Released::Released(l) if l.token == held.token),
        "{done:?}"
    );
    assert!(leases.list().unwrap().is_empty());
    assert_eq!(mail.inbox(&alice).unwrap(), std::slice::from_ref(&notice));
    // Bob's own retry: already gone, nothing mailed.
    let again = leases
        .force_release(&bob, held.token, "alice crashed")
        .unwrap();
    assert_eq!(again, Released::AlreadyGone);
    assert_eq!(mail.inbox(&alice).unwrap(), std::slice::from_ref(&notice));
}
