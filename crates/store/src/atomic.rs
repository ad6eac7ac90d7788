//! Durable replace, no-clobber create, no-clobber move, directory sync, temp sweep.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::backend::{IoBackend, SyncOrder};
use crate::canonical::to_canonical_json;
use crate::error::{Error, Result};
use crate::stat::{Stat, none_if_not_found};

pub(crate) mod batch;
mod unnamed;

pub(crate) use batch::{create_new_batch_stat_with, create_new_batch_with};
use unnamed::Temp;

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// The suffix of every temp file this crate makes; [`StateDir::sweep_temps`](crate::StateDir::sweep_temps) removes
/// only dot-files with this suffix.
pub(crate) const TEMP_SUFFIX: &str = ".tmp";

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

fn file_name(path: &Path) -> Result<&str> {
    path.file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Error::io("name", path, io::Error::from(io::ErrorKind::InvalidInput)))
}

/// Fails with [`Error::Symlink`] when `path` itself is a symlink.
pub(crate) fn refuse_symlink(path: &Path) -> Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(Error::Symlink {
            path: path.to_owned(),
        }),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("stat", path, e)),
    }
}

/// Writes `bytes` to a new, uniquely named, synced temp file beside `target`
/// and returns its path. The name starts with a dot so listings skip it:
/// `.{target-name}.{pid}.{counter}.{random}.tmp`. On failure the temp is
/// removed (or, if even that fails, left as a dot-file no reader looks at).
pub(crate) fn write_temp(io: &dyn IoBackend, target: &Path, bytes: &[u8]) -> Result<PathBuf> {
    let (tmp, file) = create_temp(io, target)?;
    let written = io
        .write_all(&file, &tmp, bytes)
        .map_err(|e| Error::io("write temp file", &tmp, e))
        .and_then(|()| settle(io, SyncOrder::FileThenDir, &file, &tmp));
    if let Err(e) = written {
        let _ = io.remove_file(&tmp);
        return Err(e);
    }
    Ok(tmp)
}

/// Makes a temp's data ready to publish under `order`: `fsync`, or a write-back
/// whose durability the directory sync after the publish brings.
fn settle(io: &dyn IoBackend, order: SyncOrder, file: &File, tmp: &Path) -> Result<()> {
    match order {
        SyncOrder::WriteBackThenDir => io
            .write_back(file, tmp)
            .map_err(|e| Error::io("write back", tmp, e)),
        SyncOrder::FileThenDir => io
            .sync_all(file, tmp)
            .map_err(|e| Error::io("sync", tmp, e)),
    }
}

/// Creates a new, uniquely named temp file beside `target`, opened for
/// reading and writing.
pub(crate) fn create_temp(io: &dyn IoBackend, target: &Path) -> Result<(PathBuf, File)> {
    let dir = parent(target);
    let name = file_name(target)?;
    let pid = std::process::id();
    loop {
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let salt = uuid::Uuid::new_v4().as_u128() as u32;
        let tmp = dir.join(format!(".{name}.{pid}.{n}.{salt:08x}{TEMP_SUFFIX}"));
        match io.create_new(&tmp, false) {
            Ok(f) => return Ok((tmp, f)),
            // A leftover from a dead process with our pid: take the next name.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::io("create temp file", tmp, e)),
        }
    }
}

/// Makes the directory entries in `dir` durable.
///
/// # Errors
///
/// [`Error::Io`] when the directory cannot be opened or synced.
pub(crate) fn sync_dir_with(io: &dyn IoBackend, dir: &Path) -> Result<()> {
    io.sync_dir(dir)
        .map_err(|e| Error::io("sync directory", dir, e))
}

/// Durably replaces the contents of `path` with `bytes`.
///
/// Writes a uniquely named temp file in the same directory (created
/// exclusively), syncs it, renames it over `path` and syncs the directory.
/// Concurrent writers never share a temp file, and a reader sees the old or
/// the new contents, never a mix. The parent directory must exist.
///
/// **Commit point:** the rename over `path`.
///
/// # Errors
///
/// [`Error::Symlink`] when `path` is a symlink (it is left alone); [`Error::Io`]
/// or [`Error::Rename`] when a step before the commit point fails, leaving
/// `path` unchanged; [`Error::OutcomeUnknown`] when the final directory sync
/// fails: the new contents are in place but not known to be durable.
pub(crate) fn write_atomic_with(io: &dyn IoBackend, path: &Path, bytes: &[u8]) -> Result<()> {
    refuse_symlink(path)?;
    let tmp = write_temp(io, path, bytes)?;
    if let Err(e) = io.rename(&tmp, path) {
        let _ = io.remove_file(&tmp);
        return Err(Error::Rename {
            op: "rename",
            from: tmp,
            to: path.to_owned(),
            source: e,
        });
    }
    sync_dir_with(io, parent(path)).map_err(|e| e.after_commit(path))
}

