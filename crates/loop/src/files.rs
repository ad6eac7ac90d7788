//! Paths under `loop/` and the read and lock helpers every loop file goes
//! through (the lock is the store's [`Locked`]).

use std::path::{Path, PathBuf};

use chipset_hook::BeadId;
use chipset_store::{AgentId, JsonLog, Locked, ReadOutcome, StateDir, TaskId};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};

/// The witness's directory under `loop/`.
pub const WITNESS_DIR: &str = "witness";
/// The dispatcher's directory under `loop/`.
pub const DISPATCHER_DIR: &str = "dispatcher";
/// The round checkpoints' directory under `loop/`.
pub const ROUNDS_DIR: &str = "rounds";

/// The loop files of one state root.
#[derive(Debug, Clone)]
pub(crate) struct Files {
    pub(crate) state: StateDir,
    root: PathBuf,
}

impl Files {
    pub(crate) fn new(state: StateDir) -> Self {
        let root = state.channel_path(crate::LOOP_CHANNEL);
        Files { state, root }
    }

    pub(crate) fn incidents_dir(&self) -> PathBuf {
        self.root.join(WITNESS_DIR).join("incidents")
    }

    pub(crate) fn incident(&self, agent: &AgentId) -> PathBuf {
        self.incidents_dir().join(format!("{agent}.json"))
    }

    pub(crate) fn witness_log(&self) -> PathBuf {
        self.root.join(WITNESS_DIR).join("log.jsonl")
    }

    pub(crate) fn beads_dir(&self) -> PathBuf {
        self.root.join(DISPATCHER_DIR).join("beads")
    }

    pub(crate) fn bead(&self, bead: &BeadId) -> PathBuf {
        self.beads_dir().join(format!("{bead}.json"))
    }

    pub(crate) fn agents(&self) -> PathBuf {
        self.root.join(DISPATCHER_DIR).join("agents.json")
    }

    pub(crate) fn dispatcher_log(&self) -> PathBuf {
        self.root.join(DISPATCHER_DIR).join("log.jsonl")
    }

    pub(crate) fn rounds_dir(&self) -> PathBuf {
        self.root.join(ROUNDS_DIR)
    }

    pub(crate) fn round(&self, task: &TaskId) -> PathBuf {
        self.rounds_dir().join(format!("{task}.json"))
    }

    /// Reads a loop file: `None` when missing, [`Error::Corrupt`] when bad.
    pub(crate) fn read<T: DeserializeOwned>(&self, path: &Path) -> Result<Option<T>> {
        match self.state.read_json::<T>(path)? {
            ReadOutcome::Missing => Ok(None),
            ReadOutcome::Value(v) => Ok(Some(v)),
            ReadOutcome::Corrupt(c) => Err(Error::Corrupt(c)),
            ReadOutcome::Unsupported(u) => Err(chipset_store::Error::from(u).into()),
        }
    }

    /// Takes the file's lock and reads it ([`StateDir::lock_json`]), for a
    /// sequence of durable writes under one lock. A corrupt file is
    /// [`Error::Corrupt`], as [`Files::read`] reports it.
    pub(crate) fn lock<T: DeserializeOwned>(&self, path: &Path) -> Result<Locked<T>> {
        match self.state.lock_json(path) {
            Err(chipset_store::Error::Corrupt(c)) => Err(Error::Corrupt(c)),
            other => Ok(other?),
        }
    }

    /// Appends records to a loop log (one write and one data sync).
    pub(crate) fn append<T: Serialize>(&self, path: &Path, records: &[T]) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let log: JsonLog = self.state.log(path)?;
        log.append_batch(records)?;
        Ok(())
    }
}

/// Returns the task id a bead's mail travels under (the bead id; both are
/// validated by the same rule).
pub(crate) fn task_of(bead: &BeadId) -> Result<TaskId> {
    Ok(TaskId::new(bead.as_str())?)
}
