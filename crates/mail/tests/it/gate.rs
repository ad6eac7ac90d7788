//! The commit gate fails closed: an unreadable file where a request could be
//! is an error naming the file, never a shorter list. Pins the seed defect
//! "a reader that skips unparsable files makes the gate pass".

use chipset_mail::{Error, Location, NewMessage};
use chipset_store::{Defect, DoctorMode};

use crate::{agent, fixture, task};

#[track_caller]
fn check_gate_fails(corrupt: &str, name: &str, what: &str) {
    let f = fixture();
    let m = &f.mail;
    let good = m
        .send(&NewMessage::request(
            agent("critic"),
            agent("exec"),
            task("t1"),
            "q",
            "fine",
        ))
        .unwrap();
    let victim = m
        .send(&NewMessage::request(
            agent("critic"),
            agent("exec"),
            task("t1"),
            "q",
            "victim",
        ))
        .unwrap();
    assert_eq!(m.pending_replies(&task("t1")).unwrap().len(), 2);
    let dir = m.path_of(&good.id, &Location::Inbox(agent("exec")));
    let dir = dir.parent().unwrap();
    let path = if name.is_empty() {
        m.path_of(&victim.id, &Location::Inbox(agent("exec")))
            .into_path_buf()
    } else {
        std::fs::remove_file(m.path_of(&victim.id, &Location::Inbox(agent("exec")))).unwrap();
        dir.join(name)
    };
    std::fs::write(&path, corrupt).unwrap();

    for result in [
        m.pending_replies(&task("t1")).map(|v| v.len()),
        m.pending_replies(&task("other-task")).map(|v| v.len()),
        m.inbox(&agent("exec")).map(|v| v.len()),
    ] {
        let err = result.expect_err(what);
        let c = err.corruption().unwrap_or_else(|| panic!("{what}: {err}"));
        assert_eq!(c.path, path, "{what}");
        assert!(
            err.to_string().contains(&*path.to_string_lossy()),
            "{what}: {err}"
        );
    }

    // Repair moves the file aside (never deletes it); the gate reads again.
    let report = m.doctor(DoctorMode::Fix).unwrap();
    assert!(
        report
            .findings
            .iter()
            .any(|f| f.code == "messaging-corrupt-file"),
        "{report:?}"
    );
    assert!(!path.exists());
    let quarantined: Vec<_> = std::fs::read_dir(dir.join(".quarantine"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(quarantined.len(), 1, "{what}");
    // Regression: the repaired inbox no longer held the bad file, and the gate
    // passed with a shorter list. It stays closed until a person decides.
    match m.pending_replies(&task("t1")) {
        Err(Error::QuarantinedInbox { path }) => assert_eq!(path, quarantined[0], "{what}"),
        other => panic!("{what}: expected QuarantinedInbox, got {other:?}"),
    }
    // The person removes (or restores) it; the gate reads the rest again.
    std::fs::remove_file(&quarantined[0]).unwrap();
    assert_eq!(m.pending_replies(&task("t1")).unwrap().len(), 1, "{what}");
}

#[test]
fn truncated_request_blocks_the_gate() {
    check_gate_fails("{\"id\": \"1-x\", \"kind\": \"requ", "", "truncated");
}

#[test]
fn wrong_shape_blocks_the_gate() {
    check_gate_fails("{\"kind\": \"request\"}", "", "missing fields");
}

#[test]
fn empty_file_blocks_the_gate() {
    check_gate_fails("", "", "empty");
}

/// A `.json` name the seed's reader would read, holding no message, closes
/// the gate as an unreadable request does.
#[test]
fn stray_json_name_blocks_the_gate() {
    check_gate_fails("whatever", "notes.json", "stray json name");
}

/// A name that does not end in `.json` is no message to any program of the
/// seed (issue 31: a `notes.txt` made the inbox and the gate fail): the
/// gate and the inbox pass it over, and the doctor reports it and leaves it.
#[test]
fn a_name_that_is_not_json_is_no_request() {
    let f = fixture();
    let m = &f.mail;
    let open = m
        .send(&NewMessage::request(
            agent("critic"),
            agent("exec"),
            task("t1"),
            "q",
            "open",
        ))
        .unwrap();
    let inbox = m.inbox_dir(&agent("exec")).into_path_buf();
    let notes = inbox.join("notes.txt");
    std::fs::write(&notes, "whatever").unwrap();
    let pending = m.pending_replies(&task("t1")).unwrap();
    assert_eq!(pending, std::slice::from_ref(&open));
    assert_eq!(m.inbox(&agent("exec")).unwrap(), [open]);
    let report = m.doctor(DoctorMode::Fix).unwrap();
    let [found] = &report.findings[..] else {
        panic!("{report:?}")
    };
    assert_eq!(
        (found.code, &found.fault, found.fixable),
        ("messaging-stray-file", &Defect::Stray, false)
    );
    assert_eq!(found.path.as_deref(), Some(notes.as_path()));
    assert!(notes.is_file());
}

#[test]
fn id_that_disagrees_with_name_blocks_the_gate() {
    let json = r#"{"id":"1-other","from":"critic","to":"exec","phase":"t1","round":0,
      "kind":"request","subject":"q","body":"","expects_reply":true,"in_reply_to":null,
      "created_at":"2026-03-05T10:35:00.123Z"}"#;
    check_gate_fails(json, "1-mine.json", "id mismatch");
}

#[test]
fn corrupt_file_in_another_inbox_still_blocks() {
    let f = fixture();
    let m = &f.mail;
    let note = m
        .send(&NewMessage::notify(
            agent("critic"),
            agent("bystander"),
            task("t9"),
            "n",
            "",
        ))
        .unwrap();
    let path = m.path_of(&note.id, &Location::Inbox(agent("bystander")));
    std::fs::write(&path, b"\xff\xfe").unwrap();
    // Its task cannot be known, so it might be one of t1's requests.
    let err = m.pending_replies(&task("t1")).unwrap_err();
    assert!(
        matches!(err, Error::Corrupt(ref c) if c.path == path),
        "{err}"
    );
}

#[test]
fn corrupt_request_cannot_be_archived() {
    let f = fixture();
    let m = &f.mail;
    let q = m
        .send(&NewMessage::request(
            agent("critic"),
            agent("exec"),
            task("t1"),
            "q",
            "",
        ))
        .unwrap();
    std::fs::write(m.path_of(&q.id, &Location::Inbox(agent("exec"))), "{").unwrap();
    assert!(matches!(m.archive(&q.id), Err(Error::Corrupt(_))));
    assert!(matches!(
        m.send(&NewMessage::response(
            agent("exec"),
            agent("critic"),
            q.id.clone(),
            "a",
            ""
        )),
        Err(Error::Corrupt(_))
    ));
}

#[test]
fn symlinked_message_blocks_the_gate_and_is_quarantined() {
    let f = fixture();
    let m = &f.mail;
    let q = m
        .send(&NewMessage::request(
            agent("critic"),
            agent("exec"),
            task("t1"),
            "q",
            "",
        ))
        .unwrap();
    let path = m.path_of(&q.id, &Location::Inbox(agent("exec")));
    let elsewhere = f.tmp.scratch("elsewhere.json");
    std::fs::rename(&path, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
    let err = m.pending_replies(&task("t1")).unwrap_err();
    assert!(err.to_string().contains(&*path.to_string_lossy()), "{err}");
    let report = m.doctor(DoctorMode::Fix).unwrap();
    assert_eq!(report.findings.len(), 1, "{report:?}");
    assert!(matches!(
        m.pending_replies(&task("t1")),
        Err(Error::QuarantinedInbox { .. })
    ));
    assert!(elsewhere.exists(), "the link's target is left alone");
}

/// A message of a kind (or schema, or priority) this version does not know
/// is unsupported, not corrupt: every reader that needs it fails closed with
/// `Error::Unsupported`, and the doctor reports it and leaves it in place.
#[test]
fn unknown_kinds_and_schemas_are_unsupported_and_never_quarantined() {
    for (field, value, what) in [
        ("kind", "\"question\"", "message kind `question`"),
        ("schema", "\"message.v2\"", "message schema `message.v2`"),
        ("priority", "\"critical\"", "message priority `critical`"),
    ] {
        let f = fixture();
        let m = &f.mail;
        let q = m
            .send(&NewMessage::request(
                agent("critic"),
                agent("exec"),
                task("t1"),
                "q",
                "?",
            ))
            .unwrap();
        let path = m.path_of(&q.id, &Location::Inbox(agent("exec")));
        let mut v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        v[field] = serde_json::from_str(value).unwrap();
        let bytes = serde_json::to_vec(&v).unwrap();
        std::fs::write(&path, &bytes).unwrap();

        let is_unsupported = |e: Error| {
            assert!(e.corruption().is_none(), "{field}: {e}");
            let u = e.unsupported().unwrap_or_else(|| panic!("{field}: {e}"));
            assert_eq!((u.path.as_path(), u.what.as_str()), (path.as_path(), what));
        };
        is_unsupported(m.pending_replies(&task("t1")).unwrap_err());
        is_unsupported(m.inbox(&agent("exec")).unwrap_err());
        is_unsupported(m.find(&q.id).unwrap_err());
        is_unsupported(m.archive(&q.id).unwrap_err());
        is_unsupported(m.sweep_task_on_commit(&task("t1")).unwrap_err());

        let report = m.doctor(DoctorMode::Fix).unwrap();
        assert!(
            report.findings.iter().any(|f| matches!(&f.fault,
                Defect::Unsupported(w) if w == what)
                && f.path.as_deref() == Some(path.as_path())),
            "{field}: {:?}",
            report.findings
        );
        assert!(
            report
                .findings
                .iter()
                .all(|f| !matches!(f.fault, Defect::Corrupt(_)))
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            bytes,
            "{field}: left in place, unchanged"
        );
        // Still closed after the repair.
        is_unsupported(m.pending_replies(&task("t1")).unwrap_err());
    }
}

/// Archiving a request answered by a response another program wrote
/// enters the response in the reply index without a sync: the index is a
/// cache, and the move's directory syncs are the only flushes (issue 31:
/// the index entry was a durable publish, as costly as the move).
#[test]
fn archiving_a_request_a_foreign_response_answered_syncs_only_directories() {
    use chipset_store::{StateOptions, SyncOrder};
    use chipset_testkit::{EIO, Fault, FaultIo, IoOp, TempState};
    let fault = FaultIo::with_order(Fault::nth(0, EIO), SyncOrder::FileThenDir);
    // On the manual clock, as every other test of the binary: the id
    // generator is process-wide, and ids from the real clock would sort
    // after the fixed ids other tests write.
    let (tmp, _clock) = TempState::manual_with(StateOptions {
        io: fault.clone(),
        ..StateOptions::default()
    });
    let state = tmp.state.clone();
    let mail = chipset_mail::Mail::new(state);
    let q = mail
        .send(&NewMessage::request(
            agent("critic"),
            agent("exec"),
            task("t1"),
            "why",
            "question",
        ))
        .unwrap();
    let id = format!(
        "{}-7a703292-f1d1-4900-b635-8fd9f1df7f88",
        4_102_444_800_000u64
    );
    let json = format!(
        r#"{{"id": "{id}", "from": "exec", "to": "critic", "phase": "t1", "round": null,
  "kind": "response", "subject": "why", "body": "because", "expects_reply": false,
  "in_reply_to": "{}", "created_at": "2026-03-05T10:36:39.000Z"}}
"#,
        q.id
    );
    let path = mail
        .inbox_dir(&agent("critic"))
        .join(format!("{id}.json"))
        .unwrap();
    mail.state().create_new(&path, json.as_bytes()).unwrap();
    // `archive/` exists (its creation is synced, as every durable folder's).
    let note = mail
        .send(&NewMessage::notify(
            agent("exec"),
            agent("critic"),
            task("t1"),
            "fyi",
            "note",
        ))
        .unwrap();
    assert!(matches!(
        mail.archive(&note.id).unwrap(),
        chipset_mail::ArchiveOutcome::Archived(_)
    ));
    let before = fault.calls().len();
    assert!(matches!(
        mail.archive(&q.id).unwrap(),
        chipset_mail::ArchiveOutcome::Archived(_)
    ));
    let calls = fault.calls()[before..].to_vec();
    let flushes: Vec<IoOp> = calls
        .iter()
        .copied()
        .filter(|c| matches!(c, IoOp::Sync | IoOp::WriteBack))
        .collect();
    assert_eq!(flushes, Vec::<IoOp>::new(), "{calls:?}");
    // The move's two (`archive/`, then the inbox); the index entry's new
    // folder is made without one (the index is a cache).
    assert_eq!(
        calls.iter().filter(|c| **c == IoOp::SyncDir).count(),
        2,
        "{calls:?}"
    );
    // And the response is in the index: the next look is the fast one.
    assert!(mail.has_reply(&q.id).unwrap());
    let marker = mail
        .dir()
        .join("replies")
        .unwrap()
        .join(q.id.as_str())
        .unwrap();
    assert_eq!(mail.state().list(&marker).unwrap().len(), 1);
}

