//! The audit log: missing `sent`, `archived` and `task-swept` events are
//! reconciled once their writer had time to append them, and a torn or bad
//! manifest is repaired without losing a whole record.

use super::*;

#[test]
fn published_without_sent_event_is_reconciled() {
    // A crash between publishing and appending: simulate by cutting the manifest back.
    let f = fixture_with(no_grace());
    let m = &f.mail;
    m.send(&notify("a", "b", "t", "s", "1")).unwrap();
    let before = manifest_bytes(m);
    let lost = m.send(&notify("a", "b", "t", "s", "2")).unwrap();
    std::fs::write(m.manifest_path(), &before).unwrap();

    let report = m.doctor(DoctorMode::Check).unwrap();
    assert_eq!(
        crate::seen(&report),
        [(
            "messaging-missing-sent-event",
            Some(lost.id.to_string()),
            format!(
                "messaging-missing-sent-event: message `{}` in inbox/b has no `sent` event",
                lost.id
            )
        )]
    );
    assert_eq!(
        report.findings[0].path,
        Some(
            m.path_of(&lost.id, &Location::Inbox(agent("b")))
                .into_path_buf()
        )
    );
    assert_eq!(codes(m, DoctorMode::Fix), ["messaging-missing-sent-event"]);
    assert!(codes(m, DoctorMode::Check).is_empty());
    let events = m.read_manifest().unwrap();
    assert!(events.iter().any(|e| matches!(e,
        ManifestEvent::Sent { id, reconciled: true, .. } if *id == lost.id)));
}

/// Right after a crash between the publish and the manifest append, the
/// doctor says "in flight, check again after T", never "clean"; it repairs
/// nothing yet (the sender may still append), and once the grace period is
/// over the fix appends the event and the doctor is clean.
#[test]
fn young_messages_are_in_flight_not_clean() {
    let f = fixture();
    let m = &f.mail;
    let sent = m.send(&notify("a", "b", "t", "s", "")).unwrap();
    std::fs::write(m.manifest_path(), b"").unwrap();
    f.clock.advance(Duration::from_secs(3));
    for mode in [DoctorMode::Check, DoctorMode::Fix] {
        let report = m.doctor(mode).unwrap();
        assert!(!report.is_clean(), "{mode:?}");
        assert_eq!(report.findings.len(), 1);
        let f = &report.findings[0];
        assert_eq!(
            (f.code, f.subject.as_deref(), &f.fault),
            (
                "messaging-in-flight",
                Some(sent.id.as_str()),
                &Defect::InFlight {
                    check_after: Duration::from_secs(7)
                }
            )
        );
        assert_eq!(
            f.path,
            Some(
                m.path_of(&sent.id, &Location::Inbox(agent("b")))
                    .into_path_buf()
            )
        );
        assert!(!f.fixable);
        assert!(f.actions.is_empty());
        assert!(
            matches!(f.fault, Defect::InFlight { check_after } if check_after == Duration::from_secs(7))
        );
        assert!(f.to_string().contains("check again after 7s"), "{f}");
    }
    assert!(
        m.read_manifest().unwrap().is_empty(),
        "nothing appended yet"
    );
    f.clock.advance(Duration::from_secs(8));
    assert_eq!(
        codes(m, DoctorMode::Check),
        ["messaging-missing-sent-event"]
    );
    assert_eq!(codes(m, DoctorMode::Fix), ["messaging-missing-sent-event"]);
    assert!(m.doctor(DoctorMode::Check).unwrap().is_clean());
}

#[test]
fn torn_and_bad_manifest_lines() {
    let f = fixture_with(no_grace());
    let m = &f.mail;
    m.send(&notify("a", "b", "t", "s", "")).unwrap();
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(m.manifest_path())
        .unwrap();
    log.write_all(b"not json\n{\"event\":\"se").unwrap();
    drop(log);
    assert_eq!(
        codes(m, DoctorMode::Check),
        ["messaging-torn-manifest", "messaging-bad-manifest-line"]
    );
    assert_eq!(
        codes(m, DoctorMode::Fix),
        ["messaging-torn-manifest", "messaging-bad-manifest-line"]
    );
    // Issue 12: the bad line and the torn tail moved to `.quarantine/`, every
    // whole record kept: the doctor is clean afterwards.
    assert!(codes(m, DoctorMode::Check).is_empty());
    let quarantined = std::fs::read_dir(m.manifest_path().parent().unwrap().join(".quarantine"))
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect::<Vec<_>>();
    assert_eq!(quarantined, [b"not json\n{\"event\":\"se\n".to_vec()]);
    m.send(&notify("a", "b", "t", "s", "")).unwrap();
    let manifest = m.read_manifest().unwrap();
    assert_eq!(manifest.len(), 2);
    let log = crate::manifest_log(m);
    assert!(log.torn_tail.is_none() && log.bad_lines.is_empty());
}

/// Issue 12: a directory or FIFO where the manifest belongs is reported, and
/// with Fix moved aside (the `sent` events are reconciled into a new one),
/// instead of stopping the doctor with "Is a directory" or "Illegal seek".
#[test]
fn a_directory_or_fifo_manifest_is_reported_and_moved_aside() {
    for fifo in [false, true] {
        let f = fixture_with(no_grace());
        let m = &f.mail;
        m.send(&notify("a", "b", "t", "s", "")).unwrap();
        let path = m.manifest_path();
        std::fs::remove_file(&path).unwrap();
        if fifo {
            let made = std::process::Command::new("mkfifo")
                .arg(path.as_path())
                .status();
            assert!(made.unwrap().success());
        } else {
            std::fs::create_dir(&path).unwrap();
        }
        assert_eq!(
            codes(m, DoctorMode::Check),
            ["messaging-corrupt-file", "messaging-missing-sent-event"]
        );
        assert_eq!(
            codes(m, DoctorMode::Fix),
            ["messaging-corrupt-file", "messaging-missing-sent-event"]
        );
        assert!(codes(m, DoctorMode::Check).is_empty(), "fifo: {fifo}");
        assert_eq!(m.read_manifest().unwrap().len(), 1);
    }
}

