//! Paths under `loop/` and the read, lock, write and append helpers every
//! loop file goes through: the store's on a directory (the lock is the
//! store's [`StateDir::lock`]), the backend's operations on a server.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chipset_backend::{Backend, Created, Dir, Key, LockGuard, Version};
use chipset_hook::BeadId;
use chipset_store::{
    Action, AgentId, JsonLog, ReadOutcome, StateDir, StatePath, TaskId, Timestamp,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};

/// The witness's directory under `loop/`.
pub(crate) const WITNESS_DIR: &str = "witness";
/// The dispatcher's directory under `loop/`.
pub(crate) const DISPATCHER_DIR: &str = "dispatcher";
/// The round checkpoints' directory under `loop/`.
pub(crate) const ROUNDS_DIR: &str = "rounds";
/// The workers' directory under `loop/`.
pub(crate) const WORKER_DIR: &str = "worker";

/// The loop files of one state root, or their rows on a server.
#[derive(Debug, Clone)]
pub(crate) struct Files {
    pub(crate) state: StateDir,
    root: StatePath,
    /// The server the loop records live on; `None`: the state root's files.
    seam: Option<Arc<dyn Backend>>,
}

impl Files {
    /// The loop files of `state`, on the server `seam` when given. A
    /// backend that is a local directory ([`Backend::local_state`]) gets
    /// the directory's own files and locks, byte for byte.
    pub(crate) fn new(state: StateDir, seam: Option<Arc<dyn Backend>>) -> Self {
        let seam = seam.filter(|b| b.local_state().is_none());
        let root = state.channel(crate::LOOP_CHANNEL);
        Files { state, root, seam }
    }

    pub(crate) fn incidents_dir(&self) -> StatePath {
        self.root.join_static(WITNESS_DIR).join_static("incidents")
    }

    pub(crate) fn incident(&self, agent: &AgentId) -> StatePath {
        self.incidents_dir().join_id(agent, ".json")
    }

    pub(crate) fn witness_log(&self) -> StatePath {
        self.root.join_static(WITNESS_DIR).join_static("log.jsonl")
    }

    pub(crate) fn beads_dir(&self) -> StatePath {
        self.root.join_static(DISPATCHER_DIR).join_static("beads")
    }

    pub(crate) fn bead(&self, bead: &BeadId) -> StatePath {
        self.beads_dir().join_id(bead, ".json")
    }

    pub(crate) fn dispatcher_dir(&self) -> StatePath {
        self.root.join_static(DISPATCHER_DIR)
    }

    pub(crate) fn agents(&self) -> StatePath {
        self.dispatcher_dir().join_static("agents.json")
    }

    pub(crate) fn dispatcher_log(&self) -> StatePath {
        self.root
            .join_static(DISPATCHER_DIR)
            .join_static("log.jsonl")
    }

    pub(crate) fn rounds_dir(&self) -> StatePath {
        self.root.join_static(ROUNDS_DIR)
    }

    pub(crate) fn round(&self, task: &TaskId) -> StatePath {
        self.rounds_dir().join_id(task, ".json")
    }

    /// The completion reports not yet delivered, one per agent.
    pub(crate) fn reports_dir(&self) -> StatePath {
        self.root.join_static(WORKER_DIR).join_static("reports")
    }

    pub(crate) fn report(&self, agent: &AgentId) -> StatePath {
        self.reports_dir().join_id(agent, ".json")
    }

    /// Returns the time every loop judgement uses: the state's clock on a
    /// directory, the server's clock on a server.
    pub(crate) fn now(&self) -> Result<Timestamp> {
        match &self.seam {
            None => Ok(self.state.now()),
            Some(b) => b.now().map_err(backend),
        }
    }

