//! The gate cache (`mail/.gate/`): the gate reads only what changed since it
//! last looked, and never opens where reading every file would not. Each
//! test lets the inbox stamps settle (the cache trusts a directory stamp
//! only once it is older than two seconds) so that the cached path is the
//! one under test.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use chipset_mail::MessageId;
use chipset_mail::{Draft, Mail};
use chipset_store::StatePath;

use crate::{agent, fixture, opened, task, watch_opens};

/// Longer than the cache's two-second racy window.
fn settle() {
    std::thread::sleep(Duration::from_millis(2_200));
}

/// A request as nubos-pilot's `lib/messaging.cjs` writes it (`round: null`,
/// its key order, no `priority`), written straight into the inbox.
fn nubos_request(mail: &Mail, to: &str, n: u32) -> (MessageId, PathBuf) {
    let id = format!("1795408569{n:03}-7a703292-f1d1-4900-b635-8fd9f1df7f88");
    let json = format!(
        r#"{{
  "id": "{id}",
  "from": "np-critic",
  "to": "{to}",
  "phase": "t1",
  "round": null,
  "kind": "request",
  "subject": "dead-code",
  "body": "Did you intend to delete FoobarService?",
  "expects_reply": true,
  "in_reply_to": null,
  "created_at": "2026-11-23T04:36:09.995Z"
}}
"#
    );
    let dir = mail.inbox_dir(&agent(to));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.as_path().join(format!("{id}.json"));
    std::fs::write(&path, json).unwrap();
    (MessageId::new(id).unwrap(), path)
}

/// Two chipset requests for `t1`, and other mail in other inboxes.
fn busy(mail: &Mail) -> Vec<MessageId> {
    let mut ids = Vec::new();
    for i in 0..2 {
        let m = mail
            .send(&Draft::request(
                agent("critic"),
                agent("exec"),
                task("t1"),
                "q",
                format!("question {i}"),
            ))
            .unwrap();
        ids.push(m.id().clone());
    }
    for i in 0..5 {
        mail.send(&Draft::notify(
            agent("critic"),
            agent(&format!("other-{i}")),
            task("t2"),
            "fyi",
            "other mail",
        ))
        .unwrap();
    }
    ids
}

/// `exec` answers the request `id` (from `critic`).
fn answer(mail: &Mail, id: &MessageId) {
    mail.send(&Draft::response(
        agent("exec"),
        agent("critic"),
        id.clone(),
        "q",
        "answered",
    ))
    .unwrap();
}

fn pending_ids(mail: &Mail) -> Vec<MessageId> {
    mail.pending_replies(&task("t1"))
        .unwrap()
        .into_iter()
        .map(|m| m.id().clone())
        .collect()
}

/// Runs the gate until the cache holds every inbox at a settled stamp.
fn warm(mail: &Mail) -> Vec<MessageId> {
    pending_ids(mail);
    settle();
    pending_ids(mail);
    let written = mail.state().stat(&task_cache_path(mail, "t1")).unwrap();
    assert!(
        written.is_some_and(|s| s.is_file()),
        "the gate wrote no task cache"
    );
    pending_ids(mail)
}

fn sorted(mut ids: Vec<MessageId>) -> Vec<MessageId> {
    ids.sort();
    ids
}

#[test]
fn a_foreign_request_written_after_the_cache_was_built_is_found() {
    let f = fixture();
    let m = &f.mail;
    let mut ids = busy(m);
    assert_eq!(warm(m), ids);
    // nubos-pilot writes a request into an inbox the cache already holds,
    // and into one it has never seen.
    let (a, _) = nubos_request(m, "exec", 1);
    let (b, _) = nubos_request(m, "np-newcomer", 2);
    ids.extend([a, b]);
    assert_eq!(pending_ids(m), sorted(ids.clone()));
    // And once that has settled and been cached, still.
    settle();
    assert_eq!(pending_ids(m), sorted(ids.clone()));
    assert_eq!(pending_ids(m), sorted(ids));
}

