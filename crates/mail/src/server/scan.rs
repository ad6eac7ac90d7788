//! Scans of mail on a server: the counts for a status screen and the wait
//! on an inbox (the doctor is `doctor.rs`).

use std::collections::BTreeMap;
use std::time::Duration;

use chipset_backend::{Backend, Dir, FsBackend, Wait};
use chipset_store::{AgentId, TaskId};

use super::{Seam, Server, dir};
use crate::error::{Error, Result};
use crate::layout::{INBOX, Location};
use crate::mail::Mail;

impl Server<'_> {
    /// The counts of [`Mail::inbox_counts`], from listings of the rows.
    pub(crate) fn inbox_counts(&self) -> Result<BTreeMap<AgentId, usize>> {
        let mut inbox = BTreeMap::new();
        for name in self.b.list_dirs(&dir(&[INBOX])).seam()? {
            // A folder that is not an agent's is the doctor's to report.
            if let Ok(agent) = AgentId::new(name.as_str()) {
                let n = self.inbox_len(&agent)?;
                inbox.insert(agent, n);
            }
        }
        Ok(inbox)
    }
}

impl Mail {
    /// Returns a wait woken when `agent`'s inbox changes (a message
    /// delivered, one archived), through any handle on the same state:
    /// another process, and on a server another host. A rescan every
    /// `rescan` is the safety net. It only says when to look: read the
    /// inbox again after every wake.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the watch cannot be set up on a directory;
    /// [`Error::Backend`] on a server.
    pub fn watch_inbox(&self, agent: &AgentId, rescan: Duration) -> Result<Box<dyn Wait>> {
        self.watch_places(&[Location::Inbox(agent.clone())], None, rescan)
    }

    /// Returns a wait woken when a message enters or leaves one of
    /// `places`, and on a server also when a row of `gate`'s open requests
    /// (`open/{task}/`) comes or goes. A directory's folders are watched
    /// where its layout puts them (under `mail/`, or at the root of a
    /// folder mail works on in place).
    pub(crate) fn watch_places(
        &self,
        places: &[Location],
        gate: Option<&TaskId>,
        rescan: Duration,
    ) -> Result<Box<dyn Wait>> {
        let watched = match self.server() {
            Some(server) => {
                let mut dirs: Vec<Dir> = places.iter().map(Server::dir_of).collect();
                dirs.extend(gate.map(Server::open_dir));
                server.b.watch(&dirs, rescan)
            }
            None => {
                let dirs: Vec<Dir> = places.iter().map(|p| self.local_dir(p)).collect();
                FsBackend::new(self.state.clone()).watch(&dirs, rescan)
            }
        };
        watched.map_err(watch_failure)
    }

    /// `location`'s folder as a [`Dir`] from the state root.
    fn local_dir(&self, location: &Location) -> Dir {
        let dir = Server::dir_of(location);
        if !self.in_place() {
            return dir;
        }
        // In place, the folder is the root: the same path less `mail/`.
        let mut segments = dir.segments()[1..].iter();
        let first = segments.next().expect("a place is below `mail/`");
        let mut local = Dir::new(first).expect("checked segments are valid");
        for s in segments {
            local = local.join(s).expect("checked segments are valid");
        }
        local
    }
}

/// A watch's error as mail's: the store's error on a directory, the
/// backend's on a server.
pub(crate) fn watch_failure(e: chipset_backend::Error) -> Error {
    match e {
        chipset_backend::Error::Store { source, .. } => Error::Store(source),
        e => super::failure(e, Vec::new()),
    }
}
