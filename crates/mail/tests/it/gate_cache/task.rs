//! The task cache (`mail/.gate/task/`): what it keeps, when it is written,
//! and that a bad or foreign one is never trusted.

use super::*;
use chipset_mail::Message;

#[test]
fn the_gate_keeps_open_requests_in_its_cache_and_never_trusts_bad_bytes() {
    let f = fixture();
    let m = &f.mail;
    let ids = busy(m);
    let (foreign_id, foreign_path) = nubos_request(m, "exec", 7);
    let expected = m.pending_replies(&task("t1")).unwrap();
    assert_eq!(expected.len(), 3);
    warm(m);
    // The settled slice of `exec` holds the three open requests' bytes.
    let (path, mut v) = task_cache(m, "t1");
    let requests = v["inboxes"]["exec"]["requests"]
        .as_object()
        .unwrap()
        .clone();
    let mut names: Vec<&String> = requests.keys().collect();
    names.sort();
    let mut want: Vec<String> = ids
        .iter()
        .chain([&foreign_id])
        .map(|id| format!("{id}.json"))
        .collect();
    want.sort();
    assert_eq!(names, want.iter().collect::<Vec<_>>());
    // The foreign file's message, as its file reads (an object, not a
    // string of bytes to parse again: issue 31's first gate on a settled
    // state).
    let foreign_name = format!("{foreign_id}.json");
    let kept: Message = serde_json::from_value(requests[&foreign_name].clone()).unwrap();
    let read: Message = serde_json::from_slice(&std::fs::read(&foreign_path).unwrap()).unwrap();
    assert_eq!(kept, read);
    // Served from the cache: the same messages as read from the files.
    assert_eq!(m.pending_replies(&task("t1")).unwrap(), expected);

    // A kept request that names another id is not used (its file is read
    // again), and one that does not parse makes the cache unreadable (the
    // files are read): the gate answers as before.
    let other = requests[&format!("{}.json", ids[0])].clone();
    v["inboxes"]["exec"]["requests"][&format!("{}.json", ids[1])] = other;
    write_task_cache(m, &path, &v);
    assert_eq!(m.pending_replies(&task("t1")).unwrap(), expected);
    let mut broken = v.clone();
    broken["inboxes"]["exec"]["requests"][&foreign_name] = serde_json::json!("{not json");
    write_task_cache(m, &path, &broken);
    assert_eq!(m.pending_replies(&task("t1")).unwrap(), expected);

    // A version 2 task cache (no requests, no gate time; every open
    // request among the files) is read, then rewritten at version 5.
    let mut old = v.clone();
    old["v"] = serde_json::json!(2);
    requests_among_files(&mut old);
    for slice in old["inboxes"].as_object_mut().unwrap().values_mut() {
        slice.as_object_mut().unwrap().remove("requests");
    }
    old.as_object_mut().unwrap().remove("gated");
    write_task_cache(m, &path, &old);
    assert_eq!(m.pending_replies(&task("t1")).unwrap(), expected);
    let (_, now) = task_cache(m, "t1");
    assert_eq!(now["v"], 5);
    assert_eq!(
        now["inboxes"]["exec"]["requests"]
            .as_object()
            .unwrap()
            .len(),
        3
    );

    // A cached request whose file is archived since is no longer pending.
    answer(m, &ids[0]);
    settle();
    let left: Vec<MessageId> = m
        .pending_replies(&task("t1"))
        .unwrap()
        .into_iter()
        .map(|q| q.id.clone())
        .collect();
    assert_eq!(left, sorted(vec![ids[1].clone(), foreign_id]));
}

