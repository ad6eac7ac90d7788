//! A batch of 16 files or more, under `WriteBackThenDir` on a backend that
//! allows it, makes and writes its temps on two threads: the outcomes
//! still come in item order, each file holds its own item's bytes, and a
//! write failing midway publishes nothing, leaves no temp, and reports
//! the first failing item in item order.

use std::collections::HashSet;
use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use chipset_store::{Created, Error, IoBackend, MaybeCommitted, RealIo, StatePath, SyncOrder};
use chipset_testkit::{EIO, ENOSPC};

use crate::names;
use crate::seam::open;

/// The real calls under `WriteBackThenDir`, with concurrent batch writes
/// allowed. It records which threads wrote, fails the writes of the
/// bytes in `fail` (with their errno), and, with `named`, makes no file
/// without a name, so that batches write named temps.
#[derive(Debug, Default)]
struct SplitIo {
    named: bool,
    /// Every write's first call waits (5 s at most) until two threads
    /// have written: a batch run on one thread fails the test in 5 s
    /// instead of passing by luck of the scheduling.
    meet: bool,
    fail: Vec<(Vec<u8>, i32)>,
    writers: Mutex<HashSet<ThreadId>>,
}

impl SplitIo {
    fn writers(&self) -> usize {
        self.writers.lock().unwrap().len()
    }
}

impl IoBackend for SplitIo {
    fn create_new(&self, path: &Path, append: bool) -> io::Result<File> {
        RealIo.create_new(path, append)
    }
    fn open_append(&self, path: &Path) -> io::Result<File> {
        RealIo.open_append(path)
    }
    fn write_all(&self, file: &File, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let first = self
            .writers
            .lock()
            .unwrap()
            .insert(std::thread::current().id());
        let start = Instant::now();
        while first && self.meet && self.writers() < 2 && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        if let Some((_, errno)) = self.fail.iter().find(|(b, _)| b == bytes) {
            return Err(io::Error::from_raw_os_error(*errno));
        }
        RealIo.write_all(file, path, bytes)
    }
    fn sync_all(&self, file: &File, path: &Path) -> io::Result<()> {
        RealIo.sync_all(file, path)
    }
    fn sync_data(&self, file: &File, path: &Path) -> io::Result<()> {
        RealIo.sync_data(file, path)
    }
    fn write_back(&self, file: &File, path: &Path) -> io::Result<()> {
        RealIo.write_back(file, path)
    }
    fn start_write_back(&self, file: &File, path: &Path) {
        RealIo.start_write_back(file, path);
    }
    fn concurrent_batch_writes(&self) -> bool {
        true
    }
    fn sync_order(&self, _root: &Path) -> SyncOrder {
        SyncOrder::WriteBackThenDir
    }
    fn set_len(&self, file: &File, path: &Path, len: u64) -> io::Result<()> {
        RealIo.set_len(file, path, len)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        RealIo.sync_dir(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        RealIo.rename(from, to)
    }
    fn rename_noreplace(&self, from: &Path, to: &Path) -> io::Result<()> {
        RealIo.rename_noreplace(from, to)
    }
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        RealIo.hard_link(from, to)
    }
    fn create_unnamed(&self, dir: &Path) -> io::Result<Option<File>> {
        if self.named {
            return Ok(None);
        }
        RealIo.create_unnamed(dir)
    }
    fn link_unnamed(&self, file: &File, to: &Path) -> io::Result<()> {
        RealIo.link_unnamed(file, to)
    }
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        RealIo.create_dir(path)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        RealIo.remove_file(path)
    }
    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        RealIo.remove_dir(path)
    }
}

/// How many threads a large batch writes on here: two, unless this
/// thread may run on one processor only (nothing to gain from a second).
/// Counted as the store counts it, from the affinity mask (a CPU quota,
/// which `available_parallelism` also counts, leaves the helper running).
fn threads() -> usize {
    rustix::thread::sched_getaffinity(None).map_or(1, |set| set.count().min(2) as usize)
}

fn bytes(i: usize) -> Vec<u8> {
    format!("{{\"n\":{i}}}").into_bytes()
}

fn batch(dir: &StatePath, count: usize) -> Vec<(StatePath, Vec<u8>)> {
    (0..count)
        .map(|i| (dir.join(format!("{i:02}.json")).unwrap(), bytes(i)))
        .collect()
}

