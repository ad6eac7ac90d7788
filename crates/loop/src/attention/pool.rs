//! The brief's pool entry: ready work the agent could claim now, when its
//! hook is free, filtered by its roles in the directory.

use chipset_hook::HookStatus;
use chipset_pool::{Entry as PoolEntry, ReadyFilter};
use chipset_store::{AgentId, ReadOutcome, StatePath, Timestamp};

use super::{Attention, BriefEntry, BriefItem, WorkKind, unreadable, unsupported};
use crate::error::Result;

/// How many ready items a brief's pool entry names: the most urgent as its
/// `top`, the next ones in `more`.
pub(super) const POOL_BRIEF_ITEMS: usize = 3;

impl Attention {
    /// Returns the pool's directory, whose existence says whether anyone
    /// ever used the pool.
    pub(super) fn pool_dir(&self) -> StatePath {
        self.hooks.state().channel(chipset_pool::Pool::CHANNEL)
    }

    /// Returns true when the pool's directory exists (one `stat`, the
    /// whole cost of the pool for a root that never used it), or on a
    /// server when it holds an item.
    pub(super) fn pool_present(&self) -> bool {
        if self.on_server() {
            return self.pool_on_server();
        }
        matches!(self.hooks.state().stat(&self.pool_dir()), Ok(Some(_)))
    }

    /// Returns the pool entry of `agent`'s brief and when the next deferred
    /// item it could claim becomes ready (a time-driven change, which no
    /// file notification reports).
    ///
    /// The entry is there when the agent's hook is free (missing, empty,
    /// or holding a completed pool item) and ready items are for it: items
    /// for no role, and items for a role its directory profile holds.
    pub(super) fn pool_entry(
        &self,
        agent: &AgentId,
    ) -> Result<(Option<BriefEntry>, Option<Timestamp>)> {
        // Work pending or active on the hook (the common case while an
        // agent works): nothing to claim, and nothing more to read. A
        // corrupt hook is the hook entry's line; its claims would fail.
        match self.hooks.read(agent)? {
            ReadOutcome::Value(h)
                if matches!(h.state.status(), HookStatus::Empty | HookStatus::Completed) => {}
            ReadOutcome::Missing => {}
            _ => return Ok((None, None)),
        }
        let roles: Vec<String> = match self.directory().read(agent) {
            Ok(ReadOutcome::Value(profile)) => profile
                .roles
                .iter()
                .map(|r| r.as_str().to_owned())
                .collect(),
            // Unregistered, or a profile the doctor must look at: items
            // for no role only.
            Ok(_) => Vec::new(),
            Err(chipset_directory::Error::Store(e)) => return Err(e.into()),
            Err(_) => Vec::new(),
        };
        let filter = ReadyFilter::new().with_roles(roles);
        let claimable = match self.pool().claimable(agent, &filter) {
            Ok(Some(c)) => c,
            Ok(None) => return Ok((None, None)),
            Err(e) => return bad_pool(e).map(|entry| (Some(entry), None)),
        };
        let entry = claimable.ready.split_first().map(|(top, rest)| BriefEntry {
            kind: WorkKind::Pool,
            count: claimable.ready.len(),
            top: BriefItem {
                summary: format!("ready to claim: {}", line(top)),
                ..item(top)
            },
            more: rest
                .iter()
                .take(POOL_BRIEF_ITEMS - 1)
                .map(|e| BriefItem {
                    summary: line(e),
                    ..item(e)
                })
                .collect(),
        });
        Ok((entry, claimable.next_ready_at))
    }
}

fn item(e: &PoolEntry) -> BriefItem {
    BriefItem {
        id: e.id.to_string(),
        from: None,
        priority: Some(format!("P{}", e.priority)),
        at: Some(e.posted_at),
        summary: String::new(),
        unreadable: false,
    }
}

/// `P1 Design the schema` (and its role, when it has one).
fn line(e: &PoolEntry) -> String {
    match &e.role {
        Some(role) => format!("P{} {} (role {role})", e.priority, e.title),
        None => format!("P{} {}", e.priority, e.title),
    }
}

/// A pool that cannot be listed: a corrupt table or log, or a hook that
/// might hold an item (claims fail closed on it too). An entry, never
/// "nothing ready"; other errors fail the brief.
fn bad_pool(e: chipset_pool::Error) -> Result<BriefEntry> {
    use chipset_pool::Error as P;
    Ok(match e {
        P::Corrupt { corruption, .. }
        | P::Hook(chipset_hook::Error::Corrupt { corruption, .. }) => {
            unreadable(WorkKind::Pool, 1, &corruption)
        }
        P::Unsupported { unsupported: u, .. }
        | P::Hook(chipset_hook::Error::Unsupported { unsupported: u, .. }) => {
            unsupported(WorkKind::Pool, 1, &u)
        }
        other => return Err(other.into()),
    })
}

#[cfg(test)]
mod tests {
    use std::thread;
    use std::time::{Duration, Instant};

