//! The doctor of mail on a server (issue 30): rows damaged through the
//! backend (a missing or stale index row, a duplicate, a lost reply-index
//! entry, an orphan, bad bytes) are found, and the fix repairs each in
//! one transaction, never deleting a message. Each runs when
//! `CHIPSET_TEST_PG` names a server.

use std::sync::Arc;

use chipset_backend::{Backend, Dir, Key};
use chipset_mail::{Location, Mail, MessageId, NewMessage};
use chipset_store::{DoctorMode, Report};
use chipset_testkit::TempState;

use crate::place::Place;
use crate::{agent, response, task};

const OTHER: &str = "1772706900124-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab";

/// A place on the server, the mail on it and a raw handle on its rows.
fn server(test: &str) -> Option<(Place, TempState, Mail, Arc<dyn Backend>)> {
    let place = Place::pg(test)?;
    let tmp = TempState::new();
    let mail = place.open(&tmp.state);
    let b = place.seam().unwrap();
    Some((place, tmp, mail, b))
}

/// The folder `mail/{dirs…}`.
fn dir(dirs: &[&str]) -> Dir {
    let mut d = Dir::new("mail").unwrap();
    for s in dirs {
        d = d.join(s).unwrap();
    }
    d
}

fn key(dirs: &[&str], name: &str) -> Key {
    dir(dirs).key(name).unwrap()
}

fn json(id: &MessageId) -> String {
    format!("{id}.json")
}

fn remove(b: &dyn Backend, key: &Key) {
    let v = b.read(key).unwrap().unwrap();
    b.remove(key, v.version).unwrap();
}

/// Writes a row that was not there, as a damaging program would.
fn plant(b: &dyn Backend, key: &Key, bytes: &[u8]) {
    let _ = b.create(key, bytes).unwrap();
}

/// The bytes of a row that is there.
fn bytes_of(b: &dyn Backend, key: &Key) -> Vec<u8> {
    b.read(key).unwrap().unwrap().value
}

/// A note from `a` to `exec` on task `t`.
fn note(t: &str, subject: &str) -> NewMessage {
    NewMessage::notify(agent("a"), agent("exec"), task(t), subject, "b")
}

fn request(t: &str) -> NewMessage {
    NewMessage::request(agent("critic"), agent("exec"), task(t), "dead-code", "?")
}

fn codes(report: &Report) -> Vec<&'static str> {
    let mut codes: Vec<_> = report.findings.iter().map(|f| f.code).collect();
    codes.sort_unstable();
    codes
}

/// Checks, asserting the findings' codes (sorted), and returns the report.
fn check_finds(mail: &Mail, expected: &[&str]) -> Report {
    let check = mail.doctor(DoctorMode::Check).unwrap();
    assert_eq!(codes(&check), expected, "{check:#?}");
    check
}

/// Fixes, then checks that a second check finds nothing.
fn fix_until_clean(mail: &Mail) -> Report {
    let fixed = mail.doctor(DoctorMode::Fix).unwrap();
    assert!(fixed.findings.iter().all(|f| f.is_fixed()), "{fixed:#?}");
    let after = mail.doctor(DoctorMode::Check).unwrap();
    assert!(after.is_clean(), "{after:#?}");
    fixed
}

/// A request without a reply whose `open/` row is gone: the commit gate
/// passes while the request is open (the gate fails open). The doctor
/// says so, and the fix writes the row back from the request.
#[test]
fn a_missing_open_row_is_found_and_the_fix_closes_the_gate() {
    let Some((_p, _t, mail, b)) = server("a_missing_open_row_is_found") else {
        return;
    };
    let q = mail.send(&request("t1")).unwrap();
    remove(b.as_ref(), &key(&["open", "t1"], &json(&q.id)));
    assert!(
        mail.pending_replies(&task("t1")).unwrap().is_empty(),
        "without its row the gate fails open"
    );
    let check = check_finds(&mail, &["messaging-missing-open-row"]);
    let finding = &check.findings[0];
    assert_eq!(finding.subject.as_deref(), Some(q.id.as_str()));
    assert!(finding.message.contains("fails open"), "{finding:?}");
    assert!(mail.pending_replies(&task("t1")).unwrap().is_empty());

    fix_until_clean(&mail);
    let pending = mail.pending_replies(&task("t1")).unwrap();
    assert_eq!(pending, [q], "the gate holds the request again");
}

/// Missing `ids/` and `task/` rows make a message unfindable and unswept;
/// an id record of no message and a task row under the wrong task are
/// stale. The fix writes and removes index rows only.
#[test]
fn missing_and_stale_index_rows_are_repaired() {
    let Some((_p, _t, mail, b)) = server("missing_and_stale_index_rows") else {
        return;
    };
    let n = mail.send(&note("t1", "s")).unwrap();
    remove(b.as_ref(), &key(&["ids"], &json(&n.id)));
    remove(b.as_ref(), &key(&["task", "t1"], &json(&n.id)));
    let record = br#"{"task":"t1","to":"exec"}"#;
    plant(b.as_ref(), &key(&["ids"], &format!("{OTHER}.json")), record);
    plant(b.as_ref(), &key(&["task", "t9"], &json(&n.id)), record);
    assert_eq!(mail.find(&n.id).unwrap(), None, "no id record, not found");

    let check = check_finds(
        &mail,
        &[
            "messaging-missing-index",
            "messaging-missing-index",
            "messaging-stale-index",
            "messaging-stale-index",
        ],
    );
    assert_eq!(check.scanned, 1);
    fix_until_clean(&mail);
    assert_eq!(
        mail.locate(&n.id).unwrap(),
        Some(Location::Inbox(agent("exec")))
    );
    assert!(
        b.read(&key(&["ids"], &format!("{OTHER}.json")))
            .unwrap()
            .is_none()
    );
    assert_eq!(mail.sweep_task_on_commit(&task("t1")).unwrap().moved, 1);
}

