//! Every writing operation of the pool driven through the store's I/O
//! seam, as the core crates' seam tests drive theirs: a fault (EIO,
//! ENOSPC) at every call, and every power-cut state. Each failure is plain
//! (nothing a reader sees changed) or of unknown outcome, and the retry of
//! the same request is then a success that applied exactly once and
//! returns what the first attempt did.
//!
//! What "the same request" and "exactly once" mean here:
//!
//! - a post: the item in the table once, its file what the request says;
//!   a post without an id is retried with the id the caller learned (from
//!   the first result, or from the unknown outcome's error), and without
//!   one after a plain failure;
//! - a claim: the item on the claimer's hook, pending, claimed by it and
//!   on no other hook; the retry returns that item;
//! - a release or a stalled holder's return: the hook empty, the item
//!   ready, its release counted once;
//! - a done: the item recorded done, the hook empty.
//!
//! A retry of a request that had applied says so (`existing`, or `None`
//! for a return).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chipset_hook::{Assignment, HookStatus, Hooks};
use chipset_pool::{Claimed, Entry, Error, ItemId, NewItem, Pool, Posted, ReadyFilter};
use chipset_pool::{Settled, WorkState};
use chipset_store::{AgentId, Classify, ManualClock, ReadOutcome, SharedIo};
use chipset_store::{StateDir, StateOptions};
use chipset_testkit::{FaultCase, NoSyncIo, Visible, forgive_lock_folders, sweep_each};

use crate::{agent, id, item};

/// The title of the item posted without an id.
pub(crate) const UNNAMED: &str = "an item without an id";

/// A pool and its hooks on one state root, and what the runs returned.
pub(crate) struct World {
    pub(crate) pool: Pool,
    pub(crate) hooks: Hooks,
    pub(crate) clock: ManualClock,
    /// The assignment the setup left on a hook, for a stalled holder's return.
    pub(crate) held: RefCell<Option<Assignment>>,
    /// What each successful run returned, in order.
    pub(crate) got: RefCell<Vec<Got>>,
    /// The id the caller knows for its post without an id: from a result,
    /// or from an unknown outcome's error.
    pub(crate) known: RefCell<Option<ItemId>>,
    /// Whether the operation had applied when its retry began.
    applied_before_retry: Cell<bool>,
}

/// What a run returned.
#[derive(Debug)]
pub(crate) enum Got {
    Posted(Vec<Posted>),
    Claimed(Box<Claimed>),
    Settled(Settled),
    Returned(Option<Entry>),
}

impl Got {
    /// Returns true when the result says the request had applied before.
    pub(crate) fn repeats(&self) -> bool {
        match self {
            Got::Posted(p) => p.iter().all(|p| p.existing),
            Got::Claimed(c) => c.existing,
            Got::Settled(s) => s.existing,
            Got::Returned(r) => r.is_none(),
        }
    }
}

fn open_state(root: &Path, io: SharedIo, clock: &ManualClock) -> StateDir {
    StateDir::open_with(
        root,
        StateOptions {
            io,
            clock: Arc::new(clock.clone()),
            ..StateOptions::default()
        },
    )
    .unwrap()
}

impl World {
    pub(crate) fn open(root: &Path, io: SharedIo, clock: &ManualClock) -> World {
        let state = open_state(root, io, clock);
        World {
            pool: Pool::new(state.clone()),
            hooks: Hooks::new(state),
            clock: clock.clone(),
            held: RefCell::default(),
            got: RefCell::default(),
            known: RefCell::default(),
            applied_before_retry: Cell::new(false),
        }
    }

    /// Opens `root` on `io` after `case`'s setup, made without syncs (the
    /// setup is the baseline: no fault is injected into it and no power is
    /// cut during it), with the clock a second later.
    pub(crate) fn prepared(case: &Case, root: &Path, io: SharedIo, clock: &ManualClock) -> World {
        let setup = World::open(root, NoSyncIo::shared(), clock);
        (case.setup)(&setup);
        clock.advance(Duration::from_secs(1));
        let w = World::open(root, io, clock);
        *w.held.borrow_mut() = setup.held.take();
        w
    }
}

