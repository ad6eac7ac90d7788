//! The search's one error type.

use std::path::PathBuf;

use chipset_store::{Classify, ErrorKind};

/// A specialized result for search operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong in a search, a catch-up or a rebuild.
///
/// As every chipset error, its message does not repeat its
/// [`source`](std::error::Error::source): print the chain for the whole
/// story (SQLite's or the system's reason).
///
/// A query the index cannot answer (no words, too long, an unknown
/// channel) is refused with a typed variant before anything is read. A
/// damaged index is never an error a caller sees: it is rebuilt from the
/// files and the query runs again.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The query holds no word to look for: only operators (`AND`, `OR`,
    /// `NOT`, `-`), punctuation or quotes.
    #[error("the query has no words to search for")]
    NoWords,
    /// The query is longer than [`MAX_QUERY_LEN`](crate::MAX_QUERY_LEN) bytes.
    #[error("the query is {len} bytes long, over the {max}-byte limit")]
    QueryTooLong {
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The query holds more than [`MAX_TERMS`](crate::MAX_TERMS) words.
    #[error("the query has {count} words, over the limit of {max}")]
    TooManyWords {
        /// How many words it has.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A channel filter that names no channel.
    #[error("unknown channel `{name}`: expected mail, bus, hook or reminder")]
    UnknownChannel {
        /// The name given.
        name: String,
    },
    /// A channel could not be read while catching up.
    #[error("failed to read the {channel} channel: {message}")]
    Channel {
        /// Which channel.
        channel: &'static str,
        /// Why, as the channel said it.
        message: String,
        /// The channel error's kind (an unknown outcome is none here: a
        /// read changed nothing).
        kind: ErrorKind,
    },
    /// The store failed (a listing, a stat, a read).
    #[error(transparent)]
    Store(#[from] chipset_store::Error),
    /// The index failed in a way a rebuild did not cure.
    #[error("failed to {op} the search index `{}`", path.display())]
    Index {
        /// What was being done.
        op: &'static str,
        /// The index file.
        path: PathBuf,
        /// What SQLite said.
        source: rusqlite::Error,
    },
    /// The index's folder could not be made or cleared.
    #[error("failed to {op} `{}`", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl Classify for Error {
    /// Classifies the failure. The index is a cache of the channels'
    /// records, so no failure of it changes a channel: a store's unknown
    /// outcome on the index is an I/O failure here.
    fn kind(&self) -> ErrorKind {
        match self {
            Error::NoWords
            | Error::QueryTooLong { .. }
            | Error::TooManyWords { .. }
            | Error::UnknownChannel { .. } => ErrorKind::Invalid,
            Error::Store(e) => changed_nothing(e.kind()),
            Error::Channel { kind, .. } => *kind,
            Error::Index { .. } | Error::Io { .. } => ErrorKind::Io,
        }
    }
}

impl Error {
    /// Returns [`Error::Channel`] for `channel`'s failure `e`, of its kind.
    pub(crate) fn channel(channel: &'static str, e: &(impl Classify + ToString)) -> Self {
        Error::Channel {
            channel,
            message: e.to_string(),
            kind: changed_nothing(e.kind()),
        }
    }
}

/// Returns `kind` for a failure that changed no channel: an unknown
/// outcome (of a channel's read, or of the index, a cache) is an I/O
/// failure here.
fn changed_nothing(kind: ErrorKind) -> ErrorKind {
    match kind {
        ErrorKind::OutcomeUnknown => ErrorKind::Io,
        kind => kind,
    }
}

macro_rules! channel_error {
    ($($ty:path => $name:literal),* $(,)?) => {$(
        impl From<$ty> for Error {
            fn from(e: $ty) -> Self {
                Error::channel($name, &e)
            }
        }
    )*};
}

channel_error! {
    chipset_mail::Error => "mail",
    chipset_bus::Error => "bus",
    chipset_hook::Error => "hook",
    chipset_nudge::Error => "reminder",
}

#[cfg(test)]
mod tests {
    use chipset_store::{CorruptReason, Corruption};

    use super::*;

    /// A channel that could not be read keeps its error's kind (a corrupt
    /// file asks for the doctor), except an unknown outcome: reading
    /// changed nothing.
    #[test]
    fn a_channels_failure_keeps_its_kind() {
        let corrupt = chipset_mail::Error::Corrupt(Corruption {
            path: "mail/inbox/a/1.json".into(),
            reason: CorruptReason::Unparsable("EOF".into()),
        });
        let e = Error::from(corrupt);
        assert!(
            matches!(
                e,
                Error::Channel {
                    channel: "mail",
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(e.kind(), ErrorKind::Corrupt);
        let unknown = chipset_bus::Error::from(chipset_store::Error::OutcomeUnknown {
            op: "sync",
            path: "bus/a".into(),
            source: std::io::Error::from_raw_os_error(5),
        });
        assert_eq!(Error::from(unknown).kind(), ErrorKind::Io);
    }

    /// The message names the operation and the file; the reason is the
    /// source, said once, so a chain printer does not say it twice.
    #[test]
    fn a_failure_says_its_reason_once_through_its_source() {
        let cases = [
            Error::Index {
                op: "use",
                path: "/state/.index/search/index.sqlite3".into(),
                source: rusqlite::Error::InvalidQuery,
            },
            Error::Io {
                op: "make",
                path: "/state/.index/search".into(),
                source: std::io::Error::other("No space left on device"),
            },
        ];
        for e in cases {
            let reason = std::error::Error::source(&e).expect("a source").to_string();
            assert!(!e.to_string().contains(&reason), "{e}");
            assert_eq!(e.kind(), ErrorKind::Io);
        }
    }
}
