//! The I/O layer: the table and the item files under the pool's lock, and
//! the claimers' hooks.

use std::collections::{HashMap, HashSet};

use chipset_hook::{Assignment, HookRead, HookStatus, Hooks};
use chipset_store::{
    AgentId, CorruptReason, Corruption, Created, LockGuard, ReadOutcome, StateDir, StatePath,
    Timestamp, Unsupported, parse_json, to_canonical_json,
};

use crate::error::{Error, Result};
use crate::format::{DoneRecord, Entry, Item, POOL_FORMAT, Record, ReleaseRecord, Table};
use crate::id::ItemId;
use crate::transition::{
    Hold, Index, Listed, NewItem, ReadyFilter, View, WorkState, check_dependencies, check_reason,
};
use crate::{POOL_CHANNEL, TABLE_CAP};

/// What [`Pool::post`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Posted {
    /// The item's table entry.
    pub entry: Entry,
    /// True when the item was posted before with the same id and content
    /// (a retry): nothing was written.
    pub existing: bool,
}

/// What a claim did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Claimed {
    /// The claimed item.
    pub entry: Entry,
    /// The hook assignment that holds it: pick it up, touch it, complete it.
    pub assignment: Assignment,
    /// True when the claimer's hook already held this item, pending or
    /// active (a retry, or a claim by an agent that has not finished):
    /// nothing was written.
    pub existing: bool,
    /// The item the claimer had completed on its hook, recorded done and
    /// cleared by this claim.
    pub finished: Option<ItemId>,
}

/// What [`Pool::release`] or [`Pool::done`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Settled {
    /// The item's table entry now.
    pub entry: Entry,
    /// True when it had already been released or done (a retry).
    pub existing: bool,
}

/// How many items are in each state, for a status screen. Serializes as
/// `{"ready", "deferred", "blocked", "claimed", "done"}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct PoolCounts {
    /// Claimable now.
    pub ready: usize,
    /// Waiting for their `not_before`.
    pub deferred: usize,
    /// Waiting for dependencies.
    pub blocked: usize,
    /// On a hook, pending or active.
    pub claimed: usize,
    /// Done (recorded, or completed on a hook).
    pub done: usize,
    /// Hooks that could not be read (corrupt or unsupported): an item one
    /// of them holds may be counted as ready. Left out of the JSON when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub unreadable_hooks: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl PoolCounts {
    /// Returns the number of items.
    pub fn total(&self) -> usize {
        self.ready + self.deferred + self.blocked + self.claimed + self.done
    }

    /// Returns true when the pool holds no item.
    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }
}

/// What reading every hook found.
struct Scan {
    /// What each hook holds, by item.
    by_item: HashMap<ItemId, Hold>,
    /// What each hook holds, by agent.
    by_agent: HashMap<AgentId, Hold>,
    /// Hooks that could not be read (only when not strict).
    unreadable: usize,
}

