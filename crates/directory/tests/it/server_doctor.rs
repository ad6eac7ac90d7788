//! The directory's doctor on both backends from one body (issue 30): a
//! profile damaged through the backend (the directory's file, or the
//! server's row) and a stray name are found; the fix moves the profile
//! aside (never deletes it) and leaves the stray for a person.

use chipset_backend::Dir;
use chipset_directory::Registration;
use chipset_store::{DoctorMode, ReadOutcome};
use chipset_testkit::TempState;

use crate::agent;
use crate::place::Place;

fn corrupt_profile_is_moved_aside(place: &Place) {
    let t = TempState::new();
    let dir = place.open(&t.state);
    let raw = place.backend(&t.state);
    dir.register(&agent("a"), &Registration::new()).unwrap();
    dir.register(&agent("b"), &Registration::new()).unwrap();
    let agents = Dir::new("agents").unwrap();
    raw.put(&agents.key("b.json").unwrap(), b"{\"name\": ")
        .unwrap();
    raw.put(&agents.key("notes.txt").unwrap(), b"hi").unwrap();

    let check = dir.doctor(DoctorMode::Check).unwrap();
    let codes: Vec<&str> = check.findings.iter().map(|f| f.code).collect();
    assert_eq!(codes, ["directory-profile-corrupt", "directory-stray"]);
    assert_eq!(check.scanned, 2);
    assert!(raw.read(&agents.key("b.json").unwrap()).unwrap().is_some());

    let fix = dir.doctor(DoctorMode::Fix).unwrap();
    assert!(fix.findings[0].is_fixed(), "{:?}", fix.findings[0]);
    assert!(raw.read(&agents.key("b.json").unwrap()).unwrap().is_none());
    assert!(matches!(
        dir.read(&agent("b")).unwrap(),
        ReadOutcome::Missing
    ));
    if place.is_pg() {
        let aside = raw.list(&agents.join("quarantine").unwrap()).unwrap();
        assert_eq!(aside.len(), 1, "{aside:?}");
        assert!(aside[0].ends_with("-b.json"), "{aside:?}");
    }
    let again = dir.doctor(DoctorMode::Check).unwrap();
    let codes: Vec<&str> = again.findings.iter().map(|f| f.code).collect();
    assert_eq!(codes, ["directory-stray"], "a stray is left for a person");
}

#[test]
fn corrupt_profile_is_moved_aside_on_a_directory() {
    corrupt_profile_is_moved_aside(&Place::fs());
}

#[test]
fn corrupt_profile_is_moved_aside_on_postgres() {
    if let Some(place) = Place::pg("corrupt_profile_is_moved_aside_on_postgres") {
        corrupt_profile_is_moved_aside(&place);
    }
}
