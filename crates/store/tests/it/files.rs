//! Single-process behaviour of the primitives: corrupt and oversize files,
//! no-clobber, moves, batches, listings, temps and scratch files. Paths
//! and symlinks are in `paths.rs`, logs in `log.rs`, quarantine in
//! `quarantine.rs`.

use std::fs;
use std::io::Write;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::Duration;

use chipset_store::{
    Channel, CorruptReason, Created, Error, ReadOutcome, StateDir, StateOptions, StatePath,
};
use chipset_testkit::TempState;

use crate::names;
use serde_json::{Value, json};

#[test]
fn replace_leaves_one_whole_file_and_no_temps() {
    let t = TempState::new();
    let dir = t.state.channel_dir(Channel::new("hooks")).unwrap();
    let path = dir.join_static("a.json");
    for n in 0..5 {
        t.state.write_json(&path, &json!({ "n": n })).unwrap();
    }
    assert_eq!(fs::read_to_string(&path).unwrap(), "{\n  \"n\": 4\n}\n");
    assert_eq!(names(&dir), ["a.json"]);
}

#[test]
fn missing_corrupt_wrong_shape_and_oversize_are_distinct() {
    let t = TempState::with_options(StateOptions {
        read_cap: 64,
        ..StateOptions::default()
    });
    let dir = t.state.channel_dir(Channel::new("hooks")).unwrap();
    let read = |name: &str| {
        t.state
            .read_json::<Vec<u32>>(&dir.join(name).unwrap())
            .unwrap()
    };

    assert_eq!(read("missing.json"), ReadOutcome::Missing);

    fs::write(dir.join_static("torn.json"), "[1, 2").unwrap();
    assert!(
        matches!(read("torn.json"), ReadOutcome::Corrupt(c) if matches!(c.reason, CorruptReason::Unparsable(_)))
    );

    fs::write(dir.join_static("shape.json"), "{\"a\": 1}").unwrap();
    assert!(
        matches!(read("shape.json"), ReadOutcome::Corrupt(c) if matches!(c.reason, CorruptReason::WrongShape(_)))
    );

    fs::write(
        dir.join_static("big.json"),
        format!("[{}]", vec!["1"; 40].join(",")),
    )
    .unwrap();
    match read("big.json") {
        ReadOutcome::Corrupt(c) => {
            assert_eq!(c.reason, CorruptReason::TooLarge { size: 81, cap: 64 });
            assert_eq!(c.path, dir.join_static("big.json"));
            assert!(
                c.to_string().contains("81 bytes is over the 64-byte cap"),
                "{c}"
            );
        }
        other => panic!("expected too large, got {other:?}"),
    }

    fs::create_dir(dir.join_static("dir.json")).unwrap();
    assert!(
        matches!(read("dir.json"), ReadOutcome::Corrupt(c) if c.reason == CorruptReason::NotARegularFile)
    );

    fs::write(dir.join_static("ok.json"), "[1,2,3]").unwrap();
    assert_eq!(read("ok.json"), ReadOutcome::Value(vec![1, 2, 3]));

    // A fail-closed caller turns corruption into an error naming the file.
    let err = read("torn.json").into_result().unwrap_err();
    assert!(err.to_string().contains("torn.json"), "{err}");
}

#[test]
fn create_new_never_overwrites() {
    let t = TempState::new();
    let dir = t.state.channel_dir(Channel::new("mail")).unwrap();
    let path = dir.join_static("m.json");
    t.state.create_new_json(&path, &json!({"v": 1})).unwrap();
    let err = t
        .state
        .create_new_json(&path, &json!({"v": 2}))
        .unwrap_err();
    assert!(
        matches!(&err, Error::AlreadyExists { path: p } if *p == path),
        "{err}"
    );
    assert_eq!(
        t.state.read_json::<Value>(&path).unwrap(),
        ReadOutcome::Value(json!({"v": 1}))
    );
    assert_eq!(names(&dir), ["m.json"], "the losing temp file was removed");
}

