//! Reading a folder on several threads: what the gate returns, and how it
//! fails, are what the one-thread read gives (`reads.rs`).
use chipset_store::StateDir;

use super::reads::{TEST_PARALLEL_READS, parallel_rounds, read_missing};
use super::*;
use crate::NewMessage;

/// Requests of the task in `exec`'s inbox (of which a few answered), with
/// notifies and another task's requests between them.
const REQUESTS: usize = 40;

struct State {
    _tmp: tempfile::TempDir,
    mail: Mail,
    task: TaskId,
    exec: AgentId,
    /// The open requests of the task, in id order.
    open: Vec<MessageId>,
}

fn state() -> State {
    let tmp = tempfile::tempdir().unwrap();
    let mail = Mail::new(StateDir::open(tmp.path()).unwrap());
    let (critic, exec) = (
        AgentId::new("critic").unwrap(),
        AgentId::new("exec").unwrap(),
    );
    let task = TaskId::new("t1").unwrap();
    let drafts: Vec<NewMessage> = (0..REQUESTS)
        .flat_map(|i| {
            let mut drafts = vec![NewMessage::request(
                critic.clone(),
                exec.clone(),
                task.clone(),
                "q",
                format!("question {i}"),
            )];
            if i % 7 == 0 {
                drafts.push(NewMessage::notify(
                    critic.clone(),
                    exec.clone(),
                    task.clone(),
                    "fyi",
                    format!("note {i}"),
                ));
                drafts.push(NewMessage::request(
                    critic.clone(),
                    exec.clone(),
                    TaskId::new("t2").unwrap(),
                    "q",
                    format!("other {i}"),
                ));
            }
            drafts
        })
        .collect();
    let sent = mail.send_batch(&drafts).unwrap();
    // A few answered (archived, their responses in the requester's inbox).
    let mut open = Vec::new();
    for (i, q) in sent
        .iter()
        .filter(|m| m.phase == task && m.needs_reply())
        .enumerate()
    {
        if i % 9 == 0 {
            let answer =
                NewMessage::response(exec.clone(), critic.clone(), q.id.clone(), "a", "done");
            mail.send(&answer).unwrap();
        } else {
            open.push(q.id.clone());
        }
    }
    open.sort();
    let state = State {
        _tmp: tmp,
        mail,
        task,
        exec,
        open,
    };
    forget(&state);
    state
}

/// Removes `mail/.gate/` (the caches and the sent journal), as another
/// program's state has none: every file is read.
#[allow(
    clippy::disallowed_methods,
    reason = "removes the gate cache as another program's state lacks it; the store removes no tree"
)]
fn forget(s: &State) {
    let dir = s.mail.gate_dir();
    if s.mail.state.stat(&dir).unwrap().is_some() {
        std::fs::remove_dir_all(dir.as_path()).unwrap();
    }
}

/// The inbox's message files, in listing (name) order.
fn files(s: &State) -> Vec<StatePath> {
    let dir = s.mail.layout.inbox(&s.exec);
    s.mail
        .state
        .list(&dir)
        .unwrap()
        .into_iter()
        .map(|n| dir.join(n).unwrap())
        .collect()
}

/// The bytes of the file at `path`.
fn bytes(s: &State, path: &StatePath) -> Vec<u8> {
    s.mail.state.read_bytes(path).unwrap().value().unwrap()
}

/// The gate of a state no cache was made for, with a folder read on one
/// thread (`parallel` false) or several; and whether it was read on
/// several.
fn gate(s: &State, parallel: bool) -> (Result<Vec<Message>>, bool) {
    forget(s);
    TEST_PARALLEL_READS.with(|t| t.set(if parallel { 8 } else { usize::MAX }));
    let before = parallel_rounds();
    let out = s.mail.pending_replies(&s.task);
    let rounds = parallel_rounds() - before;
    TEST_PARALLEL_READS.with(|t| t.set(8));
    (out, rounds > 0)
}

