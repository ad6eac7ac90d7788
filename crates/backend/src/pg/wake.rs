//! Wake-ups across hosts: `LISTEN` on a connection of its own.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use postgres::Client;
use postgres::fallible_iterator::FallibleIterator;

use super::NOTIFY_CHANNEL;
use super::conn::Pool;
use crate::error::Result;
use crate::seam::{Wait, Wake};

/// A waiter on the `chipset` notifications of some folders. A lost
/// connection is reopened and reported as [`Wake::Rescan`]: a notification
/// sent while it was down is lost, so the caller reads again.
pub(crate) struct PgWait {
    pool: Arc<Pool>,
    client: Option<Client>,
    payloads: HashSet<String>,
    rescan: Duration,
    last_scan: Instant,
}

impl fmt::Debug for PgWait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgWait")
            .field("payloads", &self.payloads)
            .field("rescan", &self.rescan)
            .finish()
    }
}

impl PgWait {
    pub(crate) fn new(
        pool: Arc<Pool>,
        payloads: HashSet<String>,
        rescan: Duration,
    ) -> Result<Self> {
        let client = listen(&pool)?;
        Ok(PgWait {
            pool,
            client: Some(client),
            payloads,
            rescan: rescan.max(Duration::from_millis(1)),
            last_scan: Instant::now(),
        })
    }
}

fn listen(pool: &Pool) -> Result<Client> {
    let mut client = pool.connect()?;
    // A fixed identifier: the channel is a constant, never input.
    debug_assert_eq!(NOTIFY_CHANNEL, "chipset");
    client
        .batch_execute("LISTEN chipset")
        .map_err(|e| super::conn::statement_error("listen on", &pool.target, false, e))?;
    Ok(client)
}

impl Wait for PgWait {
    fn wait(&mut self, timeout: Duration) -> Result<Wake> {
        let deadline = Instant::now() + timeout;
        loop {
            let Some(client) = self.client.as_mut() else {
                // Reconnect; whatever was sent meanwhile is lost: rescan.
                match listen(&self.pool) {
                    Ok(c) => {
                        self.client = Some(c);
                        self.last_scan = Instant::now();
                        return Ok(Wake::Rescan);
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "chipset listener cannot reconnect yet");
                        let pause = Duration::from_millis(100)
                            .min(deadline.saturating_duration_since(Instant::now()));
                        std::thread::sleep(pause);
                        if Instant::now() >= deadline {
                            return Ok(Wake::TimedOut);
                        }
                        continue;
                    }
                }
            };
            let now = Instant::now();
            let rescan_at = self.last_scan + self.rescan;
            let until = deadline.min(rescan_at);
            let left = until.saturating_duration_since(now);
            let next = client.notifications().timeout_iter(left).next();
            match next {
                Ok(Some(n)) => {
                    if self.payloads.contains(n.payload()) {
                        return Ok(Wake::Changed);
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "chipset listener lost its connection");
                    self.client = None;
                }
                Ok(None) => {
                    let now = Instant::now();
                    if now >= rescan_at {
                        self.last_scan = now;
                        return Ok(Wake::Rescan);
                    }
                    if now >= deadline {
                        return Ok(Wake::TimedOut);
                    }
                }
            }
        }
    }
}
