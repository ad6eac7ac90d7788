//! `chipset mcp`: the brief and `wait` tools, and the brief as a resource
//! whose subscribers are told when it changes (both protocol forms).

use std::time::Duration;

use rmcp::model::{
    ClientConfig, ProtocolVersion, ReadResourceRequestParams, ResourceContents,
    ResourceUpdatedNotificationParam, ServerNotification, SubscribeRequestParams,
    SubscriptionFilter,
};
use rmcp::service::NotificationContext;
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt as _, RoleClient};
use serde_json::{Value, json};

use crate::Env;
use crate::mcp::{call, ok, refused, runtime, stdio, stdio_with, text};

/// A client of an older protocol version (2025-11-25, what the MCP
/// Inspector and most hosts speak) that forwards `resources/updated`.
struct Legacy {
    updated: tokio::sync::mpsc::UnboundedSender<String>,
}

impl ClientHandler for Legacy {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        info
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.updated.send(params.uri);
    }
}

/// A generous bound on waiting for a notification: a guard against hanging,
/// not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(20);

#[test]
fn brief_and_wait_follow_every_channel() {
    let env = Env::new();
    runtime().block_on(async {
        let c = stdio(&env, "a").await;
        let r = call(&c, "brief", json!({})).await;
        assert_eq!(ok(&r)["entries"], json!([]));
        assert_eq!(text(&r), "nothing needs a\n");
        let r = call(&c, "wait", json!({"timeout_seconds": 0.2})).await;
        assert_eq!(ok(&r)["timed_out"], true);
        assert_eq!(ok(&r)["entries"], json!([]));

        // A wait returns when the dispatcher assigns work.
        let waiting = call(&c, "wait", json!({"timeout_seconds": 60}));
        let dispatcher = async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let run = env.run(&["hook", "assign", "a", "--bead", "gt-9", "--title", "T"]);
            assert_eq!(run.code, 0);
        };
        let (r, ()) = tokio::join!(waiting, dispatcher);
        assert_eq!(ok(&r)["timed_out"], false);
        assert_eq!(ok(&r)["entries"][0]["kind"], "hook");
        assert_eq!(ok(&r)["entries"][0]["top"]["id"], "gt-9");

        // A reminder opened for this agent is in its brief.
        let r = call(
            &c,
            "remind_open",
            json!({"kind": "spec_draft", "source_type": "spec", "source_id": "s-2", "message": "m"}),
        )
        .await;
        assert_eq!(ok(&r)["reminder"]["metadata"]["agent"], "a");
        let r = call(&c, "brief", json!({})).await;
        let kinds: Vec<&str> = ok(&r)["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["hook", "reminder"]);

        // Ready pool work wakes the wait of an agent whose hook is free.
        let b = stdio(&env, "b").await;
        let waiting = call(&b, "wait", json!({"timeout_seconds": 60}));
        let lead = async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let run = env.run(&["work", "post", "--agent", "lead", "--id", "w1", "Ship it"]);
            assert_eq!(run.code, 0);
        };
        let (r, ()) = tokio::join!(waiting, lead);
        assert_eq!(ok(&r)["entries"][0]["kind"], "pool");
        assert_eq!(ok(&r)["entries"][0]["top"]["id"], "w1");
        let r = call(&b, "brief", json!({})).await;
        assert_eq!(text(&r), "pool (1): ready to claim: P2 Ship it [w1]\n");
        b.cancel().await.unwrap();
        let r = call(&c, "wait", json!({"timeout_seconds": 5000})).await;
        assert_eq!(refused(&r), "`timeout_seconds`: expected a number from 0 to 3600, got 5000");
        c.cancel().await.unwrap();
    });
}

#[test]
fn the_brief_resource_notifies_legacy_subscribers_when_it_changes() {
    let env = Env::new();
    runtime().block_on(async {
        let (tx, mut updated) = tokio::sync::mpsc::unbounded_channel();
        let c = stdio_with(&env, "a", Legacy { updated: tx }).await;
        let resources = c.list_resources(None).await.unwrap().resources;
        let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
        assert_eq!(uris, ["chipset://agent/a/brief"]);
        #[allow(deprecated, reason = "the legacy subscription is what is tested")]
        c.subscribe(SubscribeRequestParams::new("chipset://agent/a/brief"))
            .await
            .unwrap();
        #[allow(deprecated, reason = "the legacy subscription is what is tested")]
        let other = c
            .subscribe(SubscribeRequestParams::new("chipset://agent/b/brief"))
            .await;
        assert!(other.is_err(), "another agent's brief is not offered");

        let run = env.run(&[
            "bus", "publish", "--to", "a", "--source", "ci", "--kind", "red",
        ]);
        assert_eq!(run.code, 0);
        let uri = tokio::time::timeout(PATIENCE, updated.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(uri, "chipset://agent/a/brief");

        let read = c
            .read_resource(ReadResourceRequestParams::new("chipset://agent/a/brief"))
            .await
            .unwrap();
        let ResourceContents::TextResourceContents { text, .. } = &read.contents[0] else {
            panic!("the brief is text: {read:?}")
        };
        let brief: Value = serde_json::from_str(text).unwrap();
        assert_eq!(brief["entries"][0]["kind"], "bus");

        // Another agent's traffic changes nothing for a.
        let run = env.run(&[
            "bus", "publish", "--to", "b", "--source", "ci", "--kind", "x",
        ]);
        assert_eq!(run.code, 0);
        let quiet = tokio::time::timeout(Duration::from_millis(1500), updated.recv()).await;
        assert!(
            quiet.is_err(),
            "no update for another agent's queue: {quiet:?}"
        );
        c.cancel().await.unwrap();
    });
}

#[test]
fn the_brief_resource_notifies_listeners_of_the_current_protocol() {
    let env = Env::new();
    runtime().block_on(async {
        // Protocol 2026-07-28: `server/discover` instead of `initialize`,
        // and `subscriptions/listen` instead of `resources/subscribe`.
        let cmd = tokio::process::Command::from(env.command(&["mcp", "--agent", "a"]));
        let lifecycle = ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        };
        let c =
            ().serve_with_lifecycle(TokioChildProcess::new(cmd).unwrap(), lifecycle)
                .await
                .unwrap();
        let filter = SubscriptionFilter::builder()
            .resource_subscription("chipset://agent/a/brief")
            .build();
        let mut sub = c.listen(filter).await.unwrap();
        assert_eq!(
            sub.acknowledged().resource_subscriptions,
            Some(vec!["chipset://agent/a/brief".to_owned()])
        );
        let run = env.run(&[
            "mail",
            "send",
            "--from",
            "b",
            "--to",
            "a",
            "--kind",
            "notify",
            "--subject",
            "s",
            "--body",
            "b",
            "--task",
            "t",
        ]);
        assert_eq!(run.code, 0);
        let note = tokio::time::timeout(PATIENCE, sub.next())
            .await
            .unwrap()
            .unwrap();
        match note {
            Some(ServerNotification::ResourceUpdatedNotification(n)) => {
                assert_eq!(n.params.uri, "chipset://agent/a/brief");
            }
            other => panic!("expected resources/updated, got {other:?}"),
        }
        c.cancel().await.unwrap();
    });
}
