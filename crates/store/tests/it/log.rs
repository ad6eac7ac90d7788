//! `JsonLog`'s appends through the I/O seam: what each append syncs, what an
//! empty batch does, and how a failed open or create is told apart from a
//! log that is not there yet (tests from mutation testing of `log.rs`);
//! torn tails, bad and oversized lines, recovery and repair.

use std::fs;

use chipset_store::{Channel, CorruptReason, Error, JsonLog, StateOptions};
use chipset_testkit::{EEXIST, EIO, ENOENT, Fault, FaultIo, IoOp};
use chipset_testkit::{TempState, returns};
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
    let read = log.read_from::<Value>(0).unwrap();
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

    io.set(Fault::first(IoOp::Open, EIO));
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
    io.set(Fault::first(IoOp::Create, EIO));
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
    let (_t, io, log) = counted();
    log.append(&json!({"n": 1})).unwrap();
    // The first open says "not there", as it would have just before the
    // other writer's create; the create then finds the log.
    io.set(Fault::first(IoOp::Open, ENOENT));
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

/// `bytes_at` returns exactly the log's bytes in the range asked, fewer
/// when the log ends sooner, and `None` when there is no log.
#[test]
fn bytes_at_returns_the_range_asked_and_no_more() {
    let (_t, _io, log) = counted();
    assert_eq!(log.bytes_at(0, 10).unwrap(), None);
    log.append_batch(&[json!({"n": 1}), json!({"n": 22}), json!({"n": 333})])
        .unwrap();
    let all = fs::read(log.path()).unwrap();
    let len = all.len() as u64;
    assert_eq!(len, 27);
    // Each read under a watchdog: a read whose offset does not move on
    // would never end.
    let read = |from: u64, to: u64| {
        let log = log.clone();
        returns("bytes_at", move || log.bytes_at(from, to))
            .unwrap()
            .unwrap()
    };
    assert_eq!(read(0, len), all);
    assert_eq!(read(5, 12), &all[5..12]);
    // Past the end: what there is, read in more than one call (the second
    // finds the end) and never a byte twice.
    assert_eq!(read(1, len + 100), &all[1..]);
    assert_eq!(read(20, len + 1), &all[20..]);
    assert_eq!(read(len, len + 10), b"");
    assert_eq!(read(12, 5), b"");
}

/// An empty log that is already there (its writer died between creating it
/// and syncing its directory) gets its directory synced by the first append
/// to it, as a log this append creates does; later appends do not.
#[test]
fn the_first_append_to_an_empty_log_syncs_its_directory() {
    let (t, io, log) = counted();
    fs::create_dir_all(t.state.root().join("bus")).unwrap();
    fs::write(log.path(), b"").unwrap();
    io.set(Fault::nth(0, EIO));
    log.append(&json!({"n": 1})).unwrap();
    assert_eq!(
        io.calls(),
        [IoOp::Open, IoOp::Write, IoOp::Sync, IoOp::SyncDir]
    );
    io.set(Fault::nth(0, EIO));
    log.append(&json!({"n": 2})).unwrap();
    assert_eq!(io.calls(), [IoOp::Open, IoOp::Write, IoOp::Sync]);
}

/// A failed append rolls the log back to its length before: a log the
/// append created goes away again, an empty log that was already there
/// (another writer's) stays.
#[test]
fn a_failed_append_removes_only_a_log_it_created() {
    let (t, io, log) = counted();
    fs::create_dir_all(t.state.root().join("bus")).unwrap();
    io.set(Fault::first(IoOp::Write, EIO));
    assert!(log.append(&json!({"n": 1})).is_err());
    assert!(!log.path().exists(), "the log this append created was left");

    fs::write(log.path(), b"").unwrap();
    io.set(Fault::first(IoOp::Write, EIO));
    assert!(log.append(&json!({"n": 1})).is_err());
    assert_eq!(fs::read(log.path()).unwrap(), b"", "another's empty log");
}

/// The longest line a reader accepts as a record, as the crate docs
/// state it: 1 MiB.
const MAX_LINE: usize = 1024 * 1024;

