//! Every tool's description: a title, annotations, an output schema that
//! its results match, input schemas that carry the server's constraints,
//! and argument errors that name the field.

use std::collections::{BTreeMap, BTreeSet};
use std::future::{Future, pending};
use std::sync::Arc;

use chipset_store::{AgentId, StateDir};
use rmcp::model::Tool;
use serde_json::{Value, json};

use super::Server;
use crate::ops::{self, Ctx, Outcome};
use crate::schema::{self, parse};
use crate::watch;

fn args(v: Value) -> rmcp::model::JsonObject {
    match v {
        Value::Object(map) => map,
        _ => panic!("arguments are an object"),
    }
}

/// Runs the tool `name` as `ctx`'s agent with `v` as its arguments.
fn call(ctx: &Ctx, name: &str, v: Value) -> Outcome {
    let a = args(v);
    match name {
        "hook_pickup" => ops::hook_pickup(ctx, parse(a)?),
        "hook_touch" => ops::hook_touch(ctx, parse(a)?),
        "hook_complete" => ops::hook_complete(ctx, parse(a)?),
        "hook_assign" => ops::hook_assign(ctx, parse(a)?),
        "hook_clear" => ops::hook_clear(ctx, parse(a)?),
        "lease_acquire" => ops::lease_acquire(ctx, parse(a)?),
        "lease_renew" => ops::lease_renew(ctx, parse(a)?),
        "lease_release" => ops::lease_release(ctx, parse(a)?),
        "lease_list" => ops::lease_list(ctx, parse(a)?),
        "nudge_read" => ops::nudge_read(ctx),
        "nudge_respond" => ops::nudge_respond(ctx, parse(a)?),
        "nudge_send" => ops::nudge_send(ctx, parse(a)?),
        "mail_send" => ops::mail_send(ctx, parse(a)?),
        "mail_inbox" => ops::mail_inbox(ctx, parse(a)?),
        "mail_read" => ops::mail_read(ctx, parse(a)?),
        "mail_archive" => ops::mail_archive(ctx, parse(a)?),
        "mail_thread" => ops::mail_thread(ctx, parse(a)?),
        "mail_pending" => ops::mail_pending(ctx, parse(a)?),
        "bus_publish" => ops::bus_publish(ctx, parse(a)?),
        "bus_pending" => ops::bus_pending(ctx, parse(a)?),
        "bus_ack" => ops::bus_ack(ctx, parse(a)?),
        "bus_wait" => block(watch::bus_wait(&Arc::new(ctx.clone()), parse(a), pending())),
        "remind_open" => ops::remind_open(ctx, parse(a)?),
        "remind_list" => ops::remind_list(ctx, parse(a)?),
        "remind_resolve" => ops::remind_resolve(ctx, parse(a)?),
        "remind_snooze" => ops::remind_snooze(ctx, parse(a)?),
        "brief" => ops::brief(ctx),
        "status" => ops::status(ctx),
        "agent_whois" => ops::agent_whois(ctx, parse(a)?),
        "agent_list" => ops::agent_list(ctx, parse(a)?),
        "work_ready" => ops::work_ready(ctx, parse(a)?),
        "work_claim" => ops::work_claim(ctx, parse(a)?),
        "work_release" => ops::work_release(ctx, parse(a)?),
        "agent_list_add" => ops::agent_list_add(ctx, parse(a)?),
        "agent_list_remove" => ops::agent_list_remove(ctx, parse(a)?),
        "search" => ops::search(ctx, parse(a)?),
        "wait" => block(watch::wait(&Arc::new(ctx.clone()), parse(a), pending())),
        other => panic!("no tool {other}"),
    }
}

/// Runs a waiting tool, which is async, to its end.
fn block(tool: impl Future<Output = Outcome>) -> Outcome {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(tool)
}

struct Bench {
    _tmp: tempfile::TempDir,
    a: Ctx,
    b: Ctx,
    /// The tools as published (compacted: record schemas reduced to objects).
    tools: BTreeMap<String, Tool>,
    /// The tools with their full output schemas, records' fields included.
    full: BTreeMap<String, Tool>,
    checked: BTreeSet<String>,
}

