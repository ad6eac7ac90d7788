//! Repair: each crash leftover is found, fixed, and gone on the next check.

use std::io::Write;
use std::time::Duration;

use chipset_mail::{ArchiveOutcome, Location, MailConfig, ManifestEvent, NewMessage, OrphanReason};
use chipset_store::{Defect, DoctorMode};

use crate::{agent, fixture, fixture_with, manifest_bytes, notify, request, response, task};

mod events;
mod memory;

fn codes(mail: &chipset_mail::Mail, mode: DoctorMode) -> Vec<&'static str> {
    let report = mail.doctor(mode).unwrap();
    assert_eq!(report.mode, mode);
    report.findings.iter().map(|f| f.code).collect()
}

fn no_grace() -> MailConfig {
    MailConfig {
        in_flight_grace: Duration::ZERO,
        ..MailConfig::default()
    }
}

#[test]
fn clean_state_is_clean() {
    let f = fixture_with(no_grace());
    let m = &f.mail;
    // The handle keeps the configuration it was opened with.
    assert_eq!(m.config(), &no_grace());
    assert!(m.doctor(DoctorMode::Check).unwrap().is_clean());
    let q = m.send(&request("c", "e", "t", "q", "")).unwrap();
    m.send(&response("e", "c", &q.id, "a", "")).unwrap();
    let report = m.doctor(DoctorMode::Check).unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.scanned, 2);
}

#[test]
fn duplicate_copy_is_quarantined() {
    let f = fixture_with(no_grace());
    let m = &f.mail;
    let n = m.send(&notify("a", "b", "t", "s", "")).unwrap();
    let inbox_path = m.path_of(&n.id, &Location::Inbox(agent("b")));
    let bytes = std::fs::read(&inbox_path).unwrap();
    assert!(matches!(
        m.archive(&n.id).unwrap(),
        ArchiveOutcome::Archived(_)
    ));
    // A crash mid-move can leave the file visible in both directories.
    std::fs::write(&inbox_path, bytes).unwrap();
    // Check reports the extra copy, fixable, and changes nothing.
    let check = m.doctor(DoctorMode::Check).unwrap();
    let [found] = &check.findings[..] else {
        panic!("{check:?}")
    };
    assert_eq!(
        (found.code, &found.fault, found.fixable),
        ("messaging-duplicate-message", &Defect::Missing, true)
    );
    assert!(found.actions.is_empty(), "{found:?}");
    assert!(inbox_path.exists());
    let report = m.doctor(DoctorMode::Fix).unwrap();
    assert_eq!(
        report.findings[0].actions,
        [chipset_store::Action::Quarantined {
            what: "extra copy quarantined (the seed moves a message forward: inbox, archive, \
                   by-task; this copy is the one a crashed move left behind)"
                .to_owned(),
            to: None
        }]
    );
    assert_eq!(
        crate::seen(&report),
        [(
            "messaging-duplicate-message",
            Some(n.id.to_string()),
            format!(
                "messaging-duplicate-message: message `{}` is in archive and inbox/b",
                n.id
            )
        )]
    );
    assert_eq!(
        report.findings[0].path.as_deref(),
        Some(inbox_path.as_path())
    );
    assert!(!inbox_path.exists());
    assert!(m.inbox(&agent("b")).unwrap().is_empty());
    assert!(codes(m, DoctorMode::Check).is_empty());
}

