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

use chipset_store::{Classify, Created, Error, IoBackend, RealIo, StatePath, SyncOrder};
use chipset_testkit::{EIO, ENOSPC};

use crate::names;
use crate::seam::open;

/// The real calls under `WriteBackThenDir`, with [`RealIo`]'s
/// write-backs, files with no name and concurrent batch writes turned on.
/// It records which threads wrote, fails the writes of the bytes in
/// `fail` (with their errno), and, with `named`, makes no file without a
/// name, so that batches write named temps.
#[derive(Debug, Default)]
struct SplitIo {
    named: bool,
    /// Every write's first call waits (5 s at most) until two threads
    /// have written: a batch run on one thread fails the test in 5 s
    /// instead of passing by luck of the scheduling.
    meet: bool,
    fail: Vec<(Vec<u8>, i32)>,
    /// The write of the first bytes waits (5 s at most) until the write
    /// of the second has failed: a later item fails first in time.
    hold: Option<(Vec<u8>, Vec<u8>)>,
    writers: Mutex<HashSet<ThreadId>>,
    /// The bytes whose writes failed, in the order they failed.
    failed: Mutex<Vec<Vec<u8>>>,
}

/// Waits until `done` holds, 5 s at most.
fn wait_until(done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(1));
    }
}

impl SplitIo {
    fn writers(&self) -> usize {
        self.writers.lock().unwrap().len()
    }
}

impl IoBackend for SplitIo {
    fn write_all(&self, file: &File, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let first = self
            .writers
            .lock()
            .unwrap()
            .insert(std::thread::current().id());
        if first && self.meet {
            wait_until(|| self.writers() >= 2);
        }
        if let Some((held, until)) = &self.hold
            && held == bytes
        {
            wait_until(|| self.failed.lock().unwrap().contains(until));
        }
        if let Some((_, errno)) = self.fail.iter().find(|(b, _)| b == bytes) {
            self.failed.lock().unwrap().push(bytes.to_vec());
            return Err(io::Error::from_raw_os_error(*errno));
        }
        RealIo.write_all(file, path, bytes)
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
    fn create_unnamed(&self, dir: &Path) -> io::Result<Option<File>> {
        if self.named {
            return Ok(None);
        }
        RealIo.create_unnamed(dir)
    }
    fn link_unnamed(&self, file: &File, to: &Path) -> io::Result<()> {
        RealIo.link_unnamed(file, to)
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

/// Item 17's write (ENOSPC) is held until item 18's (EIO) has failed, on
/// the other thread: the error is still item 17's, the first in item
/// order, not the first in time; nothing is published, no temp is left.
#[test]
fn the_first_failing_item_in_item_order_decides_not_the_first_in_time() {
    for named in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let io = Arc::new(SplitIo {
            named,
            meet: threads() == 2,
            fail: vec![(bytes(17), ENOSPC), (bytes(18), EIO)],
            hold: Some((bytes(17), bytes(18))),
            ..SplitIo::default()
        });
        let state = open(tmp.path(), io.clone());
        let dir = state.root_path().join_static("inbox");
        state.ensure_dir(&dir).unwrap();
        let err = state.create_new_batch(&batch(&dir, 40)).unwrap_err();
        if threads() == 2 {
            // Two threads: item 18 failed first, item 17 after it.
            assert_eq!(
                *io.failed.lock().unwrap(),
                [bytes(18), bytes(17)],
                "named {named}"
            );
        }
        match &err {
            Error::Io { path, source, .. } => {
                assert_eq!(source.raw_os_error(), Some(ENOSPC), "named {named}: {err}");
                let name = path.file_name().unwrap().to_str().unwrap();
                assert!(name.contains("17.json"), "named {named}: {err}");
            }
            other => panic!("named {named}: {other:?}"),
        }
        assert!(names(dir.as_path()).is_empty(), "named {named}");
    }
}

/// Two batches of 40 at once in one process share its one helper: both
/// publish every file with its own bytes, and leave no temp.
#[test]
fn two_batches_at_once_share_the_helper_and_both_publish_everything() {
    let tmp = tempfile::tempdir().unwrap();
    let io = Arc::new(SplitIo::default());
    let state = open(tmp.path(), io.clone());
    let dirs: Vec<StatePath> = ["a", "b"]
        .iter()
        .map(|d| state.root_path().join(d).unwrap())
        .collect();
    std::thread::scope(|scope| {
        for dir in &dirs {
            let state = &state;
            scope.spawn(move || {
                let outcomes = state.create_new_batch(&batch(dir, 40)).unwrap();
                assert_eq!(outcomes, [Created::New; 40]);
            });
        }
    });
    for dir in &dirs {
        assert_eq!(names(dir.as_path()), all_names(40));
        for i in 0..40 {
            let path = dir.as_path().join(format!("{i:02}.json"));
            assert_eq!(std::fs::read(path).unwrap(), bytes(i));
        }
    }
}
