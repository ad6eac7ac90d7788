//! The MCP server: one tool per agent-facing operation, each a thin shell
//! over [`crate::ops`], and the agent's brief as a subscribable resource.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chipset_failure::Failure;
use chipset_store::{AgentId, StateDir};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    CallToolResult, ContentBlock, CustomRequest, CustomResult, Implementation, ListResourcesResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Resource, ResourceContents, ResourceUpdatedNotificationParam, ServerCapabilities, ServerConfig,
    SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::service::SubscriptionContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, tool, tool_handler, tool_router};

use crate::ops::{self, Ctx, Outcome};
use crate::params::{
    BusAck, BusPending, BusPublish, BusWait, HookAssign, HookClear, HookWork, MailArchive,
    MailInbox, MailPending, MailRead, MailSend, MailThread, NoArguments, NudgeRespond, NudgeSend,
    RemindList, RemindOpen, RemindResolve, RemindSnooze, Wait,
};
use crate::schema::{self, Parameters};
use crate::view::{self, Noted, Partial, Refusal};
use crate::watch;

/// The chipset MCP server for one agent over one state root.
///
/// Cheap to clone: every clone serves the same agent and root (the
/// streamable HTTP transport makes one per session).
#[derive(Debug, Clone)]
pub struct Server {
    ctx: Arc<Ctx>,
    tool_router: ToolRouter<Server>,
    /// The session's `resources/subscribe` watches, by URI.
    subscriptions: Arc<Mutex<HashMap<String, tokio::task::AbortHandle>>>,
}

impl Server {
    /// Returns a server whose tools act as `agent` on `state`.
    pub fn new(state: StateDir, agent: AgentId) -> Self {
        Self::on(chipset::Chipset::from_state(state), agent)
    }

    /// Returns a server whose tools act as `agent` on `chipset`'s state, a
    /// directory or a PostgreSQL server.
    pub fn on(chipset: chipset::Chipset, agent: AgentId) -> Self {
        Server {
            ctx: Arc::new(Ctx::new(chipset, agent)),
            tool_router: schema::compact(Self::tool_router()),
            subscriptions: Arc::default(),
        }
    }

    /// Returns every tool: the channels' (below), the directory's
    /// (`server/agent.rs`), the work pool's (`server/work.rs`) and search
    /// (`server/search.rs`).
    fn tool_router() -> ToolRouter<Server> {
        Self::channel_tools()
            + Self::lease_tools()
            + Self::agent_tools()
            + Self::work_tools()
            + Self::search_tools()
    }

    /// Returns a server for a new session: the same agent and root, no
    /// subscriptions.
    pub(crate) fn session(&self) -> Self {
        Server {
            ctx: Arc::clone(&self.ctx),
            tool_router: self.tool_router.clone(),
            subscriptions: Arc::default(),
        }
    }

    /// Returns the URI of this agent's brief resource,
    /// `chipset://agent/{agent}/brief`.
    pub fn brief_uri(&self) -> String {
        format!("chipset://agent/{}/brief", self.ctx.agent)
    }

    fn check_uri(&self, uri: &str) -> Result<(), ErrorData> {
        if uri == self.brief_uri() {
            Ok(())
        } else {
            Err(ErrorData::resource_not_found(
                format!(
                    "no resource `{uri}`: this server offers `{}` only",
                    self.brief_uri()
                ),
                None,
            ))
        }
    }

    /// Returns the agent the tools act as.
    pub fn agent(&self) -> &AgentId {
        &self.ctx.agent
    }

    /// Returns the state root.
    pub fn state(&self) -> &StateDir {
        &self.ctx.state
    }

