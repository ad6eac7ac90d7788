//! Issue 12: send, send_batch, archive and sweep driven through the store's
//! I/O seam: a fault (EIO, ENOSPC) at every call, and every power-cut state.
//! Each failure is plain (nothing visible changed) or of unknown outcome,
//! and a retry with the same ids is then a success that applied once.

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chipset_mail::MessageId;
use chipset_mail::{ArchiveOutcome, Error, Mail, NewMessage};
use chipset_store::{Classify, IoBackend, RealIo};
use chipset_store::{Defect, DoctorMode};
use chipset_store::{ManualClock, SharedIo, StateDir, StateOptions, SyncOrder, Timestamp};
use chipset_testkit::{EIO, Fault, FaultCase, FaultIo, IoOp, RecordIo, sweep_each};

use crate::{T0, agent, mid, task};

const REQ: &str = "1772706900100-9b3e0c1a-5d2f-4e1b-8a6c-0123456789a0";
const ID: &str = "1772706900123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab";
const ID2: &str = "1772706900124-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ac";

fn notify(id: &str, to: &str) -> NewMessage {
    NewMessage::notify(agent("alice"), agent(to), task("t1"), "status", "hello").with_id(mid(id))
}

fn request() -> NewMessage {
    NewMessage::request(agent("alice"), agent("bob"), task("t1"), "question", "why?")
        .with_id(mid(REQ))
}

fn response() -> NewMessage {
    NewMessage::response(
        agent("bob"),
        agent("alice"),
        mid(REQ),
        "question",
        "because",
    )
    .with_id(mid(ID))
}

/// Every file named `{id}.json` outside the reply index and quarantine.
fn copies(root: &Path, id: &str) -> usize {
    let name = format!("{id}.json");
    let mut n = 0;
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for e in entries {
            let e = e.unwrap();
            let file = e.file_name().to_string_lossy().into_owned();
            if file.starts_with('.') || file == "replies" {
                continue;
            }
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else if file == name {
                n += 1;
            }
        }
    }
    n
}

fn open(root: &Path, io: SharedIo, clock: &ManualClock) -> Mail {
    Mail::new(
        StateDir::open_with(
            root,
            StateOptions {
                io,
                clock: Arc::new(clock.clone()),
                ..StateOptions::default()
            },
        )
        .unwrap(),
    )
}

fn in_archive(m: &Mail, id: &str) -> bool {
    m.path_of(&mid(id), &chipset_mail::Location::Archive)
        .is_file()
}

#[derive(Clone)]
struct Case {
    name: &'static str,
    setup: fn(&Mail),
    /// Runs the operation, retry-safe; returns Err only for a failure.
    run: fn(&Mail) -> Result<(), Error>,
    /// The operation applied, once.
    applied: fn(&Mail) -> bool,
    /// What a power cut after the operation returned must keep (a move
    /// between directories may leave a copy in both places, never neither).
    kept: fn(&Mail) -> bool,
}