/// A folder walk takes each file whose inode, size and times are the ones
/// it cached from the cache, and reads only what is new: after a new file
/// in a warm inbox, the gate opens that file and no other. (An inbox of
/// notices: open requests are read again when their inbox changed.)
#[test]
fn a_warm_walk_reads_only_the_new_file_of_a_changed_inbox() {
    let f = fixture();
    let m = &f.mail;
    let ids = busy(m);
    assert_eq!(warm(m), ids);
    let inbox = m.inbox_dir(&agent("other-0"));
    // Nothing changed: the gate opens no file of the inbox.
    let watch = watch_opens(inbox.as_path());
    assert_eq!(pending_ids(m), ids);
    assert_eq!(opened(&watch), Vec::<String>::new());
    // A new file: the inbox's stamp moves, and only the new file is read.
    let new = m
        .send(&NewMessage::notify(
            agent("critic"),
            agent("other-0"),
            task("t2"),
            "fyi",
            "more mail",
        ))
        .unwrap();
    let name = format!("{}.json", new.id);
    // As a file another program wrote (a chipset send's record spares the
    // gate even that read: see `sent.rs`).
    forget_records(m);
    opened(&watch);
    assert_eq!(pending_ids(m), ids);
    assert_eq!(opened(&watch), vec![name]);
    // Read under a stamp too recent to trust, the new file's entry is kept
    // all the same: once the inbox settled, no file is read again.
    settle();
    assert_eq!(pending_ids(m), ids);
    assert_eq!(opened(&watch), Vec::<String>::new());
}

/// The gate time is written only when it is due: a second gate right after
/// the first, with nothing changed, leaves the task cache file alone; a
/// recorded gate time in the future (a clock that went back) is replaced.
#[test]
fn a_gate_rewrites_its_task_cache_only_when_something_is_due() {
    let f = fixture();
    let m = &f.mail;
    let ids = busy(m);
    assert_eq!(warm(m), ids);
    let (path, before) = task_cache(m, "t1");
    let first = ino(m, &path);
    // Let the clock move on, so that the gate's start is later than the
    // recorded one.
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(pending_ids(m), ids);
    let (_, after) = task_cache(m, "t1");
    assert_eq!(ino(m, &path), first, "rewritten");
    assert_eq!(after, before);

    // A gate time four minutes old is not due yet (the gate rewrites it
    // once it is half the sweep's ten minutes old), one six minutes old is.
    let mut v = after;
    let four = now_ms() - 4 * 60_000;
    v["gated"] = serde_json::json!(four);
    write_task_cache(m, &path, &v);
    let written = ino(m, &path);
    assert_eq!(pending_ids(m), ids);
    assert_eq!(ino(m, &path), written, "rewritten");
    assert_eq!(task_cache(m, "t1").1["gated"], four);
    v["gated"] = serde_json::json!(now_ms() - 6 * 60_000);
    write_task_cache(m, &path, &v);
    assert_eq!(gate_time_after_a_gate(m), ids);

    // A gate time an hour ahead of the clock is replaced by the gate's.
    v["gated"] = serde_json::json!(now_ms() + 3_600_000);
    write_task_cache(m, &path, &v);
    assert_eq!(gate_time_after_a_gate(m), ids);
}

/// The gate answers from a task cache of its own format version only: the
/// same emptied slice is trusted at version 4 and ignored at version 5 (a
/// later format this reader cannot know the meaning of).
#[test]
fn a_task_cache_of_another_version_is_ignored() {
    let f = fixture();
    let m = &f.mail;
    let ids = busy(m);
    assert_eq!(warm(m), ids);
    let (path, mut v) = task_cache(m, "t1");
    empty_exec_slice(&mut v);
    write_task_cache(m, &path, &v);
    // Trusted while the inbox's stamp holds: the cache is what answers.
    assert_eq!(pending_ids(m), Vec::<MessageId>::new());
    v["v"] = serde_json::json!(6);
    write_task_cache(m, &path, &v);
    assert_eq!(pending_ids(m), ids);
}