impl Bench {
    fn new() -> Bench {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path().join("state")).unwrap();
        let ctx = |name: &str| {
            Ctx::new(
                chipset::Chipset::from_state(state.clone()),
                AgentId::new(name).unwrap(),
            )
        };
        let by_name = |tools: Vec<Tool>| -> BTreeMap<String, Tool> {
            tools.into_iter().map(|t| (t.name.to_string(), t)).collect()
        };
        let tools = by_name(schema::compact(Server::tool_router()).list_all());
        let full = by_name(Server::tool_router().list_all());
        Bench {
            a: ctx("a"),
            b: ctx("b"),
            _tmp: tmp,
            tools,
            full,
            checked: BTreeSet::new(),
        }
    }

    /// Runs a tool as `a` (or `b`), asserts it succeeded, and checks its
    /// structured result against the tool's output schema.
    fn ok(&mut self, as_b: bool, name: &str, v: Value) -> Value {
        let ctx = if as_b { &self.b } else { &self.a };
        let reply = call(ctx, name, v).unwrap_or_else(|f| panic!("{name} refused: {f}"));
        assert!(reply.failure.is_none(), "{name}: {:?}", reply.failure);
        for tools in [&self.tools, &self.full] {
            let schema = Value::Object((**tools[name].output_schema.as_ref().unwrap()).clone());
            if let Err(e) = schema::check(&schema, &reply.json, false) {
                panic!(
                    "{name}'s result does not match its output schema: {e}\nresult: {}\nschema: {schema}",
                    reply.json
                );
            }
        }
        self.checked.insert(name.to_owned());
        reply.json
    }
}

