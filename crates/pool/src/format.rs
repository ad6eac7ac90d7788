//! The on-disk contract: `pool/items/{id}.json` (one item, written once)
//! and `pool/table.json` (the pool's index and its done and release
//! records).

use chipset_store::{AgentId, Timestamp};
use serde::{Deserialize, Serialize};

use crate::id::ItemId;

/// The format of the item files and the table this version writes and reads.
pub const POOL_FORMAT: u32 = 1;

/// One posted item, as in `pool/items/{id}.json`. Written once, when it is
/// posted, and never changed: its state lives in the table and on the hooks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Item {
    /// [`POOL_FORMAT`]; a larger one is unsupported.
    pub format: u32,
    /// The id.
    pub id: ItemId,
    /// One line saying what to do.
    pub title: String,
    /// The details.
    pub body: String,
    /// Free labels, sorted, without duplicates.
    pub labels: Vec<String>,
    /// 0 (most urgent) ..= 4; claims take the lowest first.
    pub priority: u8,
    /// Items that must be done before this one is ready.
    pub depends_on: Vec<ItemId>,
    /// Not ready before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<Timestamp>,
    /// Only agents claiming for this role (or for no role) see it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Who posted it.
    pub posted_by: AgentId,
    /// When.
    pub posted_at: Timestamp,
}

impl Item {
    /// Returns true when `other` is the same request: every field but the
    /// posting time. A retry of a post is recognised by this.
    pub(crate) fn same_request(&self, other: &Item) -> bool {
        self.id == other.id
            && self.title == other.title
            && self.body == other.body
            && self.labels == other.labels
            && self.priority == other.priority
            && self.depends_on == other.depends_on
            && self.not_before == other.not_before
            && self.role == other.role
            && self.posted_by == other.posted_by
    }
}

/// Who marked an item done, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DoneRecord {
    /// The agent that held it.
    pub by: AgentId,
    /// When the pool recorded it.
    pub at: Timestamp,
}

/// The last time an item was returned to the pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ReleaseRecord {
    /// Who returned it: its holder, or a witness that judged the holder stalled.
    pub by: AgentId,
    /// Whose hook it was taken from.
    pub holder: AgentId,
    /// When.
    pub at: Timestamp,
    /// Why.
    pub reason: String,
}

/// One item's line in the table: what `ready`, `claim` and `list` need,
/// without the body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Entry {
    /// The id.
    pub id: ItemId,
    /// The posting order: the age tie-breaker within a priority.
    pub seq: u64,
    /// The title.
    pub title: String,
    /// The priority, 0 ..= 4.
    pub priority: u8,
    /// The labels.
    pub labels: Vec<String>,
    /// The role it is for, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Its dependencies.
    pub depends_on: Vec<ItemId>,
    /// Not ready before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<Timestamp>,
    /// When it was posted.
    pub posted_at: Timestamp,
    /// Set once the pool recorded it done; final.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done: Option<DoneRecord>,
    /// The last return to the pool, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released: Option<ReleaseRecord>,
    /// How many times it was returned to the pool.
    #[serde(default)]
    pub releases: u32,
}

impl Entry {
    pub(crate) fn of(item: &Item, seq: u64) -> Entry {
        Entry {
            id: item.id.clone(),
            seq,
            title: item.title.clone(),
            priority: item.priority,
            labels: item.labels.clone(),
            role: item.role.clone(),
            depends_on: item.depends_on.clone(),
            not_before: item.not_before,
            posted_at: item.posted_at,
            done: None,
            released: None,
            releases: 0,
        }
    }
}

/// One line of `pool/log.jsonl`: a done or a release recorded since the
/// table was last written. Applying a record twice changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Record {
    /// The item.
    pub(crate) id: ItemId,
    /// Set for a done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) done: Option<DoneRecord>,
    /// Set for a release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) released: Option<ReleaseRecord>,
    /// With a release: the item's release count after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) releases: Option<u32>,
}

impl Record {
    /// Applies the record to its entry: a done is kept once, a release
    /// only if it is newer than the one the entry holds.
    pub(crate) fn apply(&self, entry: &mut Entry) {
        if let Some(done) = &self.done
            && entry.done.is_none()
        {
            entry.done = Some(done.clone());
        }
        if let (Some(released), Some(n)) = (&self.released, self.releases)
            && n > entry.releases
        {
            entry.released = Some(released.clone());
            entry.releases = n;
        }
    }
}

/// The whole of `pool/table.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Table {
    /// [`POOL_FORMAT`].
    pub(crate) format: u32,
    /// The `seq` the next posted item gets.
    pub(crate) next_seq: u64,
    /// Every posted item, in posting order.
    pub(crate) items: Vec<Entry>,
}

impl Table {
    pub(crate) fn empty() -> Self {
        Table {
            format: POOL_FORMAT,
            next_seq: 1,
            items: Vec::new(),
        }
    }
}
