//! The operations end to end, one behaviour per test.

use std::time::Duration;

use chipset_mail::{
    ArchiveOutcome, Error, Kind, Location, MailConfig, MailPriority, ManifestEvent, NewMessage,
};
use chipset_store::StateOptions;

use crate::{agent, fixture, fixture_with, mid, notify, request, response, task};

#[test]
fn send_publishes_whole_file_and_sent_event() {
    let f = fixture();
    let m = f
        .mail
        .send(
            &notify("a", "b", "t1", "style", "hello")
                .with_round(3)
                .with_priority(MailPriority::Low),
        )
        .unwrap();
    let path = f.mail.path_of(&m.id, &Location::Inbox(agent("b")));
    let on_disk: chipset_mail::Message =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(on_disk, m);
    assert_eq!(m.round, Some(3));
    assert!(!m.expects_reply);
    assert_eq!(m.created_at.unix_ms(), crate::T0);
    let manifest = f.mail.read_manifest().unwrap();
    assert_eq!(manifest.len(), 1);
    assert!(matches!(&manifest[0], ManifestEvent::Sent { id, .. } if *id == m.id));
    assert_eq!(
        f.mail.locate(&m.id).unwrap(),
        Some(Location::Inbox(agent("b")))
    );
}

/// A message of exactly the store's read cap is sent and read back; one
/// byte more is refused before anything is written.
#[test]
fn a_message_of_exactly_the_read_cap_is_sent_and_read_back() {
    let tmp = chipset_testkit::TempState::with_options(StateOptions {
        read_cap: 600,
        ..StateOptions::default()
    });
    let mail = chipset_mail::Mail::new(tmp.state.clone());
    let note = |body: String| NewMessage::notify(agent("a"), agent("b"), task("t"), "s", body);
    let size = |m: &chipset_mail::Message| {
        let path = mail
            .inbox_dir(&agent("b"))
            .join(format!("{}.json", m.id))
            .unwrap();
        mail.state().stat(&path).unwrap().unwrap().len
    };
    // Every field but the body has the same length in each note.
    let probe = mail.send(&note("x".to_owned())).unwrap();
    let fill = usize::try_from(600 - size(&probe)).unwrap() + 1;
    let full = mail.send(&note("x".repeat(fill))).unwrap();
    assert_eq!(size(&full), 600);
    assert_eq!(mail.find(&full.id).unwrap().unwrap(), full);
    let err = mail.send(&note("x".repeat(fill + 1))).unwrap_err();
    assert!(
        matches!(
            err,
            Error::MessageTooLarge {
                size: 601,
                cap: 600
            }
        ),
        "{err}"
    );
    assert_eq!(mail.inbox_counts().unwrap().values().sum::<usize>(), 2);
}

#[test]
fn refusals_write_nothing() {
    let small_cap = {
        let tmp = chipset_testkit::TempState::with_options(StateOptions {
            read_cap: 600,
            ..StateOptions::default()
        });
        let mail = chipset_mail::Mail::new(tmp.state.clone());
        let big = NewMessage::notify(agent("a"), agent("b"), task("t"), "s", "\u{1}".repeat(200));
        let err = mail.send(&big).unwrap_err();
        assert!(matches!(err, Error::MessageTooLarge { .. }), "{err}");
        mail.inbox_counts().unwrap()
    };
    assert!(small_cap.is_empty());

    let f = fixture_with(MailConfig {
        max_body: 10,
        recipients: Some([agent("a"), agent("b")].into()),
        ..MailConfig::default()
    });
    let cases: Vec<(NewMessage, &str)> = vec![
        (notify("a", "b", "t", "Bad Subject", ""), "invalid subject"),
        (
            NewMessage::notify(agent("a"), agent("b"), task("t"), "s", "x".repeat(11)),
            "body of 11 bytes",
        ),
        (notify("a", "zed", "t", "s", ""), "unknown recipient `zed`"),
        (
            NewMessage::response(agent("b"), agent("a"), mid("1-missing"), "s", ""),
            "cannot reply to message `1-missing`",
        ),
    ];
    for (draft, message) in cases {
        let err = f.mail.send(&draft).unwrap_err();
        assert!(err.to_string().contains(message), "{err} !~ {message}");
    }
    assert!(f.mail.inbox_counts().unwrap().is_empty());
    assert!(f.mail.read_manifest().unwrap().is_empty());
}

