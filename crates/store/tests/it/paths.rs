//! Nothing outside the root: symlinked files, directories, logs and locks
//! are refused, a path outside cannot be built, and a path that cannot be
//! examined is an error naming it, never "not there".

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::Duration;

use chipset_store::{Channel, Error, ReadOutcome, StateDir, StatePath};
use chipset_testkit::TempState;
use serde_json::{Value, json};

#[test]
fn symlinked_file_is_refused_everywhere() {
    let t = TempState::new();
    let dir = t.state.channel_dir(Channel::new("hooks")).unwrap();
    let outside = t.scratch("outside.json");
    fs::write(&outside, "{\"secret\": true}").unwrap();
    let link = dir.join_static("evil.json");
    symlink(&outside, &link).unwrap();

    assert!(matches!(
        t.state.read_json::<Value>(&link),
        Err(Error::Symlink { .. })
    ));
    assert!(matches!(
        t.state.read_bytes(&link),
        Err(Error::Symlink { .. })
    ));
    assert!(matches!(
        t.state.write_json(&link, &json!(1)),
        Err(Error::Symlink { .. })
    ));
    assert!(matches!(
        t.state
            .move_noclobber(&link, &dir.join_static("moved.json")),
        Err(Error::Symlink { .. })
    ));
    assert!(matches!(
        t.state
            .update(&link, |_: ReadOutcome<Value>| Ok::<_, Error>(
                chipset_store::Decision::Keep(())
            )),
        Err(Error::Symlink { .. })
    ));
    // The target outside the root was never touched.
    assert_eq!(fs::read_to_string(&outside).unwrap(), "{\"secret\": true}");
}

#[test]
fn symlinked_directory_is_refused() {
    let t = TempState::new();
    let elsewhere = t.scratch("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    symlink(&elsewhere, t.state.root().join("mail")).unwrap();
    let err = t.state.channel_dir(Channel::new("mail")).unwrap_err();
    assert!(matches!(err, Error::Symlink { .. }), "{err}");
    let path = t.at("mail/x.json");
    assert!(matches!(
        t.state.write_json(&path, &json!(1)),
        Err(Error::Symlink { .. })
    ));
    assert!(matches!(
        t.state.read_json::<Value>(&path),
        Err(Error::Symlink { .. })
    ));
    assert!(matches!(
        t.state.list(&t.at("mail")),
        Err(Error::Symlink { .. })
    ));
    // Looking is refused too, even at something that is there beyond it.
    fs::write(elsewhere.join("there.json"), "1").unwrap();
    assert!(matches!(
        t.state.stat(&t.at("mail/there.json")),
        Err(Error::Symlink { .. })
    ));
    fs::remove_file(elsewhere.join("there.json")).unwrap();
    assert!(fs::read_dir(&elsewhere).unwrap().next().is_none());
}

#[test]
fn symlinked_log_and_lock_are_refused() {
    let t = TempState::new();
    let dir = t.state.channel_dir(Channel::new("mail")).unwrap();
    let outside = t.scratch("log.jsonl");
    fs::write(&outside, "").unwrap();
    symlink(&outside, dir.join_static("manifest.jsonl")).unwrap();
    let log = t.state.log(&dir.join_static("manifest.jsonl")).unwrap();
    assert!(matches!(
        log.append(&json!({"e": 1})),
        Err(Error::Symlink { .. })
    ));
    assert!(matches!(
        log.read_from::<Value>(0),
        Err(Error::Symlink { .. })
    ));
    assert_eq!(fs::read_to_string(&outside).unwrap(), "");

    symlink(&outside, dir.as_path().join(".x.json.lock")).unwrap();
    assert!(matches!(
        t.state.lock(&dir.join_static("x.json")),
        Err(Error::Symlink { .. })
    ));
}

/// A path outside the root cannot be expressed: `StateDir` takes only a
/// `StatePath` (a bare path does not compile: see the `compile_fail`
/// examples on `StatePath` and `StateDir::read_bytes`), and a `StatePath`
/// cannot climb out. What is left to refuse at run time is a directory
/// replaced by a symlink after its `StatePath` was made.
#[test]
fn paths_outside_the_root_cannot_be_made_and_a_planted_symlink_is_refused() {
    let t = TempState::new();
    let hooks = t.state.channel(Channel::new("hooks"));
    for bad in ["..", "../x.json", "/tmp", ".."] {
        assert!(hooks.join(bad).is_err(), "{bad:?}");
    }
    let path = hooks.join_static("x.json");
    let elsewhere = t.scratch("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    symlink(&elsewhere, t.state.root().join("hooks")).unwrap();
    assert!(matches!(
        t.state.write_json(&path, &json!(1)),
        Err(Error::Symlink { .. })
    ));
    assert!(fs::read_dir(&elsewhere).unwrap().next().is_none());
}

/// The testkit's layout paths are checked a segment at a time, as any
/// `StatePath` is.
#[test]
fn a_layout_path_in_tests_is_checked_segment_by_segment() {
    let t = TempState::new();
    assert_eq!(
        t.at("mail/inbox/bob/1.json").as_path(),
        t.state.root().join("mail/inbox/bob/1.json")
    );
    for bad in ["mail/../etc", "mail//x", "mail/.quarantine"] {
        let made = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| t.at(bad)));
        assert!(made.is_err(), "{bad:?} was accepted");
    }
}