/// The first gate of a fresh state makes the cache's folders
/// (`mail/.gate/task/`, `mail/.gate/inbox/`) and writes its files without
/// a single sync: they are caches (issue 31: the folders cost the first
/// gate a directory sync each, and it was slower than the full scan).
#[test]
fn the_first_gate_of_a_fresh_state_syncs_nothing() {
    use chipset_store::{StateOptions, SyncOrder};
    use chipset_testkit::{EIO, Fault, FaultIo, IoOp, TempState};
    let fault = FaultIo::with_order(Fault::nth(0, EIO), SyncOrder::FileThenDir);
    let (tmp, _clock) = TempState::manual_with(StateOptions {
        io: fault.clone(),
        ..StateOptions::default()
    });
    let mail = chipset_mail::Mail::new(tmp.state.clone());
    let drafts: Vec<NewMessage> = (0..3)
        .map(|i| {
            NewMessage::request(
                agent("critic"),
                agent("exec"),
                task("t1"),
                "why",
                format!("question {i}"),
            )
        })
        .collect();
    mail.send_batch(&drafts).unwrap();
    let before = fault.calls().len();
    assert_eq!(mail.pending_replies(&task("t1")).unwrap().len(), 3);
    let calls = fault.calls()[before..].to_vec();
    assert!(calls.contains(&IoOp::Mkdir), "{calls:?}");
    for sync in [IoOp::Sync, IoOp::SyncDir, IoOp::WriteBack] {
        assert!(!calls.contains(&sync), "{sync:?} in {calls:?}");
    }
}
