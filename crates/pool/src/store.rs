//! The I/O layer: the table and the item files under the pool's lock, and
//! the claimers' hooks.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chipset_backend::Backend;
use chipset_hook::{Assignment, HookStatus, Hooks};
use chipset_store::{AgentId, Classify, Created, Listing, StateDir, StatePath};

use crate::claim::Want;
use crate::error::{Error, Result, cut_short};
use crate::format::{Entry, Item};
use crate::id::ItemId;
use crate::transition::{
    Hold, Index, Listed, NewItem, ReadyFilter, View, WorkState, check_dependencies,
};

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
#[must_use]
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

/// What one agent could claim now: [`Pool::claimable`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Claimable {
    /// The ready items the filter keeps, most urgent first, then oldest.
    pub ready: Vec<Entry>,
    /// When the first deferred item the filter keeps becomes ready (its
    /// `not_before`): no file changes then, so a wait for new work needs
    /// this deadline.
    pub next_ready_at: Option<chipset_store::Timestamp>,
}

/// What reading every hook found.
pub(crate) struct Scan {
    /// What each hook holds, by item.
    pub(crate) by_item: HashMap<ItemId, Hold>,
    /// What each hook holds, by agent.
    pub(crate) by_agent: HashMap<AgentId, Hold>,
    /// Hooks that could not be read (only when not strict).
    pub(crate) unreadable: Listing<()>,
}

/// The work pool under one state root: `pool/table.json` and
/// `pool/items/{id}.json`, and the hooks its items are claimed onto.
///
/// Cheap to clone. Every change takes the pool's lock
/// (`pool/.table.json.lock`, released by the kernel if the process dies),
/// so posts, claims, releases and dones are linearizable across threads and
/// processes. Reads take no lock. On a server ([`Pool::with_backend`])
/// each item is rows of its own and a claim locks only its item's row.
#[derive(Debug, Clone)]
pub struct Pool {
    pub(crate) state: StateDir,
    pub(crate) hooks: Hooks,
    /// The server of [`Pool::with_backend`]; `None` on a directory.
    pub(crate) seam: Option<Arc<dyn Backend>>,
}

impl Pool {
    /// Returns the pool of `state`. Creates nothing until the first post.
    pub fn new(state: StateDir) -> Self {
        let hooks = Hooks::new(state.clone());
        Pool {
            state,
            hooks,
            seam: None,
        }
    }

    /// Returns the pool on `backend`, its items claimed onto the hooks of
    /// [`Hooks::with_backend`] on the same backend.
    ///
    /// On a directory backend (one with a local state) this is
    /// [`Pool::new`] on that state: the files and their tuned code stay as
    /// they are. On a server (PostgreSQL, issue 30) each item is two rows,
    /// `pool/items/{id}.json` (the item, as its file) and
    /// `pool/entries/{id}.json` (its table entry and `format`): no table
    /// and no log. A claim is the backend's claim
    /// (`SELECT … FOR UPDATE SKIP LOCKED` on the entry's row) with the
    /// claimer's hook swapped in the same transaction; releases and dones
    /// are swaps of the entry's row; posts take the server's lock of
    /// `pool/table.json`; times are the server's clock. `state` is the
    /// local root, unused on a server.
    pub fn with_backend(state: StateDir, backend: Arc<dyn Backend>) -> Self {
        if let Some(local) = backend.local_state() {
            return Pool::new(local.clone());
        }
        let hooks = Hooks::with_backend(state.clone(), Arc::clone(&backend));
        Pool {
            state,
            hooks,
            seam: Some(backend),
        }
    }

    /// Returns the time the pool judges deferral by and stamps posts,
    /// dones and releases with: the state's clock on a directory, the
    /// server's on a server (so a `not_before` computed from it agrees
    /// across hosts).
    ///
    /// # Errors
    ///
    /// [`Error::Backend`] when the server cannot say the time.
    pub fn now(&self) -> Result<chipset_store::Timestamp> {
        match &self.seam {
            Some(seam) => Ok(seam.now()?),
            None => Ok(self.state.now()),
        }
    }

    /// Returns the state root.
    pub fn state(&self) -> &StateDir {
        &self.state
    }

    pub(crate) fn table_path(&self) -> StatePath {
        self.state.channel(Pool::CHANNEL).join_static("table.json")
    }

    pub(crate) fn log_path(&self) -> StatePath {
        self.state.channel(Pool::CHANNEL).join_static("log.jsonl")
    }