/// A log is reached only through the root: the reader's entry makes
/// nothing, and neither entry opens the root itself as a log or a log
/// through a symlinked directory (one outside the root cannot be named).
/// The test's name is kept from when a bare path could be passed.
#[test]
fn logs_open_only_inside_the_root_and_the_reader_makes_nothing() {
    let t = TempState::new();
    let tmp = tempfile::tempdir().unwrap();
    let missing = t.at("bus/a/control.jsonl");
    let reader = t.state.log_reader(&missing).unwrap();
    let read = reader.read_from::<serde_json::Value>(0).unwrap();
    assert!(read.records.is_empty());
    assert!(t.state.stat(&t.at("bus")).unwrap().is_none());

    for err in [
        t.state.log(&t.state.root_path()).unwrap_err(),
        t.state.log_reader(&t.state.root_path()).unwrap_err(),
    ] {
        assert!(matches!(err, Error::OutsideRoot { .. }), "{err}");
    }

    symlink(tmp.path(), t.state.root().join("mail")).unwrap();
    let through = t.at("mail/manifest.jsonl");
    assert!(matches!(
        t.state.log_reader(&through).unwrap_err(),
        Error::Symlink { .. }
    ));
    assert!(matches!(
        t.state.log(&through).unwrap_err(),
        Error::Symlink { .. }
    ));

    let log = t.state.log(&missing).unwrap();
    log.append(&json!({"n": 1})).unwrap();
    assert_eq!(
        reader
            .read_from::<serde_json::Value>(0)
            .unwrap()
            .records
            .len(),
        1
    );
}

/// A directory in channel `deep` nested to just under PATH_MAX (4,096
/// bytes), not created, and a file in it whose path is over it.
fn past_path_max(t: &TempState) -> (StatePath, StatePath) {
    let mut dir = t.state.channel_dir(Channel::new("deep")).unwrap();
    let segment = "d".repeat(200);
    while dir.as_os_str().len() < 4000 {
        dir = dir.join(&segment).unwrap();
    }
    let file = dir.join("f".repeat(200)).unwrap();
    assert!(dir.as_os_str().len() < 4096 && file.as_os_str().len() > 4096);
    (dir, file)
}

/// A file that cannot be examined for another reason than "not there" is
/// an error about that file, not taken for "no symlink, go ahead": here its
/// path is longer than the system takes (PATH_MAX) while its directory's is
/// not, so the write fails at the check, naming the path it was given.
#[test]
fn a_file_that_cannot_be_examined_is_an_error_naming_it() {
    let t = TempState::new();
    let (_, file) = past_path_max(&t);
    match t.state.write_json(&file, &json!(1)) {
        Err(Error::Io { op, path, source }) => {
            assert_eq!(op, "stat");
            assert_eq!(path, file.as_path());
            assert_eq!(
                source.kind(),
                std::io::ErrorKind::InvalidFilename,
                "{source}"
            );
        }
        other => panic!("{other:?}"),
    }
}

