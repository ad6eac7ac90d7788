//! What a publish reports of the file it made (`create_new_stat`,
//! `create_new_batch_stat`), and the lock-free cache append
//! (`append_cache`).

use std::fs;
use std::os::unix::fs::symlink;

use chipset_store::{CorruptReason, Created, Error, Stat};
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

#[test]
fn a_cache_append_creates_appends_and_stops_at_its_bound() {
    let t = TempState::new();
    let path = t.at("mail/gate/sent").join_static("a.jsonl");
    assert!(t.state.append_cache(&path, b"{\"n\":1}\n", 16).unwrap());
    assert!(t.state.append_cache(&path, b"{\"n\":2}\n", 16).unwrap());
    // 16 bytes now: at the bound, nothing more is written.
    assert!(!t.state.append_cache(&path, b"{\"n\":3}\n", 16).unwrap());
    assert_eq!(fs::read_to_string(&path).unwrap(), "{\"n\":1}\n{\"n\":2}\n");
}

#[test]
fn a_cache_append_refuses_a_symlink_or_a_directory() {
    let t = TempState::new();
    let dir = t.at("mail/gate/sent");
    let target = t.scratch("elsewhere.jsonl");
    fs::write(&target, "").unwrap();
    t.state.ensure_dir(&dir).unwrap();
    symlink(&target, dir.join_static("link.jsonl")).unwrap();
    assert!(matches!(
        t.state
            .append_cache(&dir.join_static("link.jsonl"), b"x\n", 1024),
        Err(Error::Symlink { .. })
    ));
    assert_eq!(fs::read_to_string(&target).unwrap(), "");
    fs::create_dir(dir.join_static("d.jsonl")).unwrap();
    match t
        .state
        .append_cache(&dir.join_static("d.jsonl"), b"x\n", 1024)
    {
        Err(Error::Corrupt(c)) => assert_eq!(c.reason, CorruptReason::NotARegularFile),
        other => panic!("expected a corrupt entry, got {other:?}"),
    }
    // A symlinked directory on the way is refused too.
    let real = t.scratch("real");
    fs::create_dir(&real).unwrap();
    symlink(&real, t.state.root().join("mail/gate/linked")).unwrap();
    let through = t.at("mail/gate/linked").join_static("a.jsonl");
    assert!(matches!(
        t.state.append_cache(&through, b"x\n", 1024),
        Err(Error::Symlink { .. })
    ));
    assert!(fs::read_dir(&real).unwrap().next().is_none());
}
