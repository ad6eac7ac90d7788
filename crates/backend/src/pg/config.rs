//! Connection settings, the libpq way: a `postgres://` URL or `key=value`
//! string, completed from the `PG*` environment variables, so a password
//! never needs to be on a command line.

use std::path::PathBuf;
use std::time::Duration;

use postgres::Config;
use postgres::config::{Host, SslMode};

use crate::error::{Error, Result};

/// How long a connection attempt may take when neither the URL
/// (`connect_timeout`) nor `PGCONNECT_TIMEOUT` says.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How the client uses TLS: libpq's `sslmode`, with `sslrootcert`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tls {
    /// `disable`, `allow`, `prefer`, `require`, `verify-ca` or `verify-full`.
    pub(crate) mode: String,
    /// The CA certificate(s) to trust (PEM) for `verify-ca` and
    /// `verify-full`; `None`: `~/.postgresql/root.crt` if there, else the
    /// system's roots.
    pub(crate) root_cert: Option<PathBuf>,
}

/// Connection settings: the client's, and TLS's.
pub(crate) struct Settings {
    pub(crate) config: Config,
    pub(crate) tls: Tls,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the config: it holds the password.
        f.debug_struct("Settings")
            .field("target", &target(&self.config))
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

/// The settings the client's own parser does not know, taken out of the
/// connection string first.
const OURS: &[&str] = &["sslmode", "sslrootcert", "passfile"];

/// Parses `url` and fills what it leaves out from the environment, as
/// libpq does: `PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`, the password
/// file (`passfile`, `PGPASSFILE`, `~/.pgpass`), `PGDATABASE`,
/// `PGSSLMODE`, `PGSSLROOTCERT`, `PGCONNECT_TIMEOUT`, `PGAPPNAME`.
pub(crate) fn resolve(url: &str, env: impl Fn(&str) -> Option<String>) -> Result<Settings> {
    let env = |k: &str| env(k).filter(|v| !v.is_empty());
    let (rest, ours) = take_ours(url);
    let mut config: Config = if rest.trim().is_empty() {
        Config::new()
    } else {
        rest.parse().map_err(|e| Error::Config {
            why: format!("cannot parse the connection string: {e}"),
        })?
    };
    let get = |k: &str| {
        ours.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
    };
    if config.get_hosts().is_empty() {
        let hosts = env("PGHOST").unwrap_or_else(|| "localhost".to_owned());
        for host in hosts.split(',') {
            if host.starts_with('/') {
                config.host_path(host);
            } else {
                config.host(host);
            }
        }
    }
    if config.get_ports().is_empty()
        && let Some(port) = env("PGPORT")
    {
        let port = port.parse().map_err(|_| Error::Config {
            why: format!("PGPORT `{port}` is not a port number"),
        })?;
        config.port(port);
    }
    if config.get_user().is_none() {
        let user = env("PGUSER")
            .or_else(|| env("USER"))
            .unwrap_or_else(|| "postgres".to_owned());
        config.user(&user);
    }
    if config.get_password().is_none()
        && let Some(password) = env("PGPASSWORD")
    {
        config.password(password);
    }
    if config.get_dbname().is_none()
        && let Some(db) = env("PGDATABASE")
    {
        config.dbname(&db);
    }
    if config.get_password().is_none()
        && let Some(file) = super::pgpass::path(get("passfile").as_deref(), &env)
    {
        let host = match config.get_hosts().first() {
            Some(Host::Tcp(h)) => h.clone(),
            _ => "localhost".to_owned(),
        };
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let user = config.get_user().unwrap_or_default().to_owned();
        let db = config.get_dbname().unwrap_or(&user).to_owned();
        if let Some(password) = super::pgpass::lookup(&file, &host, port, &db, &user) {
            config.password(password);
        }
    }
    let mode = get("sslmode")
        .or_else(|| env("PGSSLMODE"))
        .unwrap_or_else(|| "prefer".to_owned());
    config.ssl_mode(match mode.as_str() {
        "disable" => SslMode::Disable,
        "allow" | "prefer" => SslMode::Prefer,
        "require" | "verify-ca" | "verify-full" => SslMode::Require,
        other => {
            return Err(Error::Config {
                why: format!(
                    "sslmode `{other}` is not one of disable, allow, prefer, require, verify-ca, \
                     verify-full"
                ),
            });
        }
    });
    let root_cert = get("sslrootcert")
        .or_else(|| env("PGSSLROOTCERT"))
        .map(PathBuf::from);
    if config.get_connect_timeout().is_none() {
        let timeout = match env("PGCONNECT_TIMEOUT") {
            Some(s) => Duration::from_secs(s.parse().map_err(|_| Error::Config {
                why: format!("PGCONNECT_TIMEOUT `{s}` is not a number of seconds"),
            })?),
            None => DEFAULT_CONNECT_TIMEOUT,
        };
        config.connect_timeout(timeout);
    }
    if config.get_application_name().is_none() {
        let name = env("PGAPPNAME").unwrap_or_else(|| "chipset".to_owned());
        config.application_name(&name);
    }
    Ok(Settings {
        config,
        tls: Tls { mode, root_cert },
    })
}

/// Takes `sslmode`, `sslrootcert` and `passfile` out of a URL's query or
/// a `key=value` string, and returns the rest and them.
fn take_ours(url: &str) -> (String, Vec<(String, String)>) {
    let mut ours = Vec::new();
    if url.contains("://") {
        let Some((base, query)) = url.split_once('?') else {
            return (url.to_owned(), ours);
        };
        let mut kept = Vec::new();
        for pair in query.split('&') {
            match pair.split_once('=') {
                Some((k, v)) if OURS.contains(&k) => ours.push((k.to_owned(), unescape(v))),
                _ => kept.push(pair),
            }
        }
        let rest = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        return (rest, ours);
    }
    let mut kept = Vec::new();
    for word in url.split_whitespace() {
        match word.split_once('=') {
            Some((k, v)) if OURS.contains(&k) => {
                ours.push((k.to_owned(), v.trim_matches('\'').to_owned()));
            }
            _ => kept.push(word),
        }
    }
    (kept.join(" "), ours)
}

/// Undoes a URL's percent-encoding.
fn unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(b) = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Returns `host:port` of the first host, for messages.
pub(crate) fn target(config: &Config) -> String {
    let port = config.get_ports().first().copied().unwrap_or(5432);
    match config.get_hosts().first() {
        Some(Host::Tcp(h)) => format!("{h}:{port}"),
        Some(Host::Unix(p)) => format!("{}:{port}", p.display()),
        None => format!("localhost:{port}"),
    }
}

/// Returns `user@host:port/dbname`, without a password: what names one
/// server's state (a local cache folder, a message).
pub(crate) fn identity(config: &Config) -> String {
    let user = config.get_user().unwrap_or_default();
    let db = config.get_dbname().unwrap_or(user);
    format!("{user}@{}/{db}", target(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_settings_follow_libpq() {
        let s = resolve(
            "postgres://u@h/d?sslmode=verify-full&sslrootcert=%2Fca%2Froot.crt&application_name=x",
            env(&[]),
        )
        .unwrap();
        assert_eq!(s.tls.mode, "verify-full");
        assert_eq!(s.tls.root_cert, Some(PathBuf::from("/ca/root.crt")));
        assert_eq!(s.config.get_ssl_mode(), SslMode::Require);
        assert_eq!(s.config.get_application_name(), Some("x"));
        let s = resolve(
            "host=h sslmode=verify-ca dbname=d",
            env(&[("PGSSLROOTCERT", "/r.crt")]),
        )
        .unwrap();
        assert_eq!(s.tls.mode, "verify-ca");
        assert_eq!(s.tls.root_cert, Some(PathBuf::from("/r.crt")));
        assert_eq!(s.config.get_dbname(), Some("d"));
        let s = resolve("postgres://u@h/d", env(&[("PGSSLMODE", "require")])).unwrap();
        assert_eq!(s.tls.mode, "require");
        let s = resolve(
            "postgres://u@h/d?sslmode=disable",
            env(&[("PGSSLMODE", "require")]),
        )
        .unwrap();
        assert_eq!(s.config.get_ssl_mode(), SslMode::Disable);
    }

    #[test]
    fn the_password_file_fills_a_missing_password() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("pass");
        #[allow(clippy::disallowed_methods, reason = "the test plants the user's file")]
        {
            std::fs::write(&file, "h:5432:d:u:from-file\n").unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let path = file.to_str().unwrap().to_owned();
        let vars = move |k: &str| (k == "PGPASSFILE").then(|| path.clone());
        let c = resolve("postgres://u@h/d", &vars).unwrap().config;
        assert_eq!(c.get_password(), Some(&b"from-file"[..]));
        // The environment's password wins over the file, as in libpq.
        let c = resolve("postgres://u:given@h/d", &vars).unwrap().config;
        assert_eq!(c.get_password(), Some(&b"given"[..]));
    }

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn the_environment_fills_what_the_url_leaves_out() {
        let c = resolve(
            "postgres://alice@db.example:6543/team",
            env(&[
                ("PGPASSWORD", "s3cret"),
                ("PGHOST", "other"),
                ("PGPORT", "1"),
            ]),
        )
        .unwrap()
        .config;
        assert_eq!(target(&c), "db.example:6543");
        assert_eq!(c.get_user(), Some("alice"));
        assert_eq!(c.get_password(), Some(&b"s3cret"[..]));
        assert_eq!(c.get_dbname(), Some("team"));
        assert_eq!(c.get_application_name(), Some("chipset"));
    }

    #[test]
    fn an_empty_url_is_all_environment() {
        let c = resolve(
            "",
            env(&[
                ("PGHOST", "h1"),
                ("PGPORT", "5433"),
                ("PGUSER", "bob"),
                ("PGDATABASE", "d"),
                ("PGCONNECT_TIMEOUT", "3"),
            ]),
        )
        .unwrap()
        .config;
        assert_eq!(target(&c), "h1:5433");
        assert_eq!(c.get_user(), Some("bob"));
        assert_eq!(c.get_dbname(), Some("d"));
        assert_eq!(c.get_connect_timeout(), Some(&Duration::from_secs(3)));
    }

    #[test]
    fn key_value_strings_parse_too() {
        let c = resolve("host=/run/pg port=5999 user=u dbname=x", env(&[]))
            .unwrap()
            .config;
        assert_eq!(c.get_dbname(), Some("x"));
        assert_eq!(c.get_ports(), &[5999]);
    }

    #[test]
    fn unusable_settings_are_typed_errors() {
        for (url, vars) in [
            ("postgres://u@h/d?sslmode=sometimes", env(&[])),
            ("", env(&[("PGSSLMODE", "maybe")])),
            ("", env(&[("PGPORT", "five")])),
            ("not a url = =", env(&[])),
        ] {
            let err = resolve(url, vars).unwrap_err();
            assert!(matches!(err, Error::Config { .. }), "{url}: {err}");
        }
    }
}