/// The default body limit is 256 KiB (262,144 bytes), a contract with the
/// peers' validators: a body of exactly that many bytes is sent and read back
/// whole, one byte more is refused and writes nothing.
#[test]
fn the_default_body_limit_is_256_kib() {
    assert_eq!(chipset_mail::MailConfig::default().max_body, 262_144);
    assert_eq!(MailConfig::default().max_body, 262_144);
    let f = fixture();
    let draft =
        |len: usize| NewMessage::notify(agent("a"), agent("b"), task("t"), "big", "x".repeat(len));
    let err = f.mail.send(&draft(262_145)).unwrap_err();
    assert!(
        matches!(
            err,
            Error::BodyTooLarge {
                size: 262_145,
                cap: 262_144
            }
        ),
        "{err}"
    );
    assert!(f.mail.inbox_counts().unwrap().is_empty());
    assert!(f.mail.read_manifest().unwrap().is_empty());

    let sent = f.mail.send(&draft(262_144)).unwrap();
    let inbox = f.mail.inbox(&agent("b")).unwrap();
    assert_eq!(inbox.len(), 1);
    assert_eq!(inbox[0].id, sent.id);
    assert_eq!(inbox[0].body.len(), 262_144);
}

#[test]
fn response_rules_and_side_effect() {
    let f = fixture();
    let m = &f.mail;
    let req = m
        .send(&request("critic", "exec", "t1", "dead-code", "?"))
        .unwrap();
    let note = m.send(&notify("critic", "exec", "t1", "fyi", "")).unwrap();
    assert!(req.expects_reply && req.needs_reply());
    assert!(!m.has_reply(&req.id).unwrap());
    assert!(matches!(
        m.archive(&req.id),
        Err(Error::ArchiveWithoutReply { .. })
    ));

    let refused = [
        (
            response("critic", "exec", &req.id, "a", ""),
            "is addressed to `exec`",
        ),
        (
            response("exec", "critic", &req.id, "a", "").with_task(task("t2")),
            "of task `t1`",
        ),
        (
            response("exec", "critic", &note.id, "a", ""),
            "is a notify that expects no reply",
        ),
        (
            notify("exec", "critic", "t2", "a", "").replying_to(req.id.clone()),
            "of task `t1`",
        ),
    ];
    for (draft, message) in refused {
        let err = m.send(&draft).unwrap_err();
        assert!(err.to_string().contains(message), "{err} !~ {message}");
    }
    assert_eq!(m.inbox_len(&agent("critic")).unwrap(), 0);

    let answer = m
        .send(&response("exec", "critic", &req.id, "dead-code", "yes"))
        .unwrap();
    assert_eq!(answer.task(), &task("t1"));
    assert!(!answer.expects_reply);
    assert!(m.has_reply(&req.id).unwrap());
    assert_eq!(m.locate(&req.id).unwrap(), Some(Location::Archive));
    assert_eq!(
        m.archive(&req.id).unwrap(),
        ArchiveOutcome::AlreadyArchived(Location::Archive)
    );
    let events = m.read_manifest().unwrap();
    assert!(events.iter().any(|e| matches!(e,
        ManifestEvent::Archived { id, reply: Some(r), .. } if *id == req.id && *r == answer.id)));
    assert!(m.pending_replies(&task("t1")).unwrap().is_empty());
}

#[test]
fn archive_outcomes() {
    let f = fixture();
    let m = &f.mail;
    let n = m.send(&notify("a", "b", "t", "s", "")).unwrap();
    assert_eq!(
        m.archive(&n.id).unwrap(),
        ArchiveOutcome::Archived(n.clone())
    );
    assert_eq!(
        m.archive(&n.id).unwrap(),
        ArchiveOutcome::AlreadyArchived(Location::Archive)
    );
    assert!(matches!(
        m.archive(&mid("1-nope")),
        Err(Error::NotFound { .. })
    ));
    m.sweep_task_on_commit(&task("t")).unwrap();
    assert_eq!(
        m.archive(&n.id).unwrap(),
        ArchiveOutcome::AlreadyArchived(Location::ByTask(task("t")))
    );
}

