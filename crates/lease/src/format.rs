//! The on-disk contract: `leases/table.json`, one canonical JSON file that
//! holds every recorded lease and the next fencing token.

use chipset_store::{AgentId, Timestamp};
use serde::{Deserialize, Serialize};

use crate::pattern::LeasePath;

/// The table format this version writes and reads.
pub const TABLE_FORMAT: u32 = 1;

/// Whether a lease lets other agents lease overlapping paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum LeaseMode {
    /// No other agent may hold an overlapping lease of either mode.
    Exclusive,
    /// Other agents may hold overlapping shared leases, never exclusive ones.
    Shared,
}

impl LeaseMode {
    /// Returns the name as written on disk (`exclusive`, `shared`).
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseMode::Exclusive => "exclusive",
            LeaseMode::Shared => "shared",
        }
    }
}

/// One granted lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Lease {
    /// The fencing token: unique, and larger than every token granted before.
    pub token: u64,
    /// The agent holding it.
    pub holder: AgentId,
    /// Exclusive or shared.
    pub mode: LeaseMode,
    /// The leased paths and globs, relative to the project root.
    pub paths: Vec<LeasePath>,
    /// Why the holder took it.
    pub reason: String,
    /// When it was granted.
    pub acquired_at: Timestamp,
    /// When it was last granted or renewed.
    pub renewed_at: Timestamp,
    /// When it stops blocking anyone.
    pub expires_at: Timestamp,
}

impl Lease {
    /// Returns true while the lease blocks others: before its expiry.
    pub fn is_live(&self, now: Timestamp) -> bool {
        now < self.expires_at
    }

    /// Returns true when this lease and `other`, held by different agents,
    /// cannot both be held: a pattern of one overlaps a pattern of the
    /// other ([`LeasePath::overlaps`]) and at least one is exclusive.
    pub fn conflicts_with(&self, other: &Lease) -> bool {
        self.holder != other.holder
            && (self.mode == LeaseMode::Exclusive || other.mode == LeaseMode::Exclusive)
            && self
                .paths
                .iter()
                .any(|a| other.paths.iter().any(|b| a.overlaps(b)))
    }
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Table {
    /// [`TABLE_FORMAT`]; a larger one is unsupported.
    pub(crate) format: u32,
    /// The token the next grant gets; never decreases.
    pub(crate) next_token: u64,
    /// Every recorded lease, in token order.
    pub(crate) leases: Vec<Lease>,
}

impl Table {
    pub(crate) fn empty() -> Self {
        Table {
            format: TABLE_FORMAT,
            next_token: 1,
            leases: Vec::new(),
        }
    }
}
