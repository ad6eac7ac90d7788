//! Files other programs leave in the mail folders never stop a listing
//! (issue 31): a large but valid nubos message is read, a file over the read
//! cap and names that are not `{id}.json` are skipped by listings and
//! reported by the doctor, the gate still fails closed on what it cannot
//! read, and `doctor --fix` never moves a file nubos-pilot still lists
//! unless the seed says the move is right, and then says so.

use std::fs;
use std::path::Path;

use chipset_mail::{Error, Kind};
use chipset_store::{Action, DoctorMode, Report};
use serde_json::json;

use crate::peers::{ANSWERED, OPEN, TASK, files, nubos};
use crate::{agent, mid, task};

/// A second request of the fixture's task, id and file name of our choosing.
const BIG: &str = "1795408571000-0b9e6a57-3c5d-4a1e-9f2b-6d7c8e9fa0b1";

/// nubos-pilot's own shape: keys in insertion order, two-space indent.
fn nubos_request(id: &str, body: &str) -> Vec<u8> {
    let message = json!({
        "id": id,
        "from": "np-critic",
        "to": "np-executor",
        "phase": TASK,
        "round": 3,
        "kind": "request",
        "subject": "dead-code",
        "body": body,
        "expects_reply": true,
        "in_reply_to": null,
        "created_at": "2026-11-23T10:00:00.000Z",
    });
    serde_json::to_vec_pretty(&message).unwrap()
}

fn finding<'r>(report: &'r Report, code: &str) -> Vec<&'r chipset_store::Finding> {
    report.findings.iter().filter(|f| f.code == code).collect()
}

/// Regression: a valid nubos message of 1.2 MiB (200 KiB of control
/// characters, six bytes each once JSON escapes them) failed `mail inbox`
/// with the 1 MiB read cap.
#[test]
fn a_valid_nubos_message_of_over_a_mib_is_read() {
    let n = nubos();
    let bytes = nubos_request(BIG, &"\u{1}".repeat(200 * 1024));
    assert!(bytes.len() > 1_200_000, "{}", bytes.len());
    let inbox = n.folder.join("inbox/np-executor");
    fs::write(inbox.join(format!("{BIG}.json")), &bytes).unwrap();

    let listed = n.mail.inbox(&agent("np-executor")).unwrap();
    let ids: Vec<&str> = listed.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, [OPEN, BIG]);
    assert_eq!(listed[1].body.len(), 200 * 1024);
    let pending = n.mail.pending_replies(&task(TASK)).unwrap();
    assert_eq!(pending.len(), 2);
    assert_eq!(n.mail.find(&mid(BIG)).unwrap().unwrap(), listed[1]);
    let report = n.mail.doctor(DoctorMode::Check).unwrap();
    assert!(finding(&report, "messaging-corrupt-file").is_empty());
    assert!(finding(&report, "messaging-oversized-file").is_empty());
}

/// Regression: a file over the read cap made the whole inbox fail. It is
/// skipped with a warning, the doctor reports it and leaves it, and the
/// gate still fails closed on it (it may be an open request).
#[test]
fn a_file_over_the_read_cap_is_skipped_reported_and_keeps_the_gate_closed() {
    let n = nubos();
    let path = n.folder.join(format!("inbox/np-executor/{BIG}.json"));
    let file = fs::File::create(&path).unwrap();
    file.set_len(17 * 1024 * 1024).unwrap();
    drop(file);

    let listed = n.mail.inbox(&agent("np-executor")).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id.as_str(), OPEN);
    let err = n.mail.pending_replies(&task(TASK)).unwrap_err();
    assert!(
        matches!(err, Error::Corrupt(ref c) if c.path == path),
        "{err}"
    );

    for mode in [DoctorMode::Check, DoctorMode::Fix] {
        let report = n.mail.doctor(mode).unwrap();
        let found = finding(&report, "messaging-oversized-file");
        assert_eq!(found.len(), 1, "{:?}", report.findings);
        assert_eq!(found[0].path.as_deref(), Some(path.as_path()));
        assert!(!found[0].fixable);
        assert!(path.is_file(), "{mode:?} moved it");
    }
    assert!(n.mail.pending_replies(&task(TASK)).is_err());
}