/// Over the threshold, the gate returns exactly what one thread returns
/// (the same requests in the same order), and writes the same folder cache.
#[test]
fn a_folder_read_on_several_threads_gives_what_one_thread_gives() {
    let s = state();
    let cache = s.mail.inbox_cache_path(&s.exec);
    let (one, parallel) = gate(&s, false);
    assert!(!parallel);
    let one = one.unwrap();
    let one_cache = bytes(&s, &cache);
    let (many, parallel) = gate(&s, true);
    assert!(parallel, "read on several threads");
    let many = many.unwrap();
    assert_eq!(many, one);
    assert_eq!(bytes(&s, &cache), one_cache);
    let mut ids: Vec<MessageId> = many.iter().map(|m| m.id.clone()).collect();
    ids.sort();
    assert_eq!(ids, s.open);
    assert_eq!(ids.len(), REQUESTS - REQUESTS.div_ceil(9));
}

/// A bad file among many (at the start, in the middle, at the end of the
/// listing; two of them) fails the gate closed with the error one thread
/// gives: the same kind, naming the first bad file in listing order.
#[test]
fn a_bad_file_fails_the_threaded_read_as_it_fails_one_thread() {
    let s = state();
    let names = files(&s);
    let n = names.len();
    assert!(n > 40, "{n}");
    let other = bytes(&s, &names[n / 3]);
    let unsupported = {
        let mut v: serde_json::Value = serde_json::from_slice(&other).unwrap();
        v["schema"] = "message.v2".into();
        serde_json::to_vec(&v).unwrap()
    };
    let bad: [(&str, &[u8]); 3] = [
        ("unreadable", b"{ not json"),
        ("unsupported", &unsupported),
        // Another message's bytes: its id is not the file's name.
        ("stray", &other),
    ];
    for (what, planted) in bad {
        for at in [vec![0], vec![n / 2], vec![n - 1], vec![1, n - 2]] {
            let kept: Vec<Vec<u8>> = at.iter().map(|&k| bytes(&s, &names[k])).collect();
            for &k in &at {
                s.mail.state.write_bytes(&names[k], planted).unwrap();
            }
            let (one, _) = gate(&s, false);
            let (many, parallel) = gate(&s, true);
            assert!(parallel, "{what} at {at:?}");
            let (one, many) = (one.unwrap_err(), many.unwrap_err());
            assert_eq!(format!("{many:?}"), format!("{one:?}"), "{what} at {at:?}");
            let path = match (many.corruption(), many.unsupported()) {
                (Some(c), None) => c.path.clone(),
                (None, Some(u)) => u.path.clone(),
                _ => panic!("{what} at {at:?}: {many}"),
            };
            assert_eq!(path, names[at[0]].as_path(), "{what} at {at:?}");
            assert_eq!(many.unsupported().is_some(), what == "unsupported");
            for (&k, kept) in at.iter().zip(kept) {
                s.mail.state.write_bytes(&names[k], &kept).unwrap();
            }
        }
    }
    // Restored: the gate opens again on several threads.
    let (many, parallel) = gate(&s, true);
    assert!(parallel);
    many.unwrap();
}

/// Reads each of `names` in `dir` as the gate does (`read_missing`), on
/// several threads or on one: each name's message id (`None`: gone since
/// the listing), and whether the read took the threaded path.
fn read_ids(
    s: &State,
    dir: &StatePath,
    names: &[String],
    parallel: bool,
) -> (Result<Vec<Option<MessageId>>>, bool) {
    TEST_PARALLEL_READS.with(|t| t.set(if parallel { 8 } else { usize::MAX }));
    let mut files: Vec<(String, Option<MessageId>)> =
        names.iter().map(|n| (n.clone(), None)).collect();
    let before = parallel_rounds();
    let read = read_missing(
        &s.mail.state,
        dir,
        &mut files,
        &mut vec![(); names.len()],
        None,
        |m, _, ()| m.id,
    );
    let threaded = parallel_rounds() > before;
    TEST_PARALLEL_READS.with(|t| t.set(8));
    let ids = read.map(|()| files.into_iter().map(|(_, id)| id).collect());
    (ids, threaded)
}

