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
    #[error("the change to `{path}` may be visible but is not known to be durable ({op} failed)")]
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

/// What kind of failure an error is: the one classification every
/// chipset error gives, whichever crate it comes from ([`Classify::kind`]).
///
/// A caller decides what to do from the kind alone: fix its input, read
/// the state again, run the doctor, or retry the same request. Only
/// [`ErrorKind::OutcomeUnknown`] may have changed anything; every other
/// kind means nothing was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The input was at fault: a malformed id, an empty or over-long
    /// field, an unregistered kind. Nothing was read or written; the same
    /// input fails again.
    Invalid,
    /// What the operation names does not exist: no such message,
    /// reminder, item or event.
    NotFound,
    /// The state's rules refused the operation: a transition the state
    /// does not allow, an actor that may not, an id already taken by other
    /// content.
    Refused,
    /// What the caller held was replaced or taken away in between (an
    /// assignment, a lease's fencing token, a value read before a
    /// compare-and-swap): read the state again.
    Stale,
    /// A file or row the operation needs is corrupt; the doctor
    /// ([`DoctorMode::Fix`](crate::DoctorMode::Fix)) moves it aside.
    Corrupt,
    /// A file or row holds a value this version does not know (written by
    /// a newer program); it is left alone.
    Unsupported,
    /// The operation passed its commit point and then failed: its change
    /// may have happened. Retry the same request (same ids), which by the
    /// idempotent-retry rule returns the first attempt's outcome, or read
    /// the state again; never report it as a plain failure.
    OutcomeUnknown,
    /// The filesystem or the server failed (a permission, a full disk, a
    /// connection) before the commit point; the same request may succeed
    /// once the cause is gone.
    Io,
}

impl std::fmt::Display for ErrorKind {
    /// Writes the kind as one snake_case word (`not_found`,
    /// `outcome_unknown`), as chipset's JSON results name it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ErrorKind::Invalid => "invalid",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Refused => "refused",
            ErrorKind::Stale => "stale",
            ErrorKind::Corrupt => "corrupt",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::OutcomeUnknown => "outcome_unknown",
            ErrorKind::Io => "io",
        })
    }
}

/// The one question every chipset error answers: what kind of failure it
/// is ([`ErrorKind`]), so code that handles errors of several channels (a
/// command line, a server, an orchestrator's retry loop) asks it through
/// one bound.
///
/// A channel's error classifies its own variants and asks the error it
/// wraps (the store's, another channel's, the server's) for the rest.
///
/// ```
/// use chipset_store::{AgentId, Classify, Error, ErrorKind};
///
/// fn exit_status(e: &impl Classify) -> u8 {
///     match e.kind() {
///         ErrorKind::Invalid => 2,
///         ErrorKind::OutcomeUnknown => 3,
///         _ => 1,
///     }
/// }
/// let gone = Error::NotFound { path: "hooks/a.json".into() };
/// assert_eq!(gone.kind(), ErrorKind::NotFound);
/// assert_eq!(exit_status(&gone), 1);
/// assert_eq!(exit_status(&AgentId::new("a/b").unwrap_err()), 2);
/// ```
pub trait Classify {
    /// Returns what kind of failure this is.
    fn kind(&self) -> ErrorKind;

    /// Returns true when the operation may have made its change
    /// ([`ErrorKind::OutcomeUnknown`]).
    fn is_outcome_unknown(&self) -> bool {
        self.kind() == ErrorKind::OutcomeUnknown
    }
}

impl Classify for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidId { .. } | Error::InvalidTimestamp { .. } | Error::Serialize { .. } => {
                ErrorKind::Invalid
            }
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::AlreadyExists { .. }
            | Error::Symlink { .. }
            | Error::NotADirectory { .. }
            | Error::OutsideRoot { .. } => ErrorKind::Refused,
            Error::Corrupt(_) => ErrorKind::Corrupt,
            Error::Unsupported(_) => ErrorKind::Unsupported,
            Error::OutcomeUnknown { .. } => ErrorKind::OutcomeUnknown,
            Error::Io { .. } | Error::Rename { .. } => ErrorKind::Io,
        }
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
        // It names the file changed, and what failed after the change.
        assert_eq!(
            synced.to_string(),
            "the change to `/state/hooks/a.json` may be visible but is not known to be durable \
             (sync directory failed)"
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

    /// Each failure has the kind a caller acts on: fix the input, report
    /// a refusal, repair, or retry.
    #[test]
    fn each_failure_has_its_kind() {
        let path = || PathBuf::from("/state/hooks/a.json");
        let cases = [
            (Error::io("open", path(), eio()), ErrorKind::Io),
            (Error::AlreadyExists { path: path() }, ErrorKind::Refused),
            (Error::NotFound { path: path() }, ErrorKind::NotFound),
            (Error::Symlink { path: path() }, ErrorKind::Refused),
            (
                Error::InvalidTimestamp { value: "x".into() },
                ErrorKind::Invalid,
            ),
            (
                Error::Corrupt(Corruption {
                    path: path(),
                    reason: crate::CorruptReason::Unparsable("EOF".into()),
                }),
                ErrorKind::Corrupt,
            ),
            (
                Error::io("sync", path(), eio()).after_commit(&path()),
                ErrorKind::OutcomeUnknown,
            ),
        ];
        for (e, kind) in cases {
            assert_eq!(e.kind(), kind, "{e:?}");
            assert_eq!(e.is_outcome_unknown(), kind == ErrorKind::OutcomeUnknown);
        }
    }
}
