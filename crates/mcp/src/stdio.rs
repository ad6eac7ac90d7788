//! The stdio transport: newline-delimited JSON-RPC on a reader and a
//! writer, answering a line that is no message rather than dropping it.
//!
//! rmcp's own (`AsyncRwTransport`) ignores a line that is not JSON, and
//! answers JSON that is no JSON-RPC message with an error that lacks the
//! id, so a client that sent a malformed request waits forever, or cannot
//! tell which request failed. This one reads the lines itself and answers
//! as JSON-RPC 2.0 says, then reads on:
//!
//! - a line that is not JSON (not UTF-8, cut short, or longer than
//!   [`MAX_LINE`] bytes): `-32700 Parse error`, id `null`;
//! - JSON that is no message (not an object, no `"jsonrpc": "2.0"`, a
//!   `method` that is not a string, an id that is neither string nor
//!   number, …): `-32600 Invalid Request`, with the object's `id` when it
//!   is a string or a number and the object is not a response, else `null`.
//!
//! A notification (`"jsonrpc": "2.0"`, a string `method`, no `id`) is never
//! answered, as JSON-RPC says, even when its params do not parse; a blank
//! line is skipped. A last line without its newline is read as a line, as
//! rmcp reads it, and the answers to bad lines are written before the end
//! of input is reported, so none is lost when the server stops there.
//! Every line out, the server's and these answers, is written whole by one
//! task, so no two ever mix.

use std::future::Future;
use std::io;

use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ErrorCode, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};
use tokio::sync::{mpsc, oneshot};

/// The longest line read, in bytes without its newline: 16 MiB, the cap
/// of rmcp's own stdio transport. A longer line is answered with a parse
/// error and skipped without being held in memory.
pub(crate) const MAX_LINE: usize = 16 * 1024 * 1024;

/// Lines queued for the writer before senders wait: a client that writes
/// without reading is slowed down, not buffered for without end.
const QUEUE: usize = 64;

/// UTF-8's byte order mark, which a JSON reader may ignore (RFC 8259 §8.1).
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// One line for the writer, and where to say it was written.
struct Outgoing {
    bytes: Vec<u8>,
    done: Option<oneshot::Sender<io::Result<()>>>,
}

/// What one read gave.
enum Read {
    /// A whole line is in `line`.
    Line,
    /// The line passed the cap; what was read of it is dropped.
    Oversized,
    Eof,
    Failed(io::Error),
}

/// Newline-delimited JSON-RPC over `R` and a writer task.
pub(crate) struct Lines<R> {
    read: BufReader<R>,
    /// The line being read; it survives a cancelled `receive`.
    line: Vec<u8>,
    /// Skipping the rest of a line that passed the cap.
    discarding: bool,
    max_line: usize,
    out: mpsc::Sender<Outgoing>,
    /// An answer to a bad line, not yet queued for the writer.
    pending: Option<Vec<u8>>,
}

impl<R: AsyncRead + Send + Unpin + 'static> Lines<R> {
    /// Reads from `read` and writes to `write` on a task of its own; must
    /// be called inside a tokio runtime.
    pub(crate) fn new<W>(read: R, write: W, max_line: usize) -> Self
    where
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let (out, queue) = mpsc::channel(QUEUE);
        tokio::spawn(write_lines(write, queue));
        Lines {
            read: BufReader::new(read),
            line: Vec::new(),
            discarding: false,
            max_line,
            out,
            pending: None,
        }
    }

    /// Reads up to and with the next newline into `line`, never holding
    /// more than `max_line` bytes of it. Cancel-safe: what was read stays
    /// in `line` (or `discarding`) for the next call.
    async fn read_line(&mut self) -> Read {
        loop {
            let available = match self.read.fill_buf().await {
                Ok(available) => available,
                Err(e) => return Read::Failed(e),
            };
            if available.is_empty() {
                // A last line without its newline is still a line, as rmcp's
                // own transport reads it: it is served or answered, never
                // dropped without a word. The next call sees the end.
                if !self.line.is_empty() && !self.discarding {
                    return Read::Line;
                }
                return Read::Eof;
            }
            let newline = available.iter().position(|&b| b == b'\n');
            let take = newline.map_or(available.len(), |at| at + 1);
            let mut got = None;
            if self.discarding {
                self.discarding = newline.is_none();
            } else if self.line.len() + newline.unwrap_or(take) > self.max_line {
                self.line.clear();
                self.discarding = newline.is_none();
                got = Some(Read::Oversized);
            } else {
                self.line.extend_from_slice(&available[..take]);
                if newline.is_some() {
                    got = Some(Read::Line);
                }
            }
            self.read.consume(take);
            if let Some(got) = got {
                return got;
            }
        }
    }
}

impl<R: AsyncRead + Send + Unpin + 'static> Transport<RoleServer> for Lines<R> {
    type Error = io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = io::Result<()>> + Send + 'static {
        let out = self.out.clone();
        let bytes = serde_json::to_vec(&item);
        async move {
            let mut bytes = bytes.map_err(io::Error::from)?;
            bytes.push(b'\n');
            let (done, written) = oneshot::channel();
            let line = Outgoing {
                bytes,
                done: Some(done),
            };
            out.send(line).await.map_err(|_| closed())?;
            written.await.map_err(|_| closed())?
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            if self.pending.is_some() {
                // `reserve` is cancel-safe, and nothing after it waits.
                let permit = self.out.reserve().await.ok()?;
                if let Some(bytes) = self.pending.take() {
                    permit.send(Outgoing { bytes, done: None });
                }
            }
            match self.read_line().await {
                Read::Line => {}
                Read::Oversized => {
                    let why = format!("a line longer than {} bytes", self.max_line);
                    tracing::debug!("answering a parse error: {why}");
                    self.pending = Some(answer(ErrorCode::PARSE_ERROR, &Value::Null, &why));
                    continue;
                }
                // rmcp may stop without `close` (a handshake cut short), so
                // the answers to bad lines are written before it hears of the end.
                Read::Eof => {
                    written(&self.out).await;
                    return None;
                }
                Read::Failed(e) => {
                    tracing::error!("reading the client's messages failed: {e}");
                    written(&self.out).await;
                    return None;
                }
            }
            let verdict = judge(&self.line);
            self.line.clear();
            match verdict {
                Ok(Some(message)) => return Some(message),
                Ok(None) => {}
                Err(bytes) => self.pending = Some(bytes),
            }
        }
    }

    async fn close(&mut self) -> io::Result<()> {
        if let Some(bytes) = self.pending.take() {
            let _ = self.out.send(Outgoing { bytes, done: None }).await;
        }
        written(&self.out).await;
        Ok(())
    }
}

