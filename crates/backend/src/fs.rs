//! The directory backend: chipset-store's primitives, writing exactly the
//! files the channels write today.

use std::path::Path;
use std::time::Duration;

use chipset_store::{
    CorruptReason, EscapeAlphabet, ReadOutcome, StateDir, StatePath, Timestamp, WatchConfig,
    WatchTarget, WatchWake, Watcher,
};

use crate::error::{Error, Result};
use crate::key::{Dir, Key};
use crate::seam::{
    Backend, Created, LockGuard, LogPos, LogRead, Version, Versioned, Wait, Wake, canonical_record,
    check_size,
};

/// The state on a directory: every key is the file
/// `{root}/{channel}/{folders…}/{name}`, written with chipset-store's
/// durable primitives, byte for byte what the channels write.
///
/// | operation | on disk |
/// |---|---|
/// | [`read`](Backend::read) | one read of the file (capped at 1 MiB) |
/// | [`create`](Backend::create) | [`StateDir::create_new`]: synced temp, no-replace rename, directory sync |
/// | [`replace`](Backend::replace), [`put`](Backend::put), [`remove`](Backend::remove) | under the file's lock (`.{name}.lock`): read, compare, [`StateDir::write_bytes`] or [`StateDir::remove_file`] |
/// | [`move_new`](Backend::move_new) | under the source's lock: read, compare, [`StateDir::move_noclobber`] |
/// | [`append`](Backend::append) | [`JsonLog::append_batch`](chipset_store::JsonLog::append_batch): one write of whole lines, then a data sync |
/// | [`lock`](Backend::lock) | the file's lock, released by the kernel when its holder dies |
/// | [`watch`](Backend::watch) | [`Watcher`]: inotify, with the periodic rescan as the safety net |
#[derive(Debug, Clone)]
pub struct FsBackend {
    state: StateDir,
}

impl FsBackend {
    /// Returns the backend on `state`.
    pub fn new(state: StateDir) -> Self {
        FsBackend { state }
    }

    /// Opens (creating if needed) the state root at `root`.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the root cannot be created or resolved.
    pub fn open(root: impl AsRef<Path>) -> Result<Self> {
        let root = root.as_ref();
        StateDir::open(root)
            .map(Self::new)
            .map_err(|e| Error::store("open state root", root.display(), e))
    }

    /// Returns the state root.
    pub fn state(&self) -> &StateDir {
        &self.state
    }

    fn dir_path(&self, dir: &Dir) -> Result<StatePath> {
        let mut path = self.state.root_path();
        for segment in dir.segments() {
            path = path
                .join(segment)
                .map_err(|e| Error::store("name", dir, e))?;
        }
        Ok(path)
    }

    fn path(&self, key: &Key) -> Result<StatePath> {
        self.dir_path(key.dir())?
            .join(key.name())
            .map_err(|e| Error::store("name", key, e))
    }

    fn read_at(&self, key: &Key, path: &StatePath) -> Result<Option<Versioned>> {
        match self.state.read_bytes(path) {
            Ok(ReadOutcome::Missing) => Ok(None),
            Ok(ReadOutcome::Value(value)) => Ok(Some(Versioned {
                version: digest(&value),
                value,
            })),
            Ok(ReadOutcome::Corrupt(c)) => Err(Error::Corrupt {
                key: key.to_string(),
                reason: c.reason,
            }),
            // A byte read never judges a value; kept for completeness.
            Ok(ReadOutcome::Unsupported(u)) => Err(Error::Corrupt {
                key: key.to_string(),
                reason: CorruptReason::WrongShape(u.to_string()),
            }),
            Err(e) => Err(Error::store("read", key, e)),
        }
    }

    fn locked(&self, key: &Key, path: &StatePath) -> Result<chipset_store::LockGuard> {
        self.state
            .lock(path)
            .map_err(|e| Error::store("lock", key, e))
    }
}

/// A file's version: the digest of its bytes (see [`Version`]).
fn digest(bytes: &[u8]) -> Version {
    Version(EscapeAlphabet::fnv1a_64(bytes.iter().copied()))
}

impl Backend for FsBackend {
    fn now(&self) -> Result<Timestamp> {
        Ok(self.state.now())
    }

    fn read(&self, key: &Key) -> Result<Option<Versioned>> {
        let path = self.path(key)?;
        self.read_at(key, &path)
    }

    fn create(&self, key: &Key, value: &[u8]) -> Result<Created> {
        check_size(key, value.len())?;
        let path = self.path(key)?;
        loop {
            match self.state.create_new(&path, value) {
                Ok(()) => return Ok(Created::New(digest(value))),
                Err(chipset_store::Error::AlreadyExists { .. }) => {
                    // Removed between the two steps: try again.
                    if let Some(now) = self.read_at(key, &path)? {
                        return Ok(Created::Existing(now));
                    }
                }
                Err(e) => return Err(Error::store("create", key, e)),
            }
        }
    }

    fn replace(&self, key: &Key, expected: Version, value: &[u8]) -> Result<Version> {
        check_size(key, value.len())?;
        let path = self.path(key)?;
        let _guard = self.locked(key, &path)?;
        let Some(now) = self.read_at(key, &path)? else {
            return Err(Error::NotFound {
                key: key.to_string(),
            });
        };
        if now.version != expected {
            return Err(Error::Conflict {
                key: key.to_string(),
                current: Some(now),
            });
        }
        self.state
            .write_bytes(&path, value)
            .map_err(|e| Error::store("replace", key, e))?;
        Ok(digest(value))
    }

