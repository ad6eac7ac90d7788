//! The gate cache (`mail/.gate/`): the gate reads only what changed since it
//! last looked, and never opens where reading every file would not. Each
//! test lets the inbox stamps settle (the cache trusts a directory stamp
//! only once it is older than two seconds) so that the cached path is the
//! one under test.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use chipset_mail::MessageId;
use chipset_mail::{Mail, NewMessage};
use chipset_store::StatePath;

use crate::{agent, fixture, opened, opens, task, watch_opens};

mod sent;
mod sweep;
mod task;

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
            .send(&NewMessage::request(
                agent("critic"),
                agent("exec"),
                task("t1"),
                "q",
                format!("question {i}"),
            ))
            .unwrap();
        ids.push(m.id.clone());
    }
    for i in 0..5 {
        mail.send(&NewMessage::notify(
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

/// `n` notifies from `critic` to `to` for task `t`, sent in turn.
fn notes(mail: &Mail, to: &str, t: &str, n: usize) -> Vec<MessageId> {
    (0..n)
        .map(|i| {
            let draft = NewMessage::notify(
                agent("critic"),
                agent(to),
                task(t),
                "fyi",
                format!("{t} note {i}"),
            );
            mail.send(&draft).unwrap().id
        })
        .collect()
}

/// `exec` answers the request `id` (from `critic`).
fn answer(mail: &Mail, id: &MessageId) {
    mail.send(&NewMessage::response(
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
        .map(|m| m.id.clone())
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
        // The task cache is at version 5 (it keeps open requests as
        // messages, once), the folder caches at 2.
        for (p, version) in [(&task_cache, 5), (&inbox_cache, 2)] {
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
        Err(chipset_mail::Error::QuarantinedInbox { path }) => {
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

/// `mail/.gate/task/{t}.json`: the gate's cache of task `t`.
fn task_cache_path(mail: &Mail, t: &str) -> StatePath {
    mail.dir()
        .join_static(".gate")
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
    mail.state().stat(path).unwrap().unwrap().ino
}

/// Writes `v` over the task cache at `path`, as another writer would.
fn write_task_cache(mail: &Mail, path: &StatePath, v: &serde_json::Value) {
    mail.state()
        .write_bytes(path, &serde_json::to_vec(v).unwrap())
        .unwrap();
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

/// `mail/.gate/inbox/`: the folder caches of the inboxes.
fn inbox_caches(mail: &Mail) -> StatePath {
    mail.dir().join_static(".gate").join("inbox").unwrap()
}

/// Removes the whole gate cache (`mail/.gate/`): the state is then one
/// that another program left, which no cache was made for.
fn forget_caches(mail: &Mail) {
    std::fs::remove_dir_all(mail.dir().join_static(".gate").as_path()).unwrap();
}

/// Removes every sent journal (`mail/.gate/sent/`): the files sent so far
/// are then, to the gate, as files another program wrote.
fn forget_records(mail: &Mail) {
    let dir = mail.dir().join_static(".gate").join("sent").unwrap();
    std::fs::remove_dir_all(dir.as_path()).unwrap();
}
