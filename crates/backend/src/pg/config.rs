//! Connection settings, the libpq way: a `postgres://` URL or `key=value`
//! string, completed from the `PG*` environment variables, so a password
//! never needs to be on a command line.

use std::time::Duration;

use postgres::Config;
use postgres::config::{Host, SslMode};

use crate::error::{Error, Result};

/// How long a connection attempt may take when neither the URL
/// (`connect_timeout`) nor `PGCONNECT_TIMEOUT` says.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Parses `url` and fills what it leaves out from the environment, as
/// libpq does: `PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`, `PGDATABASE`,
/// `PGSSLMODE`, `PGCONNECT_TIMEOUT`, `PGAPPNAME`.
pub(crate) fn resolve(url: &str, env: impl Fn(&str) -> Option<String>) -> Result<Config> {
    let env = |k: &str| env(k).filter(|v| !v.is_empty());
    let mut config: Config = if url.trim().is_empty() {
        Config::new()
    } else {
        url.parse().map_err(|e| Error::Config {
            why: format!("cannot parse the connection string: {e}"),
        })?
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
    if !url.contains("sslmode")
        && let Some(mode) = env("PGSSLMODE")
    {
        config.ssl_mode(match mode.as_str() {
            "disable" => SslMode::Disable,
            "allow" | "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            other => {
                return Err(Error::Config {
                    why: format!(
                        "PGSSLMODE `{other}` is not supported (disable, prefer or require)"
                    ),
                });
            }
        });
    }
    if config.get_ssl_mode() == SslMode::Require {
        return Err(Error::Config {
            why: "sslmode=require needs TLS, which this build of chipset does not include yet"
                .to_owned(),
        });
    }
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
    Ok(config)
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
        .unwrap();
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
        .unwrap();
        assert_eq!(target(&c), "h1:5433");
        assert_eq!(c.get_user(), Some("bob"));
        assert_eq!(c.get_dbname(), Some("d"));
        assert_eq!(c.get_connect_timeout(), Some(&Duration::from_secs(3)));
    }

    #[test]
    fn key_value_strings_parse_too() {
        let c = resolve("host=/run/pg port=5999 user=u dbname=x", env(&[])).unwrap();
        assert_eq!(c.get_dbname(), Some("x"));
        assert_eq!(c.get_ports(), &[5999]);
    }

    #[test]
    fn unusable_settings_are_typed_errors() {
        for (url, vars) in [
            ("postgres://u@h/d?sslmode=require", env(&[])),
            ("", env(&[("PGSSLMODE", "require")])),
            ("", env(&[("PGPORT", "five")])),
            ("postgres://u@h/d?sslmode=verify-full", env(&[])),
            ("not a url = =", env(&[])),
        ] {
            let err = resolve(url, vars).unwrap_err();
            assert!(matches!(err, Error::Config { .. }), "{url}: {err}");
        }
    }
}
