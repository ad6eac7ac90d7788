//! What a caller asks ([`Query`]) and how its text becomes an FTS5 match
//! expression: pure, so the rules are tested without an index.

use std::fmt;
use std::str::FromStr;

use chipset_store::Timestamp;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The longest query text accepted, in bytes.
pub const MAX_QUERY_LEN: usize = 1024;

/// The most words (and phrases) one query may hold.
pub const MAX_TERMS: usize = 32;

/// The number of hits a query returns when it names no limit.
pub const DEFAULT_LIMIT: usize = 20;

/// The channel a hit comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Origin {
    /// A mail message: its subject and body (inbox and archive).
    Mail,
    /// An unacknowledged bus event: its kind and payload.
    Bus,
    /// A hook's work item: its title.
    Hook,
    /// A reminder (open, snoozed or resolved): its message.
    Reminder,
}

impl Origin {
    /// Every channel, in the order a listing shows them.
    pub const ALL: [Origin; 4] = [Origin::Mail, Origin::Bus, Origin::Hook, Origin::Reminder];

    /// Returns the name a filter uses: `mail`, `bus`, `hook`, `reminder`.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Mail => "mail",
            Origin::Bus => "bus",
            Origin::Hook => "hook",
            Origin::Reminder => "reminder",
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Origin {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Origin::ALL
            .into_iter()
            .find(|o| o.as_str() == s)
            .ok_or_else(|| Error::UnknownChannel { name: s.to_owned() })
    }
}

/// A search: the words to look for and the filters every hit must pass.
///
/// The text is words, matched whole and in any order (every word must be
/// there); `"two words"` is a phrase; `word*` matches words starting with
/// `word`; `OR` between two words matches either; `-word` or `NOT word`
/// excludes. Matching ignores case and accents. Punctuation separates
/// words, so `dead-code` is the phrase `"dead code"`.
///
/// ```
/// use chipset_search::{Origin, Query};
/// let query = Query::new("flaky test").from("np-critic").channel(Origin::Mail);
/// assert_eq!(query.limit, chipset_search::DEFAULT_LIMIT);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Query {
    /// The words.
    pub text: String,
    /// Only hits sent or caused by this agent (mail `from`, bus `source`,
    /// the hook's `assigned_by`).
    pub from: Option<String>,
    /// Only hits addressed to this agent (mail `to`, the bus queue's and
    /// the hook's agent).
    pub to: Option<String>,
    /// Only hits of this task (mail `phase`, the hook's bead).
    pub task: Option<String>,
    /// Only hits of this kind (mail `request`/`response`/`notify`, the bus
    /// event's kind, the hook's status, the reminder's kind).
    pub kind: Option<String>,
    /// Only hits from this channel.
    pub channel: Option<Origin>,
    /// Only hits created (sent, published, assigned, opened) at or after this.
    pub since: Option<Timestamp>,
    /// At most this many hits, best first.
    pub limit: usize,
}

impl Query {
    /// Returns a query for `text` with no filter and [`DEFAULT_LIMIT`].
    pub fn new(text: impl Into<String>) -> Self {
        Query {
            text: text.into(),
            from: None,
            to: None,
            task: None,
            kind: None,
            channel: None,
            since: None,
            limit: DEFAULT_LIMIT,
        }
    }

    /// Returns the query with only hits from `agent`.
    #[must_use]
    pub fn from(mut self, agent: impl Into<String>) -> Self {
        self.from = Some(agent.into());
        self
    }

    /// Returns the query with only hits addressed to `agent`.
    #[must_use]
    pub fn to(mut self, agent: impl Into<String>) -> Self {
        self.to = Some(agent.into());
        self
    }

    /// Returns the query with only hits of `task`.
    #[must_use]
    pub fn task(mut self, task: impl Into<String>) -> Self {
        self.task = Some(task.into());
        self
    }

    /// Returns the query with only hits of `kind`.
    #[must_use]
    pub fn kind(mut self, kind: impl Into<String>) -> Self {
        self.kind = Some(kind.into());
        self
    }

    /// Returns the query with only hits from `channel`.
    #[must_use]
    pub fn channel(mut self, channel: Origin) -> Self {
        self.channel = Some(channel);
        self
    }

    /// Returns the query with only hits created at or after `since`.
    #[must_use]
    pub fn since(mut self, since: Timestamp) -> Self {
        self.since = Some(since);
        self
    }

    /// Returns the query with at most `limit` hits.
    #[must_use]
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }
}

/// One unit of a parsed query: a word or phrase, maybe a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Term {
    text: String,
    prefix: bool,
}

impl Term {
    fn fts(&self) -> String {
        let quoted = format!("\"{}\"", self.text.replace('"', "\"\""));
        if self.prefix { quoted + "*" } else { quoted }
    }
}

/// A group of alternatives (`a OR b`), one of which must match.
type Any = Vec<Term>;