#[test]
fn a_writer_that_puts_the_directory_mtime_back_is_still_seen() {
    let f = fixture();
    let m = &f.mail;
    let mut ids = busy(m);
    assert_eq!(warm(m), ids);
    let inbox = m.inbox_dir(&agent("exec"));
    let before = std::fs::metadata(&inbox).unwrap().modified().unwrap();
    let (a, _) = nubos_request(m, "exec", 3);
    // Put the mtime back to what the cache saw (the ctime still moves).
    let secs = before.duration_since(std::time::UNIX_EPOCH).unwrap();
    let status = Command::new("touch")
        .arg("-m")
        .arg("-d")
        .arg(format!("@{}.{:09}", secs.as_secs(), secs.subsec_nanos()))
        .arg(inbox.as_path())
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(
        std::fs::metadata(&inbox).unwrap().modified().unwrap(),
        before
    );
    settle();
    ids.push(a);
    assert_eq!(pending_ids(m), sorted(ids));
}

#[test]
fn a_corrupt_or_stale_cache_is_rebuilt_never_trusted() {
    let f = fixture();
    let m = &f.mail;
    let mut ids = busy(m);
    assert_eq!(warm(m), ids);
    let gate = m.dir().as_path().join(".gate");
    let task_cache = gate.join("task/t1.json");
    let inbox_cache = gate.join("inbox/exec.json");
    let old_task = std::fs::read(&task_cache).unwrap();
    let old_inbox = std::fs::read(&inbox_cache).unwrap();

    // A request arrives; then the cache files are put back as they were
    // before it (a stale cache, as a lost update or a restored backup leaves).
    let (a, _) = nubos_request(m, "exec", 4);
    ids.push(a);
    settle();
    std::fs::write(&task_cache, &old_task).unwrap();
    std::fs::write(&inbox_cache, &old_inbox).unwrap();
    assert_eq!(pending_ids(m), sorted(ids.clone()));

    // Garbage, an empty file, another format version: ignored and rewritten.
    for bad in [
        &b"{not json"[..],
        b"",
        b"{\"v\": 99, \"task\": \"t1\", \"inboxes\": {}}",
    ] {
        std::fs::write(&task_cache, bad).unwrap();
        std::fs::write(&inbox_cache, bad).unwrap();
        assert_eq!(pending_ids(m), sorted(ids.clone()));
        // The task cache is at version 3 (it keeps open requests' bytes),
        // the folder caches at 2.
        for (p, version) in [(&task_cache, 3), (&inbox_cache, 2)] {
            let v: serde_json::Value = serde_json::from_slice(&std::fs::read(p).unwrap())
                .unwrap_or_else(|e| panic!("{} not rebuilt: {e}", p.display()));
            assert_eq!(v["v"], version, "{}", p.display());
        }
    }

    // The cache file of one task never answers for another.
    let other = gate.join("task/t2.json");
    std::fs::copy(&task_cache, &other).unwrap();
    assert!(m.pending_replies(&task("t2")).unwrap().is_empty());
}

#[test]
fn answered_and_archived_requests_leave_the_cached_gate() {
    let f = fixture();
    let m = &f.mail;
    let ids = busy(m);
    assert_eq!(warm(m), ids);
    answer(m, &ids[0]);
    assert_eq!(pending_ids(m), vec![ids[1].clone()]);
    settle();
    assert_eq!(pending_ids(m), vec![ids[1].clone()]);
    // A corrupt file in any inbox still fails the gate closed, cache or not.
    let bad = m.inbox_dir(&agent("other-3")).as_path().join("1-x.json");
    std::fs::write(&bad, "{").unwrap();
    let err = m.pending_replies(&task("t1")).unwrap_err();
    assert_eq!(err.corruption().map(|c| c.path.clone()), Some(bad.clone()));
    settle();
    let err = m.pending_replies(&task("t1")).unwrap_err();
    assert_eq!(err.corruption().map(|c| c.path.clone()), Some(bad));
}