/// A log with a record, a bad line longer than a reader keeps (over
/// `MAX_LINE`), and another record.
fn log_with_an_overlong_line(t: &TempState, log: &JsonLog) -> (Vec<u8>, Vec<u8>) {
    fs::create_dir_all(t.state.root().join("bus")).unwrap();
    let mut long = vec![b'x'; MAX_LINE + 10];
    long.push(b'\n');
    let mut bytes = b"{\"n\":1}\n".to_vec();
    bytes.extend_from_slice(&long);
    bytes.extend_from_slice(b"{\"n\":2}\n");
    fs::write(log.path(), &bytes).unwrap();
    (bytes, long)
}

/// Repair moves a line too long to hold, byte for byte, in chunks from
/// where it starts, and counts the bytes it moved.
#[test]
fn repair_moves_an_overlong_line_whole_and_counts_its_bytes() {
    let (t, _io, log) = counted();
    let (_, long) = log_with_an_overlong_line(&t, &log);
    // A reader reports it with its length (the newline not counted).
    let read = log.read_from::<Value>(0).unwrap();
    assert_eq!(read.records, [json!({"n": 1}), json!({"n": 2})]);
    let [bad] = &read.bad_lines[..] else {
        panic!("{:?}", read.bad_lines)
    };
    assert_eq!(bad.offset, 8);
    assert_eq!(
        bad.reason,
        chipset_store::CorruptReason::TooLarge {
            size: MAX_LINE as u64 + 10,
            cap: MAX_LINE as u64,
        }
    );
    // Under a watchdog: a copy that never gets past a chunk never ends.
    let done = returns("the repair", {
        let log = log.clone();
        move || log.repair::<Value>()
    });
    let quarantined = done.unwrap().unwrap();
    assert_eq!(kept_and_moved(&log, &quarantined), (2, 1));
    assert_eq!(fs::read(&quarantined).unwrap(), long);
    assert_eq!(fs::read(log.path()).unwrap(), b"{\"n\":1}\n{\"n\":2}\n");

    // The same line at the very start of the log.
    let mut bytes = long.clone();
    bytes.extend_from_slice(b"{\"n\":3}\n");
    fs::write(log.path(), &bytes).unwrap();
    let quarantined = log.repair::<Value>().unwrap().unwrap();
    assert_eq!(kept_and_moved(&log, &quarantined), (1, 1));
    assert_eq!(fs::read(&quarantined).unwrap(), long);
    assert_eq!(fs::read(log.path()).unwrap(), b"{\"n\":3}\n");
}

/// A repair whose quarantine folder or file cannot be made fails with that
/// step's error, and the log is unchanged.
#[test]
fn a_repair_that_cannot_make_its_quarantine_fails_and_changes_nothing() {
    let (t, io, log) = counted();
    let (bytes, _) = log_with_an_overlong_line(&t, &log);
    for (kind, op) in [
        (IoOp::Mkdir, "create directory"),
        (IoOp::Create, "create quarantine file"),
    ] {
        io.set(Fault::first(kind, EIO));
        let err = log.repair::<Value>().unwrap_err();
        assert!(
            matches!(&err, Error::Io { op: o, source, .. }
                if *o == op && source.raw_os_error() == Some(EIO)),
            "{kind:?}: {err:?}"
        );
        assert_eq!(fs::read(log.path()).unwrap(), bytes);
        let quarantine = t.state.root().join("bus/.quarantine");
        let left = fs::read_dir(&quarantine).map_or(0, |d| d.count());
        assert_eq!(left, 0, "{kind:?}: something left in the quarantine");
    }
}

/// Two repairs in one instant (or a name taken by another program) do not
/// collide: a quarantine file name already taken gets the next suffix.
#[test]
fn a_taken_quarantine_name_gets_the_next_suffix() {
    let (t, io, log) = counted();
    log_with_an_overlong_line(&t, &log);
    io.set(Fault::first(IoOp::Create, EEXIST));
    let quarantined = log.repair::<Value>().unwrap().unwrap();
    let name = quarantined.file_name().unwrap().to_string_lossy();
    assert!(name.ends_with("-events.jsonl.1"), "{name}");
    assert_eq!(fs::read(log.path()).unwrap(), b"{\"n\":1}\n{\"n\":2}\n");
}

