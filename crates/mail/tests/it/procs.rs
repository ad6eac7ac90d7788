//! Many processes at once, and processes killed mid-send: the test binary
//! re-runs itself as the children (see `chipset-testkit`). Each race runs
//! on a directory and, as its `…_on_postgres` twin, on PostgreSQL
//! (`CHIPSET_TEST_PG`), from the same body.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use std::thread;
use std::time::Duration;

use chipset_mail::MessageId;
use chipset_mail::{ArchiveOutcome, Mail, MailConfig, ManifestEvent, NewMessage};
use chipset_store::{DoctorMode, SortableId};
use chipset_testkit::{self as kit, Jitter, TempState};

use crate::place::{Place, mail_with};
use crate::{agent, task};

const ENTRY: &str = "procs::child_entry";
const INBOX: &str = "np-executor";

/// Sends `n` notifications from `from` to the shared inbox, printing each id
/// only after `send` returned.
fn sender(spec: &str, from: &str, n: u64, out: &mut dyn Write) {
    let (mail, _) = Place::open_spec(spec);
    for i in 0..n {
        let draft =
            NewMessage::notify(agent(from), agent(INBOX), task("t1"), "load", i.to_string());
        let m = mail.send(&draft).unwrap();
        writeln!(out, "sent {}", m.id).unwrap();
        out.flush().unwrap();
    }
}

/// Archives every id in `ids_file`, printing `archived ID` or `already ID`.
fn archiver(spec: &str, ids_file: &Path, out: &mut dyn Write) {
    let (mail, _) = Place::open_spec(spec);
    for line in std::fs::read_to_string(ids_file).unwrap().lines() {
        let id = MessageId::new(line).unwrap();
        let word = match mail.archive(&id).unwrap() {
            ArchiveOutcome::Archived(_) => "archived",
            ArchiveOutcome::AlreadyArchived(_) => "already",
        };
        writeln!(out, "{word} {id}").unwrap();
    }
    out.flush().unwrap();
}

#[test]
fn child_entry() {
    if let Some(role) = kit::child_role() {
        let root = role.arg(0);
        kit::wait_for_file(Path::new(role.arg(1)));
        let mut out = std::io::stdout().lock();
        match role.name.as_str() {
            "sender" => sender(root, role.arg(2), role.parse(3), &mut out),
            "archiver" => archiver(root, Path::new(role.arg(2)), &mut out),
            other => panic!("unknown role {other}"),
        }
        return;
    }
    // Not a child: run both roles in-process on tiny inputs.
    let tmp = TempState::new();
    let root = tmp.state.root().to_str().unwrap().to_owned();
    let mut sent = Vec::new();
    sender(&root, "np-critic", 3, &mut sent);
    let ids = String::from_utf8(sent).unwrap();
    assert_eq!(ids.lines().count(), 3);
    let ids_file = tmp.scratch("ids");
    std::fs::write(&ids_file, ids.replace("sent ", "")).unwrap();
    let mut first = Vec::new();
    archiver(&root, &ids_file, &mut first);
    let mut second = Vec::new();
    archiver(&root, &ids_file, &mut second);
    assert_eq!(
        String::from_utf8(first)
            .unwrap()
            .matches("archived ")
            .count(),
        3
    );
    assert_eq!(
        String::from_utf8(second)
            .unwrap()
            .matches("already ")
            .count(),
        3
    );
}

/// Spawns children, releases them at once, and collects their report lines
/// (whatever they printed before they exited or were killed; the test
/// harness's own lines are left out).
struct Children {
    procs: Vec<std::process::Child>,
    readers: Vec<thread::JoinHandle<Vec<String>>>,
}

fn spawn_all(place: &Place, tmp: &TempState, role: &str, args: &[Vec<String>]) -> Children {
    let start = tmp.scratch("start");
    let root = place.spec(tmp.state.root());
    let mut procs = Vec::new();
    let mut readers = Vec::new();
    for extra in args {
        let mut all = vec![root.clone(), start.display().to_string()];
        all.extend(extra.iter().cloned());
        let mut child = kit::spawn(ENTRY, role, &all);
        let lines = kit::lines(&mut child);
        readers.push(thread::spawn(move || {
            lines
                .map_while(Result::ok)
                .filter(|l| {
                    ["sent ", "archived ", "already "]
                        .iter()
                        .any(|p| l.starts_with(p))
                })
                .collect()
        }));
        procs.push(child);
    }
    std::fs::write(&start, b"go").unwrap();
    Children { procs, readers }
}

