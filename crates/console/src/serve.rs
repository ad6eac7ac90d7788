//! `chipset serve`: the dashboard over HTTP (axum), read-only, with live
//! updates by server-sent events.
//!
//! Routes: `GET /` (the page; `?view=NAME&q=SEARCH&row=KEY`), `GET /events`
//! (the updates of that page, one `update` event per change) and nothing
//! else (404). The address rule is the MCP HTTP server's
//! ([`HttpOptions::check`]): loopback without a token, any other address
//! only with one. Without a token the `Host` header must name a loopback
//! host (a guard against DNS rebinding); with one, every request carries
//! it as `Authorization: Bearer …` or as the cookie a first visit to
//! `/?token=…` sets.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::{RawQuery, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use chipset::Chipset;
use chipset_mcp::{HttpOptions, Token};
use tokio::sync::{mpsc, watch};

use crate::detail::{Detail, detail};
use crate::error::{Error, Result};
use crate::html::{fragment, page, unpercent};
use crate::live;
use chipset_failure::chain;

use crate::model::{Loader, Snapshot, View};
use crate::screen::Screen;

/// The cookie that carries the token after a visit to `/?token=…`.
const COOKIE: &str = "chipset-token";

/// The longest search kept from a query (longer ones are cut).
const MAX_SEARCH: usize = 200;

/// How to serve the dashboard.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServeOptions {
    /// The address to listen on (port 0: any free port).
    pub addr: SocketAddr,
    /// The bearer token; required unless `addr` is a loopback address.
    pub token: Option<Token>,
    /// The time between rescans of the state root (the safety net behind
    /// the notifications).
    pub rescan: Duration,
}

impl ServeOptions {
    /// Returns options for `addr`, without a token, rescanning every
    /// [`live::DEFAULT_RESCAN`].
    pub fn new(addr: SocketAddr, token: Option<Token>) -> Self {
        ServeOptions {
            addr,
            token,
            rescan: live::DEFAULT_RESCAN,
        }
    }
}

/// The latest snapshot, its number, and the latest failure to read one.
#[derive(Debug)]
struct Loaded {
    snapshot: Snapshot,
    version: u64,
    error: Option<String>,
}

#[derive(Debug)]
struct App {
    chipset: Chipset,
    loaded: watch::Receiver<Arc<Loaded>>,
    token: Option<Token>,
    /// True once the server is shutting down: every page's event stream
    /// ends then, since a graceful shutdown waits for every connection
    /// and a stream never ends by itself.
    stopping: watch::Receiver<bool>,
}

/// How long a shutdown waits for connections to finish before it returns
/// anyway.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Serves the dashboard of `chipset`'s state root: binds `options.addr`
/// after the address rule, calls `on_listening` with the bound address,
/// and serves until `shutdown` completes.
///
/// # Errors
///
/// [`Error::OpenWithoutToken`] for a non-loopback address without a
/// token, [`Error::Http`] for an unusable one;
/// [`Error::RootGone`] when the root is not there at the start;
/// [`Error::Store`] when the watch cannot be set up; [`Error::Bind`];
/// [`Error::Serve`].
pub async fn serve(
    chipset: Chipset,
    options: ServeOptions,
    on_listening: impl FnOnce(SocketAddr),
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    HttpOptions {
        addr: options.addr,
        token: options.token.clone(),
    }
    .check()
    .map_err(|e| match e {
        chipset_mcp::Error::NonLoopbackWithoutToken { addr } => Error::OpenWithoutToken { addr },
        other => Error::Http(other),
    })?;
    let first = {
        let c = chipset.clone();
        tokio::task::spawn_blocking(move || Loader::new().load_quick(&c))
            .await
            .map_err(|e| Error::Serve(e.to_string()))??
    };
    let (tx, rx) = watch::channel(Arc::new(Loaded {
        snapshot: first,
        version: 0,
        error: None,
    }));
    let reader = chipset.clone();
    let loader = Loader::new();
    let _watch = live::watch_team(&chipset, options.rescan, move |_| {
        let last = Arc::clone(&tx.borrow());
        let next = match loader.load(&reader) {
            Ok(snapshot) if snapshot == last.snapshot && last.error.is_none() => return true,
            Ok(snapshot) => Loaded {
                snapshot,
                version: last.version + 1,
                error: None,
            },
            Err(e) => Loaded {
                snapshot: last.snapshot.clone(),
                version: last.version + 1,
                error: Some(chain(&e)),
            },
        };
        // No receiver left: the server is gone; stop watching.
        tx.send(Arc::new(next)).is_ok()
    })?;
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
    let (stop, stopping) = watch::channel(false);
    let app = Arc::new(App {
        chipset,
        loaded: rx,
        token: options.token,
        stopping: stopping.clone(),
    });
    let router = axum::Router::new()
        .route("/", get(index))
        .route("/events", get(events))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&app),
            guard,
        ))
        .with_state(app);
    tracing::info!(%bound, "serving the dashboard");
    on_listening(bound);
    let shutdown = async move {
        shutdown.await;
        tracing::info!("shutting down the dashboard");
        // Ends every page's event stream.
        let _ = stop.send(true);
    };
    let server = axum::serve(listener, router).with_graceful_shutdown(shutdown);
    // A connection that outlives the grace (a stalled client) does not
    // hold the process.
    let mut stopped = stopping;
    let deadline = async move {
        let _ = stopped.wait_for(|s| *s).await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    tokio::select! {
        served = server => served.map_err(|e| Error::Serve(e.to_string())),
        () = deadline => Ok(()),
    }
}

