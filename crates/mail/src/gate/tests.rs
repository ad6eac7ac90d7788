//! The directory stamp's racy window.

use super::*;

fn at(s: i64, ns: i64) -> Stamp {
    Stamp {
        dev: 1,
        ino: 2,
        mtime: (s, ns),
        ctime: (s, ns),
    }
}

/// A stamp is settled once both its times are [`RACY`] (two seconds)
/// behind the clock, to the nanosecond.
#[test]
fn a_stamp_settles_two_seconds_after_its_last_change() {
    let now = UNIX_EPOCH + Duration::new(100, 600_000_000);
    assert!(at(98, 600_000_000).settled(now));
    assert!(at(98, 500_000_000).settled(now));
    assert!(!at(98, 600_000_001).settled(now));
    assert!(!at(99, 0).settled(now));
    // The newer of the two times counts.
    let mut changed = at(90, 0);
    changed.ctime = (99, 0);
    assert!(!changed.settled(now));
    changed.ctime = (90, 0);
    changed.mtime = (99, 0);
    assert!(!changed.settled(now));
    // A clock before the epoch trusts nothing.
    assert!(!at(-10, 0).settled(UNIX_EPOCH - Duration::from_secs(1)));
}

fn entry(size: u64, read: Option<(i64, i64)>) -> FileEntry {
    FileEntry {
        ino: if read.is_some() { 0 } else { 2 },
        size,
        mtime: if read.is_some() { NEVER } else { (98, 0) },
        ctime: if read.is_some() { NEVER } else { (98, 0) },
        read,
        task: TaskId::new("t1").unwrap(),
        facts: None,
        parent: None,
    }
}

/// An entry taken with a stat holds while the file's inode, size and
/// times are the ones it was taken with. One read without a stat holds
/// when the file is as long as the read found it and both its times are
/// [`RACY`] before the read began, to the nanosecond; it comes back with
/// the file's stamp, held from then on as one taken with a stat.
#[test]
fn an_entry_holds_while_its_file_is_the_one_read() {
    let file = at(98, 0);
    assert_eq!(entry(10, None).still(file, 10), Some(entry(10, None)));
    assert_eq!(entry(10, None).still(file, 11), None);
    assert_eq!(entry(10, None).still(at(98, 1), 10), None);
    let mut moved = file;
    moved.ino = 3;
    assert_eq!(entry(10, None).still(moved, 10), None);

    let read = entry(10, Some((100, 0)));
    let held = read
        .still(file, 10)
        .expect("older than the read by two seconds");
    assert_eq!(
        (held.ino, held.mtime, held.ctime, held.read),
        (2, (98, 0), (98, 0), None)
    );
    assert_eq!(held.still(file, 10), Some(held.clone()));
    // Changed less than two seconds before the read began, or after it.
    assert_eq!(read.still(at(98, 1), 10), None);
    assert_eq!(read.still(at(101, 0), 10), None);
    let mut touched = file;
    touched.ctime = (99, 0);
    assert_eq!(read.still(touched, 10), None);
    // Another length.
    assert_eq!(read.still(file, 9), None);
    // A read before the epoch (as kept: never) holds for nothing.
    assert_eq!(entry(10, Some(NEVER)).still(at(-100, 0), 10), None);
}