#[test]
fn an_archived_message_without_its_archived_event_gets_one_reconciled() {
    // An empty manifest: a message in `archive/` lacks both events, one in
    // `archive/by-task/` only ever had a `task-swept`, so only `sent` (and
    // its folder the `task-swept`).
    let f = fixture_with(no_grace());
    let m = &f.mail;
    let kept = m.send(&notify("a", "b", "t", "s", "1")).unwrap();
    assert!(matches!(
        m.archive(&kept.id).unwrap(),
        ArchiveOutcome::Archived(_)
    ));
    let swept = m.send(&notify("a", "b", "u", "s", "2")).unwrap();
    assert!(matches!(
        m.archive(&swept.id).unwrap(),
        ArchiveOutcome::Archived(_)
    ));
    m.sweep_task_on_commit(&task("u")).unwrap();
    std::fs::write(m.manifest_path(), b"").unwrap();

    let report = m.doctor(DoctorMode::Check).unwrap();
    let mut found: Vec<(&str, String)> = report
        .findings
        .iter()
        .map(|f| {
            if f.code == "messaging-missing-swept-event" {
                assert!(f.message.contains("holds 1 message(s)"), "{f}");
            }
            (f.code, f.subject.clone().expect("an id or a task"))
        })
        .collect();
    found.sort();
    let mut want = vec![
        ("messaging-missing-archived-event", kept.id.to_string()),
        ("messaging-missing-sent-event", kept.id.to_string()),
        ("messaging-missing-sent-event", swept.id.to_string()),
        ("messaging-missing-swept-event", "u".to_owned()),
    ];
    want.sort();
    assert_eq!(found, want);

    m.doctor(DoctorMode::Fix).unwrap();
    let events = m.read_manifest().unwrap();
    // The reconciled `sent` events first (in id order), then the `archived`,
    // then the `task-swept`.
    let mut names: Vec<(&str, Option<&chipset_mail::MessageId>)> = events
        .iter()
        .map(|e| (crate::event_name(e), crate::event_id(e)))
        .collect();
    assert_eq!(names.pop(), Some(("task-swept", None)));
    assert!(matches!(
        &events[3],
        ManifestEvent::TaskSwept {
            count: 0,
            total: 1,
            reconciled: true,
            ..
        }
    ));
    assert_eq!(names.pop(), Some(("archived", Some(&kept.id))));
    names.sort();
    let mut sent = vec![("sent", Some(&kept.id)), ("sent", Some(&swept.id))];
    sent.sort();
    assert_eq!(names, sent);
    assert!(matches!(
        &events[2],
        ManifestEvent::Archived {
            reconciled: true,
            reply: None,
            ..
        }
    ));
    assert!(m.doctor(DoctorMode::Check).unwrap().is_clean());
}

/// A by-task folder whose `task-swept` event was lost is judged by its
/// newest message: in flight while that one is young (the finding names it
/// and its time left), then missing its event, counting every message in
/// the folder; the fix appends the event with that count.
#[test]
fn a_by_task_folder_without_its_swept_event_is_judged_by_its_newest_message() {
    let f = fixture();
    let m = &f.mail;
    let mut sent = Vec::new();
    for n in 0..3 {
        if n > 0 {
            f.clock.advance(Duration::from_secs(20));
        }
        let s = m
            .send(&NewMessage::notify(
                agent("a"),
                agent("b"),
                task("u"),
                "s",
                n.to_string(),
            ))
            .unwrap();
        assert!(matches!(
            m.archive(&s.id).unwrap(),
            ArchiveOutcome::Archived(_)
        ));
        sent.push(s);
    }
    // The sweep moved all three, then the process died before its event.
    let before = manifest_bytes(m);
    m.sweep_task_on_commit(&task("u")).unwrap();
    m.state().write_bytes(&m.manifest_path(), &before).unwrap();

    // The newest is 3 s old (the oldest 43 s): in flight for 7 s more.
    f.clock.advance(Duration::from_secs(3));
    let report = m.doctor(DoctorMode::Check).unwrap();
    assert_eq!(report.findings.len(), 1, "{report:?}");
    let finding = &report.findings[0];
    assert_eq!(
        (finding.code, finding.subject.as_deref(), &finding.fault),
        (
            "messaging-in-flight",
            Some(sent[2].id.as_str()),
            &Defect::InFlight {
                check_after: Duration::from_secs(7)
            }
        )
    );
    // It names the event awaited: the folder's, not the message's own.
    assert!(
        finding
            .message
            .contains("archive/by-task/u has no `task-swept` event yet"),
        "{finding}"
    );

    // Past the grace: the folder lacks its event, and holds three.
    f.clock.advance(Duration::from_secs(7));
    let report = m.doctor(DoctorMode::Check).unwrap();
    assert_eq!(report.findings.len(), 1, "{report:?}");
    let finding = &report.findings[0];
    assert_eq!(finding.code, "messaging-missing-swept-event");
    assert!(finding.message.contains("holds 3 message(s)"), "{finding}");
    m.doctor(DoctorMode::Fix).unwrap();
    assert!(matches!(
        m.read_manifest().unwrap().last(),
        Some(ManifestEvent::TaskSwept {
            count: 0,
            total: 3,
            reconciled: true,
            ..
        })
    ));
    assert!(m.doctor(DoctorMode::Check).unwrap().is_clean());
}