#[test]
fn batch_create_reports_each_file() {
    let t = TempState::new();
    let a = t.at("mail/inbox/a");
    let b = t.at("mail/inbox/b");
    t.state
        .create_new(&a.join_static("1.json"), b"1\n")
        .unwrap();
    let items = vec![
        (a.join_static("1.json"), b"clobber?\n".to_vec()),
        (a.join_static("2.json"), b"2\n".to_vec()),
        (b.join_static("3.json"), b"3\n".to_vec()),
    ];
    let out = t.state.create_new_batch(&items).unwrap();
    assert_eq!(out, [Created::AlreadyExists, Created::New, Created::New]);
    assert_eq!(fs::read_to_string(a.join_static("1.json")).unwrap(), "1\n");
    assert_eq!(names(&a), ["1.json", "2.json"]);
    assert_eq!(names(&b), ["3.json"]);
}

#[test]
fn move_is_no_clobber_and_exactly_once() {
    let t = TempState::new();
    let inbox = t.at("mail/inbox/x");
    let archive = t.at("mail/archive");
    t.state
        .create_new(&inbox.join_static("1.json"), b"one\n")
        .unwrap();
    t.state
        .move_noclobber(&inbox.join_static("1.json"), &archive.join_static("1.json"))
        .unwrap();
    assert_eq!(
        fs::read_to_string(archive.join_static("1.json")).unwrap(),
        "one\n"
    );
    // The second mover finds the source gone.
    let err = t
        .state
        .move_noclobber(&inbox.join_static("1.json"), &archive.join_static("1.json"))
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    // A move onto an existing name fails and keeps both.
    t.state
        .create_new(&inbox.join_static("1.json"), b"again\n")
        .unwrap();
    let err = t
        .state
        .move_noclobber(&inbox.join_static("1.json"), &archive.join_static("1.json"))
        .unwrap_err();
    assert!(matches!(err, Error::AlreadyExists { .. }), "{err}");
    assert_eq!(
        fs::read_to_string(inbox.join_static("1.json")).unwrap(),
        "again\n"
    );
    assert_eq!(
        fs::read_to_string(archive.join_static("1.json")).unwrap(),
        "one\n"
    );
}

/// A channel's doctor sweeps its own tree only, and learns what it removed.
#[test]
fn sweep_in_a_channel_removes_its_stale_temps_only() {
    let t = TempState::new();
    let hooks = t.state.channel_dir(Channel::new("hooks")).unwrap();
    let mail = t.state.channel_dir(Channel::new("mail")).unwrap();
    let mine = hooks.as_path().join(".a.json.1.2.deadbeef.tmp");
    let theirs = mail.as_path().join(".m.json.1.2.deadbeef.tmp");
    fs::write(&mine, "partial").unwrap();
    fs::write(&theirs, "partial").unwrap();
    let week = Duration::from_secs(7 * 24 * 3600);
    assert!(
        t.state
            .sweep_temps(&hooks, week, chipset_store::DoctorMode::Fix)
            .unwrap()
            .is_empty()
    );
    assert!(mine.exists(), "too young to sweep");
    assert_eq!(
        t.state
            .sweep_temps(&hooks, Duration::ZERO, chipset_store::DoctorMode::Check)
            .unwrap(),
        vec![mine.clone()]
    );
    assert_eq!(
        t.state
            .sweep_temps(&hooks, Duration::ZERO, chipset_store::DoctorMode::Fix)
            .unwrap(),
        vec![mine.clone()]
    );
    assert!(!mine.exists());
    assert!(
        theirs.exists(),
        "another channel's temp is not this doctor's"
    );
    let missing = t.state.channel(Channel::new("bus"));
    assert!(
        t.state
            .sweep_temps(&missing, Duration::ZERO, chipset_store::DoctorMode::Fix)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn sweep_removes_only_stale_temps() {
    let t = TempState::new();
    let dir = t.state.channel_dir(Channel::new("hooks")).unwrap();
    fs::write(dir.as_path().join(".a.json.1.2.deadbeef.tmp"), "partial").unwrap();
    fs::write(dir.as_path().join(".a.json.lock"), "").unwrap();
    fs::write(dir.join_static("a.json"), "{}").unwrap();
    let nested = dir.join_static("deep");
    fs::create_dir(&nested).unwrap();
    fs::write(nested.as_path().join(".b.json.9.9.00000000.tmp"), "partial").unwrap();

    assert_eq!(
        t.state
            .sweep_temps(
                &t.state.root_path(),
                Duration::from_secs(3600),
                chipset_store::DoctorMode::Fix
            )
            .unwrap()
            .len(),
        0,
        "too young"
    );
    assert_eq!(
        t.state
            .sweep_temps(
                &t.state.root_path(),
                Duration::ZERO,
                chipset_store::DoctorMode::Fix
            )
            .unwrap()
            .len(),
        2
    );
    assert_eq!(names(&dir), [".a.json.lock", "a.json", "deep"]);
    assert!(names(&nested).is_empty());
}

/// Sweepers racing over one tree: each lists the temps, and by the time it
/// looks at one another may have removed it. A temp gone between the
/// listing and its stat (or its removal) is skipped, never an error, and
/// each is counted by exactly one sweeper.
#[test]
fn concurrent_sweeps_skip_the_temps_another_removed() {
    let t = TempState::new();
    let dir = t.state.channel_dir(Channel::new("hooks")).unwrap();
    for round in 0..4 {
        for i in 0..2000 {
            fs::write(
                dir.as_path()
                    .join(format!(".m{i}.json.1.{round}.deadbeef.tmp")),
                "partial",
            )
            .unwrap();
        }
        let removed: Vec<usize> = std::thread::scope(|scope| {
            let sweepers: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        t.state.sweep_temps(
                            &t.state.root_path(),
                            Duration::ZERO,
                            chipset_store::DoctorMode::Fix,
                        )
                    })
                })
                .collect();
            sweepers
                .into_iter()
                .map(|s| s.join().unwrap().expect("a racing sweep succeeds").len())
                .collect()
        });
        assert_eq!(
            removed.iter().sum::<usize>(),
            2000,
            "round {round}: {removed:?}"
        );
        assert!(names(&dir).is_empty());
    }
}

