//! The signals on the storage seam (issue 30): every read and write of
//! `latest.json`, `processed.json` and `responses/` goes through a
//! `chipset_backend::Backend`, so the same rules run on a directory (the
//! files byte for byte what they were) or on PostgreSQL.
//!
//! A change is a compare-and-swap: read the value and its version, decide
//! with the pure rule, write only if it is still at that version (a create
//! when nothing was there), else read and decide again. On a directory the
//! swap is the store's durable replace under the file's lock
//! (`.latest.json.lock`), the lock `StateDir::update` takes, so older
//! writers and this one still exclude each other.

use std::path::{Path, PathBuf};

use chipset_backend::{Created, Dir, Key, Version};
use chipset_store::{
    AgentId, CorruptReason, Corruption, Decision, ReadOutcome, StatePath, Timestamp, Unsupported,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::Nudges;
use crate::error::{Error, Result};

/// What a swap's rule sees of the current value. A corrupt value never
/// reaches the rule: it is moved aside first.
pub(crate) enum Current<T> {
    /// Nothing there.
    Missing,
    /// A value.
    Value(T),
    /// A value this version does not know (left in place).
    Unsupported(Unsupported),
    /// An unreadable value was there and was moved aside, to this place.
    Quarantined(PathBuf),
}

/// The folder a quarantined value goes to on a server (a directory uses
/// the store's `.quarantine/`).
pub(super) const QUARANTINE: &str = "quarantine";

impl Nudges {
    /// Returns the key of `nudge/{agent}/{folders…}/{name}` on the seam.
    pub(crate) fn seam_key(&self, agent: &AgentId, folders: &[&str], name: &str) -> Key {
        self.seam_dir(agent, folders)
            .key(name)
            .expect("a nudge file name is a valid name")
    }

    /// Returns the folder `nudge/{agent}/{folders…}` on the seam.
    pub(crate) fn seam_dir(&self, agent: &AgentId, folders: &[&str]) -> Dir {
        let mut dir = Dir::new(crate::NUDGE_CHANNEL.as_str())
            .and_then(|d| d.join(agent.as_str()))
            .expect("a validated agent id is a valid name");
        for folder in folders {
            dir = dir.join(folder).expect("a nudge folder is a valid name");
        }
        dir
    }

    /// Returns the time on the seam's clock (the server's on PostgreSQL).
    pub(crate) fn now(&self) -> Result<Timestamp> {
        self.seam
            .now()
            .map_err(|e| seam_error(self.state.root(), e))
    }

    /// Reads `key` (the file `path`) as a `T`, with the version to swap at.
    pub(crate) fn read_at<T: DeserializeOwned>(
        &self,
        key: &Key,
        path: &StatePath,
    ) -> Result<(ReadOutcome<T>, Option<Version>)> {
        match self.seam.read(key) {
            Ok(None) => Ok((ReadOutcome::Missing, None)),
            Ok(Some(v)) => Ok((parse(path.as_path(), &v.value), Some(v.version))),
            Err(chipset_backend::Error::Corrupt { reason, .. }) => Ok((
                ReadOutcome::Corrupt(Corruption {
                    path: path.as_path().to_owned(),
                    reason,
                }),
                None,
            )),
            Err(e) => Err(seam_error(path.as_path(), e)),
        }
    }

    /// Reads `key` (the file `path`) as a `T`.
    pub(crate) fn read_value<T: DeserializeOwned>(
        &self,
        key: &Key,
        path: &StatePath,
    ) -> Result<ReadOutcome<T>> {
        Ok(self.read_at(key, path)?.0)
    }

    /// Lists the names holding a value in `dir`, in byte order.
    pub(crate) fn list_at(&self, dir: &Dir, path: &StatePath) -> Result<Vec<String>> {
        self.seam
            .list(dir)
            .map_err(|e| seam_error(path.as_path(), e))
    }

    /// Runs `decide` on the value at `key` (the file `path`) and writes its
    /// decision with a compare-and-swap at the version read; when another
    /// writer came first, reads and decides again. A corrupt value is moved
    /// aside first and `decide` sees [`Current::Quarantined`].
    pub(crate) fn swap<T, R>(
        &self,
        key: &Key,
        path: &StatePath,
        mut decide: impl FnMut(Current<T>) -> Result<Decision<T, R>>,
    ) -> Result<R>
    where
        T: Serialize + DeserializeOwned,
    {
        let fail = |e| seam_error(path.as_path(), e);
        loop {
            let (read, mut version) = self.read_at::<T>(key, path)?;
            let current = match read {
                ReadOutcome::Missing => Current::Missing,
                ReadOutcome::Value(v) => Current::Value(v),
                ReadOutcome::Unsupported(u) => Current::Unsupported(u),
                ReadOutcome::Corrupt(_) => match self.quarantine_at::<T>(key, path)? {
                    Some(to) => {
                        version = None;
                        Current::Quarantined(to)
                    }
                    // Moved aside or replaced meanwhile: read again.
                    None => continue,
                },
            };
            let (value, r) = match decide(current)? {
                Decision::Keep(r) => return Ok(r),
                Decision::Write(value, r) => (value, r),
            };
            let bytes = chipset_store::StateDir::to_canonical_json(&value).map_err(|source| {
                Error::Store(chipset_store::Error::Serialize {
                    path: path.as_path().to_owned(),
                    source,
                })
            })?;
            let written = match version {
                None => match self.seam.create(key, &bytes) {
                    Ok(Created::New(_)) => true,
                    Ok(Created::Existing(_)) => false,
                    Err(e) => return Err(fail(e)),
                },
                Some(v) => match self.seam.replace(key, v, &bytes) {
                    Ok(_) => true,
                    Err(
                        chipset_backend::Error::Conflict { .. }
                        | chipset_backend::Error::NotFound { .. },
                    ) => false,
                    Err(e) => return Err(fail(e)),
                },
            };
            if written {
                return Ok(r);
            }
            tracing::debug!(%key, "nudge file changed under us; deciding again");
        }
    }

    /// Moves the unreadable value at `key` aside, under its lock, if it is
    /// still unreadable: on a directory into the store's `.quarantine/`, on
    /// a server into the folder `quarantine` beside it. Returns where it
    /// went, or `None` when it was no longer there or no longer unreadable.
    pub(super) fn quarantine_at<T: DeserializeOwned>(
        &self,
        key: &Key,
        path: &StatePath,
    ) -> Result<Option<PathBuf>> {
        let fail = |e| seam_error(path.as_path(), e);
        let _guard = self.seam.lock(key).map_err(fail)?;
        let version = match self.seam.read(key) {
            Ok(None) => return Ok(None),
            // Replaced by a readable value meanwhile: the caller reads again.
            Ok(Some(v))
                if !matches!(
                    parse::<T>(path.as_path(), &v.value),
                    ReadOutcome::Corrupt(_)
                ) =>
            {
                return Ok(None);
            }
            Ok(Some(v)) => Some(v.version),
            // A symlink, a FIFO, over the cap: only a directory has these.
            Err(chipset_backend::Error::Corrupt { .. }) => None,
            Err(e) => return Err(fail(e)),
        };
        let version = match version {
            Some(v) if !self.local => v,
            _ => return self.state.quarantine(path).map(Some).map_err(Error::Store),
        };
        let aside = self
            .seam
            .quarantine(key, version, self.now()?)
            .map_err(fail)?;
        Ok(aside.map(|to| PathBuf::from(to.to_string())))
    }
}

/// Parses a value's bytes as the store's typed reads do: a syntax error is
/// unparsable, valid JSON of another shape is the wrong shape.
fn parse<T: DeserializeOwned>(path: &Path, bytes: &[u8]) -> ReadOutcome<T> {
    match serde_json::from_slice(bytes) {
        Ok(v) => ReadOutcome::Value(v),
        Err(e) => ReadOutcome::Corrupt(Corruption {
            path: path.to_owned(),
            reason: match e.classify() {
                serde_json::error::Category::Data => CorruptReason::WrongShape(e.to_string()),
                _ => CorruptReason::Unparsable(e.to_string()),
            },
        }),
    }
}

/// Turns a seam error into the nudge's: a directory's failures stay the
/// store's errors ([`Error::Store`], an unknown outcome included), an
/// unreadable file is [`Error::Corrupt`], a server's failures are
/// [`Error::Backend`].
pub(crate) fn seam_error(path: &Path, e: chipset_backend::Error) -> Error {
    match e {
        chipset_backend::Error::Store { source, .. } => Error::Store(source),
        chipset_backend::Error::Corrupt { reason, .. } => Error::Corrupt(Corruption {
            path: path.to_owned(),
            reason,
        }),
        chipset_backend::Error::OutcomeUnknown { op, key, source } => {
            match source.downcast::<chipset_store::Error>() {
                Ok(store) => Error::Store(*store),
                Err(source) => Error::Backend(Box::new(chipset_backend::Error::OutcomeUnknown {
                    op,
                    key,
                    source,
                })),
            }
        }
        other => Error::Backend(Box::new(other)),
    }
}
