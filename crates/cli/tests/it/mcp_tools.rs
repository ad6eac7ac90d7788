//! `chipset mcp`: what an agent meets first (issue 31): a missing root
//! reported to the client, tools that describe themselves, listings that
//! fit a context, argument errors that name the field, and the
//! dispatcher's side of the hook.

use rmcp::ServiceExt as _;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use crate::Env;
use crate::mcp::{call, cli_error, ok, refusal, refused, runtime, stdio, text};

#[test]
fn a_missing_root_reaches_the_client_as_the_handshakes_error() {
    let env = Env::new();
    let missing = env.root().join("nowhere");
    runtime().block_on(async {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_chipset"));
        cmd.arg("--root")
            .arg(&missing)
            .args(["mcp", "--agent", "a"])
            .env_remove("CHIPSET_ROOT");
        let err = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap_err();
        let said = err.to_string();
        assert!(said.contains("does not exist"), "{said}");
        assert!(said.contains("`chipset init` creates it"), "{said}");
    });
}

#[test]
fn tools_carry_titles_annotations_and_output_schemas() {
    let env = Env::new();
    runtime().block_on(async {
        let c = stdio(&env, "a").await;
        for tool in c.list_all_tools().await.unwrap() {
            let name = tool.name.as_ref();
            assert!(tool.title.is_some(), "{name} has no title");
            let hints = tool.annotations.as_ref().expect("annotations");
            let read_only = hints.read_only_hint == Some(true);
            assert!(
                read_only || (hints.destructive_hint.is_some() && hints.idempotent_hint.is_some()),
                "{name}: {hints:?}"
            );
            if name != "status" {
                let schema = tool.output_schema.as_ref().expect("an output schema");
                assert_eq!(schema["type"], "object", "{name}");
            }
        }
        let tools = c.list_all_tools().await.unwrap();
        let find = |n: &str| tools.iter().find(|t| t.name == n).unwrap().clone();
        assert_eq!(
            find("mail_inbox").annotations.unwrap().read_only_hint,
            Some(true)
        );
        assert_eq!(
            find("hook_clear").annotations.unwrap().destructive_hint,
            Some(true)
        );
        let send = Value::Object((*find("mail_send").input_schema).clone());
        assert_eq!(
            send["properties"]["subject"]["pattern"],
            "^[a-z0-9]+(-[a-z0-9]+)*$"
        );
        c.cancel().await.unwrap();
    });
}

#[test]
fn argument_errors_name_the_field_and_the_json_type() {
    let env = Env::new();
    runtime().block_on(async {
        let c = stdio(&env, "a").await;
        let r = call(&c, "remind_snooze", json!({"id": "r", "hours": {"n": 2}})).await;
        assert_eq!(refused(&r), "`hours`: expected an integer, got an object");
        assert_eq!(refusal(&r)["class"], "usage");
        let r = call(&c, "wait", json!({"timeout_seconds": "soon"})).await;
        assert_eq!(
            refused(&r),
            r#"`timeout_seconds`: expected a number, got "soon""#
        );
        let r = call(
            &c,
            "mail_send",
            json!({"to": "b", "kind": "memo", "subject": "s", "body": "b"}),
        )
        .await;
        assert!(refused(&r).starts_with("`kind`: expected one of"), "{r:?}");
        c.cancel().await.unwrap();
    });
}

/// Sends `n` notices of `size` characters to `a`, returning their ids.
fn fill(env: &Env, n: usize, size: usize) -> Vec<String> {
    let body = "x".repeat(size);
    (0..n)
        .map(|_| {
            env.run(&[
                "mail",
                "send",
                "--from",
                "b",
                "--to",
                "a",
                "--kind",
                "notify",
                "--subject",
                "note",
                "--body",
                &body,
                "--task",
                "t1",
            ])
            .line()
        })
        .collect()
}

