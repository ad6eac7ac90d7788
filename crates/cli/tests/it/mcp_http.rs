//! `chipset mcp --http`: streamable HTTP on loopback, and with a bearer
//! token anywhere.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Child, Stdio};

use rmcp::ServiceExt as _;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

use crate::Env;
use crate::mcp::{Client, TOOLS, call, cli_error, ok, refused, runtime};

/// A running `chipset mcp --http`, killed on drop.
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    fn start(env: &Env, extra: &[&str], token: Option<&str>) -> HttpServer {
        let mut args = vec!["mcp", "--agent", "a", "--http", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let mut cmd = env.command(&args);
        if let Some(token) = token {
            cmd.env("CHIPSET_TEST_TOKEN", token);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stderr.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("chipset: listening on ")
            .unwrap_or_else(|| panic!("no listening line: {line:?}"))
            .to_owned();
        HttpServer { child, url }
    }

    /// Returns the status code of a bare `initialize` POST with `authorization`.
    fn post_status(&self, authorization: Option<&str>) -> u16 {
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
        let auth = authorization.map_or_else(String::new, |a| format!("Authorization: {a}\r\n"));
        let accept = "Accept: application/json, text/event-stream\r\n";
        self.post(&format!("{accept}{auth}"), body.as_bytes()).0
    }

    /// POSTs `body` as JSON with the `headers` lines; returns the status
    /// and the response's body.
    fn post(&self, headers: &str, body: &[u8]) -> (u16, String) {
        let length = format!("{headers}Content-Length: {}\r\n", body.len());
        self.exchange(&length, &[body])
    }

    /// POSTs `chunks` as JSON of no declared length, each a chunk of its
    /// own; returns the status and the response's body.
    fn post_chunked(&self, headers: &str, chunks: &[&[u8]]) -> (u16, String) {
        let mut framed = Vec::new();
        for chunk in chunks {
            framed.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
            framed.extend_from_slice(chunk);
            framed.extend_from_slice(b"\r\n");
        }
        framed.extend_from_slice(b"0\r\n\r\n");
        self.exchange(
            &format!("{headers}Transfer-Encoding: chunked\r\n"),
            &[&framed],
        )
    }

    /// Sends a JSON POST with the `headers` lines and the `body` parts.
    fn exchange(&self, headers: &str, body: &[&[u8]]) -> (u16, String) {
        let rest = self.url.strip_prefix("http://").unwrap();
        let (authority, path) = rest.split_once('/').unwrap();
        let head = format!(
            "POST /{path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
             {headers}Connection: close\r\n\r\n"
        );
        let mut stream = TcpStream::connect(authority).unwrap();
        stream.write_all(head.as_bytes()).unwrap();
        for part in body {
            // The server may answer (413) before it has read all of it.
            let _ = stream.write_all(part);
        }
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response);
        let status = response
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("not an HTTP response: {response:?}"));
        let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        (status, body.to_owned())
    }

    async fn connect(&self, token: Option<&str>) -> Client {
        let mut config = StreamableHttpClientTransportConfig::with_uri(self.url.as_str());
        if let Some(token) = token {
            config = config.auth_header(token);
        }
        ().serve(StreamableHttpClientTransport::from_config(config))
            .await
            .unwrap()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn http_on_loopback_serves_the_same_tools() {
    let env = Env::new();
    let server = HttpServer::start(&env, &[], None);
    assert!(server.url.starts_with("http://127.0.0.1:") && server.url.ends_with("/mcp"));
    runtime().block_on(async {
        let c = server.connect(None).await;
        let tools = c.list_all_tools().await.unwrap();
        assert_eq!(tools.len(), TOOLS.len());
        let r = call(&c, "bus_publish", json!({"to": "b", "kind": "ping"})).await;
        assert_eq!(ok(&r)["event"]["source"], "a");
        let r = call(&c, "hook_complete", json!({})).await;
        let (_, line) = cli_error(&env, &["hook", "complete", "a"]);
        assert_eq!(refused(&r), line);
        c.cancel().await.unwrap();
    });
    let pending = env.run(&["--json", "bus", "pending", "b"]).json();
    assert_eq!(pending["events"][0]["kind"], "ping");
}

#[test]
fn http_with_a_token_refuses_requests_without_it() {
    let env = Env::new();
    let server = HttpServer::start(&env, &["--token-env", "CHIPSET_TEST_TOKEN"], Some("s3cret"));
    assert_eq!(server.post_status(None), 401);
    assert_eq!(server.post_status(Some("Bearer wrong")), 401);
    assert_eq!(server.post_status(Some("Basic czNjcmV0")), 401);
    assert_eq!(server.post_status(Some("Bearer s3cret")), 200);
    runtime().block_on(async {
        let c = server.connect(Some("s3cret")).await;
        let r = call(&c, "status", json!({})).await;
        assert_eq!(ok(&r)["agent"], "a");
        c.cancel().await.unwrap();
    });

    // The same with the token in a file (its first line).
    let file = env.root().parent().unwrap().join("token");
    std::fs::write(&file, "from-a-file\nignored\n").unwrap();
    let server = HttpServer::start(&env, &["--token-file", file.to_str().unwrap()], None);
    assert_eq!(server.post_status(Some("Bearer s3cret")), 401);
    assert_eq!(server.post_status(Some("Bearer from-a-file")), 200);
}

/// A body that is no JSON-RPC message gets 400 and a JSON-RPC error (rmcp
/// alone answers 415 and a line of text), after rmcp's own checks.
#[test]
fn http_answers_a_body_that_is_no_message_with_a_json_rpc_error() {
    let env = Env::new();
    let server = HttpServer::start(&env, &[], None);
    let accept = "Accept: application/json, text/event-stream\r\n";
    let error = |body: &[u8]| {
        let (status, said) = server.post(accept, body);
        assert_eq!(status, 400, "{said}");
        let said: serde_json::Value = serde_json::from_str(&said).unwrap();
        assert_eq!(said["jsonrpc"], "2.0", "{said}");
        assert!(said.as_object().unwrap().contains_key("id"), "{said}");
        (said["error"]["code"].as_i64().unwrap(), said["id"].clone())
    };
    let null = serde_json::Value::Null;
    assert_eq!(error(b"this is not json"), (-32700, null.clone()));
    assert_eq!(error(b"\xff\xfe"), (-32700, null.clone()));
    let v1 = br#"{"jsonrpc":"1.0","id":8,"method":"tools/list"}"#;
    assert_eq!(error(v1), (-32600, json!(8)));
    assert_eq!(error(b"[]"), (-32600, null.clone()));
    // An empty body is no JSON either (rmcp alone: 415).
    assert_eq!(error(b""), (-32700, null.clone()));
    assert_eq!(error(b" \r\n"), (-32700, null));
    // rmcp's checks come first: without the `Accept` it wants, 406.
    assert_eq!(server.post("", b"this is not json").0, 406);
    // And the server serves on.
    assert_eq!(server.post_status(None), 200);
}

/// A body past the 4 MiB cap gets 413 whether its length is declared or
/// not (the check of the body said 400 to one sent in chunks); one at the
/// cap is read.
#[test]
fn http_refuses_a_body_past_the_cap_with_413_chunked_or_not() {
    let env = Env::new();
    let server = HttpServer::start(&env, &[], None);
    let accept = "Accept: application/json, text/event-stream\r\n";
    let cap = 4 * 1024 * 1024;
    let at_cap = vec![b' '; cap];
    for chunks in [
        &[&at_cap[..], b"x"][..],
        &[&at_cap[..cap / 2], &at_cap[..cap / 2 + 1]],
    ] {
        let (status, said) = server.post_chunked(accept, chunks);
        assert_eq!(status, 413, "{said}");
        assert!(said.contains("exceeds 4194304 bytes"), "{said}");
    }
    let mut over = at_cap.clone();
    over.push(b'x');
    assert_eq!(server.post(accept, &over).0, 413);
    // At the cap: read, and answered as no JSON.
    let (status, said) = server.post_chunked(accept, &[&at_cap]);
    assert_eq!(status, 400, "{said}");
    assert!(said.contains("-32700"), "{said}");
    assert_eq!(server.post_status(None), 200);
}

#[test]
fn http_refuses_to_start_on_a_non_loopback_address_without_a_token() {
    let env = Env::new();
    let run = env.run(&["mcp", "--agent", "a", "--http", "0.0.0.0:0"]);
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr,
        "chipset: error: refusing to serve MCP over HTTP on `0.0.0.0:0` without a token: \
         only loopback addresses are served without one (use 127.0.0.1 or ::1, or give \
         --token-env or --token-file)\n"
    );
    let run = env.run(&[
        "mcp",
        "--agent",
        "a",
        "--http",
        "0.0.0.0:0",
        "--token-env",
        "CHIPSET_NO_SUCH_VAR",
    ]);
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr,
        "chipset: error: no bearer token in the environment variable `CHIPSET_NO_SUCH_VAR` \
         (unset, empty or not UTF-8)\n"
    );
    let run = env.run(&["mcp", "--agent", "a/b"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
}
