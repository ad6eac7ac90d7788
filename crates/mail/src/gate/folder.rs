//! Listing one folder (an inbox or `archive/`) through its folder cache:
//! every message file with what the gate needs from it, reading only the
//! files the cache (or the inbox's sent journal) cannot vouch for.

use std::sync::Arc;

use super::*;

impl Mail {
    /// Returns every message file of the folder `dir` (but the names in
    /// `skip`) with its task, the gate's facts and its parent, listing it:
    /// files known to the folder's cache at `cache` (same name, same inode,
    /// size and times) are not read again, new ones are read and checked.
    /// `stamp` must have been taken before this call.
    ///
    /// The requests that need a reply among the files read (not taken from
    /// the cache) come back whole beside their entry ([`Listed::messages`]),
    /// so that the gate does not read them a second time. The folder cache,
    /// when it is written, is written on a thread of its own
    /// ([`Listed::writing`]).
    pub(super) fn folder_files(
        &self,
        cache: &StatePath,
        dir: &StatePath,
        skip: &[&str],
        stamp: Stamp,
        settled: bool,
        inbox: Option<&AgentId>,
    ) -> Result<Listed> {
        let path = cache;
        let old = load::<InboxCache>(&self.state, path).filter(|c| c.v == VERSION);
        let old = match old {
            Some(old) if settled && old.settled && old.stamp == stamp => {
                let files: Vec<(String, FileEntry)> = old.files.into_iter().collect();
                return Ok(Listed {
                    messages: files.iter().map(|_| None).collect(),
                    files: Arc::new(files),
                    writing: None,
                });
            }
            old => old,
        };
        let known = old.map(|c| c.files).unwrap_or_default();
        // The inbox's sent journal, loaded at the first file the folder
        // cache cannot vouch for.
        let mut journal: Option<sent::Journal> = None;
        // With no folder cache and no sent record, every entry is read, and
        // the read's own `statx` (of the open file) gives its stamp: the
        // listing stats nothing (one `statx` per file less). Otherwise (a
        // folder cache, or records to match) one `statx` per entry,
        // relative to the listed directory.
        // The journal is read before the listing (when it holds more than
        // the blank line an emptied one keeps), so that the folder is
        // listed once: every record read was written before the listing's
        // `statx` that it must match, as when it is read after. Its bytes
        // are read first; its records are parsed while the folder is
        // listed (a journal with a line that may hold a record is listed
        // with a `statx` per entry, whether the line parses or not).
        let listing: Vec<(String, Option<chipset_store::Stat>)> = if known.is_empty() {
            let bytes = match inbox.map(|agent| (agent, self.journal_len(agent))) {
                Some((agent, len)) if len > 1 => self.journal_bytes(agent),
                _ => None,
            };
            let lines = bytes.as_deref().map(sent::whole_lines).unwrap_or_default();
            if lines.is_empty() {
                journal = Some(sent::Journal::default());
                self.state
                    .list(dir)?
                    .into_iter()
                    .map(|name| (name, None))
                    .collect()
            } else {
                // Sized from the journal's length (a record is some
                // hundreds of bytes), so that thousands of records are not
                // moved at every growth of the index.
                let hint = bytes.as_ref().map_or(0, |b| b.len() / 256);
                let (records, listing) = reads::beside(
                    lines.len(),
                    || sent::Journal::parse(&lines, hint),
                    || self.state.list_stats(dir),
                );
                journal = Some(records);
                listing?
            }
        } else {
            self.state.list_stats(dir)?
        };
        let entries = listing.len();
        // Each entry's fate is decided in listing order (taken from the
        // folder cache, vouched for by the journal, or to read: no entry
        // yet); the files to read are then read, on several threads when
        // there are many, and their entries and messages put in place.
        let mut files: Vec<(String, Option<FileEntry>)> = Vec::with_capacity(entries);
        let mut messages: Vec<Option<Box<Message>>> = Vec::with_capacity(entries);
        let mut from_journal = false;
        let now = SystemTime::now();
        for (name, meta) in listing {
            if skip.contains(&name.as_str()) || never_a_message(&name) {
                continue;
            }
            // The file's own stamp: a file rewritten in place (which the
            // seed forbids) is read again while its change is recent enough
            // to be told apart, and whenever its size or times differ.
            // Gone since the listing: read as a new file (and skipped).
            let stat = meta.as_ref().map(|m| (Stamp::from(m), m.len));
            if let Some((stamp, size)) = stat
                && stamp.settled(now)
                && let Some(entry) = known.get(&name).and_then(|e| e.still(stamp, size))
            {
                files.push((name, Some(entry)));
                messages.push(None);
                continue;
            }
            // What its sender recorded, when the record is this very file
            // (see `sent.rs`); otherwise the file is read.
            let vouched = match (inbox, meta.as_ref(), stat) {
                (Some(agent), Some(meta), Some((stamp, size))) => journal
                    .get_or_insert_with(|| self.sent_records(agent, entries))
                    .remove(&name)
                    .and_then(|r| r.into_message(&name, meta))
                    .map(|message| (message, Known::Stat { stamp, size })),
                _ => None,
            };
            match vouched {
                Some((message, known)) => {
                    from_journal = true;
                    let (entry, message) = entry_of(message, known);
                    files.push((name, Some(entry)));
                    messages.push(message);
                }
                None => {
                    files.push((name, None));
                    messages.push(None);
                }
            }
        }
        // Stamped by the open file's `statx`, before its bytes were read:
        // the stamp is the file read, and a file replaced or rewritten
        // since is read again next time. Each entry and its message are
        // put in their place by the thread that read them.
        let read_any = files.iter().any(|(_, entry)| entry.is_none());
        // In a settled folder, every file entered it at least [`RACY`]
        // before now: read without a stat, a file's entry holds once its
        // stamp is seen at the next listing ([`FileEntry::still`]). In a
        // racy one, the stat taken by the read is what lets the next
        // listing reuse the entry once the file's stamp settles.
        let unstat = settled.then(SystemTime::now);
        reads::read_missing(
            &self.state,
            dir,
            &mut files,
            &mut messages,
            unstat,
            |message, known, slot| {
                let (entry, message) = entry_of(message, known);
                *slot = message;
                entry
            },
        )?;
        // Gone since the listing (still no entry): skipped.
        if files.iter().any(|(_, entry)| entry.is_none()) {
            let mut kept = files.iter().map(|(_, entry)| entry.is_some());
            messages.retain(|_| kept.next().unwrap_or(false));
        }
        // In place (the same layout): no entry is moved to another buffer.
        let files: Vec<(String, FileEntry)> = files
            .into_iter()
            .filter_map(|(name, entry)| Some((name, entry?)))
            .collect();
        let files = Arc::new(files);
        // Written when it saves the next reader something: reading the new
        // files again, or (settled) the listing itself. Under a racy stamp
        // with only removals, the next reader lists anyway and the entries
        // of removed files cost it nothing: the write (and the writeback a
        // replacing rename starts, which a sweep's syncs then wait for) is
        // skipped.
        // Files taken from the journal are taken from it again while the
        // stamp is racy: only a settled listing needs writing for them, and
        // it empties the journal, whose every file the folder cache now holds.
        // Encoded and written on a thread of its own, while the caller goes
        // on (see `reads.rs`).
        let writing = (read_any || settled).then(|| {
            let clear = match inbox {
                Some(agent)
                    if settled && (from_journal || journal.is_some_and(|j| !j.is_empty())) =>
                {
                    Some(self.sent_journal_path(agent))
                }
                _ => None,
            };
            reads::FolderWrite {
                path: path.clone(),
                stamp,
                settled,
                files: Arc::clone(&files),
                clear,
            }
            .start(&self.state)
        });
        Ok(Listed {
            files,
            messages,
            writing,
        })
    }
}