fn by_task(m: &Mail, id: &str) -> bool {
    m.state()
        .root()
        .join(format!("mail/archive/by-task/t1/{id}.json"))
        .is_file()
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "send",
            setup: |_| {},
            run: |m| m.send(&notify(ID, "bob")).map(drop),
            applied: |m| copies(m.state().root(), ID) == 1,
            kept: |m| copies(m.state().root(), ID) >= 1,
        },
        Case {
            name: "send a response",
            setup: |m| drop(m.send(&request()).unwrap()),
            run: |m| {
                let sent = m.send(&response())?;
                assert_eq!(sent.id, mid(ID));
                Ok(())
            },
            applied: |m| {
                copies(m.state().root(), ID) == 1
                    && copies(m.state().root(), REQ) == 1
                    && m.has_reply(&mid(REQ)).unwrap()
            },
            kept: |m| copies(m.state().root(), ID) >= 1 && m.has_reply(&mid(REQ)).unwrap(),
        },
        Case {
            name: "send_batch",
            setup: |_| {},
            run: |m| {
                let sent = m.send_batch(&[notify(ID, "bob"), notify(ID2, "carol")])?;
                assert_eq!(sent.len(), 2);
                Ok(())
            },
            applied: |m| copies(m.state().root(), ID) == 1 && copies(m.state().root(), ID2) == 1,
            kept: |m| copies(m.state().root(), ID) >= 1 && copies(m.state().root(), ID2) >= 1,
        },
        Case {
            name: "archive",
            setup: |m| drop(m.send(&notify(ID, "bob")).unwrap()),
            run: |m| match m.archive(&mid(ID))? {
                ArchiveOutcome::Archived(_) | ArchiveOutcome::AlreadyArchived(_) => Ok(()),
            },
            applied: |m| copies(m.state().root(), ID) == 1 && in_archive(m, ID),
            kept: |m| in_archive(m, ID),
        },
        Case {
            name: "sweep",
            setup: |m| {
                m.send(&notify(ID, "bob")).unwrap();
                m.send(&notify(ID2, "carol")).unwrap();
                drop(m.archive(&mid(ID2)).unwrap());
            },
            run: |m| m.sweep_task_on_commit(&task("t1")).map(drop),
            applied: |m| {
                let dir = m.state().root().join("mail/archive/by-task/t1");
                copies(m.state().root(), ID) == 1
                    && copies(m.state().root(), ID2) == 1
                    && dir.join(format!("{ID}.json")).is_file()
                    && dir.join(format!("{ID2}.json")).is_file()
            },
            kept: |m| by_task(m, ID) && by_task(m, ID2),
        },
    ]
}

/// After the retry: the doctor completes the follow-up, and is then clean.
/// After a power cut it may also find a moved message in both places.
fn doctor_completes(m: &Mail, clock: &ManualClock, what: &str, power_cut: bool) {
    clock.advance(Duration::from_secs(60));
    let fixed = m.doctor(DoctorMode::Fix).unwrap();
    for f in &fixed.findings {
        assert!(
            [
                "messaging-missing-sent-event",
                "messaging-missing-archived-event",
                "messaging-missing-reply-index",
                "messaging-answered-request-in-inbox",
                "messaging-torn-manifest",
            ]
            .contains(&f.code)
                || (power_cut && f.code == "messaging-duplicate-message"),
            "{what}: the doctor found {f}"
        );
    }
    let check = m.doctor(DoctorMode::Check).unwrap();
    assert!(check.is_clean(), "{what}: {:?}", check.findings);
}

impl FaultCase for Case {
    /// The mail and its clock, which the doctor's check moves on.
    type World = (Mail, ManualClock);
    type Error = Error;

    fn name(&self) -> &str {
        self.name
    }

    fn open(&self, root: &Path, io: SharedIo) -> (Mail, ManualClock) {
        let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
        let mail = open(root, io, &clock);
        (self.setup)(&mail);
        (mail, clock)
    }

    fn run(&self, (mail, _): &(Mail, ManualClock)) -> Result<(), Error> {
        (self.run)(mail)
    }

    fn applied(&self, (mail, _): &(Mail, ManualClock)) -> bool {
        (self.applied)(mail)
    }

    fn is_outcome_unknown(&self, e: &Error, what: &str) -> bool {
        if let Error::OutcomeUnknown { ids, .. } = e {
            assert!(ids.contains(&mid(ID)), "{what}: {e}");
        }
        e.is_outcome_unknown()
    }

    fn after_retry(&self, (mail, clock): &(Mail, ManualClock), what: &str) {
        doctor_completes(mail, clock, what, false);
    }
}

#[test]
fn every_fault_in_send_archive_and_sweep_is_safe_to_retry() {
    sweep_each("mail", cases());
}