#[test]
fn a_file_moved_into_an_existing_quarantine_closes_the_cached_gate() {
    let f = fixture();
    let m = &f.mail;
    let ids = busy(m);
    let quarantine = m.inbox_dir(&agent("exec")).as_path().join(".quarantine");
    std::fs::create_dir(&quarantine).unwrap();
    assert_eq!(warm(m), ids);
    // Filling the folder changes its own stamp, not the inbox's.
    let inbox_stamp = std::fs::metadata(m.inbox_dir(&agent("exec"))).unwrap();
    std::fs::write(quarantine.join("1-x.json"), "{").unwrap();
    let after = std::fs::metadata(m.inbox_dir(&agent("exec"))).unwrap();
    assert_eq!(inbox_stamp.modified().unwrap(), after.modified().unwrap());
    match m.pending_replies(&task("t1")) {
        Err(chipset_mail::MailError::QuarantinedInbox { path }) => {
            assert_eq!(path, quarantine.join("1-x.json"));
        }
        other => panic!("expected QuarantinedInbox, got {other:?}"),
    }
}

/// A message of `t1` as another program writes it, straight into a folder
/// (created if missing).
fn foreign(
    mail: &Mail,
    dir: &StatePath,
    n: u32,
    to: &str,
    kind: &str,
    parent: Option<&MessageId>,
) -> MessageId {
    let id = format!("1795408570{n:03}-7a703292-f1d1-4900-b635-8fd9f1df7f88");
    let expects = kind == "request";
    let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
    let json = format!(
        r#"{{"id": "{id}", "from": "np-critic", "to": "{to}", "phase": "t1", "round": null,
  "kind": "{kind}", "subject": "note", "body": "b", "expects_reply": {expects},
  "in_reply_to": {parent}, "created_at": "2026-11-23T04:36:10.995Z"}}
"#
    );
    let path = dir.join(format!("{id}.json")).unwrap();
    mail.state().write_bytes(&path, json.as_bytes()).unwrap();
    MessageId::new(id).unwrap()
}

#[test]
fn the_cached_sweep_moves_every_message_of_the_task_also_ones_written_since() {
    let f = fixture();
    let m = &f.mail;
    let ids = busy(m);
    warm(m);
    // Files of the task the cache has not seen: a notify in a cached inbox,
    // one in a new inbox, and one another program archived.
    let late = foreign(m, &m.inbox_dir(&agent("exec")), 1, "exec", "notify", None);
    let new_inbox = foreign(
        m,
        &m.inbox_dir(&agent("newcomer")),
        2,
        "newcomer",
        "notify",
        None,
    );
    let archived = foreign(
        m,
        &m.dir().join("archive").unwrap(),
        3,
        "exec",
        "notify",
        None,
    );
    // The sweep walks the cache of a task whose folders have settled, too.
    settle();
    let report = m.sweep_task_on_commit(&task("t1")).unwrap();
    assert_eq!(report.moved, 5);
    for id in ids.iter().chain([&late, &new_inbox, &archived]) {
        assert_eq!(
            m.locate(id).unwrap(),
            Some(chipset_mail::Location::ByTask(task("t1"))),
            "{id}"
        );
    }
    // Other tasks' mail stays where it was.
    assert_eq!(m.inbox_len(&agent("other-0")).unwrap(), 1);
}

