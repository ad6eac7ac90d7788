//! `chipset mcp`: the real binary driven by rmcp's client over stdio;
//! refusals are tool errors carrying the command line's message. The
//! helpers here serve `mcp_http`, `mcp_brief` and `mcp_tools` too.

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt as _};
use serde_json::{Value, json};

use crate::Env;

pub(crate) type Client = RunningService<RoleClient, ()>;

/// Every tool the server must offer.
pub(crate) const TOOLS: [&str; 37] = [
    "agent_list",
    "agent_list_add",
    "agent_list_remove",
    "agent_whois",
    "brief",
    "bus_ack",
    "bus_pending",
    "bus_publish",
    "bus_wait",
    "hook_assign",
    "hook_clear",
    "hook_complete",
    "hook_pickup",
    "hook_touch",
    "lease_acquire",
    "lease_list",
    "lease_release",
    "lease_renew",
    "mail_archive",
    "mail_inbox",
    "mail_pending",
    "mail_read",
    "mail_send",
    "mail_thread",
    "nudge_read",
    "nudge_respond",
    "nudge_send",
    "remind_list",
    "remind_open",
    "remind_resolve",
    "remind_snooze",
    "search",
    "status",
    "wait",
    "work_claim",
    "work_ready",
    "work_release",
];

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Starts `chipset mcp --agent AGENT` on stdio and connects to it.
pub(crate) async fn stdio(env: &Env, agent: &str) -> Client {
    let cmd = tokio::process::Command::from(env.command(&["mcp", "--agent", agent]));
    let transport = TokioChildProcess::new(cmd).unwrap();
    ().serve(transport).await.unwrap()
}

/// Starts `chipset mcp --agent AGENT` on stdio and connects with `handler`.
pub(crate) async fn stdio_with<H: ClientHandler>(
    env: &Env,
    agent: &str,
    handler: H,
) -> RunningService<RoleClient, H> {
    let cmd = tokio::process::Command::from(env.command(&["mcp", "--agent", agent]));
    let transport = TokioChildProcess::new(cmd).unwrap();
    handler.serve(transport).await.unwrap()
}

/// Calls a tool and returns its result.
pub(crate) async fn call<H: ClientHandler>(
    client: &RunningService<RoleClient, H>,
    tool: &'static str,
    args: Value,
) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("tool arguments are an object")
    };
    client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("{tool} failed as a request: {e}"))
}

/// Returns the structured content of a successful result.
pub(crate) fn ok(result: &CallToolResult) -> &Value {
    assert_eq!(result.is_error, Some(false), "expected success: {result:?}");
    result
        .structured_content
        .as_ref()
        .expect("every tool returns structured content")
}

/// Returns the document of a failed result (`_meta["chipset/error"]`),
/// checking it carries no structured content: a validating client would
/// check that against the tool's output schema, which describes success.
pub(crate) fn refusal(result: &CallToolResult) -> &Value {
    assert_eq!(
        result.is_error,
        Some(true),
        "expected a tool error: {result:?}"
    );
    assert_eq!(result.structured_content, None, "{result:?}");
    result
        .meta
        .as_ref()
        .and_then(|m| m.0.get("chipset/error"))
        .expect("a failure's document under _meta")
}

/// Returns the error line of a failed result, checking it is the
/// document's `error` too.
pub(crate) fn refused(result: &CallToolResult) -> String {
    let doc = refusal(result);
    let line = doc["error"].as_str().unwrap().to_owned();
    let last = result.content.last().unwrap().as_text().unwrap();
    assert_eq!(last.text, line, "the text names the same failure");
    line
}

/// Returns the text rendering of a result.
pub(crate) fn text(result: &CallToolResult) -> String {
    result.content[0].as_text().unwrap().text.clone()
}

/// Returns what the command line prints after `chipset: error: `.
pub(crate) fn cli_error(env: &Env, args: &[&str]) -> (i32, String) {
    let run = env.run(args);
    let line = run
        .stderr
        .strip_prefix("chipset: error: ")
        .unwrap_or_else(|| panic!("not one error line: {:?}", run.stderr))
        .trim_end()
        .to_owned();
    (
        run.code,
        line.replace("[ROOT]", &env.root().display().to_string()),
    )
}

