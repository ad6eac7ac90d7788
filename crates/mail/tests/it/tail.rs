//! The archive tail: a response another program archived is found through
//! the manifest's `archived` events, without listing `archive/`, for every
//! request sent after the tail began; older requests are looked for by
//! listing, as before.

use std::fs;
use std::io::Write;
use std::time::Duration;

use chipset_mail::MessageId;
use chipset_mail::{ArchiveOutcome, Mail, MailConfig, Message, NewMessage};
use chipset_store::DoctorMode;

use crate::{Fixture, agent, fixture_with, manifest_bytes, mid, task};

pub(crate) fn no_grace() -> MailConfig {
    MailConfig {
        in_flight_grace: Duration::ZERO,
        ..MailConfig::default()
    }
}

pub(crate) fn request(m: &Mail, subject: &str) -> Message {
    m.send(&NewMessage::request(
        agent("critic"),
        agent("exec"),
        task("t1"),
        subject,
        "why?",
    ))
    .unwrap()
}

/// A response to `request` as nubos-pilot writes it (its own key order,
/// `"round": null`), a second after the request (by its id: ids are made
/// increasing across the whole test process, whatever a manual clock says).
pub(crate) fn nubos_response(request: &Message, n: u8) -> (MessageId, Vec<u8>) {
    let sent: i64 = request
        .id
        .as_str()
        .split('-')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let ms = sent + 1_000;
    let id = format!("{ms}-9b3e0c1a-5d2f-4e1b-8a6c-0123456789{n:02x}");
    let json = serde_json::json!({
        "id": id, "from": "exec", "to": "critic", "phase": "t1", "round": null,
        "kind": "response", "subject": request.subject, "body": "because",
        "expects_reply": false, "in_reply_to": request.id.as_str(),
        "created_at": chipset_store::Timestamp::from_unix_ms(ms).to_string(),
    });
    (mid(&id), serde_json::to_vec_pretty(&json).unwrap())
}

/// Puts a response straight into `archive/`, with nubos-pilot's `archived`
/// event when `logged` (what its `archive()` appends after the move).
pub(crate) fn archive_foreign(m: &Mail, id: &MessageId, bytes: &[u8], logged: bool) {
    let archive = m.dir().as_path().join("archive");
    fs::create_dir_all(&archive).unwrap();
    fs::write(archive.join(format!("{id}.json")), bytes).unwrap();
    if logged {
        let line = serde_json::json!({
            "event": "archived", "id": id.as_str(), "from": "exec", "to": "critic",
            "kind": "response", "phase": "t1",
            "created_at": "2026-03-05T10:40:00.000Z", "run_id": "r-1",
        });
        let mut log = fs::OpenOptions::new()
            .append(true)
            .open(m.dir().as_path().join("manifest.jsonl"))
            .unwrap();
        writeln!(log, "{line}").unwrap();
    }
}

/// Appends `event` to the manifest, as another program does.
fn append_event(m: &Mail, event: &serde_json::Value) {
    m.state()
        .log(&m.manifest_path())
        .unwrap()
        .append(event)
        .unwrap();
}

/// nubos-pilot's `sent` event of its response `id` to `request`.
fn sent_event(id: &MessageId, request: &Message) -> serde_json::Value {
    serde_json::json!({
        "event": "sent", "id": id.as_str(), "from": "exec", "to": "critic",
        "kind": "response", "phase": "t1", "round": null,
        "in_reply_to": request.id.as_str(), "expects_reply": false,
        "created_at": "2026-03-05T10:39:00.000Z", "run_id": "r-1",
    })
}

/// `mail/.gate/archive-tail.json`.
pub(crate) fn tail_path(m: &Mail) -> chipset_store::StatePath {
    m.dir()
        .join_static(".gate")
        .join("archive-tail.json")
        .unwrap()
}

/// Begins the tail (any miss of the reply index does), then moves the clock
/// past the slack so that requests sent from now on are covered by it.
pub(crate) fn begin_tail(f: &Fixture) {
    let first = request(&f.mail, "first");
    assert!(!f.mail.has_reply(&first.id).unwrap());
    let tail = f.mail.state().stat(&tail_path(&f.mail)).unwrap();
    assert!(tail.is_some_and(|t| t.is_file()));
    f.clock.advance(Duration::from_secs(10));
}

