//! Reading the files of a folder that no cache vouches for (and parsing a
//! sent journal's records) on several threads, and writing a folder's
//! cache beside the rest of the gate.
//!
//! # Why threads
//!
//! The first gate of a state no cache was made for reads every file of the
//! folder (an `openat2`, a `statx`, two `read`s and a `close` each, then a
//! parse), as the scan does, and then writes the caches that spare the next
//! gate all of it. On one thread it cannot cost less than the scan. Reads of
//! different files share nothing but the open state root, so a folder's
//! reads are split into contiguous runs read at once (at most
//! [`MAX_READERS`] threads, and only from [`PARALLEL_READS`] files on, where
//! the threads' start costs little beside the reads), and the folder cache
//! is encoded and written on its own thread while the gate goes on. The
//! same holds for the records of a sent journal (a gate right after
//! 10,000 sends parses 10,000 of them): its lines are parsed in runs.
//!
//! # Failing closed as one thread does
//!
//! Each run stops at its first failing file, and the runs' results are
//! taken in listing order: the error returned is the one of the first
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

/// Reads the entries `names` of the folder `dir` as [`read_entry_stat`]
/// does, turning each message read with the stat of its file into a `T`
/// with `each`; `None` for a file gone since the listing. In the order of
/// `names`, on several threads when there are many.
///
/// # Errors
///
/// The error of the first entry of `names` that fails, as reading them in
/// order would.
pub(super) fn read_entries<T, F>(
    state: &StateDir,
    dir: &StatePath,
    names: &[&str],
    each: F,
) -> Result<Vec<Option<T>>>
where
    T: Send,
    F: Fn(Message, chipset_store::Stat) -> T + Sync,
{
    in_runs(names.len(), |range, stopped| {
        let mut out = Vec::with_capacity(range.len());
        for name in &names[range] {
            if stopped() {
                break;
            }
            out.push(read_entry_stat(state, dir, name)?.map(|(m, stat)| each(m, stat)));
        }
        Ok(out)
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
    #[cfg(test)]
    PARALLEL_ROUNDS.with(|c| c.set(c.get() + 1));
    // The first run (by position) that failed.
    let failed = AtomicUsize::new(usize::MAX);
    let run_k = |k: usize, range: std::ops::Range<usize>| {
        let out = run(range, &|| failed.load(Ordering::Relaxed) < k);
        if out.is_err() {
            failed.fetch_min(k, Ordering::Relaxed);
        }
        out
    };
    let size = n.div_ceil(threads);
    let ranges: Vec<std::ops::Range<usize>> = (0..n)
        .step_by(size)
        .map(|at| at..n.min(at + size))
        .collect();
    std::thread::scope(|scope| {
        // Runs after the first on threads of their own (or here, after the
        // first, where no thread can be started); the first one here.
        let handles: Vec<_> = ranges
            .iter()
            .enumerate()
            .skip(1)
            .map(|(k, range)| {
                let (run_k, range) = (&run_k, range.clone());
                std::thread::Builder::new()
                    .name("chipset-read".into())
                    .spawn_scoped(scope, move || run_k(k, range))
                    .ok()
            })
            .collect();
        let mut out = Vec::with_capacity(n);
        out.extend(run_k(0, ranges[0].clone())?);
        for (k, handle) in (1..).zip(handles) {
            let part = match handle {
                Some(handle) => handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                None => run_k(k, ranges[k].clone()),
            };
            out.extend(part?);
        }
        Ok(out)
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
    pub(super) files: Arc<Vec<(String, FileEntry)>>,
    /// The sent journal to empty once the cache is written (its every file
    /// is in it).
    pub(super) clear: Option<StatePath>,
}

impl FolderWrite {
    /// Encodes and writes the cache, then empties the journal; a failure
    /// of either only costs the next reader (it is logged).
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