/// Two copies at the same stage of the lifecycle (here, two inboxes: a
/// foreign writer copied a message to `b`'s): the copy met first in the
/// scan's order (inboxes by agent name) is kept and the later one is the
/// extra, so every run reports and quarantines the same copy.
#[test]
fn a_duplicate_at_the_same_stage_keeps_the_copy_met_first() {
    let f = fixture_with(no_grace());
    let m = &f.mail;
    let n = m.send(&notify("x", "a", "t", "s", "")).unwrap();
    let kept = m.path_of(&n.id, &Location::Inbox(agent("a")));
    let extra = m.path_of(&n.id, &Location::Inbox(agent("b")));
    let bytes = m.state().read_bytes(&kept).unwrap().value().unwrap();
    m.state().write_bytes(&extra, &bytes).unwrap();

    let report = m.doctor(DoctorMode::Fix).unwrap();
    assert_eq!(
        crate::seen(&report),
        [(
            "messaging-duplicate-message",
            Some(n.id.to_string()),
            format!(
                "messaging-duplicate-message: message `{}` is in inbox/a and inbox/b",
                n.id
            )
        )]
    );
    assert_eq!(
        report.findings[0].path.as_ref(),
        Some(&extra.as_path().to_path_buf())
    );
    assert!(kept.exists() && !extra.exists());
    assert_eq!(m.inbox(&agent("a")).unwrap(), [n]);
    assert!(codes(m, DoctorMode::Check).is_empty());
}

#[test]
fn lost_reply_index_entry_is_rebuilt() {
    let f = fixture_with(no_grace());
    let m = &f.mail;
    let q = m.send(&request("c", "e", "t", "q", "")).unwrap();
    let a = m.send(&response("e", "c", &q.id, "a", "")).unwrap();
    // As if the crash came between publishing the response and indexing it.
    std::fs::remove_dir_all(m.dir().as_path().join("replies")).unwrap();
    // The response file answers the request even without its index entry.
    assert!(m.has_reply(&q.id).unwrap());
    let report = m.doctor(DoctorMode::Fix).unwrap();
    assert!(crate::seen(&report).contains(&(
        "messaging-missing-reply-index",
        Some(a.id.to_string()),
        format!(
            "messaging-missing-reply-index: response `{}` to `{}` is not in the reply index",
            a.id, q.id
        )
    )));
    assert!(m.has_reply(&q.id).unwrap());
    assert!(codes(m, DoctorMode::Check).is_empty());
}

/// `orphan_after` is a limit a message may reach: exactly that old it is
/// still a live message, a moment older it is a stale orphan.
#[test]
fn a_message_exactly_orphan_after_old_is_not_an_orphan() {
    let f = fixture_with(MailConfig {
        orphan_after: Some(Duration::from_secs(3600)),
        in_flight_grace: Duration::ZERO,
        ..MailConfig::default()
    });
    let m = &f.mail;
    m.send(&notify("c", "e", "t", "s", "")).unwrap();
    f.clock.advance(Duration::from_secs(3600));
    let report = m.doctor(DoctorMode::Check).unwrap();
    assert!(report.is_clean(), "{report:?}");
    f.clock.advance(Duration::from_millis(1));
    assert_eq!(codes(m, DoctorMode::Check), ["messaging-orphan-inbox"]);
}

