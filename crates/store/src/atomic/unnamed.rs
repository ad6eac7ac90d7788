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

use std::fs::File;
use std::io;
use std::path::Path;

use super::{fstat_published, parent, settle, sync_dir_with};
use crate::backend::{IoBackend, SyncOrder};
use crate::error::{Error, Result};
use crate::stat::Stat;

/// A file with no name in `path`'s directory, for `path`'s bytes; `None`
/// where none can be made there, or `order` is not
/// [`SyncOrder::WriteBackThenDir`].
pub(super) fn create(io: &dyn IoBackend, order: SyncOrder, path: &Path) -> Result<Option<File>> {
    if order != SyncOrder::WriteBackThenDir {
        return Ok(None);
    }
    let dir = parent(path);
    io.create_unnamed(dir)
        .map_err(|e| Error::io("create unnamed file", dir, e))
}

/// Writes `bytes` to `file`, unnamed (reports name `path`, the name it is
/// for).
pub(super) fn write(io: &dyn IoBackend, file: &File, path: &Path, bytes: &[u8]) -> Result<()> {
    io.write_all(file, path, bytes)
        .map_err(|e| Error::io("write unnamed file", path, e))
}

/// Gives the unnamed `file` the name `path`, never replacing one.
/// **Commit point.**
///
/// # Errors
///
/// [`Error::AlreadyExists`] when `path` exists; [`Error::Io`] when the link
/// fails (nothing is visible under `path`).
pub(super) fn publish(io: &dyn IoBackend, file: &File, path: &Path) -> Result<()> {
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

/// [`create_new_stat_with`](super::create_new_stat_with) from the unnamed
/// `file`: written and made ready as `order` says, published, stat-ed when
/// `stat`, and its directory synced.
pub(super) fn create_new_stat(
    io: &dyn IoBackend,
    order: SyncOrder,
    file: File,
    path: &Path,
    bytes: &[u8],
    stat: bool,
) -> Result<Option<Stat>> {
    write(io, &file, path, bytes)?;
    settle(io, order, &file, path)?;
    publish(io, &file, path)?;
    let meta = if stat {
        fstat_published(&file, path)
    } else {
        None
    };
    drop(file);
    sync_dir_with(io, parent(path)).map_err(|e| e.after_commit(path))?;
    Ok(meta)
}