pub(crate) struct Case {
    pub(crate) name: &'static str,
    setup: fn(&World),
    /// Runs the operation (the same request every time).
    run: fn(&World) -> Result<Got, Error>,
    /// Whether it applied, exactly once.
    pub(crate) applied: fn(&World) -> bool,
}

impl Case {
    /// Runs the operation and keeps what it returned.
    pub(crate) fn run(&self, w: &World) -> Result<(), Error> {
        let got = (self.run)(w)?;
        w.got.borrow_mut().push(got);
        Ok(())
    }
}

fn lead() -> AgentId {
    agent("lead")
}

fn alice() -> AgentId {
    agent("alice")
}

pub(crate) fn post(w: &World, items: &[NewItem]) {
    w.pool.post_many(&lead(), items).unwrap();
}

pub(crate) fn claim(w: &World, who: &str, name: &str) -> Assignment {
    w.pool.claim(&agent(who), &id(name)).unwrap().assignment
}

/// Works `held` to completed through its hook, as its agent does.
fn complete(w: &World, held: &Assignment) {
    w.hooks.activate(held).unwrap();
    w.hooks.complete(held).unwrap();
}

/// Every item with its state; the table, the log and every hook read.
/// Asserts that no id is in the table twice.
pub(crate) fn states(w: &World) -> BTreeMap<String, (Entry, WorkState)> {
    let mut out = BTreeMap::new();
    let listed = w.pool.list();
    for l in listed.unwrap_or_else(|e| panic!("the pool does not read: {e}")) {
        let name = String::from(l.entry.id.clone());
        let again = out.insert(name.clone(), (l.entry, l.state));
        assert!(again.is_none(), "`{name}` is in the table twice");
    }
    out
}

/// What each hook holds (its item and status), by agent; asserts no
/// hook is unreadable and no item is on two hooks.
pub(crate) fn holds(w: &World) -> BTreeMap<String, (String, HookStatus)> {
    let mut out = BTreeMap::new();
    let mut holders: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (who, read) in w.hooks.list().unwrap() {
        let hook = match read {
            ReadOutcome::Value(hook) => hook,
            ReadOutcome::Missing => continue,
            other => panic!("the hook of {who} does not read: {other:?}"),
        };
        if let Some(a) = hook.assignment() {
            let item = a.work.bead_id.as_str().to_owned();
            holders
                .entry(item.clone())
                .or_default()
                .push(who.to_string());
            out.insert(who.to_string(), (item, hook.state.status()));
        }
    }
    for (item, on) in &holders {
        assert!(on.len() == 1, "`{item}` is on the hooks of {on:?}");
    }
    out
}

/// `who`'s hook holds `name` pending, and the pool says it is claimed by `who`.
fn holds_claimed(w: &World, who: &str, name: &str) -> bool {
    let on_hook = holds(w).get(who) == Some(&(name.to_owned(), HookStatus::Pending));
    let claimed = states(w).get(name).is_some_and(|(_, s)| {
        *s == WorkState::Claimed {
            holder: agent(who),
            hook: HookStatus::Pending,
        }
    });
    on_hook && claimed
}

/// `name` is recorded done by `by`, and no hook holds it pending or active.
fn recorded_done(w: &World, name: &str, by: &str) -> bool {
    let done = states(w)
        .get(name)
        .is_some_and(|(e, _)| e.done.as_ref().is_some_and(|d| d.by == agent(by)));
    let left = holds(w)
        .values()
        .any(|(i, s)| i == name && *s != HookStatus::Completed);
    done && !left
}