/// Serves the dashboard as [`serve`] does, on a runtime of its own, until
/// SIGINT or SIGTERM.
///
/// # Errors
///
/// As [`serve`]; [`Error::Serve`] when the runtime cannot be built.
pub fn run(
    chipset: Chipset,
    options: ServeOptions,
    on_listening: impl FnOnce(SocketAddr),
) -> Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::Serve(format!("failed to start the runtime: {e}")))?
        .block_on(async {
            // Installed before the address is announced: a signal sent as
            // soon as it is (by a supervisor, a test) stops the server
            // instead of killing it by the default action.
            let stop = terminated()?;
            serve(chipset, options, on_listening, stop).await
        })
}

/// Installs the SIGINT and SIGTERM handlers now; the future completes on
/// the first of them.
fn terminated() -> Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let handler = |kind: SignalKind| {
        signal(kind).map_err(|e| Error::Serve(format!("cannot handle a signal: {e}")))
    };
    let (mut term, mut int) = (
        handler(SignalKind::terminate())?,
        handler(SignalKind::interrupt())?,
    );
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}

/// What a page asks for: `?view=…&q=…&row=…&v=…`.
#[derive(Debug, Default)]
struct Ask {
    view: Option<String>,
    q: String,
    row: Option<String>,
    version: Option<u64>,
    token: Option<String>,
}

impl Ask {
    fn parse(raw: Option<&str>) -> Ask {
        let mut ask = Ask::default();
        for pair in raw.unwrap_or_default().split('&') {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = unpercent(v);
            match k {
                "view" => ask.view = Some(v),
                "q" => ask.q = v.chars().take(MAX_SEARCH).collect(),
                "row" if !v.is_empty() => ask.row = Some(v),
                "v" => ask.version = v.parse().ok(),
                "token" => ask.token = Some(v),
                _ => {}
            }
        }
        ask
    }

    /// Returns the screen asked for, or a 400 for an unknown view or a row
    /// key that is not an id of that view.
    fn screen(&self, snapshot: &Snapshot) -> std::result::Result<(Screen, Option<String>), String> {
        let view = match self.view.as_deref() {
            None | Some("") => View::Agents,
            Some(name) => View::from_name(name).ok_or_else(|| {
                format!(
                    "unknown view (use one of: {})",
                    View::ALL.map(View::name).join(", ")
                )
            })?,
        };
        let mut screen = Screen::new(view);
        screen.set_filter(self.q.clone());
        if let Some(row) = &self.row {
            if !crate::detail::valid_key(view, row) {
                return Err("not a row of this view".to_owned());
            }
            screen.select_key(snapshot, row);
        }
        Ok((screen, self.row.clone()))
    }
}

