//! The console's error.

use std::net::SocketAddr;
use std::path::PathBuf;

use chipset::{Classify, ErrorKind};

/// A specialized result for the console.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong showing or serving the team.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The state root was removed (or replaced by something that is not a
    /// directory) while the view ran.
    #[error("state root `{}` no longer exists", path.display())]
    RootGone {
        /// The root.
        path: PathBuf,
    },
    /// The store failed (setting up the watch).
    #[error(transparent)]
    Store(#[from] chipset::store::Error),
    /// The thread that watches the state root could not be started.
    #[error("failed to start the thread that watches the state root")]
    Spawn(#[source] std::io::Error),
    /// The dashboard was asked to serve an address other hosts reach,
    /// with no token (the MCP HTTP server's rule, in the dashboard's words).
    #[error(
        "refusing to serve the dashboard on `{addr}` without a token: only loopback \
         addresses are served without one (use 127.0.0.1 or ::1, or give --token-env \
         or --token-file)"
    )]
    OpenWithoutToken {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// The dashboard's token is not usable.
    #[error(transparent)]
    Http(#[from] chipset_mcp::Error),
    /// The dashboard could not bind its address.
    #[error("failed to bind the dashboard to {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The dashboard stopped serving.
    #[error("the dashboard stopped: {0}")]
    Serve(String),
}

impl Classify for Error {
    /// Classifies the failure: a dashboard open to other hosts without a
    /// token, or an unusable token, is bad input ([`ErrorKind::Invalid`]);
    /// a root gone is [`ErrorKind::NotFound`]; the store's failures keep
    /// their kind; the rest failed to start or serve ([`ErrorKind::Io`]).
    fn kind(&self) -> ErrorKind {
        match self {
            Error::OpenWithoutToken { .. } => ErrorKind::Invalid,
            Error::Http(e) => e.kind(),
            Error::Store(e) => e.kind(),
            Error::RootGone { .. } => ErrorKind::NotFound,
            Error::Spawn(_) | Error::Bind { .. } | Error::Serve(_) => ErrorKind::Io,
        }
    }
}
