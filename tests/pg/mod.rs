//! The door's tests' PostgreSQL server: the one `CHIPSET_TEST_PG` names,
//! with a schema of the test's own, dropped when the test ends. Without
//! the variable a test says it is skipped and passes.

#![allow(dead_code, reason = "each test file uses part of it")]

use std::path::Path;

use chipset::{Chipset, Root, ServerOptions, ServerUrl};

/// A schema of one test's own on the test server.
pub(crate) struct Server {
    /// The server.
    pub(crate) url: ServerUrl,
    /// The schema's name: lower-case letters, digits and `_`.
    pub(crate) schema: String,
}

impl Server {
    /// A fresh schema on the test server, or `None`, saying that `test`
    /// is skipped.
    pub(crate) fn fresh(test: &str) -> Option<Server> {
        let Some(url) = std::env::var("CHIPSET_TEST_PG")
            .ok()
            .filter(|u| !u.is_empty())
        else {
            #[allow(clippy::print_stderr, reason = "a skipped test must say so")]
            {
                eprintln!("{test}: SKIPPED on PostgreSQL: CHIPSET_TEST_PG is not set");
            }
            return None;
        };
        let Root::Server(url) = Root::parse(&url) else {
            panic!("CHIPSET_TEST_PG is not a server URL");
        };
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let schema = format!("door_{}_{seq}_{nanos}", std::process::id());
        Some(Server { url, schema })
    }

    /// The options that open the door on this schema, with `local` as the
    /// folder of what is local by nature.
    pub(crate) fn options(&self, local: &Path) -> ServerOptions {
        let mut options = ServerOptions::default();
        options.schema = Some(self.schema.clone());
        options.local = Some(local.to_owned());
        options
    }

    /// Opens the door on this schema, with `local` as its local folder.
    pub(crate) fn open(&self, local: &Path) -> Chipset {
        Chipset::open_server(&self.url, &self.options(local)).unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(self.url.expose(), postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema));
        }
    }
}