async fn index(State(app): State<Arc<App>>, RawQuery(raw): RawQuery) -> Response {
    let ask = Ask::parse(raw.as_deref());
    let loaded = Arc::clone(&app.loaded.borrow());
    let (screen, row) = match ask.screen(&loaded.snapshot) {
        Ok(s) => s,
        Err(why) => return bad(why),
    };
    let detail = load_detail(&app, &loaded, screen.view, row.clone()).await;
    let row = row.as_deref();
    let mut html = page(
        &loaded.snapshot,
        &screen,
        detail.as_ref(),
        loaded.version,
        row,
    );
    if let Some(e) = &loaded.error {
        // The same line the updates carry, on a page loaded after the failure.
        let line = fragment(&loaded.snapshot, &screen, detail.as_ref(), Some(e), row);
        html = html.replacen(
            &fragment(&loaded.snapshot, &screen, detail.as_ref(), None, row),
            &line,
            1,
        );
    }
    (secure_headers(), Html(html)).into_response()
}

async fn load_detail(
    app: &Arc<App>,
    loaded: &Arc<Loaded>,
    view: View,
    row: Option<String>,
) -> Option<Detail> {
    let row = row?;
    let app = Arc::clone(app);
    let loaded = Arc::clone(loaded);
    tokio::task::spawn_blocking(move || detail(&app.chipset, &loaded.snapshot, view, &row))
        .await
        .ok()
}

async fn events(State(app): State<Arc<App>>, RawQuery(raw): RawQuery) -> Response {
    let ask = Ask::parse(raw.as_deref());
    let mut loaded = app.loaded.clone();
    let first = Arc::clone(&loaded.borrow_and_update());
    if let Err(why) = ask.screen(&first.snapshot) {
        return bad(why);
    }
    let (tx, rx) = mpsc::channel::<Event>(2);
    let mut stopping = app.stopping.clone();
    tokio::spawn(async move {
        // A change between the page and this request is sent at once.
        let mut current = (ask.version != Some(first.version)).then_some(first);
        let mut sent = Sent::default();
        loop {
            let now = match current.take() {
                Some(l) => l,
                None => {
                    tokio::select! {
                        changed = loaded.changed() => {
                            if changed.is_err() {
                                return;
                            }
                        }
                        // The server is stopping: the stream ends.
                        _ = stopping.wait_for(|s| *s) => return,
                    }
                    Arc::clone(&loaded.borrow_and_update())
                }
            };
            let Ok((screen, row)) = ask.screen(&now.snapshot) else {
                return;
            };
            let detail = load_detail(&app, &now, screen.view, row.clone()).await;
            let html = fragment(
                &now.snapshot,
                &screen,
                detail.as_ref(),
                now.error.as_deref(),
                row.as_deref(),
            );
            if !sent.is_new(&html) {
                continue;
            }
            if tx
                .send(Event::default().event("update").data(&html))
                .await
                .is_err()
            {
                return; // The page is gone.
            }
        }
    });
    let stream = Events(rx);
    (
        secure_headers(),
        Sse::new(stream).keep_alive(KeepAlive::default()),
    )
        .into_response()
}

/// The last fragment one page's stream sent: a snapshot that changes
/// nothing the page shows (the root still gone at every rescan, which
/// repeats the last snapshot and the same failure) sends nothing, and
/// the page is left alone.
#[derive(Debug, Default)]
struct Sent(Option<String>);

impl Sent {
    /// Returns true, and remembers `html`, when it differs from the last
    /// fragment sent (or none was).
    fn is_new(&mut self, html: &str) -> bool {
        if self.0.as_deref() == Some(html) {
            return false;
        }
        self.0 = Some(html.to_owned());
        true
    }
}

/// The update events of one page.
struct Events(mpsc::Receiver<Event>);

impl futures_core::Stream for Events {
    type Item = std::result::Result<Event, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx).map(|e| e.map(Ok))
    }
}

async fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        "not found: the dashboard serves / and /events only\n",
    )
        .into_response()
}

fn bad(why: String) -> Response {
    (StatusCode::BAD_REQUEST, format!("bad request: {why}\n")).into_response()
}

fn secure_headers() -> [(header::HeaderName, HeaderValue); 3] {
    [
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(
                "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; \
                 connect-src 'self'; img-src data:; form-action 'self'; base-uri 'none'",
            ),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
    ]
}

