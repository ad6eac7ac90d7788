//! Batch create: many new files published sharing their syncs
//! ([`create_new_batch_stat_with`]).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::unnamed::Temp;
use super::{fstat_published, parent, settle, sync_dir_with};
use crate::backend::{IoBackend, SharedIo, SyncOrder};
use crate::error::{Error, Result};
use crate::stat::Stat;
use crate::sync_pool;

/// What happened to one file of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Created {
    /// The file was published.
    New,
    /// A file of that name existed; it was left alone.
    AlreadyExists,
}

/// Publishes many new files sharing their syncs: a constant number of sync
/// rounds for the whole batch, not one per file.
///
/// Every file is written to its own temp first, without syncing; then the
/// temps are synced together (`fsync` of each, up to 64 at once, so the
/// filesystem commits them in a few shared journal commits; or, where the
/// filesystem commits in order, [`SyncOrder::WriteBackThenDir`], written
/// back without a cache flush: every write-back started, then each waited
/// for); then each is renamed (or, from no name, linked) into place without
/// replacing anything; then every distinct directory is synced,
/// concurrently, once. Each file's data is durable no later than its name,
/// exactly as with [`create_new_with`](super::create_new_with); only the
/// waiting is shared.
///
/// **Commit point:** each file's no-replace rename (or link) commits that
/// file; the batch has none of its own.
///
/// # Errors
///
/// [`Error::Io`] or [`Error::Rename`] when a step fails before any file was
/// published (nothing is visible, every temp is removed);
/// [`Error::OutcomeUnknown`] when a step fails after at least one file was
/// published: those stay published, each whole, and a retry of the same
/// batch reports them [`Created::AlreadyExists`] and publishes the rest.
pub(crate) fn create_new_batch_with<P: AsRef<Path>>(
    shared: &SharedIo,
    order: SyncOrder,
    items: &[(P, Vec<u8>)],
) -> Result<Vec<Created>> {
    let outcomes = create_new_batch_stat_with(shared, order, items, false)?;
    Ok(outcomes.into_iter().map(|(created, _)| created).collect())
}

/// [`create_new_batch_with`], and when `stat`, each published file's
/// [`Stat`], as [`create_new_stat_with`](super::create_new_stat_with)
/// takes it (`None` for a file that was not published, or whose `fstat`
/// failed).
pub(crate) fn create_new_batch_stat_with<P: AsRef<Path>>(
    shared: &SharedIo,
    order: SyncOrder,
    items: &[(P, Vec<u8>)],
    stat: bool,
) -> Result<Vec<(Created, Option<Stat>)>> {
    let io: &dyn IoBackend = &**shared;
    let mut temps: Vec<(Temp, File)> = Vec::with_capacity(items.len());
    let discard_all = |temps: &[(Temp, File)]| {
        for (temp, _) in temps {
            temp.discard(io);
        }
    };
    for (path, bytes) in items {
        let (temp, file) = match Temp::new(io, order, path.as_ref()) {
            Ok(t) => t,
            Err(e) => {
                discard_all(&temps);
                return Err(e);
            }
        };
        let written = temp.write(io, &file, bytes);
        temps.push((temp, file));
        if let Err(e) = written {
            discard_all(&temps);
            return Err(e);
        }
    }
    // One round: every temp's data and size are durable (or, under
    // `WriteBackThenDir`, written, and durable with the directory syncs)
    // before any publish.
    let (temps, settled) = match order {
        // Every temp's writes are started, and then waited for in turn on
        // this thread: they are in flight together, and no thread is woken
        // per file.
        SyncOrder::WriteBackThenDir => {
            for (temp, file) in &temps {
                io.start_write_back(file, temp.shown());
            }
            let settled = temps
                .iter()
                .try_for_each(|(temp, file)| settle(io, order, file, temp.shown()));
            (temps, settled)
        }
        // An `fsync` waits for a cache flush: many in flight at once share
        // one (see `sync_pool`).
        SyncOrder::FileThenDir => {
            let shared_io = Arc::clone(shared);
            sync_pool::sync_all(temps, move |(temp, file)| {
                settle(&*shared_io, order, file, temp.shown())
            })
        }
    };
    if let Err(e) = settled {
        discard_all(&temps);
        return Err(e);
    }
    // A named temp is closed before the publish unless its stat is
    // wanted; one with no name is published through its descriptor.
    let temps: Vec<(Temp, Option<File>)> = temps
        .into_iter()
        .map(|(temp, file)| {
            let keep = stat || temp.publishes_through_file();
            (temp, keep.then_some(file))
        })
        .collect();
    let mut outcomes = Vec::with_capacity(items.len());
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut first_published: Option<&Path> = None;
    let mut pending = items.iter().zip(&temps);
    for ((path, _), (temp, file)) in pending.by_ref() {
        let path = path.as_ref();
        match temp.publish(io, file.as_ref(), path) {
            Ok(()) => {
                let meta = file
                    .as_ref()
                    .filter(|_| stat)
                    .and_then(|f| fstat_published(f, path));
                outcomes.push((Created::New, meta));
                first_published.get_or_insert(path);
            }
            Err(Error::AlreadyExists { .. }) => outcomes.push((Created::AlreadyExists, None)),
            Err(e) => {
                for (_, (temp, _)) in pending {
                    temp.discard(io);
                }
                return Err(match first_published {
                    Some(p) => e.after_commit_rename(p),
                    None => e,
                });
            }
        }
        let dir = parent(path);
        if !dirs.iter().any(|d| d == dir) {
            dirs.push(dir.to_owned());
        }
    }
    drop(temps);
    // One more round: each directory once, concurrently.
    let shared = Arc::clone(shared);
    if let (_, Err(e)) = sync_pool::sync_all(dirs, move |dir| sync_dir_with(&*shared, dir)) {
        return Err(match first_published {
            Some(p) => e.after_commit(p),
            None => e,
        });
    }
    Ok(outcomes)
}
