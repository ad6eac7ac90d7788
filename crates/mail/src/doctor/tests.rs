use std::time::Duration;

use chipset_store::{AgentId, StateDir, TaskId};

use super::*;
use crate::{MailConfig, NewMessage};

/// A state with one of nearly every finding, among enough messages that
/// a small budget spills many runs.
fn troubled(root: &Path) -> Mail {
    let config = MailConfig {
        in_flight_grace: Duration::ZERO,
        ..MailConfig::default()
    };
    let mail = Mail::with_config(StateDir::open(root).unwrap(), config);
    let (c, e) = (AgentId::new("c").unwrap(), AgentId::new("e").unwrap());
    let (t, done) = (TaskId::new("t").unwrap(), TaskId::new("done").unwrap());
    let mut requests = Vec::new();
    for i in 0..40 {
        let q = mail
            .send(&NewMessage::request(
                c.clone(),
                e.clone(),
                t.clone(),
                "q",
                format!("{i}"),
            ))
            .unwrap();
        if i % 2 == 0 {
            mail.send(&NewMessage::response(
                e.clone(),
                c.clone(),
                q.id.clone(),
                "a",
                "",
            ))
            .unwrap();
        }
        requests.push(q);
    }
    mail.send(&NewMessage::notify(
        c.clone(),
        e.clone(),
        done.clone(),
        "n",
        "",
    ))
    .unwrap();
    mail.sweep_task_on_commit(&done).unwrap();
    // An orphan: sent to a swept task.
    mail.send(&NewMessage::notify(c.clone(), e.clone(), done, "late", ""))
        .unwrap();
    let inbox_e = mail.inbox_dir(&e);
    let archive = mail.dir().as_path().join("archive");
    // A duplicate: an archived request copied back into its inbox.
    let answered = &requests[0].id;
    std::fs::copy(
        archive.join(format!("{answered}.json")),
        inbox_e.as_path().join(format!("{answered}.json")),
    )
    .unwrap();
    // Reply-index entries lost.
    std::fs::remove_dir_all(
        mail.dir()
            .as_path()
            .join("replies")
            .join(requests[2].id.as_str()),
    )
    .unwrap();
    // A manifest without its first lines: messages without `sent` events.
    let manifest = std::fs::read_to_string(mail.manifest_path()).unwrap();
    let rest: Vec<&str> = manifest.lines().skip(5).collect();
    std::fs::write(mail.manifest_path(), rest.join("\n") + "\n{\"torn").unwrap();
    // A stray name (left for a person) and a corrupt file.
    std::fs::write(inbox_e.as_path().join("not-a-message.txt"), b"x").unwrap();
    std::fs::write(inbox_e.as_path().join("1-broken.json"), b"{").unwrap();
    mail
}

#[test]
fn a_spilled_scan_finds_what_one_in_memory_finds() {
    let tmp = tempfile::tempdir().unwrap();
    let mail = troubled(tmp.path());
    let in_memory = mail
        .doctor_within(DoctorMode::Check, spill::BUDGET)
        .unwrap();
    let codes: BTreeSet<&str> = in_memory.findings.iter().map(Finding::code).collect();
    for code in [
        "messaging-corrupt-file",
        "messaging-stray-file",
        "messaging-duplicate-message",
        "messaging-missing-reply-index",
        "messaging-orphan-inbox",
        "messaging-missing-sent-event",
        "messaging-torn-manifest",
    ] {
        assert!(codes.contains(code), "{code} not in {codes:?}");
    }
    assert_eq!(in_memory.messages, 40 + 20 + 2);
    // A few hundred bytes: every few records spill a run.
    let spilled = mail.doctor_within(DoctorMode::Check, 300).unwrap();
    assert_eq!(spilled, in_memory);
    // The scratch files have no names: nothing is left in `mail/`.
    let left: Vec<_> = std::fs::read_dir(mail.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        left.iter()
            .all(|n| !n.starts_with(".scratch") && !n.contains(".tmp")),
        "{left:?}"
    );
    // And with Fix, the repairs leave a clean state either way, but for
    // the stray name, which no fix moves.
    mail.doctor_within(DoctorMode::Fix, 300).unwrap();
    let after = mail.doctor_within(DoctorMode::Check, 300).unwrap();
    let stray = Finding::Stray {
        path: mail
            .inbox_dir(&AgentId::new("e").unwrap())
            .as_path()
            .join("not-a-message.txt"),
    };
    assert_eq!(after.findings, [stray], "{:?}", after.findings);
}

