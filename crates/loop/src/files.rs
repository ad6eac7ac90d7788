//! Paths under `loop/` and the read and lock helpers every loop file goes
//! through (the lock is the store's [`Locked`]).

use chipset_hook::BeadId;
use chipset_store::{AgentId, JsonLog, Locked, ReadOutcome, StateDir, StatePath, TaskId};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};

/// The witness's directory under `loop/`.
pub(crate) const WITNESS_DIR: &str = "witness";
/// The dispatcher's directory under `loop/`.
pub(crate) const DISPATCHER_DIR: &str = "dispatcher";
/// The round checkpoints' directory under `loop/`.
pub(crate) const ROUNDS_DIR: &str = "rounds";

/// The loop files of one state root.
#[derive(Debug, Clone)]
pub(crate) struct Files {
    pub(crate) state: StateDir,
    root: StatePath,
}

impl Files {
    pub(crate) fn new(state: StateDir) -> Self {
        let root = state.channel(crate::LOOP_CHANNEL);
        Files { state, root }
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

    pub(crate) fn agents(&self) -> StatePath {
        self.root
            .join_static(DISPATCHER_DIR)
            .join_static("agents.json")
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

    /// Reads a loop file: `None` when missing, [`Error::Corrupt`] when bad.
    pub(crate) fn read<T: DeserializeOwned>(&self, path: &StatePath) -> Result<Option<T>> {
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
    pub(crate) fn lock<T: DeserializeOwned>(&self, path: &StatePath) -> Result<Locked<T>> {
        match self.state.lock_json(path) {
            Err(chipset_store::Error::Corrupt(c)) => Err(Error::Corrupt(c)),
            other => Ok(other?),
        }
    }

    /// Appends records to a loop log (one write and one data sync).
    pub(crate) fn append<T: Serialize>(&self, path: &StatePath, records: &[T]) -> Result<()> {
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
