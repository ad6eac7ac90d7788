//! `chipset init`: creates the state root (where every other command would
//! look for it) and prints the `.mcp.json` entry that serves it to an agent
//! host, so a fresh folder is one command away from working.

use std::collections::BTreeMap;

use chipset_mcp::view::{Initialized, McpJson, McpServer};
use chipset_store::{AgentId, StateDir};

use crate::cli::Cli;
use crate::error::{CliError, Result};
use crate::output::{self, Output};

/// The agent named in the snippet when `--agent` is not given.
const PLACEHOLDER: &str = "AGENT";

/// Runs `chipset init [--agent AGENT]`.
pub(crate) fn run(cli: &Cli, agent: Option<&AgentId>) -> Result<Output> {
    let place = crate::locate(cli)?;
    let root = place.root.clone().expect("init is not a mail command");
    if let chipset::Root::Server(url) = chipset::Root::parse(&root) {
        // Never a folder named after the URL; the server's tables are
        // created by the first command that opens it.
        return Err(CliError::refused(format!(
            "`chipset init` makes a state directory; {url} is a server, whose tables the \
             first command on it creates"
        )));
    }
    let existed = chipset_store::StateDir::stat_outside(&root)?.is_some_and(|s| s.is_dir());
    if !existed && chipset_store::StateDir::stat_outside(&root)?.is_some() {
        return Err(CliError::refused(format!(
            "`{}` exists and is not a directory",
            root.display()
        )));
    }
    StateDir::open(&root)?;
    // Absolute: the same whichever way the root was found, and right from
    // any folder the agent host starts the server in.
    let root = std::path::absolute(&root).map_err(|e| {
        CliError::refused(format!("cannot tell where `{}` is: {e}", root.display()))
    })?;
    let mut args = vec!["mcp".to_owned(), "--agent".to_owned()];
    args.push(agent.map_or_else(|| PLACEHOLDER.to_owned(), ToString::to_string));
    // A root given by --root or $CHIPSET_ROOT travels with the snippet, as
    // the absolute path (a relative one would be taken from wherever the
    // host starts the server, and the variable may not be set there). One
    // found from the current directory is found again by the server,
    // started in the project.
    if crate::explicit_root(cli).is_some() {
        args.push("--root".to_owned());
        args.push(root.display().to_string());
    }
    let mail_dir = match &place.mail {
        Some(dir) => Some(std::path::absolute(dir).map_err(|e| {
            CliError::refused(format!("cannot tell where `{}` is: {e}", dir.display()))
        })?),
        None => None,
    };
    // So is a mail folder given by --mail-dir; a nubos-pilot project's is
    // found again as the root is.
    if let (Some(dir), false) = (&mail_dir, place.found_project) {
        args.push("--mail-dir".to_owned());
        args.push(dir.display().to_string());
    }
    let view = Initialized {
        root: root.clone(),
        created: !existed,
        mail_dir: mail_dir.clone(),
        mcp_json: McpJson {
            mcp_servers: BTreeMap::from([(
                "chipset".to_owned(),
                McpServer {
                    command: "chipset".to_owned(),
                    args,
                },
            )]),
        },
    };
    let snippet = serde_json::to_string_pretty(&view.mcp_json).unwrap_or_default();
    let what = if existed { "found" } else { "created" };
    let mail = mail_dir.map_or_else(String::new, |dir| {
        format!(", with mail kept in `{}`", dir.display())
    });
    let mut text = format!(
        "{what} the state root `{}`{mail}\n\nFor an agent host that reads `.mcp.json` (Claude Code, \
         Cursor, …), add to the project's `.mcp.json`:\n\n{snippet}\n",
        root.display()
    );
    if agent.is_none() {
        text.push_str(&format!(
            "\n(replace {PLACEHOLDER} with the agent's id, or run `chipset init --agent ID`)\n"
        ));
    }
    Ok(Output::new(text, output::json(&view)))
}