#[test]
fn a_logged_foreign_archive_answers_without_listing_the_archive() {
    let f = fixture_with(no_grace());
    let m = &f.mail;
    begin_tail(&f);
    let logged = request(m, "logged");
    let silent = request(m, "silent");
    let (rid, bytes) = nubos_response(&logged, 1);
    archive_foreign(m, &rid, &bytes, true);
    let (sid, bytes) = nubos_response(&silent, 2);
    // Sent by nubos-pilot (its `sent` event), archived by a program that
    // appended nothing.
    append_event(m, &sent_event(&sid, &silent));
    archive_foreign(m, &sid, &bytes, false);

    // The logged one is found through the manifest, at once.
    assert!(m.has_reply(&logged.id).unwrap());
    // The one with no `archived` event is not (its `sent` event says
    // nothing of where it is now): `archive/` is not listed for a request
    // the tail covers (the safe side: it stays pending).
    assert!(!m.has_reply(&silent.id).unwrap());
    let pending = m.pending_replies(&task("t1")).unwrap();
    let ids: Vec<&MessageId> = pending.iter().map(|p| &p.id).collect();
    assert!(
        ids.contains(&&silent.id) && !ids.contains(&&logged.id),
        "{ids:?}"
    );
    assert!(matches!(
        m.archive(&logged.id).unwrap(),
        ArchiveOutcome::Archived(_)
    ));
    // The tail entered the response in the reply index: the next look is the fast one.
    assert!(
        m.dir()
            .as_path()
            .join(format!("replies/{}/response-{rid}.json", logged.id))
            .is_file()
    );

    // The doctor completes what the silent writer left out; then it answers.
    m.doctor(DoctorMode::Fix).unwrap();
    assert!(m.has_reply(&silent.id).unwrap());
    assert!(
        m.pending_replies(&task("t1"))
            .unwrap()
            .iter()
            .all(|p| p.id != silent.id)
    );
}

#[test]
fn a_request_older_than_the_tail_is_looked_for_by_listing() {
    let f = fixture_with(no_grace());
    let m = &f.mail;
    let old = request(m, "old");
    begin_tail(&f);
    // Archived with no event, after the tail began: only a listing finds it.
    let (id, bytes) = nubos_response(&old, 3);
    archive_foreign(m, &id, &bytes, false);
    assert!(m.has_reply(&old.id).unwrap());
    assert!(
        !m.pending_replies(&task("t1"))
            .unwrap()
            .iter()
            .any(|p| p.id == old.id)
    );
}

#[test]
fn a_replaced_manifest_or_a_broken_tail_file_begins_again() {
    let f = fixture_with(no_grace());
    let m = &f.mail;
    begin_tail(&f);
    let q = request(m, "replaced");
    // The manifest is replaced by a shorter one of the same length as the
    // tail's offset (rotated by an operator, a new file that may reuse the
    // inode number): the tail notices by its bytes.
    let manifest = m.dir().as_path().join("manifest.jsonl");
    let len = fs::metadata(&manifest).unwrap().len() as usize;
    fs::remove_file(&manifest).unwrap();
    let mut other = b"{\"event\":\"rotated\"}\n".to_vec();
    other.resize(len - 1, b' ');
    other.push(b'\n');
    fs::write(&manifest, &other).unwrap();
    // A response archived with no event: the tail begins again now, after
    // the request, so the request is looked for by listing and found.
    let (id, bytes) = nubos_response(&q, 4);
    archive_foreign(m, &id, &bytes, false);
    assert!(m.has_reply(&q.id).unwrap());

    // A tail file that does not parse is ignored and written afresh.
    let tail = m.dir().as_path().join(".gate/archive-tail.json");
    fs::write(&tail, b"{not json").unwrap();
    f.clock.advance(Duration::from_secs(10));
    let r = request(m, "broken");
    assert!(!m.has_reply(&r.id).unwrap());
    let text = fs::read_to_string(&tail).unwrap();
    assert!(
        text.starts_with('{') && text.contains("\"since\""),
        "{text}"
    );
    f.clock.advance(Duration::from_secs(10));
    let s = request(m, "after");
    let (id, bytes) = nubos_response(&s, 5);
    archive_foreign(m, &id, &bytes, true);
    assert!(m.has_reply(&s.id).unwrap());
}

