//! Test doubles for the I/O seam ([`IoBackend`](crate::IoBackend)), behind
//! the `testing` feature.
//!
//! - [`FaultIo`] fails the Nth call (optionally of given kinds) with a chosen
//!   errno, once or from then on (a disk that stays full).
//! - [`RecordIo`] performs every call for real and records it, then yields
//!   the states a power cut could have left ([`RecordIo::crash_states`]),
//!   following the ordering rules in the crate docs' Durability section.
//! - [`NoSyncIo`] makes every change for real but skips the syncs, for
//!   model tests that run thousands of operations and never cut the power.
//! - [`TunedIo`] makes the real calls with a chosen publish order, to
//!   compare orders on one disk.
//! - [`visible`] snapshots what a reader of a state root sees, so a test can
//!   assert that a failed operation changed nothing.
//!
//! They live in the store, behind a feature, rather than in
//! `chipset-testkit`, so that they move with the trait they implement and
//! every crate's tests (which already depend on the store) can enable them
//! with one feature flag.

mod fault;
mod nosync;
mod record;

pub use fault::{EEXIST, EIO, ENOENT, ENOSPC, EOPNOTSUPP, Fault, FaultIo};
pub use nosync::NoSyncIo;
pub use record::{CrashState, Entry, RecordIo};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Returns everything a reader sees under `root`: every path whose names do
/// not start with a dot (temps, locks and quarantine are the store's), with
/// a file's bytes or `None` for a directory.
///
/// # Panics
///
/// When `root` or anything under it cannot be listed or read: it is for tests.
pub fn visible(root: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("list a directory under the root") {
            let e = e.expect("read a directory entry");
            if e.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let p = e.path();
            let rel = p.strip_prefix(root).expect("under the root").to_owned();
            if e.file_type().expect("stat a directory entry").is_dir() {
                out.insert(rel, None);
                stack.push(p);
            } else {
                out.insert(rel, Some(std::fs::read(&p).expect("read a file")));
            }
        }
    }
    out
}