impl Children {
    fn collect(self) -> Vec<Vec<String>> {
        drop(self.procs);
        self.readers
            .into_iter()
            .map(|r| r.join().unwrap())
            .collect()
    }
}

fn inbox_ids(mail: &Mail) -> Vec<MessageId> {
    mail.inbox(&agent(INBOX))
        .unwrap()
        .into_iter()
        .map(|m| m.id.clone())
        .collect()
}

fn sent_ids(mail: &Mail) -> Vec<MessageId> {
    mail.read_manifest()
        .unwrap()
        .into_iter()
        .filter_map(|e| match e {
            ManifestEvent::Sent { id, .. } => Some(id),
            _ => None,
        })
        .collect()
}

#[test]
fn eight_senders_one_inbox_exactly_once() {
    eight_senders(&Place::fs());
}

/// 8 processes x 250 sends on PostgreSQL: every send acknowledged once,
/// nothing lost or duplicated.
#[test]
fn eight_senders_one_inbox_exactly_once_on_postgres() {
    if let Some(place) = Place::pg("eight_senders_one_inbox_exactly_once_on_postgres") {
        eight_senders(&place);
    }
}

fn eight_senders(place: &Place) {
    let tmp = TempState::new();
    let args: Vec<Vec<String>> = (0..8)
        .map(|i| vec![format!("sender-{i}"), "250".into()])
        .collect();
    let mut children = spawn_all(place, &tmp, "sender", &args);
    for c in &mut children.procs {
        kit::wait_ok(c, Duration::from_secs(120));
    }
    let reported: Vec<String> = children
        .collect()
        .into_iter()
        .flatten()
        .map(|l| l["sent ".len()..].to_owned())
        .collect();
    assert_eq!(reported.len(), 2000);

    let mail = place.open(&tmp.state);
    let inbox = inbox_ids(&mail);
    assert_eq!(inbox.len(), 2000);
    let unique: BTreeSet<&MessageId> = inbox.iter().collect();
    assert_eq!(unique.len(), 2000, "ids are unique");
    let reported: BTreeSet<&str> = reported.iter().map(String::as_str).collect();
    let delivered: BTreeSet<&str> = inbox.iter().map(MessageId::as_str).collect();
    assert_eq!(reported, delivered);
    let sent = sent_ids(&mail);
    assert_eq!(sent.len(), 2000);
    assert_eq!(sent.iter().collect::<BTreeSet<_>>(), unique);
    // Per sender, the bodies arrived complete: 0..250 each.
    let mut per_sender: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    for m in mail.inbox(&agent(INBOX)).unwrap() {
        per_sender
            .entry(m.from.to_string())
            .or_default()
            .insert(m.body.parse().unwrap());
    }
    assert_eq!(per_sender.len(), 8);
    assert!(
        per_sender
            .values()
            .all(|b| b.len() == 250 && b.last() == Some(&249))
    );
    if !place.is_pg() {
        assert!(mail.doctor(DoctorMode::Check).unwrap().is_clean());
    }
}

#[test]
fn killed_senders_lose_nothing_they_reported() {
    killed_senders(&Place::fs());
}

/// Senders killed with SIGKILL mid-transaction: nothing half-done.
#[test]
fn killed_senders_lose_nothing_they_reported_on_postgres() {
    if let Some(place) = Place::pg("killed_senders_lose_nothing_they_reported_on_postgres") {
        killed_senders(&place);
    }
}