#[test]
fn a_cached_sweep_still_moves_the_rest_past_a_corrupt_file_and_names_it() {
    let f = fixture();
    let m = &f.mail;
    let ids = busy(m);
    // Another task's message in the inbox the sweep has to read whole.
    let other = m
        .send(&Draft::notify(
            agent("critic"),
            agent("exec"),
            task("t2"),
            "fyi",
            "another task",
        ))
        .unwrap()
        .id()
        .clone();
    warm(m);
    let bad = m
        .inbox_dir(&agent("exec"))
        .as_path()
        .join("1795408571000-7a703292-f1d1-4900-b635-8fd9f1df7f88.json");
    std::fs::write(&bad, b"{").unwrap();
    let err = m.sweep_task_on_commit(&task("t1")).unwrap_err();
    assert_eq!(err.corruption().map(|c| c.path.clone()), Some(bad));
    for id in &ids {
        assert_eq!(
            m.locate(id).unwrap(),
            Some(chipset_mail::Location::ByTask(task("t1")))
        );
    }
    assert_eq!(
        m.locate(&other).unwrap(),
        Some(chipset_mail::Location::Inbox(agent("exec"))),
        "another task's message stays"
    );
}

#[test]
fn the_cached_thread_finds_a_reply_written_since_the_cache_was_built() {
    let f = fixture();
    let m = &f.mail;
    let ids = busy(m);
    warm(m);
    assert_eq!(m.thread(&ids[0]).unwrap().len(), 1);
    settle();
    // Another program answers without a reply-index entry; the thread is
    // asked again with the folders settled (the cached path).
    let reply = foreign(
        m,
        &m.inbox_dir(&agent("critic")),
        4,
        "critic",
        "notify",
        Some(&ids[0]),
    );
    let archived = foreign(
        m,
        &m.dir().join("archive").unwrap(),
        5,
        "exec",
        "notify",
        Some(&reply),
    );
    settle();
    let thread: Vec<MessageId> = m
        .thread(&ids[0])
        .unwrap()
        .into_iter()
        .map(|m| m.id().clone())
        .collect();
    assert_eq!(thread, [ids[0].clone(), reply.clone(), archived.clone()]);
    // And again from the cache, unchanged.
    assert_eq!(m.thread(&reply).unwrap().len(), 3);
}

#[test]
fn a_sweep_after_another_changed_its_inboxes_moves_exactly_its_own_mail() {
    let f = fixture();
    let m = &f.mail;
    let ids = busy(m);
    // Another task's mail in the same inbox as t1's requests.
    let t3: Vec<MessageId> = (0..3)
        .map(|i| {
            m.send(&Draft::notify(
                agent("critic"),
                agent("exec"),
                task("t3"),
                "fyi",
                format!("t3 note {i}"),
            ))
            .unwrap()
            .id()
            .clone()
        })
        .collect();
    warm(m);
    m.pending_replies(&task("t3")).unwrap();
    // t3's sweep changes the inbox after t1's cache was taken, and another
    // program writes a t1 file there; t1's sweep follows at once (the
    // inbox's stamp is neither the cached one nor settled).
    assert_eq!(m.sweep_task_on_commit(&task("t3")).unwrap().moved, 3);
    let late = foreign(m, &m.inbox_dir(&agent("exec")), 6, "exec", "notify", None);
    let report = m.sweep_task_on_commit(&task("t1")).unwrap();
    assert_eq!(report.moved, 3);
    for id in ids.iter().chain([&late]) {
        assert_eq!(
            m.locate(id).unwrap(),
            Some(chipset_mail::Location::ByTask(task("t1"))),
            "{id}"
        );
    }
    for id in &t3 {
        assert_eq!(
            m.locate(id).unwrap(),
            Some(chipset_mail::Location::ByTask(task("t3"))),
            "{id}"
        );
    }
    assert_eq!(m.inbox_len(&agent("exec")).unwrap(), 0);
    assert_eq!(m.inbox_len(&agent("other-0")).unwrap(), 1);
}

/// `mail/.gate/task/{t}.json`: the gate's cache of task `t`.
fn task_cache_path(mail: &Mail, t: &str) -> StatePath {
    mail.dir()
        .join_hidden(".gate")
        .join("task")
        .unwrap()
        .join(format!("{t}.json"))
        .unwrap()
}

