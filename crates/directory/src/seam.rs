//! The profiles on the storage seam: `agents/{agent}.json` read with its
//! version and changed with a compare-and-swap, on a directory or a server.

use chipset_backend::{Dir, Key, Version};
use chipset_store::{AgentId, Corruption, Decision, ReadOutcome, StateDir, StatePath, Timestamp};

use crate::directory::{Directory, classify};
use crate::error::{Error, Result};
use crate::profile::Profile;

impl Directory {
    /// Returns `agent`'s profile key on the seam: `agents/{agent}.json`.
    fn key(agent: &AgentId) -> Key {
        Dir::new(crate::DIRECTORY_CHANNEL.as_str())
            .and_then(|d| d.key(&format!("{agent}.json")))
            .expect("a validated agent id is a valid name")
    }

    /// Returns the time on the backend's clock.
    pub(crate) fn now(&self) -> Result<Timestamp> {
        self.seam.now().map_err(seam_error)
    }

    /// Reads `agent`'s profile on the seam, with the version to swap at.
    pub(crate) fn read_versioned(
        &self,
        agent: &AgentId,
        path: &StatePath,
    ) -> Result<(ReadOutcome<Profile>, Option<Version>)> {
        let read = match self.seam.read(&Self::key(agent)) {
            Ok(None) => (ReadOutcome::Missing, None),
            Ok(Some(v)) => (ReadOutcome::from_json(path, &v.value), Some(v.version)),
            Err(chipset_backend::Error::Corrupt { reason, .. }) => (
                ReadOutcome::Corrupt(Corruption {
                    path: path.to_path_buf(),
                    reason,
                }),
                None,
            ),
            Err(e) => return Err(seam_error(e)),
        };
        Ok((classify(agent, path, read.0), read.1))
    }

    /// Lists the names in `agents/` that hold a value, in byte order.
    pub(crate) fn names(&self) -> Result<Vec<String>> {
        let dir = Dir::new(crate::DIRECTORY_CHANNEL.as_str()).expect("a constant name is valid");
        self.seam.list(&dir).map_err(seam_error)
    }

    /// Runs `decide` on `agent`'s profile (read and classified) at the
    /// backend's clock, and writes its decision with a compare-and-swap at
    /// the version read: a create when there was none, a replace
    /// otherwise. When another writer came first, reads and decides again.
    pub(crate) fn swap<R>(
        &self,
        agent: &AgentId,
        mut decide: impl FnMut(ReadOutcome<Profile>, Timestamp) -> Result<Decision<Profile, R>>,
    ) -> Result<R> {
        let path = self.path(agent);
        let key = Self::key(agent);
        loop {
            let (read, version) = self.read_versioned(agent, &path)?;
            // Time is read after the profile: a change that commits was
            // decided on the newest profile.
            let now = self.now()?;
            let (new, answer) = match decide(read, now)? {
                Decision::Keep(answer) => return Ok(answer),
                Decision::Write(new, answer) => (new, answer),
            };
            let bytes = StateDir::to_canonical_json(&new).map_err(|source| {
                Error::Store(chipset_store::Error::Serialize {
                    path: path.to_path_buf(),
                    source,
                })
            })?;
            match self.seam.create_or_replace(&key, version, &bytes) {
                Ok(Some(_)) => return Ok(answer),
                Ok(None) => tracing::debug!(%agent, "profile changed under us; deciding again"),
                Err(e) => return Err(seam_error(e)),
            }
        }
    }
}

/// Turns a seam error into the directory's: a directory's failures stay
/// the store's errors ([`Error::Store`], an unknown outcome included), a
/// server's are [`Error::Backend`].
fn seam_error(e: chipset_backend::Error) -> Error {
    match e {
        chipset_backend::Error::Store { source, .. } => Error::Store(source),
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

impl Directory {
    /// Moves `agent`'s profile row, if it is still at `version`, into
    /// `agents/quarantine/{unix-ms}-{agent}.json` (a server's quarantine:
    /// nothing is deleted); a profile rewritten since is left alone.
    pub(crate) fn quarantine_row(
        &self,
        agent: &AgentId,
        version: Version,
    ) -> Result<chipset_store::Action> {
        let aside = self
            .seam
            .quarantine(&Self::key(agent), version, self.now()?)
            .map_err(seam_error)?;
        Ok(match aside {
            Some(to) => {
                tracing::warn!(%agent, to = %to, "moved a corrupt profile aside");
                chipset_store::Action::quarantined(to.to_string())
            }
            None => chipset_store::Action::LeftAlone("rewritten since the check".to_owned()),
        })
    }
}
