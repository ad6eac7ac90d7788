//! The threads a batch's sync round waits on: one pool per process, started
//! on the first batch and kept, so a batch hands its syncs to threads that
//! already exist instead of starting (and tearing down) up to
//! [`MAX_THREADS`] new ones.
//!
//! Why threads at all: an `fsync` blocks its thread until the disk has the
//! data, and the syncs of many files only share their waiting (the block
//! layer merges cache flushes that wait together) when they are in flight at
//! once. Why kept: starting a thread costs about ten system calls (a stack
//! mapping, its guard page, signal stack, robust list…) and a scheduling
//! round. On a loaded 2-core machine (ext4 without a journal), 64 threads
//! started per batch took 20.1 and 22.7 ms to sync 100 files where 64 kept
//! threads took 13.9 and 14.4 ms (a C probe, 12 and 30 rounds, the orders
//! interleaved); through `StateDir::create_new_batch`, a whole batch of 100
//! took 22.5 ms before and 15.0 ms with this pool (medians of 50 batches
//! each, processes alternating, the pool's first batch left out).
//!
//! The pool grows to the largest round it has seen (at most
//! [`MAX_THREADS`]); its threads, named `chipset-sync`, sleep on a queue
//! between rounds. Each job owns its item, so nothing a job touches can be
//! freed while it runs. A panicking job does not take its thread down: the
//! panic is caught and resumed in the caller once every job of its round
//! has finished, as `std::thread::scope` would. Where no thread can be
//! started at all (a process at its thread limit), the round runs on the
//! caller's thread, one sync after another: slower, never wrong.

use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::Result;

/// The most syncs one round keeps in flight, and so the most threads the
/// pool starts. Concurrent syncs of files in one filesystem share journal
/// commits (ext4, XFS), and without a journal the block layer merges the
/// cache flushes that wait together, so a batch pays for a few sync rounds
/// instead of one sync per file. 64 rather than 16: on this repository's
/// unjournalled ext4, 100 fsyncs took a median of 10.4 ms with 64 threads
/// against 14.4 ms with 16 (41.5 against 170 ms with a background writer;
/// the store's Durability docs).
pub(crate) const MAX_THREADS: usize = 64;

type Job = Box<dyn FnOnce() + Send>;

struct Pool {
    jobs: Sender<Job>,
    queue: Arc<Mutex<Receiver<Job>>>,
    /// How many threads were started (they never stop).
    threads: Mutex<usize>,
    /// The most threads it starts: [`MAX_THREADS`] (a test's pool may say
    /// fewer).
    limit: usize,
}

/// This process's pool. Keyed by process id: a child forked after a batch
/// inherits the parent's pool in memory but none of its threads, so it gets
/// a fresh pool (the inherited one is left untouched, never used).
fn pool() -> Arc<Pool> {
    static POOL: PoolSlot = Mutex::new(None);
    pool_in(&POOL, std::process::id())
}

/// Where a process keeps its pool, with the process id that made it.
type PoolSlot = Mutex<Option<(u32, Arc<Pool>)>>;

fn pool_in(slot: &PoolSlot, pid: u32) -> Arc<Pool> {
    let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((owner, pool)) = &*slot
        && *owner == pid
    {
        return Arc::clone(pool);
    }
    let pool = Arc::new(Pool::new(MAX_THREADS));
    if let Some(inherited) = slot.replace((pid, Arc::clone(&pool))) {
        // Its queue's lock may be held by a thread that does not exist in
        // this process: never drop or touch it.
        std::mem::forget(inherited);
    }
    pool
}

impl Pool {
    /// A pool with no thread yet, that starts at most `limit`.
    fn new(limit: usize) -> Pool {
        let (jobs, queue) = mpsc::channel();
        Pool {
            jobs,
            queue: Arc::new(Mutex::new(queue)),
            threads: Mutex::new(0),
            limit,
        }
    }

    /// Starts threads until `wanted` (at most its limit) run, as far as
    /// the system lets it; returns how many run.
    fn grow(&self, wanted: usize) -> usize {
        let mut threads = self.threads.lock().unwrap_or_else(PoisonError::into_inner);
        while *threads < wanted.min(self.limit) {
            let queue = Arc::clone(&self.queue);
            let started = std::thread::Builder::new()
                .name("chipset-sync".into())
                .spawn(move || serve(&queue));
            if started.is_err() {
                break;
            }
            *threads += 1;
        }
        *threads
    }
}

/// A pool thread: takes the next job and runs it, for as long as the
/// process lives (its pool, and so the queue's sender, is never dropped).
fn serve(queue: &Mutex<Receiver<Job>>) {
    loop {
        let job = {
            let queue = queue.lock().unwrap_or_else(PoisonError::into_inner);
            queue.recv()
        };
        match job {
            Ok(job) => job(),
            Err(_) => return,
        }
    }
}

