//! Streamable HTTP: the same server behind axum, loopback only unless a
//! bearer token is configured, and then every request must carry it.

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_core::Stream as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use crate::error::{Error, Result};
use crate::server::Server;
use crate::stdio::judge_body;

/// The path the MCP endpoint is served at: `http://ADDR/mcp`.
pub const MCP_PATH: &str = "/mcp";

/// The most a token file is read of: a token is one short line.
const TOKEN_FILE_CAP: u64 = 64 * 1024;

/// A bearer token every HTTP request must carry (`Authorization: Bearer …`).
///
/// Its `Debug` form does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// Returns a token, refusing an empty one or one that cannot travel in
    /// a header (anything but printable ASCII); surrounding whitespace is
    /// trimmed.
    ///
    /// # Errors
    ///
    /// [`Error::BadToken`].
    pub fn new(token: impl Into<String>) -> Result<Self> {
        let token = token.into().trim().to_owned();
        if token.is_empty() {
            return Err(Error::BadToken { why: "is empty" });
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(Error::BadToken {
                why: "holds characters other than printable ASCII",
            });
        }
        Ok(Token(token))
    }

    /// Reads the token from the environment variable `var`.
    ///
    /// # Errors
    ///
    /// [`Error::TokenEnv`] when it is unset, empty or not UTF-8;
    /// [`Error::BadToken`].
    pub fn from_env(var: &str) -> Result<Self> {
        match std::env::var(var) {
            Ok(v) if !v.trim().is_empty() => Token::new(v),
            _ => Err(Error::TokenEnv {
                var: var.to_owned(),
            }),
        }
    }

    /// Reads the token from the first line of the file at `path`.
    ///
    /// # Errors
    ///
    /// [`Error::TokenFile`] when it cannot be read; [`Error::BadToken`].
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = chipset_store::StateDir::read_outside(path, TOKEN_FILE_CAP)
            .and_then(|bytes| {
                String::from_utf8(bytes)
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
            })
            .map_err(|source| Error::TokenFile {
                path: path.to_owned(),
                source,
            })?;
        Token::new(text.lines().next().unwrap_or_default())
    }

    /// Returns true when `header` is `Bearer <this token>`, comparing in
    /// time that does not depend on where they differ (the dashboard of
    /// `chipset serve` checks its requests with it too).
    pub fn admits(&self, header: &[u8]) -> bool {
        let Some(given) = header.strip_prefix(b"Bearer ") else {
            return false;
        };
        let want = self.0.as_bytes();
        given.len() == want.len()
            && given
                .iter()
                .zip(want)
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(…)")
    }
}

/// How to serve over HTTP.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// The address to listen on (port 0: any free port).
    pub addr: SocketAddr,
    /// The bearer token; required unless `addr` is a loopback address.
    pub token: Option<Token>,
}

impl HttpOptions {
    /// Checks the rule: a non-loopback address needs a token.
    ///
    /// # Errors
    ///
    /// [`Error::NonLoopbackWithoutToken`].
    pub fn check(&self) -> Result<()> {
        if self.token.is_none() && !self.addr.ip().is_loopback() {
            return Err(Error::NonLoopbackWithoutToken { addr: self.addr });
        }
        Ok(())
    }
}

/// Binds `options.addr` after [`HttpOptions::check`], calls `on_listening`
/// with the bound address, and serves until `shutdown` completes.
///
/// # Errors
///
/// [`Error::NonLoopbackWithoutToken`] before binding; [`Error::Bind`];
/// [`Error::Serve`].
pub async fn serve_http(
    server: Server,
    options: HttpOptions,
    on_listening: impl FnOnce(SocketAddr),
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    options.check()?;
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .map_err(|source| Error::Bind {
            addr: options.addr,
            source,
        })?;
    let bound = listener.local_addr().map_err(|source| Error::Bind {
        addr: options.addr,
        source,
    })?;
    let config = match &options.token {
        // Host checks guard a loopback server against DNS rebinding; with a
        // token, the token does (a browser cannot add the header for a page).
        Some(_) => StreamableHttpServerConfig::default().disable_allowed_hosts(),
        None => StreamableHttpServerConfig::default(),
    };
    let limit = config.max_request_body_bytes;
    let service = StreamableHttpService::new(
        move || Ok(server.session()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    // Layers added later run first: the token is checked before the body.
    let mut router = axum::Router::new()
        .nest_service(MCP_PATH, service)
        .layer(axum::middleware::from_fn_with_state(limit, answer_bad_body));
    if let Some(token) = options.token {
        router = router.layer(axum::middleware::from_fn_with_state(
            Arc::new(token),
            require_token,
        ));
    }
    tracing::info!(%bound, "serving MCP over streamable HTTP");
    on_listening(bound);
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|e| Error::Serve(e.to_string()))
}

/// Refuses with 401 any request without the right bearer token.
async fn require_token(State(token): State<Arc<Token>>, request: Request, next: Next) -> Response {
    let admitted = request
        .headers()
        .get(header::AUTHORIZATION)
        .is_some_and(|v| token.admits(v.as_bytes()));
    if admitted {
        next.run(request).await
    } else {
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "missing or wrong bearer token\n",
        )
            .into_response()
    }
}

