//! The archive tail's own file: written when it falls behind, not at every
//! look, and never begun inside a torn line of the manifest.

use std::fs;
use std::io::Write;

use chipset_mail::{ArchiveOutcome, Mail};

use crate::tail::{
    archive_foreign, begin_tail, no_grace, nubos_response, request, send_foreign, tail_path,
};
use crate::{fixture_with, manifest_bytes};

/// The tail file's inode (it is written by a rename).
fn tail_ino(m: &Mail) -> u64 {
    m.state().stat(&tail_path(m)).unwrap().unwrap().ino
}

/// The tail file as it stands.
fn tail_file(m: &Mail) -> serde_json::Value {
    m.state().read_json(&tail_path(m)).unwrap().value().unwrap()
}

/// A look that moves the tail on only a little keeps it in memory
/// (rewriting the file would put a new inode into every answered archive's
/// move): the file is written again once it has fallen far enough behind,
/// not at every look, and another process reading from the older file
/// still finds what was archived since.
#[test]
fn the_tail_file_is_written_when_it_falls_behind_not_at_every_look() {
    let f = fixture_with(no_grace());
    let m = &f.mail;
    begin_tail(&f);
    let first = tail_ino(m);
    let q = request(m, "asked");
    send_foreign(m, &q, 1, true);
    assert!(matches!(
        m.archive(&q.id).unwrap(),
        ArchiveOutcome::Archived(_)
    ));
    assert_eq!(tail_ino(m), first, "the tail file was written again");

    // Another program archives a response with its event: this process
    // and another one (a mail of its own, reading the file, which is
    // behind) both find it.
    let logged = request(m, "logged");
    let (rid, bytes) = nubos_response(&logged, 2);
    archive_foreign(m, &rid, &bytes, true);
    let other = Mail::with_config(m.state().clone(), no_grace());
    assert!(other.has_reply(&logged.id).unwrap());
    assert!(m.has_reply(&logged.id).unwrap());

    // Many answered archives: the file follows, now and then.
    let mut written = 0;
    let mut ino = tail_ino(m);
    for n in 0..40 {
        let q = request(m, "more");
        send_foreign(m, &q, 10 + n, true);
        assert!(matches!(
            m.archive(&q.id).unwrap(),
            ArchiveOutcome::Archived(_)
        ));
        if tail_ino(m) != ino {
            written += 1;
            ino = tail_ino(m);
        }
    }
    assert!(
        (1..20).contains(&written),
        "written {written} times in 40 looks"
    );
    let tail = tail_file(m);
    let len = m.state().stat(&m.manifest_path()).unwrap().unwrap().len;
    let offset = tail["offset"].as_u64().unwrap();
    assert!(offset + 8 * 1024 + 2_048 > len, "{offset} of {len}");
}

#[test]
fn a_tail_never_begins_inside_a_torn_line() {
    let f = fixture_with(no_grace());
    let m = &f.mail;
    let first = request(m, "first");
    // A writer died mid-line: the manifest ends in a torn `{"`, the first
    // bytes of every event line, written as another program would.
    fs::OpenOptions::new()
        .append(true)
        .open(m.manifest_path().as_path())
        .unwrap()
        .write_all(b"{\"")
        .unwrap();
    // The next append may cut the piece and write an event over it whose
    // first bytes match: a tail begun there would read that event as a
    // bad line. So none begins; the request is looked for by listing.
    assert!(!m.has_reply(&first.id).unwrap());
    assert!(m.state().stat(&tail_path(m)).unwrap().is_none());
    let (rid, bytes) = nubos_response(&first, 1);
    archive_foreign(m, &rid, &bytes, false);
    assert!(m.has_reply(&first.id).unwrap());

    // Once a writer has cut the piece, the tail begins at a line's end.
    let second = request(m, "second");
    assert!(!m.has_reply(&second.id).unwrap());
    let tail = tail_file(m);
    let log = manifest_bytes(m);
    assert_eq!(tail["offset"], log.len() as u64);
    assert_eq!(log.last(), Some(&b'\n'));
}