#[test]
fn every_result_matches_its_tools_output_schema() {
    let mut t = Bench::new();
    assert_eq!(t.ok(false, "hook_pickup", json!({}))["outcome"], "idle");
    let assigned = t.ok(
        true,
        "hook_assign",
        json!({"to": "a", "bead": "gt-1", "title": "T"}),
    );
    assert_eq!(assigned["work"]["assigned_by"], "b");
    assert_eq!(t.ok(false, "hook_pickup", json!({}))["outcome"], "started");
    t.ok(false, "hook_touch", json!({}));
    t.ok(false, "hook_complete", json!({}));
    assert_eq!(
        t.ok(true, "hook_clear", json!({"to": "a"}))["status"],
        "empty"
    );
    t.ok(
        true,
        "hook_assign",
        json!({"to": "a", "bead": "gt-2", "title": "U"}),
    );
    let taken = t.ok(true, "hook_clear", json!({"to": "a", "reassign": true}));
    assert_eq!(taken["was"], "pending");

    assert_eq!(t.ok(false, "nudge_read", json!({}))["state"], "empty");
    let msg = json!({"to": "a", "type": "health_check", "message": "m", "requires_response": true});
    t.ok(true, "nudge_send", msg.clone());
    let replaced = t.ok(true, "nudge_send", msg);
    assert_eq!(replaced["outcome"], "replaced");
    assert!(replaced["note"].is_string());
    assert_eq!(t.ok(false, "nudge_read", json!({}))["state"], "new");
    t.ok(false, "nudge_respond", json!({"message": "yes"}));

    let request = json!({"to": "a", "kind": "request", "subject": "review", "body": "please",
                         "task": "t1"});
    let id = t.ok(true, "mail_send", request)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let notify = json!({"to": "a", "kind": "notify", "subject": "fyi", "body": "x", "task": "t1"});
    let fyi = t.ok(true, "mail_send", notify)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let inbox = t.ok(false, "mail_inbox", json!({}));
    assert_eq!(inbox["total"], 2);
    assert!(
        inbox["messages"][0].get("body").is_none(),
        "bodies are off by default"
    );
    let first = t.ok(false, "mail_inbox", json!({"limit": 1, "bodies": true}));
    assert_eq!(first["messages"].as_array().unwrap().len(), 1);
    assert_eq!(first["messages"][0]["body"], "please");
    let rest = t.ok(false, "mail_inbox", json!({"since": id}));
    assert_eq!(rest["messages"][0]["id"], fyi.as_str());
    // Neither a time nor an id that sorts: refused with the forms it takes,
    // never an empty inbox.
    for bad in ["2026-11-28", "yesterday", "msg-42"] {
        match call(&t.a, "mail_inbox", json!({"since": bad})) {
            Err(f) => assert!(
                f.to_string().contains("neither an RFC 3339 time"),
                "{bad}: {f}"
            ),
            Ok(reply) => panic!("{bad}: {}", reply.json),
        }
    }
    assert_eq!(
        t.ok(false, "mail_read", json!({"id": id}))["body"],
        "please"
    );
    t.ok(false, "mail_pending", json!({"task": "t1"}));
    let reply = json!({"to": "b", "kind": "response", "subject": "review", "body": "done",
                       "in_reply_to": id});
    t.ok(false, "mail_send", reply);
    assert_eq!(t.ok(false, "mail_thread", json!({"id": id}))["total"], 2);
    assert_eq!(
        t.ok(false, "mail_archive", json!({"id": fyi}))["outcome"],
        "archived"
    );
    let again = t.ok(false, "mail_archive", json!({"id": fyi}));
    assert_eq!(again["outcome"], "already-archived");

    let event = json!({"to": "a", "kind": "k", "dedup_key": "d", "payload": {"n": 1}});
    let published = t.ok(true, "bus_publish", event.clone());
    assert_eq!(published["outcome"], "delivered");
    assert_eq!(t.ok(true, "bus_publish", event)["outcome"], "duplicate");
    let pending = t.ok(false, "bus_pending", json!({}));
    assert_eq!(pending["total"], 1);
    t.ok(false, "bus_wait", json!({"timeout_seconds": 0}));
    let event_id = published["event"]["id"].as_str().unwrap();
    t.ok(false, "bus_ack", json!({"event_id": event_id}));
    let waited = t.ok(false, "bus_wait", json!({"timeout_seconds": 0}));
    assert_eq!(waited["timed_out"], true);

    let open = json!({"kind": "spec_draft", "source_type": "spec", "source_id": "s",
                      "message": "m"});
    let opened = t.ok(false, "remind_open", open.clone());
    assert_eq!(t.ok(false, "remind_open", open)["outcome"], "existing");
    let rid = opened["reminder"]["id"].as_str().unwrap();
    assert_eq!(t.ok(false, "remind_list", json!({}))["total"], 1);
    let since = json!({"since": opened["reminder"]["created_at"]});
    assert_eq!(t.ok(false, "remind_list", since)["total"], 0);
    t.ok(false, "remind_snooze", json!({"id": rid, "hours": "2"}));
    t.ok(
        false,
        "remind_resolve",
        json!({"id": rid, "resolution": "ignored"}),
    );

    let granted = t.ok(
        false,
        "lease_acquire",
        json!({"paths": ["src/auth/**"], "ttl_minutes": "45", "reason": "login"}),
    );
    let token = granted["lease"]["token"].clone();
    let refused = call(
        &t.b,
        "lease_acquire",
        json!({"paths": ["src/auth/a.rs"], "shared": true}),
    )
    .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("`a` holds exclusive src/auth/**"),
        "{refused}"
    );
    t.ok(false, "lease_renew", json!({"token": token}));
    let listed = t.ok(true, "lease_list", json!({"limit": 1}));
    assert_eq!(listed["leases"][0]["holder"], "a");
    assert_eq!(listed["total"], 1);
    assert_eq!(
        t.ok(false, "lease_release", json!({"token": token}))["released"]["token"],
        token
    );
    let other = t.ok(true, "lease_acquire", json!({"paths": ["docs"]}))["lease"]["token"].clone();
    let forced = json!({"token": other, "force": true, "reason": "b is gone"});
    assert_eq!(t.ok(false, "lease_release", forced)["forced"], true);

    t.ok(false, "brief", json!({}));
    t.ok(false, "wait", json!({"timeout_seconds": 0}));

    assert_eq!(t.ok(false, "status", json!({}))["agent"], "a");

    let directory = chipset::directory::Directory::new(t.a.state.clone());
    let mut qa = chipset::directory::Registration::new();
    qa.roles = Some(vec!["qa".parse().unwrap()]);
    qa.model = Some("m".to_owned());
    directory.register(&t.a.agent, &qa).unwrap();
    directory
        .register(&t.b.agent, &chipset::directory::Registration::new())
        .unwrap();
    let me = t.ok(false, "agent_whois", json!({}));
    assert_eq!((&me["name"], &me["model"]), (&json!("a"), &json!("m")));
    assert_eq!(
        t.ok(false, "agent_whois", json!({"name": "b"}))["name"],
        "b"
    );
    let listed = t.ok(
        false,
        "agent_list",
        json!({"role": "qa", "seen_within_seconds": 60}),
    );
    assert_eq!(listed["total"], 1);
    assert_eq!(t.ok(false, "agent_list", json!({"limit": 1}))["total"], 2);
    let added = t.ok(
        false,
        "agent_list_add",
        json!({"list": "ops", "agents": ["b"]}),
    );
    assert_eq!(added["members"], json!(["b"]));
    let removed = t.ok(
        false,
        "agent_list_remove",
        json!({"list": "ops", "agents": ["b"]}),
    );
    assert_eq!(removed["changed"], 1);

    let pool = chipset::pool::Pool::new(t.a.state.clone());
    let item = chipset::pool::NewItem::new("pooled")
        .with_id("w-1".parse().unwrap())
        .with_labels(["ui"]);
    pool.post(&t.b.agent, &item).unwrap();
    let ready = t.ok(false, "work_ready", json!({"label": "ui", "limit": 5}));
    assert_eq!(
        (&ready["total"], &ready["items"][0]["state"]),
        (&json!(1), &json!("ready"))
    );
    let claimed = t.ok(false, "work_claim", json!({}));
    assert_eq!(claimed["item"]["id"], "w-1");
    assert_eq!(t.ok(true, "work_claim", json!({}))["item"], Value::Null);
    let released = t.ok(
        false,
        "work_release",
        json!({"id": "w-1", "reason": "later"}),
    );
    assert_eq!(released["item"]["released"]["reason"], "later");
    let found = t.ok(
        false,
        "search",
        json!({"query": "please", "by": "b", "limit": 5}),
    );
    assert_eq!(found["hits"][0]["title"], "review");
    assert_eq!(found["total"], 1);

    // Every tool was checked.
    let all: BTreeSet<String> = t.tools.keys().cloned().collect();
    assert_eq!(t.checked, all);
}