/// The folder cache's entry of `message`, read from a file of which
/// `known` is known, with the message when it is an open request (the
/// gate returns it); any other message is dropped here.
fn entry_of(message: Message, known: Known) -> (FileEntry, Option<Box<Message>>) {
    let (ino, size, mtime, ctime, read) = match known {
        Known::Stat { stamp, size } => (stamp.ino, size, stamp.mtime, stamp.ctime, None),
        Known::Read { len, at } => (0, len, NEVER, NEVER, Some(time_of(at))),
    };
    let entry = FileEntry {
        ino,
        size,
        mtime,
        ctime,
        read,
        task: message.phase.clone(),
        facts: Facts::of(&message),
        parent: message.in_reply_to.clone(),
    };
    let open = message.needs_reply();
    (entry, open.then(|| Box::new(message)))
}

/// What [`Mail::folder_files`] found in a folder.
pub(super) struct Listed {
    /// Every message file with its name, sorted by name (each name once),
    /// shared with the thread that writes the folder cache.
    pub(super) files: Listing,
    /// For each of `files`, in the same order: for the requests that need a
    /// reply among the files it read (not taken from the folder cache), the
    /// message, checked as the gate checks it (read from its file, or from
    /// its sender's record, `sent.rs`).
    pub(super) messages: Vec<Option<Box<Message>>>,
    /// The folder cache being written, when it is.
    pub(super) writing: Option<reads::Writing>,
}

/// A listing's entries, sorted by name, written as the folder cache's
/// `files` map (the same JSON as a `BTreeMap` of them) without building one.
pub(super) struct Sorted<'a>(pub(super) &'a [(String, FileEntry)]);

impl Serialize for Sorted<'_> {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(name, entry)| (name, entry)))
    }
}

impl Mail {
    /// The length of `agent`'s sent journal (0 when there is none or it
    /// cannot be looked at: its files are then read).
    fn journal_len(&self, agent: &AgentId) -> u64 {
        match self.state.stat(&self.sent_journal_path(agent)) {
            Ok(Some(meta)) if meta.is_file() => meta.len,
            _ => 0,
        }
    }
}
