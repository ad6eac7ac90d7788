//! Faults at the seam on PostgreSQL: the server restarted mid-stream, a
//! client killed mid-transaction, a connection cut at commit.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use chipset_backend::{Backend, Created, Error, LogPos, PgBackend, PgOptions};
use chipset_store::Classify;
use chipset_testkit as kit;

use crate::cluster::OwnCluster;
use crate::support::{Fx, MARK, dir, key, pg_url};
use chipset_backend::testing::Proxy;

/// Whether an error is one a client may see while the server restarts.
fn restart_error(e: &Error) -> bool {
    matches!(
        e,
        Error::OutcomeUnknown { .. } | Error::Unreachable { .. } | Error::Server { .. }
    )
}

#[test]
fn a_restart_mid_stream_loses_and_duplicates_nothing() {
    if pg_url("a_restart_mid_stream_loses_and_duplicates_nothing").is_none() {
        return;
    }
    let Some(cluster) = OwnCluster::start(None) else {
        return;
    };
    let b: Arc<dyn Backend> = Arc::new(PgBackend::open(&cluster.url).unwrap());
    let n = 150;
    let done = Arc::new(AtomicUsize::new(0));
    let errors = Arc::new(std::sync::Mutex::new(Vec::new()));
    let counter = key("counters", "sent.json");
    let _ = b.create(&counter, b"0").unwrap();
    let writer = {
        let (done, errors, counter) = (Arc::clone(&done), Arc::clone(&errors), counter.clone());
        let b = Arc::clone(&b);
        thread::spawn(move || {
            let retry = |e: Error| {
                assert!(restart_error(&e), "an untyped failure: {e}");
                errors.lock().unwrap().push(e.to_string());
                thread::sleep(Duration::from_millis(50));
            };
            for i in 0..n {
                // A send: create with a caller-chosen id, retried as is.
                let k = key("mail/inbox/alice", &format!("{i:05}.json"));
                let value = format!("message {i}\n");
                loop {
                    match b.create(&k, value.as_bytes()) {
                        Ok(c) => {
                            assert!(c.is_retry_of(value.as_bytes()), "{i}: {c:?}");
                            break;
                        }
                        Err(e) => retry(e),
                    }
                }
                // A transition: read once, then retry the same swap.
                let now = loop {
                    match b.read(&counter) {
                        Ok(v) => break v.unwrap(),
                        Err(e) => retry(e),
                    }
                };
                let count: u64 = std::str::from_utf8(&now.value).unwrap().parse().unwrap();
                let next = (count + 1).to_string();
                loop {
                    match b.replace(&counter, now.version, next.as_bytes()) {
                        Ok(_) => break,
                        Err(e) if e.already_holds(next.as_bytes()).is_some() => break,
                        Err(e) => retry(e),
                    }
                }
                done.fetch_add(1, Ordering::SeqCst);
                thread::sleep(Duration::from_millis(10));
            }
        })
    };
    while done.load(Ordering::SeqCst) < n / 4 {
        thread::sleep(Duration::from_millis(5));
    }
    cluster.restart();
    kit::returns("the writer", move || writer.join().unwrap());
    let names = b.list(&dir("mail/inbox/alice")).unwrap();
    assert_eq!(names.len(), n);
    for (i, name) in names.iter().enumerate() {
        assert_eq!(name, &format!("{i:05}.json"));
        let v = b.read(&key("mail/inbox/alice", name)).unwrap().unwrap();
        assert_eq!(v.value, format!("message {i}\n").as_bytes());
    }
    assert_eq!(
        b.read(&counter).unwrap().unwrap().value,
        n.to_string().as_bytes()
    );
    let errors = errors.lock().unwrap();
    assert!(!errors.is_empty(), "the restart was not seen mid-stream");
}

