//! The state on a PostgreSQL server: how [`Chipset::open_server`] connects,
//! and the local folder for what is local by nature.
//!
//! [`Chipset::open_server`]: crate::Chipset::open_server

use std::fmt;
use std::path::PathBuf;
#[cfg(feature = "postgres")]
use std::sync::Arc;

#[cfg(feature = "postgres")]
use chipset_backend::Backend;

use crate::error::Result;
use crate::root::ServerUrl;

/// How [`Chipset::open_server`](crate::Chipset::open_server) opens a
/// server.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ServerOptions {
    /// The PostgreSQL schema that holds chipset's tables, so several teams
    /// can share one database. Default: `$CHIPSET_PG_SCHEMA`, else
    /// `public`.
    pub schema: Option<String>,
    /// The local folder for what is local by nature (the search index and
    /// other caches, never the team's state). Default: a folder per server
    /// and schema under the user's cache folder,
    /// `$XDG_CACHE_HOME/chipset/servers/{id}` (else `~/.cache/…`): per
    /// user, since a cache is nobody else's; per server, so two servers
    /// never share one; and outside the project, so a checkout never
    /// holds a copy of a server's data.
    pub local: Option<PathBuf>,
}

impl ServerOptions {
    #[cfg(feature = "postgres")]
    fn schema(&self) -> String {
        self.schema
            .clone()
            .or_else(|| std::env::var("CHIPSET_PG_SCHEMA").ok())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "public".to_owned())
    }
}

/// An open server: the backend every channel on the seam shares.
pub(crate) struct Server {
    url: ServerUrl,
    /// `user@host:port/dbname`, without a password: names the local folder.
    #[cfg_attr(
        not(feature = "postgres"),
        allow(dead_code, reason = "built only with postgres")
    )]
    identity: String,
    #[cfg(feature = "postgres")]
    backend: Arc<dyn Backend>,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server").field("url", &self.url).finish()
    }
}

impl Server {
    /// Connects to `url` and migrates chipset's tables.
    #[cfg(feature = "postgres")]
    pub(crate) fn open(url: &ServerUrl, options: &ServerOptions) -> Result<Self> {
        let schema = options.schema();
        let backend = chipset_backend::PgBackend::open_with(
            url.expose(),
            chipset_backend::PgOptions::with_schema(schema.clone()),
        )?;
        let identity = format!("{}#{schema}", backend.identity());
        Ok(Server {
            url: url.clone(),
            identity,
            backend: Arc::new(backend),
        })
    }

    /// Refuses: this build has no PostgreSQL client.
    #[cfg(not(feature = "postgres"))]
    pub(crate) fn open(url: &ServerUrl, _options: &ServerOptions) -> Result<Self> {
        Err(crate::Error::NoServerSupport {
            server: url.to_string(),
        })
    }

    pub(crate) fn url(&self) -> &ServerUrl {
        &self.url
    }

    #[cfg(feature = "postgres")]
    pub(crate) fn backend(&self) -> Arc<dyn Backend> {
        Arc::clone(&self.backend)
    }

    #[cfg(not(feature = "postgres"))]
    pub(crate) fn backend(&self) -> std::sync::Arc<dyn chipset_backend::Backend> {
        unreachable!("no server opens without the postgres feature")
    }

    /// Returns the local folder: the option's, else one per server under
    /// the user's cache folder.
    pub(crate) fn local_folder(&self, options: &ServerOptions) -> PathBuf {
        if let Some(local) = &options.local {
            return local.clone();
        }
        let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        let cache = env("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_else(std::env::temp_dir);
        cache
            .join("chipset")
            .join("servers")
            .join(format!("{:016x}", fnv1a(self.identity.as_bytes())))
    }
}

/// A stable name for a server's local folder: the store's FNV-1a, the
/// same in every process and build.
fn fnv1a(bytes: &[u8]) -> u64 {
    crate::store::EscapeAlphabet::fnv1a_64(bytes.iter().copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_local_folder_is_stable_per_server() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_ne!(fnv1a(b"u@a:5432/d#public"), fnv1a(b"u@b:5432/d#public"));
    }
}