/// Replaces the contents of `path` with `bytes` without syncing anything:
/// a temp file beside it, renamed over it.
///
/// Only for files that are a cache of what is elsewhere and that validate
/// themselves, such as mail's gate cache: a reader sees the old contents or
/// the whole new ones, never a mix, but after a power cut the file may be
/// the old one, missing, empty, or partly written (rules 1 and 2 of the
/// Durability section), and the reader must treat any of those as "no
/// cache". Concurrent writers never share a temp file; the last rename wins.
///
/// # Errors
///
/// [`Error::Symlink`] when `path` is a symlink; [`Error::Io`] or
/// [`Error::Rename`] when a step fails (`path` is unchanged).
pub(crate) fn write_unsynced_with(io: &dyn IoBackend, path: &Path, bytes: &[u8]) -> Result<()> {
    replace_unsynced(io, path, |file, tmp| {
        io.write_all(file, tmp, bytes)
            .map_err(|e| Error::io("write temp file", tmp, e))
    })
}

/// As [`write_unsynced_with`], with the compact JSON of `value` (as
/// `serde_json` writes it, not the canonical form) encoded straight into
/// the temp file through a buffer: never whole in memory.
///
/// # Errors
///
/// As [`write_unsynced_with`], plus [`Error::Serialize`] when `value`
/// fails to encode (`path` is unchanged).
pub(crate) fn write_cache_json_with<T: Serialize + ?Sized>(
    io: &dyn IoBackend,
    path: &Path,
    value: &T,
) -> Result<()> {
    replace_unsynced(io, path, |file, tmp| {
        let mut out = io::BufWriter::with_capacity(
            STREAM_BUFFER,
            BackendWriter {
                io,
                file,
                path: tmp,
            },
        );
        match serde_json::to_writer(&mut out, value) {
            Ok(()) => {}
            // A write of the encoder's buffer failed: the disk's error.
            Err(e) if e.is_io() => return Err(Error::io("write temp file", tmp, e.into())),
            Err(source) => {
                return Err(Error::Serialize {
                    path: path.to_owned(),
                    source,
                });
            }
        }
        io::Write::flush(&mut out).map_err(|e| Error::io("write temp file", tmp, e))
    })
}

/// Writes a temp file beside `path` with `write` and renames it over
/// `path`, syncing nothing; a failed step removes the temp.
fn replace_unsynced(
    io: &dyn IoBackend,
    path: &Path,
    write: impl FnOnce(&File, &Path) -> Result<()>,
) -> Result<()> {
    refuse_symlink(path)?;
    let (tmp, file) = create_temp(io, path)?;
    if let Err(e) = write(&file, &tmp) {
        let _ = io.remove_file(&tmp);
        return Err(e);
    }
    drop(file);
    if let Err(e) = io.rename(&tmp, path) {
        let _ = io.remove_file(&tmp);
        return Err(Error::Rename {
            op: "rename",
            from: tmp,
            to: path.to_owned(),
            source: e,
        });
    }
    Ok(())
}

/// The buffer of [`write_cache_json_with`].
const STREAM_BUFFER: usize = 128 * 1024;

/// A file written through the backend, one `write_all` per buffer.
struct BackendWriter<'a> {
    io: &'a dyn IoBackend,
    file: &'a File,
    path: &'a Path,
}

