//! Group mail (issue 28): one copy per recipient, the gate's `all` and
//! `any` rules, retries after a fault anywhere in the fan-out, and copies
//! the seed's other readers take as ordinary messages.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use chipset_mail::{Error, Mail, MessageId, NewMessage};
use chipset_store::{AgentId, Classify, ManualClock, StateDir, StateOptions, Timestamp};
use chipset_testkit::{EIO, Fault, FaultIo};

use crate::{T0, agent, fixture, mid, request, task};

const GROUP: &str = "1772706900123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab";

fn team() -> Vec<AgentId> {
    ["ann", "bob", "cid", "lead"].map(agent).to_vec()
}

/// A request to the team under the group id; `any`: one answer is enough.
fn ask(any: bool) -> NewMessage<Vec<AgentId>> {
    let draft = NewMessage::request(agent("lead"), team(), task("t1"), "ship-it", "ok to ship?")
        .with_id(mid(GROUP));
    if any { draft.answered_by_any() } else { draft }
}

fn answer(mail: &Mail, copy: &MessageId, from: &str) {
    mail.send(&NewMessage::response(
        agent(from),
        agent("lead"),
        copy.clone(),
        "ship-it",
        "yes",
    ))
    .unwrap();
}

fn inbox_files(root: &Path, who: &str) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(root.join("mail/inbox").join(who))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Each recipient's inbox gets exactly one ordinary message; the sender is
/// left out; every copy carries the group.
#[test]
fn each_recipient_gets_one_copy_and_the_sender_none() {
    let f = fixture();
    let sent = f.mail.send_group(&ask(false)).unwrap();
    assert_eq!(sent[0].group().unwrap().id, mid(GROUP));
    assert!(
        sent.iter().all(|m| m.to != agent("lead")),
        "the sender is left out"
    );
    let to: Vec<&str> = sent.iter().map(|m| m.to.as_str()).collect();
    assert_eq!(to, ["ann", "bob", "cid"]);
    let root = f.tmp.state.root();
    for m in &sent {
        assert_eq!(inbox_files(root, m.to.as_str()), [format!("{}.json", m.id)]);
        let g = m.group().unwrap();
        assert_eq!((&g.id, g.to.len()), (&mid(GROUP), 3));
        // Each copy has its own id, in the group's millisecond (the
        // derivation is pinned by the crate's unit test).
        assert_ne!(m.id, g.id);
        assert_eq!(m.id.as_str()[..13], GROUP[..13]);
        assert_eq!(g.answered_by_any(), Some(false));
        let listed = f.mail.inbox(&m.to).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].subject, "ship-it");
    }
    assert!(inbox_files(root, "lead").is_empty());
}

/// `all`: the task is held until every recipient answered its copy.
#[test]
fn all_holds_the_gate_until_every_recipient_answers() {
    let f = fixture();
    let sent = f.mail.send_group(&ask(false)).unwrap();
    assert_eq!(f.mail.pending_replies(&task("t1")).unwrap().len(), 3);
    answer(&f.mail, &sent[0].id, "ann");
    answer(&f.mail, &sent[1].id, "bob");
    let open = f.mail.pending_replies(&task("t1")).unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].to, agent("cid"));
    assert!(matches!(
        f.mail.archive(&sent[2].id),
        Err(Error::ArchiveWithoutReply { .. })
    ));
    answer(&f.mail, &sent[2].id, "cid");
    assert!(f.mail.pending_replies(&task("t1")).unwrap().is_empty());
}

/// `any`: every copy is pending until one is answered; then none is, and
/// the others may be archived without a reply.
#[test]
fn any_opens_the_gate_at_the_first_answer() {
    let f = fixture();
    let sent = f.mail.send_group(&ask(true)).unwrap();
    assert_eq!(f.mail.pending_replies(&task("t1")).unwrap().len(), 3);
    assert!(matches!(
        f.mail.archive(&sent[0].id),
        Err(Error::ArchiveWithoutReply { .. })
    ));
    answer(&f.mail, &sent[1].id, "bob");
    assert!(f.mail.pending_replies(&task("t1")).unwrap().is_empty());
    assert!(matches!(
        f.mail.archive(&sent[0].id).unwrap(),
        chipset_mail::ArchiveOutcome::Archived(_)
    ));
    // Another task's ordinary request is not touched by the group's rule.
    f.mail
        .send(&request("lead", "ann", "t1", "other", "?"))
        .unwrap();
    assert_eq!(f.mail.pending_replies(&task("t1")).unwrap().len(), 1);
}

