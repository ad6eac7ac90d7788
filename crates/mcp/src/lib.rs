//! `chipset-mcp`: every agent-facing chipset operation as a tool of a
//! [Model Context Protocol](https://modelcontextprotocol.io) server, over
//! stdio or streamable HTTP, built on the official Rust SDK (`rmcp`).
//!
//! Agent hosts (Claude Code, Codex, Cursor, …) reach tools through MCP; this
//! crate gives them chipset's hooks, nudges, mail, events and reminders as
//! tools that act as one agent, fixed when the server starts. The `chipset`
//! command line runs it as `chipset mcp --agent AGENT [--http ADDR]`.
//!
//! ```no_run
//! use chipset_mcp::Server;
//! use chipset_store::{AgentId, StateDir};
//!
//! let state = StateDir::open(".chipset/state")?;
//! let server = Server::new(state, AgentId::new("polecat-alpha")?);
//! // Serve on stdin/stdout until the client hangs up.
//! chipset_mcp::run_stdio(server)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Tools
//!
//! A thin shell over the libraries, like the command line: each tool calls
//! the library operation the matching `chipset` command calls.
//!
//! | tool | does | like |
//! |---|---|---|
//! | `hook_pickup` | find this agent's work and start (or resume) it | `Hooks::pickup` |
//! | `hook_touch`, `hook_complete` | heartbeat, finish the held work | `chipset hook touch/complete` |
//! | `hook_assign`, `hook_clear` | the dispatcher's side: assign to an empty hook, clear (or `reassign`) | `chipset hook assign/clear` |
//! | `nudge_read`, `nudge_respond` | read (and mark processed), answer the latest nudge | `chipset nudge read/respond` |
//! | `nudge_send` | send a nudge from this agent | `chipset nudge send` |
//! | `mail_send`, `mail_inbox`, `mail_read` | send from this agent, list this agent's inbox, one message whole | `chipset mail send/inbox` |
//! | `mail_archive` | archive a message addressed to this agent | `chipset mail archive` |
//! | `mail_thread`, `mail_pending` | a thread in causal order, a task's unanswered requests | `chipset mail thread/pending` |
//! | `bus_publish` | publish an event with this agent as its source | `chipset bus publish` |
//! | `bus_pending`, `bus_ack`, `bus_wait` | this agent's queue: list, acknowledge, block until events | `chipset bus pending/ack/wait` |
//! | `remind_open`, `remind_list`, `remind_resolve`, `remind_snooze` | reminders | `chipset remind …` |
//! | `lease_acquire`, `lease_renew`, `lease_release`, `lease_list` | path leases held by this agent (fenced by token; `force` releases another's, mailing it) | `chipset lease …` |
//! | `work_ready`, `work_claim`, `work_release` | the work pool: ready items by priority and age; claim one onto this agent's hook (exactly once); give it back with a reason | `chipset work ready/claim/release` |
//! | `status` | this agent's hook, nudge, inbox, bus and the open reminders | `chipset status` |
//! | `agent_whois`, `agent_list` | an agent's profile and last seen; the registered agents by role and last seen | `chipset agent whois/list` |
//! | `search` | words across every agent's mail, bus events, hook titles and reminders, ranked, with snippets | `chipset search` |
//! | `brief` | what needs this agent now, one entry per kind of work | `chipset brief` |
//! | `wait` | block until anything needs this agent, then the brief | `chipset wait` |
//!
//! Each tool has a title, annotations (`readOnlyHint`, `destructiveHint`,
//! `idempotentHint`; every tool's world is the state root, so
//! `openWorldHint` is false) and an input schema (derived with `schemars`;
//! unknown fields are refused; the constraints the libraries enforce, such
//! as a kebab-case subject or an id that is one path segment, are in it as
//! patterns, and its bounds, lengths and item counts are enforced as
//! stated). A read-only tool changes nothing any reader sees, but it may
//! write a cache: `mail_pending` the gate's (`mail/.gate/`), `search` its
//! index (`.index/search/`), `bus_wait` an agent's empty queue folder to
//! watch. Each is derived from the state and rebuilt when missing, so the
//! hint holds for what the tools answer. Numbers and flags are also taken as text (`"5"`, `"true"`), as
//! some clients send every argument as a string (the MCP Inspector's
//! `--tool-arg k=v`). A result carries the structured JSON
//! (`structuredContent`, a typed [`view`], the library records in their
//! serde form, as `chipset --json` prints them), which matches the tool's
//! `outputSchema`, and a short text rendering.
//!
//! # Listings
//!
//! A tool that returns a list shows at most `limit` entries (20 unless
//! asked, at most 1000) and says how many there are in all (`total`), so a
//! full inbox cannot flood an agent's context. Mail listings leave the
//! bodies out unless asked (`bodies: true`; each entry says its
//! `body_chars`), `mail_read` shows one message whole, and `mail_inbox`
//! pages with `since` (the last id seen, or a time).
//!
//! # Acting as one agent
//!
//! The agent comes from the server's configuration ([`Server::new`],
//! `--agent`): it is the sender of `nudge_send`, `mail_send` and the source
//! of `bus_publish`, the owner of the hook, nudge, inbox and queue the other
//! tools read, and the only addressee whose messages `mail_archive` files.
//! No tool takes a parameter saying who the caller is, so an agent cannot
//! act as another by passing a name.
//!
//! `remind_open` addresses the reminder to this agent unless `to` names
//! another (reminders are shared by the root; `to` is who must act on it, as
//! `chipset remind open --agent`), so it shows in that agent's brief.
//!
//! # The brief as a resource
//!
//! The agent's attention state is the resource `chipset://agent/{agent}/brief`
//! ([`Server::brief_uri`]; `application/json`, the `brief` tool's structured
//! result: [`chipset_loop::Brief`]). A client that subscribes gets
//! `notifications/resources/updated` each time the brief changes: work
//! arriving on any channel, or going away. The watch is chipset-loop's
//! [`Attention::subscribe`](chipset_loop::Attention::subscribe) (inotify on the
//! agent's hook, nudge directory, inbox, queue and the reminder indexes,
//! with a rescan every second as the safety net), so an idle agent costs
//! nothing until something needs it. Both subscription forms are served:
//! `resources/subscribe` (protocol versions before 2026-07-28, which the MCP
//! Inspector and most hosts speak) and `subscriptions/listen` (2026-07-28).
//! Only the server's own agent's brief is offered.
//!
//! # Errors
//!
//! A refused operation is a tool error (`isError: true`), not a protocol
//! error, so the agent sees why: its text is exactly the line the command
//! line prints after `chipset: error: ` (both come from
//! [`chipset_failure::Failure`]). Its `_meta` holds, under `chipset/error`
//! ([`ERROR_META`]), `{"error": <that line>, "class": "usage" |
//! "outcome_unknown" | "refused", "kind": …}` (as the command line exits
//! 2, 3 or 1; `kind` is the
//! failure's [`ErrorKind`](chipset_store::ErrorKind): `stale` when the
//! work was taken away, `outcome_unknown` when the change may have been
//! made and the same request, with the same ids, is to be retried). A
//! failure has no structured content: that is checked against the tool's
//! output schema, which describes success, and a validating client (the
//! MCP Inspector, the TypeScript SDK) would show a schema error instead.
//! A listing that met unreadable files returns what it could read as text
//! and, beside the refusal, in `_meta`, with `isError` set, as the command
//! line prints the listing and fails. Arguments that do not match a tool's
//! input schema (a missing field, an unknown one such as `agent`, a string
//! where a number goes) are a `usage` error naming the field and the JSON
//! type expected.
//!
//! A server that cannot serve at all (`chipset mcp` without a state root)
//! still answers: [`refuse_stdio`] sends the reason as the error of the
//! client's `initialize`, which a host shows, rather than closing the
//! connection without a word.
//!
//! # Transports
//!
//! [`run_stdio`] serves one client on stdin and stdout (what agent hosts
//! spawn), one JSON-RPC message a line. A line that is not JSON (not
//! UTF-8, cut short, or over 16 MiB, which is not held in memory) is
//! answered with `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,
//! "message":"Parse error","data":…}}`, and JSON that is no JSON-RPC
//! message (an array, no `"jsonrpc":"2.0"`, a `method` that is not a
//! string, …) with `-32600` `"Invalid Request"`, carrying the object's
//! `id` when it is a string or a number (and the object no response),
//! else `null`; the server then reads on. A notification is never
//! answered, even one whose params do not parse, and a blank line is
//! skipped. Each line out is written whole, so an answer never splits
//! another. [`run_http`] serves streamable HTTP at `http://ADDR/mcp`
//! ([`MCP_PATH`]): only on loopback addresses unless a bearer [`Token`] is
//! configured, and then every request must carry `Authorization: Bearer
//! <token>` or gets `401 Unauthorized`; a non-loopback address without a
//! token is refused before binding ([`Error::NonLoopbackWithoutToken`]).
//! Without a token the SDK also checks the `Host` header against loopback
//! names, against DNS rebinding. A JSON POST whose body is no JSON-RPC
//! message (an empty one too) gets `400 Bad Request` with the same
//! `-32700` or `-32600` error as on stdio, once the SDK's checks before
//! the body (host, `Accept`, content type) have passed; one over 4 MiB
//! gets `413 Payload Too Large`. [`serve_stdio`] and [`serve_http`] are the
//! async forms for callers that run their own tokio runtime.
//!
//! # Blocking
//!
//! Every library call is file I/O and runs on tokio's blocking pool, so a
//! slow disk does not stall other sessions. `bus_wait` and `wait` (default
//! 60 seconds, at most 3600) await the libraries' async waits, which watch
//! on threads of their own, and end at once when the client cancels the
//! request.