    /// Runs `op` with a tool's parsed arguments on the blocking pool (every
    /// library call is file I/O) and turns its outcome into a tool result;
    /// arguments that did not match the tool's input schema are the usage
    /// failure.
    async fn run_with<P, F>(
        &self,
        params: Result<P, Failure>,
        op: F,
    ) -> Result<CallToolResult, ErrorData>
    where
        P: Send + 'static,
        F: FnOnce(&Ctx, P) -> Outcome + Send + 'static,
    {
        let p = match params {
            Ok(p) => p,
            Err(failure) => return Ok(result(Err(failure))),
        };
        let ctx = Arc::clone(&self.ctx);
        match tokio::task::spawn_blocking(move || op(&ctx, p)).await {
            Ok(outcome) => Ok(result(outcome)),
            Err(e) => Err(ErrorData::internal_error(
                format!("the operation did not finish: {e}"),
                None,
            )),
        }
    }
}

/// The `_meta` key of a failed result's document ([`Refusal`], beside what
/// a failed listing could read).
pub const ERROR_META: &str = "chipset/error";

/// Returns the MCP tool result for an outcome: the structured view with a
/// text rendering, or, for a failure, `isError` with the command line's
/// one-line message as text and the [`Refusal`] (beside what a failed
/// listing could read) under `_meta` [`ERROR_META`]. A failure carries no
/// structured content: clients validate it against the tool's output
/// schema, which describes the success, and a validating client (the
/// TypeScript SDK's) would show the agent a schema error instead of why
/// the call failed.
pub(crate) fn result(outcome: Outcome) -> CallToolResult {
    let (content, doc) = match outcome {
        Ok(reply) => match reply.failure {
            None => {
                let mut r = CallToolResult::structured(reply.json);
                r.content = vec![ContentBlock::text(reply.text)];
                return r;
            }
            Some(failure) => {
                let doc = serde_json::to_value(Partial {
                    result: reply.json,
                    refusal: Refusal::of(&failure),
                });
                let content = vec![
                    ContentBlock::text(reply.text),
                    ContentBlock::text(failure.to_string()),
                ];
                (content, doc)
            }
        },
        Err(failure) => {
            let doc = serde_json::to_value(Refusal::of(&failure));
            (vec![ContentBlock::text(failure.to_string())], doc)
        }
    };
    let mut meta = rmcp::model::MetaObject::new();
    meta.0
        .insert(ERROR_META.to_owned(), doc.unwrap_or_default());
    CallToolResult::error(content).with_meta(Some(meta))
}

