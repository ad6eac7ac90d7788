//! The nudge and reminder doctors' repairs driven through the store's I/O
//! seam: a fault (EIO, ENOSPC) at every call of `doctor(Fix)` on damaged
//! signal and reminder files, and every power-cut state of it. No run
//! loses a byte of the damaged files or a healthy record, no report claims
//! a fix a check finds undone, and a later Fix finishes the repair
//! ([`chipset_testkit::sweep_doctor`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use chipset_nudge::{
    Error, KindRegistry, ManualResolution, NewNudge, Nudge, NudgeType, Nudges, Reminder,
    ReminderId, Reminders, Resolution,
};
use chipset_store::{DoctorMode, RealIo, Report, SharedIo, StateDir, StatePath};
use chipset_testkit::{DoctorCase, cut_doctor, manual_state, sweep_doctor};

use crate::reminders::{HOUR, new};
use crate::support::{NudgePaths, ReminderKey, ReminderPaths, agent, preset};

const BAD_LATEST: &[u8] = b"{\"id\": \"torn";
const BAD_PROCESSED: &[u8] = b"[\"processed\"]";
const BAD_RESPONSE: &[u8] = b"{\"from\": ";
const BAD_OPEN: &[u8] = b"{\"id\": \"open";
const BAD_SNOOZED: &[u8] = b"{\"id\": \"snoozed";
const BAD_HISTORY: &[u8] = b"{\"id\": \"history";

/// `path` relative to the state root (`StateDir::root`, resolved).
fn rel(state: &StateDir, path: &StatePath) -> PathBuf {
    path.as_path()
        .strip_prefix(state.root())
        .unwrap()
        .to_owned()
}

/// The nudges: a corrupt `latest.json` (b), a corrupt `processed.json`
/// (c) and a corrupt response record (to a, from b), beside c's and d's
/// healthy latest nudges.
struct Signals;

impl DoctorCase for Signals {
    type World = Nudges;
    type Error = Error;

    fn name(&self) -> &str {
        "nudge signals"
    }

    fn plant(&self, root: &Path) {
        let state = manual_state(root, Arc::new(RealIo));
        let n = Nudges::new(state.clone());
        for to in ["b", "c", "d"] {
            let draft = NewNudge::new(agent("a"), NudgeType::HealthCheck, format!("to {to}"));
            let _ = n.send(&agent(to), &draft).unwrap();
        }
        let c = n.read_latest(&agent("c")).unwrap().value().unwrap();
        n.mark_processed(&agent("c"), &c).unwrap();
        let plant = |path: StatePath, bytes: &[u8]| state.write_bytes(&path, bytes).unwrap();
        plant(n.latest_path(&agent("b")), BAD_LATEST);
        plant(n.processed_path(&agent("c")), BAD_PROCESSED);
        plant(n.response_path(&agent("a"), &agent("b")), BAD_RESPONSE);
    }

    fn open(&self, root: &Path, io: SharedIo) -> Nudges {
        Nudges::new(manual_state(root, io))
    }

    fn doctor(&self, n: &Nudges, mode: DoctorMode) -> Result<Report, Error> {
        n.doctor(mode)
    }

    fn damaged(&self) -> Vec<(PathBuf, Vec<u8>)> {
        vec![
            ("nudge/b/latest.json".into(), BAD_LATEST.to_vec()),
            ("nudge/c/processed.json".into(), BAD_PROCESSED.to_vec()),
            ("nudge/a/responses/b.json".into(), BAD_RESPONSE.to_vec()),
        ]
    }

    fn healthy(&self, n: &Nudges, what: &str) {
        for to in ["c", "d"] {
            let latest: Option<Nudge> = n
                .read_latest(&agent(to))
                .unwrap_or_else(|e| panic!("{what}: {e}"))
                .value();
            assert!(
                latest.is_some_and(|l| l.message == format!("to {to}")),
                "{what}: {to}'s latest nudge lost"
            );
        }
    }
}

