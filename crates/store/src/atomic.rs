//! Durable replace, no-clobber create, no-clobber move, directory sync, temp sweep.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use rustix::fs::{CWD, RenameFlags};
use rustix::io::Errno;
use serde::Serialize;

use crate::canonical::to_canonical_json;
use crate::error::{Error, Result};

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// The suffix of every temp file this crate makes; [`sweep_temps`] removes
/// only dot-files with this suffix.
pub const TEMP_SUFFIX: &str = ".tmp";

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
/// `.{target-name}.{pid}.{counter}.{random}.tmp`.
fn write_temp(target: &Path, bytes: &[u8]) -> Result<PathBuf> {
    let dir = parent(target);
    let name = file_name(target)?;
    let pid = std::process::id();
    loop {
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let salt = uuid::Uuid::new_v4().as_u128() as u32;
        let tmp = dir.join(format!(".{name}.{pid}.{n}.{salt:08x}{TEMP_SUFFIX}"));
        let mut file = match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&tmp)
        {
            Ok(f) => f,
            // A leftover from a dead process with our pid: take the next name.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::io("create temp file", tmp, e)),
        };
        let written = file
            .write_all(bytes)
            .map_err(|e| Error::io("write temp file", &tmp, e))
            .and_then(|()| file.sync_all().map_err(|e| Error::io("sync", &tmp, e)));
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        return Ok(tmp);
    }
}

/// Makes the directory entries in `dir` durable.
///
/// # Errors
///
/// [`Error::Io`] when the directory cannot be opened or synced.
pub fn sync_dir(dir: &Path) -> Result<()> {
    let f = File::open(dir).map_err(|e| Error::io("open directory", dir, e))?;
    f.sync_all()
        .map_err(|e| Error::io("sync directory", dir, e))
}

/// Durably replaces the contents of `path` with `bytes`.
///
/// Writes a uniquely named temp file in the same directory (created
/// exclusively), syncs it, renames it over `path` and syncs the directory.
/// Concurrent writers never share a temp file, and a reader sees the old or
/// the new contents, never a mix. The parent directory must exist.
///
/// # Errors
///
/// [`Error::Symlink`] when `path` is a symlink (it is left alone); [`Error::Io`]
/// or [`Error::Rename`] when a step fails. A failure before the rename leaves
/// `path` unchanged. A failure of the final directory sync (an
/// [`Error::Io`] whose operation is "sync directory") comes after the rename:
/// the new contents are in place but not known to be durable, so a caller
/// that retries should re-read first.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    refuse_symlink(path)?;
    let tmp = write_temp(path, bytes)?;
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(Error::Rename {
            op: "rename",
            from: tmp,
            to: path.to_owned(),
            source: e,
        });
    }
    sync_dir(parent(path))
}

/// Durably replaces `path` with the canonical JSON of `value`.
///
/// # Errors
///
/// As [`write_atomic`], plus [`Error::Serialize`].
pub fn write_json<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<()> {
    write_atomic(path, &to_json_bytes(path, value)?)
}

pub(crate) fn to_json_bytes<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<Vec<u8>> {
    to_canonical_json(value).map_err(|source| Error::Serialize {
        path: path.to_owned(),
        source,
    })
}

/// Renames `from` to `to` unless `to` exists. Uses `renameat2(RENAME_NOREPLACE)`,
/// and falls back to `link` + `unlink` where the filesystem lacks it.
fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    match rustix::fs::renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => {
            fs::hard_link(from, to)?;
            fs::remove_file(from)
        }
        Err(e) => Err(e.into()),
    }
}

/// Durably publishes `bytes` under `path`, which must not exist yet.
///
/// The bytes go to a synced temp file first, which is then renamed into place
/// without replacing anything, and the directory is synced: a reader sees the
/// whole file or nothing.
///
/// # Errors
///
/// [`Error::AlreadyExists`] when `path` exists (nothing is overwritten, and
/// the temp file is removed); [`Error::Io`] or [`Error::Rename`] when a step
/// fails. As for [`write_atomic`], a failed final directory sync means the
/// file was published but is not known to be durable.
pub fn create_new(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = write_temp(path, bytes)?;
    publish_temp(&tmp, path)?;
    sync_dir(parent(path))
}