/// `inbox` fails on an unreadable message file; `inbox_listing` gives the
/// messages it could read and names the files it could not, corrupt and
/// unsupported apart.
#[test]
fn an_inbox_listing_reads_past_unreadable_messages() {
    let f = fixture();
    let m = &f.mail;
    let kept = m.send(&notify("a", "b", "t1", "s", "readable")).unwrap();
    let question = m.send(&notify("a", "b", "t1", "s", "to spoil")).unwrap();
    let dir = m.inbox_dir(&agent("b"));
    let spoiled = dir.join(format!("{}.json", question.id)).unwrap();
    let text = std::fs::read_to_string(&spoiled)
        .unwrap()
        .replace("\"kind\": \"notify\"", "\"kind\": \"question\"");
    std::fs::write(&spoiled, text).unwrap();
    let torn = dir.join(format!("{}.json", mid("9-torn"))).unwrap();
    std::fs::write(&torn, "{\"id\": \"").unwrap();
    assert!(m.inbox(&agent("b")).unwrap_err().corruption().is_some());
    let listing = m.inbox_listing(&agent("b")).unwrap();
    let ids: Vec<_> = listing.items.iter().map(|x| &x.id).collect();
    assert_eq!(ids, [&kept.id]);
    assert_eq!(listing.corrupt.len(), 1, "{listing:?}");
    assert_eq!(listing.corrupt[0].path, torn.as_path());
    assert_eq!(listing.unsupported.len(), 1, "{listing:?}");
    assert_eq!(listing.unsupported[0].path, spoiled.as_path());
}

#[test]
fn inbox_filters_in_id_order() {
    let f = fixture();
    let m = &f.mail;
    let mut sent = Vec::new();
    for (i, (kind, t)) in [
        (Kind::Request, "t1"),
        (Kind::Notify, "t2"),
        (Kind::Notify, "t1"),
        (Kind::Request, "t2"),
    ]
    .into_iter()
    .enumerate()
    {
        f.clock.advance(Duration::from_secs(1));
        let d = match kind {
            Kind::Request => {
                NewMessage::request(agent("a"), agent("b"), task(t), "s", i.to_string())
            }
            _ => NewMessage::notify(agent("a"), agent("b"), task(t), "s", i.to_string()),
        };
        sent.push(m.send(&d).unwrap());
    }
    m.send(&notify("a", "c", "t1", "s", "other inbox")).unwrap();
    let inbox = m.inbox(&agent("b")).unwrap();
    let bodies: Vec<&str> = inbox.iter().map(|x| x.body.as_str()).collect();
    assert_eq!(
        bodies,
        ["0", "1", "2", "3"],
        "that inbox only, in send order"
    );
    let ids: Vec<_> = inbox.iter().map(|x| x.id.clone()).collect();
    let sent_ids: Vec<_> = sent.iter().map(|x| x.id.clone()).collect();
    assert_eq!(ids, sent_ids);
    assert!(m.inbox(&agent("nobody")).unwrap().is_empty());
    assert_eq!(m.inbox_len(&agent("b")).unwrap(), 4);
}