fn killed_senders(place: &Place) {
    let seed = Jitter::seed_from_time();
    let mut jitter = Jitter::new(seed);
    let tmp = TempState::new();
    let args: Vec<Vec<String>> = (0..4)
        .map(|i| vec![format!("victim-{i}"), "1000000".into()])
        .collect();
    // On a server the schema is made before the children start, and each
    // child connects first: give them that time before the kills.
    let mail = mail_with(
        place,
        &tmp.state,
        MailConfig {
            in_flight_grace: Duration::ZERO,
            ..MailConfig::default()
        },
    );
    let connect = if place.is_pg() { 300 } else { 0 };
    let mut children = spawn_all(place, &tmp, "sender", &args);
    for c in &mut children.procs {
        thread::sleep(Duration::from_millis(connect + 30 + jitter.below(300)));
        kit::kill9(c);
    }
    let reported: Vec<String> = children
        .collect()
        .into_iter()
        .flatten()
        .map(|l| l["sent ".len()..].to_owned())
        .collect();
    assert!(
        !reported.is_empty(),
        "seed {seed}: senders got nothing done"
    );

    // Every file under a real name is a whole message (inbox fails on any other).
    let inbox = inbox_ids(&mail);
    let delivered: BTreeSet<&str> = inbox.iter().map(MessageId::as_str).collect();
    let sent = sent_ids(&mail);
    let logged: BTreeSet<&str> = sent.iter().map(MessageId::as_str).collect();
    for id in &reported {
        id.parse::<SortableId>()
            .unwrap_or_else(|_| panic!("seed {seed}: torn stdout line {id:?}"));
        assert!(
            delivered.contains(id.as_str()),
            "seed {seed}: reported {id} not delivered"
        );
        assert!(
            logged.contains(id.as_str()),
            "seed {seed}: reported {id} has no sent event"
        );
    }
    // A sent event is only appended after its message is published.
    assert!(logged.is_subset(&delivered), "seed {seed}");
    // The manifest reader yields only whole records.
    let manifest = mail.read_manifest().unwrap();
    assert_eq!(crate::foreign(&manifest), 0, "seed {seed}: {manifest:?}");
    if place.is_pg() {
        // One transaction per send: the message and its event together.
        assert_eq!(logged, delivered, "seed {seed}");
        return;
    }
    let names = mail
        .state()
        .list(&mail.dir().join_static("inbox").join_static(INBOX))
        .unwrap();
    assert!(
        names.iter().all(|n| n.ends_with(".json")),
        "seed {seed}: {names:?}"
    );
    assert_eq!(names.len(), delivered.len());

    // Repair appends the events a kill cut off; afterwards all is consistent.
    mail.doctor(DoctorMode::Fix).unwrap();
    let after = mail.doctor(DoctorMode::Check).unwrap();
    assert!(
        after
            .findings
            .iter()
            .all(|f| f.code == "messaging-bad-manifest-line"),
        "seed {seed}: {after:?}"
    );
    let logged: BTreeSet<MessageId> = sent_ids(&mail).into_iter().collect();
    assert_eq!(logged, inbox.iter().cloned().collect(), "seed {seed}");
}

#[test]
fn two_processes_archive_each_message_once() {
    three_archivers(&Place::fs());
}

#[test]
fn two_processes_archive_each_message_once_on_postgres() {
    if let Some(place) = Place::pg("two_processes_archive_each_message_once_on_postgres") {
        three_archivers(&place);
    }
}

fn three_archivers(place: &Place) {
    let tmp = TempState::new();
    let mail = place.open(&tmp.state);
    let drafts: Vec<NewMessage> = (0..150)
        .map(|i| {
            NewMessage::notify(
                agent("np-critic"),
                agent(INBOX),
                task("t1"),
                "s",
                i.to_string(),
            )
        })
        .collect();
    let ids: Vec<String> = mail
        .send_batch(&drafts)
        .unwrap()
        .iter()
        .map(|m| m.id.to_string())
        .collect();
    let ids_file = tmp.scratch("ids");
    std::fs::write(&ids_file, ids.join("\n")).unwrap();
    let arg = vec![ids_file.display().to_string()];
    let mut children = spawn_all(place, &tmp, "archiver", &[arg.clone(), arg.clone(), arg]);
    for c in &mut children.procs {
        kit::wait_ok(c, Duration::from_secs(120));
    }
    let lines: Vec<String> = children.collect().into_iter().flatten().collect();
    let mut wins: BTreeMap<&str, usize> = BTreeMap::new();
    for line in &lines {
        let (word, id) = line.split_once(' ').unwrap();
        let w = wins.entry(id).or_default();
        if word == "archived" {
            *w += 1;
        }
    }
    assert_eq!(lines.len(), 450);
    assert_eq!(wins.len(), 150);
    assert!(wins.values().all(|w| *w == 1), "{wins:?}");
    let archived = mail
        .read_manifest()
        .unwrap()
        .iter()
        .filter(|e| crate::event_name(e) == "archived")
        .count();
    assert_eq!(archived, 150);
    if place.is_pg() {
        assert_eq!(mail.inbox_len(&agent(INBOX)).unwrap(), 0);
    } else {
        let archived = crate::message_files(&mail, &mail.dir().join_static("archive"));
        assert_eq!(archived, 150);
    }
}