/// Regression: a stray file in an inbox (`notes.txt`, an editor's swap
/// file) made `mail inbox` fail. Listings, the gate and the sweep skip
/// names that do not end in `.json`; the doctor reports every name that is
/// not `{id}.json` and leaves it.
#[test]
fn stray_names_are_skipped_by_listings_and_reported_by_the_doctor() {
    let n = nubos();
    let inbox = n.folder.join("inbox/np-executor");
    let strays = ["notes.txt", &format!("{OPEN}.json.swp"), "4913"];
    for name in strays {
        fs::write(inbox.join(name), b"not a message").unwrap();
    }
    let listed = n.mail.inbox(&agent("np-executor")).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(n.mail.pending_replies(&task(TASK)).unwrap().len(), 1);

    let fixed = n.mail.doctor(DoctorMode::Fix).unwrap();
    let found = finding(&fixed, "messaging-stray-file");
    let mut paths: Vec<&Path> = found.iter().filter_map(|f| f.path.as_deref()).collect();
    paths.sort();
    let mut expected: Vec<_> = strays.iter().map(|s| inbox.join(s)).collect();
    expected.sort();
    assert_eq!(
        paths,
        expected.iter().map(|p| p.as_path()).collect::<Vec<_>>()
    );
    for f in &found {
        assert!(!f.fixable);
        assert!(f.actions.is_empty(), "{:?}", f.actions);
    }
    for name in strays {
        assert!(inbox.join(name).is_file(), "{name} moved");
    }
    // The sweep moves the task's messages past them.
    let swept = n.mail.sweep_task_on_commit(&task(TASK)).unwrap();
    assert_eq!(swept.moved, 4);
    assert!(n.mail.inbox(&agent("np-executor")).unwrap().is_empty());
}

/// Listings make a file's path only for a file that is not the message
/// its name says: what they report still names the very file. A file that
/// does not parse fails the inbox and the gate naming its path, and so
/// does one holding a kind this version does not know; a `.json` name
/// whose id is not valid is skipped by the inbox and fails the gate.
#[test]
fn what_a_listing_cannot_use_is_named_by_its_own_path() {
    let n = nubos();
    let inbox = n.folder.join("inbox/np-executor");
    let broken = inbox.join(format!("{BIG}.json"));
    fs::write(&broken, b"{\"id\":").unwrap();
    for err in [
        n.mail.inbox(&agent("np-executor")).unwrap_err(),
        n.mail.pending_replies(&task(TASK)).unwrap_err(),
    ] {
        assert!(
            matches!(err, Error::Corrupt(ref c) if c.path == broken),
            "{err}"
        );
    }

    let mut newer: serde_json::Value =
        serde_json::from_slice(&nubos_request(BIG, "from a newer program")).unwrap();
    newer["kind"] = json!("poll");
    fs::write(&broken, serde_json::to_vec_pretty(&newer).unwrap()).unwrap();
    for err in [
        n.mail.inbox(&agent("np-executor")).unwrap_err(),
        n.mail.pending_replies(&task(TASK)).unwrap_err(),
    ] {
        assert!(
            matches!(err, Error::Unsupported(ref u) if u.path == broken),
            "{err}"
        );
    }
    fs::remove_file(&broken).unwrap();

    // A control character: a file name, never an id.
    let odd = inbox.join("odd\u{7}.json");
    fs::write(&odd, nubos_request(BIG, "under an odd name")).unwrap();
    let listed = n.mail.inbox(&agent("np-executor")).unwrap();
    let ids: Vec<&str> = listed.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, [OPEN]);
    let err = n.mail.pending_replies(&task(TASK)).unwrap_err();
    assert!(
        matches!(err, Error::Corrupt(ref c) if c.path == odd),
        "{err}"
    );
}

/// A message under a name that is not its id may be a request the seed's
/// reader counts (nubos-pilot lists every valid `*.json` file): the inbox
/// and the gate fail closed on it, and the doctor leaves it for a person.
#[test]
fn a_message_under_another_name_fails_closed_and_stays() {
    let n = nubos();
    let path = n.folder.join("inbox/np-executor/question.json");
    fs::write(&path, nubos_request(BIG, "did you mean it?")).unwrap();
    let inbox = n.mail.inbox(&agent("np-executor")).unwrap_err();
    assert!(
        matches!(inbox, Error::Corrupt(ref c) if c.path == path),
        "{inbox}"
    );
    let err = n.mail.pending_replies(&task(TASK)).unwrap_err();
    assert!(
        matches!(err, Error::Corrupt(ref c) if c.path == path),
        "{err}"
    );
    let report = n.mail.doctor(DoctorMode::Fix).unwrap();
    let found = finding(&report, "messaging-corrupt-file");
    assert_eq!(found.len(), 1, "{:?}", report.findings);
    assert!(!found[0].fixable);
    assert!(path.is_file());
}

