//! A backend that skips every sync, for model tests that need speed, not durability.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chipset_store::IoBackend;

/// A backend that makes every change for real but skips the syncs
/// (`fsync`, `fdatasync` and directory syncs), counting them instead;
/// every other call is [`IoBackend`]'s default.
///
/// What a running process reads is the same as with
/// [`RealIo`](chipset_store::RealIo): a sync only changes what survives a
/// power cut. So model and property tests, which compare the store with an
/// in-memory model over thousands of operations and never cut the power,
/// run on it in a fraction of the time. Crash, power-cut and sync-counting
/// tests keep [`RealIo`](chipset_store::RealIo) or
/// [`RecordIo`](super::RecordIo): on this backend nothing is durable.
#[derive(Debug, Default)]
pub struct NoSyncIo {
    skipped: AtomicU64,
}

impl NoSyncIo {
    /// Returns the backend, shared, ready for
    /// [`StateOptions::io`](chipset_store::StateOptions).
    pub fn shared() -> Arc<Self> {
        Arc::new(NoSyncIo::default())
    }

    /// Returns how many syncs were skipped.
    pub fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }

    fn skip(&self) -> io::Result<()> {
        self.skipped.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

impl IoBackend for NoSyncIo {
    fn sync_all(&self, _file: &File, _path: &Path) -> io::Result<()> {
        self.skip()
    }

    fn sync_data(&self, _file: &File, _path: &Path) -> io::Result<()> {
        self.skip()
    }

    fn sync_dir(&self, _dir: &Path) -> io::Result<()> {
        self.skip()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chipset_store::{StateDir, StateOptions};

    /// A write through the store is readable at once, and its syncs were skipped.
    #[test]
    fn writes_are_real_and_syncs_are_skipped() {
        let tmp = tempfile::tempdir().unwrap();
        let io = NoSyncIo::shared();
        let state = StateDir::open_with(
            tmp.path().join("state"),
            StateOptions {
                io: io.clone(),
                ..StateOptions::default()
            },
        )
        .unwrap();
        let path = state.root_path().join_static("a.json");
        state
            .write_json(&path, &serde_json::json!({"a": 1}))
            .unwrap();
        let read = state.read_json::<serde_json::Value>(&path).unwrap();
        assert_eq!(read.value().unwrap()["a"], 1);
        assert!(
            io.skipped() >= 2,
            "file and directory syncs skipped: {}",
            io.skipped()
        );
    }
}
