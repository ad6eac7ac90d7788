//! The front door's error: whichever channel failed, through its own error.

/// A specialized result for [`Chipset`](crate::Chipset) operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong in an operation of [`Chipset`](crate::Chipset) itself
/// (opening, [`status`](crate::Chipset::status),
/// [`doctor`](crate::Chipset::doctor)): the failing channel's error, as it
/// is. The channel handles return their own errors.
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
    /// The state is on a server and this part does not run there yet:
    /// nothing was read or written (it is never read from a local folder
    /// instead).
    #[error("{part} does not run on a PostgreSQL server yet (the state is on {server})")]
    NotOnServer {
        /// The part asked for.
        part: crate::Part,
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
