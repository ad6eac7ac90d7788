//! Batch create: many new files published sharing their syncs
//! ([`create_new_batch_stat_with`]), and the one part of it that runs on
//! two threads.
//!
//! A batch's files share nothing until their publish: making each one's
//! temp (an `O_TMPFILE`, or a named temp) and writing its bytes are
//! independent system calls, almost all of them kernel work (a new inode,
//! its orphan entry, the page cache). Under
//! [`SyncOrder::WriteBackThenDir`], from [`PARALLEL_MIN`] files on, and
//! where the backend allows it ([`IoBackend::concurrent_batch_writes`]),
//! that phase runs on the caller's thread and the process's batch helper
//! ([`helper`]), which take the next item from a shared counter.
//! Everything after it stays on the caller's thread, as before: every
//! write-back started, each waited for, each file published in item
//! order, each directory synced once. Starting the write-backs on both
//! threads too, or each right after its file's write, made the phase
//! slower (the block layer throttles the submissions, and the loop or
//! disk worker that serves them wants the other processor).
//!
//! On journalled ext4 that phase of a batch of 100 takes a little over
//! half as long, and a mail batch about 9% less a message
//! (`docs/results/2026-11-29-batch-threads.md`). Under
//! [`SyncOrder::FileThenDir`] each named temp's creation takes its
//! directory's lock, and that order's waiting is on the sync pool's
//! threads anyway: one thread writes.
//!
//! Errors are as one thread would give them: every item before the first
//! failing one (in item order) was written, that item's error is the
//! one returned, and every temp made, on either thread, is removed before
//! any publish. (An item after it may still be started, by the other
//! thread before it sees the failure; its temp is removed too. A panic of
//! the helper is resumed in the caller; a named temp the helper had made
//! by then is left for the temp sweep, as any temp of a crashed writer.)

use std::fs::File;
use std::panic;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use super::unnamed::Temp;
use super::{fstat_published, parent, settle, sync_dir_with};
use crate::backend::{IoBackend, SharedIo, SyncOrder};
use crate::error::{Error, Result};
use crate::stat::Stat;
use crate::sync_pool;

/// The fewest files whose temps a batch writes on two threads. Handing
/// work to the helper costs a copy of the items, two system calls and a
/// wake-up (tens of microseconds with its start); one file's temp costs
/// about 13 µs. From 16 files on a batch gains (more at 32; the figures
/// are in `docs/results/2026-11-29-batch-threads.md`).
pub(crate) const PARALLEL_MIN: usize = 16;

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
/// Every file is written to its own temp first, without syncing (under
/// [`SyncOrder::WriteBackThenDir`], from [`PARALLEL_MIN`] files on, on two
/// threads: see the module docs); then the temps are synced together
/// (`fsync` of each, up to 64 at once, so the filesystem commits them in a
/// few shared journal commits; or, where the filesystem commits in order,
/// [`SyncOrder::WriteBackThenDir`], written back without a cache flush:
/// every write-back started, then each waited for); then each is renamed
/// (or, from no name, linked) into place, in item order, without replacing
/// anything; then every distinct directory is synced, concurrently, once.
/// Each file's data is durable no later than its name, exactly as with
/// [`create_new_with`](super::create_new_with); only the waiting is shared.
///
/// **Commit point:** each file's no-replace rename (or link) commits that
/// file; the batch has none of its own.
///
/// # Errors
///
/// [`Error::Io`] or [`Error::Rename`] when a step fails before any file was
/// published (nothing is visible, every temp is removed; of several files
/// that fail, the first in item order decides);
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
    let temps = write_temps(shared, order, items)?;
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
        discard_all(io, temps);
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

/// Every item's temp, made and written, in item order: on two threads
/// where [`PARALLEL_MIN`] and the backend allow it, else on this one.
/// On failure every temp made is removed, and the first failing item's
/// error (in item order) is returned.
fn write_temps<P: AsRef<Path>>(
    shared: &SharedIo,
    order: SyncOrder,
    items: &[(P, Vec<u8>)],
) -> Result<Vec<(Temp, File)>> {
    let io: &dyn IoBackend = &**shared;
    if order == SyncOrder::WriteBackThenDir
        && items.len() >= PARALLEL_MIN
        && io.concurrent_batch_writes()
    {
        return write_temps_on_two_threads(shared, order, items);
    }
    let mut temps: Vec<(Temp, File)> = Vec::with_capacity(items.len());
    for (path, bytes) in items {
        match Temp::written(io, order, path.as_ref(), bytes) {
            Ok(temp) => temps.push(temp),
            Err(e) => {
                discard_all(io, temps);
                return Err(e);
            }
        }
    }
    Ok(temps)
}