/// Repair copies through a 64 KiB buffer: a run of small records is
/// written in buffer-sized writes (a write when the next line would not
/// fit), and a line longer than the buffer is written on its own.
#[test]
fn repair_writes_its_copies_in_64_kib_chunks() {
    let (t, io, log) = counted();
    fs::create_dir_all(t.state.root().join("bus")).unwrap();
    // A record of exactly `len` bytes, its newline included.
    let record = |n: usize, len: usize| {
        let head = format!("{{\"n\":\"{n:03}\",\"pad\":\"");
        let pad = "p".repeat(len - head.len() - 3);
        format!("{head}{pad}\"}}\n")
    };
    let cases = [
        // 128 records of 1 KiB: two full buffers of 64 (65,536 bytes is
        // not over the buffer, so the 64th still goes in).
        (1024, 128, 2),
        // 40 records of 2,000 bytes: 32 fill a buffer (the 33rd would not
        // fit), 8 more in the last write.
        (2000, 40, 2),
        // Records longer than the buffer: each written on its own.
        (70_000, 3, 3),
    ];
    for (len, count, writes) in cases {
        let mut bytes = Vec::new();
        for n in 0..count {
            bytes.extend_from_slice(record(n, len).as_bytes());
        }
        assert_eq!(bytes.len(), len * count);
        let kept = bytes.clone();
        bytes.extend_from_slice(b"not json\n");
        fs::write(log.path(), &bytes).unwrap();

        io.set(Fault::nth(0, EIO));
        let quarantined = log.repair::<Value>().unwrap().unwrap();
        assert_eq!(kept_and_moved(&log, &quarantined), (count, 1));
        assert_eq!(fs::read(log.path()).unwrap(), kept);
        assert_eq!(fs::read(&quarantined).unwrap(), b"not json\n");
        let written = io.calls().iter().filter(|c| **c == IoOp::Write).count();
        // The kept records' writes, and one for the quarantined line.
        assert_eq!(written, writes + 1, "{count} records of {len} bytes");
    }
}

/// A record of exactly `MAX_LINE` bytes (its newline not counted) is read;
/// one byte more is a bad line, `TooLarge`; a record of a few hundred KiB,
/// read in many buffer fills, is read whole.
#[test]
fn a_record_of_max_line_bytes_is_read_and_one_more_is_too_large() {
    let (t, _io, log) = counted();
    fs::create_dir_all(t.state.root().join("bus")).unwrap();
    // `"ppp…"`: a JSON string of `len` bytes, quotes included.
    let string = |len: usize| format!("\"{}\"\n", "p".repeat(len - 2));
    let max = MAX_LINE;
    let mut bytes = string(300 * 1024).into_bytes();
    bytes.extend_from_slice(string(max).as_bytes());
    let over = bytes.len() as u64;
    bytes.extend_from_slice(string(max + 1).as_bytes());
    fs::write(log.path(), &bytes).unwrap();

    let read = log.read_from::<String>(0).unwrap();
    let lengths: Vec<usize> = read.records.iter().map(|r| r.len() + 2).collect();
    assert_eq!(lengths, [300 * 1024, max]);
    let [bad] = &read.bad_lines[..] else {
        panic!("{:?}", read.bad_lines)
    };
    assert_eq!(bad.offset, over);
    assert_eq!(
        bad.reason,
        chipset_store::CorruptReason::TooLarge {
            size: max as u64 + 1,
            cap: max as u64,
        }
    );
    assert_eq!(read.end_offset, bytes.len() as u64);
}

/// A torn tail longer than the 64 KiB that `recover` and `append` look back
/// at a time is found across chunks and cut at the last newline.
#[test]
fn a_torn_tail_longer_than_a_chunk_is_cut_at_the_last_newline() {
    let (_t, _io, log) = counted();
    log.append(&json!({"n": 1})).unwrap();
    let clean = fs::read(log.path()).unwrap();
    let mut bytes = clean.clone();
    bytes.extend(std::iter::repeat_n(b'y', 150 * 1024));
    fs::write(log.path(), &bytes).unwrap();
    let cut = log.recover().unwrap().unwrap();
    assert_eq!(cut, 150 * 1024);
    assert_eq!(fs::read(log.path()).unwrap(), clean);

    // The same tail before an append: cut, then the record written whole.
    fs::write(log.path(), &bytes).unwrap();
    log.append(&json!({"n": 2})).unwrap();
    assert_eq!(records(&log), [json!({"n": 1}), json!({"n": 2})]);
}