/// Regression: `doctor --fix` quarantined files nubos-pilot still lists as
/// messages. A file chipset cannot use (its id is not its name; its task
/// is not a valid task id) that validates against nubos's `message.v1` is
/// reported and left where it is; a file nubos cannot read either is still
/// moved aside. A phase no task id can be is unsupported, not corrupt.
#[test]
fn doctor_fix_never_moves_a_file_nubos_still_lists() {
    let n = nubos();
    let inbox = n.folder.join("inbox/np-executor");
    // Its id field is OPEN's, its name another id.
    let renamed = inbox.join(format!("{BIG}.json"));
    fs::write(&renamed, nubos_request(OPEN, "copied")).unwrap();
    // A phase nubos accepts (any non-empty string) and chipset cannot use.
    let other = "1795408571001-1b9e6a57-3c5d-4a1e-9f2b-6d7c8e9fa0b1";
    let mut odd: serde_json::Value =
        serde_json::from_slice(&nubos_request(other, "odd task")).unwrap();
    odd["phase"] = json!("M005/S007");
    let odd_path = inbox.join(format!("{other}.json"));
    fs::write(&odd_path, serde_json::to_vec_pretty(&odd).unwrap()).unwrap();
    // Not JSON: nubos skips it too, so it is quarantined as before.
    let broken = "1795408571002-2b9e6a57-3c5d-4a1e-9f2b-6d7c8e9fa0b1";
    let broken_path = inbox.join(format!("{broken}.json"));
    fs::write(&broken_path, b"{\"id\":").unwrap();

    let report = n.mail.doctor(DoctorMode::Fix).unwrap();
    let corrupt = finding(&report, "messaging-corrupt-file");
    assert_eq!(corrupt.len(), 2, "{:?}", report.findings);
    let unsupported = finding(&report, "messaging-unsupported-file");
    let [odd_finding] = &unsupported[..] else {
        panic!("{:?}", report.findings)
    };
    assert_eq!(odd_finding.path.as_deref(), Some(odd_path.as_path()));
    assert!(
        odd_finding.message.contains("`M005/S007`"),
        "{}",
        odd_finding.message
    );
    assert!(!odd_finding.fixable && odd_finding.actions.is_empty());
    for f in &corrupt {
        let path = f.path.as_deref().unwrap();
        if path == broken_path {
            assert!(f.fixable);
            assert!(matches!(f.actions[..], [Action::Quarantined { .. }]));
        } else {
            assert!(!f.fixable, "{}", f.message);
            assert!(f.message.contains("nubos-pilot"), "{}", f.message);
            assert!(f.actions.is_empty(), "{:?}", f.actions);
        }
    }
    assert!(renamed.is_file() && odd_path.is_file());
    assert!(!broken_path.exists());
}

/// nubos-pilot leaves an answered request in its inbox; the seed says a
/// response archives its request. `doctor --fix` archives it, and its
/// output says the seed is why.
#[test]
fn doctor_fix_says_the_seed_archives_an_answered_request() {
    let n = nubos();
    fs::rename(
        n.folder.join(format!("archive/{ANSWERED}.json")),
        n.folder.join(format!("inbox/np-executor/{ANSWERED}.json")),
    )
    .unwrap();
    let before = files(&n.folder);
    let report = n.mail.doctor(DoctorMode::Fix).unwrap();
    let answered = finding(&report, "messaging-answered-request-in-inbox");
    assert_eq!(answered.len(), 1);
    let said: Vec<String> = answered[0]
        .actions
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        said.iter()
            .any(|a| a.contains("the seed says a response archives its request")),
        "{said:?}"
    );
    let archived = Path::new("archive").join(format!("{ANSWERED}.json"));
    assert_eq!(
        files(&n.folder)[&archived],
        before[&Path::new("inbox/np-executor").join(format!("{ANSWERED}.json"))]
    );
    assert_eq!(
        n.mail.find(&mid(ANSWERED)).unwrap().unwrap().kind,
        Kind::Request
    );
}