#[test]
fn list_skips_dot_entries_and_sorts() {
    let t = TempState::new();
    let dir = t.state.channel_dir(Channel::new("nudge")).unwrap();
    for n in ["b", "a", ".hidden", "c"] {
        fs::write(dir.as_path().join(n), "").unwrap();
    }
    assert_eq!(t.state.list(&dir).unwrap(), ["a", "b", "c"]);
    fs::create_dir(dir.join_static("sub")).unwrap();
    fs::create_dir(dir.as_path().join(".hidden-dir")).unwrap();
    symlink(t.scratch(""), dir.join_static("linked-dir")).unwrap();
    assert_eq!(t.state.list_dirs(&dir).unwrap(), ["sub"]);
    assert!(t.state.list(&dir.join_static("nope")).unwrap().is_empty());
}

#[test]
fn state_dir_creates_channels_on_demand() {
    let tmp = tempfile::tempdir().unwrap();
    let state = StateDir::open(tmp.path().join("deep").join("state")).unwrap();
    for name in [
        "hooks",
        "nudge",
        "mail",
        "bus",
        "reminders",
        "loop",
        "reviews",
    ] {
        let ch = Channel::new(name);
        assert!(!state.channel(ch).exists());
        let dir = state.channel_dir(ch).unwrap();
        assert!(dir.is_dir());
        assert_eq!(dir.file_name().unwrap(), name);
    }
    fs::write(state.root().join("file"), "").unwrap();
    assert!(matches!(
        state.ensure_dir(&state.root_path().join_static("file").join_static("x")),
        Err(Error::NotADirectory { .. })
    ));
}

#[test]
fn remove_file_removes_entries_inside_the_root_only() {
    let t = TempState::new();
    let dir = t.state.channel_dir(Channel::new("bus")).unwrap();
    fs::write(dir.join_static("old.json"), "{}").unwrap();
    assert!(t.state.remove_file(&dir.join_static("old.json")).unwrap());
    assert!(
        !t.state.remove_file(&dir.join_static("old.json")).unwrap(),
        "gone already"
    );
    // A symlink is removed itself; its target stays.
    let outside = t.scratch("target");
    fs::write(&outside, "keep").unwrap();
    symlink(&outside, dir.join_static("link")).unwrap();
    assert!(t.state.remove_file(&dir.join_static("link")).unwrap());
    assert_eq!(fs::read_to_string(&outside).unwrap(), "keep");
}

