//! Every directory operation that writes, driven through the store's I/O
//! seam (issue 12's standard): a fault (EIO, ENOSPC) at every call, and
//! every power-cut state. Each failure is plain (nothing a reader sees
//! changed) or of unknown outcome, and a retry of the same request is then
//! a success that applied once.
//!
//! What "applied once" is: each profile says what the request asked, was
//! registered when it first was, and was updated at the time of the write
//! that changed it (a retry of a change that committed writes nothing, so
//! it keeps the first attempt's `updated_at`); a retry returns the profile
//! as stored. Last seen is computed when read and never written, so it has
//! no case here.

use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chipset_directory::{Directory, Error, Filter, Profile, Registered, Registration, Role};
use chipset_store::{
    Classify, DoctorMode, ErrorKind, ManualClock, ReadOutcome, RealIo, SharedIo, StateDir,
    StateOptions, Timestamp,
};
use chipset_testkit::{FaultCase, RecordIo, T0, Visible, forgive_lock_folders, sweep_each};

use crate::agent;

fn open(root: &Path, io: SharedIo, clock: &ManualClock) -> (Directory, StateDir) {
    let state = StateDir::open_with(
        root,
        StateOptions {
            io,
            clock: Arc::new(clock.clone()),
            ..StateOptions::default()
        },
    )
    .unwrap();
    (Directory::new(state.clone()), state)
}

fn role(name: &str) -> Role {
    Role::new(name).unwrap()
}

/// Alpha's first registration: a reviewer on opus-4.
fn first() -> Registration {
    let mut r = Registration::new();
    r.roles = Some(vec![role("reviewer")]);
    r.model = Some("opus-4".to_owned());
    r.note = Some("on the auth\nrewrite".to_owned());
    r
}

/// Alpha's later change: another model, the note cleared.
fn change() -> Registration {
    let mut r = Registration::new();
    r.model = Some("sonnet-4".to_owned());
    r.note = Some(String::new());
    r
}

/// One case's state: the directory, its clock, and what each run returned.
struct World {
    dir: Directory,
    state: StateDir,
    clock: ManualClock,
    /// When the setup ended (the profiles it made were registered then).
    set_up: Timestamp,
    answers: RefCell<Vec<Registered>>,
}

impl World {
    fn new((dir, state): (Directory, StateDir), clock: ManualClock, set_up: Timestamp) -> Self {
        World {
            dir,
            state,
            clock,
            set_up,
            answers: RefCell::new(Vec::new()),
        }
    }

    fn now(&self) -> Timestamp {
        self.state.now()
    }

    /// Keeps what a run returned.
    fn keep(&self, got: Vec<Registered>) {
        *self.answers.borrow_mut() = got;
    }
}

/// `who`'s profile, which must read.
fn profile(w: &World, who: &str) -> Option<Profile> {
    match w.dir.read(&agent(who)).unwrap() {
        ReadOutcome::Value(p) => Some(p),
        ReadOutcome::Missing => None,
        other => panic!("{who}'s profile: {other:?}"),
    }
}

fn roles(p: &Profile) -> Vec<&str> {
    p.roles.iter().map(Role::as_str).collect()
}

struct Case {
    name: &'static str,
    setup: fn(&Directory),
    /// Runs the operation, retry-safe; returns Err only for a failure.
    run: fn(&World) -> Result<Vec<Registered>, Error>,
    /// The operation applied, once.
    applied: fn(&World) -> bool,
}

/// Alpha and beta registered; gamma a reviewer already.
fn three(d: &Directory) {
    d.register(&agent("alpha"), &Registration::new()).unwrap();
    d.register(&agent("beta"), &first()).unwrap();
    d.register(&agent("gamma"), &first()).unwrap();
    d.list_remove(&role("reviewer"), &[agent("beta")]).unwrap();
}

/// Alpha, beta and gamma all reviewers.
fn reviewers(d: &Directory) {
    for who in ["alpha", "beta", "gamma"] {
        d.register(&agent(who), &first()).unwrap();
    }
}