/// Which item a claim wants.
enum Want<'a> {
    Next(&'a ReadyFilter),
    Named(&'a ItemId),
}

/// The work pool under one state root: `pool/table.json` and
/// `pool/items/{id}.json`, and the hooks its items are claimed onto.
///
/// Cheap to clone. Every change takes the pool's lock
/// (`pool/.table.json.lock`, released by the kernel if the process dies),
/// so posts, claims, releases and dones are linearizable across threads and
/// processes. Reads take no lock.
#[derive(Debug, Clone)]
pub struct Pool {
    state: StateDir,
    hooks: Hooks,
}

impl Pool {
    /// Returns the pool of `state`. Creates nothing until the first post.
    pub fn new(state: StateDir) -> Self {
        let hooks = Hooks::new(state.clone());
        Pool { state, hooks }
    }

    /// Returns the state root.
    pub fn state(&self) -> &StateDir {
        &self.state
    }

    fn table_path(&self) -> StatePath {
        self.state.channel(POOL_CHANNEL).join_static("table.json")
    }

    fn log_path(&self) -> StatePath {
        self.state.channel(POOL_CHANNEL).join_static("log.jsonl")
    }

    fn item_path(&self, id: &ItemId) -> StatePath {
        self.state
            .channel(POOL_CHANNEL)
            .join_static("items")
            .join_id(id, ".json")
    }

    /// Posts one item by `by`. See [`Pool::post_many`].
    ///
    /// # Errors
    ///
    /// As [`Pool::post_many`].
    pub fn post(&self, by: &AgentId, item: &NewItem) -> Result<Posted> {
        let mut posted = self.post_many(by, std::slice::from_ref(item))?;
        Ok(posted.pop().expect("one result per item"))
    }

    /// Posts `items` by `by`, sharing one write of the table. Each gets its
    /// caller's id or a fresh one (`w-` and 12 hex digits). An item whose id
    /// was posted before with the same content (and poster) is a retry: its
    /// result says `existing` and nothing is written for it.
    ///
    /// **Commit point:** the rename of the new table. The item files are
    /// written first (a crash between leaves an item file that no table
    /// names: not in the pool, and replaced by a retry of the post).
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`], [`Error::BodyTooLarge`] (checked before anything
    /// is read); [`Error::IdTaken`]; [`Error::UnknownDependency`];
    /// [`Error::Cycle`]; [`Error::TableFull`]; a corrupt or unsupported
    /// table; a store error. On any error no item of the batch is posted.
    pub fn post_many(&self, by: &AgentId, items: &[NewItem]) -> Result<Vec<Posted>> {
        for item in items {
            item.validate()?;
        }
        let mut given = HashSet::new();
        for id in items.iter().filter_map(NewItem::id) {
            if !given.insert(id) {
                return Err(Error::Invalid {
                    field: "id",
                    reason: format!("`{id}` is given twice in one batch"),
                });
            }
        }
        let _guard = self.lock()?;
        let now = self.state.now();
        let (mut table, logged) = self.load("post work")?;
        let index = Index::new(&table);
        let mut results: Vec<Option<Posted>> = Vec::with_capacity(items.len());
        let mut fresh: Vec<Item> = Vec::new();
        for req in items {
            let id = match &req.id {
                Some(id) => id.clone(),
                None => loop {
                    let id = ItemId::generate();
                    if index.get(&id).is_none() && !given.contains(&id) {
                        break id;
                    }
                },
            };
            if let Some(entry) = index.get(&id) {
                let first = self.read_item(&id, "post work")?;
                if !first.same_request(&req.to_item(id.clone(), by, first.posted_at)) {
                    return Err(Error::IdTaken { id });
                }
                results.push(Some(Posted {
                    entry: entry.clone(),
                    existing: true,
                }));
                continue;
            }
            results.push(None);
            fresh.push(req.to_item(id, by, now));
        }
        check_dependencies(&index, &fresh)?;
        if fresh.is_empty() {
            return Ok(results.into_iter().map(|r| r.expect("a retry")).collect());
        }
        let mut files = Vec::with_capacity(fresh.len());
        for item in &fresh {
            let path = self.item_path(&item.id);
            files.push((path.clone(), json(&path, item)?));
        }
        self.state
            .ensure_dir(&self.state.channel(POOL_CHANNEL).join_static("items"))?;
        let created = self.state.create_new_batch(&files)?;
        for ((path, bytes), created) in files.iter().zip(created) {
            // A file no table names: left by a post that crashed before its
            // commit point. It was never in the pool; this post replaces it.
            if created == Created::AlreadyExists {
                self.state.write_bytes(path, bytes)?;
            }
        }
        let mut entries = Vec::with_capacity(fresh.len());
        for item in &fresh {
            let entry = Entry::of(item, table.next_seq);
            table.next_seq += 1;
            table.items.push(entry.clone());
            entries.push(entry);
        }
        // The table now holds what the log recorded: start an empty log.
        // A crash in between leaves the log's records, which apply again
        // without changing anything.
        self.write_table(&table)?;
        if logged > 0 {
            self.state.write_bytes(&self.log_path(), b"")?;
        }
        tracing::debug!(count = entries.len(), %by, "work posted");
        let mut entries = entries.into_iter();
        Ok(results
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|| Posted {
                    entry: entries.next().expect("one entry per new item"),
                    existing: false,
                })
            })
            .collect())
    }

    /// Returns the whole item `id` (with its body).
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`]; a corrupt or unsupported table or item file; a store error.
    pub fn item(&self, id: &ItemId) -> Result<Item> {
        let (table, _) = self.load("read an item")?;
        if !table.items.iter().any(|e| &e.id == id) {
            return Err(Error::NotFound { id: id.clone() });
        }
        self.read_item(id, "read an item")
    }

    /// Returns item `id` with its state now.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`]; as [`Pool::list`].
    pub fn get(&self, id: &ItemId) -> Result<Listed> {
        self.list()?
            .into_iter()
            .find(|l| &l.entry.id == id)
            .ok_or_else(|| Error::NotFound { id: id.clone() })
    }

    /// Returns every item with its state now, in posting order.
    ///
    /// # Errors
    ///
    /// A corrupt or unsupported table; a corrupt or unsupported hook (it
    /// might hold an item: fail closed); a store error.
    pub fn list(&self) -> Result<Vec<Listed>> {
        let (table, _) = self.load("list work")?;
        let holds = self.holds("list work")?.0;
        let view = View {
            index: Index::new(&table),
            holds: &holds,
            now: self.state.now(),
        };
        Ok(view.list())
    }

    /// Returns the ready items `filter` keeps, most urgent first, then oldest.
    ///
    /// # Errors
    ///
    /// As [`Pool::list`].
    pub fn ready(&self, filter: &ReadyFilter) -> Result<Vec<Listed>> {
        let (table, _) = self.load("list ready work")?;
        let holds = self.holds("list ready work")?.0;
        let view = View {
            index: Index::new(&table),
            holds: &holds,
            now: self.state.now(),
        };
        Ok(view
            .ready(filter)
            .into_iter()
            .map(|e| Listed {
                entry: e.clone(),
                state: WorkState::Ready,
            })
            .collect())
    }

    /// Returns how many items are in each state, for a status screen.
    /// Unlike the other reads, a corrupt or unsupported hook does not fail
    /// it: it is counted in [`PoolCounts::unreadable_hooks`], and an item
    /// it might hold may be counted as ready.
    ///
    /// # Errors
    ///
    /// A corrupt or unsupported table or log; a store error.
    pub fn counts(&self) -> Result<PoolCounts> {
        let (table, _) = self.load("count work")?;
        let Scan {
            by_item: holds,
            unreadable,
            ..
        } = self.scan_hooks("count work", false)?;
        let view = View {
            index: Index::new(&table),
            holds: &holds,
            now: self.state.now(),
        };
        let mut counts = PoolCounts {
            unreadable_hooks: unreadable,
            ..PoolCounts::default()
        };
        for l in view.list() {
            match l.state {
                WorkState::Ready => counts.ready += 1,
                WorkState::Deferred { .. } => counts.deferred += 1,
                WorkState::Blocked { .. } => counts.blocked += 1,
                WorkState::Claimed { .. } => counts.claimed += 1,
                WorkState::Done { .. } => counts.done += 1,
            }
        }
        Ok(counts)
    }

    /// Claims the most urgent, oldest ready item `filter` keeps for
    /// `agent`: puts it on `agent`'s hook (pending). `None` when nothing is
    /// ready.
    ///
    /// When `agent`'s hook holds a pool item it completed, the claim first
    /// records that item done and clears the hook ([`Claimed::finished`]).
    /// When it holds a pool item still pending or active, that item is
    /// returned with `existing` set and nothing changes: a retry after a
    /// failure returns the first claim.
    ///
    /// **Commit point:** the rename of `agent`'s hook file. The pool keeps no
    /// separate claim record: an item is claimed exactly when a hook holds
    /// it, so a crash at any point leaves it on one hook or on none.
    ///
    /// # Errors
    ///
    /// [`Error::HookBusy`] when `agent`'s hook holds work that is not a
    /// pool item (or is the pool item's completed work awaiting another
    /// clear); [`Error::Hook`] when any hook is corrupt or unsupported;
    /// a corrupt or unsupported table; a store error.
    pub fn claim_next(&self, agent: &AgentId, filter: &ReadyFilter) -> Result<Option<Claimed>> {
        self.claim_inner(agent, Want::Next(filter))
    }

    /// Claims item `id` for `agent`, as [`Pool::claim_next`] does. Claiming
    /// an item the agent's hook already holds returns it with `existing`.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`]; [`Error::AlreadyDone`]; [`Error::NotReady`] when
    /// another hook holds it, or it is blocked or deferred; as
    /// [`Pool::claim_next`].
    pub fn claim(&self, agent: &AgentId, id: &ItemId) -> Result<Claimed> {
        Ok(self
            .claim_inner(agent, Want::Named(id))?
            .expect("a named claim returns an item or an error"))
    }

    fn claim_inner(&self, agent: &AgentId, want: Want<'_>) -> Result<Option<Claimed>> {
        const OP: &str = "claim work";
        let _guard = self.lock()?;
        let now = self.state.now();
        let (mut table, _) = self.load(OP)?;
        let (mut holds, by_agent) = self.holds(OP)?;
        let mut records = record_completed(&mut table, &holds, now);
        let mut finished = None;
        if let Some(mine) = by_agent.get(agent) {
            let id = ItemId::of_bead(mine.assignment.bead_id());
            let Some(n) = Index::new(&table).position(&id) else {
                return Err(Error::HookBusy {
                    agent: agent.clone(),
                    bead: id.into_string(),
                });
            };
            let entry = &table.items[n];
            if entry.done.is_none() && mine.status != HookStatus::Completed {
                if matches!(want, Want::Named(w) if *w != id) {
                    return Err(Error::HookBusy {
                        agent: agent.clone(),
                        bead: id.into_string(),
                    });
                }
                let entry = entry.clone();
                self.append(&records)?;
                return Ok(Some(Claimed {
                    entry,
                    assignment: mine.assignment.clone(),
                    existing: true,
                    finished: None,
                }));
            }
            if entry.done.is_none() {
                let done = DoneRecord {
                    by: agent.clone(),
                    at: now,
                };
                table.items[n].done = Some(done.clone());
                records.push(Record {
                    id: id.clone(),
                    done: Some(done),
                    released: None,
                    releases: None,
                });
            }
            self.append(&std::mem::take(&mut records))?;
            self.retire(mine)?;
            holds.remove(&id);
            finished = Some(id);
        }
        self.append(&records)?;
        let view = View {
            index: Index::new(&table),
            holds: &holds,
            now,
        };
        let entry = match want {
            Want::Next(filter) => match view.next(filter) {
                Some(e) => e.clone(),
                None => return Ok(None),
            },
            Want::Named(id) => {
                let entry = view
                    .index
                    .get(id)
                    .ok_or_else(|| Error::NotFound { id: id.clone() })?;
                match view.state(entry) {
                    WorkState::Ready => entry.clone(),
                    WorkState::Done { .. } => return Err(Error::AlreadyDone { id: id.clone() }),
                    state => {
                        return Err(Error::NotReady {
                            id: id.clone(),
                            state,
                        });
                    }
                }
            }
        };
        let assignment =
            self.hooks
                .assign(agent, entry.id.bead(), entry.title.clone(), Some(agent))?;
        tracing::debug!(item = %entry.id, %agent, "work claimed");
        Ok(Some(Claimed {
            entry,
            assignment,
            existing: false,
            finished,
        }))
    }

    /// Returns item `id`, on `agent`'s hook, to the pool with `reason`: the
    /// hook is emptied and the item is ready again (its release recorded).
    /// Releasing again once released (same agent and reason) is a retry.
    ///
    /// The reason is recorded first, then the hook is emptied (**commit
    /// point:** the hook's rename); a crash between leaves the item on the
    /// hook, and a retry finishes the release without counting it twice.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for an empty or too long reason; [`Error::NotFound`];
    /// [`Error::AlreadyDone`] (done, or completed on the hook);
    /// [`Error::NotHolder`] when the item is not on `agent`'s hook; a corrupt
    /// table or hook; a store error.
    pub fn release(&self, agent: &AgentId, id: &ItemId, reason: &str) -> Result<Settled> {
        check_reason(reason)?;
        let _guard = self.lock()?;
        let (table, _) = self.load("release work")?;
        let entry = Index::new(&table)
            .get(id)
            .cloned()
            .ok_or_else(|| Error::NotFound { id: id.clone() })?;
        if entry.done.is_some() {
            return Err(Error::AlreadyDone { id: id.clone() });
        }
        if let Some(hold) = self.hold_of(agent, "release work")?
            && ItemId::of_bead(hold.assignment.bead_id()) == *id
        {
            if hold.status == HookStatus::Completed {
                return Err(Error::AlreadyDone { id: id.clone() });
            }
            let entry = self.give_back(table, &hold.assignment, agent, reason)?;
            return Ok(Settled {
                entry,
                existing: false,
            });
        }
        if entry
            .released
            .as_ref()
            .is_some_and(|r| &r.by == agent && &r.holder == agent && r.reason == reason)
        {
            return Ok(Settled {
                entry,
                existing: true,
            });
        }
        Err(self.not_holder(agent, id)?)
    }

    /// Marks item `id`, on `agent`'s hook in any state, done and clears the
    /// hook (activating and completing it first if need be). Once done,
    /// `done` again is a retry.
    ///
    /// **Commit point:** the rename of the table that records it done. The
    /// hook is cleared after; a crash between leaves a done item on the
    /// hook, which the agent's next claim (or `done` again) clears.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`]; [`Error::NotHolder`] when the item is neither on
    /// `agent`'s hook nor done; a corrupt table or hook; a store error.
    pub fn done(&self, agent: &AgentId, id: &ItemId) -> Result<Settled> {
        const OP: &str = "finish work";
        let _guard = self.lock()?;
        let (mut table, _) = self.load(OP)?;
        let Some(n) = Index::new(&table).position(id) else {
            return Err(Error::NotFound { id: id.clone() });
        };
        let existing = table.items[n].done.is_some();
        match self.hold_of(agent, OP)? {
            Some(hold) if ItemId::of_bead(hold.assignment.bead_id()) == *id => {
                if !existing {
                    let done = DoneRecord {
                        by: agent.clone(),
                        at: self.state.now(),
                    };
                    table.items[n].done = Some(done.clone());
                    self.append(&[Record {
                        id: id.clone(),
                        done: Some(done),
                        released: None,
                        releases: None,
                    }])?;
                }
                self.retire(&hold)?;
                tracing::debug!(item = %id, %agent, "work done");
            }
            _ if existing => {}
            _ => return Err(self.not_holder(agent, id)?),
        }
        Ok(Settled {
            entry: table.items.swap_remove(n),
            existing,
        })
    }

    /// Returns the item of `held` to the pool on behalf of a witness (`by`)
    /// that judged its holder stalled, recording `reason`. Returns the
    /// item's entry, or `None` when `held` is not a pool item or the hook no
    /// longer holds it pending or active (it moved on: nothing to return).
    /// Calling it again after it applied returns `None`.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for an empty reason; a corrupt table or hook; a store error.
    pub fn return_stalled(
        &self,
        held: &Assignment,
        by: &AgentId,
        reason: &str,
    ) -> Result<Option<Entry>> {
        check_reason(reason)?;
        let _guard = self.lock()?;
        let (table, _) = self.load("return stalled work")?;
        let id = ItemId::of_bead(held.bead_id());
        match Index::new(&table).get(&id) {
            Some(e) if e.done.is_none() => {}
            _ => return Ok(None),
        }
        match self.hold_of(held.agent(), "return stalled work")? {
            Some(hold)
                if hold.assignment.same_fence(held) && hold.status != HookStatus::Completed => {}
            _ => return Ok(None),
        }
        let entry = self.give_back(table, held, by, reason)?;
        tracing::info!(item = %id, holder = %held.agent(), %by, "stalled work returned to the pool");
        Ok(Some(entry))
    }

    /// Records the release of `held` (unless this release was recorded
    /// already, by a try that crashed before emptying the hook), then
    /// empties the hook.
    fn give_back(
        &self,
        mut table: Table,
        held: &Assignment,
        by: &AgentId,
        reason: &str,
    ) -> Result<Entry> {
        let id = ItemId::of_bead(held.bead_id());
        let n = Index::new(&table).position(&id).expect("checked");
        let recorded = table.items[n].released.as_ref().is_some_and(|r| {
            &r.by == by
                && &r.holder == held.agent()
                && r.reason == reason
                && r.at >= held.work().assigned_at()
        });
        if !recorded {
            let record = Record {
                id,
                done: None,
                released: Some(ReleaseRecord {
                    by: by.clone(),
                    holder: held.agent().clone(),
                    at: self.state.now(),
                    reason: reason.to_owned(),
                }),
                releases: Some(table.items[n].releases + 1),
            };
            record.apply(&mut table.items[n]);
            self.append(std::slice::from_ref(&record))?;
        }
        match self.hooks.reassign(held) {
            Ok(_) => {}
            Err(e) if e.is_stale() => {}
            Err(e) => return Err(e.into()),
        }
        Ok(table.items.swap_remove(n))
    }

    /// Empties a hook holding a done item: activates and completes it if
    /// need be, then clears it. A hook that moved on meanwhile is left alone.
    fn retire(&self, hold: &Hold) -> Result<()> {
        let a = &hold.assignment;
        let steps = || -> chipset_hook::Result<()> {
            if hold.status == HookStatus::Pending {
                self.hooks.activate(a)?;
            }
            if hold.status != HookStatus::Completed {
                self.hooks.complete(a)?;
            }
            self.hooks.clear(a)?;
            Ok(())
        };
        match steps() {
            Ok(()) => Ok(()),
            Err(e) if e.is_stale() => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn not_holder(&self, agent: &AgentId, id: &ItemId) -> Result<Error> {
        let holder = self
            .holds("find the holder of work")?
            .0
            .get(id)
            .map(|h| h.assignment.agent().clone());
        Ok(Error::NotHolder {
            id: id.clone(),
            agent: agent.clone(),
            holder,
        })
    }

    /// Returns what `agent`'s hook holds, if anything.
    fn hold_of(&self, agent: &AgentId, op: &'static str) -> Result<Option<Hold>> {
        Ok(match self.hooks.read(agent)? {
            ReadOutcome::Missing => None,
            ReadOutcome::Value(hook) => hook.assignment().map(|assignment| Hold {
                status: hook.status(),
                assignment,
            }),
            ReadOutcome::Corrupt(corruption) => {
                return Err(Error::Hook(chipset_hook::Error::Corrupt {
                    agent: agent.clone(),
                    op,
                    corruption,
                }));
            }
            ReadOutcome::Unsupported(unsupported) => {
                return Err(Error::Hook(chipset_hook::Error::Unsupported {
                    agent: agent.clone(),
                    op,
                    unsupported,
                }));
            }
        })
    }

    /// Reads every hook: what each holds, by item and by agent. A corrupt or
    /// unsupported hook is an error: it might hold an item.
    fn holds(&self, op: &'static str) -> Result<(HashMap<ItemId, Hold>, HashMap<AgentId, Hold>)> {
        let scan = self.scan_hooks(op, true)?;
        Ok((scan.by_item, scan.by_agent))
    }

    /// [`Pool::holds`]; with `strict` false, unreadable hooks are counted
    /// instead of failing.
    fn scan_hooks(&self, op: &'static str, strict: bool) -> Result<Scan> {
        let mut by_item = HashMap::new();
        let mut by_agent = HashMap::new();
        let mut unreadable = 0;
        for entry in self.hooks.list()? {
            let hold = match entry.read {
                HookRead::Missing => continue,
                HookRead::Value(hook) => match hook.assignment() {
                    Some(assignment) => Hold {
                        status: hook.status(),
                        assignment,
                    },
                    None => continue,
                },
                _ if !strict => {
                    unreadable += 1;
                    continue;
                }
                HookRead::Corrupt(corruption) => {
                    return Err(Error::Hook(chipset_hook::Error::Corrupt {
                        agent: entry.agent,
                        op,
                        corruption,
                    }));
                }
                HookRead::Unsupported(unsupported) => {
                    return Err(Error::Hook(chipset_hook::Error::Unsupported {
                        agent: entry.agent,
                        op,
                        unsupported,
                    }));
                }
            };
            by_item.insert(ItemId::of_bead(hold.assignment.bead_id()), hold.clone());
            by_agent.insert(entry.agent, hold);
        }
        Ok(Scan {
            by_item,
            by_agent,
            unreadable,
        })
    }

    fn lock(&self) -> Result<LockGuard> {
        self.state.channel_dir(POOL_CHANNEL)?;
        Ok(self.state.lock_for(&self.table_path())?.exclusive()?)
    }

    /// Reads the log, then the table, and applies the log to the table.
    /// Returns the table and how many records the log held. The log is
    /// read first: a post that folds the log into the table and empties
    /// the log writes the table first, so a reader sees every record in
    /// the log it read or in the table it reads after.
    fn load(&self, op: &'static str) -> Result<(Table, usize)> {
        let log = self.state.log_reader(&self.log_path())?.read::<Record>()?;
        if let Some(bad) = log.bad_lines.first() {
            return Err(Error::Corrupt {
                op,
                corruption: Corruption {
                    path: self.log_path().to_path_buf(),
                    reason: bad.reason.clone(),
                },
            });
        }
        let mut table = self.read_table(op)?;
        let index: HashMap<ItemId, usize> = table
            .items
            .iter()
            .enumerate()
            .map(|(n, e)| (e.id.clone(), n))
            .collect();
        for record in &log.records {
            if let Some(n) = index.get(&record.id) {
                record.apply(&mut table.items[*n]);
            }
        }
        Ok((table, log.records.len()))
    }

    /// Appends `records` to the log, with one write and one sync.
    fn append(&self, records: &[Record]) -> Result<()> {
        if !records.is_empty() {
            self.state.log(&self.log_path())?.append_batch(records)?;
        }
        Ok(())
    }

    fn read_table(&self, op: &'static str) -> Result<Table> {
        let path = self.table_path();
        let bytes = match self.state.read_bytes_capped(&path, TABLE_CAP)? {
            ReadOutcome::Missing => return Ok(Table::empty()),
            ReadOutcome::Value(bytes) => bytes,
            ReadOutcome::Corrupt(corruption) => return Err(Error::Corrupt { op, corruption }),
            ReadOutcome::Unsupported(unsupported) => {
                return Err(Error::Unsupported { op, unsupported });
            }
        };
        match parse_json::<Table>(&path, &bytes) {
            ReadOutcome::Value(t) if t.format > POOL_FORMAT => Err(Error::Unsupported {
                op,
                unsupported: Unsupported::new(
                    path.to_path_buf(),
                    format!("pool table format {}", t.format),
                ),
            }),
            ReadOutcome::Value(t) => Ok(t),
            ReadOutcome::Missing => Ok(Table::empty()),
            ReadOutcome::Corrupt(corruption) => Err(Error::Corrupt { op, corruption }),
            ReadOutcome::Unsupported(unsupported) => Err(Error::Unsupported { op, unsupported }),
        }
    }

    fn write_table(&self, table: &Table) -> Result<()> {
        let path = self.table_path();
        let bytes = json(&path, table)?;
        if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > TABLE_CAP {
            return Err(Error::TableFull {
                size: bytes.len(),
                cap: TABLE_CAP,
            });
        }
        Ok(self.state.write_bytes(&path, &bytes)?)
    }

    fn read_item(&self, id: &ItemId, op: &'static str) -> Result<Item> {
        let path = self.item_path(id);
        match self.state.read_json::<Item>(&path)? {
            ReadOutcome::Value(item) if item.format > POOL_FORMAT => Err(Error::Unsupported {
                op,
                unsupported: Unsupported::new(
                    path.to_path_buf(),
                    format!("pool item format {}", item.format),
                ),
            }),
            ReadOutcome::Value(item) if item.id == *id => Ok(item),
            ReadOutcome::Value(item) => Err(Error::Corrupt {
                op,
                corruption: Corruption {
                    path: path.to_path_buf(),
                    reason: CorruptReason::WrongShape(format!(
                        "id `{}` does not match the file's item `{id}`",
                        item.id
                    )),
                },
            }),
            ReadOutcome::Missing => Err(Error::Corrupt {
                op,
                corruption: Corruption {
                    path: path.to_path_buf(),
                    reason: CorruptReason::WrongShape(
                        "the table names the item but its file is missing".to_owned(),
                    ),
                },
            }),
            ReadOutcome::Corrupt(corruption) => Err(Error::Corrupt { op, corruption }),
            ReadOutcome::Unsupported(unsupported) => Err(Error::Unsupported { op, unsupported }),
        }
    }
}

/// Records done every item completed on a hook that the pool does not
/// record yet (an agent ran `chipset hook complete`). Returns the records
/// to append.
fn record_completed(
    table: &mut Table,
    holds: &HashMap<ItemId, Hold>,
    now: Timestamp,
) -> Vec<Record> {
    let mut records = Vec::new();
    for entry in &mut table.items {
        if entry.done.is_some() {
            continue;
        }
        if let Some(hold) = holds.get(&entry.id)
            && hold.status == HookStatus::Completed
        {
            let done = DoneRecord {
                by: hold.assignment.agent().clone(),
                at: now,
            };
            entry.done = Some(done.clone());
            records.push(Record {
                id: entry.id.clone(),
                done: Some(done),
                released: None,
                releases: None,
            });
        }
    }
    records
}

fn json<T: serde::Serialize>(path: &StatePath, value: &T) -> Result<Vec<u8>> {
    to_canonical_json(value).map_err(|source| {
        Error::Store(chipset_store::Error::Serialize {
            path: path.to_path_buf(),
            source,
        })
    })
}
