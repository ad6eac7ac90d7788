//! Reading the files of a folder that no cache vouches for (and parsing a
//! sent journal's records) on several threads, and writing a folder's
//! cache beside the rest of the gate.
//!
//! # Why threads
//!
//! The first gate of a state no cache was made for reads every file of the
//! folder (an `openat` relative to the open folder, a `read` and a `close`
//! each, a `statx` too in a folder whose stamp is racy, then a parse), as
//! the scan does, and then writes the caches that spare the next gate all
//! of it. On one thread it cannot cost less than the scan. Reads of
//! different files share nothing but the open folder, so a folder's reads
//! are split into contiguous runs read at once (at most [`MAX_READERS`]
//! threads, and only from [`PARALLEL_READS`] files on, where the threads'
//! start costs little beside the reads), the folder cache is encoded and
//! written on its own thread while the gate goes on, and the task cache
//! on its own while the gate looks for replies ([`beside`]). The same
//! holds for the records of a sent journal (a gate right after 10,000
//! sends parses 10,000 of them): its lines are parsed in runs.
//!
//! # Failing closed as one thread does
//!
//! Each run reads its own contiguous part of the listing and puts what it
//! read in place, stopping at its first failing file; the runs' errors
//! are taken in listing order: the error returned is the one of the first
//! failing file in listing order, the one the sequential read would have
//! stopped at. A file gone since the listing is skipped, as before.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use super::*;

/// A folder with fewer files to read than this is read on the caller's
/// thread alone.
#[cfg_attr(test, allow(dead_code, reason = "the tests set their own"))]
const PARALLEL_READS: usize = 256;
/// The most threads that read one folder (the caller's included).
const MAX_READERS: usize = 4;

#[cfg(test)]
thread_local! {
    /// The threshold the gate's tests run with (lowered, so that small
    /// folders take the parallel path; raised, to get the sequential one).
    pub(super) static TEST_PARALLEL_READS: std::cell::Cell<usize> =
        const { std::cell::Cell::new(8) };
}

/// How many threads read `n` files: one below the threshold, else
/// `min(available_parallelism, MAX_READERS)` (in tests always
/// [`MAX_READERS`], whatever the machine).
fn readers(n: usize) -> usize {
    #[cfg(test)]
    {
        if n < TEST_PARALLEL_READS.with(std::cell::Cell::get) {
            1
        } else {
            MAX_READERS
        }
    }
    #[cfg(not(test))]
    {
        if n < PARALLEL_READS {
            1
        } else {
            // Asked once: it reads the process's cgroup files.
            static CPUS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
            let cpus = *CPUS.get_or_init(|| {
                std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
            });
            cpus.min(MAX_READERS)
        }
    }
}

/// Reads each entry of `files` that has none yet (a file no cache vouched
/// for) as [`read_entry_in`] does, from the folder `dir` opened once, and
/// puts in its place what `each` makes of its message and the stat of its
/// file, handed the entry's slot in `extra` (at the same position) for
/// more; an entry gone since the listing keeps none. On several threads
/// when there are many, each over a contiguous part of `files` with about
/// as many files to read: nothing read is moved again.
///
/// # Errors
///
/// The error of the first entry of `files` (in order) that fails, as
/// reading them in order would.
pub(super) fn read_missing<E, X, F>(
    state: &StateDir,
    dir: &StatePath,
    files: &mut [(String, Option<E>)],
    extra: &mut [X],
    unstat: Option<SystemTime>,
    each: F,
) -> Result<()>
where
    E: Send,
    X: Send,
    F: Fn(Message, Known, &mut X) -> E + Sync,
{
    debug_assert_eq!(files.len(), extra.len());
    let todo = files.iter().filter(|(_, entry)| entry.is_none()).count();
    if todo == 0 {
        return Ok(());
    }
    // Gone since the listing: so is every file in it.
    let Some(folder) = state.folder(dir)? else {
        return Ok(());
    };
    let (folder, cap) = (&folder, message_cap(state));
    let read_part = |files: &mut [(String, Option<E>)],
                     extra: &mut [X],
                     stopped: &dyn Fn() -> bool|
     -> Result<()> {
        // One buffer per run, reused from file to file.
        let mut buf = Vec::new();
        for ((name, entry), slot) in files.iter_mut().zip(extra) {
            if entry.is_some() {
                continue;
            }
            if stopped() {
                break;
            }
            if let Some((message, known)) = read_entry_in(folder, cap, dir, name, &mut buf, unstat)?
            {
                *entry = Some(each(message, known, slot));
            }
        }
        Ok(())
    };
    let threads = readers(todo);
    if threads <= 1 {
        return read_part(files, extra, &|| false);
    }
    // Cut after every `per`-th file to read.
    let per = todo.div_ceil(threads);
    let mut parts = Vec::with_capacity(threads);
    let (mut files, mut extra) = (files, extra);
    while parts.len() + 1 < threads {
        let cut = files
            .iter()
            .enumerate()
            .filter(|(_, (_, entry))| entry.is_none())
            .nth(per - 1)
            .map_or(files.len(), |(i, _)| i + 1);
        let (part, rest) = std::mem::take(&mut files).split_at_mut(cut);
        let (part_extra, rest_extra) = std::mem::take(&mut extra).split_at_mut(cut);
        parts.push((part, part_extra));
        (files, extra) = (rest, rest_extra);
    }
    parts.push((files, extra));
    in_parts(parts, |(files, extra), stopped| {
        read_part(files, extra, stopped)
    })
}