#[test]
fn a_client_killed_mid_append_leaves_whole_batches() {
    let Some(fx) = Fx::pg("a_client_killed_mid_append_leaves_whole_batches") else {
        return;
    };
    let mut child = kit::spawn("child_entry", "append", &[fx.spec(), "killed.jsonl".into()]);
    let said: Vec<String> = kit::own_lines(&mut child, MARK).take(1).collect();
    assert_eq!(said, ["started"]);
    thread::sleep(Duration::from_millis(700));
    kit::kill9(&mut child);
    // The server sees the socket close and rolls back whatever was open.
    thread::sleep(Duration::from_millis(200));
    let read =
        fx.b.read_log(&key("logs", "killed.jsonl"), LogPos::START)
            .unwrap();
    assert!(!read.records.is_empty(), "the child appended nothing");
    assert_eq!(read.records.len() % 50, 0, "a batch was cut");
    for (b, chunk) in read.records.chunks(50).enumerate() {
        for (r, rec) in chunk.iter().enumerate() {
            assert_eq!(rec, format!("{{\"b\":{b},\"r\":{r}}}").as_bytes());
        }
    }
    // Sequence numbers have no gap: the next read starts right after.
    assert_eq!(
        read.next,
        fx.b.read_log(&key("logs", "killed.jsonl"), read.next)
            .unwrap()
            .next
    );
    // A new writer carries on where it stopped.
    fx.b.append(&key("logs", "killed.jsonl"), &[b"{\"after\":1}"])
        .unwrap();
    let tail =
        fx.b.read_log(&key("logs", "killed.jsonl"), read.next)
            .unwrap();
    assert_eq!(tail.records, vec![b"{\"after\":1}".to_vec()]);
}

#[test]
fn a_connection_cut_at_commit_is_unknown_and_the_retry_answers_first() {
    let test = "a_connection_cut_at_commit_is_unknown_and_the_retry_answers_first";
    let Some(fx) = Fx::pg(test) else {
        return;
    };
    let url = pg_url(test).unwrap();
    let (proxy, via) = Proxy::for_url(&url);
    let schema = fx.spec().split('\t').nth(2).unwrap().to_owned();
    let mut options = PgOptions::with_schema(&schema);
    options.max_idle = 1;
    let b = PgBackend::open_with(&via, options).unwrap();

    // Each statement is prepared on the connection first, so the cut
    // falls on the execution (and its commit), not the preparation.
    let warm = key("warm", "w.json");
    let Created::New(wv) = b.create(&warm, b"w").unwrap() else {
        panic!()
    };
    let _ = b.replace(&warm, wv, b"w2").unwrap();
    b.append(&key("warm", "w.jsonl"), &[b"{}"]).unwrap();

    // A create cut at commit: unknown; it did commit; the retry is its success.
    let k = key("mail/inbox/bob", "m1.json");
    proxy.cut_at_next_request();
    let err = b.create(&k, b"first\n").unwrap_err();
    assert!(err.is_outcome_unknown(), "{err}");
    let committed = fx.b.read(&k).unwrap().unwrap();
    assert_eq!(committed.value, b"first\n");
    let again = b.create(&k, b"first\n").unwrap();
    assert_eq!(again, Created::Existing(committed.clone()));
    assert!(again.is_retry_of(b"first\n"));

    // A replace cut at commit: the retry with the same version and value
    // answers with the version the first attempt made.
    let _ = b
        .replace(&warm, b.read(&warm).unwrap().unwrap().version, b"w3")
        .unwrap();
    proxy.cut_at_next_request();
    let err = b.replace(&k, committed.version, b"second\n").unwrap_err();
    assert!(err.is_outcome_unknown(), "{err}");
    let after = fx.b.read(&k).unwrap().unwrap();
    assert_eq!(after.value, b"second\n");
    let retry = b.replace(&k, committed.version, b"second\n").unwrap_err();
    assert_eq!(retry.already_holds(b"second\n"), Some(after.version));

    // An append cut at commit: unknown, and committed once.
    b.append(&key("warm", "w.jsonl"), &[b"{}"]).unwrap();
    let log = key("mail", "manifest.jsonl");
    proxy.cut_at_next_request();
    let err = b.append(&log, &[b"{\"id\":\"m1\"}"]).unwrap_err();
    assert!(err.is_outcome_unknown(), "{err}");
    let records = fx.b.read_log(&log, LogPos::START).unwrap().records;
    assert_eq!(records, vec![b"{\"id\":\"m1\"}".to_vec()]);
}