/// A cache file of a few MiB (a project with many thousand messages) is
/// still taken: the cap that keeps a runaway file from being read is far
/// above it. Shown with files padded to 3 MiB: the warm gate reads no
/// message of an inbox whose task cache or folder cache is that large.
#[test]
fn a_cache_file_of_a_few_mebibytes_is_still_used() {
    let f = fixture();
    let m = &f.mail;
    let ids = busy(m);
    assert_eq!(warm(m), ids);
    let pad = |path: &StatePath| {
        let mut bytes = m.state().read_bytes(path).unwrap().value().unwrap();
        bytes.resize(bytes.len() + 3 * 1024 * 1024, b' ');
        m.state().write_bytes(path, &bytes).unwrap();
    };
    // The task cache holds the open requests' bytes.
    pad(&task_cache_path(m, "t1"));
    let exec = watch_opens(m.inbox_dir(&agent("exec")).as_path());
    assert_eq!(pending_ids(m), ids);
    assert_eq!(opened(&exec), Vec::<String>::new());
    // Without its task cache, the gate takes each inbox's folder cache.
    let cache = task_cache_path(m, "t1");
    assert!(m.state().remove_file(&cache).unwrap());
    pad(&inbox_caches(m).join("other-0.json").unwrap());
    let other = watch_opens(m.inbox_dir(&agent("other-0")).as_path());
    assert_eq!(pending_ids(m), ids);
    assert_eq!(opened(&other), Vec::<String>::new());
}

/// Each open request a slice keeps is written once, as its message, and
/// not again among the slice's files (its facts are the message's). A
/// version 4 file, which lists them among the files too, is still read:
/// the gate answers from it without opening a message.
#[test]
fn a_kept_request_is_written_once_and_a_version_4_cache_is_still_read() {
    let f = fixture();
    let m = &f.mail;
    let ids = busy(m);
    assert_eq!(warm(m), ids);
    let (path, v) = task_cache(m, "t1");
    assert_eq!(v["v"], 5);
    let slice = &v["inboxes"]["exec"];
    let requests = slice["requests"].as_object().unwrap();
    let mut kept: Vec<&String> = requests.keys().collect();
    kept.sort();
    let want: Vec<String> = ids.iter().map(|id| format!("{id}.json")).collect();
    assert_eq!(kept, want.iter().collect::<Vec<_>>());
    for name in &want {
        assert!(slice["files"].get(name).is_none(), "{name} written twice");
    }

    let mut old = v.clone();
    old["v"] = serde_json::json!(4);
    requests_among_files(&mut old);
    write_task_cache(m, &path, &old);
    let exec = watch_opens(m.inbox_dir(&agent("exec")).as_path());
    assert_eq!(pending_ids(m), ids);
    assert_eq!(opened(&exec), Vec::<String>::new());

    // A kept message that is not a request needing a reply under its own
    // name gives no facts to put back: the cache is not used (the files
    // are read), and the request it stands for is still pending.
    let other = format!("{}.json", ids[1]);
    for damage in ["a notify", "another request's message"] {
        let mut bad = v.clone();
        let requests = bad["inboxes"]["exec"]["requests"].as_object_mut().unwrap();
        if damage == "a notify" {
            requests[&want[0]]["kind"] = serde_json::json!("notify");
            requests[&want[0]]["expects_reply"] = serde_json::json!(false);
        } else {
            // Only under another name than its own.
            let moved = requests.remove(&other).unwrap();
            requests.insert(want[0].clone(), moved);
        }
        write_task_cache(m, &path, &bad);
        let exec = watch_opens(m.inbox_dir(&agent("exec")).as_path());
        assert_eq!(pending_ids(m), ids, "{damage}");
        assert!(opened(&exec).contains(&want[0]), "{damage}: not read again");
    }
}