/// An open row left for an answered request blocks the gate (it fails
/// closed): the fix removes it. An open row of no message holds the only
/// copy of its bytes: the fix moves it aside.
#[test]
fn stale_open_rows_are_removed_or_moved_aside() {
    let Some((_p, _t, mail, b)) = server("stale_open_rows") else {
        return;
    };
    let q = mail.send(&request("t1")).unwrap();
    mail.send(&response("exec", "critic", &q.id, "dead-code", "yes"))
        .unwrap();
    let archived = bytes_of(b.as_ref(), &key(&["archive"], &json(&q.id)));
    plant(b.as_ref(), &key(&["open", "t1"], &json(&q.id)), &archived);
    plant(
        b.as_ref(),
        &key(&["open", "t1"], &format!("{OTHER}.json")),
        b"{\"lost\": 1}",
    );
    assert!(
        mail.pending_replies(&task("t1")).is_err(),
        "the gate fails closed"
    );

    check_finds(&mail, &["messaging-stale-index", "messaging-stale-index"]);
    fix_until_clean(&mail);
    assert!(mail.pending_replies(&task("t1")).unwrap().is_empty());
    let aside = b.list(&dir(&["open", "t1", "quarantine"])).unwrap();
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert!(aside[0].ends_with(&format!("{OTHER}.json")), "{aside:?}");
}

/// A second copy of an archived message back in its inbox, a reply whose
/// reply-index entry is lost, and a message delivered to a task already
/// swept (an orphan): each is found, and fixed in one transaction.
#[test]
fn duplicates_lost_reply_index_and_orphans_are_repaired() {
    let Some((_p, _t, mail, b)) = server("duplicates_lost_reply_index_and_orphans") else {
        return;
    };
    let n = mail.send(&note("t1", "s")).unwrap();
    let _ = mail.archive(&n.id).unwrap();
    let bytes = bytes_of(b.as_ref(), &key(&["archive"], &json(&n.id)));
    plant(b.as_ref(), &key(&["inbox", "exec"], &json(&n.id)), &bytes);

    let q = mail.send(&request("t1")).unwrap();
    let r = mail
        .send(&response("exec", "critic", &q.id, "dead-code", "yes"))
        .unwrap();
    remove(
        b.as_ref(),
        &key(
            &["replies", q.id.as_str()],
            &format!("response-{}.json", r.id),
        ),
    );
    assert!(!mail.has_reply(&q.id).unwrap());

    let _ = mail.send(&note("t2", "s")).unwrap();
    let _ = mail.sweep_task_on_commit(&task("t2")).unwrap();
    let late = mail.send(&note("t2", "late")).unwrap();

    check_finds(
        &mail,
        &[
            "messaging-duplicate-message",
            "messaging-missing-reply-index",
            "messaging-orphan-inbox",
        ],
    );
    fix_until_clean(&mail);
    assert_eq!(mail.inbox_len(&agent("exec")).unwrap(), 0);
    assert_eq!(mail.locate(&n.id).unwrap(), Some(Location::Archive));
    assert!(mail.has_reply(&q.id).unwrap());
    assert!(
        b.read(&key(&["archive", "orphan"], &json(&late.id)))
            .unwrap()
            .is_some()
    );
    assert!(
        mail.read_manifest().unwrap().iter().any(
            |e| matches!(e, chipset_mail::ManifestEvent::Orphaned { id, .. } if *id == late.id)
        )
    );
}

/// A row that does not parse is moved aside into the folder `quarantine`
/// beside it (never deleted); a name that is not a message's is left.
#[test]
fn bad_bytes_are_moved_aside_and_strays_left() {
    let Some((_p, _t, mail, b)) = server("bad_bytes_are_moved_aside") else {
        return;
    };
    mail.send(&note("t1", "s")).unwrap();
    let bad = key(&["inbox", "exec"], &format!("{OTHER}.json"));
    let bytes: &[u8] = b"{\"id\": \"1772706900124-9b3e";
    let _ = b.put(&bad, bytes).unwrap();
    let _ = b
        .put(&key(&["inbox", "exec"], "notes.txt"), b"mine")
        .unwrap();
    // The inbox fails on it; its listing reads past it and names it.
    let exec = agent("exec");
    assert!(mail.inbox(&exec).unwrap_err().corruption().is_some());
    let listing = mail.inbox_listing(&exec).unwrap();
    assert_eq!((listing.items.len(), listing.corrupt.len()), (1, 1));
    let check = mail.doctor(DoctorMode::Check).unwrap();
    let found: Vec<(&str, bool)> = check.findings.iter().map(|f| (f.code, f.fixable)).collect();
    assert_eq!(
        found,
        [
            ("messaging-corrupt-file", true),
            ("messaging-stray-file", false)
        ],
        "{check:#?}"
    );
    assert_eq!(bytes_of(b.as_ref(), &bad), bytes, "checking moves nothing");
    let fixed = mail.doctor(DoctorMode::Fix).unwrap();
    assert!(fixed.findings[0].is_fixed(), "{fixed:#?}");
    assert!(b.read(&bad).unwrap().is_none());
    let aside_dir = dir(&["inbox", "exec", "quarantine"]);
    let aside = b.list(&aside_dir).unwrap();
    assert_eq!(aside.len(), 1);
    let kept = bytes_of(b.as_ref(), &aside_dir.key(&aside[0]).unwrap());
    assert_eq!(kept, bytes, "moved, byte for byte");
    assert_eq!(mail.inbox_len(&agent("exec")).unwrap(), 1);
    // A stray stays for a person.
    check_finds(&mail, &["messaging-stray-file"]);
}