    use chipset_directory::{Directory, Registration, Role};
    use chipset_hook::Hooks;
    use chipset_lease::{LeaseMode, LeaseRequest, Leases};
    use chipset_pool::{ItemId, NewItem, Pool};
    use chipset_store::{StateDir, WatchConfig};
    use chipset_testkit::{TempState, agent};

    use super::*;
    use crate::AttentionConfig;

    /// Only a notification (or the time-driven deadline) wakes a wait: a
    /// rescan comes after ten minutes.
    fn notified() -> AttentionConfig {
        AttentionConfig {
            watch: WatchConfig {
                notify: true,
                rescan_interval: Duration::from_secs(600),
            },
        }
    }

    fn id(s: &str) -> ItemId {
        ItemId::new(s).unwrap()
    }

    fn post(state: &StateDir, item: NewItem) {
        Pool::new(state.clone())
            .post(&agent("lead"), &item)
            .unwrap();
    }

    fn pool_kinds(brief: &crate::Brief) -> Option<&BriefEntry> {
        brief.entries.iter().find(|e| e.kind == WorkKind::Pool)
    }

    /// A root whose pool was never used costs one `stat` and has no entry;
    /// reading a brief creates nothing.
    #[test]
    fn without_a_pool_the_brief_has_no_pool_entry_and_creates_nothing() {
        let t = TempState::new();
        let attention = Attention::from_state(&t.state);
        assert!(!attention.pool_present());
        assert!(attention.brief(&agent("alice")).unwrap().is_empty());
        assert_eq!(t.state.stat(&attention.pool_dir()).unwrap(), None);
    }

    /// The brief counts the ready items and names the three most urgent;
    /// a claimed item leaves the entry while it is on the hook, and a
    /// completed one frees the hook again.
    #[test]
    fn the_brief_shows_ready_work_while_the_hook_is_free() {
        let t = TempState::new();
        for (name, priority) in [("a", 3), ("b", 1), ("c", 2), ("d", 0)] {
            post(
                &t.state,
                NewItem::new(format!("do {name}"))
                    .with_id(id(name))
                    .with_priority(priority),
            );
        }
        let attention = Attention::from_state(&t.state);
        let alice = agent("alice");
        let brief = attention.brief(&alice).unwrap();
        let entry = pool_kinds(&brief).expect("a pool entry");
        assert_eq!((entry.count, entry.top.id.as_str()), (4, "d"));
        assert_eq!(entry.top.summary, "ready to claim: P0 do d");
        let more: Vec<&str> = entry.more.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(more, ["b", "c"]);
        assert_eq!(
            entry.to_string(),
            "pool (4): ready to claim: P0 do d [d]\n  P1 do b [b]\n  P2 do c [c]"
        );
        let pool = Pool::new(t.state.clone());
        let claimed = pool
            .claim_next(&alice, &ReadyFilter::new())
            .unwrap()
            .unwrap();
        let brief = attention.brief(&alice).unwrap();
        assert_eq!(brief.kinds(), vec![WorkKind::Hook], "pending work first");
        let hooks = Hooks::new(t.state.clone());
        hooks.activate(&claimed.assignment).unwrap();
        assert!(attention.brief(&alice).unwrap().is_empty(), "busy");
        hooks.complete(&claimed.assignment).unwrap();
        let brief = attention.brief(&alice).unwrap();
        assert_eq!(pool_kinds(&brief).unwrap().count, 3, "free again");
        // Another agent with pending work of its own sees none.
        hooks
            .assign(
                &agent("bob"),
                chipset_hook::BeadId::new("gt-1").unwrap(),
                "other",
                None,
            )
            .unwrap();
        assert_eq!(
            attention.brief(&agent("bob")).unwrap().kinds(),
            vec![WorkKind::Hook]
        );
    }

    /// Items for a role show only to agents holding it in the directory.
    #[test]
    fn items_for_a_role_show_to_its_holders_only() {
        let t = TempState::new();
        post(
            &t.state,
            NewItem::new("review")
                .with_id(id("r"))
                .with_role("reviewer"),
        );
        let attention = Attention::from_state(&t.state);
        let alice = agent("alice");
        assert!(attention.brief(&alice).unwrap().is_empty());
        let mut reg = Registration::new();
        reg.roles = Some(vec![Role::new("reviewer").unwrap()]);
        Directory::new(t.state.clone())
            .register(&alice, &reg)
            .unwrap();
        let brief = attention.brief(&alice).unwrap();
        let entry = pool_kinds(&brief).unwrap();
        assert_eq!(
            entry.top.summary,
            "ready to claim: P2 review (role reviewer)"
        );
        post(&t.state, NewItem::new("anyone").with_id(id("n")));
        assert_eq!(
            pool_kinds(&attention.brief(&agent("bob")).unwrap())
                .unwrap()
                .count,
            1,
            "an item for no role is everyone's"
        );
    }