/// The task cache of `t`, and what it holds.
fn task_cache(mail: &Mail, t: &str) -> (StatePath, serde_json::Value) {
    let path = task_cache_path(mail, t);
    let bytes = mail.state().read_bytes(&path).unwrap().value().unwrap();
    (path, serde_json::from_slice(&bytes).unwrap())
}

/// The inode of the file at `path`: a file replaced (written again) has a new one.
fn ino(mail: &Mail, path: &StatePath) -> u64 {
    mail.state().stat(path).unwrap().unwrap().ino()
}

/// Writes `v` over the task cache at `path`, as another writer would.
fn write_task_cache(mail: &Mail, path: &StatePath, v: &serde_json::Value) {
    mail.state()
        .write_bytes(path, &serde_json::to_vec(v).unwrap())
        .unwrap();
}

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
    // The foreign file's own bytes, as written.
    let foreign_name = format!("{foreign_id}.json");
    assert_eq!(
        requests[&foreign_name].as_str().unwrap(),
        std::fs::read_to_string(&foreign_path).unwrap()
    );
    // Served from the cache: the same messages as read from the files.
    assert_eq!(m.pending_replies(&task("t1")).unwrap(), expected);

    // Bytes that do not parse, or that name another id, are not used: the
    // file is read again, and the gate answers as before.
    let other = requests[&format!("{}.json", ids[0])].clone();
    v["inboxes"]["exec"]["requests"][&foreign_name] = serde_json::json!("{not json");
    v["inboxes"]["exec"]["requests"][&format!("{}.json", ids[1])] = other;
    write_task_cache(m, &path, &v);
    assert_eq!(m.pending_replies(&task("t1")).unwrap(), expected);

    // A version 2 task cache (no bytes, no gate time) is read, then
    // rewritten at version 3.
    let mut old = v.clone();
    old["v"] = serde_json::json!(2);
    for slice in old["inboxes"].as_object_mut().unwrap().values_mut() {
        slice.as_object_mut().unwrap().remove("requests");
    }
    old.as_object_mut().unwrap().remove("gated");
    write_task_cache(m, &path, &old);
    assert_eq!(m.pending_replies(&task("t1")).unwrap(), expected);
    let (_, now) = task_cache(m, "t1");
    assert_eq!(now["v"], 3);
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
        .map(|q| q.id().clone())
        .collect();
    assert_eq!(left, sorted(vec![ids[1].clone(), foreign_id]));
}

#[test]
fn the_sweep_skips_an_inbox_empty_of_the_task_at_its_gate_and_the_doctor_reports_what_came_since() {
    use chipset_store::DoctorMode;
    let f = fixture();
    let m = &f.mail;
    let ids = busy(m);
    warm(m);
    let (path, v) = task_cache(m, "t1");
    assert!(v["gated"].as_u64().is_some(), "the gate records its time");
    // After the gate, another program writes a t1 notify into an inbox that
    // held none of t1's mail, and one into an inbox that did.
    let skipped = foreign(
        m,
        &m.inbox_dir(&agent("other-1")),
        8,
        "other-1",
        "notify",
        None,
    );
    let found = foreign(m, &m.inbox_dir(&agent("exec")), 9, "exec", "notify", None);
    settle();
    let report = m.sweep_task_on_commit(&task("t1")).unwrap();
    assert_eq!(report.moved, 3);
    for id in ids.iter().chain([&found]) {
        assert_eq!(
            m.locate(id).unwrap(),
            Some(chipset_mail::Location::ByTask(task("t1"))),
            "{id}"
        );
    }
    // The one the sweep did not list stays, and the doctor reports it.
    assert_eq!(
        m.locate(&skipped).unwrap(),
        Some(chipset_mail::Location::Inbox(agent("other-1")))
    );
    let doctor = m.doctor(DoctorMode::Check).unwrap();
    let orphan = doctor
        .findings
        .iter()
        .find(|f| f.code == "messaging-orphan-inbox")
        .expect("the doctor reports the message the sweep left");
    assert_eq!(orphan.subject.as_deref(), Some(skipped.as_str()));
    assert!(
        orphan.message.ends_with("(task-swept)"),
        "{}",
        orphan.message
    );

    // The sweep trusts a gate for ten minutes: five minutes on, the inbox
    // is still skipped.
    let (_, mut v) = task_cache(m, "t1");
    v["gated"] = serde_json::json!(now_ms() - 5 * 60_000);
    write_task_cache(m, &path, &v);
    assert_eq!(m.sweep_task_on_commit(&task("t1")).unwrap().moved, 0);
    assert_eq!(
        m.locate(&skipped).unwrap(),
        Some(chipset_mail::Location::Inbox(agent("other-1")))
    );
    // A gate older than the sweep trusts: every changed inbox is listed,
    // and a sweep again moves the rest.
    v["gated"] = serde_json::json!(now_ms() - 11 * 60_000);
    write_task_cache(m, &path, &v);
    assert_eq!(m.sweep_task_on_commit(&task("t1")).unwrap().moved, 1);
    assert_eq!(
        m.locate(&skipped).unwrap(),
        Some(chipset_mail::Location::ByTask(task("t1")))
    );
}

