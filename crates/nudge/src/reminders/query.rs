//! The read side of the reminder channel: listings, lookups by id and
//! counts, and the index scans the shell and the doctor share.

use std::collections::BTreeMap;
use std::path::Path;

use chipset_store::{Listing, ReadOutcome, StateDir, StatePath, Unsupported};
use serde_json::Value;

use super::rules::sort;
use super::{HISTORY_DIR, OPEN_DIR, ReminderFilter, Reminders, SNOOZED_DIR};
use crate::error::{Error, Result};
use crate::format::{Reminder, ReminderId};
use crate::key::ReminderKey;

impl Reminders {
    /// Lists the reminders that match `filter`, oldest first.
    ///
    /// By default the open ones, after reopening due snoozes: this reads
    /// only the open and snoozed indexes, so the cost follows the number of
    /// open and snoozed reminders, not the history. With
    /// [`ReminderFilter::history`], every reminder ever opened (open,
    /// snoozed and resolved), which reads the whole history.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownKind`] when the filter names a kind the registry does
    /// not know (a typo would otherwise list nothing); [`Error::Store`] on I/O failure.
    pub fn list(&self, filter: &ReminderFilter) -> Result<Listing<Reminder>> {
        if let Some(kind) = filter
            .kind
            .as_ref()
            .filter(|k| self.registry.get(k).is_none())
        {
            return Err(Error::UnknownKind { kind: kind.clone() });
        }
        if filter.history {
            return self.history(filter);
        }
        let (_, corrupt_snoozed) = self.sweep_snoozes()?;
        let mut listing = Listing::default();
        let kind_dir = filter
            .kind
            .as_ref()
            .map(|k| self.root().join_static(SNOOZED_DIR).as_path().join(k));
        listing.corrupt.extend(
            corrupt_snoozed
                .into_iter()
                .filter(|c| kind_dir.as_ref().is_none_or(|d| c.path.starts_with(d))),
        );
        for path in self.index_files(OPEN_DIR, filter.kind.as_deref())? {
            match self.read_at(&path)? {
                ReadOutcome::Value(r) if r.is_open() => {
                    if filter.matches(&r) {
                        listing.items.push(r);
                    }
                }
                ReadOutcome::Value(r) => {
                    // Resolved but not yet moved: finish the move.
                    let key = Self::key_of(&r)?;
                    let _guard = self.lock_key(&key)?;
                    self.settle(&key)?;
                }
                other => listing.push(other),
            }
        }
        sort(&mut listing.items);
        Ok(listing)
    }

    /// Returns how many reminders are open per kind, from the index's file
    /// names alone (no reads, no sweep): for a status screen.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] on I/O failure.
    pub fn open_counts(&self) -> Result<BTreeMap<String, usize>> {
        let mut counts = BTreeMap::new();
        for path in self.index_files(OPEN_DIR, None)? {
            if let Some(kind) = path
                .parent()
                .and_then(Path::parent)
                .and_then(Path::file_name)
            {
                *counts
                    .entry(kind.to_string_lossy().into_owned())
                    .or_default() += 1;
            }
        }
        Ok(counts)
    }

    /// Returns every reminder ever opened that matches `filter` (open,
    /// snoozed and resolved), oldest first. Reads the whole history.
    fn history(&self, filter: &ReminderFilter) -> Result<Listing<Reminder>> {
        let mut listing = Listing::default();
        let mut files = self.index_files(OPEN_DIR, filter.kind.as_deref())?;
        files.extend(self.index_files(SNOOZED_DIR, filter.kind.as_deref())?);
        files.extend(self.history_files()?);
        let mut seen = std::collections::BTreeSet::new();
        for path in files {
            match self.read_at(&path)? {
                ReadOutcome::Value(r) => {
                    // A record caught mid-move is read once.
                    if filter.matches(&r) && seen.insert(r.id.clone()) {
                        listing.items.push(r);
                    }
                }
                other => listing.push(other),
            }
        }
        sort(&mut listing.items);
        Ok(listing)
    }