/// Parses each of `lines` (a sent journal's whole, non-blank lines) as a
/// record, `None` for one that does not parse; in order, on several
/// threads when there are many.
pub(super) fn parse_records(lines: &[&[u8]]) -> Vec<Option<sent::Record>> {
    let parsed = in_runs(lines.len(), |range, _| {
        Ok(lines[range]
            .iter()
            .map(|line| serde_json::from_slice(line).ok())
            .collect())
    });
    // Nothing above fails.
    parsed.unwrap_or_default()
}

/// Runs `side`, for `n` items, on a thread of its own while `main` runs
/// here, when `n` is as many as are read on several threads; else (or
/// when no thread can be started) both here, `side` first. Returns both
/// results.
pub(super) fn beside<A, B>(
    n: usize,
    side: impl FnOnce() -> A + Send,
    main: impl FnOnce() -> B,
) -> (A, B)
where
    A: Send,
{
    if readers(n) <= 1 {
        return (side(), main());
    }
    // The job stays here when the thread could not be started.
    let side = Mutex::new(Some(side));
    let take = || side.lock().unwrap_or_else(PoisonError::into_inner).take();
    std::thread::scope(|scope| {
        let started = std::thread::Builder::new()
            .name("chipset-read".into())
            .spawn_scoped(scope, || take().map(|side| side()));
        match started {
            Ok(handle) => {
                let b = main();
                let a = handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                match a {
                    Some(a) => (a, b),
                    // Never expected: the thread takes the job it started with.
                    None => unreachable!("a started thread runs its job"),
                }
            }
            Err(error) => {
                tracing::debug!(%error, "running on the caller's thread");
                let a = take().map(|side| side());
                let b = main();
                match a {
                    Some(a) => (a, b),
                    None => unreachable!("a thread that did not start took no job"),
                }
            }
        }
    })
}

/// Runs `run` over `0..n` in contiguous runs, on [`readers`]`(n)` threads
/// (the caller's one of them), and returns what the runs return, in
/// order; or the error of the first run (by position) that fails. `run`
/// is handed its range and a test of whether an earlier run failed (what
/// it returns then is never used: it may stop).
fn in_runs<T, F>(n: usize, run: F) -> Result<Vec<T>>
where
    T: Send,
    F: Fn(std::ops::Range<usize>, &dyn Fn() -> bool) -> Result<Vec<T>> + Sync,
{
    let threads = readers(n);
    if threads <= 1 {
        return run(0..n, &|| false);
    }
    let size = n.div_ceil(threads);
    let mut outs: Vec<Vec<T>> = (0..n).step_by(size).map(|_| Vec::new()).collect();
    let parts: Vec<_> = (0..n)
        .step_by(size)
        .map(|at| at..n.min(at + size))
        .zip(outs.iter_mut())
        .collect();
    in_parts(parts, |(range, out), stopped| {
        *out = run(range, stopped)?;
        Ok(())
    })?;
    let mut all = Vec::with_capacity(n);
    for out in outs {
        all.extend(out);
    }
    Ok(all)
}

