//! `last_seen` from each source, with no write of its own.

use std::time::Duration;

use chipset_bus::{Bus, NewEvent};
use chipset_directory::{Registration, Source};
use chipset_hook::{Hooks, Pickup};
use chipset_mail::{Mail, NewMessage};

use crate::{agent, env};

#[test]
fn a_registration_is_seen() {
    let e = env();
    let a = agent("alpha");
    e.dir.register(&a, &Registration::new()).unwrap();
    let s = e.dir.whois(&a).unwrap().last_seen;
    assert_eq!((s.at, s.source), (e.state.now(), Source::Registered));
}

#[test]
fn presence_is_seen() {
    let e = env();
    let a = agent("alpha");
    e.dir.register(&a, &Registration::new()).unwrap();
    e.clock.advance(Duration::from_secs(30));
    Bus::new(e.state.clone())
        .start(&a, std::process::id())
        .unwrap();
    let s = e.dir.whois(&a).unwrap().last_seen;
    assert_eq!((s.at, s.source), (e.state.now(), Source::Presence));
}

#[test]
fn hook_touches_are_seen_but_not_the_dispatchers_assignment() {
    let e = env();
    let a = agent("alpha");
    let hooks = Hooks::new(e.state.clone());
    e.dir.register(&a, &Registration::new()).unwrap();
    e.clock.advance(Duration::from_secs(30));
    hooks
        .assign(&a, "gt-1".parse().unwrap(), "t", None)
        .unwrap();
    let s = e.dir.whois(&a).unwrap().last_seen;
    assert_eq!(
        s.source,
        Source::Registered,
        "a pending hook is the dispatcher's"
    );
    e.clock.advance(Duration::from_secs(30));
    let Pickup::Started(work) = hooks.pickup(&a).unwrap() else {
        panic!("pending");
    };
    e.clock.advance(Duration::from_secs(30));
    hooks.touch(&work).unwrap();
    let s = e.dir.whois(&a).unwrap().last_seen;
    assert_eq!((s.at, s.source), (e.state.now(), Source::Hook));
}

#[test]
fn sends_and_archives_are_seen_from_the_manifest_tail() {
    let e = env();
    let (a, b) = (agent("alpha"), agent("beta"));
    let mail = Mail::new(e.state.clone());
    e.dir.register(&a, &Registration::new()).unwrap();
    e.dir.register(&b, &Registration::new()).unwrap();
    e.clock.advance(Duration::from_secs(30));
    let sent = mail
        .send(&NewMessage::notify(
            a.clone(),
            b.clone(),
            "gt-1".parse().unwrap(),
            "s",
            "hello",
        ))
        .unwrap();
    let s = e.dir.whois(&a).unwrap().last_seen;
    assert_eq!((s.at, s.source), (e.state.now(), Source::Sent));
    assert_eq!(
        e.dir.whois(&b).unwrap().last_seen.source,
        Source::Registered
    );
    e.clock.advance(Duration::from_secs(30));
    let _ = mail.archive(&sent.id).unwrap();
    let s = e.dir.whois(&b).unwrap().last_seen;
    assert_eq!((s.at, s.source), (e.state.now(), Source::Archived));
}

#[test]
fn a_long_manifest_is_read_only_at_its_tail() {
    let e = env();
    let (a, b) = (agent("alpha"), agent("beta"));
    let mail = Mail::new(e.state.clone());
    e.dir.register(&a, &Registration::new()).unwrap();
    e.dir.register(&b, &Registration::new()).unwrap();
    e.clock.advance(Duration::from_secs(30));
    mail.send(&NewMessage::notify(
        a.clone(),
        b.clone(),
        "gt-1".parse().unwrap(),
        "s",
        "x",
    ))
    .unwrap();
    // Push alpha's send out of the tail with foreign lines.
    let path = e.state.root().join("mail/manifest.jsonl");
    let mut text = std::fs::read_to_string(&path).unwrap();
    let filler = format!("{{\"event\":\"other\",\"pad\":\"{}\"}}\n", "p".repeat(1000));
    for _ in 0..300 {
        text.push_str(&filler);
    }
    std::fs::write(&path, text).unwrap();
    let s = e.dir.whois(&a).unwrap().last_seen;
    assert_eq!(
        s.source,
        Source::Registered,
        "the send fell out of the tail"
    );
}

#[test]
fn acks_are_seen_from_the_processed_folder() {
    let e = env();
    let a = agent("alpha");
    let bus = Bus::new(e.state.clone());
    e.dir.register(&a, &Registration::new()).unwrap();
    let _ = bus.publish(&a, &NewEvent::new("mayor", "go")).unwrap();
    let event = bus.pending(&a).unwrap().events.remove(0);
    let before = std::time::SystemTime::now();
    let _ = bus.ack_event(&a, &event).unwrap();
    let s = e.dir.whois(&a).unwrap().last_seen;
    // The folder's mtime is the file system's clock, not the manual one
    // (which stands in March 2026).
    assert_eq!(s.source, Source::Ack);
    let ms = before
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    assert!(s.at.unix_ms() >= ms - 1000, "{s:?}");
}

#[test]
fn reading_writes_nothing() {
    let e = env();
    let a = agent("alpha");
    e.dir.register(&a, &Registration::new()).unwrap();
    let bytes = std::fs::read(e.dir.path(&a)).unwrap();
    e.clock.advance(Duration::from_secs(30));
    Bus::new(e.state.clone())
        .start(&a, std::process::id())
        .unwrap();
    e.dir.whois(&a).unwrap();
    e.dir.list(&Default::default()).unwrap();
    assert_eq!(std::fs::read(e.dir.path(&a)).unwrap(), bytes);
}
