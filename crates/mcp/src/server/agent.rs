//! The directory's tools, a router of their own beside the channels'
//! ([`Server::tool_router`] joins them).

use rmcp::model::CallToolResult;
use rmcp::{ErrorData, tool, tool_router};

use super::Server;
use crate::ops;
use crate::params::{AgentList, AgentWhois};
use crate::schema::{self, Parameters};
use crate::view;

#[tool_router(router = agent_tools, vis = "pub(super)")]
impl Server {
    #[tool(
        title = "Who is this agent",
        description = "Show an agent's profile from the directory (this agent unless name names another): roles, program, model, host, current task, note, and when it was last seen and from which activity.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schema::output::<view::AgentProfile>()
    )]
    async fn agent_whois(
        &self,
        Parameters(p): Parameters<AgentWhois>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::agent_whois).await
    }

    #[tool(
        title = "List agents",
        description = "List the registered agents by name, optionally only those holding a role or seen within a number of seconds: 20 unless limit says otherwise; total counts them all.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schema::output::<view::AgentListing>()
    )]
    async fn agent_list(
        &self,
        Parameters(p): Parameters<AgentList>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::agent_list).await
    }
}
