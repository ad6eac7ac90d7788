//! Several changes as one (`Backend::transact`) and a folder's values in
//! one read (`Backend::read_all`), on both backends from the same bodies;
//! and a transaction cut at its commit, on PostgreSQL.

use std::sync::{Arc, Barrier};
use std::thread;

use chipset_backend::{Backend, Created, Error, LogPos, PgBackend, PgOptions, Step};
use chipset_store::Classify;

use crate::support::{Fx, dir, key, pg_url};
use chipset_backend::testing::Proxy;

chipset_backend::both!(
    crate::support::Fx;
    every_step_applies_in_order,
    a_refused_first_step_applies_nothing,
    a_refused_later_step_is_atomic_on_a_server,
    the_retry_of_a_transaction_that_applied_is_recognised,
    read_all_is_list_and_read_in_byte_order,
    concurrent_transfers_keep_the_sum,
);

fn is_pg(fx: &Fx) -> bool {
    fx.spec().starts_with("pg\t")
}

fn every_step_applies_in_order(fx: &Fx) {
    let b = &fx.b;
    let (old, gone, moved, log) = (
        key("t/a", "old.json"),
        key("t/a", "gone.json"),
        key("t/a", "moved.json"),
        key("t", "log.jsonl"),
    );
    let Created::New(v_old) = b.create(&old, b"old").unwrap() else {
        panic!()
    };
    let Created::New(v_gone) = b.create(&gone, b"gone").unwrap() else {
        panic!()
    };
    let new = key("t/b", "new.json");
    let to = key("t/b", "moved.json");
    let out = b
        .transact(&[
            Step::Create {
                key: &new,
                value: b"new",
            },
            Step::Replace {
                key: &old,
                expected: v_old,
                value: b"newer",
            },
            Step::MoveNew {
                from: &old,
                expected: v_old,
                to: &moved,
            },
            Step::Remove {
                key: &gone,
                expected: v_gone,
            },
            Step::Append {
                log: &log,
                records: &[b"{\"n\":1}", b"{\"n\":2}"],
            },
        ])
        .unwrap_err();
    // The move named the version before the replace: refused.
    assert!(matches!(out, Error::Conflict { .. }), "{out}");
    if is_pg(fx) {
        assert_eq!(b.read(&new).unwrap(), None, "nothing of it applied");
        assert_eq!(b.read(&old).unwrap().unwrap().value, b"old");
    }
    // Start again, right this time.
    if let Some(v) = b.read(&new).unwrap() {
        b.remove(&new, v.version).unwrap();
    }
    let v_old = b.read(&old).unwrap().unwrap().version;
    let replaced = b
        .transact(&[Step::Replace {
            key: &old,
            expected: v_old,
            value: b"newer",
        }])
        .unwrap()[0]
        .unwrap();
    let out = b
        .transact(&[
            Step::Create {
                key: &new,
                value: b"new",
            },
            Step::MoveNew {
                from: &old,
                expected: replaced,
                to: &to,
            },
            Step::Remove {
                key: &gone,
                expected: v_gone,
            },
            Step::Append {
                log: &log,
                records: &[b"{\"n\":1}", b"{\"n\":2}"],
            },
        ])
        .unwrap();
    assert_eq!(out.len(), 4);
    assert_eq!(b.read(&new).unwrap().unwrap().version, out[0].unwrap());
    assert_eq!(b.read(&to).unwrap().unwrap().value, b"newer");
    assert_eq!(b.read(&old).unwrap(), None);
    assert_eq!(b.read(&gone).unwrap(), None);
    assert_eq!((out[2], out[3]), (None, None));
    let records = b.read_log(&log, LogPos::START).unwrap().records;
    assert_eq!(records, vec![b"{\"n\":1}".to_vec(), b"{\"n\":2}".to_vec()]);
    assert_eq!(b.list(&dir("t/b")).unwrap(), ["moved.json", "new.json"]);
    // A remove of what is gone is no failure, inside a transaction too.
    b.transact(&[Step::Remove {
        key: &gone,
        expected: v_gone,
    }])
    .unwrap();
}