#[tool_router(router = channel_tools)]
impl Server {
    /// Finds this agent's work and starts it: pending work becomes active in
    /// the same locked step; active work (after a restart) is resumed.
    #[tool(
        title = "Pick up my work",
        description = "Is there work for me? Starts pending hook work (pending becomes active) or resumes active work; outcome idle, started, resumed or awaiting_clear.",
        annotations(destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema::output::<view::Pickup>()
    )]
    async fn hook_pickup(
        &self,
        Parameters(p): Parameters<NoArguments>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::hook_pickup).await
    }

    #[tool(
        title = "Heartbeat on my work",
        description = "Heartbeat on the active work this agent's hook holds (with bead or generation: only if it still holds that work).",
        annotations(destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema::output::<view::HookRecord>()
    )]
    async fn hook_touch(
        &self,
        Parameters(p): Parameters<HookWork>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::hook_touch).await
    }

    #[tool(
        title = "Complete my work",
        description = "Finish the active work this agent's hook holds (with bead or generation: only if it still holds that work).",
        annotations(destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema::output::<view::HookRecord>()
    )]
    async fn hook_complete(
        &self,
        Parameters(p): Parameters<HookWork>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::hook_complete).await
    }

    #[tool(
        title = "Assign work (dispatcher)",
        description = "Assign work to another agent's empty hook, as its dispatcher (recorded as assigned_by); refused unless the hook is empty.",
        annotations(destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema::output::<view::AssignmentRecord>()
    )]
    async fn hook_assign(
        &self,
        Parameters(p): Parameters<HookAssign>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::hook_assign).await
    }

    #[tool(
        title = "Clear a hook (dispatcher)",
        description = "Clear an agent's completed work, or with reassign take its pending or active work away; fenced on the work the hook holds now.",
        annotations(destructive_hint = true, idempotent_hint = false, open_world_hint = false),
        output_schema = schema::output::<view::Cleared>()
    )]
    async fn hook_clear(
        &self,
        Parameters(p): Parameters<HookClear>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::hook_clear).await
    }

    #[tool(
        title = "Read my nudge",
        description = "Show this agent's latest nudge and mark a new one processed (state new, seen or empty).",
        annotations(destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema::output::<Noted<view::NudgeRead>>()
    )]
    async fn nudge_read(
        &self,
        Parameters(p): Parameters<NoArguments>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, |ctx, _| ops::nudge_read(ctx)).await
    }

    #[tool(
        title = "Answer my nudge",
        description = "Answer this agent's latest nudge (and mark it processed).",
        annotations(destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = schema::output::<Noted<view::NudgeAnswered>>()
    )]
    async fn nudge_respond(
        &self,
        Parameters(p): Parameters<NudgeRespond>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::nudge_respond).await
    }

    #[tool(
        title = "Send a nudge",
        description = "Send a nudge from this agent (latest wins; an unprocessed abort is replaced only by an abort).",
        annotations(destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = schema::output::<Noted<view::NudgeSent>>()
    )]
    async fn nudge_send(
        &self,
        Parameters(p): Parameters<NudgeSend>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::nudge_send).await
    }

    #[tool(
        title = "Send a message",
        description = "Send a message from this agent; returns the new message. `to` may name a group (`a,b`, `@list`, `@all`): each recipient gets its own copy, and the result lists them under the group id.",
        annotations(destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = schema::output::<view::SentRecord>()
    )]
    async fn mail_send(
        &self,
        Parameters(p): Parameters<MailSend>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::mail_send).await
    }

    #[tool(
        title = "List my inbox",
        description = "List this agent's inbox, oldest first: 20 messages unless limit says otherwise, without bodies unless bodies is true (mail_read shows one whole); total counts them all.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schema::output::<view::MailListing>()
    )]
    async fn mail_inbox(
        &self,
        Parameters(p): Parameters<MailInbox>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::mail_inbox).await
    }

    #[tool(
        title = "Read a message",
        description = "Show one message whole, body included.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schema::output::<view::MessageRecord>()
    )]
    async fn mail_read(
        &self,
        Parameters(p): Parameters<MailRead>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::mail_read).await
    }

    #[tool(
        title = "Archive a message",
        description = "Archive a message addressed to this agent (a request only after it was answered).",
        annotations(destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema::output::<view::Archived>()
    )]
    async fn mail_archive(
        &self,
        Parameters(p): Parameters<MailArchive>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::mail_archive).await
    }

    #[tool(
        title = "Show a thread",
        description = "Show the thread a message belongs to, in causal order (limit and bodies as mail_inbox).",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schema::output::<view::MailListing>()
    )]
    async fn mail_thread(
        &self,
        Parameters(p): Parameters<MailThread>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::mail_thread).await
    }

    #[tool(
        title = "Pending replies of a task",
        description = "List a task's requests still waiting for a reply (the commit gate: commit only when total is 0).",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schema::output::<view::MailListing>()
    )]
    async fn mail_pending(
        &self,
        Parameters(p): Parameters<MailPending>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::mail_pending).await
    }

    #[tool(
        title = "Publish an event",
        description = "Publish an event to an agent's queue, with this agent as its source; a duplicate dedup_key publishes nothing.",
        annotations(destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = schema::output::<view::Published>()
    )]
    async fn bus_publish(
        &self,
        Parameters(p): Parameters<BusPublish>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::bus_publish).await
    }

    #[tool(
        title = "List my events",
        description = "List this agent's unacknowledged events, critical first (20 unless limit says otherwise; total counts them all).",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schema::output::<view::Events>()
    )]
    async fn bus_pending(
        &self,
        Parameters(p): Parameters<BusPending>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::bus_pending).await
    }

    #[tool(
        title = "Acknowledge an event",
        description = "Acknowledge an event in this agent's queue.",
        annotations(destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema::output::<view::Acked>()
    )]
    async fn bus_ack(
        &self,
        Parameters(p): Parameters<BusAck>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::bus_ack).await
    }

    #[tool(
        title = "Wait for events",
        description = "Block until this agent has pending events, then list them as bus_pending; timed_out: true with no events when the timeout passes.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schema::output::<view::Events>()
    )]
    async fn bus_wait(
        &self,
        Parameters(p): Parameters<BusWait>,
        request: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(result(
            watch::bus_wait(&self.ctx, p, request.ct.cancelled()).await,
        ))
    }

    #[tool(
        title = "Open a reminder",
        description = "Open a reminder for an open obligation (idempotent per kind, source type and source id).",
        annotations(destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema::output::<Noted<view::ReminderOpened>>()
    )]
    async fn remind_open(
        &self,
        Parameters(p): Parameters<RemindOpen>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::remind_open).await
    }

    #[tool(
        title = "List reminders",
        description = "List open reminders, oldest first (20 unless limit says otherwise; total counts them all).",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schema::output::<view::Reminders>()
    )]
    async fn remind_list(
        &self,
        Parameters(p): Parameters<RemindList>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::remind_list).await
    }

    #[tool(
        title = "Resolve a reminder",
        description = "Resolve a reminder by hand (completed or ignored).",
        annotations(destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema::output::<Noted<view::ReminderRecord>>()
    )]
    async fn remind_resolve(
        &self,
        Parameters(p): Parameters<RemindResolve>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::remind_resolve).await
    }

    #[tool(
        title = "Snooze a reminder",
        description = "Put a reminder off for some hours; it reopens when the time has come.",
        annotations(destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = schema::output::<view::ReminderRecord>()
    )]
    async fn remind_snooze(
        &self,
        Parameters(p): Parameters<RemindSnooze>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::remind_snooze).await
    }

    #[tool(
        title = "What needs me",
        description = "What needs this agent now, across every channel: one entry per kind (hook, nudge, mail, bus, reminder) with a count and the most urgent item; no entries when idle.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schema::output::<view::BriefRecord>()
    )]
    async fn brief(
        &self,
        Parameters(p): Parameters<NoArguments>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, |ctx, _| ops::brief(ctx)).await
    }

    #[tool(
        title = "Wait until something needs me",
        description = "Block until anything needs this agent (a pending hook, an unprocessed nudge, mail, a pending event, a due reminder), then return the brief; timed_out: true when the timeout passes first.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schema::output::<view::Waited>()
    )]
    async fn wait(
        &self,
        Parameters(p): Parameters<Wait>,
        request: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(result(
            watch::wait(&self.ctx, p, request.ct.cancelled()).await,
        ))
    }

    #[tool(
        title = "My status",
        description = "This agent's status: its hook, whether a nudge waits, inbox and bus counts, open reminders.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schema::output::<view::AgentReport>()
    )]
    async fn status(
        &self,
        Parameters(p): Parameters<NoArguments>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, |ctx, _| ops::status(ctx)).await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_resources_subscribe()
            .build();
        // rmcp names itself unless told (`from_build_env` reads rmcp's own
        // crate name and version).
        let server = Implementation::new("chipset", env!("CARGO_PKG_VERSION"))
            .with_title("chipset coordination");
        ServerConfig::new(capabilities)
            .with_server_info(server)
            .with_instructions(format!(
                "chipset coordination tools acting as agent `{}`: hook (your work item), \
                 nudge (urgent signals), mail (threaded messages), bus (event queue), \
                 remind (open obligations), lease (paths you edit), work (a shared pool \
                 to claim from), agent (the directory and its lists), search, status, \
                 and brief/wait (what needs you). Subscribe to `{}` to be told when \
                 what needs you changes.",
                self.ctx.agent,
                self.brief_uri()
            ))
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        Err(crate::error::unparsed(&request.method))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let brief = Resource::new(self.brief_uri(), "brief")
            .with_title(format!("What needs {}", self.ctx.agent))
            .with_description(
                "The agent's brief: one entry per kind of work that needs it (the `brief` tool's \
                 structured result); subscribe to be notified when it changes.",
            )
            .with_mime_type("application/json");
        Ok(ListResourcesResult::with_all_items(vec![brief]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.check_uri(&request.uri)?;
        let ctx = Arc::clone(&self.ctx);
        let outcome = tokio::task::spawn_blocking(move || ops::brief(&ctx))
            .await
            .map_err(|e| {
                ErrorData::internal_error(format!("the read did not finish: {e}"), None)
            })?;
        match outcome {
            Ok(reply) => {
                let text = serde_json::to_string_pretty(&reply.json).unwrap_or_default();
                let contents =
                    ResourceContents::text(text, request.uri).with_mime_type("application/json");
                Ok(ReadResourceResult::new(vec![contents]).into())
            }
            Err(failure) => Err(ErrorData::internal_error(failure.to_string(), None)),
        }
    }

    // `resources/subscribe` is how clients of protocol versions before
    // 2026-07-28 (the MCP Inspector, most hosts today) ask for updates;
    // `listen` below is the newer form. Both run the same watch.
    #[allow(
        deprecated,
        reason = "serves clients of protocol versions before 2026-07-28"
    )]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.check_uri(&request.uri)?;
        let stream = watch::briefs(&self.ctx).await?;
        let peer = context.peer;
        let uri = request.uri.clone();
        let task = tokio::spawn(watch::notify(stream, move || {
            let peer = peer.clone();
            let param = ResourceUpdatedNotificationParam::new(uri.clone());
            async move { peer.notify_resource_updated(param).await.is_ok() }
        }));
        let mut subs = self.subscriptions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = subs.insert(request.uri, task.abort_handle()) {
            old.abort();
        }
        Ok(())
    }

    #[allow(
        deprecated,
        reason = "serves clients of protocol versions before 2026-07-28"
    )]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let mut subs = self.subscriptions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(task) = subs.remove(&request.uri) {
            task.abort();
        }
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let wanted = requested
            .resource_subscriptions
            .as_ref()
            .is_some_and(|uris| uris.contains(&self.brief_uri()));
        let mut accepted = SubscriptionFilter::new();
        if wanted {
            accepted.resource_subscriptions = Some(vec![self.brief_uri()]);
        }
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let uri = self.brief_uri();
        let accepted = context
            .accepted()
            .resource_subscriptions
            .as_ref()
            .is_some_and(|uris| uris.contains(&uri));
        if !accepted {
            context.cancelled().await;
            return Ok(());
        }
        let (stream, now) = watch::briefs(&self.ctx).await?;
        let sink = context.sink();
        // The acknowledgement went out before this watch began, so a change
        // in between is already in `now` and would never be announced: a
        // brief that is not empty is announced once at the start. A
        // spurious update costs the client a read; a lost one, the work.
        if !now.is_empty() && sink.notify_resource_updated(uri.clone()).await.is_err() {
            return Ok(());
        }
        let stream = (stream, now);
        tokio::select! {
            () = watch::notify(stream, || {
                let uri = uri.clone();
                async move { sink.notify_resource_updated(uri).await.is_ok() }
            }) => {}
            () = context.cancelled() => {}
        }
        Ok(())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // The last handle of a session stops its watches.
        if Arc::strong_count(&self.subscriptions) == 1 {
            let subs = self.subscriptions.lock().unwrap_or_else(|e| e.into_inner());
            for task in subs.values() {
                task.abort();
            }
        }
    }
}

mod agent;
mod lease;
mod search;
#[cfg(test)]
mod tests;
mod work;
