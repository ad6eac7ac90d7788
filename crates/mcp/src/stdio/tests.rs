//! Lines that are no message get a JSON-RPC error, and the server reads
//! on.

use chipset_store::{AgentId, StateDir};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest};
use rmcp::transport::Transport as _;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, DuplexStream};

use super::{Lines, judge, judge_body};
use crate::Server;

/// The answer `judge` gives to `line`, parsed.
fn answered(line: &[u8]) -> Value {
    match judge(line) {
        Err(bytes) => {
            assert_eq!(bytes.last(), Some(&b'\n'), "one line");
            assert!(!bytes[..bytes.len() - 1].contains(&b'\n'), "one line");
            serde_json::from_slice(&bytes).unwrap()
        }
        Ok(m) => panic!("expected an answer to {line:?}, got {m:?}"),
    }
}

fn code_and_id(answer: &Value) -> (i64, Value) {
    assert_eq!(answer["jsonrpc"], "2.0", "{answer}");
    assert!(answer.get("result").is_none(), "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    let code = answer["error"]["code"].as_i64().unwrap();
    let want = if code == -32700 {
        "Parse error"
    } else {
        "Invalid Request"
    };
    assert_eq!(message, want, "{answer}");
    assert!(answer["error"]["data"].is_string(), "{answer}");
    (code, answer["id"].clone())
}

#[test]
fn a_line_that_is_not_json_is_a_parse_error_with_a_null_id() {
    for line in [
        &b"this is not json\n"[..],
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"\n",
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xffng\"}\n",
        b"\xff\xfe\n",
        b"{\"id\":1} trailing\r\n",
    ] {
        let answer = answered(line);
        assert_eq!(code_and_id(&answer), (-32700, Value::Null), "{line:?}");
        // `"id": null`, not left out: JSON-RPC 2.0 says so.
        assert!(answer.as_object().unwrap().contains_key("id"));
    }
    let utf8 = answered(b"\xc3\x28\n");
    assert!(
        utf8["error"]["data"]
            .as_str()
            .unwrap()
            .starts_with("not UTF-8")
    );
}

#[test]
fn json_that_is_no_message_is_an_invalid_request_with_its_readable_id() {
    let cases = [
        (json!([1, 2]), Value::Null),
        (json!([]), Value::Null),
        (json!(42), Value::Null),
        (json!("ping"), Value::Null),
        (json!({}), Value::Null),
        (
            json!({"jsonrpc": "1.0", "id": 7, "method": "tools/list"}),
            json!(7),
        ),
        (json!({"id": "x", "method": "tools/list"}), json!("x")),
        (
            json!({"jsonrpc": "2.0", "id": "x", "method": 5}),
            json!("x"),
        ),
        (
            json!({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}),
            json!(1.5),
        ),
        (
            json!({"jsonrpc": "2.0", "id": null, "method": "ping"}),
            Value::Null,
        ),
        (
            json!({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}),
            Value::Null,
        ),
        (
            json!({"jsonrpc": "2.0", "id": true, "method": "ping"}),
            Value::Null,
        ),
        // A response is not answered with its id: that would read as the
        // answer to the client's own request of that id.
        (
            json!({"jsonrpc": "2.0", "id": 3, "result": {}, "error": {}}),
            Value::Null,
        ),
        (json!({"jsonrpc": "2.0", "id": 3, "error": 5}), Value::Null),
        // A notification needs "jsonrpc": "2.0" to be one.
        (json!({"method": "notifications/initialized"}), Value::Null),
    ];
    for (value, id) in cases {
        let line = format!("{value}\n");
        let answer = answered(line.as_bytes());
        assert_eq!(code_and_id(&answer), (-32600, id), "{value}");
    }
}

#[test]
fn messages_blank_lines_and_notifications_are_not_answered() {
    let ping = b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}\r\n";
    match judge(ping) {
        Ok(Some(ClientJsonRpcMessage::Request(r))) => {
            assert!(matches!(r.request, ClientRequest::PingRequest(_)));
        }
        other => panic!("{other:?}"),
    }
    for line in [
        &b"\n"[..],
        b"\r\n",
        b"   \t\n",
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":5}\n",
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/made-up\",\"params\":[]}\n",
    ] {
        assert!(matches!(judge(line), Ok(None)), "{line:?}");
    }
}

/// A client's end of a transport: what it writes, what it reads.
struct Peer {
    write: DuplexStream,
    read: tokio::io::Lines<BufReader<DuplexStream>>,
}

impl Peer {
    async fn send(&mut self, line: &[u8]) {
        self.write.write_all(line).await.unwrap();
        self.write.flush().await.unwrap();
    }

    /// Ends the server's input: the write end is replaced, so dropped.
    fn end_input(&mut self) {
        self.write = tokio::io::duplex(1).0;
    }

    async fn answer(&mut self) -> Value {
        let line = self.read.next_line().await.unwrap().expect("a line");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }
}

/// A transport with `max_line`, and the client's end of it. The pipes are
/// small, so long lines arrive in many reads.
fn pair(max_line: usize) -> (Lines<DuplexStream>, Peer) {
    let (client_write, server_read) = tokio::io::duplex(4096);
    let (server_write, client_read) = tokio::io::duplex(4096);
    let lines = Lines::new(server_read, server_write, max_line);
    let peer = Peer {
        write: client_write,
        read: BufReader::new(client_read).lines(),
    };
    (lines, peer)
}

