//! Where attention's places are and how a wait hears of their changes: the
//! state root's files and their notifications on a directory; on a server
//! (issue 30) the backend's folders, woken by its `LISTEN/NOTIFY`
//! ([`Backend::watch`]), with the rescan kept as the safety net either way.

use std::sync::Arc;
use std::time::Duration;

use chipset_backend::{Dir, Wait, Wake};
use chipset_directory::Directory;
use chipset_lease::Leases;
use chipset_pool::Pool;
use chipset_store::{AgentId, StatePath, Timestamp, WatchWake, Watcher};

use super::Attention;
use crate::error::{Error, Result};

/// A wait on the places of one agent's brief.
#[derive(Debug)]
pub(super) enum Watch {
    /// The files' notifications (a directory).
    Files(Watcher),
    /// The backend's wake-ups for the folders of the agent's places.
    Seam(Box<dyn Wait>),
}

impl Watch {
    /// Blocks until a place may have changed, a rescan is due, or
    /// `timeout` passes: true when it was the timeout.
    pub(super) fn wait(&mut self, timeout: Duration) -> Result<bool> {
        Ok(match self {
            Watch::Files(w) => w.wait(timeout) == WatchWake::TimedOut,
            Watch::Seam(w) => w.wait(timeout).map_err(backend)? == Wake::TimedOut,
        })
    }
}

impl Attention {
    /// Returns the path leases, on the server when attention is.
    pub(super) fn leases(&self) -> Leases {
        let state = self.hooks.state().clone();
        match &self.seam {
            Some(b) => Leases::with_backend(state, Arc::clone(b)),
            None => Leases::new(state),
        }
        .with_mail(self.mail.clone())
    }

    /// Returns the agent directory, on the server when attention is.
    pub(super) fn directory(&self) -> Directory {
        let state = self.hooks.state().clone();
        match &self.seam {
            Some(b) => Directory::with_backend(state, Arc::clone(b)),
            None => Directory::new(state).with_mail(self.mail.clone()),
        }
    }

    /// Returns the work pool, on the server when attention is.
    pub(super) fn pool(&self) -> Pool {
        let state = self.hooks.state().clone();
        match &self.seam {
            Some(b) => Pool::with_backend(state, Arc::clone(b)),
            None => Pool::new(state),
        }
    }

    /// Whether the server holds any pool item: one listing, the whole cost
    /// of the pool for a team that never used it. A listing that fails
    /// says yes, so the brief's pool entry reports the failure.
    pub(super) fn pool_on_server(&self) -> bool {
        let Some(b) = &self.seam else {
            return false;
        };
        let entries = self.pool_dir().join("entries").map_err(Error::from);
        entries
            .and_then(|path| self.seam_dir(&path))
            .and_then(|dir| b.list(&dir).map_err(backend))
            .map_or(true, |names| !names.is_empty())
    }

    /// Returns the time a brief judges by: the state's clock, or the
    /// server's.
    pub(super) fn now(&self) -> Result<Timestamp> {
        match &self.seam {
            None => Ok(self.hooks.state().now()),
            Some(b) => b.now().map_err(backend),
        }
    }

    /// Whether attention is on a server.
    pub(super) fn on_server(&self) -> bool {
        self.seam.is_some()
    }

    /// Returns a wait on the places of `agent`'s brief (with the pool's
    /// when `pool`): watch first, read second, so nothing changed in
    /// between is missed.
    pub(super) fn watch_places(&self, agent: &AgentId, pool: bool) -> Result<Watch> {
        let Some(seam) = &self.seam else {
            let mut watcher = Watcher::new(
                self.hooks.state(),
                self.targets_with(agent, pool),
                self.config.watch,
            )?;
            let (root, inbox) = self.mail_target(agent);
            watcher.add(root, [inbox])?;
            return Ok(Watch::Files(watcher));
        };
        let dirs = self.seam_dirs(agent)?;
        let rescan = self.config.watch.rescan_interval;
        Ok(Watch::Seam(seam.watch(&dirs, rescan).map_err(backend)?))
    }

    /// Returns the folders on the server whose changes can change
    /// `agent`'s brief: each is the path of the file (or folder) a
    /// directory watches, as the channels name their keys. Every hook (the
    /// server notifies per folder), the agent's nudge folder, inbox and
    /// bus queue, each registered reminder kind's open and snoozed
    /// folders, the leases, and the pool's entries (a post or a release
    /// makes work claimable; a claim changes a hook).
    fn seam_dirs(&self, agent: &AgentId) -> Result<Vec<Dir>> {
        let mut paths: Vec<StatePath> = vec![
            self.hooks.dir().clone(),
            self.nudges.agent_dir(agent),
            self.mail.inbox_dir(agent),
            self.bus.queue_dir(agent),
            self.hooks.state().channel(chipset_lease::Leases::CHANNEL),
            self.pool_dir().join("entries")?,
        ];
        for area in self.reminders.index_dirs() {
            for kind in self.reminders.registry().kinds() {
                paths.push(area.join(&kind.name)?.join(&kind.source_type)?);
            }
        }
        paths.iter().map(|p| self.seam_dir(p)).collect()
    }

    /// Returns the folder on the seam of `path`, a folder under the state
    /// root: its segments below the root.
    fn seam_dir(&self, path: &StatePath) -> Result<Dir> {
        let rel = path
            .as_path()
            .strip_prefix(self.hooks.state().root())
            .expect("a channel's path is under its state root");
        let mut parts = rel.iter().map(|s| s.to_str().unwrap_or_default());
        let first = parts.next().expect("a channel's folder has a name");
        parts
            .try_fold(Dir::new(first).map_err(backend)?, |dir, part| {
                dir.join(part)
            })
            .map_err(backend)
    }
}

/// A server's failure as the loop's error.
fn backend(e: chipset_backend::Error) -> Error {
    Error::Backend(Box::new(e))
}

#[cfg(test)]
mod tests {
    use chipset_store::WatchTarget;
    use chipset_testkit::TempState;

    use super::*;

    /// A wait watches each place that can change the brief: the hook file, the
    /// agent's nudge folder, inbox and queue, and the reminders' open and
    /// snoozed trees (a reminder for the agent may sit in any folder below),
    /// the lease table's folder (its leases about to expire) and the pool's
    /// folder (whose appearance adds every hook and the agent's profile).
    #[test]
    fn an_agent_is_watched_where_its_brief_can_change() {
        let tmp = TempState::new();
        let attention = Attention::from_state(&tmp.state);
        let alpha = AgentId::new("alpha").unwrap();
        let mut targets = attention.targets_with(&alpha, attention.pool_present());
        targets.push(attention.mail_target(&alpha).1);
        let watched: Vec<(String, &str)> = targets
            .iter()
            .map(|t| {
                let path = t.path().strip_prefix(tmp.state.root()).unwrap();
                let how = match t {
                    WatchTarget::File(_) => "file",
                    WatchTarget::Tree(_) => "tree",
                    _ => "dir",
                };
                (path.display().to_string(), how)
            })
            .collect();
        assert_eq!(
            watched,
            [
                ("hooks/alpha.json".to_owned(), "file"),
                ("nudge/alpha".to_owned(), "dir"),
                ("bus/alpha/queue".to_owned(), "dir"),
                ("reminders/open".to_owned(), "tree"),
                ("reminders/snoozed".to_owned(), "tree"),
                ("leases".to_owned(), "dir"),
                ("pool".to_owned(), "dir"),
                ("mail/inbox/alpha".to_owned(), "dir"),
            ]
        );
    }
}
