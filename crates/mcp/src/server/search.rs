//! The search tool, a router of its own beside the channels'
//! ([`Server::tool_router`] joins them).

use rmcp::model::CallToolResult;
use rmcp::{ErrorData, tool, tool_router};

use super::Server;
use crate::ops;
use crate::ops::search::SearchParams;
use crate::schema::{self, Parameters};
use crate::view;

#[tool_router(router = search_tools, vis = "pub(super)")]
impl Server {
    #[tool(
        title = "Search everything",
        description = "Find words in every agent's mail (subjects and bodies, inbox and archive), pending bus events, hook work titles and reminders. All words must match (any order, case and accents ignored); \"a phrase\", prefix*, a OR b, -word. Filter by by (the sender), to, task, kind, channel (mail, bus, hook, reminder) and since (RFC 3339). Returns the best hits first, 10 unless limit says otherwise (at most 100), each with a short snippet, not the whole body: read a message with mail_read.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schema::output::<view::SearchResults>()
    )]
    async fn search(
        &self,
        Parameters(p): Parameters<SearchParams>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run_with(p, ops::search).await
    }
}