fn a_refused_first_step_applies_nothing(fx: &Fx) {
    let b = &fx.b;
    let (taken, other, log) = (
        key("t", "taken.json"),
        key("t", "other.json"),
        key("t", "log.jsonl"),
    );
    let Created::New(_) = b.create(&taken, b"first").unwrap() else {
        panic!()
    };
    let err = b
        .transact(&[
            Step::Create {
                key: &taken,
                value: b"second",
            },
            Step::Create {
                key: &other,
                value: b"x",
            },
            Step::Append {
                log: &log,
                records: &[b"{}"],
            },
        ])
        .unwrap_err();
    let Error::Exists {
        current: Some(now), ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(now.value, b"first");
    assert_eq!(b.read(&other).unwrap(), None);
    assert!(b.read_log(&log, LogPos::START).unwrap().records.is_empty());
    // Bad input is refused before anything is written.
    let err = b
        .transact(&[
            Step::Create {
                key: &other,
                value: b"x",
            },
            Step::Append {
                log: &log,
                records: &[b"not json"],
            },
        ])
        .unwrap_err();
    assert!(matches!(err, Error::BadRecord { .. }), "{err}");
    assert_eq!(b.read(&other).unwrap(), None);
}

fn a_refused_later_step_is_atomic_on_a_server(fx: &Fx) {
    let b = &fx.b;
    let (first, second) = (key("t", "first.json"), key("t", "second.json"));
    let Created::New(v) = b.create(&second, b"one").unwrap() else {
        panic!()
    };
    b.replace(&second, v, b"two").unwrap();
    let err = b
        .transact(&[
            Step::Create {
                key: &first,
                value: b"x",
            },
            Step::Replace {
                key: &second,
                expected: v,
                value: b"three",
            },
        ])
        .unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err}");
    assert_eq!(b.read(&second).unwrap().unwrap().value, b"two");
    // A server applies all or nothing; a directory keeps the steps before
    // the refused one (its callers order their steps for that).
    assert_eq!(b.read(&first).unwrap().is_some(), !is_pg(fx));
}

fn the_retry_of_a_transaction_that_applied_is_recognised(fx: &Fx) {
    let b = &fx.b;
    let (id, msg, log) = (
        key("t/ids", "m1"),
        key("t/inbox", "m1.json"),
        key("t", "log.jsonl"),
    );
    let steps = [
        Step::Create {
            key: &id,
            value: b"m1",
        },
        Step::Create {
            key: &msg,
            value: b"hello",
        },
        Step::Append {
            log: &log,
            records: &[b"{\"id\":\"m1\"}"],
        },
    ];
    b.transact(&steps).unwrap();
    let err = b.transact(&steps).unwrap_err();
    let Error::Exists {
        current: Some(now), ..
    } = err
    else {
        panic!("{err:?}")
    };
    assert_eq!(now.value, b"m1", "its own value: the first attempt applied");
    assert_eq!(b.read_log(&log, LogPos::START).unwrap().records.len(), 1);
}

fn read_all_is_list_and_read_in_byte_order(fx: &Fx) {
    let b = &fx.b;
    for name in ["b.json", "a.json", "B.json", "a-1.json"] {
        let _ = b.create(&key("t/all", name), name.as_bytes()).unwrap();
    }
    let _ = b.create(&key("t/all/below", "x.json"), b"x").unwrap();
    let all = b.read_all(&dir("t/all")).unwrap();
    let names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, b.list(&dir("t/all")).unwrap());
    assert_eq!(names, ["B.json", "a-1.json", "a.json", "b.json"]);
    for (name, v) in &all {
        assert_eq!(v.value, name.as_bytes());
        assert_eq!(
            b.read(&key("t/all", name)).unwrap().unwrap().version,
            v.version
        );
    }
    assert!(b.read_all(&dir("t/none")).unwrap().is_empty());
}

