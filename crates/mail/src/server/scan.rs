//! Scans of mail on a server: the counts for a status screen and the wait
//! on an inbox (the doctor is `doctor.rs`).

use std::collections::BTreeMap;
use std::time::Duration;

use chipset_backend::{Backend, FsBackend, Wait};
use chipset_store::AgentId;

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
        let folder = Server::dir_of(&Location::Inbox(agent.clone()));
        let watched = match self.server() {
            Some(server) => server.b.watch(&[folder], rescan),
            None => FsBackend::new(self.state.clone()).watch(&[folder], rescan),
        };
        watched.map_err(|e| match e {
            chipset_backend::Error::Store { source, .. } => Error::Store(source),
            e => super::failure(e, Vec::new()),
        })
    }
}
