//! `chipset serve`: the read-only web dashboard of [`chipset_console`].
//!
//! It prints `chipset: dashboard at http://ADDR/` on stderr (the bound
//! address, so `127.0.0.1:0` reports the port it got) and serves until
//! SIGINT or SIGTERM. A non-loopback address without a token, or an
//! unusable token, is a usage error (exit 2) before anything is bound:
//! the MCP HTTP server's rule. With `--json`, one JSON line on stdout
//! says where it listens, and a JSON document when it stops.

use std::io::Write as _;

use chipset_console::ServeOptions;
use chipset_failure::Class;
use chipset_mcp::Token;

use crate::Ctx;
use crate::cli::ServeArgs;
use crate::error::{CliError, Result};
use crate::output::{self, Output};
use crate::view::Serving;

/// Runs `chipset serve`. With `--json` it also prints, on stdout, one
/// line `{"addr", "url"}` once it is listening (the port `127.0.0.1:0`
/// got), and `{"stopped": true, "addr"}` when a signal stopped it.
pub(crate) fn run(ctx: &Ctx, args: &ServeArgs, json: bool) -> Result<Output> {
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
    let mut addr = None;
    chipset_console::run(chipset, options, |bound| {
        addr = Some(bound);
        // A closed stderr is no reason to stop serving.
        let _ = writeln!(std::io::stderr(), "chipset: dashboard at http://{bound}/");
        if json {
            let listening = Serving {
                stopped: false,
                addr: Some(bound),
                url: Some(format!("http://{bound}/")),
            };
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", output::json(&listening)).and_then(|()| out.flush());
        }
    })
    .map_err(|e| CliError::classified(&e))?;
    let stopped = Serving {
        stopped: true,
        addr,
        url: None,
    };
    Ok(Output::new("", output::json(&stopped)).compact())
}