/// Removes the temps made (a file with no name goes with its descriptor).
fn discard_all(io: &dyn IoBackend, temps: impl IntoIterator<Item = (Temp, File)>) {
    for (temp, _) in temps {
        temp.discard(io);
    }
}

/// The items as the helper takes them: its own copy (a kept thread
/// cannot borrow; a job the helper never began is dropped when the helper
/// reaches it in its queue), the shared counter, the
/// lowest item that failed so far (none: `usize::MAX`), and whether the
/// helper joined ([`JOINED`]) or came too late ([`CLOSED`]).
struct Shared {
    io: SharedIo,
    order: SyncOrder,
    items: Vec<(PathBuf, Vec<u8>)>,
    next: AtomicUsize,
    failed: AtomicUsize,
    helper: AtomicU8,
}

/// [`Shared::helper`]: the helper has not begun.
const WAITING: u8 = 0;
/// [`Shared::helper`]: the helper began and may hold items: its answer
/// is awaited.
const JOINED: u8 = 1;
/// [`Shared::helper`]: the caller took every item before the helper
/// began, which then takes none, and is not awaited.
const CLOSED: u8 = 2;

/// Temps one thread wrote: each with its item's index.
type Done = Vec<(usize, Result<(Temp, File)>)>;

impl Shared {
    /// Takes the next item and writes its temp, while items remain and
    /// none before it failed.
    fn work<P: AsRef<Path>>(&self, items: &[(P, Vec<u8>)]) -> Done {
        let io: &dyn IoBackend = &*self.io;
        let mut done = Vec::new();
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= items.len() || i > self.failed.load(Ordering::Relaxed) {
                return done;
            }
            let (path, bytes) = &items[i];
            let written = Temp::written(io, self.order, path.as_ref(), bytes);
            if written.is_err() {
                self.failed.fetch_min(i, Ordering::Relaxed);
            }
            done.push((i, written));
        }
    }
}