/// Runs every queued job on the caller's thread: where no pool thread
/// could be started, the round's jobs are done here (and any other round's
/// still queued, which is as good a place as any to run them).
fn run_queued(queue: &Mutex<Receiver<Job>>) {
    loop {
        let job = queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .try_recv();
        match job {
            Ok(job) => job(),
            Err(_) => return,
        }
    }
}

/// Runs `sync` on every item, up to [`MAX_THREADS`] at a time on the
/// pool's threads, and waits for all of them. Returns the items in their
/// order, with the first failure in that order (after every sync has
/// finished). A round of one item runs on the caller's thread.
///
/// # Panics
///
/// Resumes the panic of a `sync` that panicked, once the round is over.
pub(crate) fn sync_all<T, F>(items: Vec<T>, sync: F) -> (Vec<T>, Result<()>)
where
    T: Send + 'static,
    F: Fn(&T) -> Result<()> + Send + Sync + 'static,
{
    sync_all_on(&pool(), items, sync)
}

/// [`sync_all`] on `pool`.
fn sync_all_on<T, F>(pool: &Pool, items: Vec<T>, sync: F) -> (Vec<T>, Result<()>)
where
    T: Send + 'static,
    F: Fn(&T) -> Result<()> + Send + Sync + 'static,
{
    if items.len() <= 1 {
        let result = items.iter().try_for_each(&sync);
        return (items, result);
    }
    let count = items.len();
    let sync = Arc::new(sync);
    let (done, finished) = mpsc::channel();
    for (i, item) in items.into_iter().enumerate() {
        let sync = Arc::clone(&sync);
        let done = done.clone();
        let job: Job = Box::new(move || {
            let result = panic::catch_unwind(AssertUnwindSafe(|| sync(&item)));
            let _ = done.send((i, item, result));
        });
        if let Err(mpsc::SendError(job)) = pool.jobs.send(job) {
            // The queue cannot close (its threads hold the receiver), but
            // if it did, the job still runs: here.
            job();
        }
    }
    drop(done);
    // Started after the jobs are queued, so the first threads of a new
    // pool begin while the others start.
    if pool.grow(count) == 0 {
        run_queued(&pool.queue);
    }
    let mut slots: Vec<Option<T>> = (0..count).map(|_| None).collect();
    let mut results: Vec<Result<()>> = (0..count).map(|_| Ok(())).collect();
    let mut panicked = None;
    // Every job sends exactly once (a panic is caught before the send), so
    // this ends after `count` answers.
    for (i, item, result) in finished.iter().take(count) {
        slots[i] = Some(item);
        match result {
            Ok(r) => results[i] = r,
            Err(payload) => {
                panicked.get_or_insert(payload);
            }
        }
    }
    if let Some(payload) = panicked {
        panic::resume_unwind(payload);
    }
    let items = slots
        .into_iter()
        .map(|slot| slot.expect("every job sends its item back"))
        .collect();
    let result = results.into_iter().find(Result::is_err).unwrap_or(Ok(()));
    (items, result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    fn failure(i: usize) -> Error {
        Error::io(
            "sync",
            format!("/item/{i}"),
            std::io::Error::other("injected"),
        )
    }

    fn threads(pool: &Pool) -> usize {
        *pool.threads.lock().unwrap()
    }

    #[test]
    fn every_item_is_synced_once_and_comes_back_in_order() {
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&calls);
        let items: Vec<usize> = (0..100).collect();
        // Through the process's pool, as the store calls it.
        let (back, result) = sync_all(items, move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
        result.unwrap();
        assert_eq!(back, (0..100).collect::<Vec<_>>());
        assert_eq!(calls.load(Ordering::SeqCst), 100);
    }

    #[test]
    fn the_syncs_of_a_round_are_in_flight_together_on_the_pools_threads() {
        // Each sync waits until 8 are running at once, or gives up after a
        // guard (5 s: starting 8 threads takes milliseconds even on a
        // loaded machine; short enough that a round run one after another
        // fails here in 40 s instead of hanging): run one after another,
        // none would ever see 8 together.
        let pool = Pool::new(MAX_THREADS);
        let caller = std::thread::current().id();
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let on_caller = Arc::new(AtomicUsize::new(0));
        let (r, m, c) = (
            Arc::clone(&running),
            Arc::clone(&most),
            Arc::clone(&on_caller),
        );
        let (_, result) = sync_all_on(&pool, (0..8).collect::<Vec<usize>>(), move |_| {
            if std::thread::current().id() == caller {
                c.fetch_add(1, Ordering::SeqCst);
            }
            let now = r.fetch_add(1, Ordering::SeqCst) + 1;
            m.fetch_max(now, Ordering::SeqCst);
            let start = std::time::Instant::now();
            while r.load(Ordering::SeqCst) < 8 && start.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(())
        });
        result.unwrap();
        assert_eq!(most.load(Ordering::SeqCst), 8);
        assert_eq!(on_caller.load(Ordering::SeqCst), 0, "the caller only waits");
        assert_eq!(threads(&pool), 8, "the pool grew to the round");
    }

    #[test]
    fn the_first_failure_in_order_is_returned_after_every_sync_ran() {
        let pool = Pool::new(4);
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&calls);
        let (back, result) = chipset_testkit::returns("a round of 20 syncs", move || {
            sync_all_on(&pool, (0..20).collect::<Vec<usize>>(), move |&i| {
                counted.fetch_add(1, Ordering::SeqCst);
                if i == 7 || i == 13 {
                    return Err(failure(i));
                }
                Ok(())
            })
        });
        assert_eq!(back, (0..20).collect::<Vec<_>>());
        assert_eq!(calls.load(Ordering::SeqCst), 20);
        let err = result.unwrap_err();
        assert!(err.to_string().contains("/item/7"), "{err}");
    }

    #[test]
    fn a_single_item_runs_on_the_callers_thread_and_starts_no_thread() {
        let pool = Pool::new(MAX_THREADS);
        let caller = std::thread::current().id();
        let (back, result) = sync_all_on(&pool, vec![1_u8], move |_| {
            assert_eq!(std::thread::current().id(), caller);
            Ok(())
        });
        result.unwrap();
        assert_eq!(back, vec![1]);
        assert_eq!(threads(&pool), 0);
    }

    #[test]
    fn a_panic_reaches_the_caller_and_the_pool_keeps_working() {
        let pool = Pool::new(2);
        let caught = panic::catch_unwind(AssertUnwindSafe(|| {
            sync_all_on(&pool, (0..4).collect::<Vec<usize>>(), |&i| {
                assert_ne!(i, 2, "sync of item 2 panicked");
                Ok(())
            })
        }));
        let payload = caught.expect_err("the panic is resumed in the caller");
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        assert!(message.contains("sync of item 2 panicked"), "{message}");
        let (back, result) = sync_all_on(&pool, (0..4).collect::<Vec<usize>>(), |_| Ok(()));
        result.unwrap();
        assert_eq!(back, vec![0, 1, 2, 3]);
        assert_eq!(threads(&pool), 2, "no thread was lost to the panic");
    }

    #[test]
    fn the_pool_grows_to_its_limit_and_no_further() {
        let pool = Pool::new(3);
        let (_, result) = sync_all_on(&pool, vec![1_u8, 2], |_| Ok(()));
        result.unwrap();
        assert_eq!(threads(&pool), 2);
        let (back, result) = sync_all_on(&pool, (0..50).collect::<Vec<usize>>(), |_| Ok(()));
        result.unwrap();
        assert_eq!(back.len(), 50);
        assert_eq!(threads(&pool), 3);
        assert_eq!(
            super::pool().limit,
            64,
            "the process pool keeps 64 syncs in flight"
        );
    }

    #[test]
    fn without_threads_the_round_runs_on_the_callers_thread() {
        // A pool that can start no thread: a process at its thread limit.
        let pool = Arc::new(Pool::new(0));
        let round = Arc::clone(&pool);
        let (back, result) = chipset_testkit::returns("a round without threads", move || {
            let caller = std::thread::current().id();
            sync_all_on(&round, (0..10).collect::<Vec<usize>>(), move |&i| {
                assert_eq!(std::thread::current().id(), caller);
                if i == 3 {
                    return Err(failure(i));
                }
                Ok(())
            })
        });
        assert_eq!(back, (0..10).collect::<Vec<_>>());
        assert!(result.unwrap_err().to_string().contains("/item/3"));
        assert_eq!(threads(&pool), 0);
    }

    #[test]
    fn a_forked_child_gets_a_pool_of_its_own() {
        let slot: PoolSlot = Mutex::new(None);
        let parent = pool_in(&slot, 100);
        assert_eq!(parent.grow(3), 3);
        assert!(
            Arc::ptr_eq(&parent, &pool_in(&slot, 100)),
            "one process keeps its pool"
        );
        // What a child forked from process 100 sees: the parent's pool in
        // memory, another pid, and none of the parent's threads.
        let child = pool_in(&slot, 101);
        assert!(!Arc::ptr_eq(&parent, &child));
        assert_eq!(threads(&child), 0, "a child inherits no thread");
        assert!(Arc::ptr_eq(&child, &pool_in(&slot, 101)));
    }
}
