//! The front door's error: whichever channel failed, through its own error.

/// A specialized result for [`Chipset`](crate::Chipset) operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong in an operation of [`Chipset`](crate::Chipset) itself
/// (opening, [`status`](crate::Chipset::status),
/// [`doctor`](crate::Chipset::doctor)): the failing channel's error, as it
/// is. The channel handles return their own errors, and each converts into
/// this one (`From`), so a function over several channels can return
/// [`chipset::Result`](crate::Result) and ask one question of whatever
/// failed, [`kind`](chipset_store::Classify::kind): fix the input, read
/// again, repair, or retry
/// ([`is_outcome_unknown`](chipset_store::Classify::is_outcome_unknown)).
///
/// ```
/// use chipset::Classify;
///
/// fn post_and_count(door: &chipset::Chipset, by: &chipset::store::AgentId) -> chipset::Result<usize> {
///     door.pool().post(by, &chipset::pool::NewItem::new("Fix the parser"))?;
///     Ok(door.mail().inbox_len(by)?)
/// }
///
/// let tmp = tempfile::tempdir()?;
/// let door = chipset::Chipset::open(tmp.path().join("state"))?;
/// match post_and_count(&door, &"lead".parse()?) {
///     Err(e) if e.is_outcome_unknown() => { /* the post may have landed: retry it */ }
///     other => assert_eq!(other?, 0),
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The store failed (opening the root, listing, sweeping temp files).
    #[error(transparent)]
    Store(#[from] chipset_store::Error),
    /// The hook channel failed.
    #[error(transparent)]
    Hook(#[from] chipset_hook::Error),
    /// The nudge or reminder channel failed.
    #[error(transparent)]
    Nudge(#[from] chipset_nudge::Error),
    /// The mail channel failed.
    #[error(transparent)]
    Mail(#[from] chipset_mail::Error),
    /// The bus failed.
    #[error(transparent)]
    Bus(#[from] chipset_bus::Error),
    /// The agent directory failed.
    #[error(transparent)]
    Directory(#[from] chipset_directory::Error),
    /// The path leases failed.
    #[error(transparent)]
    Lease(#[from] chipset_lease::Error),
    /// The work pool failed.
    #[error(transparent)]
    Pool(#[from] chipset_pool::Error),
    /// The loop state failed.
    #[error(transparent)]
    Loop(#[from] chipset_loop::Error),
    /// The search index failed.
    #[error(transparent)]
    Search(#[from] chipset_search::Error),
    /// The storage backend failed: a server's settings, connection, login
    /// or schema version.
    #[error(transparent)]
    Backend(#[from] chipset_backend::Error),
    /// [`Chipset::open_with`](crate::Chipset::open_with) was given a
    /// server's root: it opens a directory with the store's options, and
    /// a server opens with [`Chipset::open_server`](crate::Chipset::open_server)
    /// and [`ServerOptions`](crate::ServerOptions). Nothing was created.
    #[error(
        "{server} is a PostgreSQL server, not a directory: open it with `Chipset::open_server` and `ServerOptions` (`Chipset::open_with` takes a directory's options)"
    )]
    ServerRoot {
        /// The server, without its password.
        server: String,
    },
    /// The root names a server, and this build of chipset has no
    /// PostgreSQL client (the `postgres` cargo feature).
    #[error(
        "cannot open {server}: this build of chipset has no PostgreSQL support (the `postgres` feature)"
    )]
    NoServerSupport {
        /// The server, without its password.
        server: String,
    },
}

impl chipset_store::Classify for Error {
    /// Classifies the failure as the failing channel's error does. The
    /// door's own refusal of a server in a build without PostgreSQL is
    /// [`ErrorKind::Refused`](chipset_store::ErrorKind::Refused);
    /// a server's root given to `open_with` is
    /// [`ErrorKind::Invalid`](chipset_store::ErrorKind::Invalid).
    fn kind(&self) -> chipset_store::ErrorKind {
        match self {
            Error::Store(e) => e.kind(),
            Error::Hook(e) => e.kind(),
            Error::Nudge(e) => e.kind(),
            Error::Mail(e) => e.kind(),
            Error::Bus(e) => e.kind(),
            Error::Directory(e) => e.kind(),
            Error::Lease(e) => e.kind(),
            Error::Pool(e) => e.kind(),
            Error::Loop(e) => e.kind(),
            Error::Search(e) => e.kind(),
            Error::Backend(e) => e.kind(),
            Error::ServerRoot { .. } => chipset_store::ErrorKind::Invalid,
            Error::NoServerSupport { .. } => chipset_store::ErrorKind::Refused,
        }
    }
}

/// Classifies any error that holds a chipset error: the
/// [`ErrorKind`](chipset_store::ErrorKind) of the first chipset error in
/// `error`'s chain (itself, then each [`source`](std::error::Error::source),
/// and the error inside an `io::Error::other`), or `None` when there is
/// none. For a program that carries errors as `Box<dyn Error>` or
/// `anyhow::Error` (its `context` keeps the chain), where
/// [`Classify`](chipset_store::Classify) cannot be called.
///
/// It knows the errors of this facade and of the crates it re-exports.
/// A wrapper that forwards its inner error's `source` instead of naming
/// the error (thiserror's `#[error(transparent)]`) hides it from any
/// chain walk: wrap a chipset error with `#[from]` or `#[source]` on a
/// variant with a message of its own, and it is found.
///
/// ```
/// use chipset::ErrorKind;
///
/// fn post(door: &chipset::Chipset) -> Result<(), Box<dyn std::error::Error>> {
///     let by: chipset::store::AgentId = "lead".parse()?;
///     door.pool().post(&by, &chipset::pool::NewItem::new(""))?;
///     Ok(())
/// }
///
/// let tmp = tempfile::tempdir()?;
/// let door = chipset::Chipset::open(tmp.path().join("state"))?;
/// let e = post(&door).unwrap_err();
/// assert_eq!(chipset::error_kind(e.as_ref()), Some(ErrorKind::Invalid));
/// let other = std::io::Error::other("not chipset's");
/// assert_eq!(chipset::error_kind(&other), None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn error_kind(error: &(dyn std::error::Error + 'static)) -> Option<chipset_store::ErrorKind> {
    use chipset_store::Classify;
    let mut next = Some(error);
    while let Some(e) = next {
        macro_rules! classify {
            ($($ty:ty),*) => {
                $(if let Some(e) = e.downcast_ref::<$ty>() {
                    return Some(e.kind());
                })*
            };
        }
        classify!(
            Error,
            chipset_store::Error,
            chipset_hook::Error,
            chipset_nudge::Error,
            chipset_mail::Error,
            chipset_bus::Error,
            chipset_directory::Error,
            chipset_lease::Error,
            chipset_pool::Error,
            chipset_loop::Error,
            chipset_search::Error,
            chipset_backend::Error,
            crate::migrate::MigrateError
        );
        if e.is::<chipset_store::Corruption>() {
            return Some(chipset_store::ErrorKind::Corrupt);
        }
        if e.is::<chipset_store::Unsupported>() {
            return Some(chipset_store::ErrorKind::Unsupported);
        }
        // An `io::Error` made of another error (`io::Error::other(e)`)
        // reports `e`'s source as its own: look at `e` itself first.
        next = match e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => e.source(),
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use chipset_store::{Classify, ErrorKind};

    use super::*;

    /// A channel's unknown outcome stays one through the front door's
    /// error, whichever channel it came from; a plain failure does not
    /// become one.
    #[test]
    fn a_channels_unknown_outcome_is_one_through_the_door() {
        fn unknown() -> chipset_store::Error {
            chipset_store::Error::OutcomeUnknown {
                op: "publish",
                path: "hooks/a.json".into(),
                source: std::io::Error::other("fsync failed"),
            }
        }
        fn plain() -> chipset_store::Error {
            chipset_store::Error::NotFound {
                path: "hooks/a.json".into(),
            }
        }
        let cases: [(fn() -> chipset_store::Error, bool); 2] = [(unknown, true), (plain, false)];
        for (store, expected) in cases {
            let errors = [
                Error::from(chipset_hook::Error::from(store())),
                Error::from(chipset_mail::Error::from(store())),
                Error::from(chipset_bus::Error::from(store())),
                Error::from(chipset_pool::Error::from(store())),
                Error::from(chipset_lease::Error::from(store())),
                Error::from(store()),
            ];
            for e in errors {
                assert_eq!(e.is_outcome_unknown(), expected, "{e:?}");
            }
        }
        let search = chipset_search::Error::NoWords;
        assert!(!Error::from(search).is_outcome_unknown());
    }

    /// A chipset error boxed as `dyn Error`, or the source of another
    /// error, is classified as it is; an error with none in its chain is
    /// not.
    #[test]
    fn error_kind_finds_the_chipset_error_in_a_chain() {
        #[derive(Debug, thiserror::Error)]
        #[error("while posting")]
        struct Context(#[source] chipset_pool::Error);

        let unknown = chipset_pool::Error::from(chipset_store::Error::OutcomeUnknown {
            op: "post",
            path: "pool/items.jsonl".into(),
            source: std::io::Error::other("fsync failed"),
        });
        let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(Context(unknown));
        assert_eq!(error_kind(boxed.as_ref()), Some(ErrorKind::OutcomeUnknown));

        let door = Error::from(chipset_store::Error::NotFound {
            path: "hooks/a.json".into(),
        });
        assert_eq!(error_kind(&door), Some(ErrorKind::NotFound));

        let corrupt = chipset_store::Corruption {
            path: "hooks/a.json".into(),
            reason: chipset_store::CorruptReason::Unparsable("EOF".into()),
        };
        assert_eq!(error_kind(&corrupt), Some(ErrorKind::Corrupt));

        let io = std::io::Error::other("not chipset's");
        assert_eq!(error_kind(&io), None);

        // Inside an io::Error, whose own source skips it.
        let inside = std::io::Error::other(chipset_store::Error::NotFound {
            path: "hooks/a.json".into(),
        });
        assert_eq!(error_kind(&inside), Some(ErrorKind::NotFound));

        // A transparent wrapper forwards the inner error's source, so the
        // chipset error itself is never in the chain: documented.
        #[derive(Debug, thiserror::Error)]
        enum App {
            #[error(transparent)]
            Chipset(Error),
        }
        let hidden = App::Chipset(Error::from(chipset_store::Error::NotFound {
            path: "hooks/a.json".into(),
        }));
        assert_eq!(error_kind(&hidden), None);
    }
}