#[test]
#[allow(
    clippy::print_stderr,
    reason = "prints the figures for the report (shown with --nocapture)"
)]
fn every_power_cut_in_send_archive_and_sweep_reads_clean_and_keeps_what_returned() {
    let mut total = 0;
    let orders = [SyncOrder::FileThenDir, SyncOrder::WriteBackThenDir];
    for (case, order) in cases()
        .into_iter()
        .flat_map(|c| orders.map(|o| (c.clone(), o)))
    {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("state");
        let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
        (case.setup)(&open(
            &root,
            std::sync::Arc::new(chipset_store::RealIo),
            &clock,
        ));
        let rec = RecordIo::start_with_order(&root, order).unwrap();
        let mail = open(&root, rec.clone(), &clock);
        (case.run)(&mail).unwrap();
        rec.mark(case.name);
        let states = rec.crash_states();
        assert!(states.len() > 1, "{}", case.name);
        for (i, cut) in states.iter().enumerate() {
            let what = format!("{} ({order:?}): cut {i}", case.name);
            let dir = tmp.path().join(format!("cut{i}"));
            cut.materialize(&dir).unwrap();
            let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
            let back = open(&dir, std::sync::Arc::new(chipset_store::RealIo), &clock);
            // Reads without corruption: every file whole, the manifest whole
            // but for a torn tail a crash may leave.
            let report = back.doctor(DoctorMode::Check).unwrap();
            for f in &report.findings {
                assert!(!matches!(f.fault, Defect::Corrupt(_)), "{what}: {f}");
            }
            assert!(crate::manifest_log(&back).bad_lines.is_empty(), "{what}");
            if cut.returned.iter().any(|r| r == case.name) {
                assert!((case.kept)(&back), "{what}: lost after returning");
            }
            (case.run)(&back).unwrap_or_else(|e| panic!("{what}: retry: {e}"));
            doctor_completes(&back, &clock, &what, true);
            assert!(
                (case.applied)(&back),
                "{what}: the retry did not apply once"
            );
        }
        total += states.len();
        eprintln!(
            "mail power cut {}: {} calls, {} distinct states",
            case.name,
            rec.calls(),
            states.len()
        );
    }
    eprintln!("mail power cut total: {total} states");
}

#[test]
fn a_message_id_in_outcome_unknown_is_the_one_to_retry_with() {
    // The sync of the publish (the directory sync after the rename) fails.
    let tmp = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
    let fault = FaultIo::passthrough();
    let mail = open(tmp.path(), fault.clone(), &clock);
    fault.set(Fault::nth(0, EIO));
    mail.send(&notify(ID2, "bob")).unwrap();
    // The first directory sync after the first rename is the publish's own.
    let calls = fault.calls();
    let rename = calls.iter().position(|c| *c == IoOp::Rename).unwrap();
    let n = rename
        + calls[rename..]
            .iter()
            .position(|c| *c == IoOp::SyncDir)
            .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let fault = FaultIo::passthrough();
    let mail = open(tmp.path(), fault.clone(), &clock);
    fault.set(Fault::nth(n as u64 + 1, EIO));
    let err = mail.send(&notify(ID, "bob")).unwrap_err();
    assert!(err.is_outcome_unknown(), "{err}");
    assert!(
        matches!(&err, Error::OutcomeUnknown { ids, .. } if *ids == [MessageId::new(ID).unwrap()]),
        "{err}"
    );
    assert!(err.to_string().contains(ID), "{err}");
    fault.disarm();
    let again = mail.send(&notify(ID, "bob")).unwrap();
    assert_eq!(again.id, mid(ID));
    assert_eq!(copies(tmp.path(), ID), 1);
}

