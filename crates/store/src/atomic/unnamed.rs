//! New files published from a file with no name (`O_TMPFILE`): its bytes
//! are written and made durable while no directory lists it, and one
//! `linkat` gives it its name, never replacing one (the commit point):
//! `AT_EMPTY_PATH` where the kernel allows it, else the descriptor's
//! `/proc/self/fd` link ([`RealIo`](crate::RealIo)).
//!
//! Against a named temp file renamed into place, the directory changes
//! once per file, not three times (the temp's entry made, then moved and
//! removed), and a step that fails, or a crash, leaves nothing to remove:
//! the kernel frees a file that never got a name.
//!
//! Only under [`SyncOrder::WriteBackThenDir`] (a journal): the `linkat`
//! sets the file's link count and adds its name in one journal
//! transaction, which the directory's `fsync` commits, after the
//! transactions that allocated its data. Without a journal the directory's
//! sync can make the name durable before the inode's link count, a name
//! `e2fsck` must repair; there, and where no such file can be made
//! ([`IoBackend::create_unnamed`] answers `None`: a filesystem without
//! `O_TMPFILE`, no `/proc`, or a test backend that models named files
//! only), the store writes a named temp file and renames it.
//!
//! [`Temp`] is a new file's bytes before their publish, either way: the
//! one course that a single new file and a batch both take.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use super::{create_temp, parent, publish_temp};
use crate::backend::{IoBackend, SyncOrder};
use crate::error::{Error, Result};

/// A file with no name in `path`'s directory, for `path`'s bytes; `None`
/// where none can be made there, or `order` is not
/// [`SyncOrder::WriteBackThenDir`].
fn create(io: &dyn IoBackend, order: SyncOrder, path: &Path) -> Result<Option<File>> {
    if order != SyncOrder::WriteBackThenDir {
        return Ok(None);
    }
    let dir = parent(path);
    io.create_unnamed(dir)
        .map_err(|e| Error::io("create unnamed file", dir, e))
}

/// A new file's bytes before their publish, beside the file's target: a
/// file with no name where one can be made ([`create`]), else a named
/// temp.
pub(super) enum Temp {
    /// A named temp (`.{name}.{pid}.{n}.{salt}.tmp`): its path.
    Named(PathBuf),
    /// A file with no name: its target's path, what reports name.
    Unnamed(PathBuf),
}

impl Temp {
    /// A new temp for `path` holding `bytes` (not yet synced), and its
    /// descriptor; when the write fails, the temp is removed again.
    pub(super) fn written(
        io: &dyn IoBackend,
        order: SyncOrder,
        path: &Path,
        bytes: &[u8],
    ) -> Result<(Temp, File)> {
        let (temp, file) = match create(io, order, path)? {
            Some(file) => (Temp::Unnamed(path.to_owned()), file),
            None => create_temp(io, path).map(|(tmp, file)| (Temp::Named(tmp), file))?,
        };
        match temp.write(io, &file, bytes) {
            Ok(()) => Ok((temp, file)),
            Err(e) => {
                temp.discard(io);
                Err(e)
            }
        }
    }

    /// What reports name: the named temp, or an unnamed file's target.
    pub(super) fn shown(&self) -> &Path {
        match self {
            Temp::Named(path) | Temp::Unnamed(path) => path,
        }
    }

    /// Writes `bytes` to `file`, this temp's descriptor.
    fn write(&self, io: &dyn IoBackend, file: &File, bytes: &[u8]) -> Result<()> {
        let op = match self {
            Temp::Named(_) => "write temp file",
            Temp::Unnamed(_) => "write unnamed file",
        };
        io.write_all(file, self.shown(), bytes)
            .map_err(|e| Error::io(op, self.shown(), e))
    }

    /// Removes a named temp after a failure (a file with no name goes with
    /// its descriptor).
    pub(super) fn discard(&self, io: &dyn IoBackend) {
        if let Temp::Named(tmp) = self {
            let _ = io.remove_file(tmp);
        }
    }

    /// Whether the publish goes through the descriptor, which must then
    /// stay open until it.
    pub(super) fn publishes_through_file(&self) -> bool {
        matches!(self, Temp::Unnamed(_))
    }

    /// Publishes the temp under `path`, never replacing a name: a rename,
    /// or the link of `file` (open, as [`Temp::publishes_through_file`]
    /// asks). **Commit point.** A named temp is removed when it fails.
    ///
    /// # Errors
    ///
    /// [`Error::AlreadyExists`] when `path` exists; [`Error::Rename`] or
    /// [`Error::Io`] when the publish fails (nothing is visible under
    /// `path`).
    pub(super) fn publish(
        &self,
        io: &dyn IoBackend,
        file: Option<&File>,
        path: &Path,
    ) -> Result<()> {
        let file = match (self, file) {
            (Temp::Named(tmp), _) => return publish_temp(io, tmp, path),
            (Temp::Unnamed(_), Some(file)) => file,
            (Temp::Unnamed(_), None) => {
                unreachable!("a file with no name stays open until its publish")
            }
        };
        io.link_unnamed(file, path).map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                Error::AlreadyExists {
                    path: path.to_owned(),
                }
            } else {
                Error::io("publish", path, e)
            }
        })
    }
}
