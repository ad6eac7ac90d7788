//! A server that cannot serve (the state root is missing, say) still
//! answers: its client gets the reason as the error of `initialize` (or of
//! `server/discover`, and of any tool call), where a host shows it, rather
//! than a connection closed without a word.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, DiscoverResult, InitializeRequestParams,
    InitializeResult, ListToolsResult, PaginatedRequestParams,
};
use rmcp::service::{RequestContext, ServerInitializeError};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt as _};

use crate::error::{Error, Result};
use crate::stdio::{Lines, MAX_LINE};

/// Refuses every request with one reason.
#[derive(Debug, Clone)]
struct Refusal {
    reason: String,
}

impl Refusal {
    fn error(&self) -> ErrorData {
        ErrorData::invalid_request(self.reason.clone(), None)
    }
}

impl ServerHandler for Refusal {
    async fn initialize(
        &self,
        _request: InitializeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        Err(self.error())
    }

    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        Err(self.error())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Err(self.error())
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Err(self.error())
    }
}

/// Answers one MCP client on stdin and stdout with `reason` as the error
/// of its handshake, then returns: what `chipset mcp` does when it cannot
/// serve, so that the host shows why.
///
/// # Errors
///
/// [`Error::Runtime`]; [`Error::Initialize`] when the client hung up or
/// spoke something else before the reason could be sent.
pub fn refuse_stdio(reason: impl Into<String>) -> Result<()> {
    let refusal = Refusal {
        reason: reason.into(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    runtime.block_on(async move {
        let lines = Lines::new(tokio::io::stdin(), tokio::io::stdout(), MAX_LINE);
        match refusal.serve(lines).await {
            // The client has the reason.
            Err(ServerInitializeError::InitializeFailed(_)) => Ok(()),
            Err(e) => Err(Error::Initialize(e.to_string())),
            Ok(running) => {
                // A client of the newer lifecycle got the reason as the
                // answer to its requests; serve it until it hangs up.
                let _ = running.waiting().await;
                Ok(())
            }
        }
    })
}