/// Fail closed: a `group` field that does not fit its message (a copy id
/// that is not the group's for its addressee) earns no `any` shortcut.
#[test]
fn a_forged_group_field_keeps_its_request_pending() {
    let f = fixture();
    let sent = f.mail.send_group(&ask(true)).unwrap();
    answer(&f.mail, &sent[1].id, "bob");
    // A request planted by another program claiming the group.
    let path = f.tmp.state.root().join("mail/inbox/ann");
    let forged = "1772706900999-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ff";
    let mut json: serde_json::Value =
        serde_json::from_slice(&fs::read(path.join(format!("{}.json", sent[0].id))).unwrap())
            .unwrap();
    json["id"] = forged.into();
    fs::write(
        path.join(format!("{forged}.json")),
        serde_json::to_vec_pretty(&json).unwrap(),
    )
    .unwrap();
    let open = f.mail.pending_replies(&task("t1")).unwrap();
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(open[0].id.as_str(), forged);
}

fn open(root: &Path, fault: Arc<FaultIo>) -> Mail {
    let options = StateOptions {
        io: fault,
        clock: Arc::new(ManualClock::new(Timestamp::from_unix_ms(T0))),
        ..StateOptions::default()
    };
    Mail::new(StateDir::open_with(root, options).unwrap())
}

/// A fault at every I/O call of the fan-out, then a retry with the group
/// id: the group completes, each inbox holding exactly one copy.
#[test]
fn a_retry_after_a_fault_anywhere_completes_the_group_once() {
    let probe = tempfile::tempdir().unwrap();
    let fault = FaultIo::passthrough();
    open(probe.path(), fault.clone())
        .send_group(&ask(false))
        .unwrap();
    let calls = fault.counted();
    assert!(calls > 6, "{calls}");
    for n in 1..=calls {
        let tmp = tempfile::tempdir().unwrap();
        let fault = FaultIo::passthrough();
        let mail = open(tmp.path(), fault.clone());
        fault.set(Fault::nth(n, EIO));
        let first = mail.send_group(&ask(false));
        if let Err(Error::OutcomeUnknown { ids, .. }) = &first {
            assert_eq!(*ids, [mid(GROUP)], "call {n}");
        }
        fault.disarm();
        let again = mail.send_group(&ask(false)).unwrap();
        assert_eq!(again.len(), 3, "call {n}");
        for who in ["ann", "bob", "cid"] {
            assert_eq!(inbox_files(tmp.path(), who).len(), 1, "call {n}: {who}");
        }
        assert_eq!(mail.pending_replies(&task("t1")).unwrap().len(), 3);
    }
}

/// A retry adopts the recipients the first attempt recorded: a list that
/// changed in between does not make a second, different group.
#[test]
fn a_retry_completes_the_group_as_first_sent() {
    let f = fixture();
    let three = f.mail.send_group(&ask(false)).unwrap();
    // Only ann's copy survives, as if the fan-out stopped after it.
    for m in &three[1..] {
        fs::remove_file(
            f.tmp
                .state
                .root()
                .join(format!("mail/inbox/{}/{}.json", m.to, m.id)),
        )
        .unwrap();
    }
    let grown = NewMessage::request(
        agent("lead"),
        ["ann", "bob", "dan"].map(agent).to_vec(),
        task("t1"),
        "ship-it",
        "ok to ship?",
    )
    .with_id(mid(GROUP));
    let again = f.mail.send_group(&grown).unwrap();
    let to: Vec<&str> = again.iter().map(|m| m.to.as_str()).collect();
    assert_eq!(to, ["ann", "bob", "cid"]);
    assert!(inbox_files(f.tmp.state.root(), "dan").is_empty());
    // Other content under the same group id is refused.
    let other = NewMessage::request(agent("lead"), team(), task("t1"), "ship-it", "changed")
        .with_id(mid(GROUP));
    assert!(matches!(
        f.mail.send_group(&other),
        Err(Error::IdTaken { .. })
    ));
}