#[test]
fn thread_spans_inbox_archive_and_by_task() {
    let f = fixture();
    let m = &f.mail;
    let q1 = m
        .send(&request("critic", "exec", "t1", "scope-creep", "q1"))
        .unwrap();
    let a1 = m
        .send(&response("exec", "critic", &q1.id, "scope-creep", "a1"))
        .unwrap();
    let q2 = m
        .send(&request("critic", "exec", "t1", "scope-creep", "q2").replying_to(a1.id.clone()))
        .unwrap();
    let side = m
        .send(&notify("critic", "lead", "t1", "fyi", "side").replying_to(q1.id.clone()))
        .unwrap();
    let a2 = m
        .send(&response("exec", "critic", &q2.id, "scope-creep", "a2"))
        .unwrap();
    m.send(&notify("critic", "exec", "t1", "unrelated", ""))
        .unwrap();
    assert!(matches!(
        m.archive(&a1.id).unwrap(),
        ArchiveOutcome::Archived(_)
    ));
    // Causal order: parents first, otherwise send order.
    let expected = ["q1", "a1", "q2", "side", "a2"];
    let bodies =
        |v: Vec<chipset_mail::Message>| v.iter().map(|x| x.body.to_owned()).collect::<Vec<_>>();
    for id in [&q1.id, &a1.id, &q2.id, &side.id, &a2.id] {
        assert_eq!(bodies(m.thread(id).unwrap()), expected);
    }
    // Sweep half of it away: the thread still reads the same.
    assert!(matches!(
        m.archive(&a2.id).unwrap(),
        ArchiveOutcome::Archived(_)
    ));
    m.sweep_task_on_commit(&task("t1")).unwrap();
    for id in [&q1.id, &a2.id] {
        assert_eq!(bodies(m.thread(id).unwrap()), expected);
    }
    assert!(matches!(
        m.thread(&mid("1-nope")),
        Err(Error::NotFound { .. })
    ));
}

#[test]
fn pending_replies_is_the_commit_gate() {
    let f = fixture();
    let m = &f.mail;
    let q = m.send(&request("critic", "exec", "t1", "q", "")).unwrap();
    m.send(&request("critic", "exec", "t2", "q", "")).unwrap();
    m.send(&notify("critic", "exec", "t1", "n", "")).unwrap();
    let pending = m.pending_replies(&task("t1")).unwrap();
    assert_eq!(pending.iter().map(|p| &p.id).collect::<Vec<_>>(), [&q.id]);
    m.send(&response("exec", "critic", &q.id, "a", "")).unwrap();
    assert!(m.pending_replies(&task("t1")).unwrap().is_empty());
    assert_eq!(m.pending_replies(&task("t2")).unwrap().len(), 1);
}

#[test]
fn sweep_moves_task_and_is_rerunnable() {
    let f = fixture();
    let m = &f.mail;
    let a = m.send(&notify("a", "b", "t1", "s", "")).unwrap();
    m.send(&notify("a", "c", "t1", "s", "")).unwrap();
    let other = m.send(&notify("a", "b", "t2", "s", "")).unwrap();
    assert!(matches!(
        m.archive(&a.id).unwrap(),
        ArchiveOutcome::Archived(_)
    ));
    let r = m.sweep_task_on_commit(&task("t1")).unwrap();
    assert_eq!((r.moved, r.total), (2, 2));
    assert_eq!(m.locate(&a.id).unwrap(), Some(Location::ByTask(task("t1"))));
    assert_eq!(
        m.locate(&other.id).unwrap(),
        Some(Location::Inbox(agent("b")))
    );
    let again = m.sweep_task_on_commit(&task("t1")).unwrap();
    assert_eq!((again.moved, again.total), (0, 2));
    let swept: Vec<(usize, usize)> = m
        .read_manifest()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            ManifestEvent::TaskSwept { count, total, .. } => Some((*count, *total)),
            _ => None,
        })
        .collect();
    assert_eq!(swept, [(2, 2), (0, 2)]);
    let counts = m.inbox_counts().unwrap();
    assert_eq!(counts.get(&agent("b")), Some(&1));
    assert_eq!(counts.get(&agent("c")), Some(&0));
}