/// [`write_temps`] on this thread and the kept helper ([`helper`]), each
/// taking the next item from a shared counter. A thread stops taking
/// items once it sees a failure, and every item before the first failure
/// was taken (the counter hands them out in order), so, as on one thread,
/// each was tried and succeeded. Where no helper
/// runs, or no other processor is allowed, this thread writes them all.
fn write_temps_on_two_threads<P: AsRef<Path>>(
    shared: &SharedIo,
    order: SyncOrder,
    items: &[(P, Vec<u8>)],
) -> Result<Vec<(Temp, File)>> {
    let work = Arc::new(Shared {
        io: Arc::clone(shared),
        order,
        items: items
            .iter()
            .map(|(path, bytes)| (path.as_ref().to_owned(), bytes.clone()))
            .collect(),
        next: AtomicUsize::new(0),
        failed: AtomicUsize::new(usize::MAX),
        helper: AtomicU8::new(WAITING),
    });
    let theirs = helper::start(Arc::clone(&work));
    let mine = work.work(items);
    // A helper that has not begun (its processor was busy) takes no item
    // now: the caller does not wait for it to wake.
    let closed = work
        .helper
        .compare_exchange(WAITING, CLOSED, Ordering::AcqRel, Ordering::Acquire)
        .is_ok();
    let theirs = match theirs.filter(|_| !closed).map(|answer| answer.recv()) {
        // The job never ran (its thread is gone): it took no item.
        None | Some(Err(_)) => Vec::new(),
        Some(Ok(Ok(done))) => done,
        Some(Ok(Err(payload))) => {
            discard_all(
                shared.as_ref(),
                mine.into_iter().filter_map(|(_, r)| r.ok()),
            );
            panic::resume_unwind(payload);
        }
    };
    let mut slots: Vec<Option<Result<(Temp, File)>>> = (0..items.len()).map(|_| None).collect();
    for (i, written) in mine.into_iter().chain(theirs) {
        slots[i] = Some(written);
    }
    let mut temps = Vec::with_capacity(items.len());
    let mut first_error = None;
    // In item order: the first error met is the first failing item's. An
    // item no thread wrote comes after a failure (it was not started),
    // or, were the helper's answer ever lost, is written here: a temp
    // never stands in for another item's.
    for (slot, (path, bytes)) in slots.into_iter().zip(items) {
        let written = match slot {
            Some(written) => written,
            None if first_error.is_some() => continue,
            None => Temp::written(shared.as_ref(), order, path.as_ref(), bytes),
        };
        match written {
            Ok(temp) => temps.push(temp),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => {
            discard_all(shared.as_ref(), temps);
            Err(e)
        }
        None => Ok(temps),
    }
}

/// The one thread, per process, that writes temps beside a batch's
/// caller: started on the first large batch and kept, asleep between
/// batches.
///
/// Why kept, and why pinned: a thread started per batch, or a kept one
/// merely woken, often ran on the caller's processor, after it or instead
/// of it (the scheduler moves a waiting thread to an idle processor only
/// at its next balancing tick, by when the caller has written every
/// temp). So each
/// batch first allows the helper every processor the caller may use but
/// the one it is on (`sched_setaffinity`): it then starts at once and
/// takes about half the items. With no other processor allowed there
/// is nothing to gain, and the caller writes every temp.
mod helper {
    use std::panic::{self, AssertUnwindSafe};
    use std::sync::atomic::Ordering;
    use std::sync::mpsc::{self, Receiver, Sender};
    use std::sync::{Arc, Mutex, PoisonError};
    use std::thread;

    use rustix::process::Pid;
    use rustix::thread as sched;

    use super::{Done, JOINED, Shared, WAITING};

    /// What the helper sends back: its temps, or its panic.
    pub(super) type Answer = thread::Result<Done>;

    type Job = (Arc<Shared>, Sender<Answer>);

    struct Helper {
        jobs: Sender<Job>,
        tid: Pid,
    }

    /// This process's helper, with the process id that started it: a
    /// child forked after a batch has the parent's in memory but not its
    /// thread, and starts its own (the inherited one is never touched).
    static HELPER: Mutex<Option<(u32, Arc<Helper>)>> = Mutex::new(None);

    /// Hands `work` to the helper, allowed every processor but this
    /// thread's; `None` when no helper can run beside this thread.
    pub(super) fn start(work: Arc<Shared>) -> Option<Receiver<Answer>> {
        let mut others = sched::sched_getaffinity(None).ok()?;
        let here = sched::sched_getcpu();
        if here < sched::CpuSet::MAX_CPU {
            others.unset(here);
        }
        if others.count() == 0 {
            return None;
        }
        // Started only once it can run beside this thread.
        let helper = get()?;
        // Not pinned (a kernel that refuses): it may still get a processor.
        let _ = sched::sched_setaffinity(Some(helper.tid), &others);
        let (answer, answered) = mpsc::channel();
        helper.jobs.send((work, answer)).ok()?;
        Some(answered)
    }

    /// The process's helper, started if need be; `None` if no thread can
    /// be started.
    fn get() -> Option<Arc<Helper>> {
        let pid = std::process::id();
        let mut slot = HELPER.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((owner, helper)) = &*slot
            && *owner == pid
        {
            return Some(Arc::clone(helper));
        }
        let (jobs, queue) = mpsc::channel::<Job>();
        let (told, tid) = mpsc::channel();
        thread::Builder::new()
            .name("chipset-batch".into())
            .spawn(move || {
                let _ = told.send(sched::gettid());
                serve(&queue);
            })
            .ok()?;
        let helper = Arc::new(Helper {
            jobs,
            tid: tid.recv().ok()?,
        });
        if let Some(inherited) = slot.replace((pid, Arc::clone(&helper))) {
            std::mem::forget(inherited);
        }
        Some(helper)
    }

    /// The helper's loop: each job's items, until the process ends.
    fn serve(queue: &Receiver<Job>) {
        while let Ok((work, answer)) = queue.recv() {
            let joined = work
                .helper
                .compare_exchange(WAITING, JOINED, Ordering::AcqRel, Ordering::Acquire)
                .is_ok();
            if !joined {
                // The caller wrote every temp already and is not waiting.
                continue;
            }
            let done = panic::catch_unwind(AssertUnwindSafe(|| work.work(&work.items)));
            let _ = answer.send(done);
        }
    }
}