    pub(crate) fn item_path(&self, id: &ItemId) -> StatePath {
        self.state
            .channel(Pool::CHANNEL)
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
    /// names: not in the pool, and replaced by a retry of the post; a
    /// failure between removes them again).
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`], [`Error::BodyTooLarge`] (checked before anything
    /// is read); [`Error::IdTaken`]; [`Error::UnknownDependency`];
    /// [`Error::Cycle`]; [`Error::TableFull`]; a corrupt or unsupported
    /// table; a store error. On any of these no item of the batch is
    /// posted. [`Error::OutcomeUnknown`], naming the new items' ids
    /// (generated ones included), when they may have been posted: post
    /// them again with those ids ([`NewItem::with_id`]).
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
        let now = self.now()?;
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
        // An unknown outcome names the new items, generated ids included:
        // the caller's retry gives them (`NewItem::with_id`).
        let ids: Vec<ItemId> = fresh.iter().map(|i| i.id.clone()).collect();
        let cut = |e: Error| cut_short("posting", &ids, false, e);
        if let Some(seam) = &self.seam {
            return self
                .publish_rows(seam.as_ref(), by, &table, &fresh, results)
                .map_err(cut);
        }
        let mut files = Vec::with_capacity(fresh.len());
        for item in &fresh {
            let path = self.item_path(&item.id);
            files.push((path.clone(), json(&path, item)?));
        }
        self.state
            .ensure_dir(&self.state.channel(Pool::CHANNEL).join_static("items"))?;
        let created = self
            .state
            .create_new_batch(&files)
            .map_err(|e| cut(e.into()))?;
        let mut entries = Vec::with_capacity(fresh.len());
        for item in &fresh {
            let entry = Entry::of(item, table.next_seq);
            table.next_seq += 1;
            table.items.push(entry.clone());
            entries.push(entry);
        }
        let committed = files
            .iter()
            .zip(&created)
            // A file no table names: left by a post that crashed before its
            // commit point. It was never in the pool; this post replaces it.
            .filter(|(_, c)| **c == Created::AlreadyExists)
            .try_for_each(|((path, bytes), _)| Ok(self.state.write_bytes(path, bytes)?))
            .and_then(|()| self.write_table(&table));
        if let Err(e) = committed {
            if !e.is_outcome_unknown() {
                // Before the commit point: take back the files this post
                // made, so that a failed post leaves nothing behind.
                let made = files.iter().zip(&created);
                for ((path, _), _) in made.filter(|(_, c)| **c == Created::New) {
                    if let Err(e) = self.state.remove_file(path) {
                        tracing::warn!(error = %e, "a failed post left its item file");
                    }
                }
            }
            return Err(cut(e));
        }
        // The table now holds what the log recorded: start an empty log.
        // A crash in between leaves the log's records, which apply again
        // without changing anything.
        if logged > 0 {
            self.empty_log();
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
    /// might hold an item: fail closed; [`Pool::listing`] reads past it);
    /// a store error.
    pub fn list(&self) -> Result<Vec<Listed>> {
        let (table, _) = self.load("list work")?;
        let holds = self.holds("list the work on")?.0;
        let view = View {
            index: Index::new(&table),
            holds: &holds,
            now: self.now()?,
        };
        Ok(view.list())
    }

    /// Returns every item as [`Pool::list`] does, reading past the hooks
    /// it cannot read: they are named in the listing's `corrupt` and
    /// `unsupported`, beside the items, for a listing that shows what it
    /// read (`chipset work list`, the live views).
    ///
    /// Any unreadable hook might hold any item. So while one is named, an
    /// item that is neither recorded done nor on a readable hook is listed
    /// as the table and the readable hooks give it (ready, blocked or
    /// deferred) with [`Listed::unconfirmed`] set: it may be claimed or
    /// done. A claimed item, and a done one, is confirmed by the hook or
    /// the record that says so. Claims still fail on such a hook.
    ///
    /// # Errors
    ///
    /// A corrupt or unsupported table or log; a store error.
    pub fn listing(&self) -> Result<Listing<Listed>> {
        self.listing_as("list work", "list the work on")
    }

    /// [`Pool::listing`], its failures naming `op` (the table's read) and
    /// `hooks_op` (the hooks').
    fn listing_as(&self, op: &'static str, hooks_op: &'static str) -> Result<Listing<Listed>> {
        let (table, _) = self.load(op)?;
        let Scan {
            by_item: holds,
            unreadable,
            ..
        } = self.scan_hooks(hooks_op, false)?;
        let view = View {
            index: Index::new(&table),
            holds: &holds,
            now: self.now()?,
        };
        let mut items = view.list();
        if unreadable.unreadable().next().is_some() {
            for l in &mut items {
                l.unconfirmed = matches!(
                    l.state,
                    WorkState::Ready | WorkState::Blocked { .. } | WorkState::Deferred { .. }
                );
            }
        }
        let mut listing = Listing::default();
        listing.items = items;
        listing.corrupt = unreadable.corrupt;
        listing.unsupported = unreadable.unsupported;
        Ok(listing)
    }

    /// Returns the ready items `filter` keeps, most urgent first, then oldest.
    ///
    /// # Errors
    ///
    /// As [`Pool::list`].
    pub fn ready(&self, filter: &ReadyFilter) -> Result<Vec<Listed>> {
        let (table, _) = self.load("list ready work")?;
        let holds = self.holds("list the ready work on")?.0;
        let view = View {
            index: Index::new(&table),
            holds: &holds,
            now: self.now()?,
        };
        Ok(view
            .ready(filter)
            .into_iter()
            .map(|e| Listed {
                entry: e.clone(),
                state: WorkState::Ready,
                unconfirmed: false,
            })
            .collect())
    }

    /// Returns what `agent` could claim now with `filter`, or `None` when
    /// a claim would take nothing new: its hook holds work pending or
    /// active, or completed work that is not a pool item (a claim is
    /// refused until it is cleared). A hook that is missing, empty or holds
    /// a completed pool item (which the claim records done) is free.
    ///
    /// For an agent's brief: reads the table, the log and every hook, and
    /// writes nothing.
    ///
    /// # Errors
    ///
    /// As [`Pool::list`].
    pub fn claimable(&self, agent: &AgentId, filter: &ReadyFilter) -> Result<Option<Claimable>> {
        const OP: &str = "list claimable work";
        let (table, _) = self.load(OP)?;
        let (holds, by_agent) = self.holds("list the claimable work on")?;
        let view = View {
            index: Index::new(&table),
            holds: &holds,
            now: self.now()?,
        };
        if let Some(mine) = by_agent.get(agent) {
            let id = ItemId::of_bead(&mine.assignment.work.bead_id);
            if mine.status != HookStatus::Completed || view.index.get(&id).is_none() {
                return Ok(None);
            }
        }
        let next_ready_at = table
            .items
            .iter()
            .filter(|e| filter.keeps(e))
            .filter_map(|e| match view.state(e) {
                WorkState::Deferred { until } => Some(until),
                _ => None,
            })
            .min();
        let ready = view.ready(filter).into_iter().cloned().collect();
        Ok(Some(Claimable {
            ready,
            next_ready_at,
        }))
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
        let listing = self.listing_as("count work", "count work")?;
        let mut counts = PoolCounts {
            unreadable_hooks: listing.unreadable().count(),
            ..PoolCounts::default()
        };
        for l in &listing.items {
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
    /// ready: `agent`'s hook is left as it is.
    ///
    /// When `agent`'s hook holds a pool item it completed, a claim that
    /// takes an item first records that one done and clears the hook
    /// ([`Claimed::finished`]). With nothing ready the completed item stays
    /// on the hook (it reads done, and the pool records it done).
    /// When it holds a pool item still pending or active, that item is
    /// returned with `existing` set and nothing changes: a retry after a
    /// failure returns the first claim.
    ///
    /// **Commit point:** the rename of `agent`'s hook file. The pool keeps no
    /// separate claim record: an item is claimed exactly when a hook holds
    /// it, so a crash at any point leaves it on one hook or on none. The
    /// claim is decided before anything is written: a refused claim
    /// changes nothing, and one that finds nothing ready writes only the
    /// done records of completed items. Then come those records, the
    /// claimer's finished item off its hook, and the assignment.
    ///
    /// # Errors
    ///
    /// [`Error::HookBusy`] when `agent`'s hook holds work that is not a
    /// pool item (or is the pool item's completed work awaiting another
    /// clear); [`Error::Hook`] when any hook is corrupt or unsupported;
    /// a corrupt or unsupported table; a store error;
    /// [`Error::OutcomeUnknown`] when a step failed after an earlier one
    /// wrote, or the assignment's outcome is unknown (claim again). On a
    /// server the swap of the claimer's hook that assigns the item also
    /// clears its completed one, so a try whose candidates were taken
    /// meanwhile has changed nothing; only a finished item whose hook was
    /// not completed is cleared first, and a later try's refusal or
    /// failure, or its finding every candidate taken
    /// ([`Error::FinishedNothingClaimed`] as the source), is then
    /// [`Error::OutcomeUnknown`] naming that item.
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
}

pub(crate) fn json<T: serde::Serialize>(path: &StatePath, value: &T) -> Result<Vec<u8>> {
    StateDir::to_canonical_json(value).map_err(|source| {
        Error::Store(chipset_store::Error::Serialize {
            path: path.to_path_buf(),
            source,
        })
    })
}
