//! `chipset mcp` on stdio, spoken to line by line: a line that is not
//! JSON, or JSON that is no JSON-RPC message, gets a JSON-RPC error
//! (rmcp alone stays silent on the first), and the server serves on.

use std::io::{BufRead as _, BufReader, Lines, Write as _};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use serde_json::{Value, json};

use crate::Env;

/// The server as a child process, handshake done.
struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl Server {
    fn start(env: &Env) -> Server {
        let mut child = env
            .command(&["mcp", "--agent", "a"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut server = Server {
            child,
            stdin,
            stdout,
        };
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}});
        server.send(format!("{init}\n").as_bytes());
        let first = server.answer();
        assert_eq!(first["result"]["serverInfo"]["name"], "chipset", "{first}");
        server.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
        server
    }

    fn send(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).unwrap();
        self.stdin.flush().unwrap();
    }

    fn answer(&mut self) -> Value {
        let line = self.stdout.next().expect("an answer").unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    /// Asks for the tools and returns the errors answered before them.
    fn errors_then_tools(&mut self, id: i64) -> Vec<(i64, Value)> {
        let list = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"});
        self.send(format!("{list}\n").as_bytes());
        let mut errors = Vec::new();
        loop {
            let answer = self.answer();
            if answer.get("result").is_some() {
                assert_eq!(answer["id"], id, "{answer}");
                let tools = answer["result"]["tools"].as_array().unwrap();
                assert_eq!(tools.len(), crate::mcp::TOOLS.len(), "{answer}");
                return errors;
            }
            assert_eq!(answer["jsonrpc"], "2.0", "{answer}");
            let code = answer["error"]["code"].as_i64().unwrap();
            let message = answer["error"]["message"].as_str().unwrap();
            let want = match code {
                -32700 => "Parse error",
                -32600 => "Invalid Request",
                _ => panic!("unexpected error {answer}"),
            };
            assert_eq!(message, want, "{answer}");
            assert!(answer.as_object().unwrap().contains_key("id"), "{answer}");
            errors.push((code, answer["id"].clone()));
        }
    }

    /// Hangs up and checks the server ends cleanly.
    fn hang_up(mut self) {
        drop(self.stdin);
        assert!(self.stdout.next().is_none(), "nothing more is said");
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status}");
    }
}

#[test]
fn stdio_answers_a_line_that_is_no_message_and_serves_on() {
    let env = Env::new();
    let mut server = Server::start(&env);
    server.send(b"this is not json\n");
    server.send(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/li\n");
    server.send(b"{\"jsonrpc\":\"1.0\",\"id\":8,\"method\":\"tools/list\"}\n");
    server.send(b"{\"jsonrpc\":\"2.0\",\"id\":\"nine\",\"method\":42}\n");
    server.send(b"[{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"ping\"}]\n");
    // A notification is never answered, even one that does not parse.
    server.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":5}\n");
    let errors = server.errors_then_tools(2);
    assert_eq!(
        errors,
        [
            (-32700, Value::Null),
            (-32700, Value::Null),
            (-32600, json!(8)),
            (-32600, json!("nine")),
            (-32600, Value::Null),
        ]
    );
    // And again: the server is not stuck on a bad line.
    server.send(b"}{\n");
    assert_eq!(server.errors_then_tools(3), [(-32700, Value::Null)]);
    server.hang_up();
}

/// A line past the 16 MiB cap is answered without being held whole, and
/// invalid UTF-8 is a parse error; the server serves on.
#[test]
fn stdio_answers_a_huge_line_and_invalid_utf8_with_a_parse_error() {
    let env = Env::new();
    let mut server = Server::start(&env);
    let mut huge = br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"status","arguments":{"x":""#.to_vec();
    huge.resize(16 * 1024 * 1024 + 1, b'x');
    huge.extend_from_slice(b"\"}}}\n");
    server.send(&huge);
    server.send(b"{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"\xff\xfe\"}\n");
    server.send(b"\xc3\x28\n");
    let errors = server.errors_then_tools(2);
    assert_eq!(errors, vec![(-32700, Value::Null); 3]);
    server.hang_up();
}