/// A log whose only line is torn (no newline anywhere) is cut to nothing
/// by `recover`, which looks back to the start of the file for a newline
/// (under a watchdog: a look-back that does not stop at the start never
/// ends).
#[test]
fn recover_cuts_a_log_without_a_newline_to_nothing() {
    let (t, _io, log) = counted();
    fs::create_dir_all(t.state.root().join("bus")).unwrap();
    fs::write(log.path(), b"{\"n\":1").unwrap();
    let torn = returns("recover", {
        let log = log.clone();
        move || log.recover()
    });
    assert!(torn.unwrap().is_some(), "the torn line is reported");
    assert_eq!(fs::read(log.path()).unwrap(), b"");
}

#[test]
fn log_reports_torn_tail_and_bad_lines_and_keeps_later_appends_whole() {
    let t = TempState::new();
    let dir = t.state.channel_dir(Channel::new("mail")).unwrap();
    let log: JsonLog = t.state.log(&dir.join_static("manifest.jsonl")).unwrap();
    log.append(&json!({"n": 1})).unwrap();
    assert_eq!(
        log.append_batch(&[json!({"n": 2}), json!({"n": 3})])
            .unwrap(),
        2
    );
    let whole = fs::read(log.path()).unwrap();
    assert_eq!(whole, b"{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n");

    // A writer died mid-line.
    fs::OpenOptions::new()
        .append(true)
        .open(log.path())
        .unwrap();
    let mut bytes = whole.clone();
    bytes.extend_from_slice(b"{\"n\":4");
    fs::write(log.path(), &bytes).unwrap();
    let read = log.read_from::<Value>(0).unwrap();
    assert_eq!(
        read.records,
        [json!({"n":1}), json!({"n":2}), json!({"n":3})]
    );
    assert_eq!(read.torn_tail, Some(6));
    assert_eq!(read.end_offset, whole.len() as u64);

    // A later append cuts the fragment (as `recover` does: it is the rest of
    // an append that never returned) and stays whole; no bad line is left.
    log.append(&json!({"n": 5})).unwrap();
    let read = log.read_from::<Value>(0).unwrap();
    assert_eq!(read.records.last(), Some(&json!({"n": 5})));
    assert_eq!(read.records.len(), 4);
    assert!(read.bad_lines.is_empty(), "{:?}", read.bad_lines);
    assert!(read.torn_tail.is_none());

    // Reading forward from an offset returns only what came after.
    let tail = log.read_from::<Value>(whole.len() as u64).unwrap();
    assert_eq!(tail.records, [json!({"n": 5})]);
}

#[test]
fn recover_truncates_only_the_torn_tail() {
    let t = TempState::new();
    let dir = t.state.channel_dir(Channel::new("bus")).unwrap();
    let log = t.state.log(&dir.join_static("control.jsonl")).unwrap();
    assert_eq!(log.recover().unwrap(), None, "missing log: nothing to do");
    log.append(&json!({"n": 1})).unwrap();
    assert_eq!(log.recover().unwrap(), None, "clean log: nothing cut");
    let mut bytes = fs::read(log.path()).unwrap();
    let clean = bytes.len() as u64;
    bytes.extend_from_slice(b"{\"n\"");
    fs::write(log.path(), &bytes).unwrap();
    assert_eq!(log.recover().unwrap(), Some(4));
    assert_eq!(fs::read(log.path()).unwrap().len() as u64, clean);
    assert_eq!(
        log.read_from::<Value>(0).unwrap().records,
        [json!({"n": 1})]
    );
}

#[test]
fn log_refuses_unserializable_records_and_writes_nothing() {
    let t = TempState::new();
    let dir = t.state.channel_dir(Channel::new("bus")).unwrap();
    let log = t.state.log(&dir.join_static("x.jsonl")).unwrap();
    let bad = vec![json!({"ok": 1}), json!(f64::NAN)];
    // serde_json turns NaN into null inside a Value, so use a map with a non-string key.
    let mut map = std::collections::HashMap::new();
    map.insert(vec![1u8], 1);
    assert!(matches!(log.append(&map), Err(Error::Serialize { .. })));
    assert!(!log.path().exists());
    assert_eq!(log.append_batch(&bad).unwrap(), 2);
}