/// Waits until every line queued on `out` so far is written, or its
/// write failed. Cancel-safe: a cancelled wait leaves nothing behind but
/// an empty line for the writer.
async fn written(out: &mpsc::Sender<Outgoing>) {
    // An empty line written is a barrier: once it is, so is every line
    // queued before it.
    let (done, written) = oneshot::channel();
    let barrier = Outgoing {
        bytes: Vec::new(),
        done: Some(done),
    };
    if out.send(barrier).await.is_ok() {
        let _ = written.await;
    }
}

/// Writes each queued line whole, in order, flushing after each. After a
/// failed write (the line may be cut short) it writes nothing more, so no
/// line is ever glued to a broken one.
async fn write_lines<W: AsyncWrite + Unpin>(mut write: W, mut queue: mpsc::Receiver<Outgoing>) {
    let mut broken = None;
    while let Some(Outgoing { bytes, done }) = queue.recv().await {
        let result = match broken {
            Some(kind) => Err(io::Error::new(
                kind,
                "an earlier write to the client failed",
            )),
            None => {
                let result = async {
                    write.write_all(&bytes).await?;
                    write.flush().await
                }
                .await;
                broken = result.as_ref().err().map(io::Error::kind);
                result
            }
        };
        match done {
            Some(done) => {
                let _ = done.send(result);
            }
            None => {
                if let Err(e) = result {
                    tracing::debug!("answering a bad line failed: {e}");
                }
            }
        }
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "the transport is closed")
}

/// The message on a line (with its newline), nothing to do (a blank line,
/// a notification that does not parse), or the answer to write (a line).
/// An HTTP request's body is judged the same way, by [`judge_body`].
fn judge(line: &[u8]) -> Result<Option<ClientJsonRpcMessage>, Vec<u8>> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(BOM).unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    if let Err(e) = std::str::from_utf8(line) {
        let why = format!("not UTF-8: {e}");
        return Err(answer(ErrorCode::PARSE_ERROR, &Value::Null, &why));
    }
    let not_message = match serde_json::from_slice::<ClientJsonRpcMessage>(line) {
        Ok(message) => return Ok(Some(message)),
        Err(e) => e,
    };
    match serde_json::from_slice::<Value>(line) {
        Err(e) => Err(answer(ErrorCode::PARSE_ERROR, &Value::Null, &e.to_string())),
        Ok(value) if is_notification(&value) => {
            tracing::debug!("ignoring a notification that does not parse: {not_message}");
            Ok(None)
        }
        Ok(value) => Err(answer(
            ErrorCode::INVALID_REQUEST,
            &readable_id(&value),
            &not_message.to_string(),
        )),
    }
}

/// The answer to an HTTP request's body that is no message, if it is
/// none: as [`judge`] gives it, and for a blank body, which over HTTP is
/// no line to skip but a body that is not JSON, a parse error.
pub(crate) fn judge_body(body: &[u8]) -> Option<Vec<u8>> {
    match judge(body) {
        Err(answer) => Some(answer),
        Ok(Some(_)) => None,
        Ok(None) => {
            let body = body.strip_prefix(BOM).unwrap_or(body);
            body.iter()
                .all(u8::is_ascii_whitespace)
                .then(|| answer(ErrorCode::PARSE_ERROR, &Value::Null, "an empty body"))
        }
    }
}

/// A JSON-RPC 2.0 notification: it is never answered.
fn is_notification(value: &Value) -> bool {
    value.get("jsonrpc").is_some_and(|v| v == "2.0")
        && value.get("method").is_some_and(Value::is_string)
        && value.get("id").is_none()
}

/// The id an answer to `value` carries: its own when it is a string or a
/// number, unless `value` is a response (answering that with its id would
/// read as the answer to the client's own request); else `null`.
fn readable_id(value: &Value) -> Value {
    if value.get("result").is_some() || value.get("error").is_some() {
        return Value::Null;
    }
    match value.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
        _ => Value::Null,
    }
}

/// A JSON-RPC error response, as a line.
fn answer(code: ErrorCode, id: &Value, why: &str) -> Vec<u8> {
    #[derive(Serialize)]
    struct Response<'a> {
        jsonrpc: &'static str,
        id: &'a Value,
        error: Failure<'a>,
    }
    #[derive(Serialize)]
    struct Failure<'a> {
        code: i32,
        message: &'static str,
        data: &'a str,
    }
    let message = if code == ErrorCode::PARSE_ERROR {
        "Parse error"
    } else {
        "Invalid Request"
    };
    let response = Response {
        jsonrpc: "2.0",
        id,
        error: Failure {
            code: code.0,
            message,
            data: why,
        },
    };
    // Strings and a JSON value always serialise.
    let mut bytes = serde_json::to_vec(&response).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

#[cfg(test)]
#[path = "stdio/tests.rs"]
mod tests;