#[test]
fn every_tool_has_a_title_annotations_and_an_output_schema() {
    for tool in schema::compact(Server::tool_router()).list_all() {
        let name = &tool.name;
        assert!(
            tool.title.as_deref().is_some_and(|t| !t.is_empty()),
            "{name}"
        );
        let hints = tool
            .annotations
            .as_ref()
            .unwrap_or_else(|| panic!("{name}"));
        assert_eq!(hints.open_world_hint, Some(false), "{name}");
        if hints.read_only_hint != Some(true) {
            assert!(hints.destructive_hint.is_some(), "{name}");
            assert!(hints.idempotent_hint.is_some(), "{name}");
        }
        let schema = tool
            .output_schema
            .as_ref()
            .unwrap_or_else(|| panic!("{name}"));
        assert_eq!(schema["type"], "object", "{name}");
    }
}

#[test]
fn input_schemas_carry_the_constraints_the_server_enforces() {
    let tools = schema::compact(Server::tool_router()).list_all();
    let send = tools.iter().find(|t| t.name == "mail_send").unwrap();
    let props = &send.input_schema["properties"];
    assert_eq!(props["subject"]["pattern"], "^[a-z0-9]+(-[a-z0-9]+)*$");
    assert_eq!(props["subject"]["maxLength"], 128);
    // One seed agent name, or a group of them and `@lists` (issue 28).
    assert_eq!(
        props["to"]["pattern"],
        "^@?[A-Za-z0-9_-]+( *, *@?[A-Za-z0-9_-]+)*$"
    );
    assert!(props.get("expects_reply").is_some());
    let inbox = tools.iter().find(|t| t.name == "mail_inbox").unwrap();
    let limit = &inbox.input_schema["properties"]["limit"];
    assert_eq!(
        (&limit["minimum"], &limit["maximum"]),
        (&json!(1), &json!(1000))
    );
    let snooze = tools.iter().find(|t| t.name == "remind_snooze").unwrap();
    assert_eq!(snooze.input_schema["properties"]["hours"]["minimum"], 1);
    let archive = tools.iter().find(|t| t.name == "mail_archive").unwrap();
    assert_eq!(
        archive.input_schema["properties"]["id"]["pattern"],
        r"^[^./\\][^/\\]*$"
    );
}