/// A response that does not fit its request (another author) answers nothing,
/// even when an `archived` event names it.
#[test]
fn a_logged_response_that_does_not_fit_answers_nothing() {
    let f = fixture_with(no_grace());
    let m = &f.mail;
    begin_tail(&f);
    let q = request(m, "misfit");
    let (id, bytes) = nubos_response(&q, 6);
    let bytes = String::from_utf8(bytes)
        .unwrap()
        .replace("\"from\": \"exec\"", "\"from\": \"intruder\"");
    archive_foreign(m, &id, bytes.as_bytes(), true);
    assert!(!m.has_reply(&q.id).unwrap());
    // Nor does a file whose message is not the one its name (and the event)
    // says: a fitting response, copied under another id.
    let (copy, _) = nubos_response(&q, 9);
    let (id, bytes) = nubos_response(&q, 10);
    let bytes = String::from_utf8(bytes)
        .unwrap()
        .replace(id.as_str(), copy.as_str());
    archive_foreign(m, &id, bytes.as_bytes(), true);
    assert!(!m.has_reply(&q.id).unwrap());
    assert!(!m.dir().as_path().join(format!("replies/{}", q.id)).exists());
}

/// Past a tail that recorded the manifest's times at its end, a manifest
/// rewritten in place to the same length (same inode, other bytes) is
/// noticed by its times, and the tail begins again.
#[test]
fn a_manifest_rewritten_in_place_past_a_settled_tail_begins_it_again() {
    let f = fixture_with(no_grace());
    let m = &f.mail;
    begin_tail(&f);
    let q = request(m, "rewritten");
    assert!(!m.has_reply(&q.id).unwrap());
    // Once the manifest has settled, the tail records its times at its end.
    std::thread::sleep(Duration::from_millis(2_200));
    assert!(!m.has_reply(&q.id).unwrap());
    let tail = m.dir().as_path().join(".gate/archive-tail.json");
    let v: serde_json::Value = serde_json::from_slice(&fs::read(&tail).unwrap()).unwrap();
    assert_eq!(v["v"], 2);
    assert!(v["at_end"].is_array(), "{v}");
    let manifest = m.dir().as_path().join("manifest.jsonl");
    let before = fs::metadata(&manifest).unwrap();
    let mut other = b"{\"event\":\"rotated\"}\n".to_vec();
    other.resize(before.len() as usize - 1, b' ');
    other.push(b'\n');
    fs::write(&manifest, &other).unwrap();
    let after = fs::metadata(&manifest).unwrap();
    assert_eq!(
        (std::os::unix::fs::MetadataExt::ino(&after), after.len()),
        (std::os::unix::fs::MetadataExt::ino(&before), before.len())
    );
    // A response archived with no event: only a listing finds it, which
    // the tail allows because it began again after the request was sent.
    let (id, bytes) = nubos_response(&q, 7);
    archive_foreign(m, &id, &bytes, false);
    assert!(m.has_reply(&q.id).unwrap());
}

/// A reader that cannot write (a read-only mount: every create, open for
/// writing, rename, link, mkdir and remove fails with `EROFS`) still counts a response the
/// manifest logs: its tail finds the response, cannot enter it in the reply
/// index, and the request is answered all the same.
#[test]
fn a_reader_that_cannot_write_counts_a_logged_foreign_archive() {
    use chipset_store::{StateDir, StateOptions};
    use chipset_testkit::{Fault, FaultIo, IoOp};
    const EROFS: i32 = 30;
    let f = fixture_with(no_grace());
    let m = &f.mail;
    begin_tail(&f);
    let logged = request(m, "logged");
    let (rid, bytes) = nubos_response(&logged, 1);
    archive_foreign(m, &rid, &bytes, true);
    let io = FaultIo::new(Fault {
        nth: 1,
        kinds: vec![
            IoOp::Create,
            IoOp::Open,
            IoOp::Mkdir,
            IoOp::Remove,
            IoOp::Rename,
            IoOp::Link,
        ],
        errno: EROFS,
        sticky: true,
    });
    let options = StateOptions {
        io: io.clone(),
        clock: std::sync::Arc::new(f.clock.clone()),
        create: false,
        ..StateOptions::default()
    };
    let state = StateDir::open_with(m.state().root(), options).unwrap();
    let reader = Mail::with_config(state, no_grace());
    let pending = reader.pending_replies(&task("t1")).unwrap();
    assert!(pending.iter().all(|p| p.id != logged.id), "{pending:?}");
    assert!(reader.has_reply(&logged.id).unwrap());
    assert!(
        io.injected() > 0,
        "the reader wrote nothing, or never tried"
    );
    // Nothing was entered: the reply index does not know the response yet.
    let replies = m.dir().join("replies").unwrap().join_id(&logged.id, "");
    assert_eq!(m.state().list(&replies).unwrap(), Vec::<String>::new());
}