impl io::Write for BackendWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.io.write_all(self.file, self.path, buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Returns the canonical JSON of `value`, meant for `path`.
///
/// # Errors
///
/// [`Error::Serialize`].
pub(crate) fn to_json_bytes<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<Vec<u8>> {
    to_canonical_json(value).map_err(|source| Error::Serialize {
        path: path.to_owned(),
        source,
    })
}

/// How a no-replace rename went.
enum Renamed {
    /// `to` holds the file and `from` is gone.
    Done,
    /// The fallback linked `to` but could not unlink `from`: both names hold the file.
    Linked(io::Error),
}

/// Renames `from` to `to` unless `to` exists. Uses `renameat2(RENAME_NOREPLACE)`,
/// and falls back to `link` + `unlink` where the filesystem lacks it. The
/// rename (or the link) is the commit point.
fn rename_noreplace(io: &dyn IoBackend, from: &Path, to: &Path) -> io::Result<Renamed> {
    match io.rename_noreplace(from, to) {
        Ok(()) => Ok(Renamed::Done),
        Err(e) if e.kind() == io::ErrorKind::Unsupported => {
            io.hard_link(from, to)?;
            match io.remove_file(from) {
                Ok(()) => Ok(Renamed::Done),
                Err(e) => Ok(Renamed::Linked(e)),
            }
        }
        Err(e) => Err(e),
    }
}

/// Durably publishes `bytes` under `path`, which must not exist yet.
///
/// The bytes go to a synced temp file first, which is then renamed into place
/// without replacing anything (under [`SyncOrder::WriteBackThenDir`], to a
/// file with no name, linked into place: see `unnamed`), and the directory
/// is synced: a reader sees the whole file or nothing.
///
/// **Commit point:** the no-replace rename (or link) to `path`.
///
/// # Errors
///
/// [`Error::AlreadyExists`] when `path` exists (nothing is overwritten, and
/// the temp file is removed); [`Error::Io`] or [`Error::Rename`] when a step
/// before the commit point fails (nothing is visible under `path`);
/// [`Error::OutcomeUnknown`] when the final directory sync fails: the file
/// is published but not known to be durable.
pub(crate) fn create_new_with(
    io: &dyn IoBackend,
    order: SyncOrder,
    path: &Path,
    bytes: &[u8],
) -> Result<()> {
    create_new_stat_with(io, order, path, bytes, false).map(drop)
}

/// [`create_new_with`], and when `stat`, the published file's [`Stat`]:
/// an `fstat` of the temp's descriptor after the publish (so it carries
/// the times the publish gave the file), before the directory sync.
/// `None` when not asked, or when that `fstat` failed (the file is
/// published all the same).
pub(crate) fn create_new_stat_with(
    io: &dyn IoBackend,
    order: SyncOrder,
    path: &Path,
    bytes: &[u8],
    stat: bool,
) -> Result<Option<Stat>> {
    let (temp, file) = Temp::written(io, order, path, bytes)?;
    if let Err(e) = settle(io, order, &file, temp.shown()) {
        temp.discard(io);
        return Err(e);
    }
    // A named temp is closed before the publish unless its stat is wanted.
    let file = (stat || temp.publishes_through_file()).then_some(file);
    temp.publish(io, file.as_ref(), path)?;
    let meta = file
        .filter(|_| stat)
        .and_then(|f| fstat_published(&f, path));
    sync_dir_with(io, parent(path)).map_err(|e| e.after_commit(path))?;
    Ok(meta)
}

/// The [`Stat`] of a file just published under `path` through its open
/// descriptor; `None` (logged) when the `fstat` fails.
fn fstat_published(file: &File, path: &Path) -> Option<Stat> {
    match file.metadata() {
        Ok(meta) => Some(Stat::from_metadata(&meta)),
        Err(error) => {
            tracing::debug!(path = %path.display(), %error, "could not stat a published file");
            None
        }
    }
}

fn publish_temp(io: &dyn IoBackend, tmp: &Path, path: &Path) -> Result<()> {
    match rename_noreplace(io, tmp, path) {
        Ok(Renamed::Done) => Ok(()),
        Ok(Renamed::Linked(e)) => {
            // Published; the temp name is a dot-file no reader looks at, and
            // the temp sweep removes it later.
            tracing::warn!(tmp = %tmp.display(), error = %e, "left a linked temp file behind");
            Ok(())
        }
        Err(e) => {
            let _ = io.remove_file(tmp);
            if e.kind() == io::ErrorKind::AlreadyExists {
                Err(Error::AlreadyExists {
                    path: path.to_owned(),
                })
            } else {
                Err(Error::Rename {
                    op: "publish",
                    from: tmp.to_owned(),
                    to: path.to_owned(),
                    source: e,
                })
            }
        }
    }
}

/// Durably moves `from` to `to` (for example into an archive directory),
/// never replacing an existing `to`. Both directories are synced, the
/// destination's first. Both must be on one filesystem.
///
/// Of two processes moving the same file, exactly one succeeds; the other
/// gets [`Error::NotFound`] (the source is gone) or [`Error::AlreadyExists`].
///
/// **Commit point:** the no-replace rename.
///
/// # Errors
///
/// [`Error::NotFound`] when `from` does not exist; [`Error::AlreadyExists`]
/// when `to` does; [`Error::Symlink`] when `from` is a symlink;
/// [`Error::Rename`] for other failures before the commit point (nothing
/// moved); [`Error::OutcomeUnknown`] when a directory sync after it fails.
pub(crate) fn move_noclobber_with(io: &dyn IoBackend, from: &Path, to: &Path) -> Result<()> {
    match fs::symlink_metadata(from) {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(Error::Symlink {
                path: from.to_owned(),
            });
        }
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(Error::NotFound {
                path: from.to_owned(),
            });
        }
        Err(e) => return Err(Error::io("stat", from, e)),
    }
    move_entry(io, from, to)
}

