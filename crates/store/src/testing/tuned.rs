//! The real system calls with a chosen publish order.

use std::fs::File;
use std::io;
use std::path::Path;

use crate::backend::{IoBackend, RealIo, SyncOrder};

/// The real system calls ([`RealIo`]) with the publish order forced to
/// `order`: to compare
/// orders on one disk in one run (the mail `peer` bench), or to make a
/// process use an order its filesystem would not be given. Forcing
/// [`SyncOrder::WriteBackThenDir`] where the journal does not commit in
/// order gives up the store's guarantees.
#[derive(Debug)]
pub struct TunedIo {
    /// The order [`IoBackend::sync_order`] answers.
    pub order: SyncOrder,
}

impl IoBackend for TunedIo {
    fn create_new(&self, path: &Path, append: bool) -> io::Result<File> {
        RealIo.create_new(path, append)
    }
    fn open_append(&self, path: &Path) -> io::Result<File> {
        RealIo.open_append(path)
    }
    fn write_all(&self, file: &File, path: &Path, bytes: &[u8]) -> io::Result<()> {
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
    fn sync_order(&self, _root: &Path) -> SyncOrder {
        self.order
    }
    fn sync_fs(&self, file: &File, path: &Path) -> io::Result<()> {
        RealIo.sync_fs(file, path)
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
