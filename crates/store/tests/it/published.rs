//! What a publish reports of the file it made (`create_new_stat`,
//! `create_new_batch_stat`).

use std::fs;

use chipset_store::{Created, Error, Stat};
use chipset_testkit::TempState;

/// The facts a later reader's `stat` sees of the same file.
fn same(a: &Stat, b: &Stat) {
    assert!(a.is_file() && b.is_file());
    assert_eq!(
        (a.dev, a.ino, a.len, a.mtime, a.ctime),
        (b.dev, b.ino, b.len, b.mtime, b.ctime)
    );
}

#[test]
fn a_publish_reports_the_stat_a_reader_then_sees() {
    let t = TempState::new();
    let path = t.at("mail/inbox/a").join_static("1.json");
    let meta = t.state.create_new_stat(&path, b"one\n").unwrap().unwrap();
    same(&meta, &t.state.stat(&path).unwrap().unwrap());
    assert_eq!(meta.len, 4);
    assert!(matches!(
        t.state.create_new_stat(&path, b"two\n"),
        Err(Error::AlreadyExists { .. })
    ));
    assert_eq!(fs::read_to_string(&path).unwrap(), "one\n");
}

#[test]
fn a_batch_reports_the_stat_of_each_file_it_published() {
    let t = TempState::new();
    let a = t.at("mail/inbox/a");
    let b = t.at("mail/inbox/b");
    t.state
        .create_new(&a.join_static("1.json"), b"1\n")
        .unwrap();
    let items = vec![
        (a.join_static("1.json"), b"clobber?\n".to_vec()),
        (a.join_static("2.json"), b"2\n".to_vec()),
        (b.join_static("3.json"), b"three\n".to_vec()),
    ];
    let out = t.state.create_new_batch_stat(&items).unwrap();
    assert_eq!(out[0].0, Created::AlreadyExists);
    assert!(out[0].1.is_none());
    for ((path, bytes), (created, meta)) in items.iter().zip(&out).skip(1) {
        assert_eq!(*created, Created::New);
        let meta = meta.as_ref().unwrap();
        assert_eq!(meta.len, bytes.len() as u64);
        same(meta, &t.state.stat(path).unwrap().unwrap());
    }
    assert_eq!(fs::read_to_string(a.join_static("1.json")).unwrap(), "1\n");
}