/// The same for the source of a move: a source that cannot be examined
/// (its path over PATH_MAX) is an error naming it, not "not found".
#[test]
fn a_move_source_that_cannot_be_examined_is_an_error_naming_it() {
    let t = TempState::new();
    let (dir, from) = past_path_max(&t);
    t.state.ensure_dir(&dir).unwrap();
    let to = t.state.channel(Channel::new("deep")).join("g").unwrap();
    match t.state.move_noclobber(&from, &to) {
        Err(Error::Io { op, path, .. }) => {
            assert_eq!((op, path.as_path()), ("stat", from.as_path()));
        }
        other => panic!("{other:?}"),
    }
}

/// The temp sweep's walk: a directory that is gone has no temps (here the
/// root itself, removed under an open `StateDir`); a directory that cannot
/// be listed (here one nested past PATH_MAX, built by moving a deep tree
/// into another) is an error, never skipped as if it were empty.
#[test]
fn the_temp_walk_finds_none_in_a_missing_directory_and_fails_on_an_unlistable_one() {
    let t = TempState::new();
    let gone = t.scratch("gone");
    fs::create_dir(&gone).unwrap();
    let state = StateDir::open(&gone).unwrap();
    fs::remove_dir(&gone).unwrap();
    assert_eq!(
        state
            .sweep_temps(
                &state.root_path(),
                Duration::ZERO,
                chipset_store::DoctorMode::Check
            )
            .unwrap(),
        Vec::<std::path::PathBuf>::new()
    );

    let chain = |top: &Path| {
        let mut p = top.to_path_buf();
        while p.as_os_str().len() < 2500 {
            p = p.join("d".repeat(200));
        }
        fs::create_dir_all(&p).unwrap();
        p
    };
    let deep = chain(&t.state.root().join("a"));
    chain(&t.scratch("b"));
    fs::rename(t.scratch("b"), deep.join("b")).unwrap();
    match t.state.sweep_temps(
        &t.state.root_path(),
        Duration::ZERO,
        chipset_store::DoctorMode::Check,
    ) {
        Err(Error::Io { op, source, .. }) => {
            assert_eq!(op, "list directory");
            assert_eq!(
                source.kind(),
                std::io::ErrorKind::InvalidFilename,
                "{source}"
            );
        }
        other => panic!("{other:?}"),
    }
}

/// `check_parents` is true when every directory above a path is there,
/// false when one is missing, and an error when one is something else.
#[test]
fn check_parents_tells_present_missing_and_wrong() {
    let t = TempState::new();
    let p = t.at("hooks/a/b.json");
    assert!(!t.state.check_parents(&p).unwrap());
    fs::create_dir_all(t.state.root().join("hooks/a")).unwrap();
    assert!(t.state.check_parents(&p).unwrap());
    fs::remove_dir(t.state.root().join("hooks/a")).unwrap();
    fs::write(t.state.root().join("hooks/a"), "x").unwrap();
    assert!(matches!(
        t.state.check_parents(&p),
        Err(Error::NotADirectory { .. })
    ));
}

/// `stale_temps_in` finds nothing in a directory that is not there, and
/// refuses one that is a file or a symlink (never walking where it points).
#[test]
fn stale_temps_in_refuses_a_file_or_symlink_for_its_directory() {
    let t = TempState::new();
    let dir = t.at("hooks/sub");
    assert!(
        t.state
            .sweep_temps(&dir, Duration::ZERO, chipset_store::DoctorMode::Check)
            .unwrap()
            .is_empty()
    );
    fs::create_dir_all(t.state.root().join("hooks")).unwrap();
    fs::write(dir.as_path(), "x").unwrap();
    assert!(matches!(
        t.state
            .sweep_temps(&dir, Duration::ZERO, chipset_store::DoctorMode::Check),
        Err(Error::NotADirectory { .. })
    ));
    fs::remove_file(dir.as_path()).unwrap();
    let elsewhere = t.scratch("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    fs::write(elsewhere.join(".a.json.tmp.1"), "x").unwrap();
    symlink(&elsewhere, dir.as_path()).unwrap();
    assert!(matches!(
        t.state
            .sweep_temps(&dir, Duration::ZERO, chipset_store::DoctorMode::Check),
        Err(Error::Symlink { .. })
    ));
}