#[test]
fn stdio_lists_every_tool_with_an_input_schema_and_no_caller_parameter() {
    let env = Env::new();
    runtime().block_on(async {
        let client = stdio(&env, "a").await;
        let tools = client.list_all_tools().await.unwrap();
        let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        names.sort_unstable();
        assert_eq!(names, TOOLS);
        for tool in &tools {
            let schema = Value::Object((*tool.input_schema).clone());
            assert_eq!(schema["type"], "object", "{}", tool.name);
            let props = schema["properties"].as_object();
            for who in ["from", "agent", "as", "source", "sender"] {
                assert!(
                    props.is_none_or(|p| !p.contains_key(who)),
                    "{} takes `{who}`: an agent could act as another",
                    tool.name
                );
            }
            assert!(tool.description.as_ref().is_some_and(|d| !d.is_empty()));
        }
        let send = tools.iter().find(|t| t.name == "mail_send").unwrap();
        let schema = Value::Object((*send.input_schema).clone());
        let mut required: Vec<&str> = schema["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        required.sort_unstable();
        assert_eq!(required, ["body", "kind", "subject", "to"]);
        // The server names itself (not the SDK it is built on), and its
        // instructions name every family of tools.
        let info = client.peer_info().expect("initialized");
        let server = info.server_info.as_ref().expect("the server names itself");
        assert_eq!(server.name, "chipset");
        assert_eq!(server.version, env!("CARGO_PKG_VERSION"));
        let said = info.instructions.as_deref().unwrap_or_default();
        for family in [
            "hook", "nudge", "mail", "bus", "remind", "lease", "work", "agent", "search",
        ] {
            assert!(said.contains(family), "{family} missing from {said:?}");
        }
        client.cancel().await.unwrap();
    });
}

#[test]
fn stdio_every_tool_acts_as_the_configured_agent() {
    let env = Env::new();
    // The dispatcher and the other agents use the command line.
    assert_eq!(
        env.run(&["hook", "assign", "a", "--bead", "gt-1", "--title", "Fix it"])
            .code,
        0
    );
    let request = env
        .run(&[
            "mail",
            "send",
            "--from",
            "b",
            "--to",
            "a",
            "--kind",
            "request",
            "--subject",
            "review",
            "--body",
            "please look",
            "--task",
            "t1",
        ])
        .line();
    let notice = env
        .run(&[
            "mail",
            "send",
            "--from",
            "b",
            "--to",
            "a",
            "--kind",
            "notify",
            "--subject",
            "fyi",
            "--body",
            "heads up",
            "--task",
            "t1",
        ])
        .line();
    assert_eq!(
        env.run(&[
            "nudge",
            "send",
            "--from",
            "witness",
            "--to",
            "a",
            "--type",
            "health_check",
            "--message",
            "alive?",
            "--requires-response",
        ])
        .code,
        0
    );
    runtime().block_on(async {
        let c = stdio(&env, "a").await;

        // hook: pickup starts the pending work, touch and complete it.
        let r = call(&c, "hook_pickup", json!({})).await;
        assert_eq!(ok(&r)["outcome"], "started");
        assert_eq!(ok(&r)["assignment"]["work"]["bead_id"], "gt-1");
        assert_eq!(ok(&r)["assignment"]["agent"], "a");
        assert!(
            text(&r).starts_with("started gt-1 (Fix it)"),
            "{}",
            text(&r)
        );
        let r = call(&c, "hook_touch", json!({})).await;
        assert_eq!(ok(&r)["status"], "active");
        let r = call(&c, "hook_complete", json!({})).await;
        assert_eq!(ok(&r)["status"], "completed");
        assert_eq!(text(&r), "a: completed gt-1\n");
        let r = call(&c, "hook_pickup", json!({})).await;
        assert_eq!(ok(&r)["outcome"], "awaiting_clear");

        // nudge: read marks it processed, respond answers the sender.
        let r = call(&c, "nudge_read", json!({})).await;
        assert_eq!(ok(&r)["state"], "new");
        assert_eq!(ok(&r)["nudge"]["from"], "witness");
        let r = call(&c, "nudge_read", json!({})).await;
        assert_eq!(ok(&r)["state"], "seen");
        let r = call(&c, "nudge_respond", json!({"message": "yes"})).await;
        assert_eq!(ok(&r)["response"]["message"], "yes");
        assert_eq!(ok(&r)["response"]["from"], "a");
        let r = call(
            &c,
            "nudge_send",
            json!({"to": "b", "type": "sync_request", "message": "sync"}),
        )
        .await;
        assert_eq!(ok(&r)["outcome"], "delivered");
        let seen = env.run(&["--json", "nudge", "read", "b"]).json();
        assert_eq!(seen["nudge"]["from"], "a", "sent as the server's agent");

        // mail: the inbox is a's; the reply goes out from a.
        let r = call(&c, "mail_inbox", json!({})).await;
        let messages = ok(&r)["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0]["id"], request.as_str());
        assert!(
            !text(&r).contains("please look"),
            "bodies are off by default"
        );
        let r = call(&c, "mail_read", json!({"id": request})).await;
        assert_eq!(ok(&r)["body"], "please look");
        let r = call(&c, "mail_pending", json!({"task": "t1"})).await;
        assert_eq!(ok(&r)["messages"].as_array().unwrap().len(), 1);
        let r = call(
            &c,
            "mail_send",
            json!({"to": "b", "kind": "response", "subject": "review", "body": "done",
                   "in_reply_to": request}),
        )
        .await;
        assert_eq!(ok(&r)["from"], "a");
        let reply = ok(&r)["id"].as_str().unwrap().to_owned();
        let r = call(&c, "mail_thread", json!({"id": request})).await;
        let ids: Vec<&str> = ok(&r)["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, [request.as_str(), reply.as_str()]);
        let r = call(&c, "mail_pending", json!({"task": "t1"})).await;
        assert_eq!(ok(&r)["messages"], json!([]));
        // The response archived the request it answers.
        let r = call(&c, "mail_archive", json!({"id": request})).await;
        assert_eq!(ok(&r)["outcome"], "already-archived");
        let r = call(&c, "mail_archive", json!({"id": notice})).await;
        assert_eq!(ok(&r)["outcome"], "archived");
        assert_eq!(ok(&r)["message"]["id"], notice.as_str());

        // bus: publish (the source is a), pending, ack, wait.
        let r = call(
            &c,
            "bus_publish",
            json!({"to": "a", "kind": "build-failed", "priority": "high",
                   "payload": {"n": 1}, "dedup_key": "k1"}),
        )
        .await;
        assert_eq!(ok(&r)["outcome"], "delivered");
        assert_eq!(ok(&r)["event"]["source"], "a");
        let event = ok(&r)["event"]["id"].as_str().unwrap().to_owned();
        let r = call(
            &c,
            "bus_publish",
            json!({"to": "a", "kind": "build-failed", "dedup_key": "k1"}),
        )
        .await;
        assert_eq!(ok(&r)["outcome"], "duplicate");
        let r = call(&c, "bus_pending", json!({})).await;
        assert_eq!(ok(&r)["events"][0]["id"], event.as_str());
        let r = call(&c, "bus_wait", json!({"timeout_seconds": 5})).await;
        assert_eq!(ok(&r)["timed_out"], false, "pending events return at once");
        let r = call(&c, "bus_ack", json!({"event_id": event})).await;
        assert_eq!(ok(&r)["outcome"], "acked");
        let r = call(&c, "bus_wait", json!({"timeout_seconds": 0.2})).await;
        assert_eq!(ok(&r)["timed_out"], true);
        assert_eq!(ok(&r)["events"], json!([]));
        let waiting = call(&c, "bus_wait", json!({"timeout_seconds": 60}));
        let publisher = async {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            let run = env.run(&[
                "bus", "publish", "--to", "a", "--source", "ci", "--kind", "green",
            ]);
            assert_eq!(run.code, 0);
        };
        let (r, ()) = tokio::join!(waiting, publisher);
        assert_eq!(ok(&r)["timed_out"], false);
        assert_eq!(ok(&r)["events"][0]["kind"], "green");

        // remind: open, list, snooze, resolve.
        let r = call(
            &c,
            "remind_open",
            json!({"kind": "spec_draft", "source_type": "spec", "source_id": "s-1",
                   "message": "finish the spec"}),
        )
        .await;
        assert_eq!(ok(&r)["outcome"], "opened");
        let reminder = ok(&r)["reminder"]["id"].as_str().unwrap().to_owned();
        let r = call(&c, "remind_list", json!({})).await;
        assert_eq!(ok(&r)["reminders"][0]["id"], reminder.as_str());
        let r = call(&c, "remind_snooze", json!({"id": reminder, "hours": 2})).await;
        assert!(ok(&r)["snooze_until"].is_string());
        let r = call(
            &c,
            "remind_resolve",
            json!({"id": reminder, "resolution": "completed", "note": "done"}),
        )
        .await;
        assert_eq!(ok(&r)["resolution"], "completed");

        // status: a's own line.
        let r = call(&c, "status", json!({})).await;
        let doc = ok(&r);
        assert_eq!(doc["agent"], "a");
        assert_eq!(doc["hook"]["status"], "completed");
        assert_eq!(doc["inbox"], 0);
        assert_eq!(doc["bus"]["pending"], 1);
        assert_eq!(doc["reminders"]["open"], 0);
        c.cancel().await.unwrap();
    });
}

#[test]
fn stdio_refusals_are_tool_errors_with_the_command_lines_message() {
    let env = Env::new();
    let request = env
        .run(&[
            "mail",
            "send",
            "--from",
            "b",
            "--to",
            "a",
            "--kind",
            "request",
            "--subject",
            "review",
            "--body",
            "x",
            "--task",
            "t1",
        ])
        .line();
    let to_b = env
        .run(&[
            "mail",
            "send",
            "--from",
            "a",
            "--to",
            "b",
            "--kind",
            "notify",
            "--subject",
            "fyi",
            "--body",
            "x",
            "--task",
            "t1",
        ])
        .line();
    runtime().block_on(async {
        let c = stdio(&env, "a").await;

        // A transition the hook's state does not allow.
        let r = call(&c, "hook_touch", json!({})).await;
        let (code, line) = cli_error(&env, &["hook", "touch", "a"]);
        assert_eq!((code, refused(&r)), (1, line));
        assert_eq!(refusal(&r)["class"], "refused");
        assert_eq!(refusal(&r)["kind"], "refused");

        // Work named that the hook no longer holds: stale, so the agent
        // knows to read its hook again.
        let assigned = env.run(&["hook", "assign", "a", "--bead", "b-1", "--title", "T"]);
        assert_eq!(assigned.code, 0, "{assigned:?}");
        let r = call(&c, "hook_touch", json!({"bead": "b-0"})).await;
        let (code, line) = cli_error(&env, &["hook", "touch", "a", "--bead", "b-0"]);
        assert_eq!((code, refused(&r)), (1, line));
        assert_eq!(refusal(&r)["kind"], "stale");

        // A request archived before it was answered.
        let r = call(&c, "mail_archive", json!({"id": request})).await;
        let (code, line) = cli_error(&env, &["mail", "archive", &request]);
        assert_eq!((code, refused(&r)), (1, line));

        // An unregistered reminder kind: a usage error (exit 2) on both.
        let args = json!({"kind": "nope", "source_type": "spec", "source_id": "s", "message": "m"});
        let r = call(&c, "remind_open", args).await;
        let (code, line) = cli_error(
            &env,
            &[
                "remind",
                "open",
                "--kind",
                "nope",
                "--source-type",
                "spec",
                "--source-id",
                "s",
                "--message",
                "m",
            ],
        );
        assert_eq!((code, refused(&r)), (2, line));
        assert_eq!(refusal(&r)["class"], "usage");
        assert_eq!(refusal(&r)["kind"], "invalid");

        // An id that does not exist.
        let r = call(
            &c,
            "remind_resolve",
            json!({"id": "r-missing", "resolution": "ignored"}),
        )
        .await;
        let (code, line) = cli_error(
            &env,
            &["remind", "resolve", "r-missing", "--resolution", "ignored"],
        );
        assert_eq!((code, refused(&r)), (1, line));
        assert_eq!(refusal(&r)["kind"], "not_found");

        // A nudge with nothing to answer.
        let r = call(&c, "nudge_respond", json!({})).await;
        let (code, line) = cli_error(&env, &["nudge", "respond", "a"]);
        assert_eq!((code, refused(&r)), (1, line));
        assert_eq!(refusal(&r)["kind"], "not_found");

        // Malformed ids are usage errors naming the id.
        let r = call(
            &c,
            "nudge_send",
            json!({"to": "../b", "type": "abort", "message": "m"}),
        )
        .await;
        assert!(refused(&r).contains("../b"), "{r:?}");
        assert_eq!(refusal(&r)["class"], "usage");

        // a cannot file b's mail, nor pass a name to act as b.
        let r = call(&c, "mail_archive", json!({"id": to_b})).await;
        assert_eq!(
            refused(&r),
            format!("cannot archive {to_b}: it is addressed to `b`, not to `a`")
        );
        // Nor through a tool that takes no arguments: `nudge_read` took
        // them and marked a's nudge read.
        for tool in ["mail_inbox", "brief", "status", "nudge_read"] {
            let as_b = call(&c, tool, json!({"agent": "b"})).await;
            assert_eq!(as_b.is_error, Some(true), "{tool}");
            let said = &as_b.content[0].as_text().unwrap().text;
            assert!(said.contains("unknown field `agent`"), "{tool}: {said}");
        }
        c.cancel().await.unwrap();
    });
    // Nothing was changed by the refusals: the request is still in a's inbox.
    let inbox = env.run(&["--json", "mail", "inbox", "a"]).json();
    assert_eq!(inbox[0]["id"], request.as_str());
}

/// A `tools/call` whose `arguments` is not an object fails rmcp's parse;
/// it is invalid params, not a method not found.
#[test]
fn stdio_tools_call_with_array_arguments_is_invalid_params() {
    use std::io::{BufRead as _, BufReader, Write as _};
    let env = Env::new();
    let mut child = env
        .command(&["mcp", "--agent", "a"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}});
    let ready = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let bad = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "status", "arguments": []}});
    for m in [&init, &ready, &bad] {
        writeln!(stdin, "{m}").unwrap();
    }
    stdin.flush().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["result"]["serverInfo"]["name"], "chipset", "{first}");
    let reply: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    drop(stdin);
    child.kill().ok();
    child.wait().unwrap();
    assert_eq!(reply["id"], 2, "{reply}");
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    let said = reply["error"]["message"].as_str().unwrap();
    assert!(said.contains("`arguments`"), "{said}");
}
