//! The directory doctor's repair driven through the store's I/O seam: a
//! fault (EIO, ENOSPC) at every call of `doctor(Fix)` on a directory with
//! corrupt profiles, and every power-cut state of it. No run loses a byte
//! of a corrupt profile or a healthy one, no report claims a fix a check
//! finds undone, and a later Fix finishes the repair
//! ([`chipset_testkit::sweep_doctor`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use chipset_directory::{Directory, Error, Registration};
use chipset_store::{
    DoctorMode, ManualClock, ReadOutcome, RealIo, Report, SharedIo, StateDir, StateOptions,
    Timestamp,
};
use chipset_testkit::{DoctorCase, cut_doctor, sweep_doctor};

use crate::agent;

/// A torn profile, at `agents/cy.json`.
const TORN: &[u8] = b"{\"name\": \"cy\", \"roles\": [";
/// The healthy agents, and the note each registered with.
const HEALTHY: [(&str, &str); 2] = [("ann", "reviews"), ("bo", "builds")];

/// Two healthy profiles, a torn one (`cy`) and one holding another
/// agent's profile (`dee.json` holds ann's bytes).
struct Damaged;

fn state(root: &Path, io: SharedIo) -> StateDir {
    let clock = ManualClock::new("2026-03-05T10:00:00Z".parse::<Timestamp>().unwrap());
    StateDir::open_with(
        root,
        StateOptions {
            io,
            clock: Arc::new(clock),
            ..StateOptions::default()
        },
    )
    .unwrap()
}

fn open(root: &Path, io: SharedIo) -> Directory {
    Directory::new(state(root, io))
}

/// Ann's profile as planted: the bytes `dee.json` is given.
fn ann_bytes(root: &Path) -> Vec<u8> {
    let state = state(root, Arc::new(RealIo));
    let ann = Directory::new(state.clone()).path(&agent("ann"));
    state
        .read_bytes(&ann)
        .unwrap()
        .into_result()
        .unwrap()
        .unwrap()
}

impl DoctorCase for Damaged {
    type World = Directory;
    type Error = Error;

    fn name(&self) -> &str {
        "directory"
    }

    fn plant(&self, root: &Path) {
        let state = state(root, Arc::new(RealIo));
        let dir = Directory::new(state.clone());
        for (name, note) in HEALTHY {
            let mut change = Registration::new();
            change.note = Some(note.to_owned());
            dir.register(&agent(name), &change).unwrap();
        }
        state.write_bytes(&dir.path(&agent("cy")), TORN).unwrap();
        let ann = ann_bytes(root);
        state.write_bytes(&dir.path(&agent("dee")), &ann).unwrap();
    }

    fn open(&self, root: &Path, io: SharedIo) -> Directory {
        open(root, io)
    }

    fn doctor(&self, dir: &Directory, mode: DoctorMode) -> Result<Report, Error> {
        dir.doctor(mode)
    }

    fn damaged(&self) -> Vec<(PathBuf, Vec<u8>)> {
        // Ann's bytes are the same in every plant (one manual clock).
        static ANN: OnceLock<Vec<u8>> = OnceLock::new();
        let ann = ANN.get_or_init(|| {
            let tmp = tempfile::tempdir().unwrap();
            let root = tmp.path().join("state");
            self.plant(&root);
            ann_bytes(&root)
        });
        vec![
            ("agents/cy.json".into(), TORN.to_vec()),
            ("agents/dee.json".into(), ann.clone()),
        ]
    }

    fn healthy(&self, dir: &Directory, what: &str) {
        for (name, note) in HEALTHY {
            match dir.read(&agent(name)) {
                Ok(ReadOutcome::Value(p)) => {
                    assert_eq!(p.note.as_deref(), Some(note), "{what}: {name}'s profile");
                }
                other => panic!("{what}: {name}'s profile: {other:?}"),
            }
        }
    }
}

#[test]
fn every_fault_in_a_directory_repair_keeps_the_data_and_a_later_fix_finishes() {
    sweep_doctor(&Damaged);
}

#[test]
fn every_power_cut_in_a_directory_repair_keeps_the_data_and_a_later_fix_finishes() {
    cut_doctor(&Damaged);
}