#[test]
fn orphans_by_each_definition() {
    let f = fixture_with(MailConfig {
        recipients: Some([agent("c"), agent("e")].into()),
        orphan_after: Some(Duration::from_secs(3600)),
        in_flight_grace: Duration::ZERO,
        ..MailConfig::default()
    });
    let m = &f.mail;
    let old = m.send(&request("c", "e", "abandoned", "q", "")).unwrap();
    f.clock.advance(Duration::from_secs(7200));
    m.sweep_task_on_commit(&task("done")).unwrap();
    let late = m.send(&notify("c", "e", "done", "late", "")).unwrap();
    let fresh = m.send(&request("c", "e", "live", "q", "")).unwrap();
    // A message for an agent that has left the registry, written before it left.
    let gone_dir = m.dir().as_path().join("inbox/gone");
    std::fs::create_dir_all(&gone_dir).unwrap();
    let stray_text = std::fs::read_to_string(m.path_of(&fresh.id, &Location::Inbox(agent("e"))))
        .unwrap()
        .replace(
            fresh.id.as_str(),
            "1772714100123-00000000-0000-4000-8000-00000000000a",
        )
        .replace("\"to\": \"e\"", "\"to\": \"gone\"");
    std::fs::write(
        gone_dir.join("1772714100123-00000000-0000-4000-8000-00000000000a.json"),
        stray_text,
    )
    .unwrap();

    let report = m.doctor(DoctorMode::Fix).unwrap();
    let mut orphans: Vec<(String, OrphanReason)> = report
        .findings
        .iter()
        .filter(|f| f.code == "messaging-orphan-inbox")
        .map(|f| {
            let reason = [
                OrphanReason::Stale,
                OrphanReason::TaskSwept,
                OrphanReason::UnknownRecipient,
            ]
            .into_iter()
            .find(|r| f.message.ends_with(&format!("({r})")))
            .expect("an orphan names its reason");
            (f.subject.clone().unwrap(), reason)
        })
        .collect();
    orphans.sort();
    let mut expected = vec![
        (old.id.to_string(), OrphanReason::Stale),
        (late.id.to_string(), OrphanReason::TaskSwept),
        (
            "1772714100123-00000000-0000-4000-8000-00000000000a".to_owned(),
            OrphanReason::UnknownRecipient,
        ),
    ];
    expected.sort();
    assert_eq!(orphans, expected, "{report:?}");
    assert_eq!(m.locate(&old.id).unwrap(), Some(Location::Orphan));
    assert_eq!(
        m.locate(&fresh.id).unwrap(),
        Some(Location::Inbox(agent("e")))
    );
    let orphaned = crate::message_files(m, &m.dir().join_static("archive").join_static("orphan"));
    assert_eq!(orphaned, 3);
    // Orphaning takes the abandoned request out of the gate; the live one stays.
    assert!(m.pending_replies(&task("abandoned")).unwrap().is_empty());
    assert_eq!(m.pending_replies(&task("live")).unwrap().len(), 1);
    let orphaned = m
        .read_manifest()
        .unwrap()
        .iter()
        .filter(|e| crate::event_name(e) == "orphaned")
        .count();
    assert_eq!(orphaned, 3);
    assert!(codes(m, DoctorMode::Check).is_empty());
}

/// Entries where a folder of the layout belongs are moved aside; a name
/// in a message folder that is not `{id}.json` is reported and left for a
/// person (issue 31).
#[test]
fn stray_entries_are_quarantined_or_left() {
    let f = fixture_with(no_grace());
    let m = &f.mail;
    m.send(&notify("a", "b", "t", "s", "")).unwrap();
    std::fs::write(m.dir().as_path().join("inbox/README"), "not an inbox").unwrap();
    std::fs::create_dir_all(m.dir().as_path().join("archive/by-task/t/sub")).unwrap();
    std::fs::create_dir_all(m.dir().as_path().join("replies/1-x")).unwrap();
    std::fs::write(m.dir().as_path().join("replies/1-x/junk"), "").unwrap();
    assert!(
        m.pending_replies(&task("t")).is_err(),
        "fails closed on the stray"
    );
    let found = codes(m, DoctorMode::Fix);
    assert_eq!(
        found
            .iter()
            .filter(|c| **c == "messaging-corrupt-file")
            .count(),
        2,
        "{found:?}"
    );
    assert_eq!(codes(m, DoctorMode::Check), ["messaging-stray-file"]);
    assert!(m.dir().as_path().join("archive/by-task/t/sub").is_dir());
    assert!(m.pending_replies(&task("t")).unwrap().is_empty());
    assert!(m.dir().as_path().join("inbox/.quarantine").is_dir());
}

