//! The counts, the doctor and the inbox wait (issue 30), from the same
//! bodies on a directory and, when `CHIPSET_TEST_PG` names a server, on
//! PostgreSQL (the server's own doctor checks are `server_doctor.rs`).

use std::thread;
use std::time::{Duration, Instant};

use chipset_backend::Wake;
use chipset_mail::{ArchiveOutcome, Location, Mail, NewMessage};
use chipset_store::DoctorMode;
use chipset_testkit::TempState;

use crate::place::Place;
use crate::{agent, request, task};

chipset_backend::both!(
    crate::place::Place;
    inbox_counts_count_every_inbox,
    doctor_on_clean_mail_finds_nothing,
    an_inbox_wait_wakes_on_a_delivery_from_another_handle,
);

fn open(place: &Place) -> (TempState, Mail) {
    let tmp = TempState::new();
    let mail = place.open(&tmp.state);
    (tmp, mail)
}

fn note(to: &str, t: &str) -> NewMessage {
    NewMessage::notify(agent("a"), agent(to), task(t), "note", "n")
}

fn inbox_counts_count_every_inbox(place: &Place) {
    let (tmp, mail) = open(place);
    assert!(mail.inbox_counts().unwrap().is_empty());
    mail.send(&request(
        "critic",
        "exec",
        "t1",
        "dead-code",
        "did you mean it?",
    ))
    .unwrap();
    mail.send(&note("b", "t1")).unwrap();
    let n2 = mail.send(&note("b", "t2")).unwrap();
    let n3 = mail.send(&note("b", "t2")).unwrap();
    assert!(matches!(
        mail.archive(&n3.id).unwrap(),
        ArchiveOutcome::Archived(_)
    ));
    // Another handle counts the same.
    let other = place.open(&tmp.state);
    let c = other.inbox_counts().unwrap();
    let inbox: Vec<_> = c.iter().map(|(a, n)| (a.as_str(), *n)).collect();
    assert_eq!(inbox, [("b", 2), ("exec", 1)]);
    assert_eq!(other.locate(&n3.id).unwrap(), Some(Location::Archive));
    mail.sweep_task_on_commit(&task("t2")).unwrap();
    let c = other.inbox_counts().unwrap();
    let inbox: Vec<_> = c.iter().map(|(a, n)| (a.as_str(), *n)).collect();
    assert_eq!(inbox, [("b", 1), ("exec", 1)]);
    // The archived note and the one left in the inbox went with their task.
    let by_task = Some(Location::ByTask(task("t2")));
    assert_eq!(other.locate(&n3.id).unwrap(), by_task);
    assert_eq!(other.locate(&n2.id).unwrap(), by_task);
}

fn doctor_on_clean_mail_finds_nothing(place: &Place) {
    let (_tmp, mail) = open(place);
    mail.send(&note("b", "t1")).unwrap();
    let n = mail.send(&note("b", "t2")).unwrap();
    let _ = mail.archive(&n.id).unwrap();
    mail.sweep_task_on_commit(&task("t2")).unwrap();
    for mode in [DoctorMode::Check, DoctorMode::Fix] {
        let report = mail.doctor(mode).unwrap();
        assert!(report.is_clean(), "{report:?}");
        assert_eq!(report.scanned, 2, "{report:?}");
    }
}

fn an_inbox_wait_wakes_on_a_delivery_from_another_handle(place: &Place) {
    let (tmp, mail) = open(place);
    let mut wait = mail
        .watch_inbox(&agent("b"), Duration::from_secs(30))
        .unwrap();
    let other = place.open(&tmp.state);
    let sender = thread::spawn(move || {
        thread::sleep(Duration::from_millis(100));
        other.send(&note("b", "t1")).unwrap();
    });
    let start = Instant::now();
    let mut woke = None;
    while start.elapsed() < Duration::from_secs(10) {
        if wait.wait(Duration::from_secs(10)).unwrap() == Wake::Changed
            && mail.inbox_len(&agent("b")).unwrap() == 1
        {
            woke = Some(start.elapsed());
            break;
        }
    }
    sender.join().unwrap();
    let woke = woke.expect("the delivery from another handle wakes the wait");
    assert!(woke < Duration::from_secs(5), "woke after {woke:?}");
}