#[test]
fn argument_errors_name_the_field_and_the_type() {
    let refused = |v: Value| {
        parse::<crate::params::RemindSnooze>(args(v))
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        refused(json!({"id": "r", "hours": "soon"})),
        r#"`hours`: expected an integer, got "soon""#
    );
    assert_eq!(
        refused(json!({"id": "r", "hours": [2]})),
        "`hours`: expected an integer, got an array"
    );
    assert_eq!(
        refused(json!({"hours": 2})),
        "missing field `id` (a string)"
    );
    let said = parse::<crate::params::MailInbox>(args(json!({"agent": "b"})))
        .unwrap_err()
        .to_string();
    assert!(said.starts_with("unknown field `agent`"), "{said}");
    let said = parse::<crate::params::MailSend>(args(
        json!({"to": "b", "kind": "memo", "subject": "s", "body": "b"}),
    ))
    .unwrap_err()
    .to_string();
    assert_eq!(
        said,
        r#"`kind`: expected one of "request", "response", "notify", got "memo""#
    );
    for said in [refused(json!({"id": "r", "hours": {"h": 1}})), said] {
        assert!(!said.contains("Lenient") && !said.contains("u32"), "{said}");
    }
}

#[test]
fn listings_are_limited() {
    let mut t = Bench::new();
    for i in 0..25 {
        let m = json!({"to": "a", "kind": "notify", "subject": "n", "body": format!("{i}"),
                       "task": "t"});
        t.ok(true, "mail_send", m);
    }
    let inbox = t.ok(false, "mail_inbox", json!({}));
    assert_eq!(inbox["messages"].as_array().unwrap().len(), 20);
    assert_eq!(inbox["total"], 25);
    let reply = call(&t.a, "mail_inbox", json!({})).unwrap();
    assert!(
        reply.text.contains("… 5 more (25 in all)"),
        "{}",
        reply.text
    );
    let refused = call(&t.a, "mail_inbox", json!({"limit": 0})).unwrap_err();
    assert_eq!(
        refused.to_string(),
        "`limit`: expected an integer from 1 to 1000, got 0"
    );
}

/// `mail_inbox` gives what it read past an unreadable message, with a
/// failure naming the file; a subject a peer wrote with a line break is
/// one line of the text, escaped.
#[test]
#[allow(clippy::disallowed_methods, reason = "plants a peer's files")]
fn an_inbox_with_an_unreadable_message_still_lists_the_rest() {
    let mut t = Bench::new();
    let m = json!({"to": "a", "kind": "notify", "subject": "n", "body": "b", "task": "t"});
    let id = t.ok(true, "mail_send", m)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let inbox = t._tmp.path().join("state/mail/inbox/a");
    let path = inbox.join(format!("{id}.json"));
    let text = std::fs::read_to_string(&path).unwrap();
    let text = text.replace("\"subject\": \"n\"", "\"subject\": \"two\\nlines\"");
    std::fs::write(&path, text).unwrap();
    let torn = inbox.join("1772706900123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab.json");
    std::fs::write(&torn, "{\"id\": \"").unwrap();
    let reply = call(&t.a, "mail_inbox", json!({})).unwrap();
    let failure = reply.failure.expect("the unreadable file is named");
    assert_eq!(failure.kind(), chipset_store::ErrorKind::Corrupt);
    assert!(
        failure.to_string().contains(&*torn.to_string_lossy()),
        "{failure}"
    );
    assert_eq!(reply.json["messages"].as_array().unwrap().len(), 1);
    assert_eq!(reply.text.lines().count(), 1, "{}", reply.text);
    assert!(reply.text.contains(" two\\nlines "), "{}", reply.text);
    let read = call(&t.a, "mail_read", json!({"id": id})).unwrap();
    assert!(read.text.lines().next().unwrap().ends_with("two\\nlines"));
}

/// A long payload is cut in `bus_pending`'s text, which goes into an
/// agent's context, and whole in its structured result.
#[test]
fn a_long_payload_is_cut_in_the_text_only() {
    let mut t = Bench::new();
    let payload = json!({"text": "p".repeat(1000)});
    let publish = json!({"to": "a", "kind": "k", "payload": payload.clone()});
    t.ok(true, "bus_publish", publish);
    let reply = call(&t.a, "bus_pending", json!({})).unwrap();
    assert_eq!(reply.json["events"][0]["payload"], payload);
    assert!(reply.text.contains("… (1011 bytes)"), "{}", reply.text);
    assert!(reply.text.len() < 400, "{}", reply.text);
}

