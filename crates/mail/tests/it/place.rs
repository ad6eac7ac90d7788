//! Where a test's mail lives (issue 30): a state root's directory, or a
//! PostgreSQL server (`CHIPSET_TEST_PG`) and a schema of the test's own.
//! The model, property and race tests take a place, so the same bodies run
//! on both backends.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use chipset_backend::{Backend, PgBackend, PgOptions};
use chipset_mail::{Mail, MailConfig};
use chipset_store::StateDir;

/// The variable that names the PostgreSQL server for the tests.
pub(crate) const PG_ENV: &str = "CHIPSET_TEST_PG";

/// The directory itself, or a server and a schema.
pub(crate) struct Place {
    pg: Option<(String, String)>,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

impl Place {
    /// The state root's own directory: mail's tuned file paths.
    pub(crate) fn fs() -> Place {
        Place { pg: None }
    }

    /// A fresh schema on the server `CHIPSET_TEST_PG` names, or `None`
    /// (saying that the PostgreSQL half is skipped).
    pub(crate) fn pg(test: &str) -> Option<Place> {
        let url = pg_url(test)?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let schema = format!(
            "mail_{}_{}_{nanos}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        Some(Place {
            pg: Some((url, schema)),
        })
    }

    /// Whether mail is on PostgreSQL.
    pub(crate) fn is_pg(&self) -> bool {
        self.pg.is_some()
    }

    /// The server's URL and the schema, on PostgreSQL.
    pub(crate) fn server(&self) -> Option<(&str, &str)> {
        self.pg.as_ref().map(|(u, s)| (u.as_str(), s.as_str()))
    }

    /// Says how a child process opens the same mail, with `root` as its
    /// local state root.
    pub(crate) fn spec(&self, root: &std::path::Path) -> String {
        let root = root.to_str().unwrap();
        match &self.pg {
            None => root.to_owned(),
            Some((url, schema)) => format!("pg\t{url}\t{schema}\t{root}"),
        }
    }

    /// Returns the mail on this place, with `state` as the local root
    /// (its clock makes the ids).
    pub(crate) fn mail(&self, state: StateDir, config: MailConfig) -> Mail {
        match &self.pg {
            None => Mail::with_config(state, config),
            Some((url, schema)) => Mail::with_backend(state, config, backend(url, schema)),
        }
    }
}

/// Returns the server's URL, or says that the PostgreSQL half is skipped.
pub(crate) fn pg_url(test: &str) -> Option<String> {
    match std::env::var(PG_ENV) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            #[allow(clippy::print_stderr, reason = "a skipped half must say so")]
            {
                eprintln!("{test}: SKIPPED on PostgreSQL: {PG_ENV} is not set");
            }
            None
        }
    }
}

/// A handle on the schema `schema` of the server `url`.
pub(crate) fn backend(url: &str, schema: &str) -> Arc<dyn Backend> {
    Arc::new(PgBackend::open_with(url, PgOptions::with_schema(schema)).unwrap())
}

/// Opens the mail a [`Place::spec`] names.
pub(crate) fn mail_of(spec: &str, config: MailConfig) -> Mail {
    let parts: Vec<&str> = spec.split('\t').collect();
    match parts.as_slice() {
        [root] => Mail::with_config(StateDir::open(root).unwrap(), config),
        ["pg", url, schema, root] => {
            Mail::with_backend(StateDir::open(root).unwrap(), config, backend(url, schema))
        }
        _ => panic!("bad place {spec}"),
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        if let Some((url, schema)) = &self.pg
            && let Ok(mut c) = postgres::Client::connect(url, postgres::NoTls)
        {
            // The schema's name is ours: lower-case letters, digits and `_`.
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
        }
    }
}