/// `who` was last updated by a write of this run: after the setup, no
/// later than now.
fn updated_by_the_run(w: &World, p: &Profile) -> bool {
    p.registered_at <= w.set_up && p.updated_at > w.set_up && p.updated_at <= w.now()
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "register (create)",
            setup: |_| {},
            run: |w| Ok(vec![w.dir.register(&agent("alpha"), &first())?]),
            applied: |w| {
                profile(w, "alpha").is_some_and(|p| {
                    roles(&p) == ["reviewer"]
                        && p.model.as_deref() == Some("opus-4")
                        && p.note.as_deref() == Some("on the auth\nrewrite")
                        && p.registered_at == p.updated_at
                        && p.registered_at > w.set_up
                }) && w.dir.list(&Filter::default()).unwrap().items.len() == 1
            },
        },
        Case {
            name: "register (update)",
            setup: |d| drop(d.register(&agent("alpha"), &first()).unwrap()),
            run: |w| Ok(vec![w.dir.register(&agent("alpha"), &change())?]),
            applied: |w| {
                profile(w, "alpha").is_some_and(|p| {
                    roles(&p) == ["reviewer"]
                        && p.model.as_deref() == Some("sonnet-4")
                        && p.note.is_none()
                        && updated_by_the_run(w, &p)
                })
            },
        },
        Case {
            name: "list add (two agents)",
            setup: three,
            run: |w| {
                w.dir
                    .list_add(&role("reviewer"), &[agent("alpha"), agent("beta")])
            },
            applied: |w| {
                let members = w.dir.members(&role("reviewer")).unwrap().items;
                members == [agent("alpha"), agent("beta"), agent("gamma")]
                    && ["alpha", "beta"]
                        .iter()
                        .all(|who| updated_by_the_run(w, &profile(w, who).unwrap()))
                    && profile(w, "gamma").unwrap().updated_at <= w.set_up
            },
        },
        Case {
            name: "list remove (two agents)",
            setup: reviewers,
            run: |w| {
                w.dir
                    .list_remove(&role("reviewer"), &[agent("alpha"), agent("beta")])
            },
            applied: |w| {
                let members = w.dir.members(&role("reviewer")).unwrap().items;
                members == [agent("gamma")]
                    && ["alpha", "beta"]
                        .iter()
                        .all(|who| updated_by_the_run(w, &profile(w, who).unwrap()))
            },
        },
    ]
}

/// What the last run returned is what the profiles now say.
fn returned_what_is_stored(w: &World, what: &str) {
    let answers = w.answers.borrow();
    assert!(!answers.is_empty(), "{what}: nothing returned");
    for got in answers.iter() {
        let p = got.profile();
        assert_eq!(
            profile(w, p.name.as_str()).as_ref(),
            Some(p),
            "{what}: {got:?}"
        );
    }
}

fn run(case: &Case, w: &World) -> Result<(), Error> {
    let got = (case.run)(w)?;
    w.keep(got);
    Ok(())
}

impl FaultCase for Case {
    type World = World;
    type Error = Error;

    fn name(&self) -> &str {
        self.name
    }

    fn open(&self, root: &Path, io: SharedIo) -> World {
        let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
        let opened = open(root, io, &clock);
        (self.setup)(&opened.0);
        let set_up = opened.1.now();
        clock.advance(Duration::from_secs(1));
        World::new(opened, clock, set_up)
    }

    fn run(&self, w: &World) -> Result<(), Error> {
        run(self, w)
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
        returned_what_is_stored(w, what);
        let report = w.dir.doctor(DoctorMode::Check).unwrap();
        assert!(report.is_clean(), "{what}: {:?}", report.findings);
    }
}

#[test]
fn every_fault_in_every_directory_write_is_safe_to_retry() {
    sweep_each("directory", cases());
}

#[test]
#[allow(
    clippy::print_stderr,
    reason = "prints the figures for the report (shown with --nocapture)"
)]
fn every_power_cut_in_a_directory_write_reads_clean_and_keeps_what_returned() {
    let mut total = 0;
    for case in cases() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("state");
        let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
        let (setup, state) = open(&root, Arc::new(RealIo), &clock);
        (case.setup)(&setup);
        let set_up = state.now();
        clock.advance(Duration::from_secs(1));
        let rec = RecordIo::start(&root).unwrap();
        let w = World::new(open(&root, rec.clone(), &clock), clock.clone(), set_up);
        run(&case, &w).unwrap();
        rec.mark(case.name);
        let states = rec.crash_states();
        assert!(states.len() > 1, "{}", case.name);
        for (i, cut) in states.iter().enumerate() {
            let what = format!("{}: cut {i}", case.name);
            let dir = tmp.path().join(format!("cut{i}"));
            cut.materialize(&dir).unwrap();
            let back = World::new(open(&dir, Arc::new(RealIo), &clock), clock.clone(), set_up);
            // Reads clean: every profile whole, the doctor finds nothing.
            let roster = back.dir.list(&Filter::default()).unwrap();
            assert!(roster.corrupt.is_empty(), "{what}: {:?}", roster.corrupt);
            let report = back.dir.doctor(DoctorMode::Check).unwrap();
            assert!(report.is_clean(), "{what}: {:?}", report.findings);
            if cut.returned.iter().any(|r| r == case.name) {
                assert!((case.applied)(&back), "{what}: lost after returning");
            }
            run(&case, &back).unwrap_or_else(|e| panic!("{what}: retry: {e}"));
            assert!(
                (case.applied)(&back),
                "{what}: the retry did not apply once"
            );
            returned_what_is_stored(&back, &what);
        }
        total += states.len();
        eprintln!(
            "directory power cut {}: {} calls, {} distinct states",
            case.name,
            rec.calls(),
            states.len()
        );
    }
    eprintln!("directory power cut total: {total} states");
}

