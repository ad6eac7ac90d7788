//! Integration tests for chipset-mail, one module per area.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "tests plant, corrupt and inspect files as another program would, outside the store's API"
)]

mod doctor;
mod doctor_seam;
mod example;
mod foreign;
mod formats;
mod gate;
mod gate_cache;
mod group;
mod model;
mod ops;
mod outsiders;
mod peers;
mod place;
mod procs;
mod seam;
mod seam_syncs;
mod server;
mod server_doctor;
mod server_scan;
mod tail;
mod tail_file;
mod wait_gate;

use chipset_mail::MessageId;
use chipset_mail::{Mail, MailConfig, ManifestEvent, NewMessage};
use chipset_store::ManualClock;
use chipset_testkit::TempState;

pub(crate) use chipset_testkit::{T0, agent, task};
/// Returns what a doctor report found, as (code, subject, line): what the
/// mail doctor's findings assert on, with or without what a fix did.
pub(crate) fn seen(report: &chipset_store::Report) -> Vec<(&'static str, Option<String>, String)> {
    report
        .findings
        .iter()
        .map(|f| (f.code, f.subject.clone(), f.message.clone()))
        .collect()
}

/// The largest round a message may carry: 2^53, the largest integer every
/// JSON writer writes exactly.
pub(crate) const MAX_ROUND: u64 = 1 << 53;

/// Returns a manifest event's name as written (its `event` tag).
pub(crate) fn event_name(e: &ManifestEvent) -> &'static str {
    match e {
        ManifestEvent::Sent { .. } => "sent",
        ManifestEvent::Archived { .. } => "archived",
        ManifestEvent::TaskSwept { .. } => "task-swept",
        ManifestEvent::Orphaned { .. } => "orphaned",
        other => panic!("an event these tests do not know: {other:?}"),
    }
}

/// Returns the message id of a per-message manifest event.
pub(crate) fn event_id(e: &ManifestEvent) -> Option<&MessageId> {
    match e {
        ManifestEvent::Sent { id, .. }
        | ManifestEvent::Archived { id, .. }
        | ManifestEvent::Orphaned { id, .. } => Some(id),
        _ => None,
    }
}

pub(crate) fn mid(s: &str) -> MessageId {
    MessageId::new(s).unwrap()
}

/// A notification from `from` to `to` on task `t`, the ids by name.
pub(crate) fn notify(from: &str, to: &str, t: &str, subject: &str, body: &str) -> NewMessage {
    NewMessage::notify(agent(from), agent(to), task(t), subject, body)
}

/// A request from `from` to `to` on task `t`, the ids by name.
pub(crate) fn request(from: &str, to: &str, t: &str, subject: &str, body: &str) -> NewMessage {
    NewMessage::request(agent(from), agent(to), task(t), subject, body)
}

/// A response from `from` to `to` answering `id`, the agents by name.
pub(crate) fn response(
    from: &str,
    to: &str,
    id: &MessageId,
    subject: &str,
    body: &str,
) -> NewMessage {
    NewMessage::response(agent(from), agent(to), id.clone(), subject, body)
}

/// A fresh state root on a manual clock, and its mail channel.
pub(crate) struct Fixture {
    #[allow(
        dead_code,
        reason = "owns the temporary directory for the test's lifetime"
    )]
    pub(crate) tmp: TempState,
    pub(crate) clock: ManualClock,
    pub(crate) mail: Mail,
}

/// The manifest's bytes as they stand.
pub(crate) fn manifest_bytes(m: &Mail) -> Vec<u8> {
    m.state()
        .read_bytes(&m.manifest_path())
        .unwrap()
        .value()
        .unwrap()
}

pub(crate) fn fixture() -> Fixture {
    fixture_with(MailConfig::default())
}

pub(crate) fn fixture_with(config: MailConfig) -> Fixture {
    let (tmp, clock) = TempState::manual();
    let mail = Mail::with_config(tmp.state.clone(), config);
    Fixture { tmp, clock, mail }
}

/// As [`fixture_with`], on a store that skips its syncs, with mail on
/// `place` (the directory or a server): for the model tests.
pub(crate) fn fixture_no_sync(place: &place::Place, config: MailConfig) -> Fixture {
    let (tmp, clock) = TempState::manual_no_sync();
    let mail = place::mail_with(place, &tmp.state, config);
    Fixture { tmp, clock, mail }
}

/// Counts the records of another shape in a read manifest.
pub(crate) fn foreign(events: &[chipset_mail::ManifestEvent]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, chipset_mail::ManifestEvent::Foreign(_)))
        .count()
}

/// Reads `m`'s manifest file as the store's log: its whole records, the
/// lines that are not JSON and a torn tail (none for mail on a server,
/// which keeps no manifest file).
pub(crate) fn manifest_log(m: &Mail) -> chipset_store::LogContents<serde_json::Value> {
    m.state()
        .log_reader(&m.manifest_path())
        .unwrap()
        .read_from(0)
        .unwrap()
}

/// Counts the message files (`*.json`) directly in `dir`, as the store
/// lists it (none when it is missing).
pub(crate) fn message_files(m: &Mail, dir: &chipset_store::StatePath) -> usize {
    m.state()
        .list(dir)
        .unwrap()
        .iter()
        .filter(|name| name.ends_with(".json"))
        .count()
}

/// Starts watching `dir` for opens of the files in it.
pub(crate) fn watch_opens(dir: &std::path::Path) -> rustix::fd::OwnedFd {
    use rustix::fs::inotify;
    let fd = inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC).unwrap();
    inotify::add_watch(&fd, dir, inotify::WatchFlags::OPEN).unwrap();
    fd
}

/// The names of the files opened in the watched directory since the watch
/// began (the kernel queues the events at each open, so all are there).
pub(crate) fn opened(fd: &rustix::fd::OwnedFd) -> Vec<String> {
    let mut names = opens(fd);
    names.dedup();
    names
}

/// As [`opened`], with each open (a file opened twice is named twice).
pub(crate) fn opens(fd: &rustix::fd::OwnedFd) -> Vec<String> {
    use rustix::fs::inotify;
    let mut buf = [std::mem::MaybeUninit::uninit(); 4096];
    let mut reader = inotify::Reader::new(fd, &mut buf);
    let mut names = Vec::new();
    loop {
        match reader.next() {
            Ok(event) => names.extend(event.file_name().map(|n| n.to_string_lossy().into_owned())),
            Err(rustix::io::Errno::AGAIN) => break,
            Err(e) => panic!("reading inotify events: {e}"),
        }
    }
    names.sort();
    names
}
