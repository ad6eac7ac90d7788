//! `JsonLog`'s appends through the I/O seam: what each append syncs, what an
//! empty batch does, and how a failed open or create is told apart from a
//! log that is not there yet (tests from mutation testing of `log.rs`).

use std::fs;

use chipset_store::testing::{EIO, Fault, FaultIo};
use chipset_store::{Error, IoOp, JsonLog, StateOptions};
use chipset_testkit::TempState;
use serde_json::{Value, json};

/// A state whose store calls go through a counting [`FaultIo`], and a log
/// in it (not created yet).
fn counted() -> (TempState, std::sync::Arc<FaultIo>, JsonLog) {
    let io = FaultIo::passthrough();
    let t = TempState::with_options(StateOptions {
        io: io.clone(),
        ..StateOptions::default()
    });
    let log = t.state.log(&t.at("bus/events.jsonl")).unwrap();
    (t, io, log)
}

fn records(log: &JsonLog) -> Vec<Value> {
    let read = log.read::<Value>().unwrap();
    assert!(read.bad_lines.is_empty() && read.torn_tail.is_none());
    read.records
}

/// An empty batch, synced or not, writes nothing: no log file appears and
/// no call is made.
#[test]
fn an_empty_batch_makes_no_log_and_no_call() {
    let (t, io, log) = counted();
    fs::create_dir_all(t.state.root().join("bus")).unwrap();
    io.set(Fault::nth(0, EIO));
    let none: [Value; 0] = [];
    assert_eq!(log.append_batch(&none).unwrap(), 0);
    assert_eq!(log.append_batch_unsynced(&none).unwrap(), 0);
    assert!(!log.path().exists(), "an empty batch created the log");
    assert_eq!(io.calls(), []);
}

/// `append_batch_unsynced` returns how many records it wrote, every reader
/// sees them at once, and it syncs no data (a synced append does).
#[test]
fn an_unsynced_batch_is_read_back_whole_and_syncs_no_data() {
    let (_t, io, log) = counted();
    log.append(&json!({"n": 0})).unwrap();

    io.set(Fault::nth(0, EIO));
    let batch = [json!({"n": 1}), json!({"n": 2}), json!({"n": 3})];
    assert_eq!(log.append_batch_unsynced(&batch).unwrap(), 3);
    assert_eq!(io.calls(), [IoOp::Open, IoOp::Write]);
    assert_eq!(
        records(&log),
        [
            json!({"n": 0}),
            json!({"n": 1}),
            json!({"n": 2}),
            json!({"n": 3})
        ]
    );
    assert_eq!(log.append_batch_unsynced(&batch[..1]).unwrap(), 1);

    io.set(Fault::nth(0, EIO));
    assert_eq!(log.append_batch(&batch[1..]).unwrap(), 2);
    assert_eq!(io.calls(), [IoOp::Open, IoOp::Write, IoOp::Sync]);
    assert_eq!(records(&log).len(), 7);
}

/// A log that cannot be opened for a reason other than "not there" fails
/// the append with that reason: it is not taken for a missing log and
/// created (or opened again).
#[test]
fn an_append_whose_open_fails_reports_it_and_changes_nothing() {
    let (_t, io, log) = counted();
    log.append(&json!({"n": 1})).unwrap();
    let before = fs::read(log.path()).unwrap();

    io.set(Fault {
        kinds: vec![IoOp::Open],
        ..Fault::nth(1, EIO)
    });
    let err = log.append(&json!({"n": 2})).unwrap_err();
    assert!(
        matches!(&err, Error::Io { source, .. } if source.raw_os_error() == Some(EIO)),
        "{err:?}"
    );
    assert_eq!(io.calls(), [IoOp::Open], "{err:?}");
    assert_eq!(fs::read(log.path()).unwrap(), before);
}

/// A new log whose creation fails reports the creation's error (not the
/// "not found" of opening it again), and no log is left.
#[test]
fn a_new_log_whose_create_fails_reports_that_error() {
    let (t, io, log) = counted();
    fs::create_dir_all(t.state.root().join("bus")).unwrap();
    io.set(Fault {
        kinds: vec![IoOp::Create],
        ..Fault::nth(1, EIO)
    });
    let err = log.append(&json!({"n": 1})).unwrap_err();
    assert!(
        matches!(&err, Error::Io { source, .. } if source.raw_os_error() == Some(EIO)),
        "{err:?}"
    );
    assert_eq!(io.calls(), [IoOp::Open, IoOp::Create], "{err:?}");
    assert!(!log.path().exists());
}

/// Another writer creates the log between this append's open (not found)
/// and its create (already exists): the append opens the log that writer
/// made and appends to it, as if it had been there all along.
#[test]
fn a_log_created_by_another_writer_meanwhile_is_appended_to() {
    const ENOENT: i32 = 2;
    let (_t, io, log) = counted();
    log.append(&json!({"n": 1})).unwrap();
    // The first open says "not there", as it would have just before the
    // other writer's create; the create then finds the log.
    io.set(Fault {
        kinds: vec![IoOp::Open],
        ..Fault::nth(1, ENOENT)
    });
    log.append(&json!({"n": 2})).unwrap();
    assert_eq!(
        io.calls(),
        [
            IoOp::Open,
            IoOp::Create,
            IoOp::Open,
            IoOp::Write,
            IoOp::Sync
        ]
    );
    assert_eq!(records(&log), [json!({"n": 1}), json!({"n": 2})]);
}