/// The `archived` event is follow-up: when its append fails the archive
/// still succeeds, and the doctor reports the missing event, appends it
/// (reconciled) with Fix, and is then clean.
#[test]
fn an_archive_whose_event_append_failed_is_completed_by_the_doctor() {
    // A dry run finds the calls of the archive: the manifest append is the
    // last file opened.
    let tmp = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
    let fault = FaultIo::passthrough();
    let mail = open(tmp.path(), fault.clone(), &clock);
    mail.send(&notify(ID, "bob")).unwrap();
    fault.set(Fault::nth(0, EIO));
    drop(mail.archive(&mid(ID)).unwrap());
    let calls = fault.calls();
    let append = calls.iter().rposition(|c| *c == IoOp::Open).unwrap();
    assert!(
        calls[..append].contains(&IoOp::Rename),
        "the append follows the move: {calls:?}"
    );

    let tmp = tempfile::tempdir().unwrap();
    let fault = FaultIo::passthrough();
    let mail = open(tmp.path(), fault.clone(), &clock);
    mail.send(&notify(ID, "bob")).unwrap();
    fault.set(Fault::nth(append as u64 + 1, EIO));
    let outcome = mail.archive(&mid(ID)).unwrap();
    assert!(
        matches!(outcome, ArchiveOutcome::Archived(_)),
        "{outcome:?}"
    );
    assert_eq!(fault.injected(), 1);
    fault.disarm();
    assert!(in_archive(&mail, ID));
    let archived = |m: &Mail| {
        m.read_manifest()
            .unwrap()
            .into_iter()
            .filter(|e| crate::event_name(e) == "archived")
            .collect::<Vec<_>>()
    };
    assert!(archived(&mail).is_empty(), "the append failed");

    // Within the grace of its sending it is in flight: reported, not repaired.
    let report = mail.doctor(DoctorMode::Fix).unwrap();
    assert!(
        matches!(&report.findings[..], [f] if matches!(f.fault, Defect::InFlight { .. })
            && f.subject.as_deref() == Some(ID)),
        "{:?}",
        report.findings
    );
    assert!(report.findings[0].to_string().contains("`archived`"));
    assert!(archived(&mail).is_empty(), "nothing appended in flight");

    clock.advance(Duration::from_secs(60));
    let check = mail.doctor(DoctorMode::Check).unwrap();
    assert_eq!(
        crate::seen(&check),
        [(
            "messaging-missing-archived-event",
            Some(ID.to_owned()),
            format!(
                "messaging-missing-archived-event: message `{ID}` in archive has no `archived` event"
            )
        )]
    );
    let f = &check.findings[0];
    assert_eq!(
        f.path,
        Some(
            mail.path_of(&mid(ID), &chipset_mail::Location::Archive)
                .into_path_buf()
        )
    );
    assert!(f.fixable);
    assert_eq!(f.code, "messaging-missing-archived-event");
    assert!(f.to_string().contains("no `archived` event"), "{f}");
    assert!(archived(&mail).is_empty(), "Check changes nothing");

    let fixed = mail.doctor(DoctorMode::Fix).unwrap();
    assert_eq!(crate::seen(&fixed), crate::seen(&check));
    match &archived(&mail)[..] {
        [
            chipset_mail::ManifestEvent::Archived {
                id,
                agent: a,
                task: t,
                reply: None,
                reconciled: true,
                ..
            },
        ] => {
            assert_eq!(id, &mid(ID));
            assert_eq!(a, &agent("bob"));
            assert_eq!(t, &task("t1"));
        }
        other => panic!("{other:?}"),
    }
    let again = mail.doctor(DoctorMode::Check).unwrap();
    assert!(again.is_clean(), "{:?}", again.findings);
}