/// The ids a plant of [`Damaged`] gave its reminders, and the history
/// file it corrupted (relative to the root).
#[derive(Default)]
struct Planted {
    /// (id, where it must read, the resolution it has).
    records: Vec<(ReminderId, &'static str, Option<Resolution>)>,
    history: PathBuf,
}

/// The reminders: a corrupt open-index file (B), a corrupt snoozed file
/// (F), a corrupt history file (I) and a resolved record left in the open
/// index (D), beside an open (A), a snoozed (E) and a resolved (H) one.
#[derive(Default)]
struct Damaged(Mutex<Planted>);

fn key(id: &str) -> ReminderKey {
    ReminderKey::new(preset::WRAP_SESSION, "session", id).unwrap()
}

fn reminders(root: &Path, io: SharedIo) -> Reminders {
    Reminders::new(manual_state(root, io), KindRegistry::preset())
}

impl DoctorCase for Damaged {
    type World = Reminders;
    type Error = Error;

    fn name(&self) -> &str {
        "reminders"
    }

    fn plant(&self, root: &Path) {
        let r = reminders(root, Arc::new(RealIo));
        let open = |id: &str| {
            r.open(&new(preset::WRAP_SESSION, id))
                .unwrap()
                .reminder()
                .clone()
        };
        let a = open("A");
        open("B");
        r.state()
            .write_bytes(&r.open_path(&key("B")), BAD_OPEN)
            .unwrap();
        let e = open("E");
        r.snooze(&e.id, HOUR, None).unwrap();
        let f = open("F");
        r.snooze(&f.id, HOUR, None).unwrap();
        r.state()
            .write_bytes(&r.snoozed_path(&key("F")), BAD_SNOOZED)
            .unwrap();
        let h = open("H");
        r.resolve(&h.id, ManualResolution::Completed, None).unwrap();
        let i = open("I");
        r.resolve(&i.id, ManualResolution::Completed, None).unwrap();
        let history = r.history_path(&i.id);
        r.state().write_bytes(&history, BAD_HISTORY).unwrap();
        // D: resolved, but still in the open index (a crash between steps).
        let d = open("D");
        let mut resolved = d.clone();
        resolved.resolved_at = Some(resolved.created_at);
        resolved.resolution = Some(Resolution::Completed);
        r.state()
            .write_json(&r.open_path(&key("D")), &resolved)
            .unwrap();
        *self.0.lock().unwrap() = Planted {
            records: vec![
                (a.id, "open", None),
                (e.id, "snoozed", Some(Resolution::Snoozed)),
                (h.id, "history", Some(Resolution::Completed)),
                (d.id, "D", Some(Resolution::Completed)),
            ],
            history: rel(r.state(), &history),
        };
    }

    fn open(&self, root: &Path, io: SharedIo) -> Reminders {
        reminders(root, io)
    }

    fn doctor(&self, r: &Reminders, mode: DoctorMode) -> Result<Report, Error> {
        r.doctor(mode)
    }

    fn damaged(&self) -> Vec<(PathBuf, Vec<u8>)> {
        let history = self.0.lock().unwrap().history.clone();
        vec![
            (
                "reminders/open/wrap_session/session/B.json".into(),
                BAD_OPEN.to_vec(),
            ),
            (
                "reminders/snoozed/wrap_session/session/F.json".into(),
                BAD_SNOOZED.to_vec(),
            ),
            (history, BAD_HISTORY.to_vec()),
        ]
    }

    /// Each healthy record reads at its file (D, resolved, in the open
    /// index or the history).
    fn healthy(&self, r: &Reminders, what: &str) {
        let planted = self.0.lock().unwrap();
        let read = |path: &StatePath| -> Option<Reminder> {
            r.state()
                .read_json::<Reminder>(path)
                .unwrap_or_else(|e| panic!("{what}: {e}"))
                .value()
        };
        for (id, at, resolution) in &planted.records {
            let found = match *at {
                "open" => read(&r.open_path(&key("A"))),
                "snoozed" => read(&r.snoozed_path(&key("E"))),
                "history" => read(&r.history_path(id)),
                _ => read(&r.open_path(&key("D"))).or_else(|| read(&r.history_path(id))),
            };
            assert!(
                found.is_some_and(|f| f.id == *id && f.resolution == *resolution),
                "{what}: reminder {id:?} ({at}) lost"
            );
        }
    }
}

#[test]
fn every_fault_in_a_nudge_repair_keeps_the_data_and_a_later_fix_finishes() {
    sweep_doctor(&Signals);
    let case = Damaged::default();
    sweep_doctor(&case);
}

#[test]
fn every_power_cut_in_a_nudge_repair_keeps_the_data_and_a_later_fix_finishes() {
    cut_doctor(&Signals);
    let case = Damaged::default();
    cut_doctor(&case);
}
