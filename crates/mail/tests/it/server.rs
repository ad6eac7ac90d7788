//! Mail's guarantees where a server differs from a directory (issue 30):
//! the retry rules and refusals on both backends from the same bodies; the
//! gate failing closed across two clients, and a send cut at its commit,
//! on PostgreSQL.

use chipset_backend::testing::Proxy;
use chipset_backend::{Backend, PgBackend};
use chipset_mail::{
    ArchiveOutcome, Error, Location, Mail, MailConfig, ManifestEvent, MessageId, NewMessage,
};
use chipset_store::{Classify, TaskId};
use chipset_testkit::TempState;

use crate::place::Place;
use crate::{agent, mid, notify, response, task};

const ID: &str = "1772706900123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab";
const ID2: &str = "1772706900124-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab";
const GROUP: &str = "1772706900125-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab";

chipset_backend::both!(
    crate::place::Place;
    a_retry_with_the_same_id_returns_the_first_delivery,
    other_content_under_a_taken_id_is_refused,
    a_response_retried_archives_its_request_once,
    bad_input_is_refused_and_changes_nothing,
    group_any_rule_settles_the_gate,
    a_group_id_and_a_single_id_are_never_shared,
    sweep_moves_the_task_and_clears_its_gate,
);

fn open(place: &Place) -> (TempState, Mail) {
    let tmp = TempState::new();
    let mail = place.open(&tmp.state);
    (tmp, mail)
}

fn request(id: &str) -> NewMessage {
    crate::request("critic", "exec", "t1", "dead-code", "did you mean it?").with_id(mid(id))
}

fn sent_events(mail: &Mail, id: &MessageId) -> usize {
    mail.read_manifest()
        .unwrap()
        .iter()
        .filter(|e| matches!(e, ManifestEvent::Sent { id: x, .. } if x == id))
        .count()
}

fn ids(messages: &[chipset_mail::Message]) -> Vec<&str> {
    messages.iter().map(|m| m.id.as_str()).collect()
}

fn a_retry_with_the_same_id_returns_the_first_delivery(place: &Place) {
    let (_tmp, mail) = open(place);
    let first = mail.send(&request(ID)).unwrap();
    let again = mail.send(&request(ID)).unwrap();
    assert_eq!(again, first, "the first delivery, created_at included");
    // Still the first after it moved on.
    mail.send(&response("exec", "critic", &first.id, "dead-code", "yes"))
        .unwrap();
    assert_eq!(mail.send(&request(ID)).unwrap(), first);
    assert_eq!(mail.locate(&first.id).unwrap(), Some(Location::Archive));
    assert_eq!(sent_events(&mail, &first.id), 1);
    assert_eq!(mail.inbox_len(&agent("exec")).unwrap(), 0);
    // A batch retried whole sends nothing twice.
    let batch: Vec<NewMessage> = [ID2, GROUP]
        .iter()
        .map(|id| notify("a", "b", "t1", "note", "n").with_id(mid(id)))
        .collect();
    let one = mail.send_batch(&batch).unwrap();
    assert_eq!(mail.send_batch(&batch).unwrap(), one);
    assert_eq!(mail.inbox_len(&agent("b")).unwrap(), 2);
}

fn other_content_under_a_taken_id_is_refused(place: &Place) {
    let (_tmp, mail) = open(place);
    mail.send(&request(ID)).unwrap();
    let other = crate::request("critic", "exec", "t1", "x", "other").with_id(mid(ID));
    assert!(matches!(
        mail.send(&other),
        Err(Error::IdTaken {
            location: Location::Inbox(_),
            ..
        })
    ));
    assert_eq!(mail.inbox_len(&agent("exec")).unwrap(), 1);
}

