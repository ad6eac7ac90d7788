//! The sweep and the thread through the gate cache: they move and read
//! every file of the task, also ones written since the cache was built.

use super::*;

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
        .send(&NewMessage::notify(
            agent("critic"),
            agent("exec"),
            task("t2"),
            "fyi",
            "another task",
        ))
        .unwrap()
        .id
        .clone();
    warm(m);
    let bad = m
        .inbox_dir(&agent("exec"))
        .as_path()
        .join("1795408571000-7a703292-f1d1-4900-b635-8fd9f1df7f88.json");
    std::fs::write(&bad, b"{").unwrap();
    let err = m.sweep_task_on_commit(&task("t1")).unwrap_err();
    assert_eq!(err.corruption().map(|c| c.path.clone()), Some(bad.clone()));
    // Messages moved before it stopped: an outcome to finish, not "nothing
    // changed".
    assert!(
        matches!(err, chipset_mail::Error::PartlySwept { moved, .. } if moved == ids.len()),
        "{err:?}"
    );
    assert_eq!(
        chipset_store::Classify::kind(&err),
        chipset_store::ErrorKind::OutcomeUnknown
    );
    // Run again, nothing is left to move: the corrupt file alone.
    let again = m.sweep_task_on_commit(&task("t1")).unwrap_err();
    assert!(
        matches!(again, chipset_mail::Error::Corrupt(_)),
        "{again:?}"
    );
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
        .map(|m| m.id.clone())
        .collect();
    assert_eq!(thread, [ids[0].clone(), reply.clone(), archived.clone()]);
    // And again from the cache, unchanged.
    assert_eq!(m.thread(&reply).unwrap().len(), 3);
}

/// Another program's clock may run behind ours: its reply, archived, has an
/// id that sorts before the request it answers, and the thread still finds
/// it (it used to look in `archive/` only for ids newer than the root).
#[test]
fn the_cached_thread_finds_an_archived_reply_from_a_clock_running_behind() {
    let f = fixture();
    let m = &f.mail;
    let ids = busy(m);
    warm(m);
    settle();
    let id = "1000000000001-7a703292-f1d1-4900-b635-8fd9f1df7f88";
    let json = format!(
        r#"{{"id": "{id}", "from": "np-exec", "to": "critic", "phase": "t1", "round": null,
  "kind": "notify", "subject": "note", "body": "b", "expects_reply": false,
  "in_reply_to": "{}", "created_at": "2001-09-09T01:46:40.001Z"}}
"#,
        ids[0]
    );
    let path = m
        .dir()
        .join("archive")
        .unwrap()
        .join(format!("{id}.json"))
        .unwrap();
    m.state().write_bytes(&path, json.as_bytes()).unwrap();
    settle();
    let thread: Vec<MessageId> = m
        .thread(&ids[0])
        .unwrap()
        .into_iter()
        .map(|m| m.id.clone())
        .collect();
    assert_eq!(thread, [ids[0].clone(), MessageId::new(id).unwrap()]);
}

#[test]
fn a_sweep_after_another_changed_its_inboxes_moves_exactly_its_own_mail() {
    let f = fixture();
    let m = &f.mail;
    let ids = busy(m);
    // Another task's mail in the same inbox as t1's requests.
    let t3 = notes(m, "exec", "t3", 3);
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
        Err(chipset_mail::Error::QuarantinedInbox { .. })
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
        .send(&NewMessage::notify(
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
    let mut want = vec![format!("{}.json", ids[1]), format!("{}.json", new.id)];
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
