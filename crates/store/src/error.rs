use std::io;
use std::path::{Path, PathBuf};

use crate::read::{Corruption, Unsupported};

/// A specialized result for store operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in `chipset-store`.
///
/// Every variant that touches the filesystem names the path, and I/O failures
/// name the operation, so a message reads "failed to rename `a` to `b`".
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An I/O operation on one path failed.
    #[error("failed to {op} `{path}`")]
    Io {
        /// What was being done, as a verb phrase ("open", "sync directory").
        op: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Renaming or linking one path to another failed.
    #[error("failed to {op} `{from}` to `{to}`")]
    Rename {
        /// What was being done ("rename", "move", "link").
        op: &'static str,
        /// The source path.
        from: PathBuf,
        /// The destination path.
        to: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A no-clobber operation found its destination taken; nothing was overwritten.
    #[error("`{path}` already exists")]
    AlreadyExists {
        /// The destination that exists.
        path: PathBuf,
    },
    /// An operation that needs an existing file found none.
    #[error("`{path}` does not exist")]
    NotFound {
        /// The missing path.
        path: PathBuf,
    },
    /// A symlink stands where a state file or directory is expected; it is not followed.
    #[error("refusing to follow symlink `{path}` inside the state root")]
    Symlink {
        /// The symlink.
        path: PathBuf,
    },
    /// Something other than a directory stands where a directory is expected.
    #[error("`{path}` is not a directory")]
    NotADirectory {
        /// The offending path.
        path: PathBuf,
    },
    /// A path that should lie inside the state root does not.
    #[error("`{path}` is outside the state root `{root}`")]
    OutsideRoot {
        /// The offending path.
        path: PathBuf,
        /// The state root.
        root: PathBuf,
    },
    /// A value was refused as an id (it would be unsafe as a path segment).
    #[error("invalid {kind} {value:?}: {rule}")]
    InvalidId {
        /// Which kind of id ("agent id", "task id", …).
        kind: &'static str,
        /// The refused value.
        value: String,
        /// The rule it broke.
        rule: &'static str,
    },
    /// A timestamp could not be parsed as RFC 3339.
    #[error("invalid timestamp {value:?}: expected RFC 3339, such as `2026-03-05T10:35:00.123Z`")]
    InvalidTimestamp {
        /// The refused text.
        value: String,
    },
    /// A value could not be serialized to JSON.
    #[error("failed to serialize JSON for `{path}`")]
    Serialize {
        /// The file the value was meant for.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// The commit point of an operation was passed (the change may be visible
    /// to readers) but making it durable failed: the outcome is unknown.
    ///
    /// Returned instead of [`Error::Io`] where a plain failure would invite a
    /// retry that duplicates the change. A caller retries with the same id
    /// and content (see the crate docs' idempotent-retry rule), which is then
    /// a no-op success if the first attempt took effect.
    #[error(
        "the outcome of {op} `{path}` is unknown: the change may be visible but is not known to be durable"
    )]
    OutcomeUnknown {
        /// What was being done when durability failed ("sync directory", "sync").
        op: &'static str,
        /// The path the change was made to.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A file that must be clean to proceed is corrupt.
    #[error(transparent)]
    Corrupt(#[from] Corruption),
    /// A file whose answer is needed holds a value this version does not know.
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
}

impl Error {
    /// Returns [`Error::Io`]: `op` (a verb phrase, "stat", "start the
    /// watcher for") failed on `path` with `source`. For the few failures
    /// above the store that are about a path in the state (a thread that
    /// serves a root could not start), so they read like the store's own.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// Maps the failure of an `O_NOFOLLOW` open of `path`: `ELOOP` means a
    /// symlink stands there ([`Error::Symlink`]); anything else is an I/O error.
    pub(crate) fn open_nofollow(op: &'static str, path: &Path, source: io::Error) -> Self {
        if source.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
            Error::Symlink {
                path: path.to_owned(),
            }
        } else {
            Error::io(op, path, source)
        }
    }

    /// Turns a durability failure after a commit point into
    /// [`Error::OutcomeUnknown`] for `path`; other errors pass unchanged.
    pub(crate) fn after_commit(self, path: &Path) -> Self {
        match self {
            Error::Io { op, source, .. } => Error::OutcomeUnknown {
                op,
                path: path.to_owned(),
                source,
            },
            other => other,
        }
    }

    /// As [`Error::after_commit`], for a failed rename or link after an earlier commit.
    pub(crate) fn after_commit_rename(self, path: &Path) -> Self {
        match self {
            Error::Rename { op, source, .. } => Error::OutcomeUnknown {
                op,
                path: path.to_owned(),
                source,
            },
            other => other.after_commit(path),
        }
    }

    /// Returns the I/O error kind underneath, if this is an I/O failure.
    #[cfg(test)]
    fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            Error::Io { source, .. }
            | Error::Rename { source, .. }
            | Error::OutcomeUnknown { source, .. } => Some(source.kind()),
            _ => None,
        }
    }
}

