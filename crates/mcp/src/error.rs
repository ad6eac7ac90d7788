//! Why the server could not start or stopped.

use std::net::SocketAddr;
use std::path::PathBuf;

use chipset_store::ErrorKind;

/// Why the server could not start, or stopped with a failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `--http` named an address other hosts can reach, with no token.
    #[error(
        "refusing to serve MCP over HTTP on `{addr}` without a token: only loopback \
         addresses are served without one (use 127.0.0.1 or ::1, or give --token-env or --token-file)"
    )]
    NonLoopbackWithoutToken {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// The token's environment variable is not set, or not valid.
    #[error("no bearer token in the environment variable `{var}` (unset, empty or not UTF-8)")]
    TokenEnv {
        /// The variable.
        var: String,
    },
    /// The token file could not be read.
    #[error("failed to read the bearer token from `{path}`")]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The token is unusable: empty, or not printable ASCII.
    #[error("the bearer token {why}")]
    BadToken {
        /// What is wrong with it.
        why: &'static str,
    },
    /// The address could not be bound.
    #[error("failed to listen on `{addr}`")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The async runtime could not start.
    #[error("failed to start the async runtime")]
    Runtime(#[source] std::io::Error),
    /// The MCP session could not be set up (the client hung up or spoke
    /// something else).
    #[error("the MCP session failed to start: {0}")]
    Initialize(String),
    /// Serving stopped with a failure.
    #[error("serving MCP failed: {0}")]
    Serve(String),
}

impl chipset_store::Classify for Error {
    /// Classifies the failure: the configuration was at fault
    /// ([`ErrorKind::Invalid`], the command line exits 2) for a non-loopback
    /// address without a token or an unusable token; the rest failed to
    /// listen or serve ([`ErrorKind::Io`]).
    fn kind(&self) -> ErrorKind {
        match self {
            Error::NonLoopbackWithoutToken { .. }
            | Error::TokenEnv { .. }
            | Error::TokenFile { .. }
            | Error::BadToken { .. } => ErrorKind::Invalid,
            Error::Bind { .. } | Error::Runtime(_) | Error::Initialize(_) | Error::Serve(_) => {
                ErrorKind::Io
            }
        }
    }
}

/// A specialized result for the server.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The error for a request rmcp could not parse: a method the server
/// serves, sent with params of the wrong shape (`tools/call` with
/// `"arguments": []`), reaches the handler as a custom request, and is
/// invalid params (-32602) rather than a method not found (-32601).
pub(crate) fn unparsed(method: &str) -> rmcp::ErrorData {
    const SERVED: [&str; 9] = [
        "initialize",
        "ping",
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/read",
        "resources/subscribe",
        "resources/unsubscribe",
        "resources/templates/list",
    ];
    if method == "tools/call" {
        rmcp::ErrorData::invalid_params(
            "invalid params for tools/call: `name` must be a string and `arguments`, if given, an object",
            None,
        )
    } else if SERVED.contains(&method) {
        rmcp::ErrorData::invalid_params(
            format!("invalid params for {method}: they do not have the method's form"),
            None,
        )
    } else {
        rmcp::ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            method.to_owned(),
            None,
        )
    }
}