#[test]
fn open_existing_refuses_a_missing_root_and_creates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("typo").join("state");
    let err = StateDir::open_with(&missing, existing()).unwrap_err();
    assert!(
        matches!(&err, Error::NotFound { path } if *path == missing),
        "{err}"
    );
    assert!(!tmp.path().join("typo").exists());
    fs::write(tmp.path().join("file"), "").unwrap();
    assert!(matches!(
        StateDir::open_with(tmp.path().join("file"), existing()),
        Err(Error::NotADirectory { .. })
    ));
    StateDir::open(&missing).unwrap();
    assert!(StateDir::open_with(&missing, existing()).is_ok());
}

/// Issue 12: a directory or FIFO where a log belongs, or a directory where a
/// lock file belongs, is a typed `NotARegularFile`, not a hang or "Illegal seek".
#[test]
fn a_directory_or_fifo_at_a_log_or_lock_path_is_typed() {
    let t = TempState::new();
    let dir = t.state.channel_dir(Channel::new("bus")).unwrap();
    let not_a_file = |e: Error| {
        matches!(e, Error::Corrupt(ref c) if c.reason == CorruptReason::NotARegularFile)
            .then_some(())
            .ok_or(e)
    };
    let dlog = t.state.log(&dir.join_static("d.jsonl")).unwrap();
    fs::create_dir(dlog.path()).unwrap();
    not_a_file(dlog.read_from::<Value>(0).unwrap_err()).unwrap();
    not_a_file(dlog.append(&json!({})).unwrap_err()).unwrap();
    not_a_file(dlog.repair::<Value>().unwrap_err()).unwrap();

    let flog = t.state.log(&dir.join_static("f.jsonl")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        flog.path(),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    not_a_file(flog.read_from::<Value>(0).unwrap_err()).unwrap();
    not_a_file(flog.append(&json!({})).unwrap_err()).unwrap();
    // With repair, the doctor moves it aside; afterwards the log works.
    t.state.quarantine(&dir.join_static("f.jsonl")).unwrap();
    flog.append(&json!({"n": 1})).unwrap();

    fs::create_dir(dir.as_path().join(".x.json.lock")).unwrap();
    not_a_file(t.state.lock(&dir.join_static("x.json")).unwrap_err()).unwrap();
}

fn mkfifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
}

/// A FIFO planted at a state path is corrupt (not a regular file) to every
/// read, and the read returns at once: none of them waits for a writer.
/// (An open that blocked would hang this test.)
#[test]
fn a_fifo_at_a_state_path_is_corrupt_to_every_read() {
    let t = TempState::new();
    let dir = t.state.channel_dir(Channel::new("hooks")).unwrap();
    let path = dir.join_static("a.json");
    mkfifo(&path);
    let fifo = |outcome: ReadOutcome<()>| {
        matches!(outcome, ReadOutcome::Corrupt(c)
            if c.reason == CorruptReason::NotARegularFile && c.path == path.as_path())
    };
    assert!(fifo(t.state.read_bytes(&path).unwrap().map(drop)));
    assert!(fifo(
        t.state.read_bytes_capped(&path, 1 << 30).unwrap().map(drop)
    ));
    assert!(fifo(t.state.read_json::<Value>(&path).unwrap().map(drop)));
}

