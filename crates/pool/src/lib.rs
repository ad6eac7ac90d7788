//! The work pool: items that agents claim themselves, each exactly once,
//! onto their hook.
//!
//! ```
//! use chipset_pool::{NewItem, Pool, ReadyFilter, WorkState};
//! use chipset_hook::Hooks;
//! use chipset_store::{AgentId, StateDir};
//!
//! let tmp = tempfile::tempdir()?;
//! let state = StateDir::open(tmp.path())?;
//! let pool = Pool::new(state.clone());
//! let (lead, alice) = (AgentId::new("lead")?, AgentId::new("alice")?);
//!
//! // The lead posts two items; the second waits for the first.
//! let schema = pool.post(&lead, &NewItem::new("Design the schema").with_priority(1))?.entry;
//! let api = NewItem::new("Write the API").with_depends_on([schema.id.clone()]);
//! let api = pool.post(&lead, &api)?.entry;
//! assert_eq!(pool.ready(&ReadyFilter::new())?.len(), 1);
//!
//! // Alice claims the next ready item: it is on her hook, in one step.
//! let claimed = pool.claim_next(&alice, &ReadyFilter::new())?.expect("one is ready");
//! assert_eq!(claimed.entry.id, schema.id);
//! let hooks = Hooks::new(state);
//! assert_eq!(hooks.current(&alice)?.as_ref(), Some(&claimed.assignment));
//!
//! // She works it through her hook; completing it marks it done.
//! let work = hooks.activate(&claimed.assignment).map(|_| claimed.assignment.clone())?;
//! hooks.complete(&work)?;
//! assert!(matches!(pool.get(&schema.id)?.state, WorkState::Done { .. }));
//!
//! // Her next claim records it, clears her hook and takes the next item.
//! let next = pool.claim_next(&alice, &ReadyFilter::new())?.expect("the API is ready now");
//! assert_eq!((next.entry.id, next.finished), (api.id.clone(), Some(schema.id)));
//!
//! // She gives it back with a reason; it is ready again.
//! pool.release(&alice, &api.id, "blocked on credentials")?;
//! assert_eq!(pool.ready(&ReadyFilter::new())?[0].entry.id, api.id);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Items and their states
//!
//! An [`Item`] has an id ([`ItemId`], the caller's or a fresh `w-…`), a
//! title, a body, labels, a priority (0, most urgent, ..= [`MAX_PRIORITY`]),
//! optional dependencies (`depends_on`, other items) and deferral
//! (`not_before`, a time), and an optional role. Its state
//! ([`WorkState`]) is derived, never stored as such:
//!
//! | state | when |
//! |---|---|
//! | done | the table records it done, or its holder's hook shows it completed |
//! | claimed | a hook holds it, pending or active |
//! | blocked | a dependency is not done |
//! | deferred | its `not_before` is in the future |
//! | ready | otherwise |
//!
//! [`Pool::ready`] lists the ready items by priority, then age (posting
//! order); a [`ReadyFilter`] keeps items carrying given labels and, for an
//! agent of a role, the items for that role or for none.
//!
//! # Claiming: the hook is the commit point
//!
//! [`Pool::claim_next`] and [`Pool::claim`] put the item on the claimer's
//! hook (pending, `assigned_by` the claimer) with one hook assignment. The
//! pool keeps no claim record of its own: an item is claimed exactly when a
//! hook holds it. So there is no moment, and no crash, at which an item is
//! claimed in the pool but on no hook, or on a hook but free in the pool.
//! Claims run under the pool's lock and each reads every hook before it
//! assigns, so two claimers never take one item: of eight processes
//! draining a pool, each item lands on exactly one hook.
//!
//! The agent works the item through its hook (`pickup`, `touch`,
//! `complete`, from the library or `chipset hook`). A completed hook marks
//! the item done at once for every reader; the table records it at the
//! next claim by anyone, or at [`Pool::done`], and the claimer's own
//! completed hook is cleared by its next claim that takes an item (one
//! that finds nothing ready leaves it). [`Pool::done`] finishes an
//! item in one call from any hook state. [`Pool::release`] gives an item
//! back with a reason; [`Pool::return_stalled`] does it for a witness that
//! judged the holder stalled.
//!
//! A hook cleared or reassigned outside the pool before the pool recorded
//! its item done puts the item back in the pool: the pool cannot tell a
//! finished item from one taken away, and doing work twice is the safer
//! mistake. Finish pool items with `done` or a next claim, not with a
//! dispatcher's `hook clear`.
//!
//! A corrupt or unsupported hook fails every claim and every other read
//! with [`Error::Hook`] (it might hold an item; guessing could claim it
//! twice) until `chipset doctor --fix` repairs it. Only [`Pool::listing`],
//! for a display, reads past it: every item, the hooks it could not read,
//! and each item such a hook might hold marked [`Listed::unconfirmed`].
//!
//! # File layout and durability
//!
//! - `pool/items/{id}.json`: one [`Item`], canonical JSON, written once at
//!   posting (the body lives only here);
//! - `pool/table.json`: `format`, `next_seq` and `items`, one [`Entry`]
//!   per posted item in posting order (id, seq, title, priority, labels,
//!   role, depends_on, not_before, posted_at, `releases`, and once known
//!   `done` `{by, at}` and `released` `{by, holder, at, reason}`);
//! - `pool/log.jsonl`: the dones and releases since the table was last
//!   written, one canonical line each (`id` with `done`, or with
//!   `released` and `releases`, the count after it). Readers apply it to
//!   the table; applying a line twice changes nothing. A post folds it into
//!   the table it writes, then empties it; so does a claim, release or done
//!   that would bring it to a quarter of the items (at least 16 records),
//!   so the log stays short in a pool that only sees claims and dones;
//! - `pool/.table.json.lock`: the pool's kernel lock, held by every change.
//!
//! Every write is a durable replace, publish or append of the store. A
//! post writes the item files, then the table (its commit point); a crash
//! between leaves item files no table names, which are not in the pool and
//! which a retry of the post replaces. A claim's one write is the hook
//! assignment. A release appends its reason to the log, then empties the
//! hook (commit point); [`Pool::done`] appends the done (commit point),
//! then clears the hook. When a change folds the log, its record is the
//! rewritten table instead of the append (then the log is emptied; a crash
//! between leaves records the table already holds, which apply again
//! without changing anything). A process killed at any point leaves every file
//! whole (a torn last log line is an append that never committed), every
//! item on at most one hook, and a pool that the next call finishes
//! converging. A bad line inside the log fails every operation closed.
//!
//! # On a server
//!
//! [`Pool::with_backend`] puts the pool on PostgreSQL (issue 30), its
//! items claimed onto the hooks of `Hooks::with_backend` on the same
//! server. There each item is two rows, `pool/items/{id}.json` (the item
//! file's bytes) and `pool/entries/{id}.json` (its [`Entry`] and
//! `format`): no table, no log, no value that grows with the pool. A
//! claim is the backend's claim: the entry's row taken with
//! `FOR UPDATE SKIP LOCKED`, the decision (the entry not done, no hook
//! holding the item, the claimer's hook free) read inside the
//! transaction, and the claimer's hook swapped in it, so claimers on
//! different hosts never take one item and never wait on each other. A
//! done or release is a compare-and-swap of the entry's row; a post
//! creates its items' rows in one transaction under the server's lock of
//! `pool/table.json`. Times are the server's clock ([`Pool::now`]), and
//! [`Pool::watch`] wakes on any change through the server's
//! notifications. On a directory backend `with_backend` is [`Pool::new`].
//!
//! # Doctor
//!
//! [`Pool::doctor`] checks, under the pool's lock, that the table and the
//! log read, that the item files agree with the table (none missing,
//! changed or orphaned by a post cut short) and that no hook holds an
//! item twice or after it was done. With a fix it rebuilds a corrupt or
//! lost table from the item files, the log and the hooks, folds a log
//! with a bad line into the table and moves it aside, moves orphans aside
//! and clears hooks still holding done items; `chipset doctor` runs it as
//! its `pool` area.
//!
//! # Retries
//!
//! A post with the caller's id and the same content returns the first
//! result ([`Posted::existing`]); with other content it is
//! [`Error::IdTaken`]. A claim by an agent whose hook holds a pool item
//! pending or active returns that item ([`Claimed::existing`]). Release and
//! done again after they applied return [`Settled::existing`].
//!
//! A failure is plain, and then nothing a reader sees changed (a post
//! takes back the item files it wrote; a first write may leave `pool/`,
//! `pool/items/` or `hooks/` holding only a lock file), or it is
//! [`Error::OutcomeUnknown`] (`Classify::is_outcome_unknown`, as
//! for the store's and the hooks' unknown outcomes): it failed past a
//! commit point, or after an earlier step wrote (a claim that recorded
//! done items or cleared the claimer's finished one, a release that
//! recorded its reason, a done whose hook was not cleared). Retry the
//! same request: it returns what the first attempt did and finishes what
//! it left. A post without an id is retried with the ids the error names
//! ([`NewItem::with_id`]); without them it would post again. Emptying the
//! log after a fold is follow-up: its failure is logged, not returned, as
//! the records left apply again without changing anything.
//!
//! # Bounds and errors
//!
//! Titles up to [`MAX_TITLE`] bytes, bodies up to [`MAX_BODY`], at most
//! [`MAX_LABELS`] labels and [`MAX_DEPENDENCIES`] dependencies, labels and
//! roles up to [`MAX_LABEL_LEN`] bytes, reasons up to [`MAX_REASON`]; the
//! table is read with a cap of [`TABLE_CAP`]. Bad input (an unknown
//! dependency, a cycle, an empty title, a bad id, a too-large body, a
//! claim of a done or claimed item, a release of another agent's item) is
//! a typed [`Error`] and writes nothing: a claim decides before it
//! records or clears anything.