fn a_response_retried_archives_its_request_once(place: &Place) {
    let (_tmp, mail) = open(place);
    let q = mail.send(&request(ID)).unwrap();
    assert_eq!(ids(&mail.pending_replies(&task("t1")).unwrap()), [ID]);
    let answer = response("exec", "critic", &q.id, "dead-code", "yes").with_id(mid(ID2));
    let a = mail.send(&answer).unwrap();
    assert!(mail.pending_replies(&task("t1")).unwrap().is_empty());
    assert_eq!(mail.send(&answer).unwrap(), a);
    let archived = mail
        .read_manifest()
        .unwrap()
        .iter()
        .filter(|e| matches!(e, ManifestEvent::Archived { id, .. } if *id == q.id))
        .count();
    assert_eq!(archived, 1);
    assert!(mail.has_reply(&q.id).unwrap());
    assert_eq!(ids(&mail.thread(&a.id).unwrap()), [ID, ID2]);
    assert_eq!(
        mail.archive(&q.id).unwrap(),
        ArchiveOutcome::AlreadyArchived(Location::Archive)
    );
    // The critic archives the answer; archiving again changes nothing.
    assert!(matches!(
        mail.archive(&a.id).unwrap(),
        ArchiveOutcome::Archived(_)
    ));
    assert_eq!(
        mail.archive(&a.id).unwrap(),
        ArchiveOutcome::AlreadyArchived(Location::Archive)
    );
}

fn bad_input_is_refused_and_changes_nothing(place: &Place) {
    let (_tmp, mail) = open(place);
    let big = "x".repeat(1 << 20);
    let draft = NewMessage::notify(agent("a"), agent("b"), task("t1"), "big", big);
    assert!(matches!(mail.send(&draft), Err(Error::BodyTooLarge { .. })));
    // Every value is a parameter: text that would be SQL is text.
    let sql = "x'); DROP TABLE chipset_entries; --";
    let m = mail
        .send(&NewMessage::request(
            agent("a"),
            agent("b"),
            TaskId::new("t1").unwrap(),
            "sql",
            sql,
        ))
        .unwrap();
    assert_eq!(mail.find(&m.id).unwrap().unwrap().body, sql);
    let q = mail.send(&request(ID)).unwrap();
    assert!(matches!(
        mail.archive(&q.id),
        Err(Error::ArchiveWithoutReply { .. })
    ));
    let not_mine = response("a", "critic", &q.id, "dead-code", "no");
    assert!(matches!(
        mail.send(&not_mine),
        Err(Error::NotAddressee { .. })
    ));
    let orphan = NewMessage::response(agent("exec"), agent("critic"), mid(ID2), "dead-code", "no");
    assert!(matches!(
        mail.send(&orphan),
        Err(Error::ParentNotFound { .. })
    ));
    assert_eq!(ids(&mail.pending_replies(&task("t1")).unwrap()).len(), 2);
    assert_eq!(mail.inbox(&agent("b")).unwrap().len(), 1);
}

fn group_any_rule_settles_the_gate(place: &Place) {
    let (_tmp, mail) = open(place);
    let draft = NewMessage::request(
        agent("lead"),
        ["ann", "bob", "cid"].map(agent).to_vec(),
        task("t1"),
        "ship-it",
        "ok to ship?",
    )
    .answered_by_any()
    .with_id(mid(GROUP));
    let sent = mail.send_group(&draft).unwrap();
    assert_eq!(sent.len(), 3);
    assert_eq!(mail.send_group(&draft).unwrap(), sent);
    assert_eq!(mail.pending_replies(&task("t1")).unwrap().len(), 3);
    let bob = sent.iter().find(|m| m.to == agent("bob")).unwrap();
    mail.send(&response("bob", "lead", &bob.id, "ship-it", "yes"))
        .unwrap();
    assert!(mail.pending_replies(&task("t1")).unwrap().is_empty());
}