    /// Returns reminder `id` wherever it is.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] when its file is unreadable, or when it is not found
    /// and an unreadable open or snoozed file could have held it (run the
    /// doctor); [`Error::Store`].
    pub fn get(&self, id: &ReminderId) -> Result<Option<Reminder>> {
        Ok(match self.locate(id)? {
            Located::History(r) => Some(*r),
            Located::Live(key) => {
                let mut found = None;
                for path in [self.open_path(&key), self.snoozed_path(&key)] {
                    if let Some(r) = self.read(&path)?.filter(|r| r.id == *id) {
                        found = Some(r);
                        break;
                    }
                }
                found
            }
            Located::Nowhere => None,
        })
    }

    pub(super) fn locate(&self, id: &ReminderId) -> Result<Located> {
        if let Some(r) = self.read(&self.history_path(id))? {
            return Ok(Located::History(Box::new(r)));
        }
        let mut unreadable = None;
        for area in [OPEN_DIR, SNOOZED_DIR] {
            for path in self.index_files(area, None)? {
                match self.read(&path) {
                    Ok(Some(r)) if r.id == *id => return Ok(Located::Live(Self::key_of(&r)?)),
                    Ok(_) => {}
                    // It could be the one asked for: remember it, keep looking.
                    Err(Error::Corrupt(c)) => {
                        unreadable.get_or_insert(c);
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        // It may have moved into the history during the scan.
        if let Some(r) = self.read(&self.history_path(id))? {
            return Ok(Located::History(Box::new(r)));
        }
        // Not found, but an unreadable index file could have held it: say so
        // rather than "no such reminder" (fail closed; the doctor repairs it).
        match unreadable {
            Some(c) => Err(Error::Corrupt(c)),
            None => Ok(Located::Nowhere),
        }
    }

    /// Returns the files of an index area (`open` or `snoozed`), optionally
    /// for one kind: `{area}/{kind}/{source_type}/*.json`.
    pub(super) fn index_files(
        &self,
        area: &'static str,
        kind: Option<&str>,
    ) -> Result<Vec<StatePath>> {
        let top = self.root().join_static(area);
        let kinds = match kind {
            Some(k) => vec![k.to_owned()],
            None => self.folders_at(&top, None)?,
        };
        let mut out = Vec::new();
        // A name that is not one safe segment holds no reminder: every
        // index path is made of a checked key's parts.
        for kind in kinds {
            let Ok(kdir) = top.join(&kind) else { continue };
            for st in self.folders_at(&kdir, Some(&kind))? {
                let Ok(sdir) = kdir.join(&st) else { continue };
                for name in self.list_at(&sdir)? {
                    if name.ends_with(".json")
                        && let Ok(path) = sdir.join(name)
                    {
                        out.push(path);
                    }
                }
            }
        }
        Ok(out)
    }

    pub(super) fn history_files(&self) -> Result<Vec<StatePath>> {
        let dir = self.root().join_static(HISTORY_DIR);
        Ok(self
            .list_at(&dir)?
            .into_iter()
            .filter(|n| n.ends_with(".json"))
            .filter_map(|n| dir.join(n).ok())
            .collect())
    }
}

pub(super) enum Located {
    Live(ReminderKey),
    History(Box<Reminder>),
    Nowhere,
}

/// Reads a reminder record: a `severity` or `resolution` this version does
/// not know makes it unsupported (reported, refused, never quarantined), not
/// corrupt.
pub(crate) fn read_reminder(
    state: &StateDir,
    path: &StatePath,
) -> chipset_store::Result<ReadOutcome<Reminder>> {
    Ok(state
        .read_bytes(path)?
        .and_then(|bytes| parse_reminder(path, &bytes)))
}

/// Takes bytes read from `path` as a reminder, as [`read_reminder`] does.
pub(crate) fn parse_reminder(path: &Path, bytes: &[u8]) -> ReadOutcome<Reminder> {
    // The common case parses once; only a file that fails is looked at again.
    let read = chipset_store::ReadOutcome::<Reminder>::from_json(path, bytes);
    if !read.is_corrupt() {
        return read;
    }
    match serde_json::from_slice::<Value>(bytes)
        .ok()
        .and_then(|v| Reminder::unsupported(&v))
    {
        Some(what) => ReadOutcome::Unsupported(Unsupported::new(path, what)),
        None => read,
    }
}
