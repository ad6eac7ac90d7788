//! The contract every backend keeps, written once and run on both.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use chipset_backend::{Backend, Created, Error, Key, LogPos, MAX_VALUE, Wake};
use chipset_testkit as kit;

use crate::support::{Fx, MARK, dir, key};

chipset_backend::both!(
    crate::support::Fx;
    read_create_replace_remove,
    create_race_threads_one_winner,
    create_race_processes_one_winner,
    cas_conflicts_change_nothing,
    cas_counter_loses_no_update,
    retries_answer_as_the_first_attempt,
    appends_are_ordered_and_whole,
    listing_is_in_byte_order,
    folders_are_listed_in_byte_order,
    lock_excludes_threads_and_handles,
    lock_dies_with_its_holder,
    write_on_one_handle_wakes_another,
    one_mebibyte_value_and_no_more,
    names_that_look_like_sql_are_names,
    bad_records_append_nothing,
    clock_is_near_the_system_clock,
    moves_never_overwrite_and_one_mover_wins,
    create_or_replace_writes_over_what_was_read,
    create_or_replace_loops_lose_no_update,
);

fn read_create_replace_remove(fx: &Fx) {
    let b = &fx.b;
    let k = key("hooks", "alice.json");
    assert_eq!(b.read(&k).unwrap(), None);
    let Created::New(v1) = b.create(&k, b"one\n").unwrap() else {
        panic!("first create must win")
    };
    let got = b.read(&k).unwrap().unwrap();
    assert_eq!((got.value.as_slice(), got.version), (&b"one\n"[..], v1));
    let v2 = b.replace(&k, v1, b"two\n").unwrap();
    assert_ne!(v1, v2);
    assert_eq!(b.read(&k).unwrap().unwrap().value, b"two\n");
    let v3 = b.put(&k, b"three\n").unwrap();
    assert_eq!(b.read(&k).unwrap().unwrap().version, v3);
    b.remove(&k, v3).unwrap();
    assert_eq!(b.read(&k).unwrap(), None);
    // Gone stays gone: a retry of the remove succeeds.
    b.remove(&k, v3).unwrap();
    assert!(matches!(
        b.replace(&k, v3, b"four\n"),
        Err(Error::NotFound { .. })
    ));
}