/// An id names one send: a message sent alone under a group's id (a
/// retry of the group to one member) would be a second copy, and a group
/// under the id of a message sent alone a second delivery. Both are
/// refused, and nothing is written.
fn a_group_id_and_a_single_id_are_never_shared(place: &Place) {
    let (_tmp, mail) = open(place);
    let team = ["ann", "bob", "lead"].map(agent).to_vec();
    let group = |id: &str| {
        NewMessage::request(agent("lead"), team.clone(), task("t1"), "ship-it", "ok?")
            .with_id(mid(id))
    };
    let alone =
        |to: &str, id: &str| crate::request("lead", to, "t1", "ship-it", "ok?").with_id(mid(id));
    let sent = mail.send_group(&group(GROUP)).unwrap();
    for result in [
        mail.send(&alone("ann", GROUP)).map(|_| ()),
        mail.send_batch(&[alone("ann", GROUP)]).map(|_| ()),
    ] {
        match result {
            Err(Error::IdTaken { id, location }) => {
                assert_eq!(id, mid(GROUP));
                assert_eq!(location, Location::Inbox(agent("ann")));
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(ids(&mail.inbox(&agent("ann")).unwrap()), ids(&sent[..1]));
    // Answered, ann's copy is archived: still found there.
    mail.send(&response("ann", "lead", &sent[0].id, "ship-it", "yes"))
        .unwrap();
    match mail.send(&alone("ann", GROUP)) {
        Err(Error::IdTaken { location, .. }) => assert_eq!(location, Location::Archive),
        other => panic!("{other:?}"),
    }
    // One the group left out may still get a message of its own, and
    // the group's retry still returns its copies.
    assert_eq!(mail.send(&alone("dan", GROUP)).unwrap().id, mid(GROUP));
    let again: Vec<_> = mail.send_group(&group(GROUP)).unwrap();
    assert_eq!(ids(&again), ids(&sent));
    // Swept into the task's archive, the copy is still found, by a message
    // of any task.
    mail.sweep_task_on_commit(&task("t1")).unwrap();
    let other_task = crate::request("lead", "ann", "t2", "ship-it", "ok?").with_id(mid(GROUP));
    match mail.send(&other_task) {
        Err(Error::IdTaken { location, .. }) => {
            assert_eq!(location, Location::ByTask(task("t1")));
        }
        other => panic!("{other:?}"),
    }

    mail.send(&alone("ann", ID)).unwrap();
    match mail.send_group(&group(ID)) {
        Err(Error::IdTaken { id, .. }) => assert_eq!(id, mid(ID)),
        other => panic!("{other:?}"),
    }
    assert!(mail.inbox(&agent("bob")).unwrap().is_empty(), "no copy");
    assert_eq!(mail.pending_replies(&task("t1")).unwrap().len(), 1);
}

fn sweep_moves_the_task_and_clears_its_gate(place: &Place) {
    let (_tmp, mail) = open(place);
    let q = mail.send(&request(ID)).unwrap();
    let n = mail.send(&notify("a", "b", "t1", "note", "n")).unwrap();
    assert!(matches!(
        mail.archive(&n.id).unwrap(),
        ArchiveOutcome::Archived(_)
    ));
    mail.send(&notify("a", "b", "t2", "note", "n")).unwrap();
    let report = mail.sweep_task_on_commit(&task("t1")).unwrap();
    assert_eq!((report.moved, report.total), (2, 2));
    assert_eq!(
        mail.locate(&q.id).unwrap(),
        Some(Location::ByTask(task("t1")))
    );
    assert!(mail.pending_replies(&task("t1")).unwrap().is_empty());
    assert_eq!(mail.inbox_len(&agent("b")).unwrap(), 1);
    let again = mail.sweep_task_on_commit(&task("t1")).unwrap();
    assert_eq!((again.moved, again.total), (0, 2));
}

/// Two clients, each with its own connections: a request is in the other
/// client's gate the moment its send returns, and out of it the moment the
/// response's send returns. Never a stale open gate.
#[test]
fn the_gate_fails_closed_across_two_clients_on_postgres() {
    let Some(place) = Place::pg("the_gate_fails_closed_across_two_clients_on_postgres") else {
        return;
    };
    let (tmp_a, tmp_b) = (TempState::new(), TempState::new());
    let a = place.open(&tmp_a.state);
    let b = place.open(&tmp_b.state);
    let t = task("t1");
    for i in 0..100 {
        let q = a
            .send(&NewMessage::request(
                agent("critic"),
                agent("exec"),
                t.clone(),
                "check",
                i.to_string(),
            ))
            .unwrap();
        let pending = b.pending_replies(&t).unwrap();
        assert_eq!(ids(&pending), [q.id.as_str()], "round {i}");
        b.send(&response("exec", "critic", &q.id, "check", "ok"))
            .unwrap();
        assert!(a.pending_replies(&t).unwrap().is_empty(), "round {i}");
    }
}

/// A send whose connection is cut at its COMMIT: the outcome is unknown,
/// the message is committed (whole: in the gate and the manifest), and the
/// retry with the same id returns the first delivery and writes nothing.
#[test]
fn a_send_cut_at_commit_is_unknown_and_the_retry_returns_the_first_on_postgres() {
    let test = "a_send_cut_at_commit_is_unknown_and_the_retry_returns_the_first_on_postgres";
    let Some(place) = Place::pg(test) else {
        return;
    };
    let schema = place.schema().unwrap();
    let (proxy, via) = Proxy::for_url(schema.url());
    let mut options = schema.options();
    options.max_idle = 1;
    let tmp = TempState::new();
    let cut = Mail::with_backend(
        tmp.state.clone(),
        MailConfig::default(),
        std::sync::Arc::new(PgBackend::open_with(&via, options).unwrap()),
    );
    let tmp_other = TempState::new();
    let other = place.open(&tmp_other.state);

    proxy.cut_at_request_with("COMMIT");
    let err = cut.send(&request(ID)).unwrap_err();
    assert!(err.is_outcome_unknown(), "{err}");
    assert!(err.to_string().contains(ID), "{err}");
    // Committed, all of it: another client's gate holds it.
    let pending = other.pending_replies(&task("t1")).unwrap();
    assert_eq!(ids(&pending), [ID]);
    let first = pending[0].clone();
    let retry = cut.send(&request(ID)).unwrap();
    assert_eq!(retry, first);
    assert_eq!(sent_events(&other, &first.id), 1);

    // A response cut at commit: the request is archived once.
    let answer = NewMessage::response(agent("exec"), agent("critic"), mid(ID), "dead-code", "yes")
        .with_id(mid(ID2));
    proxy.cut_at_request_with("COMMIT");
    let err = cut.send(&answer).unwrap_err();
    assert!(err.is_outcome_unknown(), "{err}");
    assert!(other.pending_replies(&task("t1")).unwrap().is_empty());
    let a = cut.send(&answer).unwrap();
    assert_eq!(other.find(&a.id).unwrap().unwrap(), a);
    let manifest = other.read_manifest().unwrap();
    assert_eq!(manifest.len(), 3, "{:?}", manifest);
}

/// Mail on `b`, the raw handle on its rows beside it.
fn on(b: std::sync::Arc<dyn Backend>, state: &chipset_store::StateDir) -> Mail {
    Mail::with_backend(state.clone(), MailConfig::default(), b)
}

/// The row of message `id` in `who`'s inbox, or its id record.
fn row(folder: &[&str], id: &str) -> chipset_backend::Key {
    let mut dir = chipset_backend::Dir::new("mail").unwrap();
    for s in folder {
        dir = dir.join(s).unwrap();
    }
    dir.key(&format!("{id}.json")).unwrap()
}

/// A resend whose id record is there while its message is nowhere (moved
/// aside, as the doctor does with an unreadable row) is refused, naming
/// the id: it never answers as sent with nothing written. The doctor's
/// fix removes the record of no message, and the resend then sends.
fn a_resend_whose_message_is_nowhere_is_refused_not_reported_sent(
    b: std::sync::Arc<dyn Backend>,
    state: &chipset_store::StateDir,
) {
    let mail = on(b.clone(), state);
    let draft = notify("lead", "bob", "t1", "status", "hello").with_id(mid(ID));
    mail.send(&draft).unwrap();
    let inbox = row(&["inbox", "bob"], ID);
    let v = b.read(&inbox).unwrap().unwrap();
    let aside = b.quarantine(&inbox, v.version, b.now().unwrap()).unwrap();
    assert!(aside.is_some());
    assert!(b.read(&row(&["ids"], ID)).unwrap().is_some());
    let err = mail.send(&draft).unwrap_err();
    assert!(!err.is_outcome_unknown(), "{err:?}");
    assert!(
        matches!(&err, Error::Backend { ids, .. } if *ids == [mid(ID)]),
        "{err:?}"
    );
    assert_eq!(mail.find(&mid(ID)).unwrap(), None);
    mail.doctor(chipset_store::DoctorMode::Fix).unwrap();
    let sent = mail.send(&draft).unwrap();
    assert_eq!(mail.find(&mid(ID)).unwrap(), Some(sent));
}

#[test]
fn a_resend_whose_message_is_nowhere_is_refused_on_a_directory_backend() {
    let tmp = TempState::new();
    let b = std::sync::Arc::new(chipset_backend::FsBackend::new(tmp.state.clone()));
    a_resend_whose_message_is_nowhere_is_refused_not_reported_sent(b, &tmp.state);
}

#[test]
fn a_resend_whose_message_is_nowhere_is_refused_on_postgres() {
    let Some(place) = Place::pg("a_resend_whose_message_is_nowhere_is_refused_on_postgres") else {
        return;
    };
    let tmp = TempState::new();
    a_resend_whose_message_is_nowhere_is_refused_not_reported_sent(
        place.seam().unwrap(),
        &tmp.state,
    );
}

/// Mail on a backend over a directory, whose transaction is its steps in
/// order: a fault at any I/O call of a send is plain only while nothing
/// stuck (no id record), else an unknown outcome; and the retry with the
/// same id never answers as sent without the message there.
#[test]
fn a_send_on_a_directory_backend_cut_anywhere_is_never_reported_sent_unwritten() {
    use chipset_store::{StateDir, StateOptions};
    use chipset_testkit::{EIO, Fault, FaultIo};
    let draft = notify("lead", "bob", "t1", "status", "hello").with_id(mid(ID));
    let open = |root: &std::path::Path, fault: std::sync::Arc<FaultIo>| {
        let options = StateOptions {
            io: fault,
            ..StateOptions::default()
        };
        let state = StateDir::open_with(root, options).unwrap();
        let b = std::sync::Arc::new(chipset_backend::FsBackend::new(state.clone()));
        (on(b.clone(), &state), b)
    };
    let probe = tempfile::tempdir().unwrap();
    let fault = FaultIo::passthrough();
    let (mail, _) = open(probe.path(), fault.clone());
    fault.set(Fault::nth(0, EIO));
    mail.send(&draft).unwrap();
    let calls = fault.counted();
    for n in 1..=calls {
        let tmp = tempfile::tempdir().unwrap();
        let fault = FaultIo::passthrough();
        let (mail, b) = open(tmp.path(), fault.clone());
        fault.set(Fault::nth(n, EIO));
        let first = mail.send(&draft);
        fault.disarm();
        if let Err(e) = &first {
            let stuck = b.read(&row(&["ids"], ID)).unwrap().is_some();
            assert!(
                e.is_outcome_unknown() || !stuck,
                "call {n}: `{e}` though the id record stuck"
            );
        }
        let retry = mail.send(&draft);
        let found = mail.find(&mid(ID)).unwrap();
        match retry {
            Ok(sent) => assert_eq!(found, Some(sent), "call {n}"),
            Err(e) => assert_eq!(found, None, "call {n}: {e}"),
        }
    }
}
