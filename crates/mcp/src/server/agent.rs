//! The directory's tools, a router of their own beside the channels'
//! ([`Server::tool_router`] joins them).

use rmcp::model::CallToolResult;
use rmcp::{ErrorData, tool, tool_router};

use super::Server;
use crate::ops;
use crate::params::{AgentList, AgentListChange, AgentWhois};
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

    #[tool(
        title = "Put agents on a list",
        description = "Put registered agents on a list (`@list` in mail_send's `to` mails them all): the list is a role in each profile. Adding an agent already on it changes nothing. Returns the members.",
        annotations(destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema::output::<view::ListMembers>()
    )]
    async fn agent_list_add(
        &self,
        Parameters(p): Parameters<AgentListChange>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::agent_list_add).await
    }

    #[tool(
        title = "Take agents off a list",
        description = "Take agents off a list. An agent not on it is left alone. Returns the members.",
        annotations(destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema::output::<view::ListMembers>()
    )]
    async fn agent_list_remove(
        &self,
        Parameters(p): Parameters<AgentListChange>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::agent_list_remove).await
    }
}