/// A request the reply index answers is answered without the archive tail:
/// a gate that finds every request answered there does not begin the tail
/// (nor read the manifest).
#[test]
fn a_request_the_reply_index_answers_needs_no_tail() {
    let f = fixture_with(no_grace());
    let m = &f.mail;
    let q = request(m, "indexed");
    let r = m
        .send(&NewMessage::response(
            agent("exec"),
            agent("critic"),
            q.id.clone(),
            "re",
            "because",
        ))
        .unwrap();
    // The request back in its inbox (as if the response's sender had
    // crashed before moving it), the response archived: only the reply
    // index knows of the answer.
    let name = format!("{}.json", q.id);
    let archived = m.dir().join("archive").unwrap().join(&name).unwrap();
    let inbox = m.inbox_dir(&agent("exec")).join(&name).unwrap();
    m.state().move_noclobber(&archived, &inbox).unwrap();
    assert!(matches!(
        m.archive(&r.id).unwrap(),
        ArchiveOutcome::Archived(_)
    ));
    let tail = tail_path(m);
    assert!(m.pending_replies(&task("t1")).unwrap().is_empty());
    assert!(
        m.state().stat(&tail).unwrap().is_none(),
        "the gate began the tail"
    );
    // Unanswered, the gate looks further, and begins it.
    request(m, "open");
    assert_eq!(m.pending_replies(&task("t1")).unwrap().len(), 1);
    assert!(m.state().stat(&tail).unwrap().is_some());
}

/// A tail file of another format version is not trusted: the tail begins
/// again, and a request sent before that is looked for by listing. The same
/// file at this version is trusted (and the silent archive not seen).
#[test]
fn a_tail_file_of_another_version_is_begun_again() {
    let f = fixture_with(no_grace());
    let m = &f.mail;
    begin_tail(&f);
    let q = request(m, "versioned");
    let (rid, bytes) = nubos_response(&q, 7);
    archive_foreign(m, &rid, &bytes, false);
    // The tail moved to the manifest's end, as a reader that caught up
    // leaves it; it covers `q`.
    let log = manifest_bytes(m);
    let mark: String = log[log.len() - 64..]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let bytes = m
        .state()
        .read_bytes(&tail_path(m))
        .unwrap()
        .value()
        .unwrap();
    let mut tail: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    tail["offset"] = serde_json::json!(log.len());
    tail["mark"] = serde_json::json!(mark);
    tail["at_end"] = serde_json::Value::Null;
    let write = |tail: &serde_json::Value| {
        m.state()
            .write_bytes(&tail_path(m), &serde_json::to_vec(tail).unwrap())
            .unwrap();
    };
    write(&tail);
    assert!(!m.has_reply(&q.id).unwrap(), "the tail was not trusted");
    tail["v"] = serde_json::json!(3);
    write(&tail);
    assert!(m.has_reply(&q.id).unwrap());
}

/// Once the tail has read to the manifest's end with the manifest settled,
/// a lookup that finds the manifest as it was does not open it.
#[test]
fn a_settled_tail_at_the_end_does_not_open_the_manifest() {
    let f = fixture_with(no_grace());
    let m = &f.mail;
    begin_tail(&f);
    let q = request(m, "logged");
    let (rid, bytes) = nubos_response(&q, 8);
    archive_foreign(m, &rid, &bytes, true);
    let open = request(m, "open");
    // Longer than the two seconds a manifest's times must be old to trust.
    std::thread::sleep(Duration::from_millis(2_200));
    assert!(m.has_reply(&q.id).unwrap());
    let watch = crate::watch_opens(m.dir().as_path());
    assert!(!m.has_reply(&open.id).unwrap());
    let opened = crate::opened(&watch);
    assert!(!opened.iter().any(|n| n == "manifest.jsonl"), "{opened:?}");
}