/// `bead` and `generation` fence the hook tools on the work they mean: an
/// agent still on `gt-1` after the dispatcher took it away and assigned
/// `gt-2` is refused, and nothing changes; unknown arguments are refused
/// by every hook tool, and an integer given as text is taken by `search`
/// as by the others.
#[test]
fn hook_tools_are_fenced_on_the_work_they_mean() {
    let mut t = Bench::new();
    t.ok(
        true,
        "hook_assign",
        json!({"to": "a", "bead": "gt-1", "title": "T"}),
    );
    t.ok(false, "hook_pickup", json!({}));
    t.ok(
        true,
        "hook_clear",
        json!({"to": "a", "reassign": true, "bead": "gt-1"}),
    );
    t.ok(
        true,
        "hook_assign",
        json!({"to": "a", "bead": "gt-2", "title": "U"}),
    );
    t.ok(false, "hook_pickup", json!({}));
    for (tool, args) in [
        ("hook_complete", json!({"bead": "gt-1"})),
        ("hook_touch", json!({"bead": "gt-1"})),
        ("hook_complete", json!({"generation": 1})),
        ("hook_complete", json!({"bead": "gt-2", "generation": "2"})),
    ] {
        let refused = call(&t.a, tool, args.clone()).unwrap_err().to_string();
        assert!(
            refused.contains("on the hook of `a`: it holds `gt-2` (generation 3) now"),
            "{tool} {args}: {refused}"
        );
        assert_eq!(t.ok(false, "hook_pickup", json!({}))["outcome"], "resumed");
    }
    let done = t.ok(
        false,
        "hook_complete",
        json!({"bead": "gt-2", "generation": "3"}),
    );
    assert_eq!(done["status"], "completed");
    let stale = call(&t.b, "hook_clear", json!({"to": "a", "bead": "gt-1"})).unwrap_err();
    assert!(
        stale.to_string().contains("taken away or replaced"),
        "{stale}"
    );
    for tool in ["hook_pickup", "hook_touch", "hook_complete"] {
        let said = call(&t.a, tool, json!({"bogus": 1}))
            .unwrap_err()
            .to_string();
        assert!(said.contains("unknown field `bogus`"), "{tool}: {said}");
    }
    let hits = t.ok(false, "search", json!({"query": "nothing", "limit": "3"}));
    assert_eq!(hits["hits"], json!([]), "{hits}");
}

/// What an input schema states is what the server holds arguments to,
/// and a refusal names the field and the real bounds, in the caller's
/// units: never a type's whole range nor a float's rounding.
#[test]
fn schema_bounds_are_enforced_and_named() {
    let mut t = Bench::new();
    let refused = |t: &Bench, tool: &str, v: Value| call(&t.a, tool, v).unwrap_err().to_string();
    for (tool, args, says) in [
        (
            "lease_list",
            json!({"limit": -1}),
            "`limit`: expected an integer from 1 to 1000, got -1",
        ),
        (
            "search",
            json!({"query": "x", "limit": -1}),
            "`limit`: expected an integer from 1 to 100, got -1",
        ),
        (
            "lease_renew",
            json!({"token": -1}),
            "`token`: expected an integer from 1 to 18446744073709551615, got -1",
        ),
        (
            "lease_acquire",
            json!({"paths": ["x"], "ttl_minutes": 0}),
            "`ttl_minutes`: expected a number from 0.0167 to 10080, got 0",
        ),
        (
            "lease_acquire",
            json!({"paths": ["x"], "ttl_minutes": 1e308}),
            "`ttl_minutes`: expected a number from 0.0167 to 10080, got 1e+308",
        ),
        (
            "agent_list_add",
            json!({"list": "qa", "agents": []}),
            "`agents`: expected at least 1 item, got 0",
        ),
        (
            "work_ready",
            json!({"role": ""}),
            "`role`: expected at least 1 character, got 0",
        ),
    ] {
        assert_eq!(refused(&t, tool, args.clone()), says, "{tool} {args}");
    }
    t.ok(
        false,
        "lease_acquire",
        json!({"paths": ["x"], "ttl_minutes": "0.5"}),
    );
    // A claim by id does not silently drop the label that would exclude it.
    let said = refused(&t, "work_claim", json!({"id": "w1", "label": "docs"}));
    assert!(said.contains("give them without id"), "{said}");
}

#[test]
fn a_served_method_with_malformed_params_is_invalid_params() {
    let e = crate::error::unparsed("tools/call");
    assert_eq!(e.code, rmcp::model::ErrorCode::INVALID_PARAMS);
    assert!(e.message.contains("`arguments`"), "{}", e.message);
    let e = crate::error::unparsed("tools/frobnicate");
    assert_eq!(e.code, rmcp::model::ErrorCode::METHOD_NOT_FOUND);
}