    /// Reads a loop file: `None` when missing, [`Error::Corrupt`] when bad.
    pub(crate) fn read<T: DeserializeOwned>(&self, path: &StatePath) -> Result<Option<T>> {
        match self.read_outcome(path)? {
            ReadOutcome::Missing => Ok(None),
            ReadOutcome::Value(v) => Ok(Some(v)),
            ReadOutcome::Corrupt(c) => Err(Error::Corrupt(c)),
            ReadOutcome::Unsupported(u) => Err(chipset_store::Error::from(u).into()),
        }
    }

    /// Reads a loop file as the store classifies it: missing, a value,
    /// corrupt or unsupported.
    pub(crate) fn read_outcome<T: DeserializeOwned>(
        &self,
        path: &StatePath,
    ) -> Result<ReadOutcome<T>> {
        let Some(b) = &self.seam else {
            return Ok(self.state.read_json::<T>(path)?);
        };
        match b.read(&self.key(path)?) {
            Ok(None) => Ok(ReadOutcome::Missing),
            Ok(Some(v)) => Ok(ReadOutcome::from_json(path, &v.value)),
            Err(e) => match seam_error(path, e) {
                Error::Corrupt(c) => Ok(ReadOutcome::Corrupt(c)),
                other => Err(other),
            },
        }
    }

    /// On a server: every value in the loop folder `dir`, with its version
    /// and bytes, in byte order; `None` on a directory.
    pub(crate) fn server_values(
        &self,
        dir: &StatePath,
    ) -> Result<Option<Vec<(String, chipset_backend::Versioned)>>> {
        let Some(b) = &self.seam else {
            return Ok(None);
        };
        Ok(Some(b.read_all(&self.dir(dir)?).map_err(backend)?))
    }

    /// On a server: moves the value at `path`, if it is still at
    /// `version`, into `quarantine/{unix-ms}-{name}` beside it (a server's
    /// quarantine: nothing is deleted); one rewritten since is left alone.
    pub(crate) fn quarantine_row(&self, path: &StatePath, version: Version) -> Result<Action> {
        let b = self.seam.as_ref().expect("a server's quarantine");
        let now = b.now().map_err(backend)?;
        let aside = b
            .quarantine(&self.key(path)?, version, now)
            .map_err(backend)?;
        Ok(match aside {
            Some(to) => Action::quarantined(to.to_string()),
            None => Action::LeftAlone("rewritten since the check".to_owned()),
        })
    }

    /// Whether the records are on a server.
    pub(crate) fn on_server(&self) -> bool {
        self.seam.is_some()
    }

    /// Lists the names of the values in a loop folder, in byte order (on a
    /// directory: the store's listing, which skips dot-names).
    pub(crate) fn list(&self, dir: &StatePath) -> Result<Vec<String>> {
        match &self.seam {
            None => Ok(self.state.list(dir)?),
            Some(b) => b.list(&self.dir(dir)?).map_err(backend),
        }
    }

    /// Creates a loop file holding `value` if nothing is there: `false` when
    /// something is.
    pub(crate) fn create<T: Serialize>(&self, path: &StatePath, value: &T) -> Result<bool> {
        match &self.seam {
            None => match self.state.create_new_json(path, value) {
                Ok(()) => Ok(true),
                Err(chipset_store::Error::AlreadyExists { .. }) => Ok(false),
                Err(e) => Err(e.into()),
            },
            Some(b) => {
                let bytes = canonical(path, value)?;
                match b.create(&self.key(path)?, &bytes).map_err(backend)? {
                    Created::New(_) => Ok(true),
                    Created::Existing(_) => Ok(false),
                }
            }
        }
    }