/// A request sent exactly the slack (2 s) after the tail began is not
/// covered by it: `archive/` is listed, and a response archived there
/// without an event is found. A millisecond later, it is covered.
#[test]
fn a_request_at_the_edge_of_the_tail_is_looked_for_by_listing() {
    let f = fixture_with(no_grace());
    let m = &f.mail;
    let first = request(m, "first");
    assert!(!m.has_reply(&first.id).unwrap());
    f.clock.advance(Duration::from_secs(2));
    let edge = request(m, "edge");
    let (rid, bytes) = nubos_response(&edge, 11);
    archive_foreign(m, &rid, &bytes, false);
    assert!(m.has_reply(&edge.id).unwrap());
    f.clock.advance(Duration::from_millis(1));
    let later = request(m, "later");
    let (rid, bytes) = nubos_response(&later, 12);
    archive_foreign(m, &rid, &bytes, false);
    assert!(!m.has_reply(&later.id).unwrap());
}

/// The reply fallback skips a folder unchanged since (with the slack) a
/// request was sent: a folder whose last change is exactly the slack
/// before the request is still listed, and a response in it found.
#[test]
fn a_folder_changed_exactly_the_slack_before_a_request_is_listed() {
    let f = fixture_with(no_grace());
    let m = &f.mail;
    // The response first, into the asker's inbox (another program's file:
    // no index entry, no event); then the request it answers, under a
    // chosen id, sent by the clock exactly two seconds after that inbox's
    // last change (the request goes to the other inbox).
    let q = mid("1795408570000-9b3e0c1a-5d2f-4e1b-8a6c-0123456789fe");
    let r = mid("1795408571000-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ff");
    let json = serde_json::json!({
        "id": r.as_str(), "from": "exec", "to": "critic", "phase": "t1",
        "round": null, "kind": "response", "subject": "s", "body": "b",
        "expects_reply": false, "in_reply_to": q.as_str(),
        "created_at": "2026-03-05T10:40:00.000Z",
    });
    let inbox = m.inbox_dir(&agent("critic"));
    let path = inbox.join(format!("{r}.json")).unwrap();
    m.state()
        .write_bytes(&path, &serde_json::to_vec(&json).unwrap())
        .unwrap();
    let (s, ns) = m.state().stat(&inbox).unwrap().unwrap().mtime;
    let changed = s * 1_000 + ns / 1_000_000;
    f.clock
        .set(chipset_store::Timestamp::from_unix_ms(changed + 2_000));
    let draft = NewMessage::request(agent("critic"), agent("exec"), task("t1"), "s", "why?");
    m.send(&draft.with_id(q.clone())).unwrap();
    assert!(m.has_reply(&q).unwrap());
}

/// Puts a response into the requester's inbox as nubos-pilot's `send` does:
/// the file, then (when `logged`) its `sent` event.
pub(crate) fn send_foreign(m: &Mail, request: &Message, n: u8, logged: bool) -> MessageId {
    let (id, bytes) = nubos_response(request, n);
    let inbox = m.inbox_dir(&agent("critic"));
    fs::create_dir_all(inbox.as_path()).unwrap();
    fs::write(inbox.as_path().join(format!("{id}.json")), bytes).unwrap();
    if logged {
        append_event(m, &sent_event(&id, request));
    }
    id
}

/// Archiving a request answered by a response another program sent (issue
/// 31: the archive listed the requester's whole inbox to find it) takes
/// the response from the place its `sent` event names: the requester's
/// inbox is not listed, and the response enters the reply index.
#[test]
fn a_response_named_by_its_sent_event_is_found_without_a_listing() {
    let f = fixture_with(no_grace());
    let m = &f.mail;
    begin_tail(&f);
    let q = request(m, "asked");
    let rid = send_foreign(m, &q, 4, true);
    let inboxes = crate::watch_opens(&m.dir().as_path().join("inbox"));
    assert!(matches!(
        m.archive(&q.id).unwrap(),
        ArchiveOutcome::Archived(_)
    ));
    let opened = crate::opened(&inboxes);
    assert!(!opened.contains(&"critic".to_owned()), "listed: {opened:?}");
    assert!(
        m.dir()
            .as_path()
            .join(format!("replies/{}/response-{rid}.json", q.id))
            .is_file()
    );
}