/// Turns a query's text into an FTS5 match expression that cannot be a
/// syntax error: every word and phrase is quoted, so only the operators
/// this function writes reach FTS5.
///
/// # Errors
///
/// [`Error::QueryTooLong`], [`Error::TooManyWords`], and [`Error::NoWords`]
/// when nothing is left to look for.
pub(crate) fn match_expression(text: &str) -> Result<String> {
    if text.len() > MAX_QUERY_LEN {
        return Err(Error::QueryTooLong {
            len: text.len(),
            max: MAX_QUERY_LEN,
        });
    }
    // A control character separates words: a NUL would end SQLite's
    // string inside a quoted word.
    let text = &text.replace(char::is_control, " ");
    let mut all: Vec<Any> = Vec::new();
    let mut none: Vec<Term> = Vec::new();
    let mut join_next = false;
    let mut negate_next = false;
    let mut count = 0;
    for (raw, quoted) in split(text) {
        if !quoted {
            match raw.as_str() {
                "AND" => continue,
                "OR" => {
                    join_next = !all.is_empty();
                    continue;
                }
                "NOT" => {
                    negate_next = true;
                    continue;
                }
                _ => {}
            }
        }
        let (mut word, mut negate) = (raw.as_str(), std::mem::take(&mut negate_next));
        if !quoted && let Some(rest) = word.strip_prefix('-') {
            word = rest;
            negate = true;
        }
        let prefix = !quoted && word.ends_with('*');
        let word = word.trim_end_matches('*');
        if !word.chars().any(char::is_alphanumeric) {
            continue;
        }
        count += 1;
        if count > MAX_TERMS {
            return Err(Error::TooManyWords {
                count: text.split_whitespace().count(),
                max: MAX_TERMS,
            });
        }
        let term = Term {
            text: word.to_owned(),
            prefix,
        };
        if negate {
            none.push(term);
        } else if std::mem::take(&mut join_next) {
            all.last_mut().expect("join_next needs a group").push(term);
        } else {
            all.push(vec![term]);
        }
    }
    if all.is_empty() {
        return Err(Error::NoWords);
    }
    let mut out = all
        .iter()
        .map(|any| {
            let alts: Vec<String> = any.iter().map(Term::fts).collect();
            if alts.len() == 1 {
                alts[0].clone()
            } else {
                format!("({})", alts.join(" OR "))
            }
        })
        .collect::<Vec<_>>()
        .join(" AND ");
    for term in &none {
        out = format!("({out}) NOT {}", term.fts());
    }
    Ok(out)
}

/// Splits on whitespace, keeping `"quoted phrases"` whole (an unclosed
/// quote runs to the end). Returns each piece and whether it was quoted.
fn split(text: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '"' {
            chars.next();
            let phrase: String = chars.by_ref().take_while(|&c| c != '"').collect();
            out.push((phrase, true));
        } else {
            let mut word = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() || c == '"' {
                    break;
                }
                word.push(c);
                chars.next();
            }
            out.push((word, false));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(text: &str, expected: &str) {
        assert_eq!(match_expression(text).unwrap(), expected);
    }

    #[test]
    fn words_phrases_prefixes_and_operators() {
        check("flaky", r#""flaky""#);
        check("flaky test", r#""flaky" AND "test""#);
        check("dead-code", r#""dead-code""#);
        check(r#""round two" critic"#, r#""round two" AND "critic""#);
        check("pars*", r#""pars"*"#);
        check("a OR b c", r#"("a" OR "b") AND "c""#);
        check("a -b", r#"("a") NOT "b""#);
        check("a NOT b", r#"("a") NOT "b""#);
        check("a AND b", r#""a" AND "b""#);
        check(r#"say "hi"#, r#""say" AND "hi""#);
        check(r#"x"y"#, r#""x" AND "y""#);
        check(r#"it's"#, r#""it's""#);
        check("OR a", r#""a""#);
        // A control character, NUL among them, separates words.
        check("a\0b", r#""a" AND "b""#);
        check("\"a\0b\"", r#""a b""#);
    }

    #[test]
    fn a_quote_inside_a_word_cannot_break_out() {
        // A bare word never holds a quote (it ends one), and the quote of a
        // phrase is doubled if it got there.
        let t = Term {
            text: "a\"b".into(),
            prefix: false,
        };
        assert_eq!(t.fts(), r#""a""b""#);
    }

    #[test]
    fn only_operators_is_no_words() {
        for text in [
            "",
            "   ",
            "AND",
            "OR NOT",
            "-",
            "*",
            "\"\"",
            "( ) : ^ +",
            "NOT a",
            "-a -b",
            "- * \"\" AND OR",
        ] {
            assert!(
                matches!(match_expression(text), Err(Error::NoWords)),
                "{text:?}"
            );
        }
    }

    #[test]
    fn too_long_and_too_many() {
        let long = "a".repeat(10_000);
        assert!(matches!(
            match_expression(&long),
            Err(Error::QueryTooLong {
                len: 10_000,
                max: MAX_QUERY_LEN
            })
        ));
        let many = "w ".repeat(MAX_TERMS + 1);
        assert!(matches!(
            match_expression(&many),
            Err(Error::TooManyWords { .. })
        ));
        assert!(match_expression(&"w ".repeat(MAX_TERMS)).is_ok());
    }

    #[test]
    fn channels_parse_and_unknown_is_typed() {
        for o in Origin::ALL {
            assert_eq!(o.as_str().parse::<Origin>().unwrap(), o);
        }
        assert!(matches!(
            "mails".parse::<Origin>(),
            Err(Error::UnknownChannel { .. })
        ));
    }
}