/// A `.json` name that is not `{id}.json` among many fails the threaded read as
/// it fails one thread, and a file gone between the listing and its read
/// (at the start, in the middle, at the end) is skipped.
#[test]
fn a_file_gone_since_the_listing_is_skipped_by_every_thread() {
    let s = state();
    let dir = s.mail.layout.inbox(&s.exec);
    let mut names = s.mail.state.list(&dir).unwrap();
    let n = names.len();
    let ids = |parallel: bool, names: &[String]| {
        let (read, threaded) = read_ids(&s, &dir, names, parallel);
        assert_eq!(threaded, parallel);
        read
    };
    let all = ids(false, &names).unwrap();
    assert!(all.iter().all(Option::is_some));
    assert_eq!(ids(true, &names).unwrap(), all);

    let gone = [0, n / 2, n - 1];
    for &k in &gone {
        assert!(
            s.mail
                .state
                .remove_file(&dir.join(&names[k]).unwrap())
                .unwrap()
        );
    }
    let many = ids(true, &names).unwrap();
    assert_eq!(many, ids(false, &names).unwrap());
    for (k, id) in many.iter().enumerate() {
        assert_eq!(id.is_none(), gone.contains(&k), "{k}");
        if id.is_some() {
            assert_eq!(*id, all[k]);
        }
    }

    names.insert(n / 2 + 3, "..json".to_owned());
    let (one, many) = (
        ids(false, &names).unwrap_err(),
        ids(true, &names).unwrap_err(),
    );
    assert_eq!(format!("{many:?}"), format!("{one:?}"));
    assert_eq!(
        many.corruption().map(|c| c.path.clone()),
        Some(dir.as_path().join("..json"))
    );
}

/// Entries that already have one (vouched for by a cache or a journal)
/// are neither read nor changed, on one thread or several: their files are
/// planted unreadable here, and the read still succeeds. Every other entry
/// is read in its place, with its slot of `extra` filled beside it, and
/// with what is known of its file: its stat, or (read without one) its
/// length and the time given.
#[test]
fn entries_that_have_one_are_not_read_again() {
    let s = state();
    let dir = s.mail.layout.inbox(&s.exec);
    let names = s.mail.state.list(&dir).unwrap();
    let n = names.len();
    assert!(n > 40, "{n}");
    for name in names.iter().step_by(3) {
        s.mail
            .state
            .write_bytes(&dir.join(name).unwrap(), b"{ not json")
            .unwrap();
    }
    let at = SystemTime::now();
    for (parallel, unstat) in [
        (false, None),
        (true, None),
        (false, Some(at)),
        (true, Some(at)),
    ] {
        TEST_PARALLEL_READS.with(|t| t.set(if parallel { 8 } else { usize::MAX }));
        let mut files: Vec<(String, Option<String>)> = names
            .iter()
            .enumerate()
            .map(|(k, name)| (name.clone(), (k % 3 == 0).then(|| "vouched".to_owned())))
            .collect();
        let mut sizes: Vec<Option<u64>> = vec![None; n];
        let before = parallel_rounds();
        read_missing(
            &s.mail.state,
            &dir,
            &mut files,
            &mut sizes,
            unstat,
            |m, known, size| {
                *size = match known {
                    Known::Stat { stamp, size } => {
                        let stat = s
                            .mail
                            .state
                            .stat(&dir.join(format!("{}.json", m.id)).unwrap());
                        assert_eq!(Some(stamp), stat.unwrap().as_ref().map(Stamp::from));
                        assert!(unstat.is_none());
                        Some(size)
                    }
                    Known::Read { len, at: when } => {
                        assert_eq!(unstat, Some(when));
                        Some(len)
                    }
                };
                m.id.to_string()
            },
        )
        .unwrap();
        assert_eq!(parallel_rounds() > before, parallel);
        for (k, ((name, id), size)) in files.iter().zip(&sizes).enumerate() {
            if k % 3 == 0 {
                assert_eq!((id.as_deref(), *size), (Some("vouched"), None), "{k}");
            } else {
                assert_eq!(format!("{}.json", id.as_deref().unwrap()), *name, "{k}");
                let stat = s.mail.state.stat(&dir.join(name).unwrap()).unwrap();
                assert_eq!(*size, stat.map(|st| st.len), "{k}");
            }
        }
    }
    TEST_PARALLEL_READS.with(|t| t.set(8));
}