/// Issue 12: a log line far over `MAX_LINE` (no newline for megabytes) is
/// skipped and reported, and the records around it still read.
#[test]
fn an_oversized_line_is_reported_and_the_rest_still_reads() {
    let t = TempState::new();
    let dir = t.state.channel_dir(Channel::new("mail")).unwrap();
    let log = t.state.log(&dir.join_static("manifest.jsonl")).unwrap();
    log.append(&json!({"n": 1})).unwrap();
    let mut bytes = fs::read(log.path()).unwrap();
    let big = MAX_LINE * 3;
    bytes.extend(std::iter::repeat_n(b'x', big));
    bytes.push(b'\n');
    fs::write(log.path(), &bytes).unwrap();
    log.append(&json!({"n": 2})).unwrap();
    let read = log.read_from::<Value>(0).unwrap();
    assert_eq!(read.records, [json!({"n": 1}), json!({"n": 2})]);
    assert_eq!(read.bad_lines.len(), 1);
    assert_eq!(
        read.bad_lines[0].reason,
        CorruptReason::TooLarge {
            size: big as u64,
            cap: MAX_LINE as u64
        }
    );
    // An unterminated one is a torn tail of its full length, read in bounded memory.
    let mut bytes = fs::read(log.path()).unwrap();
    let end = bytes.len() as u64;
    bytes.extend(std::iter::repeat_n(b'y', big));
    fs::write(log.path(), &bytes).unwrap();
    let read = log.read_from::<Value>(0).unwrap();
    assert_eq!((read.end_offset, read.torn_tail), (end, Some(big as u64)));
}

/// Issue 12: repair keeps every whole record in order, quarantines the rest
/// byte for byte, and leaves a log that reads clean.
#[test]
fn repair_keeps_every_whole_record_and_quarantines_the_rest() {
    let t = TempState::new();
    let dir = t.state.channel_dir(Channel::new("mail")).unwrap();
    let log = t.state.log(&dir.join_static("manifest.jsonl")).unwrap();
    assert_eq!(
        log.repair::<Value>().unwrap(),
        None,
        "missing log: nothing to do"
    );
    log.append(&json!({"n": 1})).unwrap();
    assert_eq!(
        log.repair::<Value>().unwrap(),
        None,
        "clean log: nothing to do"
    );
    let mut bytes = fs::read(log.path()).unwrap();
    bytes.extend_from_slice(b"{\"n\":2,\nnot json\n{\"n\":3}\n{\"n\":");
    fs::write(log.path(), &bytes).unwrap();
    let before = log.read_from::<Value>(0).unwrap();
    assert_eq!(before.bad_lines.len(), 2);
    let quarantined = log.repair::<Value>().unwrap().unwrap();
    assert_eq!(kept_and_moved(&log, &quarantined), (2, 3));
    let after = log.read_from::<Value>(0).unwrap();
    assert_eq!(after.records, [json!({"n": 1}), json!({"n": 3})]);
    assert!(after.bad_lines.is_empty() && after.torn_tail.is_none());
    assert_eq!(
        fs::read(&quarantined).unwrap(),
        b"{\"n\":2,\nnot json\n{\"n\":\n"
    );
    assert!(quarantined.starts_with(dir.as_path().join(".quarantine")));
    // Appends carry on after it.
    log.append(&json!({"n": 4})).unwrap();
    assert_eq!(log.read_from::<Value>(0).unwrap().records.len(), 3);
}

/// Returns how many records a repaired log holds and how many lines its
/// quarantine file holds (one per bad line, a torn tail included).
fn kept_and_moved(log: &chipset_store::JsonLog, quarantined: &std::path::Path) -> (usize, usize) {
    let kept = log.read_from::<Value>(0).unwrap().records.len();
    let moved = fs::read(quarantined)
        .unwrap()
        .iter()
        .filter(|b| **b == b'\n')
        .count();
    (kept, moved)
}