/// `name` is ready and on no hook, released once by `by` from `holder`'s
/// hook with `reason`.
fn released_once(w: &World, name: &str, by: &str, holder: &str, reason: &str) -> bool {
    let Some((e, s)) = states(w).remove(name) else {
        return false;
    };
    let on_hook = holds(w).values().any(|(i, _)| i == name);
    s == WorkState::Ready
        && !on_hook
        && e.releases == 1
        && e.released
            .is_some_and(|r| r.by == agent(by) && r.holder == agent(holder) && r.reason == reason)
}

/// Every item of `names` posted once, its file saying what the request said.
fn posted(w: &World, names: &[&str]) -> bool {
    let all = states(w);
    names.iter().all(|n| {
        all.contains_key(*n)
            && w.pool
                .item(&id(n))
                .is_ok_and(|i| i.title == format!("do {n}") && i.posted_by == lead())
    })
}

pub(crate) fn unnamed_count(w: &World) -> usize {
    states(w)
        .values()
        .filter(|(e, _)| e.title == UNNAMED)
        .count()
}

/// The post without an id: with the id the caller knows, once it knows one.
fn post_unnamed(w: &World) -> Result<Got, Error> {
    let known = w.known.borrow().clone();
    let req = match known {
        Some(id) => NewItem::new(UNNAMED).with_id(id),
        None => NewItem::new(UNNAMED),
    };
    match w.pool.post(&lead(), &req) {
        Ok(p) => {
            *w.known.borrow_mut() = Some(p.entry.id.clone());
            Ok(Got::Posted(vec![p]))
        }
        Err(e) => {
            if let Some(id) = named_by(&e) {
                *w.known.borrow_mut() = Some(id);
            }
            Err(e)
        }
    }
}

/// The item an unknown outcome's error names, for the retry.
pub(crate) fn named_by(e: &Error) -> Option<ItemId> {
    match e {
        Error::OutcomeUnknown { ids, .. } => ids.first().cloned(),
        _ => None,
    }
}

/// Sixteen items; fifteen of them claimed and done by alice (fifteen
/// records in the log, one short of a fold), the last on her hook.
fn fifteen_done(w: &World) {
    let names: Vec<String> = (0..16).map(|n| format!("i{n:02}")).collect();
    let items: Vec<NewItem> = names.iter().map(|n| item(n)).collect();
    post(w, &items);
    for n in &names {
        claim(w, "alice", n);
        if n != "i15" {
            w.pool.done(&alice(), &id(n)).unwrap();
        }
    }
}