/// The one outcome-unknown check, which every chipset error answers: did
/// the operation fail after its commit point, so that its change may have
/// happened (a sync after the commit failed, a batch was applied in part,
/// a reply was recorded but not delivered)? Such a failure is not to be
/// reported as a plain one: the caller retries with the same ids, which by
/// the idempotent-retry rule returns the first attempt's outcome, or reads
/// the state again.
///
/// The store's [`Error`] answers it for [`Error::OutcomeUnknown`]. A
/// channel's error answers it for its own failures after a commit point
/// and asks the store's error it wraps for the rest, so code that handles
/// errors of several channels (a command line, a server) asks one question
/// through one bound.
///
/// ```
/// use chipset_store::{Error, MaybeCommitted};
///
/// fn exit_status(e: &impl MaybeCommitted) -> u8 {
///     if e.is_outcome_unknown() { 3 } else { 1 }
/// }
/// let gone = Error::NotFound { path: "hooks/a.json".into() };
/// assert_eq!(exit_status(&gone), 1);
/// ```
pub trait MaybeCommitted {
    /// Returns true when the operation may have made its change.
    fn is_outcome_unknown(&self) -> bool;
}

impl MaybeCommitted for Error {
    /// Returns true for [`Error::OutcomeUnknown`]: the change may have
    /// happened.
    fn is_outcome_unknown(&self) -> bool {
        matches!(self, Error::OutcomeUnknown { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eio() -> io::Error {
        io::Error::from_raw_os_error(rustix::io::Errno::IO.raw_os_error())
    }

    /// A failure after a commit point becomes "outcome unknown", the one
    /// error a caller must answer with a retry rather than a report; every
    /// other error passes unchanged and is not taken for it.
    #[test]
    fn only_a_failure_after_the_commit_is_outcome_unknown() {
        let path = Path::new("/state/hooks/a.json");
        let synced = Error::io("sync directory", "/state/hooks", eio()).after_commit(path);
        assert!(synced.is_outcome_unknown(), "{synced:?}");
        assert!(
            matches!(&synced, Error::OutcomeUnknown { op: "sync directory", path: p, .. } if p == path),
            "{synced:?}"
        );
        let renamed = Error::Rename {
            op: "link",
            from: "/state/hooks/.a.tmp".into(),
            to: path.to_owned(),
            source: eio(),
        }
        .after_commit_rename(path);
        assert!(renamed.is_outcome_unknown(), "{renamed:?}");
        for plain in [
            Error::io("sync directory", path, eio()),
            Error::NotFound {
                path: path.to_owned(),
            },
            Error::NotFound {
                path: path.to_owned(),
            }
            .after_commit(path),
        ] {
            assert!(!plain.is_outcome_unknown(), "{plain:?}");
        }
        assert_eq!(synced.io_kind(), Some(eio().kind()));
    }
}