/// Eight threads move one unit at a time between two counters, each move
/// one transaction of two swaps, retried on a conflict: no unit is lost or
/// made, and every move is counted once.
fn concurrent_transfers_keep_the_sum(fx: &Fx) {
    let (a, c) = (key("t", "a.json"), key("t", "c.json"));
    let _ = fx.b.create(&a, b"1000").unwrap();
    let _ = fx.b.create(&c, b"0").unwrap();
    let (threads, each) = (8, 25);
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let b = if i % 2 == 0 {
                Arc::clone(&fx.b)
            } else {
                fx.reopen()
            };
            let (a, c, barrier) = (a.clone(), c.clone(), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                let mut done = 0;
                while done < each {
                    let (va, vc) = (b.read(&a).unwrap().unwrap(), b.read(&c).unwrap().unwrap());
                    let n = |v: &[u8]| std::str::from_utf8(v).unwrap().parse::<i64>().unwrap();
                    let (na, nc) = (
                        (n(&va.value) - 1).to_string(),
                        (n(&vc.value) + 1).to_string(),
                    );
                    match b.transact(&[
                        Step::Replace {
                            key: &a,
                            expected: va.version,
                            value: na.as_bytes(),
                        },
                        Step::Replace {
                            key: &c,
                            expected: vc.version,
                            value: nc.as_bytes(),
                        },
                    ]) {
                        Ok(_) => done += 1,
                        Err(Error::Conflict { .. }) => {}
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let value = |k| String::from_utf8(fx.b.read(k).unwrap().unwrap().value).unwrap();
    if is_pg(fx) {
        assert_eq!(value(&a), (1000 - threads * each).to_string());
        assert_eq!(value(&c), (threads * each).to_string());
    } else {
        // On a directory the two swaps are two steps: the second may be
        // refused after the first applied, so only the first counter is
        // exact (every success moved it once).
        assert!(value(&a).parse::<usize>().unwrap() <= 1000 - threads * each);
    }
}

#[test]
fn a_transaction_cut_at_commit_is_unknown_and_the_retry_answers_first() {
    let test = "a_transaction_cut_at_commit_is_unknown_and_the_retry_answers_first";
    let Some(fx) = Fx::pg(test) else {
        return;
    };
    let url = pg_url(test).unwrap();
    let (proxy, via) = Proxy::for_url(&url);
    let schema = fx.spec().split('\t').nth(2).unwrap().to_owned();
    let mut options = PgOptions::with_schema(&schema);
    options.max_idle = 1;
    let b = PgBackend::open_with(&via, options).unwrap();
    let (id, msg, log) = (
        key("mail/ids", "m1"),
        key("mail/inbox/bob", "m1.json"),
        key("mail", "manifest.jsonl"),
    );
    let steps = [
        Step::Create {
            key: &id,
            value: b"m1",
        },
        Step::Create {
            key: &msg,
            value: b"hello",
        },
        Step::Append {
            log: &log,
            records: &[b"{\"id\":\"m1\"}"],
        },
    ];
    proxy.cut_at_request_with("COMMIT");
    let err = b.transact(&steps).unwrap_err();
    assert!(err.is_outcome_unknown(), "{err}");
    // It committed, all of it; the retry names its own value.
    assert_eq!(fx.b.read(&msg).unwrap().unwrap().value, b"hello");
    let retry = b.transact(&steps).unwrap_err();
    assert!(
        matches!(&retry, Error::Exists { current: Some(v), .. } if v.value == b"m1"),
        "{retry:?}"
    );
    let records = fx.b.read_log(&log, LogPos::START).unwrap().records;
    assert_eq!(records, vec![b"{\"id\":\"m1\"}".to_vec()]);
}

/// On a directory the steps apply one by one: a fault at any I/O call of
/// a transaction after its first step stuck is an unknown outcome, never a
/// plain failure that says nothing changed; one before it changes nothing.
#[test]
fn a_fault_after_an_earlier_step_stuck_is_an_unknown_outcome_on_a_directory() {
    use chipset_backend::FsBackend;
    use chipset_store::{StateDir, StateOptions};
    use chipset_testkit::{EIO, Fault, FaultIo};
    let (id, msg, log) = (
        key("mail/ids", "m1"),
        key("mail/inbox/bob", "m1.json"),
        key("mail", "manifest.jsonl"),
    );
    let steps = [
        Step::Create {
            key: &id,
            value: b"m1",
        },
        Step::Create {
            key: &msg,
            value: b"hello",
        },
        Step::Append {
            log: &log,
            records: &[b"{\"id\":\"m1\"}"],
        },
    ];
    let open = |root: &std::path::Path, fault: Arc<FaultIo>| {
        let options = StateOptions {
            io: fault,
            ..StateOptions::default()
        };
        FsBackend::new(StateDir::open_with(root, options).unwrap())
    };
    let probe = tempfile::tempdir().unwrap();
    let fault = FaultIo::passthrough();
    let b = open(probe.path(), fault.clone());
    fault.set(Fault::nth(0, EIO));
    b.transact(&steps).unwrap();
    let calls = fault.counted();
    let mut unknown = 0;
    for n in 1..=calls {
        let tmp = tempfile::tempdir().unwrap();
        let fault = FaultIo::passthrough();
        let b = open(tmp.path(), fault.clone());
        fault.set(Fault::nth(n, EIO));
        let Err(err) = b.transact(&steps) else {
            continue;
        };
        fault.disarm();
        let stuck = b.read(&id).unwrap().is_some();
        assert!(
            err.is_outcome_unknown() || !stuck,
            "call {n}: `{err}` though the first step stuck"
        );
        unknown += usize::from(stuck);
    }
    assert!(unknown > 0, "no fault came after the first step");
}