fn is_ping(message: Option<ClientJsonRpcMessage>, id: i64) -> bool {
    matches!(message, Some(ClientJsonRpcMessage::Request(r))
        if r.id == rmcp::model::RequestId::Number(id)
            && matches!(r.request, ClientRequest::PingRequest(_)))
}

#[tokio::test]
async fn a_line_past_the_cap_is_a_parse_error_and_the_next_line_is_read() {
    let (mut lines, mut peer) = pair(64);
    let ping = |id: i64| {
        format!(
            "{}\n",
            json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
        )
    };
    let writer = tokio::spawn(async move {
        // Exactly the cap is read; one byte more is not.
        let at_cap = format!("{:<64}\n", ping(1).trim_end());
        peer.send(at_cap.as_bytes()).await;
        let long = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"{}\"}}\n",
            "x".repeat(20_000)
        );
        peer.send(long.as_bytes()).await;
        peer.send(format!("{:<65}\n", ping(3).trim_end()).as_bytes())
            .await;
        peer.send(ping(4).as_bytes()).await;
        peer
    });
    assert!(is_ping(lines.receive().await, 1));
    assert!(is_ping(lines.receive().await, 4));
    let mut peer = writer.await.unwrap();
    for _ in 0..2 {
        let answer = peer.answer().await;
        assert_eq!(code_and_id(&answer), (-32700, Value::Null));
        assert_eq!(answer["error"]["data"], "a line longer than 64 bytes");
    }
    // Nothing else was written, and the pipe is still open.
    drop(peer.write);
    assert!(lines.receive().await.is_none());
    lines.close().await.unwrap();
    drop(lines);
    assert!(peer.read.next_line().await.unwrap().is_none());
}

#[tokio::test]
async fn server_answers_bad_lines_and_serves_on() {
    let tmp = tempfile::tempdir().unwrap();
    let state = StateDir::open(tmp.path().join("state")).unwrap();
    let server = Server::new(state, AgentId::new("a").unwrap());
    let (client_write, server_read) = tokio::io::duplex(4096);
    let (server_write, client_read) = tokio::io::duplex(4096);
    let served = tokio::spawn(crate::serve_lines(server, server_read, server_write));
    let mut peer = Peer {
        write: client_write,
        read: BufReader::new(client_read).lines(),
    };
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}});
    peer.send(format!("{init}\n").as_bytes()).await;
    assert_eq!(peer.answer().await["id"], 1);
    peer.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await;
    peer.send(b"garbage\n").await;
    let answer = peer.answer().await;
    assert_eq!(code_and_id(&answer), (-32700, Value::Null));
    peer.send(b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":[]}\n")
        .await;
    let answer = peer.answer().await;
    assert_eq!(code_and_id(&answer), (-32600, json!(9)));
    peer.send(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}\n")
        .await;
    let listed = peer.answer().await;
    assert_eq!(listed["id"], 2, "{listed}");
    assert!(!listed["result"]["tools"].as_array().unwrap().is_empty());
    drop(peer.write);
    served.await.unwrap().unwrap();
    assert!(peer.read.next_line().await.unwrap().is_none());
}

/// A runtime of one thread, as the refusal's: a task the server spawned
/// runs only when the server waits.
fn one_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

#[test]
fn answers_are_written_before_the_end_of_input_is_reported() {
    // rmcp stops without `close` when the input ends in the handshake,
    // and the runtime then drops the writer: what it had not written is
    // lost unless `receive` waited for it.
    let runtime = one_thread();
    let (mut lines, mut peer) = runtime.block_on(async {
        let (lines, mut peer) = pair(64);
        peer.send(b"garbage\n").await;
        (lines, peer)
    });
    peer.end_input();
    assert!(runtime.block_on(lines.receive()).is_none());
    drop(lines);
    drop(runtime);
    one_thread().block_on(async {
        let answer = peer.answer().await;
        assert_eq!(code_and_id(&answer), (-32700, Value::Null));
        assert!(peer.read.next_line().await.unwrap().is_none());
    });
}

#[tokio::test]
async fn a_last_line_without_its_newline_is_read() {
    let (mut lines, mut peer) = pair(64);
    peer.send(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}")
        .await;
    drop(peer.write);
    assert!(is_ping(lines.receive().await, 1));
    assert!(lines.receive().await.is_none());

    let (mut lines, mut peer) = pair(64);
    peer.send(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"")
        .await;
    peer.end_input();
    assert!(lines.receive().await.is_none());
    let answer = peer.answer().await;
    assert_eq!(code_and_id(&answer), (-32700, Value::Null));
    lines.close().await.unwrap();
    drop(lines);
    assert!(peer.read.next_line().await.unwrap().is_none());
}

#[test]
fn an_empty_http_body_is_a_parse_error_and_a_notification_is_not_answered() {
    for body in [&b""[..], b" \r\n", b"\xEF\xBB\xBF"] {
        let answer: Value = serde_json::from_slice(&judge_body(body).unwrap()).unwrap();
        assert_eq!(code_and_id(&answer), (-32700, Value::Null), "{body:?}");
    }
    let bad = judge_body(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":4}").unwrap();
    let answer: Value = serde_json::from_slice(&bad).unwrap();
    assert_eq!(code_and_id(&answer), (-32600, json!(3)));
    let notification = b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":5}";
    assert!(judge_body(notification).is_none());
    assert!(judge_body(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}").is_none());
}