fn publish_temp(tmp: &Path, path: &Path) -> Result<()> {
    match rename_noreplace(tmp, path) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = fs::remove_file(tmp);
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

/// Durably publishes the canonical JSON of `value` under `path`, which must not exist yet.
///
/// # Errors
///
/// As [`create_new`], plus [`Error::Serialize`].
pub fn create_new_json<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<()> {
    create_new(path, &to_json_bytes(path, value)?)
}

/// What happened to one file of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Created {
    /// The file was published.
    New,
    /// A file of that name existed; it was left alone.
    AlreadyExists,
}

/// Publishes many new files, sharing the directory syncs.
///
/// Every file is written to its temp and synced, then each is renamed into
/// place without replacing anything, and each distinct directory is synced
/// once at the end. Per file this costs one data sync instead of a data sync
/// plus a directory sync.
///
/// # Errors
///
/// [`Error::Io`] or [`Error::Rename`] when a step fails. Files published
/// before the failure stay published (each one whole); they are durable once
/// a later directory sync succeeds.
pub fn create_new_batch(items: &[(PathBuf, Vec<u8>)]) -> Result<Vec<Created>> {
    let mut temps = Vec::with_capacity(items.len());
    for (path, bytes) in items {
        match write_temp(path, bytes) {
            Ok(t) => temps.push(t),
            Err(e) => {
                for t in &temps {
                    let _ = fs::remove_file(t);
                }
                return Err(e);
            }
        }
    }
    let mut outcomes = Vec::with_capacity(items.len());
    let mut dirs: Vec<&Path> = Vec::new();
    let mut pending = items.iter().zip(&temps);
    for ((path, _), tmp) in pending.by_ref() {
        match publish_temp(tmp, path) {
            Ok(()) => outcomes.push(Created::New),
            Err(Error::AlreadyExists { .. }) => outcomes.push(Created::AlreadyExists),
            Err(e) => {
                for (_, t) in pending {
                    let _ = fs::remove_file(t);
                }
                return Err(e);
            }
        }
        let dir = parent(path);
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    for dir in dirs {
        sync_dir(dir)?;
    }
    Ok(outcomes)
}

/// Durably moves `from` to `to` (for example into an archive directory),
/// never replacing an existing `to`. Both directories are synced, the
/// destination's first. Both must be on one filesystem.
///
/// Of two processes moving the same file, exactly one succeeds; the other
/// gets [`Error::NotFound`] (the source is gone) or [`Error::AlreadyExists`].
///
/// # Errors
///
/// [`Error::NotFound`] when `from` does not exist; [`Error::AlreadyExists`]
/// when `to` does; [`Error::Symlink`] when `from` is a symlink;
/// [`Error::Rename`] for other failures.
pub fn move_noclobber(from: &Path, to: &Path) -> Result<()> {
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
    move_entry(from, to)
}

/// Moves a directory entry of any type (a symlink is moved, not followed).
pub(crate) fn move_entry(from: &Path, to: &Path) -> Result<()> {
    match rename_noreplace(from, to) {
        Ok(()) => {}
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
    sync_dir(dst)?;
    if src != dst {
        sync_dir(src)?;
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
pub fn remove_file(path: &Path) -> Result<bool> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io("remove", path, e)),
    }
}

/// Returns true for names this crate gives its temp files.
pub fn is_temp_name(name: &str) -> bool {
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
pub fn stale_temps(dir: &Path, max_age: Duration) -> Result<Vec<PathBuf>> {
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
            let modified = match entry.metadata().and_then(|m| m.modified()) {
                Ok(m) => m,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
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

/// Removes the temp files that [`stale_temps`] finds and returns how many
/// it removed (one that vanished meanwhile is not counted).
///
/// # Errors
///
/// As [`stale_temps`], and [`Error::Io`] when a temp cannot be removed.
pub fn sweep_temps(dir: &Path, max_age: Duration) -> Result<usize> {
    let mut removed = 0;
    for path in stale_temps(dir, max_age)? {
        if remove_file(&path)? {
            removed += 1;
            tracing::debug!(path = %path.display(), "swept stale temp file");
        }
    }
    Ok(removed)
}
