//! Wake-ups: block until a new event reaches an agent's queue.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use chipset_backend::{Dir, Wait};
use chipset_store::{AgentId, StatePath, WatchTarget, Watcher};

use crate::format::EventId;

use crate::bus::Bus;
use crate::error::Result;
use crate::name::QueueEntry;

/// Waits until new events for one agent arrive or a timeout passes.
///
/// Made by [`Bus::waiter`]. It watches the agent's queue directory for new
/// entries through a store [`Watcher`] (inotify on Linux) and also lists the queue
/// every rescan interval of [`BusConfig::watch`](crate::BusConfig::watch),
/// so an event whose notification was lost (a full inotify queue, a
/// filesystem that does not notify, a watch that could not be set up) is
/// still found by the next rescan. "New" means: in the queue now, and not
/// reported by this waiter before and not there when it was made.
///
/// The loop that avoids missed wake-ups: make the waiter, then read
/// [`Bus::pending`], handle and acknowledge, then [`Waiter::wait`]; an event
/// published after the waiter was made is always reported, even if it came
/// before `wait` was called.
///
/// With the `tokio` cargo feature, `Waiter::wait_async` waits the same way
/// without blocking the calling thread (the watching moves to a thread of
/// its own), and `Bus::waiter_async` makes a waiter without blocking either.
///
/// On a server ([`Bus::with_backend`]) the waiter listens for the server's
/// notifications (PostgreSQL's `LISTEN`, sent when a publish commits, by
/// any client on any host) and lists the queue at every rescan, as here.
#[derive(Debug)]
pub struct Waiter {
    /// The agent waited for, named by the errors of a waiting thread.
    #[cfg(feature = "tokio")]
    pub(crate) agent: AgentId,
    pub(crate) notified: bool,
    pub(crate) at: At,
}

/// Where a waiter's watching happens.
#[derive(Debug)]
pub(crate) enum At {
    /// On the caller's thread.
    Here(Box<Watching>),
    /// On a thread of its own, which serves each wait.
    #[cfg(feature = "tokio")]
    Thread(std::sync::mpsc::Sender<crate::wait_async::Request>),
}

/// The watching state of one waiter: what it has seen and what it waits on.
#[derive(Debug)]
pub(crate) struct Watching {
    bus: Bus,
    dir: StatePath,
    seen: BTreeSet<String>,
    watch: Watch,
}

/// What a waiter waits on.
#[derive(Debug)]
enum Watch {
    /// The queue directory's notifications.
    Local(Watcher),
    /// The backend's notifications for the queue's folder.
    Seam { dir: Dir, wait: Box<dyn Wait> },
}

impl Bus {
    /// Returns a waiter on `agent`'s queue, creating the queue if needed.
    /// Events already queued count as seen; read them with [`Bus::pending`].
    ///
    /// # Errors
    ///
    /// [`Error::Store`](crate::Error::Store) when the queue cannot be created
    /// or listed. A notification watch that cannot be set up is not an
    /// error: the waiter falls back to rescans and logs a warning.
    pub fn waiter(&self, agent: &AgentId) -> Result<Waiter> {
        let watching = self.watching(agent)?;
        Ok(Waiter {
            #[cfg(feature = "tokio")]
            agent: agent.clone(),
            notified: watching.is_notified(),
            at: At::Here(Box::new(watching)),
        })
    }

    /// Makes the queue if needed and starts watching it.
    pub(crate) fn watching(&self, agent: &AgentId) -> Result<Watching> {
        let dir = self.ensure_queue(agent)?;
        let config = self.config.watch;
        if let Some(seam) = self.seam() {
            let folder = self.seam_dir(agent, Some(crate::bus::QUEUE));
            // Listen first, list second: nothing published in between is missed.
            let wait = seam
                .watch(std::slice::from_ref(&folder), config.rescan_interval)
                .map_err(crate::bus::seam_error)?;
            let seen = seam
                .list(&folder)
                .map_err(crate::bus::seam_error)?
                .into_iter()
                .collect();
            return Ok(Watching {
                bus: self.clone(),
                dir,
                seen,
                watch: Watch::Seam { dir: folder, wait },
            });
        }
        // Watch first, list second: nothing published in between is missed.
        let watcher = Watcher::new(self.state(), [WatchTarget::Dir(dir.clone())], config)?;
        let seen = self.state().list(&dir)?.into_iter().collect();
        Ok(Watching {
            bus: self.clone(),
            dir,
            seen,
            watch: Watch::Local(watcher),
        })
    }
}

impl Waiter {
    /// Returns true when directory notifications are in use (false: rescans only).
    pub fn is_notified(&self) -> bool {
        self.notified
    }