#![forbid(unsafe_code)]

mod error;
mod http;
mod ops;
mod params;
mod refuse;
mod schema;
mod server;
mod stdio;
pub mod view;
mod watch;

use std::net::SocketAddr;

use rmcp::ServiceExt as _;

pub use crate::error::{Error, Result};
pub use crate::http::{HttpOptions, MCP_PATH, Token, serve_http};
pub use crate::refuse::refuse_stdio;
pub use crate::server::{ERROR_META, Server};

/// Serves `server` on stdin and stdout until the client hangs up.
///
/// # Errors
///
/// [`Error::Initialize`] when the client does not complete the MCP
/// handshake; [`Error::Serve`].
pub async fn serve_stdio(server: Server) -> Result<()> {
    serve_lines(server, tokio::io::stdin(), tokio::io::stdout()).await
}

/// Serves `server` on newline-delimited JSON-RPC over `read` and `write`
/// until `read` ends: [`serve_stdio`] on any pair of streams.
async fn serve_lines<R, W>(server: Server, read: R, write: W) -> Result<()>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let running = server
        .serve(stdio::Lines::new(read, write, stdio::MAX_LINE))
        .await
        .map_err(|e| Error::Initialize(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| Error::Serve(e.to_string()))?;
    Ok(())
}

/// Runs [`serve_stdio`] on a new tokio runtime, blocking until the client
/// hangs up.
///
/// # Errors
///
/// [`Error::Runtime`]; as [`serve_stdio`].
pub fn run_stdio(server: Server) -> Result<()> {
    runtime()?.block_on(serve_stdio(server))
}

/// Runs [`serve_http`] on a new tokio runtime until SIGINT or SIGTERM,
/// calling `on_listening` with the bound address once it accepts requests.
///
/// # Errors
///
/// [`Error::Runtime`]; as [`serve_http`].
pub fn run_http(
    server: Server,
    options: HttpOptions,
    on_listening: impl FnOnce(SocketAddr),
) -> Result<()> {
    options.check()?;
    runtime()?.block_on(serve_http(server, options, on_listening, terminated()))
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime)
}

/// Completes on SIGINT or SIGTERM.
async fn terminated() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            // Without a handler, SIGTERM keeps its default action.
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
}
