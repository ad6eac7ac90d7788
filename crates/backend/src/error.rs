//! The seam's one error type.

use chipset_store::{Classify, ErrorKind};

use crate::seam::{Version, Versioned};

/// A boxed error from below the seam (the store, the PostgreSQL client).
pub type Source = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What can go wrong at the seam. Every variant names what was being done
/// and to what.
///
/// [`Error::OutcomeUnknown`] is the one a caller must treat differently:
/// the change may have been committed. Retry it with the same key and
/// value: a create or replace that already applied answers as the first
/// attempt did (see [`Backend`](crate::Backend), Retrying).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A channel, folder or name that is not a valid segment.
    #[error("invalid {kind} `{value}`: {rule}")]
    InvalidName {
        /// What it was ("channel", "folder", "name").
        kind: &'static str,
        /// The refused value.
        value: String,
        /// The rule it broke.
        rule: &'static str,
    },
    /// A value over [`MAX_VALUE`](crate::MAX_VALUE); nothing was written.
    #[error("value for `{key}` is {len} bytes, over the limit of {max}")]
    TooLarge {
        /// The key.
        key: String,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A log record that is not one JSON value; nothing was appended.
    #[error("record for log `{key}` is not one JSON value: {why}")]
    BadRecord {
        /// The log.
        key: String,
        /// Why.
        why: String,
    },
    /// A compare-and-swap found another version; nothing was written.
    /// When the value there is the one this call tried to write, the call
    /// is a retry of a swap that applied: see [`Error::already_holds`].
    #[error("`{key}` changed since it was read")]
    Conflict {
        /// The key.
        key: String,
        /// The value and version there now (`None`: nothing is there).
        current: Option<Versioned>,
    },
    /// A move whose destination already holds a value, or a create step of
    /// a transaction whose key holds one; nothing moved or created.
    #[error("`{key}` already holds a value")]
    Exists {
        /// The destination, or the key created.
        key: String,
        /// What it holds (`None`: it was removed since).
        current: Option<Versioned>,
    },
    /// A replace or move of a key that holds nothing.
    #[error("`{key}` holds nothing to replace")]
    NotFound {
        /// The key.
        key: String,
    },
    /// A value there but unreadable (a corrupt file, something that is not
    /// a file). Never "nothing there": the caller decides.
    #[error("`{key}` is unreadable: {reason}")]
    Corrupt {
        /// The key.
        key: String,
        /// Why, as the store says it of a file.
        reason: chipset_store::CorruptReason,
    },
    /// The change may or may not have been committed: a sync after the
    /// commit point failed, or the connection was lost while the server
    /// was committing. Retry with the same key and value.
    #[error("failed to {op} `{key}`: the outcome is unknown")]
    OutcomeUnknown {
        /// What was being done.
        op: &'static str,
        /// The key.
        key: String,
        /// What failed.
        #[source]
        source: Source,
    },
    /// A filesystem failure before any commit point: nothing changed.
    #[error("failed to {op} `{key}`")]
    Store {
        /// What was being done.
        op: &'static str,
        /// The key.
        key: String,
        /// The store's error.
        #[source]
        source: chipset_store::Error,
    },
    /// The server cannot be reached (refused, timed out, name unknown):
    /// nothing was sent.
    #[error("cannot reach the PostgreSQL server at {target}")]
    Unreachable {
        /// Host and port.
        target: String,
        /// The client's error.
        #[source]
        source: Source,
    },
    /// The server refused the login (wrong password, unknown role).
    #[error("the PostgreSQL server at {target} refused the login of `{user}`")]
    AuthFailed {
        /// Host and port.
        target: String,
        /// The role.
        user: String,
        /// The server's error.
        #[source]
        source: Source,
    },
    /// The database holds chipset's schema at a version newer than this
    /// binary knows: nothing was changed; upgrade chipset.
    #[error(
        "the database's chipset schema is version {found}, newer than this binary's {supported}: upgrade chipset"
    )]
    SchemaTooNew {
        /// The version in the database.
        found: i32,
        /// The newest this binary knows.
        supported: i32,
    },
    /// Connection settings that cannot be used.
    #[error("invalid connection settings: {why}")]
    Config {
        /// Why.
        why: String,
    },
    /// The server refused a statement, or the connection failed where
    /// nothing was changed (a read): safe to retry.
    #[error("failed to {op} `{key}` on PostgreSQL")]
    Server {
        /// What was being done.
        op: &'static str,
        /// The key.
        key: String,
        /// The client's error.
        #[source]
        source: Source,
    },
}

impl Classify for Error {
    /// Classifies the failure; only [`Error::OutcomeUnknown`] may have
    /// committed its change.
    fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidName { .. }
            | Error::TooLarge { .. }
            | Error::BadRecord { .. }
            | Error::Config { .. } => ErrorKind::Invalid,
            Error::Conflict { .. } => ErrorKind::Stale,
            Error::Exists { .. } => ErrorKind::Refused,
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::Corrupt { .. } => ErrorKind::Corrupt,
            Error::SchemaTooNew { .. } => ErrorKind::Unsupported,
            Error::OutcomeUnknown { .. } => ErrorKind::OutcomeUnknown,
            Error::Store { source, .. } => source.kind(),
            Error::Unreachable { .. } | Error::AuthFailed { .. } | Error::Server { .. } => {
                ErrorKind::Io
            }
        }
    }
}

impl Error {
    /// Returns the version when this is a [`Error::Conflict`] whose key
    /// holds `value` now: the retry of a replace that applied (after an
    /// [`Error::OutcomeUnknown`]) finds its own write there, and that is
    /// its first attempt's success. The swap itself stays strict: two
    /// writers that computed the same bytes from one version are one
    /// success and one conflict, never two successes.
    pub fn already_holds(&self, value: &[u8]) -> Option<Version> {
        match self {
            Error::Conflict {
                current: Some(now), ..
            } if now.value == value => Some(now.version),
            _ => None,
        }
    }

    /// Wraps a store error: its outcome-unknown stays one.
    pub(crate) fn store(op: &'static str, key: impl ToString, e: chipset_store::Error) -> Self {
        if e.is_outcome_unknown() {
            Error::OutcomeUnknown {
                op,
                key: key.to_string(),
                source: Box::new(e),
            }
        } else {
            Error::Store {
                op,
                key: key.to_string(),
                source: e,
            }
        }
    }
}

/// The seam's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
