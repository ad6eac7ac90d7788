//! Where the reminders live: the state root's files (as they always were)
//! or a storage backend, a PostgreSQL server (issue 30), when the channel
//! was made with [`Reminders::with_backend`]. Every read and write of the
//! shell goes through these few methods, so the rules run unchanged on
//! both.
//!
//! On a server a file `reminders/{area}/…/{name}` is the key of the same
//! path; the key's stripe lock `reminders/locks/stripe-NN` is the server's
//! advisory lock of that key (released if its holder dies); the time is
//! the server's clock, so due snoozes are judged alike on every host; an
//! unreadable record is moved into the folder `quarantine/` beside it. A
//! server has no folders to list, so an index walk lists the folders of
//! the registered kinds and their source types.

use std::path::{Path, PathBuf};

use chipset_backend::{Created, Dir, Key};
use chipset_store::{ReadOutcome, StatePath, Timestamp};

use super::Reminders;
use super::query::{parse_reminder, read_reminder};
use crate::error::{Error, Result};
use crate::format::Reminder;

/// A held stripe lock, on either side.
pub(super) enum StripeGuard {
    /// The lock file's `flock`.
    Local(#[allow(dead_code, reason = "held until dropped")] chipset_store::LockGuard),
    /// The backend's lock.
    Seam(#[allow(dead_code, reason = "held until dropped")] chipset_backend::LockGuard),
}

/// What a move did.
pub(super) enum Moved {
    /// `from` is now at `to`.
    Done,
    /// `to` holds something; nothing moved.
    DestinationExists,
}

/// Turns a seam error into the channel's: a directory's failures stay the
/// store's errors, an unreadable value is [`Error::Corrupt`], a server's
/// failures are [`Error::Backend`].
fn seam_error(path: &Path, e: chipset_backend::Error) -> Error {
    match e {
        chipset_backend::Error::Store { source, .. } => Error::Store(source),
        chipset_backend::Error::Corrupt { reason, .. } => {
            Error::Corrupt(chipset_store::Corruption {
                path: path.to_owned(),
                reason,
            })
        }
        other => Error::Backend(Box::new(other)),
    }
}

impl Reminders {
    /// Returns the seam key of `path`, a file under the state root.
    fn key(&self, path: &StatePath) -> Result<Key> {
        let rel = path
            .as_path()
            .strip_prefix(self.state.root())
            .expect("a state path is under its root");
        let parts: Vec<&str> = rel.iter().filter_map(|p| p.to_str()).collect();
        let (name, folders) = parts.split_last().expect("a file path has a name");
        self.seam_dir(folders)
            .and_then(|d| d.key(name))
            .map_err(|e| seam_error(path.as_path(), e))
    }

    fn seam_dir(&self, folders: &[&str]) -> chipset_backend::Result<Dir> {
        let (first, rest) = folders.split_first().expect("a path under a channel");
        let mut dir = Dir::new(first)?;
        for f in rest {
            dir = dir.join(f)?;
        }
        Ok(dir)
    }

    /// Returns the time the reminders judge by: the state's clock, or the
    /// server's.
    pub(super) fn now(&self) -> Result<Timestamp> {
        match &self.seam {
            None => Ok(self.state.now()),
            Some(seam) => seam.now().map_err(|e| seam_error(self.state.root(), e)),
        }
    }

    /// Reads the record at `path`.
    pub(super) fn read_at(&self, path: &StatePath) -> Result<ReadOutcome<Reminder>> {
        let Some(seam) = &self.seam else {
            return Ok(read_reminder(&self.state, path)?);
        };
        let key = self.key(path)?;
        match seam.read(&key) {
            Ok(None) => Ok(ReadOutcome::Missing),
            Ok(Some(v)) => Ok(parse_reminder(path.as_path(), &v.value)),
            Err(chipset_backend::Error::Corrupt { reason, .. }) => {
                Ok(ReadOutcome::Corrupt(chipset_store::Corruption {
                    path: path.as_path().to_owned(),
                    reason,
                }))
            }
            Err(e) => Err(seam_error(path.as_path(), e)),
        }
    }

    /// Creates the record at `path` unless something is there (then false).
    pub(super) fn create_at(&self, path: &StatePath, r: &Reminder) -> Result<bool> {
        let Some(seam) = &self.seam else {
            return match self.state.create_new_json(path, r) {
                Ok(()) => Ok(true),
                Err(chipset_store::Error::AlreadyExists { .. }) => Ok(false),
                Err(e) => Err(e.into()),
            };
        };
        let bytes = self.bytes(path, r)?;
        match seam.create(&self.key(path)?, &bytes) {
            Ok(Created::New(_)) => Ok(true),
            // A retry of a create that applied is its success.
            Ok(c @ Created::Existing(_)) => Ok(c.is_retry_of(&bytes)),
            Err(e) => Err(seam_error(path.as_path(), e)),
        }
    }

    /// Writes the record at `path` whatever is there (the caller holds the
    /// key's stripe lock).
    pub(super) fn write_at(&self, path: &StatePath, r: &Reminder) -> Result<()> {
        let Some(seam) = &self.seam else {
            return Ok(self.state.write_json(path, r)?);
        };
        let bytes = self.bytes(path, r)?;
        seam.put(&self.key(path)?, &bytes)
            .map(|_| ())
            .map_err(|e| seam_error(path.as_path(), e))
    }

    fn bytes(&self, path: &StatePath, r: &Reminder) -> Result<Vec<u8>> {
        chipset_store::StateDir::to_canonical_json(r).map_err(|source| {
            Error::Store(chipset_store::Error::Serialize {
                path: path.as_path().to_owned(),
                source,
            })
        })
    }

    /// Moves `from` to `to` without overwriting.
    ///
    /// # Errors
    ///
    /// The store's [`NotFound`](chipset_store::Error::NotFound) when `from`
    /// holds nothing, as on a directory.
    pub(super) fn move_at(&self, from: &StatePath, to: &StatePath) -> Result<Moved> {
        let Some(seam) = &self.seam else {
            return match self.state.move_noclobber(from, to) {
                Ok(()) => Ok(Moved::Done),
                Err(chipset_store::Error::AlreadyExists { .. }) => Ok(Moved::DestinationExists),
                Err(e) => Err(e.into()),
            };
        };
        let (fk, tk) = (self.key(from)?, self.key(to)?);
        let fail = |e| seam_error(from.as_path(), e);
        let gone = || {
            Error::Store(chipset_store::Error::NotFound {
                path: from.as_path().to_owned(),
            })
        };
        loop {
            let Some(found) = seam.read(&fk).map_err(fail)? else {
                return Err(gone());
            };
            match seam.move_new(&fk, found.version, &tk) {
                Ok(_) => return Ok(Moved::Done),
                Err(chipset_backend::Error::Exists { .. }) => return Ok(Moved::DestinationExists),
                Err(chipset_backend::Error::Conflict { .. }) => continue,
                Err(chipset_backend::Error::NotFound { .. }) => return Err(gone()),
                Err(e) => return Err(fail(e)),
            }
        }
    }

    /// Moves an unreadable or duplicate record at `path` aside and returns
    /// where it went: the store's `.quarantine/`, or on a server the folder
    /// `quarantine/` beside it, named `{unix-ms}-{name}`.
    pub(super) fn quarantine_at(&self, path: &StatePath) -> Result<PathBuf> {
        let Some(seam) = &self.seam else {
            return Ok(self.state.quarantine(path)?);
        };
        let key = self.key(path)?;
        let fail = |e| seam_error(path.as_path(), e);
        let Some(found) = seam.read(&key).map_err(fail)? else {
            return Err(Error::Store(chipset_store::Error::NotFound {
                path: path.as_path().to_owned(),
            }));
        };
        let to = key.quarantined_at(self.now()?).map_err(fail)?;
        seam.move_new(&key, found.version, &to).map_err(fail)?;
        Ok(PathBuf::from(to.to_string()))
    }

    /// Lists the names in the folder `dir` (files holding a value, on a
    /// server; entries, on a directory).
    pub(super) fn list_at(&self, dir: &StatePath) -> Result<Vec<String>> {
        let Some(seam) = &self.seam else {
            return Ok(self.state.list(dir)?);
        };
        let folder = self.key(&dir.join("x").expect("a plain name"))?;
        seam.list(folder.dir())
            .map_err(|e| seam_error(dir.as_path(), e))
    }

    /// Lists the folders below `{area}/` (kinds) or `{area}/{kind}/`
    /// (source types): on a server, from the registry.
    pub(super) fn folders_at(&self, dir: &StatePath, kind: Option<&str>) -> Result<Vec<String>> {
        if self.seam.is_none() {
            return Ok(self.state.list(dir)?);
        }
        let mut out: Vec<String> = match kind {
            None => self.registry.kinds().map(|k| k.name.clone()).collect(),
            Some(kind) => self
                .registry
                .get(kind)
                .map(|k| k.source_type.clone())
                .into_iter()
                .collect(),
        };
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// Whether something is at `path`.
    pub(super) fn exists_at(&self, path: &StatePath) -> Result<bool> {
        let Some(seam) = &self.seam else {
            return Ok(self.state.stat(path)?.is_some());
        };
        match seam.read(&self.key(path)?) {
            Ok(v) => Ok(v.is_some()),
            Err(chipset_backend::Error::Corrupt { .. }) => Ok(true),
            Err(e) => Err(seam_error(path.as_path(), e)),
        }
    }

    /// Takes the stripe lock `stripe`.
    pub(super) fn lock_stripe(&self, stripe: u64) -> Result<StripeGuard> {
        let Some(seam) = &self.seam else {
            return Ok(StripeGuard::Local(
                self.state.lock(&self.stripe_path(stripe)?)?,
            ));
        };
        let path = self.stripe_path(stripe)?;
        let key = self.key(&path)?;
        seam.lock(&key)
            .map(StripeGuard::Seam)
            .map_err(|e| seam_error(path.as_path(), e))
    }
}
