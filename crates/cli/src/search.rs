//! `chipset search WORDS...`: [`Chipset::search`] from a shell, printed
//! through the view the MCP `search` tool returns.

use std::time::Duration;

use chipset::search::{Origin, Query};
use chipset_mcp::view::SearchResults;
use chipset_store::Timestamp;
use clap::Args;

use crate::Ctx;
use crate::error::{CliError, Result};
use crate::output::{self, Output};

/// `chipset search ...`.
#[derive(Debug, Args)]
pub(crate) struct SearchArgs {
    /// The words to find: all must match, in any order, case and accents
    /// ignored; "a phrase" (quoted for the shell too), prefix*, a OR b,
    /// NOT word.
    #[arg(required = true, value_name = "WORDS")]
    pub(crate) words: Vec<String>,
    /// Only hits from this agent (mail sender, bus source, hook assigner).
    #[arg(long, value_name = "A")]
    pub(crate) from: Option<String>,
    /// Only hits addressed to this agent (mail recipient, bus queue, hook holder).
    #[arg(long, value_name = "B")]
    pub(crate) to: Option<String>,
    /// Only hits of this task (mail) or bead (hook).
    #[arg(long, visible_alias = "phase", value_name = "T")]
    pub(crate) task: Option<String>,
    /// Only hits of this kind (request, response, notify; an event kind; a
    /// hook status; a reminder kind).
    #[arg(long, value_name = "K")]
    pub(crate) kind: Option<String>,
    /// Only hits from this channel: mail, bus, hook or reminder.
    #[arg(long, value_name = "C", value_parser = parse_channel)]
    pub(crate) channel: Option<Origin>,
    /// Only hits created since this RFC 3339 time, or this long ago
    /// (`90s`, `30m`, `2h`, `7d`).
    #[arg(long, value_name = "TIME|AGE")]
    pub(crate) since: Option<String>,
    /// At most this many hits, best first (1 or more).
    #[arg(long, value_name = "N", default_value_t = chipset::search::DEFAULT_LIMIT,
          value_parser = parse_limit)]
    pub(crate) limit: usize,
    /// Throw the index away and build it again first (it is a cache; the
    /// doctor's --fix does this too).
    #[arg(long)]
    pub(crate) rebuild: bool,
}

/// Parses `--limit`: a count of hits, at least one (`0` would list nothing
/// and say "no matches" where there are).
fn parse_limit(text: &str) -> std::result::Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("a limit of 0 shows no hit: give 1 or more".to_owned()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("not a count: {text:?}")),
    }
}

fn parse_channel(text: &str) -> std::result::Result<Origin, String> {
    text.parse()
        .map_err(|e: chipset::search::Error| e.to_string())
}

/// Parses `--since`: an RFC 3339 time, or an age before `now`.
fn since(text: &str, now: Timestamp) -> Result<Timestamp> {
    if let Ok(t) = text.parse::<Timestamp>() {
        return Ok(t);
    }
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (n, unit) = text.split_at(split);
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => 0,
    };
    match n.parse::<u64>() {
        Ok(n) if scale > 0 => Ok(now - Duration::from_secs(n.saturating_mul(scale))),
        _ => Err(CliError::usage(format!(
            "--since `{text}` is neither an RFC 3339 time nor an age such as 30m, 2h or 7d"
        ))),
    }
}

/// Runs `chipset search`.
pub(crate) fn run(ctx: &Ctx, args: SearchArgs) -> Result<Output> {
    let chipset = ctx.chipset.clone();
    let mut query = Query::new(args.words.join(" ")).limit(args.limit);
    query.from = args.from;
    query.to = args.to;
    query.task = args.task;
    query.kind = args.kind;
    query.channel = args.channel;
    query.since = args
        .since
        .as_deref()
        .map(|s| since(s, ctx.state.now()))
        .transpose()?;
    if args.rebuild {
        chipset.search_index().rebuild()?;
    }
    let hits = chipset.search(&query)?;
    let total = chipset.search_index().count(&query)?;
    let view = SearchResults::of(&hits, total);
    Ok(Output::new(view.text(), output::json(&view)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_a_time_or_an_age() {
        let now = "2026-11-27T12:00:00.000Z".parse::<Timestamp>().unwrap();
        let at = |s| since(s, now).unwrap().to_string();
        assert_eq!(at("2026-11-27T10:00:00Z"), "2026-11-27T10:00:00.000Z");
        assert_eq!(at("30m"), "2026-11-27T11:30:00.000Z");
        assert_eq!(at("2h"), "2026-11-27T10:00:00.000Z");
        assert_eq!(at("1d"), "2026-11-26T12:00:00.000Z");
        for bad in ["", "m", "5w", "yesterday", "-3h"] {
            assert!(since(bad, now).is_err(), "{bad}");
        }
    }
}
