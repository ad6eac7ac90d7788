//! [`Root`]: where a team's state lives, a directory or a PostgreSQL
//! server, told apart from one string as `--root` and `CHIPSET_ROOT` give
//! it.

use std::fmt;
use std::path::{Path, PathBuf};

/// The libpq keywords that start a `key=value` connection string. A root
/// whose first word is `keyword=…` with one of these is a server, never a
/// folder: a folder named `host=db` must be given as `./host=db`.
const LIBPQ_KEYWORDS: &[&str] = &[
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "passfile",
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "service",
    "application_name",
    "connect_timeout",
    "options",
    "target_session_attrs",
];

/// Where the state lives: a directory (the embedded default) or a
/// PostgreSQL server.
///
/// [`Root::parse`] reads one string the way `--root` and `CHIPSET_ROOT`
/// are read: a `postgres://` or `postgresql://` URL, or a libpq
/// `key=value` string (`host=db dbname=team`), is a server; anything else
/// is a folder.
///
/// ```
/// use chipset::Root;
/// assert!(matches!(Root::parse(".chipset/state"), Root::Dir(_)));
/// let server = Root::parse("postgres://agent:s3cret@db.example/team");
/// assert!(matches!(server, Root::Server(_)));
/// // The password is never shown.
/// assert_eq!(server.to_string(), "postgres://agent:***@db.example/team");
/// assert!(!format!("{server:?}").contains("s3cret"));
/// ```
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Root {
    /// A state directory.
    Dir(PathBuf),
    /// A PostgreSQL server.
    Server(ServerUrl),
}

impl Root {
    /// Reads `root` as a folder or a server (see [`Root`]). A path that is
    /// not UTF-8 is a folder.
    pub fn parse(root: impl AsRef<Path>) -> Root {
        let path = root.as_ref();
        match path.to_str() {
            Some(text) if is_server(text) => Root::Server(ServerUrl(text.to_owned())),
            _ => Root::Dir(path.to_owned()),
        }
    }
}

impl fmt::Display for Root {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Root::Dir(path) => write!(f, "{}", path.display()),
            Root::Server(url) => fmt::Display::fmt(url, f),
        }
    }
}

impl fmt::Debug for Root {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Root::Dir(path) => f.debug_tuple("Dir").field(path).finish(),
            Root::Server(url) => f.debug_tuple("Server").field(url).finish(),
        }
    }
}

/// A PostgreSQL connection string, as libpq takes it: a `postgres://` URL
/// or `key=value` words. Settings it leaves out come from libpq's
/// environment variables (`PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`,
/// `PGPASSFILE`, `PGDATABASE`, `PGSSLMODE`, `PGSSLROOTCERT`, …), so a
/// password never needs to be in it.
///
/// Its [`Display`](fmt::Display) and [`Debug`] forms show `***` for a
/// password: print them freely.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerUrl(String);

impl ServerUrl {
    /// Returns the connection string as given, password included: for the
    /// client only, never for a message.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ServerUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&redact(&self.0))
    }
}

impl fmt::Debug for ServerUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", redact(&self.0))
    }
}

/// Whether `text` is a connection string rather than a folder.
fn is_server(text: &str) -> bool {
    let lower = text.trim_start().to_ascii_lowercase();
    if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
        return true;
    }
    let key_end = lower
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(lower.len());
    let (key, rest) = lower.split_at(key_end);
    LIBPQ_KEYWORDS.contains(&key) && rest.trim_start().starts_with('=')
}

/// Returns `text` with every password replaced by `***`: the URL's
/// `user:password@`, a `password=` query parameter, or a `password=`
/// word (quoted or not).
pub(crate) fn redact(text: &str) -> String {
    if let Some(scheme_end) = text.find("://") {
        let (scheme, rest) = text.split_at(scheme_end + 3);
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(authority_end);
        let authority = match authority.rfind('@') {
            Some(at) => match authority[..at].split_once(':') {
                Some((user, _)) => format!("{user}:***{}", &authority[at..]),
                None => authority.to_owned(),
            },
            None => authority.to_owned(),
        };
        let tail = match tail.split_once('?') {
            Some((path, query)) => {
                let query: Vec<String> = query
                    .split('&')
                    .map(|pair| match pair.split_once('=') {
                        Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                        _ => pair.to_owned(),
                    })
                    .collect();
                format!("{path}?{}", query.join("&"))
            }
            None => tail.to_owned(),
        };
        return format!("{scheme}{authority}{tail}");
    }
    redact_words(text)
}

/// Redacts `password = value` in a libpq `key=value` string, where a value
/// may be single-quoted with backslash escapes.
fn redact_words(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = find_word(rest, "password") {
        let after = &rest[at + "password".len()..];
        let trimmed = after.trim_start();
        let Some(value) = trimmed.strip_prefix('=') else {
            out.push_str(&rest[..at + "password".len()]);
            rest = after;
            continue;
        };
        let value = value.trim_start();
        let skip = if let Some(quoted) = value.strip_prefix('\'') {
            let mut end = quoted.len();
            let mut escaped = false;
            for (i, c) in quoted.char_indices() {
                match c {
                    _ if escaped => escaped = false,
                    '\\' => escaped = true,
                    '\'' => {
                        end = i + 1;
                        break;
                    }
                    _ => {}
                }
            }
            1 + end
        } else {
            value.find(char::is_whitespace).unwrap_or(value.len())
        };
        out.push_str(&rest[..at]);
        out.push_str("password=***");
        rest = &value[skip..];
    }
    out.push_str(rest);
    out
}

/// Finds `word` at the start of `text` or after whitespace.
fn find_word(text: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find(word) {
        let at = from + i;
        if at == 0 || text[..at].ends_with(char::is_whitespace) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_and_folders_are_told_apart() {
        for server in [
            "postgres://h/d",
            "postgresql://u@h:5433/d?sslmode=require",
            "POSTGRES://h",
            "host=db dbname=team",
            "dbname=team",
            "  host = db",
        ] {
            assert!(matches!(Root::parse(server), Root::Server(_)), "{server}");
        }
        for dir in [
            ".chipset/state",
            "/srv/state",
            "./host=db",
            "postgres",
            "notes=1",
            "a b",
        ] {
            assert!(matches!(Root::parse(dir), Root::Dir(_)), "{dir}");
        }
    }

    #[test]
    fn passwords_never_show() {
        for (given, shown) in [
            (
                "postgres://u:s3cret@h:1/d?sslmode=require",
                "postgres://u:***@h:1/d?sslmode=require",
            ),
            (
                "postgres://u@h/d?password=s3cret&x=1",
                "postgres://u@h/d?password=***&x=1",
            ),
            ("postgres://u:p@ss:w@h/d", "postgres://u:***@h/d"),
            (
                "host=h password=s3cret dbname=d",
                "host=h password=*** dbname=d",
            ),
            (
                "host=h password = 's3 \\' cret' dbname=d",
                "host=h password=*** dbname=d",
            ),
            ("password=s3cret", "password=***"),
            ("host=h passwordless=1", "host=h passwordless=1"),
            ("postgres://h/d", "postgres://h/d"),
        ] {
            let root = Root::parse(given);
            assert_eq!(root.to_string(), shown, "{given}");
            let debug = format!("{root:?}");
            assert!(!debug.contains("s3") && !debug.contains("p@ss"), "{debug}");
        }
    }
}
