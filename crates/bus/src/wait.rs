//! Wake-ups: block until a new event reaches an agent's queue.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use chipset_store::AgentId;
use notify::{RecommendedWatcher, RecursiveMode, Watcher as _};

use crate::bus::Bus;
use crate::config::WakeMode;
use crate::error::Result;
use crate::name::QueueEntry;

/// Why [`Waiter::wait`] returned.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Wake {
    /// Events arrived that this waiter had not reported before, in processing order.
    Arrived(Vec<QueueEntry>),
    /// The timeout passed with no new event.
    TimedOut,
}

/// Blocks until a new event for one agent arrives or a timeout passes.
///
/// Made by [`Bus::waiter`]. It watches the agent's queue directory for new
/// entries (inotify on Linux, through `notify`) and also lists the queue
/// every [`WakeConfig::rescan_interval`](crate::WakeConfig::rescan_interval),
/// so an event whose notification was lost (a full inotify queue, a
/// filesystem that does not notify, a watch that could not be set up) is
/// still found by the next rescan. "New" means: in the queue now, and not
/// reported by this waiter before and not there when it was made.
///
/// The loop that avoids missed wake-ups: make the waiter, then read
/// [`Bus::pending`], handle and acknowledge, then [`Waiter::wait`]; an event
/// published after the waiter was made is always reported, even if it came
/// before `wait` was called.
#[derive(Debug)]
pub struct Waiter {
    bus: Bus,
    agent: AgentId,
    dir: PathBuf,
    seen: BTreeSet<String>,
    watch: Option<Watch>,
    rescan_interval: Duration,
    last_scan: Instant,
}

struct Watch {
    // Dropping the watcher stops its thread; it is kept for that.
    _watcher: RecommendedWatcher,
    events: Receiver<notify::Result<notify::Event>>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watch")
    }
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
        let dir = self.ensure_queue(agent)?;
        let wake = self.config().wake;
        // Watch first, list second: nothing published in between is missed.
        let watch = match wake.mode {
            WakeMode::Notify => watch(&dir),
            WakeMode::Rescan => None,
        };
        let seen = self.state().list(&dir)?.into_iter().collect();
        Ok(Waiter {
            bus: self.clone(),
            agent: agent.clone(),
            dir,
            seen,
            watch,
            rescan_interval: wake.rescan_interval.max(Duration::from_millis(1)),
            last_scan: Instant::now(),
        })
    }
}

fn watch(dir: &Path) -> Option<Watch> {
    let (tx, rx) = mpsc::channel();
    let set_up = notify::recommended_watcher(tx).and_then(|mut w| {
        w.watch(dir, RecursiveMode::NonRecursive)?;
        Ok(w)
    });
    match set_up {
        Ok(w) => Some(Watch {
            _watcher: w,
            events: rx,
        }),
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "directory notifications unavailable; waiting by rescans");
            None
        }
    }
}

impl Waiter {
    /// Returns the agent waited for.
    pub fn agent(&self) -> &AgentId {
        &self.agent
    }

    /// Returns true when directory notifications are in use (false: rescans only).
    pub fn is_notified(&self) -> bool {
        self.watch.is_some()
    }

    /// Blocks until an event arrives that this waiter has not reported, or
    /// `timeout` passes. Returns at once when one arrived since the last call.
    ///
    /// # Errors
    ///
    /// [`Error::Store`](crate::Error::Store) when the queue cannot be listed.
    pub fn wait(&mut self, timeout: Duration) -> Result<Wake> {
        let deadline = Instant::now() + timeout;
        let mut arrived = BTreeSet::new();
        let mut rescan = false;
        loop {
            if let Some(w) = &self.watch {
                let mut lost = false;
                loop {
                    match w.events.try_recv() {
                        Ok(ev) => rescan |= note(&mut self.seen, &self.dir, ev, &mut arrived),
                        Err(mpsc::TryRecvError::Empty) => break,
                        Err(mpsc::TryRecvError::Disconnected) => {
                            lost = true;
                            break;
                        }
                    }
                }
                if lost {
                    self.lose_watch();
                    rescan = true;
                }
            }
            if rescan || self.last_scan.elapsed() >= self.rescan_interval {
                self.rescan(&mut arrived)?;
                rescan = false;
            }
            if !arrived.is_empty() {
                let mut entries: Vec<QueueEntry> = arrived
                    .iter()
                    .filter_map(|n| QueueEntry::parse(n))
                    .collect();
                entries.sort();
                return Ok(Wake::Arrived(entries));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(Wake::TimedOut);
            }
            let next_scan = self
                .rescan_interval
                .saturating_sub(self.last_scan.elapsed());
            let pause = (deadline - now).min(next_scan);
            match &self.watch {
                Some(w) => match w.events.recv_timeout(pause) {
                    Ok(ev) => rescan |= note(&mut self.seen, &self.dir, ev, &mut arrived),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => {
                        self.lose_watch();
                        rescan = true;
                    }
                },
                None => std::thread::sleep(pause),
            }
        }
    }

    fn lose_watch(&mut self) {
        tracing::warn!(dir = %self.dir.display(), "directory watch ended; waiting by rescans");
        self.watch = None;
    }

    fn rescan(&mut self, arrived: &mut BTreeSet<String>) -> Result<()> {
        let now: BTreeSet<String> = self.bus.state().list(&self.dir)?.into_iter().collect();
        for name in now.difference(&self.seen) {
            if QueueEntry::parse(name).is_some() {
                arrived.insert(name.clone());
            }
        }
        self.seen = now;
        self.last_scan = Instant::now();
        Ok(())
    }
}

/// Takes one notification: new event names go to `arrived`. Returns true
/// when the notification asks for a rescan (an overflow or an error).
fn note(
    seen: &mut BTreeSet<String>,
    dir: &Path,
    ev: notify::Result<notify::Event>,
    arrived: &mut BTreeSet<String>,
) -> bool {
    let ev = match ev {
        Ok(ev) => ev,
        Err(e) => {
            tracing::debug!(error = %e, "notification error; rescanning");
            return true;
        }
    };
    if ev.need_rescan() {
        return true;
    }
    for path in &ev.paths {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if seen.contains(name) || QueueEntry::parse(name).is_none() {
            continue;
        }
        // The same notifications report events moved out (acknowledged):
        // only a name that is there now is an arrival.
        if std::fs::symlink_metadata(dir.join(name)).is_ok() {
            seen.insert(name.to_owned());
            arrived.insert(name.to_owned());
        }
    }
    false
}
