//! A nameless scratch file for working data that outgrows memory.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A scratch file from [`StateDir::scratch_file`](crate::StateDir::scratch_file):
/// no name, never synced, gone when dropped (crash or not). Reads and writes
/// take an offset, so one file holds many independent runs; errors name the
/// directory the file lives in.
#[derive(Debug)]
pub struct ScratchFile {
    file: File,
    dir: PathBuf,
}

impl ScratchFile {
    pub(crate) fn new(file: File, dir: &Path) -> Self {
        ScratchFile {
            file,
            dir: dir.to_owned(),
        }
    }

    /// Writes all of `buf` at `offset`.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] (`write scratch file`) when the write fails (a full
    /// disk, say).
    pub fn write_all_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.file
            .write_all_at(buf, offset)
            .map_err(|e| Error::io("write scratch file", &self.dir, e))
    }

    /// Fills `buf` from `offset`.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] (`read scratch file`) when the read fails or the file
    /// ends first.
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| Error::io("read scratch file", &self.dir, e))
    }
}