/// Runs `run` on each of `parts` (the contiguous parts of one job, in
/// order): the first on the caller's thread, the others on threads of
/// their own (or on the caller's, after the first, where no thread can be
/// started). Returns the error of the first part (by position) that
/// fails. `run` is handed a test of whether an earlier part failed (it
/// may then stop: its work is never used).
fn in_parts<P, F>(parts: Vec<P>, run: F) -> Result<()>
where
    P: Send,
    F: Fn(P, &dyn Fn() -> bool) -> Result<()> + Sync,
{
    #[cfg(test)]
    if parts.len() > 1 {
        PARALLEL_ROUNDS.with(|c| c.set(c.get() + 1));
    }
    // The first part (by position) that failed.
    let failed = AtomicUsize::new(usize::MAX);
    // Each part stays here until a thread (or the caller) takes it.
    let jobs: Vec<Mutex<Option<P>>> = parts.into_iter().map(|p| Mutex::new(Some(p))).collect();
    let run_k = |k: usize| {
        let Some(part) = jobs[k]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return Ok(());
        };
        let out = run(part, &|| failed.load(Ordering::Relaxed) < k);
        if out.is_err() {
            failed.fetch_min(k, Ordering::Relaxed);
        }
        out
    };
    std::thread::scope(|scope| {
        let handles: Vec<_> = (1..jobs.len())
            .map(|k| {
                let run_k = &run_k;
                std::thread::Builder::new()
                    .name("chipset-read".into())
                    .spawn_scoped(scope, move || run_k(k))
                    .ok()
            })
            .collect();
        let mut result = run_k(0);
        for (k, handle) in (1..).zip(handles) {
            let part = match handle {
                Some(handle) => handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                None => run_k(k),
            };
            if result.is_ok() {
                result = part;
            }
        }
        result
    })
}

#[cfg(test)]
thread_local! {
    /// How many times this thread read a folder on several threads.
    static PARALLEL_ROUNDS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How many times this thread read a folder on several threads.
#[cfg(test)]
pub(super) fn parallel_rounds() -> usize {
    PARALLEL_ROUNDS.with(std::cell::Cell::get)
}

/// A cache being written on a thread of its own: joined when dropped (so
/// that a gate, sweep or thread returns only once its caches are written).
/// A panic of the writer is resumed in the thread that drops it.
pub(super) struct Writing(Option<JoinHandle<()>>);

impl Drop for Writing {
    fn drop(&mut self) {
        if let Some(handle) = self.0.take()
            && let Err(panic) = handle.join()
            && !std::thread::panicking()
        {
            std::panic::resume_unwind(panic);
        }
    }
}

/// The listing of one folder to write as its cache, and what to do once
/// it is written.
pub(super) struct FolderWrite {
    pub(super) path: StatePath,
    pub(super) stamp: Stamp,
    pub(super) settled: bool,
    pub(super) files: Listing,
    /// The sent journal to empty once the cache is written (its every file
    /// is in it).
    pub(super) clear: Option<StatePath>,
}

impl FolderWrite {
    /// Encodes and writes the cache, lets go of the listing (the walk may
    /// then take it whole: [`TaskFiles::fill`]), then empties the journal;
    /// a failure of either only costs the next reader (it is logged).
    fn run(self, state: &StateDir) {
        store_cache_in(
            state,
            &self.path,
            &InboxCacheRef {
                v: VERSION,
                stamp: self.stamp,
                settled: self.settled,
                files: folder::Sorted(&self.files),
            },
        );
        drop(self.files);
        if let Some(path) = self.clear {
            sent::clear_journal(state, &path);
        }
    }

    /// Runs [`FolderWrite::run`] on a thread of its own for a listing as
    /// large as one read on several threads; here for a smaller one (a
    /// thread's start would cost about what its write saves), or when no
    /// thread can be started.
    pub(super) fn start(self, state: &StateDir) -> Writing {
        if readers(self.files.len()) <= 1 {
            self.run(state);
            return Writing(None);
        }
        let job = Arc::new(Mutex::new(Some(self)));
        let take = |job: &Mutex<Option<FolderWrite>>| {
            job.lock().unwrap_or_else(PoisonError::into_inner).take()
        };
        let started = {
            let (job, state) = (Arc::clone(&job), state.clone());
            std::thread::Builder::new()
                .name("chipset-gate-cache".into())
                .spawn(move || {
                    if let Some(write) = take(&job) {
                        write.run(&state);
                    }
                })
        };
        match started {
            Ok(handle) => Writing(Some(handle)),
            Err(error) => {
                tracing::debug!(%error, "writing a gate cache on the caller's thread");
                if let Some(write) = take(&job) {
                    write.run(state);
                }
                Writing(None)
            }
        }
    }
}