#[test]
fn a_scratch_file_reads_back_and_has_no_name() {
    let t = TempState::new();
    let dir = t.state.channel_dir(Channel::new("mail")).unwrap();
    // The directory is not touched, not even for a moment (a name made and
    // unlinked would change its mtime, the stamp watchers compare): with
    // O_TMPFILE a crash cannot leave a name behind. Set an old mtime first
    // so that any change shows whatever the clock's resolution.
    let old = std::time::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    fs::File::open(&dir)
        .unwrap()
        .set_times(fs::FileTimes::new().set_modified(old))
        .unwrap();
    let file = t.state.scratch_file(&dir).unwrap();
    assert_eq!(fs::metadata(&dir).unwrap().modified().unwrap(), old);
    file.write_all_at(b"run one\nrun two\n", 0).unwrap();
    let mut back = vec![0; 8];
    file.read_exact_at(&mut back, 8).unwrap();
    assert_eq!(back, b"run two\n");
    // Nothing in the directory, dot-names included, while it is open.
    assert!(names(&dir).is_empty(), "{:?}", names(&dir));
    drop(file);
    assert!(names(&dir).is_empty());
    // A symlinked directory is refused like everywhere else.
    let elsewhere = t.scratch("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    symlink(&elsewhere, dir.join_static("linked")).unwrap();
    assert!(matches!(
        t.state.scratch_file(&dir.join_static("linked")),
        Err(Error::Symlink { .. })
    ));
    // A missing directory is an error naming it, not made on the way.
    let missing = dir.join_static("missing");
    match t.state.scratch_file(&missing) {
        Err(Error::Io { op, path, source }) => {
            assert_eq!(
                (op, path.as_path()),
                ("create scratch file", missing.as_path())
            );
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        other => panic!("{other:?}"),
    }
    assert!(!missing.as_path().exists());
}

#[test]
fn walking_names_and_streaming_a_log_see_what_list_and_read_see() {
    let t = TempState::new();
    let dir = t.state.channel_dir(Channel::new("mail")).unwrap();
    for name in ["b.json", "a.json", ".hidden", "c"] {
        fs::write(dir.as_path().join(name), b"{}").unwrap();
    }
    let mut walked = Vec::new();
    t.state
        .for_each_name(&dir, |n| -> Result<(), Error> {
            walked.push(n);
            Ok(())
        })
        .unwrap();
    walked.sort();
    assert_eq!(walked, t.state.list(&dir).unwrap());
    // A missing directory has no names.
    t.state
        .for_each_name(&dir.join_static("missing"), |n| -> Result<(), Error> {
            panic!("{n}")
        })
        .unwrap();

    let log = t.state.log(&dir.join_static("events.jsonl")).unwrap();
    log.append(&json!({"n": 1})).unwrap();
    log.append(&json!({"n": 2})).unwrap();
    fs::OpenOptions::new()
        .append(true)
        .open(log.path())
        .unwrap()
        .write_all(b"not json\n{\"n\": 3")
        .unwrap();
    let mut seen = Vec::new();
    let streamed = log.for_each::<Value>(|v| seen.push(v)).unwrap();
    let read = log.read_from::<Value>(0).unwrap();
    assert_eq!(seen, read.records);
    assert!(streamed.records.is_empty());
    assert_eq!(streamed.bad_lines, read.bad_lines);
    assert_eq!(streamed.torn_tail, read.torn_tail);
    assert_eq!(streamed.end_offset, read.end_offset);
    assert_eq!(seen.len(), 2);
}

/// What the listing tests list in `dir`: `b.json` (5 bytes), `a.json`
/// (1 byte), a dot-name the listings skip, and a directory `sub`.
fn listing(dir: &StatePath) {
    fs::write(dir.join_static("b.json"), b"12345").unwrap();
    fs::write(dir.join_static("a.json"), b"1").unwrap();
    fs::write(dir.as_path().join(".hidden"), b"").unwrap();
    fs::create_dir(dir.join_static("sub")).unwrap();
}

#[test]
fn list_stats_gives_each_listed_name_its_own_stat_without_following_links() {
    let t = TempState::new();
    let dir = t.state.channel_dir(Channel::new("mail")).unwrap();
    assert!(
        t.state
            .list_stats(&dir.join_static("missing"))
            .unwrap()
            .is_empty()
    );
    listing(&dir);
    symlink(dir.join_static("b.json"), dir.join_static("c.json")).unwrap();
    let listed = t.state.list_stats(&dir).unwrap();
    let names: Vec<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, t.state.list(&dir).unwrap());
    assert_eq!(names, ["a.json", "b.json", "c.json", "sub"]);
    let stat = |i: usize| listed[i].1.expect("stat");
    for (i, name) in names.iter().enumerate() {
        assert_eq!(
            Some(stat(i)),
            t.state.stat(&dir.join(name).unwrap()).unwrap(),
            "{name}"
        );
    }
    assert_eq!(stat(1).len, 5);
    assert!(stat(1).is_file() && !stat(2).is_file() && !stat(3).is_file());
    // A symlinked directory is refused, as by `list`.
    symlink(&dir, t.state.root().join("alias")).unwrap();
    assert!(matches!(
        t.state.list_stats(&t.at("alias")),
        Err(Error::Symlink { .. })
    ));
}

/// Options that open an existing root only.
fn existing() -> StateOptions {
    StateOptions {
        create: false,
        ..StateOptions::default()
    }
}