#[test]
fn batch_send_is_all_or_nothing_on_refusal() {
    let f = fixture();
    let m = &f.mail;
    let q = m.send(&request("critic", "exec", "t", "q", "")).unwrap();
    let mut drafts: Vec<NewMessage> = (0..50)
        .map(|i| {
            NewMessage::notify(
                agent("a"),
                agent(&format!("r{}", i % 3)),
                task("t"),
                "s",
                i.to_string(),
            )
        })
        .collect();
    drafts.push(response("exec", "critic", &q.id, "a", ""));
    let mut bad = drafts.clone();
    bad.push(notify("a", "b", "t", "NOT OK", ""));
    assert!(m.send_batch(&bad).is_err());
    assert_eq!(m.read_manifest().unwrap().len(), 1);
    assert!(
        m.inbox_counts()
            .unwrap()
            .keys()
            .all(|a| a == &agent("exec"))
    );

    let sent = m.send_batch(&drafts).unwrap();
    assert_eq!(sent.len(), 51);
    assert!(sent.windows(2).all(|w| w[0].id < w[1].id));
    let total: usize = m.inbox_counts().unwrap().values().sum();
    assert_eq!(total, 51, "50 notes + the answer; the request was archived");
    assert!(m.has_reply(&q.id).unwrap());
    assert_eq!(m.locate(&q.id).unwrap(), Some(Location::Archive));
    let events = m.read_manifest().unwrap();
    let sent_events = events
        .iter()
        .filter(|e| crate::event_name(e) == "sent")
        .count();
    assert_eq!(sent_events, 52);
}

#[test]
fn racing_archivers_one_wins() {
    let f = fixture();
    let m = &f.mail;
    let ids: Vec<_> = (0..20)
        .map(|_| m.send(&notify("a", "b", "t", "s", "")).unwrap().id.clone())
        .collect();
    for id in &ids {
        let outcomes: Vec<ArchiveOutcome> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..3).map(|_| s.spawn(|| m.archive(id).unwrap())).collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let won = outcomes
            .iter()
            .filter(|o| matches!(o, ArchiveOutcome::Archived(_)))
            .count();
        assert_eq!(won, 1, "{outcomes:?}");
    }
    let archived = m
        .read_manifest()
        .unwrap()
        .iter()
        .filter(|e| crate::event_name(e) == "archived")
        .count();
    assert_eq!(archived, 20);
}

#[test]
fn chosen_id_makes_a_resend_idempotent_wherever_the_message_went() {
    let f = fixture();
    let m = &f.mail;
    let id = mid("1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab");
    let draft = notify("witness", "mayor", "t", "health-escalation", "silent").with_id(id.clone());
    let sent = m.send(&draft).unwrap();
    assert_eq!(sent.id, id);

    // The sender crashed and sends again: the first delivery, nothing written.
    let before = m.read_manifest().unwrap().len();
    f.clock.advance(std::time::Duration::from_secs(3));
    assert_eq!(
        m.send(&draft).unwrap(),
        sent,
        "the first delivery, its time included"
    );
    // The same id with other content is refused, wherever the first is.
    let other_body =
        notify("witness", "mayor", "t", "health-escalation", "loud").with_id(id.clone());
    match m.send(&other_body) {
        Err(Error::IdTaken {
            id: taken,
            location,
        }) => {
            assert_eq!(taken, id);
            assert_eq!(location, Location::Inbox(agent("mayor")));
        }
        other => panic!("expected IdTaken, got {other:?}"),
    }
    // Still the first delivery after the recipient archived it (the inbox no longer has it).
    assert!(matches!(
        m.archive(&id).unwrap(),
        ArchiveOutcome::Archived(_)
    ));
    assert_eq!(m.send(&draft).unwrap(), sent);
    assert_eq!(
        m.send_batch(std::slice::from_ref(&draft)).unwrap(),
        vec![sent.clone()]
    );
    assert!(matches!(
        m.send(&other_body),
        Err(Error::IdTaken {
            location: Location::Archive,
            ..
        })
    ));
    // And after its task was swept.
    m.sweep_task_on_commit(&task("t")).unwrap();
    assert_eq!(m.send(&draft).unwrap(), sent);
    assert_eq!(
        m.read_manifest().unwrap().len(),
        before + 2,
        "only the archive and sweep events"
    );
    assert_eq!(m.inbox(&agent("mayor")).unwrap().len(), 0);

    // A batch may not repeat a chosen id either, and then writes nothing.
    let other = mid("1730000000999-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab");
    let twice = notify("a", "b", "t", "s", "").with_id(other.clone());
    assert!(matches!(
        m.send_batch(&[twice.clone(), twice]),
        Err(Error::IdTaken { .. })
    ));
    assert_eq!(m.locate(&other).unwrap(), None);
}