/// Regression: the doctor indexed a foreign response from an agent that was
/// not the request's addressee, and archived the request as answered, which
/// opened the commit gate (`send` refuses such a response).
#[test]
fn a_response_from_the_wrong_agent_does_not_answer_the_request() {
    let f = fixture_with(no_grace());
    let m = &f.mail;
    let request = m
        .send(&request("critic", "exec", "t1", "q", "why?"))
        .unwrap();
    // Another program writes a response from an intruder straight into the inbox.
    let id = "1772706900001-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab";
    let foreign = serde_json::json!({
        "id": id, "from": "intruder", "to": "critic", "phase": "t1", "round": 0,
        "kind": "response", "subject": "q", "body": "because",
        "expects_reply": false, "in_reply_to": request.id.as_str(),
        "created_at": "2026-03-05T10:35:00.001Z"
    });
    let path = m
        .dir()
        .as_path()
        .join("inbox/critic")
        .join(format!("{id}.json"));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, serde_json::to_vec(&foreign).unwrap()).unwrap();

    let report = m.doctor(DoctorMode::Fix).unwrap();
    assert!(
        report
            .findings
            .iter()
            .any(|f| f.code == "messaging-mismatched-response"
                && f.fault == Defect::Conflict
                && f.subject.as_deref() == Some(id)
                && f.message.contains(&format!("request `{}`", request.id))),
        "{report:?}"
    );
    assert!(
        !report
            .findings
            .iter()
            .any(|f| f.code == "messaging-answered-request-in-inbox")
    );
    assert!(!m.has_reply(&request.id).unwrap());
    let pending = m.pending_replies(&task("t1")).unwrap();
    assert_eq!(
        pending.iter().map(|p| &p.id).collect::<Vec<_>>(),
        [&request.id]
    );
}

/// A plain file where a by-task folder or a reply-index folder belongs,
/// under a name that is a valid task or message id, is reported and moved
/// aside like any stray entry: never taken for a folder (which would skip
/// it unreported, or fail the whole doctor listing it).
#[test]
fn a_file_named_like_a_task_or_reply_folder_is_a_stray() {
    let f = fixture_with(no_grace());
    let m = &f.mail;
    m.send(&notify("a", "b", "t", "s", "")).unwrap();
    let root = m.dir().as_path().to_path_buf();
    for stray in ["archive/by-task/t9", "replies/1-x"] {
        let path = stray
            .split('/')
            .try_fold(m.dir().clone(), |dir, segment| dir.join(segment))
            .unwrap();
        m.state().write_bytes(&path, b"a file").unwrap();
    }

    let report = m.doctor(DoctorMode::Check).unwrap();
    let mut found: Vec<(&str, Option<std::path::PathBuf>)> = report
        .findings
        .iter()
        .map(|f| (f.code, f.path.clone()))
        .collect();
    found.sort();
    assert_eq!(
        found,
        [
            (
                "messaging-corrupt-file",
                Some(root.join("archive/by-task/t9"))
            ),
            ("messaging-corrupt-file", Some(root.join("replies/1-x"))),
        ],
        "{report:?}"
    );
    assert!(
        report
            .findings
            .iter()
            .all(|f| f.message.contains("not a task directory")
                || f.message.contains("not a reply-index directory")),
        "{report:?}"
    );
    m.doctor(DoctorMode::Fix).unwrap();
    assert!(!root.join("archive/by-task/t9").exists());
    assert!(!root.join("replies/1-x").exists());
    assert!(codes(m, DoctorMode::Check).is_empty());
}

/// The tie rule holds whatever order the scan first met the agents' names
/// in: here `c` is met first as the sender of a message in `a`'s inbox, yet
/// of two copies in `b`'s and `c`'s inboxes the one in `b`'s (scanned
/// first, inboxes going by agent name) is kept.
#[test]
fn a_duplicate_tie_follows_the_scan_not_the_order_names_were_first_seen() {
    let f = fixture_with(no_grace());
    let m = &f.mail;
    m.send(&notify("c", "a", "t", "s", "")).unwrap();
    let n = m.send(&notify("x", "b", "t", "s", "")).unwrap();
    let kept = m.path_of(&n.id, &Location::Inbox(agent("b")));
    let extra = m.path_of(&n.id, &Location::Inbox(agent("c")));
    let bytes = m.state().read_bytes(&kept).unwrap().value().unwrap();
    m.state().write_bytes(&extra, &bytes).unwrap();

    let report = m.doctor(DoctorMode::Fix).unwrap();
    let dup: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.code == "messaging-duplicate-message")
        .collect();
    assert_eq!(dup.len(), 1, "{report:?}");
    assert_eq!(dup[0].path.as_ref(), Some(&extra.clone().into_path_buf()));
    assert!(kept.exists() && !extra.exists());
    assert!(codes(m, DoctorMode::Check).is_empty());
}
