//! One side of a migration: a directory or a server, through the seam.

use std::sync::Arc;

use chipset_backend::{Backend, Dir, FsBackend, Key, LogPos};
use chipset_store::StateDir;

use super::{End, MigrateError};
use crate::root::Root;
use crate::server::{Server, ServerOptions};

/// An open side.
#[derive(Debug)]
pub(crate) struct Side {
    pub(crate) end: End,
    pub(crate) backend: Arc<dyn Backend>,
    /// The directory, or on a server its local folder (for the channel
    /// handles that want a root).
    pub(crate) state: StateDir,
    server: bool,
}

impl Side {
    /// Opens `root`: a source directory must exist; a target directory is
    /// created.
    pub(crate) fn open(
        root: &Root,
        options: &ServerOptions,
        target: bool,
    ) -> Result<Side, MigrateError> {
        let end = if target { End::Target } else { End::Source };
        let open_error = |e: crate::Error| MigrateError::Open {
            end,
            root: root.to_string(),
            source: Box::new(e),
        };
        match root {
            Root::Dir(path) => {
                if !target
                    && !StateDir::stat_outside(path)
                        .map_err(|e| open_error(e.into()))?
                        .is_some_and(|s| s.is_dir())
                {
                    return Err(MigrateError::NoSource {
                        root: path.display().to_string(),
                    });
                }
                let state = StateDir::open(path).map_err(|e| open_error(e.into()))?;
                Ok(Side {
                    end,
                    backend: Arc::new(FsBackend::new(state.clone())),
                    state,
                    server: false,
                })
            }
            Root::Server(url) => {
                let server = Server::open(url, options).map_err(open_error)?;
                // The local folder the door uses for this server: the
                // channel handles want a root for their clocks.
                let state = StateDir::open(server.local_folder(options))
                    .map_err(|e| open_error(e.into()))?;
                Ok(Side {
                    end,
                    backend: server.backend(),
                    state,
                    server: true,
                })
            }
        }
    }

    pub(crate) fn is_server(&self) -> bool {
        self.server
    }

    /// Wraps a seam error as this side's.
    pub(crate) fn err(&self, e: chipset_backend::Error) -> MigrateError {
        match self.end {
            End::Source => MigrateError::source(e),
            End::Target => MigrateError::target(e),
        }
    }

    /// The top-level folders of a directory (dot-names are local by
    /// nature); nothing for a server, whose rows are read per channel.
    pub(crate) fn top_folders(&self) -> Result<Vec<String>, MigrateError> {
        if self.server {
            return Ok(Vec::new());
        }
        self.state
            .list_dirs(&self.state.root_path())
            .map_err(|e| MigrateError::Open {
                end: self.end,
                root: self.state.root().display().to_string(),
                source: Box::new(e.into()),
            })
    }

    /// The folders directly below `dir`.
    pub(crate) fn dirs(&self, dir: &Dir) -> Result<Vec<String>, MigrateError> {
        self.backend.list_dirs(dir).map_err(|e| self.err(e))
    }

    /// The values directly in `dir`, in name order, without the logs
    /// (`*.jsonl`, read with [`Side::log`]) and with their names.
    pub(crate) fn values(&self, dir: &Dir) -> Result<Vec<(String, Vec<u8>)>, MigrateError> {
        if self.server {
            // One statement; a server's logs are not values.
            return Ok(self
                .backend
                .read_all(dir)
                .map_err(|e| self.err(e))?
                .into_iter()
                .map(|(name, v)| (name, v.value))
                .collect());
        }
        let mut out = Vec::new();
        for name in self.backend.list(dir).map_err(|e| self.err(e))? {
            if is_log(&name) {
                continue;
            }
            let key = dir.key(&name).map_err(|e| self.err(e))?;
            if let Some(v) = self.backend.read(&key).map_err(|e| self.err(e))? {
                out.push((name, v.value));
            }
        }
        Ok(out)
    }

    /// The logs directly in `dir` on a directory (`*.jsonl` files); none on
    /// a server, whose logs each channel names.
    pub(crate) fn log_names(&self, dir: &Dir) -> Result<Vec<String>, MigrateError> {
        if self.server {
            return Ok(Vec::new());
        }
        let mut names = self.backend.list(dir).map_err(|e| self.err(e))?;
        names.retain(|n| is_log(n));
        Ok(names)
    }

    /// The records of the log `key`, in order (none when it is absent).
    pub(crate) fn log(&self, key: &Key) -> Result<Vec<Vec<u8>>, MigrateError> {
        Ok(self
            .backend
            .read_log(key, LogPos::START)
            .map_err(|e| self.err(e))?
            .records)
    }
}

/// Whether `name` is a log's.
pub(crate) fn is_log(name: &str) -> bool {
    name.ends_with(".jsonl")
}
