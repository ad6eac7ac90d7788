//! The work pool's tools, a router of their own beside the channels'
//! ([`Server::tool_router`] joins them).

use rmcp::model::CallToolResult;
use rmcp::{ErrorData, tool, tool_router};

use super::Server;
use crate::ops;
use crate::params::{WorkClaim, WorkReady, WorkRelease};
use crate::schema::{self, Parameters};
use crate::view;

#[tool_router(router = work_tools, vis = "pub(super)")]
impl Server {
    #[tool(
        title = "List ready work",
        description = "List the work pool's claimable items: dependencies done, not deferred, on no hook; most urgent (priority 0) first, then oldest. Optionally only items carrying a label, or for a role (items for that role and for none). At most limit (default 20); total counts them all.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schema::output::<view::WorkListing>()
    )]
    async fn work_ready(
        &self,
        Parameters(p): Parameters<WorkReady>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::work_ready).await
    }

    #[tool(
        title = "Claim work",
        description = "Claim the most urgent, oldest ready item of the work pool (or the item id names) onto this agent's hook, in one step: each item is claimed by exactly one agent. Then hook_pickup starts it and hook_complete finishes it; the next claim records it done. Item is null when nothing is ready. Refused when the hook holds other work. Claiming again while the hook holds a pool item returns that item (existing).",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        output_schema = schema::output::<view::WorkClaimed>()
    )]
    async fn work_claim(
        &self,
        Parameters(p): Parameters<WorkClaim>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::work_claim).await
    }

    #[tool(
        title = "Release work",
        description = "Return the pool item on this agent's hook to the pool with a reason: the hook is emptied and the item is ready for another agent. Refused for another agent's item or a done one; releasing again is success.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        output_schema = schema::output::<view::WorkSettled>()
    )]
    async fn work_release(
        &self,
        Parameters(p): Parameters<WorkRelease>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::work_release).await
    }
}