pub(crate) fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "post",
            setup: |_| {},
            run: |w| w.pool.post_many(&lead(), &[item("a")]).map(Got::Posted),
            applied: |w| posted(w, &["a"]),
        },
        Case {
            name: "post two",
            setup: |w| post(w, &[item("x")]),
            run: |w| {
                let b = item("b").with_depends_on([id("a"), id("x")]);
                w.pool.post_many(&lead(), &[item("a"), b]).map(Got::Posted)
            },
            applied: |w| {
                let all = states(w);
                posted(w, &["a", "b", "x"])
                    && matches!(&all["b"].1, WorkState::Blocked { on } if on.len() == 2)
            },
        },
        Case {
            name: "post without an id",
            setup: |w| post(w, &[item("x")]),
            run: post_unnamed,
            applied: |w| unnamed_count(w) == 1,
        },
        Case {
            name: "post folding the log",
            setup: |w| {
                post(w, &[item("x")]);
                claim(w, "alice", "x");
                w.pool.done(&alice(), &id("x")).unwrap();
            },
            run: |w| w.pool.post_many(&lead(), &[item("a")]).map(Got::Posted),
            applied: |w| posted(w, &["a"]) && recorded_done(w, "x", "alice"),
        },
        Case {
            name: "claim next",
            setup: |w| post(w, &[item("a").with_priority(1), item("b")]),
            run: |w| {
                let c = w.pool.claim_next(&alice(), &ReadyFilter::new())?;
                Ok(Got::Claimed(Box::new(c.expect("an item is ready"))))
            },
            applied: |w| holds_claimed(w, "alice", "a") && states(w)["b"].1 == WorkState::Ready,
        },
        Case {
            name: "claim by id",
            setup: |w| post(w, &[item("a").with_priority(1), item("b")]),
            run: |w| Ok(Got::Claimed(Box::new(w.pool.claim(&alice(), &id("b"))?))),
            applied: |w| holds_claimed(w, "alice", "b") && states(w)["a"].1 == WorkState::Ready,
        },
        Case {
            name: "claim after finishing",
            setup: |w| {
                post(w, &[item("a"), item("b")]);
                let a = claim(w, "alice", "a");
                complete(w, &a);
            },
            run: |w| {
                let c = w.pool.claim_next(&alice(), &ReadyFilter::new())?;
                Ok(Got::Claimed(Box::new(c.expect("an item is ready"))))
            },
            applied: |w| holds_claimed(w, "alice", "b") && recorded_done(w, "a", "alice"),
        },
        Case {
            name: "claim recording another's done",
            setup: |w| {
                post(w, &[item("a"), item("b")]);
                let a = claim(w, "bob", "a");
                complete(w, &a);
            },
            run: |w| {
                let c = w.pool.claim_next(&alice(), &ReadyFilter::new())?;
                Ok(Got::Claimed(Box::new(c.expect("an item is ready"))))
            },
            applied: |w| holds_claimed(w, "alice", "b") && recorded_done(w, "a", "bob"),
        },
        Case {
            name: "release",
            setup: |w| {
                post(w, &[item("a")]);
                claim(w, "alice", "a");
            },
            run: |w| {
                let s = w.pool.release(&alice(), &id("a"), "blocked")?;
                Ok(Got::Settled(s))
            },
            applied: |w| released_once(w, "a", "alice", "alice", "blocked"),
        },
        Case {
            name: "done",
            setup: |w| {
                post(w, &[item("a")]);
                claim(w, "alice", "a");
            },
            run: |w| Ok(Got::Settled(w.pool.done(&alice(), &id("a"))?)),
            applied: |w| recorded_done(w, "a", "alice") && !holds(w).contains_key("alice"),
        },
        Case {
            name: "done after completing",
            setup: |w| {
                post(w, &[item("a")]);
                let a = claim(w, "alice", "a");
                complete(w, &a);
            },
            run: |w| Ok(Got::Settled(w.pool.done(&alice(), &id("a"))?)),
            applied: |w| recorded_done(w, "a", "alice") && !holds(w).contains_key("alice"),
        },
        Case {
            name: "done folding the log",
            setup: fifteen_done,
            run: |w| Ok(Got::Settled(w.pool.done(&alice(), &id("i15"))?)),
            applied: |w| {
                let all = states(w);
                (0..16).all(|n| all[&format!("i{n:02}")].0.done.is_some())
                    && !holds(w).contains_key("alice")
            },
        },
        Case {
            name: "return stalled",
            setup: |w| {
                post(w, &[item("a")]);
                let a = claim(w, "alice", "a");
                w.hooks.activate(&a).unwrap();
                *w.held.borrow_mut() = Some(a);
            },
            run: |w| {
                let held = w.held.borrow().clone().expect("the setup's assignment");
                let back = w.pool.return_stalled(&held, &agent("witness"), "silent")?;
                Ok(Got::Returned(back))
            },
            applied: |w| released_once(w, "a", "witness", "alice", "silent"),
        },
    ]
}

