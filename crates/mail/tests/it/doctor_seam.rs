//! The mail doctor's repair driven through the store's I/O seam: a fault
//! (EIO, ENOSPC) at every call of `doctor(Fix)` on a damaged mail folder,
//! and every power-cut state of it. No run loses a byte of the damaged
//! files or a message, no report claims a fix a check finds undone, and a
//! later Fix finishes the repair ([`chipset_testkit::sweep_doctor`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chipset_mail::{Error, Location, Mail, MailConfig};
use chipset_store::{DoctorMode, ManualClock, RealIo, Report, SharedIo, StateDir, StateOptions};
use chipset_testkit::{DoctorCase, cut_doctor, manual_clock, sweep_doctor};

use crate::{agent, mid, notify};

/// A message file that does not parse, in `b`'s inbox.
const BAD_MESSAGE: &[u8] = b"{\"id\": \"torn";
/// A bad line and a torn tail appended to the manifest.
const BAD_LINES: &[u8] = b"not json\n{\"event\":\"se";
const BAD_ID: &str = "1772706900200-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ff";
/// The healthy messages: (id, recipient, subject).
const HEALTHY: [(&str, &str, &str); 2] = [
    (
        "1772706900100-9b3e0c1a-5d2f-4e1b-8a6c-0123456789a0",
        "b",
        "one",
    ),
    (
        "1772706900101-9b3e0c1a-5d2f-4e1b-8a6c-0123456789a1",
        "c",
        "two",
    ),
];

/// Two messages, a corrupt message file and a manifest with a bad line
/// and a torn tail.
struct Damaged;

fn config() -> MailConfig {
    MailConfig {
        in_flight_grace: Duration::ZERO,
        ..MailConfig::default()
    }
}

fn open(root: &Path, io: SharedIo, clock: &ManualClock) -> Mail {
    let state = StateDir::open_with(
        root,
        StateOptions {
            io,
            clock: Arc::new(clock.clone()),
            ..StateOptions::default()
        },
    )
    .unwrap();
    Mail::with_config(state, config())
}

impl DoctorCase for Damaged {
    type World = Mail;
    type Error = Error;

    fn name(&self) -> &str {
        "mail"
    }

    fn plant(&self, root: &Path) {
        let m = open(root, Arc::new(RealIo), &manual_clock());
        for (id, to, subject) in HEALTHY {
            m.send(&notify("a", to, "t", subject, "body").with_id(mid(id)))
                .unwrap();
        }
        let bad = m.path_of(&mid(BAD_ID), &Location::Inbox(agent("b")));
        m.state().write_bytes(&bad, BAD_MESSAGE).unwrap();
        let manifest = m.manifest_path();
        let read = m.state().read_bytes(&manifest).unwrap();
        let mut log = read.into_result().unwrap().unwrap();
        log.extend_from_slice(BAD_LINES);
        m.state().write_bytes(&manifest, &log).unwrap();
    }

    fn open(&self, root: &Path, io: SharedIo) -> Mail {
        open(root, io, &manual_clock())
    }

    fn doctor(&self, m: &Mail, mode: DoctorMode) -> Result<Report, Error> {
        m.doctor(mode)
    }

    fn damaged(&self) -> Vec<(PathBuf, Vec<u8>)> {
        vec![
            (
                PathBuf::from(format!("mail/inbox/b/{BAD_ID}.json")),
                BAD_MESSAGE.to_vec(),
            ),
            (PathBuf::from("mail/manifest.jsonl"), BAD_LINES.to_vec()),
        ]
    }

    fn healthy(&self, m: &Mail, what: &str) {
        for (id, to, subject) in HEALTHY {
            let found = m.find(&mid(id)).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(
                found.is_some_and(|f| f.to == agent(to) && f.subject == subject),
                "{what}: message {id} lost"
            );
            assert_eq!(
                m.locate(&mid(id)).unwrap(),
                Some(Location::Inbox(agent(to))),
                "{what}"
            );
        }
        let events = m.read_manifest().unwrap_or_else(|e| panic!("{what}: {e}"));
        let sent = events
            .iter()
            .filter(|e| crate::event_name(e) == "sent")
            .count();
        assert!(sent >= 2, "{what}: a `sent` event lost: {events:?}");
    }
}

#[test]
fn every_fault_in_a_mail_repair_keeps_the_data_and_a_later_fix_finishes() {
    sweep_doctor(&Damaged);
}

#[test]
fn every_power_cut_in_a_mail_repair_keeps_the_data_and_a_later_fix_finishes() {
    cut_doctor(&Damaged);
}