#[test]
fn listings_are_limited_and_bodies_are_read_one_at_a_time() {
    let env = Env::new();
    let ids = fill(&env, 25, 2000);
    runtime().block_on(async {
        let c = stdio(&env, "a").await;
        let r = call(&c, "mail_inbox", json!({})).await;
        let page = ok(&r);
        assert_eq!(page["total"], 25);
        let shown = page["messages"].as_array().unwrap();
        assert_eq!(shown.len(), 20);
        assert!(
            shown
                .iter()
                .all(|m| m.get("body").is_none() && m["body_chars"] == 2000)
        );
        assert!(
            page.to_string().len() < 10_000,
            "{}",
            page.to_string().len()
        );
        assert!(text(&r).contains("5 more (25 in all)"), "{}", text(&r));

        let last = shown[19]["id"].as_str().unwrap();
        let r = call(&c, "mail_inbox", json!({"since": last, "limit": "10"})).await;
        let rest: Vec<&str> = ok(&r)["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap())
            .collect();
        assert_eq!(
            rest,
            ids[20..].iter().map(String::as_str).collect::<Vec<_>>()
        );

        // A kind and a task keep only their messages (all 25 are notes of t1).
        for (filter, total) in [
            (json!({"kind": "request"}), 0),
            (json!({"kind": "notify", "task": "t1"}), 25),
            (json!({"task": "t2"}), 0),
        ] {
            let r = call(&c, "mail_inbox", filter.clone()).await;
            assert_eq!(ok(&r)["total"], total, "{filter}");
        }

        let r = call(&c, "mail_inbox", json!({"limit": 1, "bodies": true})).await;
        assert_eq!(ok(&r)["messages"][0]["body"].as_str().unwrap().len(), 2000);
        let r = call(&c, "mail_read", json!({"id": ids[3]})).await;
        assert_eq!(ok(&r)["id"], ids[3].as_str());
        assert_eq!(ok(&r)["body"].as_str().unwrap().len(), 2000);
        let r = call(&c, "mail_inbox", json!({"limit": 0})).await;
        assert_eq!(
            refused(&r),
            "`limit`: expected an integer from 1 to 1000, got 0"
        );
        c.cancel().await.unwrap();
    });
}

#[test]
fn the_dispatcher_assigns_and_clears_with_the_command_lines_fencing() {
    let env = Env::new();
    runtime().block_on(async {
        let c = stdio(&env, "mayor").await;
        let r = call(
            &c,
            "hook_assign",
            json!({"to": "a", "bead": "gt-1", "title": "Fix"}),
        )
        .await;
        assert_eq!(ok(&r)["work"]["assigned_by"], "mayor");
        let shown = env.run(&["--json", "hook", "show", "a"]).json();
        assert_eq!(shown["status"], "pending");

        // An occupied hook is refused, as on the command line.
        let r = call(
            &c,
            "hook_assign",
            json!({"to": "a", "bead": "gt-2", "title": "Other"}),
        )
        .await;
        let (code, line) = cli_error(
            &env,
            &["hook", "assign", "a", "--bead", "gt-2", "--title", "Other"],
        );
        assert_eq!((code, refused(&r)), (1, line));

        // Clearing is for completed work; pending work needs reassign.
        let r = call(&c, "hook_clear", json!({"to": "a"})).await;
        let (code, line) = cli_error(&env, &["hook", "clear", "a"]);
        assert_eq!((code, refused(&r)), (1, line));
        let r = call(&c, "hook_clear", json!({"to": "a", "reassign": true})).await;
        assert_eq!(ok(&r)["was"], "pending");
        assert_eq!(ok(&r)["hook"]["status"], "empty");

        // An empty hook has nothing to clear.
        let r = call(&c, "hook_clear", json!({"to": "a"})).await;
        let (code, line) = cli_error(&env, &["hook", "clear", "a"]);
        assert_eq!((code, refused(&r)), (1, line));

        // A completed hook is cleared.
        assert_eq!(
            env.run(&["hook", "assign", "a", "--bead", "gt-3", "--title", "T"])
                .code,
            0
        );
        assert_eq!(env.run(&["hook", "activate", "a"]).code, 0);
        assert_eq!(env.run(&["hook", "complete", "a"]).code, 0);
        let r = call(&c, "hook_clear", json!({"to": "a"})).await;
        assert_eq!(ok(&r)["status"], "empty");
        c.cancel().await.unwrap();
    });
}

/// `remind_list` meets a reminder file this version cannot read (a newer
/// program's severity): the readable reminders and the unreadable file
/// both reach the agent, as a failed result, never as fewer reminders.
#[test]
fn a_reminder_this_version_cannot_read_fails_remind_list() {
    let env = Env::new();
    let open = |id: &str| {
        env.run(&crate::remind::open("spec_draft", "spec", id))
            .line()
    };
    open("s1");
    let kept = open("s2");
    let file = env.root().join("reminders/open/spec_draft/spec/s1.json");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replace("\"nudge\"", "\"catastrophic\"")).unwrap();
    runtime().block_on(async {
        let c = stdio(&env, "a").await;
        let r = call(&c, "remind_list", json!({})).await;
        let doc = refusal(&r);
        assert_eq!(doc["kind"], "unsupported", "{doc}");
        assert_eq!(doc["reminders"][0]["id"], kept.as_str(), "{doc}");
        assert_eq!(doc["total"], 1);
        let unreadable = doc["unreadable"].as_array().unwrap();
        assert_eq!(unreadable.len(), 1, "{doc}");
        assert!(
            unreadable[0]
                .as_str()
                .unwrap()
                .contains("severity `catastrophic`")
        );
        assert!(
            refused(&r).starts_with("1 unreadable reminder file ("),
            "{}",
            refused(&r)
        );
        c.cancel().await.unwrap();
    });
}

