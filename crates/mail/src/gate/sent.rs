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
//! wrote: the file's bytes, and (one `fstat` after the publish) its inode,
//! size and times.
//!
//! # What is recorded
//!
//! After a message file is published (its commit point), the sender
//! appends one line to `.gate/sent/{agent}.jsonl` (the recipient's inbox):
//! the file's name, device, inode, size, mtime and ctime as an `fstat` of
//! the published file saw them right after its no-replace rename (the
//! store's [`create_new_stat`](chipset_store::StateDir::create_new_stat)
//! takes it through the descriptor it wrote with), and the message whose
//! canonical JSON the file holds. The line is the record serialized as it
//! stands (fields in declaration order); readers go by field name, so the
//! sorted lines of earlier versions read the same. One `write` in append
//! mode, with no lock and no sync
//! ([`append_cache`](chipset_store::StateDir::append_cache)), like every
//! gate cache file: nothing waits for it, and a failure is only logged.
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
//!   no record, or a torn last line, which does not parse (and turns the
//!   next append into one bad line, which does not parse either);
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

use chipset_store::{AgentId, ReadOutcome, Stat, StateDir, StatePath};
use serde::{Deserialize, Serialize};

use crate::format::{MESSAGE_SCHEMA, Message};
use crate::layout::id_of;
use crate::mail::Mail;

use super::reads;

/// A message larger than this is not recorded (its file is read).
pub(crate) const MAX_RECORDED: usize = 64 * 1024;
/// A sender does not append to a journal larger than this.
pub(crate) const MAX_JOURNAL: u64 = 32 * 1024 * 1024;

/// One line of `.gate/sent/{agent}.jsonl` as a sender writes it: a
/// [`Record`] borrowing what the send holds, serialized as it stands (in
/// field order, not sorted: the journal is read by field name).
#[derive(Serialize)]
struct Line<'a> {
    name: &'a str,
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    message: &'a Message,
}

/// One line of `.gate/sent/{agent}.jsonl`: a published message file.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(Serialize))]
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
    /// The name of the file it describes.
    #[cfg(test)]
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

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
    /// inboxes' journals: each with the size of its file's bytes and the
    /// `fstat` its publish took of it after the no-replace rename (see
    /// [`StateDir::create_new_stat`](chipset_store::StateDir::create_new_stat)).
    /// A message without one is not recorded. Never fails: a message not
    /// recorded is read.
    pub(crate) fn record_sent<'a>(
        &self,
        sent: impl IntoIterator<Item = (&'a Message, usize, Option<Stat>)>,
    ) {
        let mut by_inbox: BTreeMap<&AgentId, Vec<u8>> = BTreeMap::new();
        for (m, len, meta) in sent {
            // Stat-ed after the publish: a later rename into its place or
            // write changes what a reader's listing sees, and the record no
            // longer matches.
            let Some(meta) = meta else { continue };
            if len > MAX_RECORDED || !meta.is_file() || meta.len != len as u64 {
                continue;
            }
            let name = format!("{}.json", m.id);
            let line = by_inbox.entry(&m.to).or_default();
            let record = Line {
                name: &name,
                dev: meta.dev,
                ino: meta.ino,
                size: meta.len,
                mtime: meta.mtime,
                ctime: meta.ctime,
                message: m,
            };
            let start = line.len();
            if serde_json::to_writer(&mut *line, &record).is_err() {
                line.truncate(start);
                continue;
            }
            line.push(b'\n');
        }
        for (agent, lines) in by_inbox {
            let path = self.sent_journal_path(agent);
            if let Err(error) = self.state.append_cache(&path, &lines, MAX_JOURNAL) {
                tracing::debug!(path = %path.display(), %error, "could not record sent messages for the gate");
            }
        }
    }

    /// The records of `agent`'s journal, by name (the last record of a
    /// name wins); empty when there is none or it cannot be read. Hashed:
    /// a listing looks one up per entry, and names share long prefixes.
    /// `entries` (the listing's size) sizes the index.
    ///
    /// Read whole, and its lines parsed on several threads when there are
    /// many ([`reads::parse_records`]): what the store's log reader takes
    /// from it, the same records (lines cut by a crash, blank, over the
    /// log's line cap or that do not parse are skipped).
    pub(crate) fn sent_records(&self, agent: &AgentId, entries: usize) -> Journal {
        self.journal_bytes(agent)
            .map_or_else(Journal::default, |bytes| {
                Journal::parse(&whole_lines(&bytes), entries)
            })
    }

    /// The bytes of `agent`'s journal; `None` when there is none or it
    /// cannot be read.
    pub(super) fn journal_bytes(&self, agent: &AgentId) -> Option<Vec<u8>> {
        let path = self.sent_journal_path(agent);
        match self.state.read_bytes_capped(&path, MAX_READ) {
            Ok(ReadOutcome::Value((bytes, _))) => Some(bytes),
            Ok(ReadOutcome::Missing) => None,
            Ok(_) => {
                tracing::debug!(path = %path.display(), "ignoring an unreadable sent journal");
                None
            }
            Err(error) => {
                tracing::debug!(path = %path.display(), %error, "ignoring an unreadable sent journal");
                None
            }
        }
    }
}

/// The records of a sent journal, by the name of the file each describes
/// (the last record of a name wins). The records stay where they were
/// parsed (in file order), indexed by name: none is moved until it is
/// taken.
#[derive(Debug, Default)]
pub(crate) struct Journal {
    records: Vec<Option<Record>>,
    by_name: HashMap<String, usize>,
}