#![forbid(unsafe_code)]

mod claim;
mod doctor;
mod error;
mod files;
mod format;
mod id;
mod rows;
mod server;
mod settle;
mod store;
mod transition;

pub use error::{Error, Result};
pub use format::{DoneRecord, Entry, Item, POOL_FORMAT, ReleaseRecord};
pub use id::ItemId;
pub use rows::{entry_row, table_file};
pub use store::{Claimable, Claimed, Pool, PoolCounts, Posted, Settled};
pub use transition::{Listed, NewItem, ReadyFilter, WorkState};

impl Pool {
    /// The pool's directory under the state root: `pool/`.
    pub const CHANNEL: chipset_store::Channel = chipset_store::Channel::new("pool");
}

/// The priority of an item whose request names none.
pub const DEFAULT_PRIORITY: u8 = 2;
/// The largest (least urgent) priority.
pub const MAX_PRIORITY: u8 = 4;
/// The longest title accepted, in bytes.
pub const MAX_TITLE: usize = 256;
/// The largest body accepted, in bytes.
pub const MAX_BODY: usize = 64 * 1024;
/// The most labels one item may carry.
pub const MAX_LABELS: usize = 16;
/// The longest label or role, in bytes.
pub const MAX_LABEL_LEN: usize = 64;
/// The most dependencies one item may name.
pub const MAX_DEPENDENCIES: usize = 64;
/// The longest release reason, in bytes.
pub const MAX_REASON: usize = 1024;
/// The largest table read or written: 32 MiB (about 100,000 items).
pub const TABLE_CAP: u64 = 32 * 1024 * 1024;