/// Bad input changes nothing: a list change refused for one agent (too
/// many roles, a corrupt profile) is found before any profile is written.
/// (Before: the agents before it were changed, and the error said nothing
/// of it.)
#[test]
fn a_list_change_refused_for_one_agent_changes_no_profile() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
    let (dir, state) = open(tmp.path(), Arc::new(RealIo), &clock);
    let mut full = Registration::new();
    full.roles = Some(
        (0..chipset_directory::MAX_ROLES)
            .map(|i| role(&format!("r{i}")))
            .collect(),
    );
    dir.register(&agent("alpha"), &Registration::new()).unwrap();
    dir.register(&agent("beta"), &full).unwrap();
    dir.register(&agent("gamma"), &Registration::new()).unwrap();
    state
        .write_bytes(&dir.path(&agent("gamma")), b"{\"name\": ")
        .unwrap();
    let bytes = |who: &str| state.read_bytes(&dir.path(&agent(who))).unwrap();
    let alpha = bytes("alpha");
    clock.advance(Duration::from_secs(1));
    let err = dir
        .list_add(&role("reviewer"), &[agent("alpha"), agent("beta")])
        .unwrap_err();
    assert!(matches!(err, Error::TooManyRoles { .. }), "{err}");
    assert_eq!(err.kind(), ErrorKind::Invalid, "{err}");
    let err = dir
        .list_add(&role("reviewer"), &[agent("alpha"), agent("gamma")])
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    let err = dir
        .list_remove(&role("r0"), &[agent("beta"), agent("gamma")])
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    assert_eq!(bytes("alpha"), alpha);
    assert_eq!(
        profile_roles(&dir, "beta").len(),
        chipset_directory::MAX_ROLES
    );
    // Beta already on a list of its own is no change, so no refusal.
    let done = dir
        .list_add(&role("r0"), &[agent("alpha"), agent("beta")])
        .unwrap();
    assert!(matches!(done[1], Registered::Unchanged(_)), "{done:?}");
}

fn profile_roles(dir: &Directory, who: &str) -> Vec<Role> {
    match dir.read(&agent(who)).unwrap() {
        ReadOutcome::Value(p) => p.roles,
        other => panic!("{who}: {other:?}"),
    }
}

/// A list change that fails after an agent's profile changed says so (an
/// unknown outcome naming the agents done), and the same call again
/// finishes it. (Before: the store's plain error, as if nothing changed.)
#[test]
fn a_list_change_failing_part_way_is_partly_changed_and_the_retry_finishes_it() {
    use chipset_testkit::{EIO, Fault, FaultIo};
    let tmp = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
    let fault = FaultIo::passthrough();
    let (dir, _state) = open(tmp.path(), fault.clone(), &clock);
    three(&dir);
    // Alpha's change costs the calls a change of alpha alone does.
    fault.set(Fault::nth(0, EIO));
    let (once, _) = open(&tmp.path().join("once"), fault.clone(), &clock);
    once.register(&agent("alpha"), &Registration::new())
        .unwrap();
    fault.set(Fault::nth(0, EIO));
    once.list_add(&role("reviewer"), &[agent("alpha")]).unwrap();
    let per_agent = fault.counted();
    fault.set(Fault::nth(per_agent + 1, EIO));
    let err = dir
        .list_add(&role("reviewer"), &[agent("alpha"), agent("beta")])
        .unwrap_err();
    fault.disarm();
    assert!(
        matches!(&err, Error::PartlyChanged { changed, .. } if *changed == [agent("alpha")]),
        "{err}"
    );
    assert_eq!(err.kind(), ErrorKind::OutcomeUnknown, "{err}");
    let members = dir.members(&role("reviewer")).unwrap().items;
    assert_eq!(members, [agent("alpha"), agent("gamma")]);
    let done = dir
        .list_add(&role("reviewer"), &[agent("alpha"), agent("beta")])
        .unwrap();
    assert!(matches!(done[0], Registered::Unchanged(_)), "{done:?}");
    assert!(matches!(done[1], Registered::Updated(_)), "{done:?}");
    let members = dir.members(&role("reviewer")).unwrap().items;
    assert_eq!(members, [agent("alpha"), agent("beta"), agent("gamma")]);
}