    fn put(&self, key: &Key, value: &[u8]) -> Result<Version> {
        check_size(key, value.len())?;
        let path = self.path(key)?;
        let _guard = self.locked(key, &path)?;
        self.state
            .write_bytes(&path, value)
            .map_err(|e| Error::store("put", key, e))?;
        Ok(digest(value))
    }

    fn remove(&self, key: &Key, expected: Version) -> Result<()> {
        let path = self.path(key)?;
        let _guard = self.locked(key, &path)?;
        match self.read_at(key, &path)? {
            None => Ok(()),
            Some(now) if now.version == expected => self
                .state
                .remove_file(&path)
                .map(drop)
                .map_err(|e| Error::store("remove", key, e)),
            Some(now) => Err(Error::Conflict {
                key: key.to_string(),
                current: Some(now),
            }),
        }
    }

    fn move_new(&self, from: &Key, expected: Version, to: &Key) -> Result<Version> {
        let from_path = self.path(from)?;
        let to_path = self.path(to)?;
        let _guard = self.locked(from, &from_path)?;
        let Some(now) = self.read_at(from, &from_path)? else {
            return Err(Error::NotFound {
                key: from.to_string(),
            });
        };
        if now.version != expected {
            return Err(Error::Conflict {
                key: from.to_string(),
                current: Some(now),
            });
        }
        match self.state.move_noclobber(&from_path, &to_path) {
            Ok(()) => Ok(now.version),
            Err(chipset_store::Error::AlreadyExists { .. }) => Err(Error::Exists {
                key: to.to_string(),
                current: self.read_at(to, &to_path)?,
            }),
            Err(chipset_store::Error::NotFound { .. }) => Err(Error::NotFound {
                key: from.to_string(),
            }),
            Err(e) => Err(Error::store("move", from, e)),
        }
    }

    fn list(&self, dir: &Dir) -> Result<Vec<String>> {
        let path = self.dir_path(dir)?;
        let mut names = self
            .state
            .list(&path)
            .map_err(|e| Error::store("list", dir, e))?;
        let dirs = self
            .state
            .list_dirs(&path)
            .map_err(|e| Error::store("list", dir, e))?;
        names.retain(|n| dirs.binary_search(n).is_err());
        Ok(names)
    }

    fn append(&self, log: &Key, records: &[&[u8]]) -> Result<()> {
        let values = records
            .iter()
            .map(|r| {
                let canonical = canonical_record(log, r)?;
                serde_json::from_slice::<serde_json::Value>(&canonical).map_err(|e| {
                    Error::BadRecord {
                        key: log.to_string(),
                        why: e.to_string(),
                    }
                })
            })
            .collect::<Result<Vec<_>>>()?;
        if values.is_empty() {
            return Ok(());
        }
        let path = self.path(log)?;
        let file = self
            .state
            .log(&path)
            .map_err(|e| Error::store("open log", log, e))?;
        file.append_batch(values.iter())
            .map(drop)
            .map_err(|e| Error::store("append to", log, e))
    }

    fn read_log(&self, log: &Key, from: LogPos) -> Result<LogRead> {
        let path = self.path(log)?;
        let file = self
            .state
            .log_reader(&path)
            .map_err(|e| Error::store("open log", log, e))?;
        let contents = file
            .read_from::<serde_json::Value>(from.0)
            .map_err(|e| Error::store("read log", log, e))?;
        if let Some(bad) = contents.bad_lines.first() {
            tracing::warn!(log = %log, offset = bad.offset, reason = %bad.reason, "bad line in a log");
            return Err(Error::Corrupt {
                key: log.to_string(),
                reason: bad.reason.clone(),
            });
        }
        let records = contents
            .records
            .iter()
            .map(|v| serde_json::to_vec(v).expect("a JSON value serializes"))
            .collect();
        Ok(LogRead {
            records,
            next: LogPos(contents.end_offset),
        })
    }

    fn lock(&self, key: &Key) -> Result<LockGuard> {
        let path = self.path(key)?;
        let guard = self.locked(key, &path)?;
        Ok(LockGuard {
            _inner: Box::new(guard),
        })
    }

    fn watch(&self, dirs: &[Dir], rescan: Duration) -> Result<Box<dyn Wait>> {
        let targets = dirs
            .iter()
            .map(|d| self.dir_path(d).map(WatchTarget::Dir))
            .collect::<Result<Vec<_>>>()?;
        let watcher = Watcher::new(
            &self.state,
            targets,
            WatchConfig {
                notify: true,
                rescan_interval: rescan,
            },
        )
        .map_err(|e| {
            Error::store(
                "watch",
                dirs.first().map_or(String::new(), |d| d.to_string()),
                e,
            )
        })?;
        Ok(Box::new(FsWait { watcher }))
    }

    fn list_dirs(&self, dir: &Dir) -> Result<Vec<String>> {
        let path = self.dir_path(dir)?;
        self.state
            .list_dirs(&path)
            .map_err(|e| Error::store("list folders of", dir, e))
    }

    fn local_state(&self) -> Option<&StateDir> {
        Some(&self.state)
    }
}

#[derive(Debug)]
struct FsWait {
    watcher: Watcher,
}

impl Wait for FsWait {
    fn wait(&mut self, timeout: Duration) -> Result<Wake> {
        Ok(match self.watcher.wait(timeout) {
            WatchWake::Changed(_) => Wake::Changed,
            WatchWake::Rescan => Wake::Rescan,
            WatchWake::TimedOut => Wake::TimedOut,
        })
    }
}