#[test]
fn a_sweep_without_its_task_cache_or_gate_time_lists_every_inbox() {
    let f = fixture();
    let m = &f.mail;
    busy(m);
    for (n, broken) in [(10, "missing"), (11, "no gate time"), (12, "corrupt")] {
        warm(m);
        let late = foreign(
            m,
            &m.inbox_dir(&agent("other-2")),
            n,
            "other-2",
            "notify",
            None,
        );
        let (path, mut v) = task_cache(m, "t1");
        match broken {
            "missing" => assert!(m.state().remove_file(&path).unwrap()),
            "no gate time" => {
                v.as_object_mut().unwrap().remove("gated");
                write_task_cache(m, &path, &v);
            }
            _ => m
                .state()
                .write_bytes(&path, b"{\"v\": 3, \"task\"")
                .unwrap(),
        }
        settle();
        m.sweep_task_on_commit(&task("t1")).unwrap();
        assert_eq!(
            m.locate(&late).unwrap(),
            Some(chipset_mail::Location::ByTask(task("t1"))),
            "{broken}"
        );
    }
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
        .send(&Draft::notify(
            agent("critic"),
            agent("other-0"),
            task("t2"),
            "fyi",
            "more mail",
        ))
        .unwrap();
    let name = format!("{}.json", new.id());
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

/// Now, in Unix milliseconds.
fn now_ms() -> u64 {
    let now = std::time::SystemTime::now();
    u64::try_from(
        now.duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// Runs the gate and checks that it recorded its own start as t1's gate
/// time; returns the pending ids.
fn gate_time_after_a_gate(m: &Mail) -> Vec<MessageId> {
    let start = now_ms();
    let pending = pending_ids(m);
    let end = now_ms();
    let gated = task_cache(m, "t1").1["gated"].as_u64().unwrap();
    assert!(
        (start..=end).contains(&gated),
        "{start} <= {gated} <= {end}"
    );
    pending
}

/// `exec`'s slice in t1's task cache, emptied: no files, no requests.
fn empty_exec_slice(v: &mut serde_json::Value) {
    let slice = &mut v["inboxes"]["exec"];
    slice["files"] = serde_json::json!({});
    slice["others"] = serde_json::json!({});
    slice["requests"] = serde_json::json!({});
}

/// The gate answers from a task cache of its own format version only: the
/// same emptied slice is trusted at version 3 and ignored at version 4 (a
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
    v["v"] = serde_json::json!(4);
    write_task_cache(m, &path, &v);
    assert_eq!(pending_ids(m), ids);
}

/// `mail/.gate/inbox/`: the folder caches of the inboxes.
fn inbox_caches(mail: &Mail) -> StatePath {
    mail.dir().join_hidden(".gate").join("inbox").unwrap()
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

/// A quarantined file closes the gate of its inbox, but neither the thread
/// nor the sweep (which only read or move the task's mail): listed, then
/// from the cache.
#[test]
fn a_quarantined_inbox_closes_the_gate_but_not_the_thread_or_the_sweep() {
    let f = fixture();
    let m = &f.mail;
    let ids = busy(m);
    let other = m.inbox_dir(&agent("other-0"));
    let name = m.state().list(&other).unwrap().remove(0);
    m.state().quarantine(&other.join(&name).unwrap()).unwrap();
    assert!(m.state().has_quarantine(&other).unwrap());
    settle();
    // Listed (no task cache yet), then from the cache the first walk wrote.
    for _ in 0..2 {
        assert_eq!(m.thread(&ids[0]).unwrap().len(), 1);
    }
    assert!(matches!(
        m.pending_replies(&task("t1")),
        Err(chipset_mail::MailError::QuarantinedInbox { .. })
    ));
    assert_eq!(m.sweep_task_on_commit(&task("t1")).unwrap().moved, 2);
}

/// After the gate listed an inbox, the thread (as the sweep) takes the
/// entries that were there from the task's cache and reads only those that
/// came in since, without the inbox's folder cache: once with the inbox's
/// stamp moved on, once with the same stamp, listed too recently to trust.
#[test]
fn a_thread_reads_only_what_entered_an_inbox_since_the_gate_listed_it() {
    let f = fixture();
    let m = &f.mail;
    let ids = busy(m);
    assert_eq!(warm(m), ids);
    let new = m
        .send(&Draft::notify(
            agent("critic"),
            agent("exec"),
            task("t2"),
            "fyi",
            "more mail",
        ))
        .unwrap();
    let caches = watch_opens(inbox_caches(m).as_path());
    let exec = watch_opens(m.inbox_dir(&agent("exec")).as_path());
    assert_eq!(m.thread(&ids[1]).unwrap().len(), 1);
    assert_eq!(opened(&caches), Vec::<String>::new());
    // The start of the thread, found by its id, and the new entry: not the
    // first request, which was there when the gate listed the inbox. (The
    // start is the last entry before that listing: its ctime is the stamp's,
    // so it could have entered just after the listing, and is read again.)
    let mut want = vec![format!("{}.json", ids[1]), format!("{}.json", new.id())];
    want.sort();
    assert_eq!(opened(&exec), want);
    // That listing was too recent to trust its stamp: the next walk lists
    // again, and again only the entries since.
    settle();
    assert_eq!(m.thread(&ids[1]).unwrap().len(), 1);
    assert_eq!(opened(&caches), Vec::<String>::new());
    let read = opened(&exec);
    assert!(read.iter().all(|n| want.contains(n)), "{read:?}");
}

/// An inbox that is another directory than the one the gate listed (moved
/// away, and one restored from elsewhere moved into its place) is listed
/// whole by the sweep: its files entered before the gate looked, yet none
/// of them was in the listed inbox.
#[test]
fn a_sweep_lists_an_inbox_replaced_by_another_directory_whole() {
    let f = fixture();
    let m = &f.mail;
    let spare = |name: &str| {
        m.state()
            .root_path()
            .join("restore")
            .unwrap()
            .join(name)
            .unwrap()
    };
    let restored = foreign(m, &spare("exec"), 13, "exec", "notify", None);
    // The inbox's entries (and so its stamp when listed) are younger.
    std::thread::sleep(Duration::from_millis(20));
    let ids = busy(m);
    assert_eq!(warm(m), ids);
    let inbox = m.inbox_dir(&agent("exec"));
    m.state()
        .move_noclobber(&inbox, &spare("exec-old"))
        .unwrap();
    m.state().move_noclobber(&spare("exec"), &inbox).unwrap();
    assert_eq!(m.sweep_task_on_commit(&task("t1")).unwrap().moved, 1);
    assert_eq!(
        m.locate(&restored).unwrap(),
        Some(chipset_mail::Location::ByTask(task("t1")))
    );
}