/// Regression (issue 31): a state whose manifest was lost has a finding
/// per message, and the doctor held them all (216 MB for 100,000 through
/// `chipset doctor`); they are now spilled with the scan and handed over
/// one at a time, in the same order.
#[test]
fn a_finding_per_message_is_handed_over_without_being_held() {
    let tmp = tempfile::tempdir().unwrap();
    let config = MailConfig {
        in_flight_grace: Duration::ZERO,
        ..MailConfig::default()
    };
    let mail = Mail::with_config(StateDir::open(tmp.path()).unwrap(), config);
    let (c, e) = (AgentId::new("c").unwrap(), AgentId::new("e").unwrap());
    let t = TaskId::new("t").unwrap();
    let mut sent = Vec::new();
    for i in 0..300 {
        let m = NewMessage::notify(c.clone(), e.clone(), t.clone(), "n", format!("{i}"));
        sent.push(mail.send(&m).unwrap().id.clone());
    }
    std::fs::remove_file(mail.manifest_path()).unwrap();
    let mut got = Vec::new();
    let report = mail
        .doctor_streaming(DoctorMode::Check, 512, &mut |f| got.push(f))
        .unwrap();
    assert_eq!(report.held, 0, "the findings are not held");
    assert!(report.findings.is_empty());
    assert_eq!(report.messages, 300);
    let ids: Vec<MessageId> = got
        .iter()
        .map(|f| match f {
            Finding::MissingSentEvent { id, .. } => id.clone(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    sent.sort();
    assert_eq!(ids, sent, "one per message, in id order");
    // The same findings, in the same order, as a run that keeps them.
    let kept = mail
        .doctor_within(DoctorMode::Check, spill::BUDGET)
        .unwrap();
    assert_eq!(kept.findings, got);
}

/// `Groups` hands out a sorted stream one key (the text before the first
/// tab) at a time, with the rest of each of the key's lines in order; a line
/// that is the key alone (no tab) belongs to the key's group with an empty
/// rest, and a different key starts the next group.
#[test]
fn groups_walk_a_sorted_stream_one_key_at_a_time() {
    let tmp = tempfile::tempdir().unwrap();
    let state = StateDir::open(tmp.path()).unwrap();
    let mut sorter = Sorter::new(&state, &state.root_path(), spill::BUDGET);
    for line in ["c\t3", "a\t1", "b", "a", "a"] {
        sorter.push(line.as_bytes()).unwrap();
    }
    let mut groups = Groups::new(sorter.finish().unwrap()).unwrap();
    let mut got = Vec::new();
    while let Some(group) = groups.next_group().unwrap() {
        got.push(group);
    }
    let group = |key: &str, rest: &[&str]| {
        let rest = rest.iter().map(|r| (*r).to_owned()).collect::<Vec<_>>();
        (key.to_owned(), rest)
    };
    assert_eq!(
        got,
        [
            group("a", &["", "", "1"]),
            group("b", &[""]),
            group("c", &["3"])
        ]
    );
}

/// The joins walk a sorted stream a key at a time: each key once with the
/// rest of each of its lines (empty for a bare key), then nothing.
#[test]
fn groups_yield_each_key_once_then_end() {
    let tmp = tempfile::tempdir().unwrap();
    let state = StateDir::open(tmp.path()).unwrap();
    let mut sorter = Sorter::new(&state, &state.root_path(), spill::BUDGET);
    for line in ["b", "a\ty", "a\tx"] {
        sorter.push(line.as_bytes()).unwrap();
    }
    let mut groups = Groups::new(sorter.finish().unwrap()).unwrap();
    let group = |k: &str, lines: &[&str]| {
        Some((
            k.to_owned(),
            lines.iter().map(|l| (*l).to_owned()).collect(),
        ))
    };
    assert_eq!(groups.next_group().unwrap(), group("a", &["x", "y"]));
    assert_eq!(groups.next_group().unwrap(), group("b", &[""]));
    assert_eq!(groups.next_group().unwrap(), None);
    assert_eq!(groups.next_group().unwrap(), None, "and stays ended");
}
