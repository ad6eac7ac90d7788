//! `chipset serve`: the read-only web dashboard of [`chipset_console`].
//!
//! It prints `chipset: dashboard at http://ADDR/` on stderr (the bound
//! address, so `127.0.0.1:0` reports the port it got) and serves until
//! SIGINT or SIGTERM. A non-loopback address without a token, or an
//! unusable token, is a usage error (exit 2) before anything is bound:
//! the MCP HTTP server's rule.

use std::io::Write as _;

use chipset_console::ServeOptions;
use chipset_failure::Class;
use chipset_mcp::Token;

use crate::Ctx;
use crate::cli::ServeArgs;
use crate::error::{CliError, Result};
use crate::output::Output;

/// Runs `chipset serve`.
pub(crate) fn run(ctx: &Ctx, args: &ServeArgs) -> Result<Output> {
    let token = match (&args.token_env, &args.token_file) {
        (Some(var), _) => Some(Token::from_env(var)),
        (None, Some(path)) => Some(Token::from_file(path)),
        (None, None) => None,
    }
    .transpose()
    .map_err(|e| CliError::from_error(Class::Usage, &e))?;
    let mut options = ServeOptions::new(args.addr, token);
    options.rescan = args.rescan;
    let chipset = ctx.chipset.clone();
    chipset_console::run(chipset, options, |bound| {
        // A closed stderr is no reason to stop serving.
        let _ = writeln!(std::io::stderr(), "chipset: dashboard at http://{bound}/");
    })
    .map_err(|e| {
        let class = match &e {
            chipset_console::Error::Http(h) if h.is_usage() => Class::Usage,
            _ => Class::Refused,
        };
        CliError::from_error(class, &e)
    })?;
    Ok(Output::new("", serde_json::Value::Null))
}