/// A sweep whose `task-swept` append failed after its moves (their commit
/// points) still succeeds, and the doctor reports the by-task folder without
/// its event, appends one (reconciled) with Fix, and is then clean.
#[test]
fn a_sweep_whose_event_append_failed_is_completed_by_the_doctor() {
    let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
    let archived_one = |tmp: &Path, fault: &Arc<FaultIo>| {
        let mail = open(tmp, fault.clone(), &clock);
        mail.send(&notify(ID, "bob")).unwrap();
        drop(mail.archive(&mid(ID)).unwrap());
        mail
    };
    // A dry run finds the calls of the sweep: the append is the last file opened.
    let tmp = tempfile::tempdir().unwrap();
    let fault = FaultIo::passthrough();
    let mail = archived_one(tmp.path(), &fault);
    fault.set(Fault::nth(0, EIO));
    assert_eq!(mail.sweep_task_on_commit(&task("t1")).unwrap().moved, 1);
    let calls = fault.calls();
    let append = calls.iter().rposition(|c| *c == IoOp::Open).unwrap();
    assert!(
        calls[..append].contains(&IoOp::Rename),
        "the append follows the moves: {calls:?}"
    );

    let tmp = tempfile::tempdir().unwrap();
    let fault = FaultIo::passthrough();
    let mail = archived_one(tmp.path(), &fault);
    fault.set(Fault::nth(append as u64 + 1, EIO));
    assert_eq!(mail.sweep_task_on_commit(&task("t1")).unwrap().moved, 1);
    assert_eq!(fault.injected(), 1);
    fault.disarm();
    let swept = |m: &Mail| {
        m.read_manifest()
            .unwrap()
            .into_iter()
            .filter(|e| crate::event_name(e) == "task-swept")
            .collect::<Vec<_>>()
    };
    assert!(swept(&mail).is_empty(), "the append failed");

    // Within the grace of the newest message's sending it is in flight.
    let report = mail.doctor(DoctorMode::Check).unwrap();
    assert!(
        matches!(&report.findings[..], [f] if matches!(f.fault, Defect::InFlight { .. })
            && f.subject.as_deref() == Some(ID)),
        "{:?}",
        report.findings
    );

    clock.advance(Duration::from_secs(60));
    let check = mail.doctor(DoctorMode::Check).unwrap();
    assert_eq!(
        crate::seen(&check),
        [(
            "messaging-missing-swept-event",
            Some(task("t1").to_string()),
            "messaging-missing-swept-event: archive/by-task/t1 holds 1 message(s) but the \
             manifest has no `task-swept` event for it"
                .to_owned()
        )]
    );
    let f = &check.findings[0];
    assert!(f.fixable);
    assert_eq!(f.code, "messaging-missing-swept-event");
    assert!(swept(&mail).is_empty(), "Check changes nothing");

    let fixed = mail.doctor(DoctorMode::Fix).unwrap();
    assert_eq!(crate::seen(&fixed), crate::seen(&check));
    match &swept(&mail)[..] {
        [
            chipset_mail::ManifestEvent::TaskSwept {
                task: t,
                count: 0,
                total: 1,
                reconciled: true,
                ..
            },
        ] => assert_eq!(t, &task("t1")),
        other => panic!("{other:?}"),
    }
    let again = mail.doctor(DoctorMode::Check).unwrap();
    assert!(again.is_clean(), "{:?}", again.findings);
}

/// The real backend, but the publish of `target` first finds `winner`'s bytes
/// there: a concurrent send of the same chosen id that won the race between
/// the send's lookup and its publish. It makes no file without a name (the
/// trait's default), so that the publish is the rename or link it races.
#[derive(Debug)]
pub(crate) struct RaceIo {
    race: std::sync::Mutex<Option<(std::path::PathBuf, Vec<u8>)>>,
}

impl RaceIo {
    /// The real backend whose publish of `target` loses to `winner`.
    pub(crate) fn new(target: std::path::PathBuf, winner: Vec<u8>) -> Arc<Self> {
        Arc::new(RaceIo {
            race: std::sync::Mutex::new(Some((target, winner))),
        })
    }

    /// Whether the race ran.
    pub(crate) fn ran(&self) -> bool {
        self.race.lock().unwrap().is_none()
    }

    fn lose_to(&self, to: &Path) {
        let mut race = self.race.lock().unwrap();
        if race.as_ref().is_some_and(|(target, _)| target == to) {
            let (target, winner) = race.take().unwrap();
            let file = RealIo.create_new(&target, false).unwrap();
            RealIo.write_all(&file, &target, &winner).unwrap();
        }
    }
}

impl IoBackend for RaceIo {
    fn rename_noreplace(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        self.lose_to(to);
        RealIo.rename_noreplace(from, to)
    }
    fn hard_link(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        self.lose_to(to);
        RealIo.hard_link(from, to)
    }
}