/// `mail_send` and `bus_publish` take a chosen id, as `--id` on the
/// command line: an agent told an outcome is unknown retries with it, and
/// the retry is the first delivery, never a second.
#[test]
fn a_send_and_a_publish_with_a_chosen_id_are_safe_to_retry() {
    let env = Env::new();
    for a in ["a", "b", "c"] {
        assert_eq!(env.run(&["agent", "register", a]).code, 0);
    }
    let (mail_id, event_id) = (
        "1795979815785-4821a8ed-cb68-40fb-9d43-5b6237e1eb4e",
        "1795979815786-5821a8ed-cb68-40fb-9d43-5b6237e1eb4e",
    );
    runtime().block_on(async {
        let c = stdio(&env, "a").await;
        let send = json!({"to": "b", "kind": "notify", "subject": "fyi", "body": "hi",
                          "task": "t1", "id": mail_id});
        for _ in 0..2 {
            let r = call(&c, "mail_send", send.clone()).await;
            assert_eq!(ok(&r)["id"], mail_id);
        }
        // A group's id is the group's: a retry sends no copy twice.
        let group_id = "1795979815787-6821a8ed-cb68-40fb-9d43-5b6237e1eb4e";
        let group = json!({"to": "b,c", "kind": "notify", "subject": "fyi", "body": "all",
                           "task": "t1", "id": group_id});
        for _ in 0..2 {
            let r = call(&c, "mail_send", group.clone()).await;
            assert_eq!(ok(&r)["group"], group_id, "{r:?}");
        }
        let mut other = send.clone();
        other["body"] = json!("another text");
        let r = call(&c, "mail_send", other).await;
        assert_eq!(refusal(&r)["kind"], "refused", "other content under the id");
        let publish = json!({"to": "b", "kind": "green", "id": event_id});
        for _ in 0..2 {
            let r = call(&c, "bus_publish", publish.clone()).await;
            assert_eq!(ok(&r)["event"]["id"], event_id, "{r:?}");
        }
        let r = call(
            &c,
            "bus_publish",
            json!({"to": "b", "kind": "green", "id": "x"}),
        )
        .await;
        assert_eq!(refusal(&r)["class"], "usage");
        c.cancel().await.unwrap();
    });
    let inbox = env.run(&["--json", "mail", "inbox", "b"]).json();
    assert_eq!(inbox.as_array().unwrap().len(), 2, "{inbox}");
    let inbox = env.run(&["--json", "mail", "inbox", "c"]).json();
    assert_eq!(inbox.as_array().unwrap().len(), 1, "{inbox}");
    let pending = env.run(&["--json", "bus", "pending", "b"]).json();
    assert_eq!(pending["events"].as_array().unwrap().len(), 1, "{pending}");
}
