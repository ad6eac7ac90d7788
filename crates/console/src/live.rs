//! Live updates: a thread that watches the whole state root (the store's
//! [`Watcher`]: directory notifications, with the rescan as the safety net)
//! and says when to read it again. Nothing polls faster than the rescan,
//! and an idle team wakes it once per rescan only.

use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::Duration;

use chipset::Chipset;
use chipset::backend::{Dir, Wake};
use chipset::store::{AgentId, StateDir, StatePath, WatchConfig, WatchTarget, WatchWake, Watcher};

use crate::error::{Error, Result};

/// The default time between rescans: the safety net when a notification is
/// lost, and the one wake-up an idle view pays.
pub const DEFAULT_RESCAN: Duration = Duration::from_secs(10);

/// The least time between two wake-ups: a burst of writes (a dispatcher
/// assigning a hundred hooks) is read once or twice, not a hundred times.
const MIN_GAP: Duration = Duration::from_millis(100);

/// Why [`watch`] called back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Change {
    /// A notification: something changed.
    Changed,
    /// The rescan interval passed (or notifications were lost).
    Rescan,
}

/// Starts a thread that calls `wake` once at once, then whenever
/// something under the state root changes and at every rescan, until
/// `wake` returns false. `wake` runs on that thread: it may read the
/// state there (a slow read delays the next wake-up, never the caller).
///
/// Changes to the mail's gate cache (`mail/.gate/`, which reading the open
/// requests writes) and to lock files are not reported, so that reading
/// the state does not wake the reader.
///
/// # Errors
///
/// [`Error::Store`](crate::Error::Store) when the watch cannot be set up.
pub fn watch(
    state: &StateDir,
    rescan: Duration,
    wake: impl FnMut(Change) -> bool + Send + 'static,
) -> Result<JoinHandle<()>> {
    watch_trees(state, None, rescan, wake)
}

/// As [`watch`], and over the mail folder `mail` too when mail is kept
/// outside the root (its gate cache, `.gate/`, not reported either).
fn watch_trees(
    state: &StateDir,
    mail: Option<&StateDir>,
    rescan: Duration,
    mut wake: impl FnMut(Change) -> bool + Send + 'static,
) -> Result<JoinHandle<()>> {
    let config = WatchConfig {
        notify: true,
        rescan_interval: rescan,
    };
    let mut watcher = Watcher::new(state, [WatchTarget::Tree(state.root_path())], config)?;
    let mut gates = vec![state.root().join("mail/.gate")];
    if let Some(folder) = mail {
        watcher.add(folder, [WatchTarget::Tree(folder.root_path())])?;
        gates.push(folder.root().join(".gate"));
    }
    std::thread::Builder::new()
        .name("chipset-console-watch".to_owned())
        .spawn(move || {
            // A first look at once: the caller may have drawn a quick frame.
            if !wake(Change::Rescan) {
                return;
            }
            loop {
                let change = match watcher.wait(Duration::from_secs(3600)) {
                    WatchWake::Changed(paths) if paths.iter().any(|p| counts(&gates, p)) => {
                        Change::Changed
                    }
                    WatchWake::Changed(_) | WatchWake::TimedOut => continue,
                    WatchWake::Rescan => Change::Rescan,
                };
                if !wake(change) {
                    return;
                }
                std::thread::sleep(MIN_GAP);
            }
        })
        .map_err(Error::Spawn)
}