/// A send (alone or in a batch) with a chosen id that loses the race to a
/// concurrent send of the same id (the file appears between its lookup and
/// its publish) returns the winner's delivery when the content is the same,
/// and IdTaken when it is not.
#[test]
fn a_send_that_loses_the_race_to_the_same_message_returns_the_first_delivery() {
    let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
    // The winner's bytes: the same draft sent at the same time elsewhere.
    let elsewhere = tempfile::tempdir().unwrap();
    let first = open(
        elsewhere.path(),
        std::sync::Arc::new(chipset_store::RealIo),
        &clock,
    );
    first.send(&notify(ID, "bob")).unwrap();
    let name = format!("{ID}.json");
    let read = |mail: &Mail| {
        let path = mail.inbox_dir(&agent("bob")).join(&name).unwrap();
        mail.state().read_bytes(&path).unwrap().value().unwrap()
    };
    let same = read(&first);
    let mut other: serde_json::Value = serde_json::from_slice(&same).unwrap();
    other["body"] = serde_json::json!("another body");
    let other = serde_json::to_vec(&other).unwrap();

    let winners = [(same, true), (other, false)];
    for ((winner, same_content), batch) in winners.iter().flat_map(|w| [(w, false), (w, true)]) {
        let tmp = tempfile::tempdir().unwrap();
        let io = Arc::new(RaceIo {
            race: std::sync::Mutex::new(None),
        });
        let mail = open(tmp.path(), io.clone(), &clock);
        let target = mail
            .inbox_dir(&agent("bob"))
            .join(&name)
            .unwrap()
            .into_path_buf();
        *io.race.lock().unwrap() = Some((target.clone(), winner.clone()));
        let sent = if batch {
            mail.send_batch(&[notify(ID, "bob")]).map(|mut sent| {
                assert_eq!(sent.len(), 1);
                sent.remove(0)
            })
        } else {
            mail.send(&notify(ID, "bob"))
        };
        assert!(io.race.lock().unwrap().is_none(), "the race did not run");
        // The winner's file stays as it was written.
        assert_eq!(&read(&mail), winner);
        if *same_content {
            let sent = sent.unwrap();
            assert_eq!(sent.id.as_str(), ID);
            assert_eq!(sent.body, "hello");
        } else {
            match sent {
                Err(Error::IdTaken { id, .. }) => assert_eq!(id.as_str(), ID),
                other => panic!("expected IdTaken, got {other:?}"),
            }
        }
        assert_eq!(copies(tmp.path(), ID), 1);
    }
}

/// A batch whose second draft loses the race to a concurrent send of its
/// chosen id with other content, after its first draft was published: the
/// call says what it delivered (an unknown outcome, never a plain
/// refusal) and keeps the refusal as its cause; the retry sends nothing
/// again and is the plain refusal.
#[test]
fn a_batch_refused_after_publishing_a_draft_names_the_delivered_one() {
    let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
    let elsewhere = tempfile::tempdir().unwrap();
    let theirs = open(elsewhere.path(), Arc::new(RealIo), &clock);
    let other = NewMessage::notify(agent("alice"), agent("bob"), task("t1"), "status", "theirs");
    theirs.send(&other.with_id(mid(ID2))).unwrap();
    let winner = fs::read(elsewhere.path().join(format!("mail/inbox/bob/{ID2}.json"))).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join(format!("mail/inbox/bob/{ID2}.json"));
    let io = RaceIo::new(target, winner);
    let mail = open(tmp.path(), io.clone(), &clock);
    let batch = [notify(ID, "ann"), notify(ID2, "bob")];
    let err = mail.send_batch(&batch).unwrap_err();
    assert!(io.ran(), "the race did not run");
    assert!(err.is_outcome_unknown(), "{err:?}");
    let Error::PartlySent { ids, source } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(*ids, [mid(ID)]);
    assert!(
        matches!(&**source, Error::IdTaken { id, .. } if id.as_str() == ID2),
        "{source:?}"
    );
    assert_eq!(mail.find(&mid(ID)).unwrap().unwrap().body, "hello");
    // Nothing is sent twice; with nothing new delivered, the retry is
    // the refusal itself.
    let again = mail.send_batch(&batch).unwrap_err();
    assert!(matches!(again, Error::IdTaken { .. }), "{again:?}");
    assert_eq!(copies(tmp.path(), ID), 1);
}