/// Moves a directory entry of any type (a symlink is moved, not followed).
pub(crate) fn move_entry(io: &dyn IoBackend, from: &Path, to: &Path) -> Result<()> {
    match rename_noreplace(io, from, to) {
        Ok(Renamed::Done) => {}
        Ok(Renamed::Linked(e)) => {
            return Err(Error::OutcomeUnknown {
                op: "unlink the source of a move to",
                path: to.to_owned(),
                source: e,
            });
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            return Err(Error::AlreadyExists {
                path: to.to_owned(),
            });
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(Error::NotFound {
                path: from.to_owned(),
            });
        }
        Err(e) => {
            return Err(Error::Rename {
                op: "move",
                from: from.to_owned(),
                to: to.to_owned(),
                source: e,
            });
        }
    }
    let (src, dst) = (parent(from), parent(to));
    sync_dir_with(io, dst).map_err(|e| e.after_commit(to))?;
    if src != dst {
        sync_dir_with(io, src).map_err(|e| e.after_commit(to))?;
    }
    Ok(())
}

/// Removes the directory entry at `path` (a symlink is removed, not
/// followed) and returns whether there was one.
///
/// Removal is deliberately not synced: use it only where a removed file that
/// comes back after a power cut is harmless and is removed again, such as
/// retention of processed events or a duplicate copy. State that must stay
/// gone is replaced or moved, never removed.
///
/// # Errors
///
/// [`Error::Io`] when the entry exists but cannot be removed.
pub(crate) fn remove_file_with(io: &dyn IoBackend, path: &Path) -> Result<bool> {
    match io.remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io("remove", path, e)),
    }
}

/// Returns true for names this crate gives its temp files.
pub(crate) fn is_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(TEMP_SUFFIX)
}

/// Returns the temp files (see [`is_temp_name`]) older than `max_age` in
/// `dir` and, recursively, its subdirectories, without following symlinks,
/// and without changing anything. A missing `dir` has none.
///
/// Age is measured from the file's modification time on the system clock,
/// since that is the clock the filesystem stamps it with.
///
/// # Errors
///
/// [`Error::Io`] when a directory cannot be listed or an entry examined.
pub(crate) fn stale_temps(dir: &Path, max_age: Duration) -> Result<Vec<PathBuf>> {
    let now = SystemTime::now();
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io("list directory", &dir, e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("list directory", &dir, e))?;
            let path = entry.path();
            let ft = entry.file_type().map_err(|e| Error::io("stat", &path, e))?;
            if ft.is_dir() {
                stack.push(path);
                continue;
            }
            let is_temp = entry.file_name().to_str().is_some_and(is_temp_name);
            if !ft.is_file() || !is_temp {
                continue;
            }
            let modified = match none_if_not_found(entry.metadata().and_then(|m| m.modified())) {
                Ok(Some(m)) => m,
                // Gone since the listing: another sweeper took it.
                Ok(None) => continue,
                Err(e) => return Err(Error::io("stat", &path, e)),
            };
            if now.duration_since(modified).unwrap_or_default() >= max_age {
                found.push(path);
            }
        }
    }
    found.sort();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::is_temp_name;

    /// A temp name is a dot-name ending `.tmp`; a plain `.tmp` file is not one.
    #[test]
    fn temp_names_are_dot_names_ending_tmp() {
        assert!(is_temp_name(".a.json.1.2.deadbeef.tmp"));
        assert!(!is_temp_name("a.tmp"));
    }
}
