//! Reading: one inbox, inbox counts for a status screen, the manifest.

use std::collections::BTreeMap;

use chipset_store::{AgentId, Listing, ReadOutcome, StatePath};

use crate::error::Result;
use crate::format::{ManifestEvent, Message};
use crate::layout::id_of;
use crate::mail::{Mail, is_too_large};

impl Mail {
    // ---- reading -------------------------------------------------------

    /// Returns the messages in `agent`'s inbox, in id order (send order).
    /// Reads only that inbox, and every message in it: pick the ones you
    /// want (a kind, a task, a time) from the result.
    ///
    /// Files another program left there that are not messages are skipped
    /// with a `tracing` warning, and [`Mail::doctor`] reports them: a name
    /// that is not `{id}.json` (`notes.txt`, an editor's swap file), and a
    /// file over the 16 MiB read cap (far above any message the seed's
    /// programs write; see the crate docs). The commit gate is stricter: see
    /// [`Mail::pending_replies`]. [`Mail::inbox_listing`] reads past an
    /// unreadable message.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`](crate::Error::Corrupt) naming an `{id}.json`
    /// file that is not a readable message, and
    /// [`Error::Unsupported`](crate::Error::Unsupported) for one
    /// holding a value this version does not know: such a file is never
    /// skipped. [`Error::Store`](crate::Error::Store) when the inbox
    /// cannot be listed.
    pub fn inbox(&self, agent: &AgentId) -> Result<Vec<Message>> {
        let listing = self.inbox_listing(agent)?;
        if let Some(c) = listing.corrupt.into_iter().next() {
            return Err(c.into());
        }
        if let Some(u) = listing.unsupported.into_iter().next() {
            return Err(u.into());
        }
        Ok(listing.items)
    }

    /// Returns `agent`'s inbox as [`Mail::inbox`] reads it, with the
    /// message files it could not read named beside the messages it could
    /// (one may hide behind each), for a listing that shows what it read.
    ///
    /// # Errors
    ///
    /// [`Error::Store`](crate::Error::Store) when the inbox cannot be
    /// listed or a file cannot be read at all.
    pub fn inbox_listing(&self, agent: &AgentId) -> Result<Listing<Message>> {
        if let Some(server) = self.server() {
            return server.inbox_listing(agent);
        }
        let mut out = Listing::default();
        for read in self.scan(&self.layout.inbox(agent), &[])? {
            match read {
                ReadOutcome::Corrupt(c) if is_too_large(&c) => {
                    tracing::warn!(path = %c.path.display(), reason = %c.reason, "skipping a file over the message read cap");
                }
                read => out.push(read),
            }
        }
        Ok(out)
    }

    /// Returns how many message files `agent`'s inbox holds, from the listing alone.
    ///
    /// # Errors
    ///
    /// [`Error::Store`](crate::Error::Store) when the inbox cannot be listed.
    pub fn inbox_len(&self, agent: &AgentId) -> Result<usize> {
        if let Some(server) = self.server() {
            return server.inbox_len(agent);
        }
        self.count_messages(&self.layout.inbox(agent))
    }

    /// Counts the message files in `dir` without holding its listing.
    pub(crate) fn count_messages(&self, dir: &StatePath) -> Result<usize> {
        let mut n = 0;
        self.state.for_each_name(dir, |name| -> Result<()> {
            n += usize::from(id_of(&name).is_some());
            Ok(())
        })?;
        Ok(n)
    }

    // ---- status --------------------------------------------------------

    /// Returns how many message files each agent's inbox holds (every
    /// agent with an inbox directory), from directory listings only: no
    /// file is read. On a server, one statement counts them all.
    ///
    /// # Errors
    ///
    /// [`Error::Store`](crate::Error::Store) when a directory cannot be listed;
    /// [`Error::Corrupt`](crate::Error::Corrupt) for a stray entry in `inbox/`.
    pub fn inbox_counts(&self) -> Result<BTreeMap<AgentId, usize>> {
        if let Some(server) = self.server() {
            return server.inbox_counts();
        }
        let mut inbox = BTreeMap::new();
        for agent in self.agents()? {
            let n = self.inbox_len(&agent)?;
            inbox.insert(agent, n);
        }
        Ok(inbox)
    }

    /// Reads the manifest: every whole record, in file order, a record of
    /// another shape as [`ManifestEvent::Foreign`]. A line that is not JSON
    /// and the torn last line a crash mid-append leaves are not records:
    /// they are left out, and [`Mail::doctor`] reports (and repairs) them.
    ///
    /// # Errors
    ///
    /// [`Error::Store`](crate::Error::Store) when it cannot be read.
    pub fn read_manifest(&self) -> Result<Vec<ManifestEvent>> {
        if let Some(server) = self.server() {
            return server.read_manifest();
        }
        let contents = self
            .state
            .log_reader(&self.layout.manifest())?
            .read_from::<serde_json::Value>(0)?;
        Ok(contents.records.into_iter().map(event_of).collect())
    }
}

/// Reads one whole manifest record: an event this crate writes, or
/// [`ManifestEvent::Foreign`].
pub(crate) fn event_of(record: serde_json::Value) -> ManifestEvent {
    match serde_json::from_value::<ManifestEvent>(record.clone()) {
        Ok(e) => e,
        Err(_) => ManifestEvent::Foreign(record),
    }
}
