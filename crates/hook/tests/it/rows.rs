//! The listing, the doctor and the wake-ups over every hook, from the same
//! bodies on a directory and, when `CHIPSET_TEST_PG` names a server, on
//! PostgreSQL (issue 30). Values are planted through the seam, never as
//! files, so each body means the same on both; the doctor's fixing of a
//! corrupt file stays in `files.rs`, and of a corrupt row is checked here.

use std::thread;
use std::time::{Duration, Instant};

use chipset_backend::{Dir, Wake};
use chipset_hook::HookStatus;
use chipset_store::DoctorMode;

use crate::ReadExt;
use crate::place::Place;
use crate::{agent, bead};

macro_rules! both {
    ($($name:ident),* $(,)?) => {
        mod fs {
            $(
                #[test]
                fn $name() {
                    super::$name(&super::Place::fs());
                }
            )*
        }
        mod pg {
            $(
                #[test]
                fn $name() {
                    if let Some(place) = super::Place::pg(stringify!($name)) {
                        super::$name(&place);
                    }
                }
            )*
        }
    };
}

both!(
    listing_shows_every_hook_by_agent,
    doctor_reports_bad_values_and_strays,
    a_wait_wakes_on_a_change_from_another_handle,
);

fn listing_shows_every_hook_by_agent(p: &Place) {
    let h = p.hooks();
    assert!(h.list().unwrap().is_empty());
    let (a, b, c) = (agent("alpha"), agent("bravo"), agent("charlie"));
    let held = h.assign(&b, bead("gt-2"), "two", None).unwrap();
    h.activate(&held).unwrap();
    h.assign(&a, bead("gt-1"), "one", None).unwrap();
    p.plant("charlie.json", b"{\"agent_id\": \"charlie\", \"sta");
    p.plant("notes.txt", b"not a hook");
    // Another handle sees the same listing, in agent order.
    let listed = p.hooks().list().unwrap();
    let statuses: Vec<_> = listed
        .iter()
        .map(|(k, v)| (k.clone(), v.status()))
        .collect();
    assert_eq!(
        statuses,
        [
            (a.clone(), Some(HookStatus::Pending)),
            (b.clone(), Some(HookStatus::Active)),
            (c.clone(), None),
        ]
    );
    assert!(listed[&c].corruption().is_some(), "{:?}", listed[&c]);
    // Each entry is what a read of that hook returns.
    for (agent, read) in &listed {
        assert_eq!(&h.read(agent).unwrap(), read, "{agent}");
    }
}

fn doctor_reports_bad_values_and_strays(p: &Place) {
    let h = p.hooks();
    let a = agent("alpha");
    h.assign(&a, bead("gt-1"), "one", None).unwrap();
    let bad: [(&str, &[u8]); 3] = [
        ("c1.json", b"{\"agent_id\": \"c1\", \"sta"),
        ("c2.json", b"[1, 2, 3]"),
        // A legal hook of another agent: acting on it would act on the wrong work.
        ("c3.json", &[]),
    ];
    for (name, bytes) in bad {
        if bytes.is_empty() {
            let other = p.hooks();
            other
                .assign(&agent("zulu"), bead("gt-9"), "z", None)
                .unwrap();
            let key = Dir::new("hooks").unwrap().key("zulu.json").unwrap();
            let zulu = p.backend().read(&key).unwrap().unwrap().value;
            p.plant(name, &zulu);
        } else {
            p.plant(name, bytes);
        }
    }
    p.plant("notes.txt", b"whatever");
    let report = h.doctor(DoctorMode::Check).unwrap();
    assert_eq!(report.scanned, 5, "{report:?}");
    let mut found: Vec<(String, Option<String>)> = report
        .findings
        .iter()
        .map(|f| (f.code.to_string(), f.subject.clone()))
        .collect();
    found.sort();
    assert_eq!(
        found,
        [
            ("hook-corrupt".to_owned(), Some("c1".to_owned())),
            ("hook-corrupt".to_owned(), Some("c2".to_owned())),
            ("hook-corrupt".to_owned(), Some("c3".to_owned())),
            ("hook-stray".to_owned(), None),
        ],
        "{report:?}"
    );
    // A check changes nothing; the good hook is untouched.
    assert_eq!(h.read(&a).unwrap().status(), Some(HookStatus::Pending));
    assert!(h.read(&agent("c1")).unwrap().corruption().is_some());
}

fn a_wait_wakes_on_a_change_from_another_handle(p: &Place) {
    let h = p.hooks();
    let mut wait = h.watch(Duration::from_secs(30)).unwrap();
    let other = p.hooks();
    let writer = thread::spawn(move || {
        thread::sleep(Duration::from_millis(100));
        other
            .assign(&agent("alpha"), bead("gt-1"), "one", None)
            .unwrap();
    });
    let start = Instant::now();
    let mut woke = None;
    while start.elapsed() < Duration::from_secs(10) {
        match wait.wait(Duration::from_secs(10)).unwrap() {
            Wake::Changed => {
                if h.read(&agent("alpha")).unwrap().status() == Some(HookStatus::Pending) {
                    woke = Some(start.elapsed());
                    break;
                }
            }
            Wake::Rescan | Wake::TimedOut => {}
        }
    }
    writer.join().unwrap();
    let woke = woke.expect("the assign from another handle wakes the wait");
    assert!(woke < Duration::from_secs(5), "woke after {woke:?}");
}

/// On a server the doctor's fix moves a corrupt row into
/// `hooks/quarantine/` (byte for byte, never deleted) and resets the hook
/// to empty, in one transaction, as it moves a corrupt file aside on a
/// directory; nothing is written to the local root.
#[test]
fn server_doctor_fix_moves_a_corrupt_row_aside() {
    let Some(p) = Place::pg("server_doctor_fix_moves_a_corrupt_row_aside") else {
        return;
    };
    let h = p.hooks();
    let bytes = b"{\"agent_id\": \"c1\", \"sta";
    p.plant("c1.json", bytes);
    p.plant("c2.json", b"\xff\xfe not even utf-8");
    let check = h.doctor(DoctorMode::Check).unwrap();
    assert!(
        check
            .findings
            .iter()
            .all(|f| f.fixable && f.actions.is_empty())
    );
    let key = Dir::new("hooks").unwrap().key("c1.json").unwrap();
    assert_eq!(p.backend().read(&key).unwrap().unwrap().value, bytes);
    let report = h.doctor(DoctorMode::Fix).unwrap();
    let corrupt: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.code == "hook-corrupt")
        .collect();
    assert_eq!(corrupt.len(), 2, "{report:?}");
    assert!(corrupt.iter().all(|f| f.is_fixed()), "{report:?}");
    assert_eq!(
        h.read(&agent("c1")).unwrap().status(),
        Some(HookStatus::Empty)
    );
    let aside = Dir::new("hooks").unwrap().join("quarantine").unwrap();
    let names = p.backend().list(&aside).unwrap();
    assert_eq!(names.len(), 2, "{names:?}");
    let c1 = names.iter().find(|n| n.ends_with("-c1.json")).unwrap();
    let kept = p.backend().read(&aside.key(c1).unwrap()).unwrap().unwrap();
    assert_eq!(kept.value, bytes, "moved byte for byte");
    assert!(h.doctor(DoctorMode::Check).unwrap().is_clean());
    // Nothing was written to the local root.
    assert!(!p.t.state.root().join("hooks").exists());
}