/// Lets a request through only with the token (when one is set), or from a
/// loopback `Host` (when none is); only `GET` and `HEAD`, the dashboard
/// being read-only.
async fn guard(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let method = request.method();
    if method != axum::http::Method::GET && method != axum::http::Method::HEAD {
        return (
            StatusCode::METHOD_NOT_ALLOWED,
            [(header::ALLOW, "GET, HEAD")],
            "the dashboard is read-only\n",
        )
            .into_response();
    }
    let Some(token) = &app.token else {
        if loopback_host(request.headers()) {
            return next.run(request).await;
        }
        return (
            StatusCode::FORBIDDEN,
            "forbidden: without a token the dashboard answers to a loopback host name only\n",
        )
            .into_response();
    };
    let headers = request.headers();
    let by_header = headers
        .get(header::AUTHORIZATION)
        .is_some_and(|v| token.admits(v.as_bytes()));
    let by_cookie = cookie(headers).is_some_and(|c| token.admits(format!("Bearer {c}").as_bytes()));
    if by_header || by_cookie {
        return next.run(request).await;
    }
    let ask = Ask::parse(request.uri().query());
    if let Some(given) = ask.token
        && token.admits(format!("Bearer {given}").as_bytes())
    {
        // Trade the token in the address for a cookie, and drop it from the
        // address (so it stays out of the history and the logs).
        let rest: Vec<&str> = request
            .uri()
            .query()
            .unwrap_or_default()
            .split('&')
            .filter(|p| !p.starts_with("token="))
            .collect();
        // One leading slash: `//host/` would send the browser to `host`.
        let path = request.uri().path().trim_start_matches('/');
        let to = format!("/{path}?{}", rest.join("&"));
        let mut response = Redirect::to(&to).into_response();
        // In hex: a token may hold `;` or `,`, which end a cookie's value.
        let value: String = given.bytes().map(|b| format!("{b:02x}")).collect();
        if let Ok(v) = HeaderValue::from_str(&format!(
            "{COOKIE}={value}; HttpOnly; SameSite=Strict; Path=/"
        )) {
            response.headers_mut().insert(header::SET_COOKIE, v);
        }
        return response;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        "missing or wrong token: send `Authorization: Bearer <token>`, or open /?token=<token> once\n",
    )
        .into_response()
}

fn cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| c.trim().strip_prefix(COOKIE)?.strip_prefix('='))
        .and_then(unhex)
}

/// The token a cookie carries, in hex.
fn unhex(hex: &str) -> Option<String> {
    let digits = hex.as_bytes().chunks(2);
    let bytes: Option<Vec<u8>> = digits
        .map(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

fn loopback_host(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.split(':').next().unwrap_or_default(),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_cookies_are_read_strictly() {
        let mut h = HeaderMap::new();
        assert!(!loopback_host(&h));
        for (host, ok) in [
            ("127.0.0.1:8080", true),
            ("localhost", true),
            ("[::1]:9", true),
            ("evil.example:8080", false),
            ("127.0.0.1.evil.example", false),
        ] {
            h.insert(header::HOST, HeaderValue::from_static(host));
            assert_eq!(loopback_host(&h), ok, "{host}");
        }
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=b; chipset-token=61623b6364"),
        );
        assert_eq!(cookie(&h).as_deref(), Some("ab;cd"), "in hex");
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("chipset-token=s3cret"),
        );
        assert_eq!(cookie(&h), None, "not hex");
    }

    #[test]
    fn a_fragment_already_sent_is_not_sent_again() {
        let mut sent = Sent::default();
        assert!(sent.is_new("<nav>a</nav>"), "the first is sent");
        assert!(!sent.is_new("<nav>a</nav>"), "the same again is not");
        assert!(sent.is_new("<nav>b</nav>"));
        assert!(sent.is_new("<nav>a</nav>"), "back to an older one is");
        assert!(!sent.is_new("<nav>a</nav>"));
    }

    #[test]
    fn queries_are_parsed_and_bounded() {
        let long = "x".repeat(10_000);
        let ask = Ask::parse(Some(&format!("view=bus&q={long}&row=a%2Fb&v=7&zz")));
        assert_eq!(ask.view.as_deref(), Some("bus"));
        assert_eq!(ask.q.len(), MAX_SEARCH);
        assert_eq!(ask.row.as_deref(), Some("a/b"));
        assert_eq!(ask.version, Some(7));
    }
}
