//! New files published from no name (`O_TMPFILE`, then `linkat`) under
//! `WriteBackThenDir`, and from a named temp (renamed) under
//! `FileThenDir`: which calls each makes, that a name already taken is
//! never replaced, and that a step failing before the publish leaves
//! nothing in the directory.

use std::fs;

use chipset_store::{Classify, Created, Error, StatePath, SyncOrder};
use chipset_testkit::{EIO, ENOSPC, Fault, FaultIo, IoOp};

use crate::names;
use crate::seam::open;

fn items(dir: &StatePath, names: &[&str]) -> Vec<(StatePath, Vec<u8>)> {
    names
        .iter()
        .map(|n| {
            (
                dir.join(format!("{n}.json")).unwrap(),
                format!("{{\"n\":\"{n}\"}}").into_bytes(),
            )
        })
        .collect()
}

/// Under `WriteBackThenDir` every new file is linked into place and none
/// is renamed; under `FileThenDir` every one is renamed (a named temp,
/// synced before, has its link count already). Either way a taken name
/// keeps its file.
#[test]
fn new_files_are_linked_from_no_name_only_under_write_back() {
    let cases = [
        (SyncOrder::WriteBackThenDir, IoOp::Link, IoOp::Rename),
        (SyncOrder::FileThenDir, IoOp::Rename, IoOp::Link),
    ];
    for (order, publish, never) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let fault = FaultIo::with_order(Fault::nth(0, EIO), order);
        let state = open(tmp.path(), fault.clone());
        let dir = state.root_path().join_static("inbox");
        state.ensure_dir(&dir).unwrap();
        state
            .create_new(&dir.join("a.json").unwrap(), b"{}")
            .unwrap();
        let made = state
            .create_new_batch(&items(&dir, &["0", "1", "2"]))
            .unwrap();
        assert_eq!(made, [Created::New; 3]);
        let calls = fault.calls();
        assert_eq!(
            calls.iter().filter(|c| **c == publish).count(),
            4,
            "{order:?}: {calls:?}"
        );
        assert!(!calls.contains(&never), "{order:?}: {calls:?}");
        assert_eq!(
            names(dir.as_path()),
            ["0.json", "1.json", "2.json", "a.json"]
        );
        assert_eq!(
            fs::read(dir.as_path().join("1.json")).unwrap(),
            b"{\"n\":\"1\"}"
        );

        let err = state
            .create_new(&dir.join("a.json").unwrap(), b"other")
            .unwrap_err();
        assert!(
            matches!(err, Error::AlreadyExists { .. }),
            "{order:?}: {err}"
        );
        let made = state.create_new_batch(&items(&dir, &["1", "3"])).unwrap();
        assert_eq!(made, [Created::AlreadyExists, Created::New], "{order:?}");
        assert_eq!(fs::read(dir.as_path().join("a.json")).unwrap(), b"{}");
        assert_eq!(
            fs::read(dir.as_path().join("1.json")).unwrap(),
            b"{\"n\":\"1\"}"
        );
        assert_eq!(
            names(dir.as_path()),
            ["0.json", "1.json", "2.json", "3.json", "a.json"],
            "{order:?}: a temp left behind"
        );
    }
}

/// Under `WriteBackThenDir`, a step of a batch or of one new file that
/// fails before the first link (making the unnamed file, writing it,
/// waiting for its write-back, the link itself) is a plain error, and the
/// directory holds nothing new: no name, and no temp to remove.
#[test]
fn a_step_failing_before_the_link_leaves_nothing() {
    for kind in [IoOp::Create, IoOp::Write, IoOp::WriteBack, IoOp::Link] {
        let tmp = tempfile::tempdir().unwrap();
        let fault = FaultIo::with_order(Fault::nth(0, EIO), SyncOrder::WriteBackThenDir);
        let state = open(tmp.path(), fault.clone());
        let dir = state.root_path().join_static("inbox");
        state.ensure_dir(&dir).unwrap();
        for batch in [true, false] {
            fault.set(Fault::first(kind, ENOSPC));
            let err = if batch {
                state
                    .create_new_batch(&items(&dir, &["0", "1", "2"]))
                    .unwrap_err()
            } else {
                state
                    .create_new(&dir.join("0.json").unwrap(), b"{}")
                    .unwrap_err()
            };
            assert!(!err.is_outcome_unknown(), "{kind:?}: {err}");
            assert_eq!(fault.injected(), 1, "{kind:?}");
            assert!(
                names(dir.as_path()).is_empty(),
                "{kind:?}, batch {batch}: {:?}",
                names(dir.as_path())
            );
        }
    }
}