    /// Blocks until events arrive that this waiter has not reported, or
    /// `timeout` passes, and returns their ids in processing order (read
    /// the events with [`Bus::pending`]); none when the timeout passed.
    /// Returns at once when some arrived since the last call.
    ///
    /// # Errors
    ///
    /// [`Error::Store`](crate::Error::Store) when the queue cannot be listed.
    pub fn wait(&mut self, timeout: Duration) -> Result<Vec<EventId>> {
        match &mut self.at {
            At::Here(watching) => Ok(ids(watching.wait_entries(timeout)?)),
            #[cfg(feature = "tokio")]
            At::Thread(requests) => {
                crate::wait_async::wait_blocking(requests, &self.agent, timeout)
            }
        }
    }
}

/// The ids of `entries`, in their order; none for `None`.
pub(crate) fn ids(entries: Option<Vec<QueueEntry>>) -> Vec<EventId> {
    entries
        .unwrap_or_default()
        .into_iter()
        .map(QueueEntry::into_id)
        .collect()
}

impl Watching {
    /// Returns the bus watched.
    #[cfg(feature = "tokio")]
    pub(crate) fn bus(&self) -> &Bus {
        &self.bus
    }

    /// Returns true when directory notifications are in use.
    pub(crate) fn is_notified(&self) -> bool {
        match &self.watch {
            Watch::Local(watcher) => watcher.is_notified(),
            Watch::Seam { .. } => true,
        }
    }

    /// Waits as [`Waiter::wait`] does, with the arrivals as queue entries,
    /// sorted in processing order; `None` when the timeout passed.
    pub(crate) fn wait_entries(&mut self, timeout: Duration) -> Result<Option<Vec<QueueEntry>>> {
        // No deadline: a timeout too large for an `Instant` waits for ever.
        let deadline = Instant::now().checked_add(timeout);
        let mut arrived = BTreeSet::new();
        loop {
            let left = deadline.map_or(Duration::from_secs(3600), |d| {
                d.saturating_duration_since(Instant::now())
            });
            match &mut self.watch {
                Watch::Local(watcher) => match watcher.wait(left) {
                    chipset_store::WatchWake::Changed(paths) => {
                        for path in paths {
                            self.note(&path, &mut arrived)?;
                        }
                    }
                    chipset_store::WatchWake::Rescan => self.rescan(&mut arrived)?,
                    chipset_store::WatchWake::TimedOut => {}
                },
                Watch::Seam { wait, .. } => {
                    match wait.wait(left).map_err(crate::bus::seam_error)? {
                        // A notification names the folder, not the value:
                        // list it, as a rescan does.
                        chipset_backend::Wake::Changed | chipset_backend::Wake::Rescan => {
                            self.rescan(&mut arrived)?;
                        }
                        chipset_backend::Wake::TimedOut => {}
                    }
                }
            }
            if !arrived.is_empty() {
                let mut entries: Vec<QueueEntry> = arrived
                    .iter()
                    .filter_map(|n| QueueEntry::parse(n))
                    .collect();
                entries.sort();
                return Ok(Some(entries));
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(None);
            }
        }
    }

    /// Takes one changed path: a new event name goes to `arrived`.
    fn note(&mut self, path: &std::path::Path, arrived: &mut BTreeSet<String>) -> Result<()> {
        if path.parent() != Some(self.dir.as_path()) {
            return Ok(());
        }
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            return Ok(());
        };
        if self.seen.contains(name) || QueueEntry::parse(name).is_none() {
            return Ok(());
        }
        // The same notifications report events moved out (acknowledged):
        // only a name that is there now is an arrival.
        // A name that cannot be looked at is an error, not "moved out".
        if self.bus.state().stat(&self.dir.join(name)?)?.is_some() {
            self.seen.insert(name.to_owned());
            arrived.insert(name.to_owned());
        }
        Ok(())
    }

    fn rescan(&mut self, arrived: &mut BTreeSet<String>) -> Result<()> {
        let now: BTreeSet<String> = match &self.watch {
            Watch::Local(_) => self.bus.state().list(&self.dir)?.into_iter().collect(),
            Watch::Seam { dir, .. } => {
                let seam = self.bus.seam().expect("a seam waiter's bus has a seam");
                seam.list(dir)
                    .map_err(crate::bus::seam_error)?
                    .into_iter()
                    .collect()
            }
        };
        for name in now.difference(&self.seen) {
            if QueueEntry::parse(name).is_some() {
                arrived.insert(name.clone());
            }
        }
        self.seen = now;
        Ok(())
    }
}