/// As [`watch`], for the state `chipset` is on: on a directory [`watch`]
/// over its root and the mail folder kept outside it, if any; on a PostgreSQL server the server's
/// notifications (`LISTEN/NOTIFY`, from any host) of the team's shared
/// folders (every hook, mail, the agent directory, the leases, each
/// reminder kind's folders) and of the nudge and bus queue of each agent
/// known when it starts, with the rescan as the safety net (an agent that
/// first appears later is seen at the next notification or rescan).
///
/// # Errors
///
/// [`Error::Store`](crate::Error::Store) when the watch cannot be set up on
/// a directory; [`Error::Serve`](crate::Error::Serve) naming the server's
/// failure when it cannot listen.
pub fn watch_team(
    chipset: &Chipset,
    rescan: Duration,
    mut wake: impl FnMut(Change) -> bool + Send + 'static,
) -> Result<JoinHandle<()>> {
    let Some(backend) = chipset.backend() else {
        let folder = chipset.mail_folder();
        return watch_trees(chipset.state(), folder, rescan, wake);
    };
    let dirs = team_dirs(chipset);
    let mut wait = backend
        .watch(&dirs, rescan)
        .map_err(|e| Error::Serve(format!("cannot listen on the server: {e}")))?;
    std::thread::Builder::new()
        .name("chipset-console-watch".to_owned())
        .spawn(move || {
            if !wake(Change::Rescan) {
                return;
            }
            loop {
                let change = match wait.wait(Duration::from_secs(3600)) {
                    Ok(Wake::Changed) => Change::Changed,
                    Ok(Wake::TimedOut) => continue,
                    // A failed wait is a rescan: the read says what is wrong.
                    Ok(Wake::Rescan) | Err(_) => Change::Rescan,
                };
                if !wake(change) {
                    return;
                }
                std::thread::sleep(MIN_GAP);
            }
        })
        .map_err(Error::Spawn)
}

/// The folders on the server whose changes the views show (each the path
/// of the files a directory holds, as the channels name their keys).
fn team_dirs(chipset: &Chipset) -> Vec<Dir> {
    let state = chipset.state();
    let mut paths: Vec<StatePath> = vec![chipset.hooks().dir().clone()];
    for channel in ["mail", "agents", "leases"] {
        paths.extend(state.root_path().join(channel));
    }
    let mut agents: Vec<AgentId> = chipset
        .hooks()
        .list()
        .map(|h| h.into_keys().collect())
        .unwrap_or_default();
    let reminders = chipset.reminders();
    for area in reminders.index_dirs() {
        for kind in reminders.registry().kinds() {
            paths.extend(
                area.join(&kind.name)
                    .and_then(|p| p.join(&kind.source_type)),
            );
        }
    }
    if let Ok(more) = chipset.nudges().agents() {
        agents.extend(more);
    }
    if let Ok(more) = chipset.bus().agents() {
        agents.extend(more);
    }
    agents.sort();
    agents.dedup();
    for agent in &agents {
        paths.push(chipset.nudges().agent_dir(agent));
        paths.push(chipset.bus().queue_dir(agent));
    }
    paths.iter().filter_map(|p| seam_dir(state, p)).collect()
}

/// Returns the folder on the server of `path`, a folder under the root.
fn seam_dir(state: &StateDir, path: &StatePath) -> Option<Dir> {
    let rel = path.as_path().strip_prefix(state.root()).ok()?;
    let mut parts = rel.iter().map(|s| s.to_str());
    let mut dir = Dir::new(parts.next()??).ok()?;
    for part in parts {
        dir = dir.join(part?).ok()?;
    }
    Some(dir)
}

/// Returns true when a change at `path` can change what the views show.
fn counts(gates: &[PathBuf], path: &Path) -> bool {
    let gate = gates.iter().any(|g| path.starts_with(g));
    let lock = path.extension().is_some_and(|e| e == "lock" || e == "tmp");
    !(gate || lock)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_cache_and_locks_do_not_count() {
        let gates = [
            PathBuf::from("/s/mail/.gate"),
            PathBuf::from("/n/messages/.gate"),
        ];
        assert!(counts(&gates, Path::new("/s/hooks/a.json")));
        assert!(counts(&gates, Path::new("/s/mail/inbox/a/1.json")));
        assert!(counts(&gates, Path::new("/n/messages/inbox/a/1.json")));
        assert!(!counts(&gates, Path::new("/s/mail/.gate/task/t.json")));
        assert!(!counts(&gates, Path::new("/n/messages/.gate/task/t.json")));
        assert!(!counts(&gates, Path::new("/s/hooks/a.json.lock")));
    }
}