/// Answers a JSON POST whose body is no JSON-RPC message as JSON-RPC
/// says: 400 with `-32700` (not JSON, an empty body too) or `-32600` (no
/// message, with its id when readable), as on stdio. rmcp answers such a
/// body with 415 and a line of text; its checks before the body (host,
/// `Accept`, content type) still come first, as the request goes to it
/// unchanged and only its 415 is replaced. The session is checked after
/// the body, so a bad body with an unknown session gets the 400, not 404.
async fn answer_bad_body(State(limit): State<usize>, request: Request, next: Next) -> Response {
    if request.method() != Method::POST || !is_json(request.headers()) {
        return next.run(request).await;
    }
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|length| length > limit) {
        // rmcp refuses it with 413 before reading it whole.
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match read_body(body, limit).await {
        Ok(bytes) => bytes,
        Err(refused) => return refused,
    };
    // Shared, not copied: the body is judged only when rmcp refused it,
    // so a valid request is parsed once, by rmcp.
    let bytes = axum::body::Bytes::from(bytes);
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes.clone())))
        .await;
    if response.status() != StatusCode::UNSUPPORTED_MEDIA_TYPE {
        return response;
    }
    match judge_body(&bytes) {
        Some(answer) => (
            StatusCode::BAD_REQUEST,
            [(header::CONTENT_TYPE, "application/json")],
            answer,
        )
            .into_response(),
        None => response,
    }
}

/// The body whole, or the answer when it is longer than `limit` (413, as
/// rmcp answers a body of unknown length past its cap) or cannot be read.
async fn read_body(body: Body, limit: usize) -> std::result::Result<Vec<u8>, Response> {
    let mut chunks = body.into_data_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = std::future::poll_fn(|cx| Pin::new(&mut chunks).poll_next(cx)).await {
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(e) => {
                let why = format!("the request body could not be read whole: {e}\n");
                return Err((StatusCode::BAD_REQUEST, why).into_response());
            }
        };
        if chunk.len() > limit - bytes.len() {
            let why = format!("Payload Too Large: request body exceeds {limit} bytes");
            return Err((StatusCode::PAYLOAD_TOO_LARGE, why).into_response());
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// Whether the request says its body is JSON, as rmcp checks it.
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let essence = v.split_once(';').map_or(v, |(essence, _)| essence);
            essence.trim().eq_ignore_ascii_case("application/json")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_checked_whole() {
        let t = Token::new(" s3cret\n").unwrap();
        assert!(t.admits(b"Bearer s3cret"));
        assert!(!t.admits(b"Bearer s3cre"));
        assert!(!t.admits(b"Bearer s3cretx"));
        assert!(!t.admits(b"bearer s3cret"));
        assert!(!t.admits(b"s3cret"));
        assert_eq!(format!("{t:?}"), "Token(…)");
        assert!(matches!(Token::new("  "), Err(Error::BadToken { .. })));
        assert!(matches!(Token::new("a b"), Err(Error::BadToken { .. })));
    }

    #[tokio::test]
    async fn a_body_is_read_up_to_its_cap() {
        let read = |len: usize| read_body(Body::from(vec![b'x'; len]), 8);
        assert_eq!(read(8).await.unwrap().len(), 8);
        assert_eq!(read(0).await.unwrap().len(), 0);
        let refused = read(9).await.unwrap_err();
        assert_eq!(refused.status(), StatusCode::PAYLOAD_TOO_LARGE);
    }

    #[test]
    fn only_loopback_goes_without_a_token() {
        let check = |addr: &str, token: bool| {
            HttpOptions {
                addr: addr.parse().unwrap(),
                token: token.then(|| Token::new("t").unwrap()),
            }
            .check()
            .is_ok()
        };
        assert!(check("127.0.0.1:0", false));
        assert!(check("[::1]:8080", false));
        assert!(!check("0.0.0.0:8080", false));
        assert!(!check("192.168.1.2:8080", false));
        assert!(check("0.0.0.0:8080", true));
    }
}
