//! The crate's one error type.

use chipset_store::{AgentId, Classify, Corruption, ErrorKind, Unsupported};

use crate::format::Lease;

/// A specialized result for lease operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything a lease operation can fail with. Unless it says otherwise
/// ([`Error::PartlyReleased`], an unknown outcome), nothing was written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A path or glob cannot be leased.
    #[error("invalid lease path `{path}`: {reason}")]
    InvalidPath {
        /// The pattern as given (at most 80 characters of it).
        path: String,
        /// Why it is refused.
        reason: String,
    },
    /// A lease names no path.
    #[error("a lease must name at least one path")]
    NoPaths,
    /// A lease names more paths than [`MAX_PATHS`](crate::MAX_PATHS).
    #[error("a lease names {count} paths; at most {max} are allowed")]
    TooManyPaths {
        /// How many were given.
        count: usize,
        /// The bound.
        max: usize,
    },
    /// The TTL is outside [`MIN_TTL`](crate::MIN_TTL)..=[`MAX_TTL`](crate::MAX_TTL).
    #[error("a lease ttl of {ttl_ms} ms is outside {min_ms} ms ..= {max_ms} ms")]
    Ttl {
        /// The TTL given, in milliseconds.
        ttl_ms: u128,
        /// The smallest allowed.
        min_ms: u128,
        /// The largest allowed.
        max_ms: u128,
    },
    /// A reason is over [`MAX_REASON`](crate::MAX_REASON) bytes, or a forced
    /// release gave none.
    #[error("invalid lease reason: {0}")]
    Reason(&'static str),
    /// Live leases of other agents conflict; every one of them is listed.
    #[error("{} conflicting lease(s): {}", conflicts.len(), describe(conflicts))]
    Conflict {
        /// Every conflicting lease (holder, paths, expiry).
        conflicts: Vec<Lease>,
    },
    /// No lease holds this token any more: it was released, forced, or it
    /// expired and was pruned when another lease was granted. Renew refuses
    /// it, so a holder that lost its lease cannot extend it over a new holder.
    #[error("lease {token} is no longer held (released, forced, or expired and taken)")]
    Fenced {
        /// The token given.
        token: u64,
    },
    /// No lease was ever granted this token (it is 0, or not yet reached by
    /// the table's count): a mistyped token, never a lease that ended.
    #[error("no lease {token} was ever granted (the next token is {next})")]
    NeverGranted {
        /// The token given.
        token: u64,
        /// The token the next grant gets.
        next: u64,
    },
    /// The lease is held by another agent.
    #[error("lease {token} is held by `{holder}`, not `{agent}`")]
    NotHolder {
        /// The token given.
        token: u64,
        /// Its holder.
        holder: AgentId,
        /// The agent that asked.
        agent: AgentId,
    },
    /// The table would outgrow the state's read cap.
    #[error(
        "the lease table would be {size} bytes, over the {cap}-byte read cap; release leases first"
    )]
    TableFull {
        /// The size it would have.
        size: usize,
        /// The cap.
        cap: u64,
    },
    /// `leases/table.json` is corrupt: no decision can be made on it
    /// (fail closed); repair moves it aside.
    #[error("cannot {op}: {corruption}")]
    Corrupt {
        /// What was being done.
        op: &'static str,
        /// The bad file and why.
        corruption: Corruption,
    },
    /// The table was written by a newer program.
    #[error("cannot {op}: {unsupported}")]
    Unsupported {
        /// What was being done.
        op: &'static str,
        /// The file and what is unknown.
        unsupported: Unsupported,
    },
    /// A forced release could not mail its holder, so the lease was not
    /// released (the notice may be out when `error`'s outcome is unknown):
    /// retry the forced release.
    #[error("lease {} was not released: the mail telling `{}` failed", lease.token, lease.holder)]
    NoticeFailed {
        /// The lease that was to be released.
        lease: Box<Lease>,
        /// Why the mail failed.
        #[source]
        error: chipset_mail::Error,
    },
    /// A forced release mailed its holder, then failed to remove the lease
    /// (it may be removed when `source`'s outcome is unknown): retry the
    /// forced release, which finishes it without mailing again.
    #[error("lease {} was not released, though `{}` was told it was", lease.token, lease.holder)]
    PartlyReleased {
        /// The lease that was to be released.
        lease: Box<Lease>,
        /// Why the release failed.
        #[source]
        source: Box<Error>,
    },
    /// A filesystem operation failed; it names the operation and the path.
    #[error(transparent)]
    Store(#[from] chipset_store::Error),
    /// The storage backend failed (a PostgreSQL server, through
    /// [`Leases::with_backend`](crate::Leases::with_backend)); on a
    /// directory failures stay [`Error::Store`]. Boxed: the backend's error
    /// carries the value it found.
    #[error(transparent)]
    Backend(Box<chipset_backend::Error>),
}

impl Classify for Error {
    /// Classifies the failure. A write may have been made but not be known
    /// to be committed (the store's or the backend's outcome is unknown),
    /// or a forced release was partly done ([`Error::PartlyReleased`]): a
    /// retry of the same request finishes it and returns the first result.
    fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidPath { .. }
            | Error::NoPaths
            | Error::TooManyPaths { .. }
            | Error::Ttl { .. }
            | Error::Reason(_)
            | Error::NeverGranted { .. } => ErrorKind::Invalid,
            Error::Conflict { .. } | Error::NotHolder { .. } | Error::TableFull { .. } => {
                ErrorKind::Refused
            }
            Error::Fenced { .. } => ErrorKind::Stale,
            Error::Corrupt { .. } => ErrorKind::Corrupt,
            Error::Unsupported { .. } => ErrorKind::Unsupported,
            Error::PartlyReleased { .. } => ErrorKind::OutcomeUnknown,
            // The caller's request was sound: the notice it needed failed.
            Error::NoticeFailed { error, .. } => match error.kind() {
                ErrorKind::Invalid => ErrorKind::Refused,
                kind => kind,
            },
            Error::Store(e) => e.kind(),
            Error::Backend(e) => e.kind(),
        }
    }
}

fn describe(conflicts: &[Lease]) -> String {
    let parts: Vec<String> = conflicts
        .iter()
        .map(|l| {
            let paths: Vec<&str> = l.paths.iter().map(|p| p.as_str()).collect();
            format!(
                "`{}` holds {} {} until {} (lease {})",
                l.holder,
                l.mode.as_str(),
                paths.join(", "),
                l.expires_at,
                l.token
            )
        })
        .collect();
    parts.join("; ")
}