    /// Takes the file's lock and reads it, for a sequence of durable writes
    /// under one lock: on a directory [`StateDir::lock`] and a read under
    /// it, on a server the lock `{name}.lock` ([`Backend::lock`], released
    /// if the holder dies) and a versioned read. A corrupt file is
    /// [`Error::Corrupt`], as [`Files::read`] reports it.
    pub(crate) fn lock<T: DeserializeOwned>(&self, path: &StatePath) -> Result<Held<T>> {
        let Some(b) = &self.seam else {
            let guard = self.state.lock(path)?;
            // On a directory, `read` is the store's read under the lock.
            let current = self.read(path)?;
            return Ok(Held {
                current,
                at: At::Dir(OnDir {
                    state: self.state.clone(),
                    path: path.clone(),
                    _guard: guard,
                }),
            });
        };
        let key = self.key(path)?;
        // The lock is a key of its own, `{name}.lock` beside the value (on
        // a server a session lock, never a row): a backend whose writes take
        // the value's own lock, as a directory's does, would otherwise wait
        // on the lock this holder took.
        let lock = key
            .dir()
            .key(&format!("{}.lock", key.name()))
            .map_err(backend)?;
        let guard = b.lock(&lock).map_err(backend)?;
        let (current, version) = match b.read(&key).map_err(|e| seam_error(path, e))? {
            None => (None, None),
            Some(v) => match ReadOutcome::<T>::from_json(path, &v.value) {
                ReadOutcome::Value(t) => (Some(t), Some(v.version)),
                ReadOutcome::Missing => (None, None),
                ReadOutcome::Corrupt(c) => return Err(Error::Corrupt(c)),
                ReadOutcome::Unsupported(u) => return Err(chipset_store::Error::from(u).into()),
            },
        };
        Ok(Held {
            current,
            at: At::Server(Box::new(OnServer {
                seam: Arc::clone(b),
                path: path.as_path().to_owned(),
                key,
                version,
                _guard: guard,
            })),
        })
    }

    /// Appends records to a loop log (one write and one data sync on a
    /// directory; one statement on a server).
    pub(crate) fn append<T: Serialize>(&self, path: &StatePath, records: &[T]) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        match &self.seam {
            None => {
                let log: JsonLog = self.state.log(path)?;
                log.append_batch(records)?;
            }
            Some(b) => {
                let lines = records
                    .iter()
                    .map(|r| canonical(path, r))
                    .collect::<Result<Vec<_>>>()?;
                let refs: Vec<&[u8]> = lines.iter().map(Vec::as_slice).collect();
                b.append(&self.key(path)?, &refs).map_err(backend)?;
            }
        }
        Ok(())
    }

    /// Returns a loop folder on the seam: `loop/…` as the path is under
    /// the state root.
    fn dir(&self, path: &StatePath) -> Result<Dir> {
        let parts = self.segments(path);
        dir_of(&parts)
    }

    /// Returns a loop file's key on the seam: `loop/…/{name}`.
    fn key(&self, path: &StatePath) -> Result<Key> {
        let parts = self.segments(path);
        let (name, folder) = parts.split_last().expect("a loop file has a name");
        dir_of(folder)?.key(name).map_err(backend)
    }

    /// The segments of a loop path under the state root.
    fn segments<'a>(&self, path: &'a StatePath) -> Vec<&'a str> {
        path.as_path()
            .strip_prefix(self.state.root())
            .expect("loop paths are under the state root")
            .iter()
            .map(|s| s.to_str().expect("loop paths are UTF-8"))
            .collect()
    }
}

/// Returns the folder of these segments on the seam.
fn dir_of(parts: &[&str]) -> Result<Dir> {
    let (first, rest) = parts.split_first().expect("loop paths are under `loop/`");
    rest.iter()
        .try_fold(Dir::new(first).map_err(backend)?, |dir, part| {
            dir.join(part)
        })
        .map_err(backend)
}

/// The canonical JSON a loop file holds (sorted keys), as the store writes it.
fn canonical<T: Serialize>(path: &Path, value: &T) -> Result<Vec<u8>> {
    StateDir::to_canonical_json(value).map_err(|source| {
        Error::Store(chipset_store::Error::Serialize {
            path: path.to_owned(),
            source,
        })
    })
}

