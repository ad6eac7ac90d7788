//! `chipset mcp`: the MCP server of [`chipset_mcp`], acting as `--agent`.
//!
//! It first registers `--agent` in the agent directory (a retry that
//! writes nothing when its profile exists; a corrupt profile is a warning
//! on stderr, not a failed start).
//!
//! On stdio it serves until the client hangs up; with `--http ADDR` it
//! prints `chipset: listening on http://ADDR/mcp` on stderr (the bound
//! address, so `127.0.0.1:0` reports the port it got) and serves until
//! SIGINT or SIGTERM. A non-loopback address without a token, or an
//! unusable token, is a usage error (exit 2) before anything is bound.

use std::io::Write as _;

use chipset_mcp::{HttpOptions, MCP_PATH, Server, Token};

use crate::Ctx;
use crate::cli::McpArgs;
use crate::error::{CliError, Result};
use crate::output::Output;

/// Runs `chipset mcp`.
pub(crate) fn run(ctx: Ctx, args: McpArgs) -> Result<Output> {
    // Registering is a retry when the profile exists (nothing is written);
    // a profile that cannot be registered (corrupt) must not stop the server.
    let fresh = chipset::directory::Registration::new();
    if let Err(e) = ctx.chipset.directory().register(&args.agent, &fresh) {
        let _ = writeln!(
            std::io::stderr(),
            "chipset: warning: {}",
            chipset_failure::chain(&e)
        );
    }
    let server = Server::on(ctx.chipset, args.agent);
    let outcome = match args.http {
        None => chipset_mcp::run_stdio(server),
        Some(addr) => {
            let token = match (&args.token_env, &args.token_file) {
                (Some(var), _) => Some(Token::from_env(var)),
                (None, Some(path)) => Some(Token::from_file(path)),
                (None, None) => None,
            }
            .transpose()
            .map_err(failure)?;
            let options = HttpOptions { addr, token };
            chipset_mcp::run_http(server, options, |bound| {
                // A closed stderr is no reason to stop serving.
                let _ = writeln!(
                    std::io::stderr(),
                    "chipset: listening on http://{bound}{MCP_PATH}"
                );
            })
        }
    };
    outcome.map_err(failure)?;
    Ok(Output::new("", serde_json::Value::Null))
}

fn failure(e: chipset_mcp::Error) -> CliError {
    CliError::classified(&e)
}
