//! The sent journal: what a send vouches for, so that a gate right after
//! the sends need not read back the files it just wrote.
//!
//! # Why
//!
//! A folder's stamp is trusted only once it is [`RACY`] (two seconds) old,
//! and a file's cached facts only once its own times are; right after a
//! round of sends every new file is inside that window, so a gate run then
//! read all of them back (10,000 open requests: 10,000 files), costing more
//! than the inbox listing the cache replaces. The sender knows what it
//! wrote: the file's bytes, and (one `statx` after the publish) its inode,
//! size and times.
//!
//! # What is recorded
//!
//! After a message file is published (its commit point), the sender
//! appends one line to `.gate/sent/{agent}.jsonl` (the recipient's inbox):
//! the file's name, device, inode, size, mtime and ctime as a `statx` saw
//! them after the publish, and the message whose canonical JSON the file
//! holds. Unsynced, like every gate cache file; nothing waits for it, and
//! a failure is only logged.
//!
//! # What a reader takes on trust, and why it fails closed
//!
//! The folder's listing stays the authority on which files exist: the
//! journal is only looked at for an entry the listing found, and a record
//! is used only when that entry's `statx` (taken by the listing, after the
//! record was written) shows the same device, inode, size, mtime and ctime,
//! and its message carries the id of the file's name in the schema this
//! version reads. Then the record's message is the file's: a message file
//! is never rewritten (the seed's contract; chipset only renames), and any
//! write, truncate or rename into its place changes its inode, size or
//! ctime. Everything else is read from its file exactly as before:
//!
//! - a file another program wrote (nubos-pilot, a person) has no record;
//! - a send that died (or failed) between its publish and its record left
//!   no record, or a torn last line, which does not parse;
//! - a record whose file is gone is never looked at (the listing does not
//!   name it), and one whose name now holds another file does not match it.
//!
//! So a record can save a read, never hide or change a file: the gate opens
//! only where reading every file would. The one case it cannot see is the
//! one the folder cache cannot see either: a file rewritten in place (which
//! the seed forbids) within the same clock tick, to the same size.
//!
//! # Bounds
//!
//! A message over [`MAX_RECORDED`] is not recorded, and a sender does not
//! append to a journal over [`MAX_JOURNAL`] (its files are read). A folder
//! listing under a settled stamp writes the folder cache, which then holds
//! every file, and empties the journal.
//!
//! [`RACY`]: super::RACY

use std::collections::{BTreeMap, HashMap};

use chipset_store::{AgentId, Stat, StatePath};
use serde::{Deserialize, Serialize};

use crate::format::{MESSAGE_SCHEMA, Message};
use crate::layout::{Location, id_of};
use crate::mail::Mail;

/// A message larger than this is not recorded (its file is read).
pub(crate) const MAX_RECORDED: usize = 64 * 1024;
/// A sender does not append to a journal larger than this.
pub(crate) const MAX_JOURNAL: u64 = 32 * 1024 * 1024;

/// One line of `.gate/sent/{agent}.jsonl`: a published message file.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Record {
    name: String,
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    /// The message, as the file holds it (the file's bytes are its
    /// canonical JSON).
    message: Message,
}

impl Record {
    /// The message the record vouches for when it describes the file
    /// `name` whose `statx` is `meta`: same identity, size and times, a
    /// message with the name's id, in the schema this version reads.
    /// `None` otherwise (the file is read).
    pub(crate) fn into_message(self, name: &str, meta: &Stat) -> Option<Message> {
        let same = self.name == name
            && meta.is_file()
            && self.dev == meta.dev
            && self.ino == meta.ino
            && self.size == meta.len
            && self.mtime == meta.mtime
            && self.ctime == meta.ctime
            && self
                .message
                .schema
                .as_deref()
                .is_none_or(|s| s == MESSAGE_SCHEMA);
        let id = id_of(name)?;
        (same && self.message.id == id).then_some(self.message)
    }
}

impl Mail {
    /// `.gate/sent/{agent}.jsonl`.
    pub(crate) fn sent_journal_path(&self, agent: &AgentId) -> StatePath {
        self.gate_dir().join_static("sent").join_id(agent, ".jsonl")
    }

    /// Records messages just published (past their commit point) in their
    /// inboxes' journals. Never fails: a message not recorded is read.
    pub(crate) fn record_sent<'a>(&self, sent: impl IntoIterator<Item = (&'a Message, &'a [u8])>) {
        let mut by_inbox: BTreeMap<&AgentId, Vec<Record>> = BTreeMap::new();
        for (m, bytes) in sent {
            if bytes.len() > MAX_RECORDED {
                continue;
            }
            let path = self.layout.file(&Location::Inbox(m.to.clone()), &m.id);
            // Stat-ed after the publish: a later rename into its place or
            // write changes what a reader's listing sees, and the record no
            // longer matches.
            let Ok(Some(meta)) = self.state.stat(&path) else {
                continue;
            };
            if !meta.is_file() || meta.len != bytes.len() as u64 {
                continue;
            }
            by_inbox.entry(&m.to).or_default().push(Record {
                name: format!("{}.json", m.id),
                dev: meta.dev,
                ino: meta.ino,
                size: meta.len,
                mtime: meta.mtime,
                ctime: meta.ctime,
                message: m.clone(),
            });
        }
        for (agent, records) in by_inbox {
            let path = self.sent_journal_path(agent);
            if let Ok(Some(meta)) = self.state.stat(&path)
                && meta.len > MAX_JOURNAL
            {
                continue;
            }
            let appended = self
                .state
                .log(&path)
                .and_then(|log| log.append_batch_unsynced(&records));
            if let Err(error) = appended {
                tracing::debug!(path = %path.display(), %error, "could not record sent messages for the gate");
            }
        }
    }

    /// The records of `agent`'s journal, by name (the last record of a
    /// name wins); empty when there is none or it cannot be read. Hashed:
    /// a listing looks one up per entry, and names share long prefixes.
    /// `entries` (the listing's size) sizes the map, so that a journal of
    /// thousands of records is not moved at every growth.
    pub(crate) fn sent_records(&self, agent: &AgentId, entries: usize) -> HashMap<String, Record> {
        let path = self.sent_journal_path(agent);
        let mut out = HashMap::with_capacity(entries);
        let read = self.state.log_reader(&path).and_then(|log| {
            log.for_each(|r: Record| {
                out.insert(r.name.clone(), r);
            })
        });
        if let Err(error) = read {
            tracing::debug!(path = %path.display(), %error, "ignoring an unreadable sent journal");
            return HashMap::new();
        }
        out
    }

    /// Empties `agent`'s journal (its folder cache now holds every file).
    ///
    /// It is left holding one blank line (which readers skip), not empty:
    /// an append to an empty log syncs its directory (the log might be new),
    /// a flush the next send would otherwise pay.
    pub(crate) fn clear_sent(&self, agent: &AgentId) {
        let path = self.sent_journal_path(agent);
        if let Err(error) = self.state.write_unsynced(&path, b"\n") {
            tracing::debug!(path = %path.display(), %error, "could not empty a sent journal");
        }
    }
}