/// Lists each slice's kept requests among its files too, with their facts,
/// as task cache versions before 5 did.
fn requests_among_files(v: &mut serde_json::Value) {
    for slice in v["inboxes"].as_object_mut().unwrap().values_mut() {
        let requests = slice["requests"].as_object().cloned().unwrap_or_default();
        for (name, message) in requests {
            slice["files"][&name] = serde_json::json!({
                "kind": "request",
                "needs_reply": true,
                "in_reply_to": null,
                "from": message["from"],
            });
        }
    }
}

/// A folder cache whose stamp still holds is taken whole: without its task
/// cache, the gate opens no file of a settled inbox and leaves that inbox's
/// folder cache as it was (not written again).
#[test]
fn a_settled_folder_cache_is_taken_whole_and_left_alone() {
    let f = fixture();
    let m = &f.mail;
    let ids = busy(m);
    assert_eq!(warm(m), ids);
    let folder_cache = inbox_caches(m).join("other-0.json").unwrap();
    let before = ino(m, &folder_cache);
    assert!(m.state().remove_file(&task_cache_path(m, "t1")).unwrap());
    let other = watch_opens(m.inbox_dir(&agent("other-0")).as_path());
    assert_eq!(pending_ids(m), ids);
    assert_eq!(opened(&other), Vec::<String>::new());
    assert_eq!(
        ino(m, &folder_cache),
        before,
        "the folder cache was written again"
    );
}

/// Right after the sends (the inbox's stamp too young to trust), the gate
/// reads each open request once: the listing's read serves the request
/// too (issue 31: it was read a second time, which made the gate slower
/// than the full scan it replaces).
#[test]
fn a_gate_right_after_the_sends_reads_each_request_once() {
    let f = fixture();
    let m = &f.mail;
    let mut sent: Vec<String> = (0..3)
        .map(|i| {
            let q = m
                .send(&NewMessage::request(
                    agent("critic"),
                    agent("exec"),
                    task("t1"),
                    "why",
                    format!("question {i}"),
                ))
                .unwrap();
            format!("{}.json", q.id)
        })
        .collect();
    sent.sort();
    // Without their senders' records (see `sent.rs`: with them, no file is
    // read at all), as another program's requests.
    forget_records(m);
    let exec = watch_opens(m.inbox_dir(&agent("exec")).as_path());
    assert_eq!(m.pending_replies(&task("t1")).unwrap().len(), 3);
    assert_eq!(opens(&exec), sent);
}

/// The first gate on a settled state that another program left (no
/// `.gate/` at all) reads each open request once and keeps it in the task
/// cache as its file reads (written from what the gate returns: issue 31's
/// first settled gate), so that the next gate opens no message file. A
/// kept request that does not pass its checks makes the task cache unused
/// (its facts would come from it: task cache version 5): every open
/// request is read from its file again, and the cache written next keeps
/// each as its file reads.
#[test]
fn a_first_settled_gate_keeps_what_it_read_and_replaces_what_does_not_pass() {
    let f = fixture();
    let m = &f.mail;
    let ids = busy(m);
    nubos_request(m, "exec", 7);
    forget_caches(m);
    settle();
    let exec = watch_opens(m.inbox_dir(&agent("exec")).as_path());
    let first = m.pending_replies(&task("t1")).unwrap();
    let mut names: Vec<String> = first.iter().map(|q| format!("{}.json", q.id)).collect();
    names.sort();
    assert_eq!(names.len(), 3);
    assert_eq!(opens(&exec), names);
    let (path, v) = task_cache(m, "t1");
    let requests = v["inboxes"]["exec"]["requests"]
        .as_object()
        .unwrap()
        .clone();
    assert_eq!(requests.len(), 3);
    for q in &first {
        let kept: Message =
            serde_json::from_value(requests[&format!("{}.json", q.id)].clone()).unwrap();
        assert_eq!(&kept, q);
    }
    // Served from the cache: no message file is opened.
    assert_eq!(m.pending_replies(&task("t1")).unwrap(), first);
    assert_eq!(opens(&exec), Vec::<String>::new());

    // A kept request that names another id: the open requests' files are
    // read, and the cache then keeps each file's message under its name.
    let (a, b) = (format!("{}.json", ids[0]), format!("{}.json", ids[1]));
    let mut tampered = v.clone();
    tampered["inboxes"]["exec"]["requests"][&b] = requests[&a].clone();
    write_task_cache(m, &path, &tampered);
    assert_eq!(m.pending_replies(&task("t1")).unwrap(), first);
    assert_eq!(opens(&exec), names);
    let (_, now) = task_cache(m, "t1");
    assert_eq!(
        now["inboxes"]["exec"]["requests"],
        serde_json::Value::Object(requests)
    );
    assert_eq!(m.pending_replies(&task("t1")).unwrap(), first);
    assert_eq!(opens(&exec), Vec::<String>::new());
}