impl Journal {
    /// The records of a journal's whole lines ([`whole_lines`]), parsed on
    /// several threads when there are many; `entries` sizes the index.
    pub(super) fn parse(lines: &[&[u8]], entries: usize) -> Journal {
        let records = reads::parse_records(lines);
        let mut by_name = HashMap::with_capacity(entries);
        for (i, record) in records.iter().enumerate() {
            if let Some(record) = record {
                by_name.insert(record.name.clone(), i);
            }
        }
        Journal { records, by_name }
    }

    /// Takes the record of the file `name` out, if there is one.
    pub(crate) fn remove(&mut self, name: &str) -> Option<Record> {
        let i = self.by_name.remove(name)?;
        self.records.get_mut(i)?.take()
    }

    /// True when no record is left to take.
    pub(crate) fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// The records left, by name.
    #[cfg(test)]
    pub(crate) fn into_map(mut self) -> HashMap<String, Record> {
        let names: Vec<String> = self.by_name.keys().cloned().collect();
        names
            .into_iter()
            .filter_map(|name| {
                let record = self.remove(&name)?;
                Some((name, record))
            })
            .collect()
    }
}

/// The most of a journal that is read (far above [`MAX_JOURNAL`], which a
/// sender stops appending at); a larger one is not read (its files are).
const MAX_READ: u64 = 8 * MAX_JOURNAL;
/// A line longer than this is skipped, as the store's log reader skips it.
const MAX_LINE: usize = 1024 * 1024;

/// The lines of a journal's `bytes` that may hold a record: each ended by
/// a newline (the unterminated tail a crash cut short is not), without it,
/// not blank and within [`MAX_LINE`].
pub(super) fn whole_lines(bytes: &[u8]) -> Vec<&[u8]> {
    let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    // What follows the last newline: empty, or a torn line.
    lines.pop();
    lines.retain(|line| line.len() <= MAX_LINE && !line.iter().all(u8::is_ascii_whitespace));
    lines
}

/// Empties the sent journal at `path` (its folder cache now holds every
/// file).
///
/// It is left holding one blank line (which readers skip), not empty:
/// a sender of the previous version appends through the locked log,
/// which syncs the directory of an empty log (it might be new), a flush
/// its next send would otherwise pay.
pub(super) fn clear_journal(state: &StateDir, path: &StatePath) {
    if let Err(error) = state.write_unsynced(path, b"\n") {
        tracing::debug!(path = %path.display(), %error, "could not empty a sent journal");
    }
}

#[cfg(test)]
mod tests {
    use chipset_store::{StateDir, TaskId};

    use super::*;
    use crate::NewMessage;
    use crate::layout::Location;

    fn note(mail: &Mail, i: usize) -> Message {
        let draft = NewMessage::notify(
            AgentId::new("critic").unwrap(),
            AgentId::new("exec").unwrap(),
            TaskId::new("t1").unwrap(),
            "fyi",
            format!("note {i}"),
        );
        mail.send(&draft).unwrap()
    }

    /// The messages `exec`'s journal vouches for, checked against each
    /// file's `stat` as a listing takes it, in send order.
    fn vouched(mail: &Mail, sent: &[Message]) -> Vec<Option<Message>> {
        let mut records = mail.sent_records(&AgentId::new("exec").unwrap(), sent.len());
        sent.iter()
            .map(|m| {
                let name = format!("{}.json", m.id);
                let path = mail.layout.file(&Location::Inbox(m.to.clone()), &m.id);
                let meta = mail.state.stat(&path).unwrap().unwrap();
                records.remove(&name)?.into_message(&name, &meta)
            })
            .collect()
    }

    /// The journal's text, read through the store.
    fn journal(mail: &Mail, path: &StatePath) -> String {
        let bytes = mail.state.read_bytes(path).unwrap().value().unwrap();
        String::from_utf8(bytes).unwrap()
    }

    /// A send writes its record unsorted (in field order); a journal
    /// written by the previous version (one canonical, sorted line per
    /// record, through the locked log) is read the same.
    #[test]
    fn a_journal_in_the_old_sorted_form_is_still_read() {
        let tmp = tempfile::tempdir().unwrap();
        let mail = Mail::new(StateDir::open(tmp.path()).unwrap());
        let sent = vec![note(&mail, 0), note(&mail, 1)];
        let path = mail.sent_journal_path(&AgentId::new("exec").unwrap());
        let text = journal(&mail, &path);
        assert!(text.starts_with("{\"name\":"), "{text}");
        let expected: Vec<Option<Message>> = sent.iter().cloned().map(Some).collect();
        assert_eq!(vouched(&mail, &sent), expected);

        let records: Vec<Record> = mail
            .sent_records(&AgentId::new("exec").unwrap(), 2)
            .into_map()
            .into_values()
            .collect();
        clear_journal(&mail.state, &path);
        let log = mail.state.log(&path).unwrap();
        log.append_batch_unsynced(&records).unwrap();
        let text = journal(&mail, &path);
        assert!(
            text.lines().skip(1).all(|l| l.starts_with("{\"ctime\":")),
            "{text}"
        );
        assert_eq!(vouched(&mail, &sent), expected);
    }

    /// A line a crash cut short (no newline) swallows the next append into
    /// one bad line: that send is not vouched for (its file is read), and
    /// the sends after it are.
    #[test]
    fn a_torn_journal_line_costs_one_record_never_a_wrong_one() {
        let tmp = tempfile::tempdir().unwrap();
        let mail = Mail::new(StateDir::open(tmp.path()).unwrap());
        let first = note(&mail, 0);
        let path = mail.sent_journal_path(&AgentId::new("exec").unwrap());
        let text = journal(&mail, &path);
        let torn = &text[..text.len() / 2];
        mail.state.write_bytes(&path, torn.as_bytes()).unwrap();
        let sent = vec![first, note(&mail, 1), note(&mail, 2)];
        let got = vouched(&mail, &sent);
        assert_eq!(got, [None, None, Some(sent[2].clone())]);
    }
}