    /// A deferred item becomes ready with no file changing: the look says
    /// when (on a manual clock).
    #[test]
    fn a_deferred_item_gives_the_wait_its_deadline() {
        let (t, clock) = TempState::manual();
        let at = t.state.now() + Duration::from_secs(90);
        post(
            &t.state,
            NewItem::new("later").with_id(id("l")).with_not_before(at),
        );
        let attention = Attention::from_state(&t.state);
        let alice = agent("alice");
        let look = attention.look(&alice, true).unwrap();
        assert!(look.brief.is_empty());
        assert_eq!(look.wake_at, Some(at));
        clock.advance(Duration::from_secs(90));
        let look = attention.look(&alice, true).unwrap();
        assert_eq!(look.brief.kinds(), vec![WorkKind::Pool]);
        assert_eq!(look.wake_at, None);
    }

    /// A corrupt pool table is a line of the brief, never "nothing ready".
    #[test]
    fn a_corrupt_table_is_an_unreadable_item() {
        let t = TempState::new();
        post(&t.state, NewItem::new("x").with_id(id("x")));
        #[allow(clippy::disallowed_methods, reason = "the test corrupts a file")]
        std::fs::write(t.state.root().join("pool/table.json"), "{").unwrap();
        let brief = Attention::from_state(&t.state)
            .brief(&agent("alice"))
            .unwrap();
        assert!(pool_kinds(&brief).unwrap().top.unreadable);
    }

    /// Waits until `wait` returns on another thread; returns its brief and
    /// how long it took.
    fn waiting(
        attention: &Attention,
        who: &AgentId,
        then: impl FnOnce(),
    ) -> (crate::Brief, Duration) {
        let (attention, who) = (attention.clone(), who.clone());
        let start = Instant::now();
        let waiter = thread::spawn(move || attention.wait(&who, Duration::from_secs(60)).unwrap());
        thread::sleep(Duration::from_millis(200));
        then();
        (waiter.join().unwrap(), start.elapsed())
    }

    /// `wait` wakes when an item is posted, even into a pool that did not
    /// exist when it started.
    #[test]
    fn a_wait_wakes_when_work_is_posted() {
        let t = TempState::new();
        let attention = Attention::from_state(&t.state).with_config(notified());
        let (brief, took) = waiting(&attention, &agent("alice"), || {
            post(&t.state, NewItem::new("new").with_id(id("n")));
        });
        assert_eq!(brief.kinds(), vec![WorkKind::Pool]);
        assert!(took < Duration::from_secs(30), "{took:?}");
    }

    /// `wait` wakes when a dependency is completed on its holder's hook
    /// (only a hook file changes).
    #[test]
    fn a_wait_wakes_when_a_dependency_is_done() {
        let t = TempState::new();
        post(&t.state, NewItem::new("first").with_id(id("a")));
        post(
            &t.state,
            NewItem::new("second")
                .with_id(id("b"))
                .with_depends_on([id("a")]),
        );
        let pool = Pool::new(t.state.clone());
        let bob = agent("bob");
        let held = pool.claim(&bob, &id("a")).unwrap().assignment;
        let hooks = Hooks::new(t.state.clone());
        hooks.activate(&held).unwrap();
        let attention = Attention::from_state(&t.state).with_config(notified());
        let (brief, took) = waiting(&attention, &agent("alice"), || {
            hooks.complete(&held).unwrap();
        });
        assert_eq!(pool_kinds(&brief).unwrap().top.id, "b");
        assert!(took < Duration::from_secs(30), "{took:?}");
    }

    /// `wait` wakes when a deferred item's time comes, though no file
    /// changes and no rescan is due.
    #[test]
    fn a_wait_wakes_when_a_deferred_item_becomes_ready() {
        let t = TempState::new();
        let at = t.state.now() + Duration::from_millis(1500);
        post(
            &t.state,
            NewItem::new("soon").with_id(id("s")).with_not_before(at),
        );
        let attention = Attention::from_state(&t.state).with_config(notified());
        let (brief, took) = waiting(&attention, &agent("alice"), || {});
        assert_eq!(brief.kinds(), vec![WorkKind::Pool]);
        // Not before the item's time (measured on the state's clock, from
        // before the post, so a slow machine cannot fail it).
        assert!(t.state.now() >= at, "woke before {at:?}");
        assert!(took < Duration::from_secs(30), "{took:?}");
    }

    /// `wait` wakes when the agent's lease drifts into its warning window
    /// (the last fifth of a short lease's term), though no file changes and
    /// no rescan is due.
    #[test]
    fn a_wait_wakes_when_a_lease_drifts_into_its_warning_window() {
        let t = TempState::new();
        let me = agent("alice");
        let ttl = Duration::from_millis(2500);
        let window = t.state.now() + Duration::from_millis(2000);
        let req = LeaseRequest::new(me.clone(), LeaseMode::Exclusive, ["src/**"]).with_ttl(ttl);
        let _ = Leases::new(t.state.clone()).acquire(&req).unwrap();
        let attention = Attention::from_state(&t.state).with_config(notified());
        let (brief, took) = waiting(&attention, &me, || {});
        assert_eq!(brief.kinds(), vec![WorkKind::Lease]);
        assert!(t.state.now() >= window, "woke before {window:?}");
        assert!(took < Duration::from_secs(30), "{took:?}");
    }
}
