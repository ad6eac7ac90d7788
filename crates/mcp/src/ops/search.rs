//! The `search` tool and its view, which the command line prints too:
//! full-text search over mail, bus events, hook titles and reminders
//! ([`chipset::search`]), ranked, with a snippet rather than a body.

use chipset::search::{Hit, Origin, Query};
use chipset_failure::Failure;
use chipset_store::Timestamp;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Ctx, Outcome, Reply};

/// The hits a `search` returns unless `limit` says otherwise: a few, since
/// each is read by a model.
pub(crate) const SEARCH_LIMIT: usize = 10;
/// The most hits one `search` returns.
pub(crate) const SEARCH_MAX: usize = 100;

/// A channel's name.
const CHANNEL: &str = "^(mail|bus|hook|reminder)$";

/// `search`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchParams {
    /// The words to find (all must match, any order, case and accents
    /// ignored); `"a phrase"`, `prefix*`, `a OR b`, `-word` to exclude.
    #[schemars(length(min = 1, max = 1024))]
    pub(crate) query: String,
    /// Only hits by this agent (mail sender, bus source, hook assigner).
    /// Named `by`, not `from`: no tool takes a parameter that names its
    /// caller, and this one only filters.
    #[schemars(length(min = 1, max = 255))]
    pub(crate) by: Option<String>,
    /// Only hits addressed to this agent (mail recipient, bus queue, hook holder).
    #[schemars(length(min = 1, max = 255))]
    pub(crate) to: Option<String>,
    /// Only hits of this task (mail task, hook bead).
    #[schemars(length(min = 1, max = 255))]
    pub(crate) task: Option<String>,
    /// Only hits of this kind (request, response, notify; a bus event's
    /// kind; a hook's status; a reminder's kind).
    #[schemars(length(min = 1, max = 255))]
    pub(crate) kind: Option<String>,
    /// Only hits from this channel.
    #[schemars(pattern(CHANNEL))]
    pub(crate) channel: Option<String>,
    /// Only hits created at or after this time (RFC 3339).
    pub(crate) since: Option<String>,
    /// At most this many hits, best first [default: 10, at most 100].
    #[serde(default, deserialize_with = "crate::params::lenient_opt")]
    #[schemars(with = "u32", range(min = 1, max = 100))]
    pub(crate) limit: Option<u32>,
}

/// One hit of a search.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SearchHit {
    /// `mail`, `bus`, `hook` or `reminder`.
    pub channel: String,
    /// The message, event or reminder id; for a hook, its agent.
    pub id: String,
    /// Who sent or caused it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// To whom.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// The task (mail) or bead (hook).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// The kind (mail kind, event kind, hook status, reminder kind).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// When it was created (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// The subject, event kind, work title or reminder message.
    pub title: String,
    /// The words around the match, matches marked `**like this**`.
    pub snippet: String,
}

impl From<&Hit> for SearchHit {
    fn from(h: &Hit) -> Self {
        SearchHit {
            channel: h.channel.as_str().to_owned(),
            id: h.id.clone(),
            from: h.from.clone(),
            to: h.to.clone(),
            task: h.task.clone(),
            kind: h.kind.clone(),
            at: h.at.map(|t| t.to_string()),
            title: h.title.clone(),
            snippet: h.snippet.clone(),
        }
    }
}

/// `search`, `chipset search`: the hits, best first.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SearchResults {
    /// The hits, best first, at most the limit asked.
    pub hits: Vec<SearchHit>,
    /// How many records match in all.
    pub total: usize,
}

impl SearchResults {
    /// Returns the view of `hits`, of `total` matching records.
    pub fn of(hits: &[Hit], total: usize) -> Self {
        SearchResults {
            hits: hits.iter().map(SearchHit::from).collect(),
            total,
        }
    }

    /// Returns the text rendering: two lines per hit (what and where, then
    /// the snippet), or `no matches`.
    pub fn text(&self) -> String {
        if self.hits.is_empty() {
            return "no matches\n".to_owned();
        }
        let mut out = String::new();
        for h in &self.hits {
            let mut meta = Vec::new();
            match (&h.from, &h.to) {
                (Some(f), Some(t)) => meta.push(format!("{f} -> {t}")),
                (Some(f), None) => meta.push(format!("from {f}")),
                (None, Some(t)) => meta.push(format!("to {t}")),
                (None, None) => {}
            }
            meta.extend(h.task.iter().cloned());
            meta.extend(h.kind.iter().cloned());
            meta.extend(h.at.iter().cloned());
            out.push_str(&format!(
                "{} {}  {}\n  {}  [{}]\n",
                h.channel,
                h.id,
                h.title,
                h.snippet.replace('\n', " "),
                meta.join(", ")
            ));
        }
        if self.hits.len() < self.total {
            out.push_str(&format!(
                "… {} more ({} in all): pass a larger limit\n",
                self.total - self.hits.len(),
                self.total
            ));
        }
        out
    }
}

fn parse_channel(name: &str) -> Result<Origin, Failure> {
    name.parse::<Origin>().map_err(Failure::from)
}

fn parse_time(text: &str) -> Result<Timestamp, Failure> {
    text.parse::<Timestamp>()
        .map_err(|e| Failure::usage(format!("since must be an RFC 3339 time: {e}")))
}

pub(crate) fn search(ctx: &Ctx, p: SearchParams) -> Outcome {
    let limit = p.limit.map_or(SEARCH_LIMIT, |n| n as usize);
    if !(1..=SEARCH_MAX).contains(&limit) {
        return Err(Failure::usage(format!(
            "limit must be between 1 and {SEARCH_MAX}, not {limit}"
        )));
    }
    let mut query = Query::new(p.query).limit(limit);
    query.from = p.by;
    query.to = p.to;
    query.task = p.task;
    query.kind = p.kind;
    query.channel = p.channel.as_deref().map(parse_channel).transpose()?;
    query.since = p.since.as_deref().map(parse_time).transpose()?;
    let chipset = &ctx.chipset;
    let hits = chipset.search(&query)?;
    let total = chipset.search_index().count(&query)?;
    let view = SearchResults::of(&hits, total);
    Ok(Reply::new(view.text(), view))
}
