//! The path leases' tools, a router of their own beside the channels'
//! ([`Server::tool_router`] joins them).

use rmcp::model::CallToolResult;
use rmcp::{ErrorData, tool, tool_router};

use super::Server;
use crate::ops;
use crate::params::{LeaseAcquire, LeaseList, LeaseRelease, LeaseRenew};
use crate::schema::{self, Parameters};
use crate::view;

#[tool_router(router = lease_tools, vis = "pub(super)")]
impl Server {
    #[tool(
        title = "Lease paths",
        description = "Lease paths or globs of the project (relative to its root) for this agent, exclusive unless shared, for ttl_minutes (default 30). Refused, changing nothing, when live leases of other agents overlap: the error names every one (holder, paths, expiry). Returns the lease and its fencing token.",
        annotations(destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema::output::<view::LeaseGranted>()
    )]
    async fn lease_acquire(
        &self,
        Parameters(p): Parameters<LeaseAcquire>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::lease_acquire).await
    }

    #[tool(
        title = "Renew my lease",
        description = "Extend this agent's lease (named by its fencing token) to now plus ttl_minutes (default 30). Refused when the lease is no longer held (released, forced, or expired and taken).",
        annotations(destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema::output::<view::LeaseRenewed>()
    )]
    async fn lease_renew(
        &self,
        Parameters(p): Parameters<LeaseRenew>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::lease_renew).await
    }

    #[tool(
        title = "Release a lease",
        description = "Release this agent's lease by its fencing token (a token already released is success). With force and a reason, release another agent's lease, as for one abandoned (nothing checks that its holder is gone); its holder is mailed the reason.",
        annotations(destructive_hint = true, idempotent_hint = true, open_world_hint = false),
        output_schema = schema::output::<view::LeaseReleased>()
    )]
    async fn lease_release(
        &self,
        Parameters(p): Parameters<LeaseRelease>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::lease_release).await
    }

    #[tool(
        title = "List leases",
        description = "List the live path leases of every agent (with all, expired ones still recorded too), in token order: at most limit (default 20), with the total.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schema::output::<view::LeaseListing>()
    )]
    async fn lease_list(
        &self,
        Parameters(p): Parameters<LeaseList>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::lease_list).await
    }
}
