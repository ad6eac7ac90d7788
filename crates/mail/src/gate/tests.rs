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
