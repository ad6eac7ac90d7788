//! Waiting for a task's gate to open (`Mail::wait_gate`): an answer from
//! another thread or another program ends the wait early, nothing answering
//! ends it at the timeout with the request, and an unreadable file ends it
//! with an error, never an open gate.

use std::thread;
use std::time::{Duration, Instant};

use chipset_mail::{Error, Location, Mail, Message};
use chipset_testkit::TempState;
use serde_json::Value;

use crate::peers::{OPEN, RESPONSE, TASK, nubos};
use crate::place::Place;
use crate::{agent, fixture, mid, request, response, task};

chipset_backend::both!(
    crate::place::Place;
    an_answer_from_another_thread_opens_the_gate_early,
    with_no_answer_the_wait_returns_the_request_at_the_timeout,
);

/// Generous: only a wait that missed the answer comes near it.
const LONG: Duration = Duration::from_secs(10);

fn ids(messages: &[Message]) -> Vec<&str> {
    messages.iter().map(|m| m.id.as_str()).collect()
}

fn open(place: &Place) -> (TempState, Mail) {
    let tmp = TempState::new();
    let mail = place.open(&tmp.state);
    (tmp, mail)
}

fn an_answer_from_another_thread_opens_the_gate_early(place: &Place) {
    let (tmp, mail) = open(place);
    let q = mail
        .send(&request("critic", "exec", "t1", "dead-code", "meant?"))
        .unwrap();
    // Another handle on the same state answers, a little later.
    let other = place.open(&tmp.state);
    let answering = thread::spawn(move || {
        thread::sleep(Duration::from_millis(200));
        other
            .send(&response("exec", "critic", &q.id, "dead-code", "yes"))
            .unwrap();
    });
    let started = Instant::now();
    let open = mail.wait_gate(&task("t1"), LONG).unwrap();
    let took = started.elapsed();
    answering.join().unwrap();
    assert_eq!(ids(&open), Vec::<&str>::new());
    assert!(took < LONG, "returned after {took:?}");
}

fn with_no_answer_the_wait_returns_the_request_at_the_timeout(place: &Place) {
    let (_tmp, mail) = open(place);
    let q = mail
        .send(&request("critic", "exec", "t1", "dead-code", "meant?"))
        .unwrap();
    // A message to the same agents on another task wakes the watch, and
    // changes nothing.
    let unrelated = mail.clone();
    let noise = thread::spawn(move || {
        thread::sleep(Duration::from_millis(100));
        unrelated
            .send(&request("critic", "exec", "t2", "other", "?"))
            .unwrap();
    });
    let timeout = Duration::from_millis(300);
    let started = Instant::now();
    let open = mail.wait_gate(&task("t1"), timeout).unwrap();
    let took = started.elapsed();
    noise.join().unwrap();
    assert_eq!(ids(&open), [q.id.as_str()]);
    assert!(took >= timeout, "returned after {took:?}");
}

/// nubos-pilot answers by writing the response file straight into the
/// requester's inbox, with no reply index: that file wakes the wait.
#[test]
fn a_response_another_program_writes_opens_the_gate() {
    let n = nubos();
    assert_eq!(ids(&n.mail.pending_replies(&task(TASK)).unwrap()), [OPEN]);
    // The fixture's response, made to answer the open request.
    let mut answer: Value = serde_json::from_slice(
        &std::fs::read(n.folder.join(format!("inbox/np-critic/{RESPONSE}.json"))).unwrap(),
    )
    .unwrap();
    let id = "1795408570009-0d6c6a4e-2f43-4b7a-9a51-6f0e1c2d3b4a";
    answer["id"] = id.into();
    answer["in_reply_to"] = OPEN.into();
    answer["round"] = Value::Null;
    let (temp, into) = (
        n.folder.parent().unwrap().join(format!("{id}.tmp")),
        n.folder.join(format!("inbox/np-critic/{id}.json")),
    );
    let writing = thread::spawn(move || {
        thread::sleep(Duration::from_millis(200));
        // Written whole, then renamed in, as nubos's `send` does.
        std::fs::write(&temp, serde_json::to_vec_pretty(&answer).unwrap()).unwrap();
        std::fs::rename(&temp, &into).unwrap();
    });
    let started = Instant::now();
    let open = n.mail.wait_gate(&task(TASK), LONG).unwrap();
    let took = started.elapsed();
    writing.join().unwrap();
    assert_eq!(ids(&open), Vec::<&str>::new());
    assert!(took < LONG, "returned after {took:?}");
    assert!(n.mail.has_reply(&mid(OPEN)).unwrap());
}

/// An unreadable file landing in the addressee's inbox during the wait
/// could be one of the task's requests: the wait fails closed, at once.
#[test]
fn an_unreadable_file_ends_the_wait_with_an_error() {
    let f = fixture();
    let m = &f.mail;
    let q = m
        .send(&request("critic", "exec", "t1", "dead-code", "meant?"))
        .unwrap();
    let inbox = m.path_of(&q.id, &Location::Inbox(agent("exec")));
    let inbox = inbox.parent().unwrap().to_owned();
    let bad = inbox.join("1772706900999-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab.json");
    let temp = m.state().root().join("bad.tmp");
    let path = bad.clone();
    let writing = thread::spawn(move || {
        thread::sleep(Duration::from_millis(200));
        std::fs::write(&temp, b"\xff\xfe").unwrap();
        std::fs::rename(&temp, &path).unwrap();
    });
    let started = Instant::now();
    let result = m.wait_gate(&task("t1"), LONG);
    let took = started.elapsed();
    writing.join().unwrap();
    match result {
        Err(Error::Corrupt(c)) => assert_eq!(c.path, bad),
        other => panic!("expected the corrupt file, got {other:?}"),
    }
    assert!(took < LONG, "returned after {took:?}");
    // Already there when the wait begins: the same error at once.
    assert!(matches!(
        m.wait_gate(&task("t1"), LONG),
        Err(Error::Corrupt(c)) if c.path == bad
    ));
}