/// A retry of the group id that resolved to another list (ann and bob,
/// where a concurrent send of the same id went to bob and cid) loses bob's
/// copy to it after ann's was published: the call names ann's copy as
/// delivered, an unknown outcome keeping the refusal as its cause, and
/// ann's copy holds the task's gate.
#[test]
fn a_group_refused_after_publishing_a_copy_names_the_delivered_copy() {
    let group = |to: [&str; 2]| {
        NewMessage::request(
            agent("lead"),
            to.map(agent).to_vec(),
            task("t1"),
            "ship-it",
            "ok?",
        )
        .with_id(mid(GROUP))
    };
    let elsewhere = fixture();
    let theirs = elsewhere.mail.send_group(&group(["bob", "cid"])).unwrap();
    let bob = theirs.iter().find(|m| m.to == agent("bob")).unwrap();
    let name = format!("mail/inbox/bob/{}.json", bob.id);
    let winner = fs::read(elsewhere.tmp.state.root().join(&name)).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let io = crate::seam::RaceIo::new(tmp.path().join(&name), winner);
    let options = StateOptions {
        io: io.clone(),
        clock: Arc::new(ManualClock::new(Timestamp::from_unix_ms(T0))),
        ..StateOptions::default()
    };
    let mail = Mail::new(StateDir::open_with(tmp.path(), options).unwrap());
    let err = mail.send_group(&group(["ann", "bob"])).unwrap_err();
    assert!(io.ran(), "the race did not run");
    assert!(err.is_outcome_unknown(), "{err:?}");
    let Error::PartlySent { ids, source } = &err else {
        panic!("{err:?}")
    };
    assert!(matches!(**source, Error::IdTaken { .. }), "{source:?}");
    assert_eq!(inbox_files(tmp.path(), "ann"), [format!("{}.json", ids[0])]);
    let open = mail.pending_replies(&task("t1")).unwrap();
    assert!(open.iter().any(|m| m.id == ids[0]), "{open:?}");
}

/// Bad input is refused and writes nothing.
#[test]
fn bad_groups_are_refused() {
    let f = fixture();
    let alone = NewMessage::notify(agent("lead"), vec![agent("lead")], task("t1"), "s", "b");
    assert!(matches!(f.mail.send_group(&alone), Err(Error::EmptyGroup)));
    let nobody = NewMessage::notify(agent("lead"), vec![], task("t1"), "s", "b");
    assert!(matches!(f.mail.send_group(&nobody), Err(Error::EmptyGroup)));
    let bad_id = NewMessage::notify(agent("lead"), team(), task("t1"), "s", "b")
        .with_id(mid("not-a-sortable-id"));
    assert!(matches!(
        f.mail.send_group(&bad_id),
        Err(Error::InvalidGroupId { .. })
    ));
    let dotted = NewMessage::notify(agent("lead"), vec![agent("np.x")], task("t1"), "s", "b");
    assert!(matches!(
        f.mail.send_group(&dotted),
        Err(Error::InvalidAgentName { .. })
    ));
    assert!(!f.tmp.state.root().join("mail/inbox").exists());
}

/// A copy is what nubos-pilot's `message.v1` schema accepts: its id matches
/// nubos's `ID_RE`, every required field is there, and the group is one
/// extra field (the schema allows any).
#[test]
fn a_copy_is_an_ordinary_seed_message() {
    let f = fixture();
    let sent = f.mail.send_group(&ask(true)).unwrap();
    let m = &sent[0];
    let path = f
        .tmp
        .state
        .root()
        .join(format!("mail/inbox/ann/{}.json", m.id));
    let json: serde_json::Value = serde_json::from_slice(&fs::read(path).unwrap()).unwrap();
    let id = json["id"].as_str().unwrap();
    let (ms, uuid) = id.split_once('-').unwrap();
    assert!(ms.bytes().all(|b| b.is_ascii_digit()));
    let groups: Vec<usize> = uuid.split('-').map(str::len).collect();
    assert_eq!(groups, [8, 4, 4, 4, 12]);
    assert!(
        uuid.bytes()
            .all(|b| b == b'-' || b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    for field in [
        "from",
        "to",
        "phase",
        "kind",
        "subject",
        "body",
        "created_at",
    ] {
        assert!(json.get(field).is_some(), "{field}");
    }
    assert_eq!(json["expects_reply"], true);
    assert_eq!(json["group"]["expects"], "any");
    assert_eq!(json["group"]["id"], GROUP);
    assert_eq!(
        json["group"]["to"],
        serde_json::json!(["ann", "bob", "cid"])
    );
}