/// A `sent` event only says where to look: an event whose file is not
/// there, or is not an answer to the request (another task's), answers
/// nothing; without an event the inbox is listed as before.
#[test]
fn a_sent_event_answers_only_through_a_file_that_fits() {
    let f = fixture_with(no_grace());
    let m = &f.mail;
    begin_tail(&f);
    // An event with no file.
    let lost = request(m, "lost");
    let (id, _) = nubos_response(&lost, 5);
    append_event(m, &sent_event(&id, &lost));
    assert!(matches!(
        m.archive(&lost.id),
        Err(chipset_mail::Error::ArchiveWithoutReply { .. })
    ));
    // An event whose file answers in another task.
    let other = request(m, "other");
    let (id, bytes) = nubos_response(&other, 6);
    let mut json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    json["phase"] = "t2".into();
    let inbox = m.inbox_dir(&agent("critic"));
    fs::create_dir_all(inbox.as_path()).unwrap();
    fs::write(
        inbox.as_path().join(format!("{id}.json")),
        serde_json::to_vec_pretty(&json).unwrap(),
    )
    .unwrap();
    append_event(m, &sent_event(&id, &other));
    assert!(!m.has_reply(&other.id).unwrap());
    // No event: the listing finds the file.
    let silent = request(m, "silent");
    send_foreign(m, &silent, 7, false);
    assert!(m.has_reply(&silent.id).unwrap());
}

/// One response found is all a request needs: a request answered in its
/// sender's inbox, older than the tail (so that `archive/` could hold its
/// response), is answered without listing `archive/` (issue 31: the
/// archive of a request answered without a `sent` event listed both).
#[test]
fn a_response_found_in_the_inbox_spares_the_archive_listing() {
    let f = fixture_with(no_grace());
    let m = &f.mail;
    let q = request(m, "asked");
    // `archive/` changed after the request was sent.
    let other = request(m, "other");
    assert!(matches!(
        m.archive(&other.id).unwrap_err(),
        chipset_mail::Error::ArchiveWithoutReply { .. }
    ));
    let note = m
        .send(&NewMessage::notify(
            agent("exec"),
            agent("critic"),
            task("t1"),
            "fyi",
            "x",
        ))
        .unwrap();
    assert!(matches!(
        m.archive(&note.id).unwrap(),
        ArchiveOutcome::Archived(_)
    ));
    send_foreign(m, &q, 3, false);
    let watch = crate::watch_opens(m.dir().as_path());
    assert!(m.has_reply(&q.id).unwrap());
    let opened = crate::opened(&watch);
    assert!(
        !opened.contains(&"archive".to_owned()),
        "listed: {opened:?}"
    );
    // Without the response there, `archive/` is listed (and holds none).
    let watch = crate::watch_opens(m.dir().as_path());
    assert!(!m.has_reply(&other.id).unwrap());
    assert!(crate::opened(&watch).contains(&"archive".to_owned()));
}

/// The `archived` event of a request this process archived answers
/// nothing: the next look does not open that request's file again.
#[test]
fn a_look_does_not_read_what_this_process_archived_as_a_request() {
    let f = fixture_with(no_grace());
    let m = &f.mail;
    begin_tail(&f);
    let (q1, q2) = (request(m, "one"), request(m, "two"));
    send_foreign(m, &q1, 1, true);
    assert!(matches!(m.archive(&q1.id), Ok(ArchiveOutcome::Archived(_))));
    send_foreign(m, &q2, 2, true);
    let archive = crate::watch_opens(&m.dir().as_path().join("archive"));
    assert!(matches!(m.archive(&q2.id), Ok(ArchiveOutcome::Archived(_))));
    let opened = crate::opened(&archive);
    assert!(!opened.contains(&format!("{}.json", q1.id)), "{opened:?}");
}