/// Checks that `got`, the retry's result, says what the state holds.
pub(crate) fn answers(w: &World, got: &Got, what: &str) {
    let all = states(w);
    let entry = |e: &Entry| &all[e.id.as_str()].0;
    match got {
        Got::Posted(p) => {
            for p in p {
                assert_eq!(&p.entry, entry(&p.entry), "{what}: the post's answer");
            }
        }
        Got::Claimed(c) => {
            let on_hook = w.hooks.current(&c.assignment.agent).unwrap();
            assert_eq!(
                on_hook.as_ref(),
                Some(&c.assignment),
                "{what}: the claim's answer"
            );
            assert_eq!(
                c.assignment.work.bead_id.as_str(),
                c.entry.id.as_str(),
                "{what}"
            );
        }
        Got::Settled(s) => assert_eq!(&s.entry, entry(&s.entry), "{what}: the answer"),
        Got::Returned(Some(e)) => assert_eq!(e, entry(e), "{what}: the return's answer"),
        Got::Returned(None) => {}
    }
}

impl FaultCase for Case {
    type World = World;
    type Error = Error;

    fn name(&self) -> &str {
        self.name
    }

    fn open(&self, root: &Path, io: SharedIo) -> World {
        World::prepared(self, root, io, &chipset_testkit::manual_clock())
    }

    fn run(&self, w: &World) -> Result<(), Error> {
        Case::run(self, w)
    }

    fn applied(&self, w: &World) -> bool {
        (self.applied)(w)
    }

    fn is_outcome_unknown(&self, e: &Error, what: &str) -> bool {
        let unknown = e.is_outcome_unknown();
        if unknown && self.name == "post without an id" {
            assert!(
                named_by(e).is_some(),
                "{what}: the error names no item: {e}"
            );
        }
        if let Error::OutcomeUnknown { ids, .. } = e {
            let text = e.to_string();
            assert!(
                ids.iter().all(|i| text.contains(i.as_str())),
                "{what}: {text}"
            );
        }
        unknown
    }

    fn forgive(&self, root: &Path, before: &Visible, after: &mut Visible, _what: &str) {
        forgive_lock_folders(root, before, after);
    }

    fn before_retry(&self, w: &World) {
        w.applied_before_retry.set((self.applied)(w));
        w.clock.advance(Duration::from_secs(1));
    }

    fn after_retry(&self, w: &World, what: &str) {
        let got = w.got.borrow();
        let last = got.last().expect("the retry's result");
        answers(w, last, what);
        if w.applied_before_retry.get() {
            assert!(
                last.repeats(),
                "{what}: the retry of an applied request did not say so: {last:?}"
            );
        }
    }
}

#[test]
fn every_fault_in_every_pool_operation_is_safe_to_retry() {
    sweep_each("pool", cases());
}

/// Regression: a claim by an agent whose hook held a finished item
/// recorded that item done and cleared the hook before it judged the
/// request, so a refused claim (an item another holds, an unknown one, a
/// done one) changed the pool and the hook. It decides first now.
#[test]
fn a_refused_claim_changes_nothing_even_with_a_finished_item_on_the_hook() {
    let s = crate::setup();
    s.pool.post_many(&lead(), &[item("a"), item("b")]).unwrap();
    let a = s.pool.claim(&alice(), &id("a")).unwrap().assignment;
    s.hooks.activate(&a).unwrap();
    s.hooks.complete(&a).unwrap();
    let _ = s.pool.claim(&agent("bob"), &id("b")).unwrap();
    let before = crate::snapshot(&s);
    for refused in ["b", "none", "a"] {
        let e = s.pool.claim(&alice(), &id(refused)).unwrap_err();
        assert!(
            matches!(
                e,
                Error::NotReady { .. } | Error::NotFound { .. } | Error::AlreadyDone { .. }
            ),
            "{refused}: {e}"
        );
        assert!(!e.is_outcome_unknown(), "{refused}: {e}");
        assert_eq!(
            crate::snapshot(&s),
            before,
            "{refused}: the refused claim wrote"
        );
    }
    // A claim that goes ahead records the finished item and clears the hook.
    s.pool.post(&lead(), &item("c")).unwrap();
    let c = s.pool.claim(&alice(), &id("c")).unwrap();
    assert_eq!(c.finished, Some(id("a")));
    assert!(s.pool.get(&id("a")).unwrap().entry.done.is_some());
}