fn all_names(count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{i:02}.json")).collect()
}

/// 40 files on two threads, two of whose names are taken: each outcome
/// and stat is its item's, in item order, and each new file holds its
/// own item's bytes; no temp is left.
#[test]
fn a_large_batch_writes_on_two_threads_and_reports_in_item_order() {
    for named in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let io = Arc::new(SplitIo {
            named,
            meet: threads() == 2,
            ..SplitIo::default()
        });
        let state = open(tmp.path(), io.clone());
        let dir = state.root_path().join_static("inbox");
        state.ensure_dir(&dir).unwrap();
        let items = batch(&dir, 40);
        for taken in [5, 20] {
            std::fs::write(items[taken].0.as_path(), b"old").unwrap();
        }
        let outcomes = state.create_new_batch_stat(&items).unwrap();
        assert_eq!(
            io.writers(),
            threads(),
            "named {named}: the writing threads"
        );
        for (i, (created, stat)) in outcomes.iter().enumerate() {
            let path = items[i].0.as_path();
            if i == 5 || i == 20 {
                assert_eq!(*created, Created::AlreadyExists, "named {named}: {i}");
                assert!(stat.is_none(), "named {named}: {i}");
                assert_eq!(std::fs::read(path).unwrap(), b"old");
            } else {
                assert_eq!(*created, Created::New, "named {named}: {i}");
                let len = stat.as_ref().expect("a new file's stat").len;
                assert_eq!(len, bytes(i).len() as u64, "named {named}: {i}");
                assert_eq!(std::fs::read(path).unwrap(), bytes(i), "named {named}");
            }
        }
        assert_eq!(outcomes.len(), 40);
        assert_eq!(names(dir.as_path()), all_names(40), "named {named}");
    }
}

/// The writes of items 17 (ENOSPC) and 31 (EIO) fail while two threads
/// write: the batch reports item 17's error, as one thread would, as a
/// plain error; nothing is published and no temp is left; the retry
/// publishes all 40.
#[test]
fn a_write_failing_midway_on_two_threads_publishes_nothing() {
    for named in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let io = Arc::new(SplitIo {
            named,
            meet: threads() == 2,
            fail: vec![(bytes(17), ENOSPC), (bytes(31), EIO)],
            ..SplitIo::default()
        });
        let state = open(tmp.path(), io.clone());
        let dir = state.root_path().join_static("inbox");
        state.ensure_dir(&dir).unwrap();
        let items = batch(&dir, 40);
        let err = state.create_new_batch(&items).unwrap_err();
        assert_eq!(
            io.writers(),
            threads(),
            "named {named}: the writing threads"
        );
        assert!(!err.is_outcome_unknown(), "named {named}: {err}");
        match &err {
            Error::Io { path, source, .. } => {
                assert_eq!(source.raw_os_error(), Some(ENOSPC), "named {named}");
                let name = path.file_name().unwrap().to_str().unwrap();
                assert!(name.contains("17.json"), "named {named}: {err}");
            }
            other => panic!("named {named}: {other:?}"),
        }
        assert!(
            names(dir.as_path()).is_empty(),
            "named {named}: {:?}",
            names(dir.as_path())
        );
        // The same batch again, on a disk that has room.
        let io = Arc::new(SplitIo {
            named,
            ..SplitIo::default()
        });
        let state = open(tmp.path(), io);
        let outcomes = state.create_new_batch(&items).unwrap();
        assert_eq!(outcomes, [Created::New; 40], "named {named}");
        assert_eq!(names(dir.as_path()), all_names(40), "named {named}");
    }
}

/// Below 16 files a batch writes on the caller's thread alone.
#[test]
fn a_small_batch_writes_on_one_thread() {
    let tmp = tempfile::tempdir().unwrap();
    let io = Arc::new(SplitIo::default());
    let state = open(tmp.path(), io.clone());
    let dir = state.root_path().join_static("inbox");
    state.ensure_dir(&dir).unwrap();
    let outcomes = state.create_new_batch(&batch(&dir, 15)).unwrap();
    assert_eq!(outcomes, [Created::New; 15]);
    assert_eq!(io.writers(), 1);
    assert_eq!(names(dir.as_path()), all_names(15));
}
