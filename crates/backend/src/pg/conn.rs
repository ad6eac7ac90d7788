//! Connections: a small pool of clients, each with its prepared
//! statements, and how a client error becomes a seam error.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use postgres::error::SqlState;
use postgres::{Client, Config, Statement};
use postgres_native_tls::MakeTlsConnector;

use crate::error::{Error, Result};

/// One connection and the statements prepared on it.
pub(crate) struct Conn {
    pub(crate) client: Client,
    statements: HashMap<&'static str, Statement>,
}

impl Conn {
    /// Returns `sql` prepared on this connection (once per connection).
    pub(crate) fn prepare(&mut self, sql: &'static str) -> Result<Statement, postgres::Error> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(sql)?;
        self.statements.insert(sql, s.clone());
        Ok(s)
    }
}

/// Opens connections and keeps the idle ones.
pub(crate) struct Pool {
    config: Config,
    tls: MakeTlsConnector,
    pub(crate) target: String,
    pub(crate) identity: String,
    idle: Mutex<Vec<Conn>>,
    max_idle: usize,
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the config: it holds the password.
        f.debug_struct("Pool")
            .field("target", &self.target)
            .finish()
    }
}

impl Pool {
    pub(crate) fn new(config: Config, tls: MakeTlsConnector, max_idle: usize) -> Self {
        let target = super::config::target(&config);
        let identity = super::config::identity(&config);
        Pool {
            config,
            tls,
            target,
            identity,
            idle: Mutex::new(Vec::new()),
            max_idle,
        }
    }

    /// Opens a new client (not pooled): for a listener or a migration.
    pub(crate) fn connect(&self) -> Result<Client> {
        self.config
            .connect(self.tls.clone())
            .map_err(|e| self.connect_error(e))
    }

    fn connect_error(&self, e: postgres::Error) -> Error {
        let user = self.config.get_user().unwrap_or_default().to_owned();
        let auth = match e.code() {
            Some(c) => {
                *c == SqlState::INVALID_PASSWORD
                    || *c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
            }
            None => e.to_string().contains("password"),
        };
        if auth {
            Error::AuthFailed {
                target: self.target.clone(),
                user,
                source: Box::new(e),
            }
        } else if e.as_db_error().is_some() {
            Error::Server {
                op: "connect to",
                key: self.target.clone(),
                source: Box::new(e),
            }
        } else {
            Error::Unreachable {
                target: self.target.clone(),
                source: Box::new(e),
            }
        }
    }

    /// Takes an idle connection that is still open, or opens one.
    pub(crate) fn get(self: &Arc<Self>) -> Result<Pooled> {
        let idle = {
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            let mut found = None;
            while let Some(c) = idle.pop() {
                if !c.client.is_closed() {
                    found = Some(c);
                    break;
                }
            }
            found
        };
        let conn = match idle {
            Some(c) => c,
            None => Conn {
                client: self.connect()?,
                statements: HashMap::new(),
            },
        };
        Ok(Pooled {
            pool: Arc::clone(self),
            conn: Some(conn),
        })
    }
}

/// A connection on loan; back to the pool on drop unless it closed.
pub(crate) struct Pooled {
    pool: Arc<Pool>,
    conn: Option<Conn>,
}

impl Pooled {
    pub(crate) fn conn(&mut self) -> &mut Conn {
        self.conn.as_mut().expect("a pooled connection until drop")
    }

    /// Drops the connection rather than pooling it (its state is unknown).
    pub(crate) fn discard(&mut self) {
        self.conn = None;
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take()
            && !conn.client.is_closed()
        {
            let mut idle = self.pool.idle.lock().unwrap_or_else(|p| p.into_inner());
            if idle.len() < self.pool.max_idle {
                idle.push(conn);
            }
        }
    }
}

/// Whether the server said it is going away (the statement was cut, not
/// refused): a shutdown, a crash or a restart.
fn is_shutdown(e: &postgres::Error) -> bool {
    e.code().is_some_and(|c| {
        *c == SqlState::ADMIN_SHUTDOWN
            || *c == SqlState::CRASH_SHUTDOWN
            || *c == SqlState::CANNOT_CONNECT_NOW
            || c.code().starts_with("08")
    })
}

/// Turns a failed statement into a seam error. A statement the server
/// refused changed nothing. A write whose connection broke (or whose server
/// went away) may have been committed before the answer was lost:
/// [`Error::OutcomeUnknown`]. A read that broke changed nothing.
pub(crate) fn statement_error(
    op: &'static str,
    key: impl ToString,
    write: bool,
    e: postgres::Error,
) -> Error {
    let refused = e.as_db_error().is_some() && !is_shutdown(&e);
    if write && !refused {
        Error::OutcomeUnknown {
            op,
            key: key.to_string(),
            source: Box::new(e),
        }
    } else {
        Error::Server {
            op,
            key: key.to_string(),
            source: Box::new(e),
        }
    }
}