/// A server's failure as the loop's error.
fn backend(e: chipset_backend::Error) -> Error {
    Error::Backend(Box::new(e))
}

/// A server's failure reading `path`: an unreadable value is corrupt.
fn seam_error(path: &StatePath, e: chipset_backend::Error) -> Error {
    match e {
        chipset_backend::Error::Corrupt { reason, .. } => {
            Error::Corrupt(chipset_store::Corruption {
                path: path.as_path().to_owned(),
                reason,
            })
        }
        other => backend(other),
    }
}

/// A loop file held under its lock (see [`Files::lock`]): the value read
/// when the lock was taken, then each value written since.
#[derive(Debug)]
#[must_use = "the lock is released when the `Held` is dropped"]
pub(crate) struct Held<T> {
    /// The value as read when the lock was taken, or as last written.
    current: Option<T>,
    at: At,
}

/// Where a held loop file is, and its lock.
#[derive(Debug)]
enum At {
    Dir(OnDir),
    Server(Box<OnServer>),
}

/// A loop file held under the store's lock beside it.
#[derive(Debug)]
struct OnDir {
    state: StateDir,
    path: StatePath,
    _guard: chipset_store::LockGuard,
}

/// A loop value held under the server's lock, with the version to swap at.
#[derive(Debug)]
struct OnServer {
    seam: Arc<dyn Backend>,
    path: PathBuf,
    key: Key,
    /// The version of the value there; `None`: nothing is there.
    version: Option<Version>,
    _guard: LockGuard,
}

impl<T> Held<T> {
    /// Returns the value: as read when the lock was taken, or as last
    /// written; `None` when there was none (or it was taken).
    pub(crate) fn current(&self) -> Option<&T> {
        self.current.as_ref()
    }

    /// Takes the value out, leaving `None`; nothing changes until
    /// [`Held::write`].
    pub(crate) fn take(&mut self) -> Option<T> {
        self.current.take()
    }

    /// Removes the value, if any: on a directory the store's removal
    /// (unsynced: a file a power cut brings back is removed again by the
    /// next holder that finds it done), on a server a removal at the
    /// version held.
    pub(crate) fn remove(&mut self) -> Result<()> {
        match &mut self.at {
            At::Dir(d) => {
                let _ = d.state.remove_file(&d.path)?;
            }
            At::Server(s) => {
                if let Some(version) = s.version.take() {
                    s.seam.remove(&s.key, version).map_err(backend)?;
                }
            }
        }
        self.current = None;
        Ok(())
    }
}

impl<T: Serialize> Held<T> {
    /// Durably writes `value` and keeps it as the current value: on a
    /// directory the store's durable replace, on a server a create or a
    /// swap at the version held (a swap that finds its own bytes there is
    /// the retry of one that applied).
    pub(crate) fn write(&mut self, value: T) -> Result<()> {
        match &mut self.at {
            At::Dir(d) => d.state.write_json(&d.path, &value)?,
            At::Server(s) => {
                let bytes = canonical(&s.path, &value)?;
                let written = match s.version {
                    None => match s.seam.create(&s.key, &bytes).map_err(backend)? {
                        Created::New(v) => v,
                        Created::Existing(there) if there.value == bytes => there.version,
                        Created::Existing(there) => s
                            .seam
                            .replace(&s.key, there.version, &bytes)
                            .map_err(backend)?,
                    },
                    Some(expected) => match s.seam.replace(&s.key, expected, &bytes) {
                        Ok(v) => v,
                        Err(e) => match e.already_holds(&bytes) {
                            Some(v) => v,
                            None => return Err(backend(e)),
                        },
                    },
                };
                s.version = Some(written);
            }
        }
        self.current = Some(value);
        Ok(())
    }
}

/// Returns the task id a bead's mail travels under (the bead id; both are
/// validated by the same rule).
pub(crate) fn task_of(bead: &BeadId) -> Result<TaskId> {
    Ok(TaskId::new(bead.as_str())?)
}
