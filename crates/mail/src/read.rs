//! Reading: one inbox, counts for a status screen, the manifest.

use std::collections::BTreeMap;

use chipset_store::{AgentId, StatePath};

use crate::draft::InboxFilter;
use crate::error::Result;
use crate::format::{ManifestEvent, Message};
use crate::layout::id_of;
use crate::mail::{Mail, MailCounts, Manifest};

impl Mail {
    // ---- reading -------------------------------------------------------

    /// Returns the messages in `agent`'s inbox that pass `filter`, in id order
    /// (send order). Reads only that inbox.
    ///
    /// # Errors
    ///
    /// [`MailError::Corrupt`](crate::MailError::Corrupt) naming the first file in the inbox that is not a
    /// readable message: a bad file is never skipped. [`MailError::Store`](crate::MailError::Store) when
    /// the inbox cannot be listed.
    pub fn inbox(&self, agent: &AgentId, filter: &InboxFilter) -> Result<Vec<Message>> {
        let mut out: Vec<Message> = self
            .scan_strict(&self.layout.inbox(agent))?
            .into_iter()
            .filter(|m| filter.matches(m))
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    /// Returns how many message files `agent`'s inbox holds, from the listing alone.
    ///
    /// # Errors
    ///
    /// [`MailError::Store`](crate::MailError::Store) when the inbox cannot be listed.
    pub fn inbox_len(&self, agent: &AgentId) -> Result<usize> {
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

    /// Returns counts for a status screen, from directory listings only.
    ///
    /// # Errors
    ///
    /// [`MailError::Store`](crate::MailError::Store) when a directory cannot be listed;
    /// [`MailError::Corrupt`](crate::MailError::Corrupt) for a stray entry in `inbox/`.
    pub fn counts(&self) -> Result<MailCounts> {
        let mut inbox = BTreeMap::new();
        for agent in self.agents()? {
            let n = self.inbox_len(&agent)?;
            inbox.insert(agent, n);
        }
        Ok(MailCounts {
            inbox,
            archived: self.count_messages(&self.layout.archive_root())?,
            orphaned: self.count_messages(&self.layout.orphan_root())?,
            swept_tasks: {
                let mut n = 0;
                self.state
                    .for_each_name(&self.layout.by_task_root(), |_| -> Result<()> {
                        n += 1;
                        Ok(())
                    })?;
                n
            },
        })
    }

    /// Reads the manifest: every whole record, whatever a crash left.
    ///
    /// # Errors
    ///
    /// [`MailError::Store`](crate::MailError::Store) when it cannot be read.
    pub fn read_manifest(&self) -> Result<Manifest> {
        let contents = self
            .state
            .log_reader(&self.layout.manifest())?
            .read::<serde_json::Value>()?;
        let mut events = Vec::with_capacity(contents.records.len());
        let mut foreign = Vec::new();
        for record in contents.records {
            match serde_json::from_value::<ManifestEvent>(record.clone()) {
                Ok(e) => events.push(e),
                Err(_) => foreign.push(record),
            }
        }
        Ok(Manifest {
            events,
            foreign,
            bad_lines: contents.bad_lines,
            torn_tail: contents.torn_tail,
        })
    }
}
