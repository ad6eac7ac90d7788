//! The crate's one error type.

use chipset_store::{AgentId, Classify, Corruption, ErrorKind, Unsupported};

use crate::id::ItemId;
use crate::transition::WorkState;

/// A specialized result for pool operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything a pool operation can fail with. Unless it says otherwise,
/// nothing was written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A field of a new item, a reason or a filter is not acceptable.
    #[error("invalid {field}: {reason}")]
    Invalid {
        /// Which field.
        field: &'static str,
        /// Why.
        reason: String,
    },
    /// The body is over [`MAX_BODY`](crate::MAX_BODY) bytes.
    #[error("the body is {size} bytes; at most {max} are allowed")]
    BodyTooLarge {
        /// Its size.
        size: usize,
        /// The bound.
        max: usize,
    },
    /// An item depends on an item that was never posted.
    #[error("item `{id}` depends on `{dependency}`, which is not in the pool")]
    UnknownDependency {
        /// The item being posted.
        id: ItemId,
        /// The unknown dependency.
        dependency: ItemId,
    },
    /// The dependencies would form a cycle; it is listed, first item last again.
    #[error("dependency cycle: {}", ids.iter().map(ItemId::as_str).collect::<Vec<_>>().join(" -> "))]
    Cycle {
        /// The cycle.
        ids: Vec<ItemId>,
    },
    /// An item with this id was posted with other content.
    #[error("item `{id}` was already posted with other content")]
    IdTaken {
        /// The id.
        id: ItemId,
    },
    /// No item has this id.
    #[error("no item `{id}` in the pool")]
    NotFound {
        /// The id.
        id: ItemId,
    },
    /// The item is done: it cannot be claimed or released.
    #[error("item `{id}` is done")]
    AlreadyDone {
        /// The id.
        id: ItemId,
    },
    /// The item cannot be claimed now: it is on a hook, blocked or deferred.
    #[error("item `{id}` is {}", describe(state))]
    NotReady {
        /// The id.
        id: ItemId,
        /// Where it is.
        state: WorkState,
    },
    /// The claimer's hook holds other work: finish it first.
    #[error("the hook of `{agent}` holds `{bead}`; finish or release it before claiming")]
    HookBusy {
        /// The claimer.
        agent: AgentId,
        /// What its hook holds.
        bead: String,
    },
    /// The item is not on this agent's hook (releasing or finishing another
    /// agent's item, or one nobody holds).
    #[error("item `{id}` is not on the hook of `{agent}`{}", holder.as_ref().map(|h| format!(" (`{h}` holds it)")).unwrap_or_default())]
    NotHolder {
        /// The id.
        id: ItemId,
        /// The agent that asked.
        agent: AgentId,
        /// Its holder, if any.
        holder: Option<AgentId>,
    },
    /// The table would outgrow [`TABLE_CAP`](crate::TABLE_CAP).
    #[error("the pool table would be {size} bytes, over the {cap}-byte cap")]
    TableFull {
        /// The size it would have.
        size: usize,
        /// The cap.
        cap: u64,
    },
    /// A pool file is corrupt: no decision is made on it (fail closed).
    #[error("cannot {op}: {corruption}")]
    Corrupt {
        /// What was being done.
        op: &'static str,
        /// The bad file and why.
        corruption: Corruption,
    },
    /// A pool file was written by a newer program.
    #[error("cannot {op}: {unsupported}")]
    Unsupported {
        /// What was being done.
        op: &'static str,
        /// The file and what is unknown.
        unsupported: Unsupported,
    },
    /// The operation made a durable change and then failed, or failed
    /// past its commit point: its change may have been made, in whole or
    /// in part (a post whose table's sync failed; a claim that recorded
    /// done items or cleared the claimer's finished one, then could not
    /// assign or found nothing left to claim; a release that recorded
    /// its reason, then could not empty the hook; a done recorded whose
    /// hook was not cleared). Retry the same request, a post with these
    /// ids ([`NewItem::with_id`](crate::NewItem::with_id), its generated ids
    /// included): the retry returns what the first attempt did, says
    /// `existing` when it had applied, and finishes what it left.
    #[error("{op} {} may have taken effect", join(ids))]
    OutcomeUnknown {
        /// What was being done: `posting`, `claiming`, `releasing`,
        /// `finishing` or `returning`.
        op: &'static str,
        /// The items it may have changed: a post's new items; the item a
        /// claim may have taken (when it was chosen) and the finished item
        /// it recorded; the item released, finished or returned.
        ids: Vec<ItemId>,
        /// What failed.
        #[source]
        source: Box<Error>,
    },
    /// A claim on a server recorded the claimer's finished item done and
    /// cleared its hook (one the pool records done that was not
    /// completed: a completed hook is cleared by the swap that assigns
    /// the next item), then found nothing left to claim: other claims
    /// took every candidate meanwhile. It comes as the source of an
    /// [`Error::OutcomeUnknown`] naming the finished item, which is done
    /// (a claim that takes work reports it in
    /// [`Claimed::finished`](crate::Claimed::finished)). Claiming again
    /// is safe: the hook is free.
    #[error(
        "the claim recorded `{finished}` done and cleared it from the hook of `{agent}`, then found nothing left to claim: other claims took every ready item"
    )]
    FinishedNothingClaimed {
        /// The claimer.
        agent: AgentId,
        /// The item it had finished.
        finished: ItemId,
    },
    /// A hook could not be read or changed. A corrupt hook fails every
    /// claim: it might hold an item, and guessing could claim it twice.
    #[error(transparent)]
    Hook(#[from] chipset_hook::Error),
    /// A filesystem operation failed; it names the operation and the path.
    #[error(transparent)]
    Store(#[from] chipset_store::Error),
    /// The server of [`Pool::with_backend`](crate::Pool::with_backend)
    /// failed, or its outcome is unknown (a cut commit: retry with the
    /// same ids; see [`Classify`]).
    #[error(transparent)]
    Backend(Box<chipset_backend::Error>),
}

impl From<chipset_backend::Error> for Error {
    fn from(e: chipset_backend::Error) -> Self {
        match e {
            // A directory's failures stay the store's.
            chipset_backend::Error::Store { source, .. } => Error::Store(source),
            e => Error::Backend(Box::new(e)),
        }
    }
}

impl Classify for Error {
    /// Classifies the failure. A write may have been made but not be known
    /// to be committed (the pool's, the store's, the hook's or the
    /// backend's outcome is unknown): retrying with the same id is safe.
    fn kind(&self) -> ErrorKind {
        match self {
            Error::Invalid { .. }
            | Error::BodyTooLarge { .. }
            | Error::UnknownDependency { .. }
            | Error::Cycle { .. } => ErrorKind::Invalid,
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::IdTaken { .. }
            | Error::AlreadyDone { .. }
            | Error::NotReady { .. }
            | Error::HookBusy { .. }
            | Error::NotHolder { .. }
            | Error::TableFull { .. } => ErrorKind::Refused,
            Error::Corrupt { .. } => ErrorKind::Corrupt,
            Error::Unsupported { .. } => ErrorKind::Unsupported,
            // A change was made that no result reports.
            Error::OutcomeUnknown { .. } | Error::FinishedNothingClaimed { .. } => {
                ErrorKind::OutcomeUnknown
            }
            Error::Hook(e) => e.kind(),
            Error::Store(e) => e.kind(),
            Error::Backend(e) => e.kind(),
        }
    }
}

/// Returns `e` as [`Error::OutcomeUnknown`] of `op` on `ids` when the
/// operation `wrote` a durable change before it failed, or when `e` says
/// the outcome is unknown (to name the items); otherwise as it is.
pub(crate) fn cut_short(op: &'static str, ids: &[ItemId], wrote: bool, e: Error) -> Error {
    match e {
        e @ Error::OutcomeUnknown { .. } => e,
        e if wrote || e.is_outcome_unknown() => Error::OutcomeUnknown {
            op,
            ids: ids.to_vec(),
            source: Box::new(e),
        },
        e => e,
    }
}

fn join(ids: &[ItemId]) -> String {
    if ids.is_empty() {
        return "work".to_owned();
    }
    ids.iter()
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn describe(state: &WorkState) -> String {
    match state {
        WorkState::Ready => "ready".to_owned(),
        WorkState::Deferred { until } => format!("deferred until {until}"),
        WorkState::Blocked { on } => format!(
            "blocked on {}",
            on.iter()
                .map(|i| format!("`{i}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        WorkState::Claimed { holder, hook } => format!("claimed by `{holder}` ({hook})"),
        WorkState::Done { by, .. } => format!("done by `{by}`"),
    }
}