/// The first gate on a settled state reads each file without a stat: the
/// folder cache keeps, for each, the length read and when the read began.
/// At the next listing (the inbox changed since), a file whose times are
/// older than that read (by the racy window) is taken from the cache, and
/// a file changed since (here rewritten in place, as long as it was) is
/// read again (issue 31: the first settled gate took a `statx` per file
/// more than the full scan, and was slower than it).
#[test]
fn a_first_settled_gate_reads_without_a_stat_and_rereads_what_changed_since() {
    let f = fixture();
    let m = &f.mail;
    let ids = busy(m);
    let notes: Vec<String> = notes(m, "exec", "t2", 2)
        .iter()
        .map(|id| format!("{id}.json"))
        .collect();
    forget_caches(m);
    settle();
    assert_eq!(pending_ids(m), ids);
    let folder_cache = |name: &str| -> serde_json::Value {
        let path = inbox_caches(m).join("exec.json").unwrap();
        let bytes = m.state().read_bytes(&path).unwrap().value().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        v["files"][name].clone()
    };
    let inbox = m.inbox_dir(&agent("exec"));
    for name in &notes {
        let entry = folder_cache(name);
        assert!(entry["read"].is_array(), "{name}: {entry}");
        assert_eq!(entry["ino"], 0, "{name}: {entry}");
        let len = m
            .state()
            .stat(&inbox.join(name).unwrap())
            .unwrap()
            .unwrap()
            .len;
        assert_eq!(entry["size"], len, "{name}: {entry}");
        assert_eq!(entry["task"], "t2", "{name}: {entry}");
    }

    // Another program moves the first note to task `t3`, rewriting it in
    // place (which no `StateDir` call does) as long as it was.
    let path = inbox.join(&notes[0]).unwrap();
    let bytes = m.state().read_bytes(&path).unwrap().value().unwrap();
    let text = String::from_utf8(bytes).unwrap();
    let changed = text.replace("\"t2\"", "\"t3\"");
    assert_ne!(changed, text);
    std::fs::write(path.as_path(), &changed).unwrap();
    // Long enough ago that its own stamp is settled too: only the read's
    // time tells that it changed since.
    settle();
    let (c, _) = nubos_request(m, "exec", 3);
    let exec = watch_opens(inbox.as_path());
    assert_eq!(
        pending_ids(m),
        sorted(vec![ids[0].clone(), ids[1].clone(), c.clone()])
    );
    // The open requests are read for their messages (their inbox changed),
    // the new request and the changed note for what they are; the other
    // note is not opened.
    let mut read: Vec<String> = ids
        .iter()
        .chain([&c])
        .map(|id| format!("{id}.json"))
        .collect();
    read.push(notes[0].clone());
    read.sort();
    assert_eq!(opened(&exec), read);
    assert_eq!(folder_cache(&notes[0])["task"], "t3");
    // The entry that held now holds by the file's stamp.
    let entry = folder_cache(&notes[1]);
    assert!(entry.get("read").is_none(), "{entry}");
    assert_ne!(entry["ino"], 0, "{entry}");
    assert_eq!(entry["task"], "t2", "{entry}");
}