fn create_race_threads_one_winner(fx: &Fx) {
    let k = key("race", "threads.json");
    let n = 16;
    let barrier = Arc::new(Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|i| {
            // Half on the shared handle, half on handles of their own.
            let b = if i % 2 == 0 {
                Arc::clone(&fx.b)
            } else {
                fx.reopen()
            };
            let (k, barrier) = (k.clone(), Arc::clone(&barrier));
            thread::spawn(move || {
                let value = format!("writer {i}\n");
                barrier.wait();
                (value.clone(), b.create(&k, value.as_bytes()).unwrap())
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let winners: Vec<_> = results
        .iter()
        .filter(|(_, c)| matches!(c, Created::New(_)))
        .collect();
    assert_eq!(winners.len(), 1, "exactly one creator wins");
    let stored = fx.b.read(&k).unwrap().unwrap();
    assert_eq!(stored.value, winners[0].0.as_bytes());
    for (_, c) in &results {
        if let Created::Existing(now) = c {
            assert_eq!(now.value, stored.value, "losers see the winner's value");
        }
    }
}

fn create_race_processes_one_winner(fx: &Fx) {
    let start = tempfile::tempdir().unwrap();
    let start_file = start.path().join("go");
    let n = 8;
    let mut children: Vec<_> = (0..n)
        .map(|i| {
            kit::spawn(
                "child_entry",
                "create",
                &[
                    fx.spec(),
                    start_file.display().to_string(),
                    "procs.json".into(),
                    format!("process {i}\n"),
                ],
            )
        })
        .collect();
    thread::sleep(Duration::from_millis(300));
    #[allow(clippy::disallowed_methods, reason = "the start line for the children")]
    std::fs::write(&start_file, b"").unwrap();
    let mut said = Vec::new();
    for child in &mut children {
        said.extend(kit::own_lines(child, MARK));
        kit::wait_ok(child, kit::PATIENT);
    }
    assert_eq!(said.len(), n);
    assert_eq!(said.iter().filter(|s| *s == "new").count(), 1, "{said:?}");
    let stored = fx.b.read(&key("race", "procs.json")).unwrap().unwrap();
    assert!(
        String::from_utf8(stored.value)
            .unwrap()
            .starts_with("process ")
    );
}

fn cas_conflicts_change_nothing(fx: &Fx) {
    let b = &fx.b;
    let k = key("hooks", "bob.json");
    let Created::New(v1) = b.create(&k, b"a\n").unwrap() else {
        panic!()
    };
    let v2 = b.replace(&k, v1, b"b\n").unwrap();
    let err = b.replace(&k, v1, b"c\n").unwrap_err();
    assert!(
        matches!(&err, Error::Conflict { current: Some(now), .. } if now.version == v2),
        "{err}"
    );
    assert_eq!(
        err.already_holds(b"c\n"),
        None,
        "not a retry: other bytes are there"
    );
    assert!(matches!(b.remove(&k, v1), Err(Error::Conflict { .. })));
    let now = b.read(&k).unwrap().unwrap();
    assert_eq!((now.value.as_slice(), now.version), (&b"b\n"[..], v2));
    // Another handle sees the same versions and the same conflicts.
    let other = fx.reopen();
    assert_eq!(other.read(&k).unwrap().unwrap().version, v2);
    assert!(matches!(
        other.replace(&k, v1, b"d\n"),
        Err(Error::Conflict { .. })
    ));
}

fn cas_counter_loses_no_update(fx: &Fx) {
    let k = key("counters", "n.json");
    let _ = fx.b.create(&k, b"0").unwrap();
    race_increments(fx, &k, 6, 25, |b, k| {
        let now = b.read(k).unwrap().unwrap();
        let n: u64 = std::str::from_utf8(&now.value).unwrap().parse().unwrap();
        match b.replace(k, now.version, (n + 1).to_string().as_bytes()) {
            Ok(_) => true,
            Err(Error::Conflict { .. }) => false,
            Err(e) => panic!("{e}"),
        }
    });
}

/// Runs `threads` threads, each on its own handle, that each add one to
/// the counter at `k` `each` times, retrying `try_increment` (true when
/// its write won) until it wins; then the counter must hold every
/// increment.
fn race_increments(
    fx: &Fx,
    k: &Key,
    threads: usize,
    each: usize,
    try_increment: fn(&dyn Backend, &Key) -> bool,
) {
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let b = fx.reopen();
            let k = k.clone();
            thread::spawn(move || {
                for _ in 0..each {
                    while !try_increment(&*b, &k) {}
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let n = fx.b.read(k).unwrap().unwrap().value;
    assert_eq!(n, (threads * each).to_string().as_bytes());
}

fn retries_answer_as_the_first_attempt(fx: &Fx) {
    let b = &fx.b;
    let k = key("mail", "1700000000000-x.json");
    let first = b.create(&k, b"hello\n").unwrap();
    let Created::New(v1) = first else { panic!() };
    // The same create again (as after an outcome-unknown): the first's success.
    let again = b.create(&k, b"hello\n").unwrap();
    assert!(again.is_retry_of(b"hello\n"));
    assert!(matches!(&again, Created::Existing(now) if now.version == v1));
    // Another value under the same id is refused: it is not a retry.
    assert!(!b.create(&k, b"other\n").unwrap().is_retry_of(b"other\n"));
    // A replace retried after it applied finds its own write: the
    // conflict says so and gives the version it made.
    let v2 = b.replace(&k, v1, b"hello again\n").unwrap();
    let err = b.replace(&k, v1, b"hello again\n").unwrap_err();
    assert_eq!(err.already_holds(b"hello again\n"), Some(v2));
    assert_eq!(b.read(&k).unwrap().unwrap().value, b"hello again\n");
}

fn appends_are_ordered_and_whole(fx: &Fx) {
    let log = key("mail", "manifest.jsonl");
    let (threads, batches, per) = (6, 10, 5);
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let b = fx.reopen();
            let (log, barrier) = (log.clone(), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                for i in 0..batches {
                    let records: Vec<Vec<u8>> = (0..per)
                        .map(|r| format!("{{\"t\": {t}, \"i\": {i}, \"r\": {r}}}").into_bytes())
                        .collect();
                    let refs: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
                    b.append(&log, &refs).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let read = fx.b.read_log(&log, LogPos::START).unwrap();
    assert_eq!(read.records.len(), threads * batches * per);
    let parsed: Vec<(u64, u64, u64)> = read
        .records
        .iter()
        .map(|r| {
            let v: serde_json::Value = serde_json::from_slice(r).unwrap();
            (
                v["t"].as_u64().unwrap(),
                v["i"].as_u64().unwrap(),
                v["r"].as_u64().unwrap(),
            )
        })
        .collect();
    // Batches whole and never interleaved; each writer's batches in order.
    let mut next_batch = vec![0; threads];
    for chunk in parsed.chunks(per) {
        let (t, i, _) = chunk[0];
        assert!(
            chunk
                .iter()
                .enumerate()
                .all(|(r, &(tt, ii, rr))| (tt, ii, rr) == (t, i, r as u64))
        );
        assert_eq!(i, next_batch[t as usize]);
        next_batch[t as usize] += 1;
    }
    // Records come back canonical: sorted keys, no spaces.
    assert_eq!(
        read.records[0],
        format!("{{\"i\":0,\"r\":0,\"t\":{}}}", parsed[0].0).into_bytes()
    );
    // Reading on from `next` sees only what came after.
    assert!(fx.b.read_log(&log, read.next).unwrap().records.is_empty());
    fx.b.append(&log, &[b"{\"late\": true}"]).unwrap();
    let tail = fx.b.read_log(&log, read.next).unwrap();
    assert_eq!(tail.records, vec![b"{\"late\":true}".to_vec()]);
    assert!(
        fx.b.read_log(&key("mail", "none.jsonl"), LogPos::START)
            .unwrap()
            .records
            .is_empty()
    );
}

fn listing_is_in_byte_order(fx: &Fx) {
    let names = [
        "b.json", "B.json", "a.json", "10.json", "9.json", "a-b.json", "a_b.json", "Z", "é.json",
    ];
    for n in names {
        let _ = fx.b.create(&key("bus/alice", n), b"{}").unwrap();
    }
    // A folder below and a folder beside are not listed.
    let _ = fx.b.create(&key("bus/alice/sub", "x.json"), b"{}").unwrap();
    let _ = fx.b.create(&key("bus/bob", "y.json"), b"{}").unwrap();
    let mut want: Vec<&str> = names.to_vec();
    want.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    assert_eq!(fx.b.list(&dir("bus/alice")).unwrap(), want);
    assert!(fx.b.list(&dir("bus/nobody")).unwrap().is_empty());
}

fn folders_are_listed_in_byte_order(fx: &Fx) {
    // Folders below `nudge/` holding a value at some depth; names that
    // would be LIKE patterns (`_`, `%`) match only themselves.
    for (d, n) in [
        ("nudge/bob", "latest.json"),
        ("nudge/Alice/nudges", "n1.json"),
        ("nudge/a_b", "latest.json"),
        ("nudge/a%b/deep/er", "x.json"),
        ("nudgeX/carol", "latest.json"),
        ("nudge_/dave", "latest.json"),
    ] {
        let _ = fx.b.create(&key(d, n), b"{}").unwrap();
    }
    // A value directly in `nudge/` is not a folder.
    let _ = fx.b.create(&key("nudge", "top.json"), b"{}").unwrap();
    let mut want = vec!["Alice", "a%b", "a_b", "bob"];
    want.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    assert_eq!(fx.b.list_dirs(&dir("nudge")).unwrap(), want);
    assert_eq!(fx.b.list_dirs(&dir("nudge/a%b")).unwrap(), ["deep"]);
    assert!(fx.b.list_dirs(&dir("nudge/bob")).unwrap().is_empty());
    assert!(fx.b.list_dirs(&dir("nobody")).unwrap().is_empty());
}

fn lock_excludes_threads_and_handles(fx: &Fx) {
    let k = key("hooks", "carol.json");
    let inside = Arc::new(AtomicBool::new(false));
    let entered = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..6)
        .map(|i| {
            let b = if i % 2 == 0 {
                Arc::clone(&fx.b)
            } else {
                fx.reopen()
            };
            let (k, inside, entered) = (k.clone(), Arc::clone(&inside), Arc::clone(&entered));
            thread::spawn(move || {
                for _ in 0..10 {
                    let _g = b.lock(&k).unwrap();
                    assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                    thread::sleep(Duration::from_millis(1));
                    entered.fetch_add(1, Ordering::SeqCst);
                    inside.store(false, Ordering::SeqCst);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(entered.load(Ordering::SeqCst), 60);
}

fn lock_dies_with_its_holder(fx: &Fx) {
    let mut child = kit::spawn("child_entry", "hold", &[fx.spec(), "held.json".into()]);
    let said: Vec<String> = kit::own_lines(&mut child, MARK).take(1).collect();
    assert_eq!(said, ["locked"]);
    // Held: a thread of ours cannot take it yet.
    let b = fx.reopen();
    let k = key("locks", "held.json");
    let taken = Arc::new(AtomicBool::new(false));
    let waiter = {
        let (b, k, taken) = (Arc::clone(&b), k.clone(), Arc::clone(&taken));
        thread::spawn(move || {
            let _g = b.lock(&k).unwrap();
            taken.store(true, Ordering::SeqCst);
        })
    };
    thread::sleep(Duration::from_millis(300));
    assert!(
        !taken.load(Ordering::SeqCst),
        "the lock was taken while held"
    );
    kit::kill9(&mut child);
    kit::returns("the lock after its holder died", move || {
        waiter.join().unwrap()
    });
    assert!(taken.load(Ordering::SeqCst));
}

fn write_on_one_handle_wakes_another(fx: &Fx) {
    let d = dir("bus/dave");
    let mut wait =
        fx.b.watch(std::slice::from_ref(&d), Duration::from_secs(30))
            .unwrap();
    let writer = fx.reopen();
    let k = d.key("1.json").unwrap();
    let t = thread::spawn(move || {
        thread::sleep(Duration::from_millis(200));
        let at = Instant::now();
        let _ = writer.create(&k, b"{}").unwrap();
        at
    });
    let wake = wait.wait(Duration::from_secs(10)).unwrap();
    let woke = Instant::now();
    let wrote = t.join().unwrap();
    assert_eq!(wake, Wake::Changed);
    assert!(woke.saturating_duration_since(wrote) < Duration::from_secs(2));
    // Nothing more: the wait times out.
    let quiet = wait.wait(Duration::from_millis(100)).unwrap();
    assert!(matches!(quiet, Wake::TimedOut | Wake::Changed), "{quiet:?}");
}

fn one_mebibyte_value_and_no_more(fx: &Fx) {
    let k = key("mail", "big.json");
    let big = vec![b'x'; MAX_VALUE];
    let Created::New(v) = fx.b.create(&k, &big).unwrap() else {
        panic!()
    };
    assert_eq!(fx.b.read(&k).unwrap().unwrap().value.len(), MAX_VALUE);
    let over = vec![b'y'; MAX_VALUE + 1];
    let k2 = key("mail", "bigger.json");
    assert!(matches!(
        fx.b.create(&k2, &over),
        Err(Error::TooLarge { .. })
    ));
    assert!(matches!(
        fx.b.replace(&k, v, &over),
        Err(Error::TooLarge { .. })
    ));
    assert!(matches!(fx.b.put(&k, &over), Err(Error::TooLarge { .. })));
    assert_eq!(fx.b.read(&k2).unwrap(), None);
    assert_eq!(fx.b.read(&k).unwrap().unwrap().version, v);
}

fn names_that_look_like_sql_are_names(fx: &Fx) {
    let hostile = [
        "x'); DROP TABLE chipset_entries; --",
        "a' OR '1'='1",
        "$1",
        "robert\"; DELETE FROM chipset_log_records; --",
    ];
    for (i, name) in hostile.iter().enumerate() {
        let k = key("hooks", name);
        let value = format!("'{name}' -- {i}\n");
        assert!(matches!(
            fx.b.create(&k, value.as_bytes()).unwrap(),
            Created::New(_)
        ));
        assert_eq!(fx.b.read(&k).unwrap().unwrap().value, value.as_bytes());
        let log = key("logs", name);
        fx.b.append(
            &log,
            &[format!("{{\"q\": \"{i}'; DROP TABLE x; --\"}}").as_bytes()],
        )
        .unwrap();
        assert_eq!(fx.b.read_log(&log, LogPos::START).unwrap().records.len(), 1);
    }
    let mut want: Vec<&str> = hostile.to_vec();
    want.sort_unstable();
    assert_eq!(fx.b.list(&dir("hooks")).unwrap(), want);
    // The tables are all still there.
    let _ = fx.b.create(&key("hooks", "after.json"), b"{}").unwrap();
    assert_eq!(fx.b.list(&dir("hooks")).unwrap().len(), hostile.len() + 1);
}

fn bad_records_append_nothing(fx: &Fx) {
    let log = key("bus", "events.jsonl");
    fx.b.append(&log, &[b"{\"ok\": 1}"]).unwrap();
    for bad in [&b"{"[..], b"not json", b"{} {}", b""] {
        let err = fx.b.append(&log, &[b"{\"fine\": 2}", bad]).unwrap_err();
        assert!(matches!(err, Error::BadRecord { .. }), "{err}");
    }
    let over = format!("\"{}\"", "z".repeat(MAX_VALUE));
    assert!(matches!(
        fx.b.append(&log, &[over.as_bytes()]),
        Err(Error::TooLarge { .. })
    ));
    assert_eq!(
        fx.b.read_log(&log, LogPos::START).unwrap().records,
        vec![b"{\"ok\":1}".to_vec()]
    );
}

fn clock_is_near_the_system_clock(fx: &Fx) {
    let system = chipset_store::SystemClock;
    let ours = chipset_store::Clock::now(&system);
    let theirs = fx.b.now().unwrap();
    let skew = (theirs.unix_ms() - ours.unix_ms()).abs();
    assert!(skew < 5_000, "skew {skew} ms");
    let later = fx.b.now().unwrap();
    assert!(later >= theirs);
}

fn moves_never_overwrite_and_one_mover_wins(fx: &Fx) {
    let b = &fx.b;
    let from = key("mail/inbox/erin", "m1.json");
    let to = key("mail/archive", "m1.json");
    let Created::New(v) = b.create(&from, b"request\n").unwrap() else {
        panic!()
    };
    // A stale version and a taken destination move nothing.
    let taken = key("mail/archive", "taken.json");
    let _ = b.create(&taken, b"other\n").unwrap();
    let err = b.move_new(&from, v, &taken).unwrap_err();
    assert!(
        matches!(&err, Error::Exists { current: Some(now), .. } if now.value == b"other\n"),
        "{err}"
    );
    let v2 = b.replace(&from, v, b"request v2\n").unwrap();
    assert!(matches!(
        b.move_new(&from, v, &to),
        Err(Error::Conflict { .. })
    ));
    assert_eq!(b.read(&from).unwrap().unwrap().value, b"request v2\n");
    assert_eq!(b.read(&to).unwrap(), None);
    // Racing movers to several destinations: exactly one wins.
    let n = 8;
    let barrier = Arc::new(Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let b = fx.reopen();
            let (from, barrier) = (from.clone(), Arc::clone(&barrier));
            thread::spawn(move || {
                let to = key("mail/archive", &format!("race-{i}.json"));
                barrier.wait();
                b.move_new(&from, v2, &to).map(|_| to)
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let won: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(won.len(), 1, "{results:?}");
    for r in &results {
        if let Err(e) = r {
            assert!(matches!(e, Error::NotFound { .. }), "{e}");
        }
    }
    assert_eq!(b.read(&from).unwrap(), None);
    assert_eq!(b.read(won[0]).unwrap().unwrap().value, b"request v2\n");
    let archived = b.list(&dir("mail/archive")).unwrap();
    assert_eq!(archived.len(), 2, "{archived:?}");
    // The retry of a move that applied: the source is gone, the value is there.
    assert!(matches!(
        b.move_new(&from, v2, won[0]),
        Err(Error::NotFound { .. })
    ));
    assert_eq!(b.read(won[0]).unwrap().unwrap().value, b"request v2\n");
}

fn create_or_replace_writes_over_what_was_read(fx: &Fx) {
    let b = &fx.b;
    let k = key("hooks", "carol.json");
    // Nothing was read: a create.
    let v1 = b.create_or_replace(&k, None, b"one\n").unwrap().unwrap();
    assert_eq!(b.read(&k).unwrap().unwrap().version, v1);
    // Something is there now: nothing written, even with the same bytes.
    assert_eq!(b.create_or_replace(&k, None, b"one\n").unwrap(), None);
    assert_eq!(b.create_or_replace(&k, None, b"other\n").unwrap(), None);
    // The version read: a replace.
    let v2 = b
        .create_or_replace(&k, Some(v1), b"two\n")
        .unwrap()
        .unwrap();
    assert_ne!(v1, v2);
    // A stale version: nothing written.
    assert_eq!(b.create_or_replace(&k, Some(v1), b"three\n").unwrap(), None);
    let now = b.read(&k).unwrap().unwrap();
    assert_eq!((now.value.as_slice(), now.version), (&b"two\n"[..], v2));
    // Removed since the read: nothing written, nothing brought back.
    b.remove(&k, v2).unwrap();
    assert_eq!(b.create_or_replace(&k, Some(v2), b"four\n").unwrap(), None);
    assert_eq!(b.read(&k).unwrap(), None);
    // Any other error is the caller's.
    let big = vec![b'x'; MAX_VALUE + 1];
    assert!(matches!(
        b.create_or_replace(&k, None, &big),
        Err(Error::TooLarge { .. })
    ));
}

fn create_or_replace_loops_lose_no_update(fx: &Fx) {
    // Counters that start absent: every thread's first write may be the
    // create, and each lost race reads and decides again.
    let k = key("counters", "from-nothing.json");
    race_increments(fx, &k, 4, 10, |b, k| {
        let read = b.read(k).unwrap();
        let n: u64 = read.as_ref().map_or(0, |r| {
            std::str::from_utf8(&r.value).unwrap().parse().unwrap()
        });
        let seen = read.map(|r| r.version);
        b.create_or_replace(k, seen, (n + 1).to_string().as_bytes())
            .unwrap()
            .is_some()
    });
}