/// A sent journal with many records is parsed on several threads into
/// the records the store's log reader takes from it, whatever lines a
/// crash or another program left in it (bad, blank, torn at the end).
#[test]
fn a_journal_parsed_on_several_threads_gives_what_the_log_reader_gives() {
    let tmp = tempfile::tempdir().unwrap();
    let mail = Mail::new(StateDir::open(tmp.path()).unwrap());
    let exec = AgentId::new("exec").unwrap();
    let drafts: Vec<NewMessage> = (0..30)
        .map(|i| {
            NewMessage::request(
                AgentId::new("critic").unwrap(),
                exec.clone(),
                TaskId::new("t1").unwrap(),
                "q",
                format!("question {i}"),
            )
        })
        .collect();
    let path = mail.sent_journal_path(&exec);
    let mut sent = mail.send_batch(&drafts[..15]).unwrap();
    // A bad line, a blank one and one that names an earlier record's file
    // again (the last one wins) among the records.
    let read = |path| mail.state.read_bytes(path).unwrap().value().unwrap();
    let text = String::from_utf8(read(&path)).unwrap();
    let first = text.lines().next().unwrap().to_owned();
    let mut text = text + "{\"name\": 3\n\n   \n" + &first + "\n";
    mail.state.write_bytes(&path, text.as_bytes()).unwrap();
    sent.extend(mail.send_batch(&drafts[15..]).unwrap());
    text = String::from_utf8(read(&path)).unwrap();
    // A line cut short by a crash at the end.
    text.push_str(&first[..first.len() / 2]);
    mail.state.write_bytes(&path, text.as_bytes()).unwrap();

    let mut expected = std::collections::BTreeMap::new();
    mail.state
        .log_reader(&path)
        .unwrap()
        .for_each(|r: sent::Record| {
            expected.insert(format!("{:?}", r.name()), format!("{r:?}"));
        })
        .unwrap();
    assert_eq!(expected.len(), sent.len());
    for parallel in [false, true] {
        TEST_PARALLEL_READS.with(|t| t.set(if parallel { 8 } else { usize::MAX }));
        let before = parallel_rounds();
        let got: std::collections::BTreeMap<String, String> = mail
            .sent_records(&exec, 0)
            .into_map()
            .into_iter()
            .map(|(name, r)| (format!("{name:?}"), format!("{r:?}")))
            .collect();
        assert_eq!(parallel_rounds() > before, parallel);
        assert_eq!(got, expected, "parallel: {parallel}");
    }
    TEST_PARALLEL_READS.with(|t| t.set(8));
}

/// The folder is opened once, after the listing, and fails the read closed:
/// a symlink put in the inbox's place is an error on one thread and on
/// several (never "every file gone", which could pass the gate), and an
/// inbox gone since the listing has every file gone, as reading each by
/// its path would find.
#[test]
#[allow(
    clippy::disallowed_methods,
    reason = "puts a symlink where the inbox was, which the store never makes"
)]
fn an_inbox_swapped_for_a_symlink_since_the_listing_fails_the_read() {
    let s = state();
    let dir = s.mail.layout.inbox(&s.exec);
    let names = s.mail.state.list(&dir).unwrap();
    let read = |parallel: bool| {
        let (read, _) = read_ids(&s, &dir, &names, parallel);
        read.map(|ids| ids.into_iter().flatten().count())
    };
    assert_eq!(read(false).unwrap(), names.len());

    let moved = s.mail.state.root_path().join("moved-inbox").unwrap();
    s.mail.state.move_noclobber(&dir, &moved).unwrap();
    assert_eq!(read(false).unwrap(), 0);
    assert_eq!(read(true).unwrap(), 0);

    std::os::unix::fs::symlink(moved.as_path(), dir.as_path()).unwrap();
    for parallel in [false, true] {
        match read(parallel) {
            Err(Error::Store(chipset_store::Error::Symlink { path })) => {
                assert_eq!(path, dir.as_path());
            }
            other => panic!("parallel {parallel}: {other:?}"),
        }
    }
}

/// A walk that lists a settled folder and looks at it again finds the same
/// files the second time. The slice it keeps for the folder is filled from
/// the listing only when needed (the listing is shared with the thread
/// that writes the folder cache), and a second look is such a need.
#[test]
fn a_folder_looked_at_twice_in_one_walk_gives_its_files_twice() {
    let s = state();
    std::thread::sleep(Duration::from_millis(2_200));
    let folder = Folder::Inbox(s.exec.clone());
    let names = |files: Vec<TaskFile>| {
        let mut names: Vec<String> = files.into_iter().map(|f| f.name).collect();
        names.sort();
        names
    };
    for gate in [true, false] {
        // A state no cache was made for.
        forget(&s);
        let mut walk = s.mail.task_files(&s.task);
        let first = names(walk.folder(&folder, gate).unwrap().unwrap());
        assert!(first.len() > REQUESTS, "{}", first.len());
        assert_eq!(names(walk.folder(&folder, gate).unwrap().unwrap()), first);
    }
}
