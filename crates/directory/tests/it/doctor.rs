//! `Directory::doctor`: corrupt profiles are found and moved aside with
//! Fix, stray names are reported and left.

use std::fs;

use chipset_directory::Registration;
use chipset_store::{DoctorMode, ReadOutcome};

use crate::{agent, env};

#[test]
fn corrupt_profiles_are_quarantined_and_strays_reported() {
    let e = env();
    e.dir.register(&agent("a"), &Registration::new()).unwrap();
    e.dir.register(&agent("b"), &Registration::new()).unwrap();
    let agents = e.state.root().join("agents");
    fs::write(agents.join("b.json"), b"{\"name\": ").unwrap();
    fs::write(agents.join("notes.txt"), b"hi").unwrap();
    let check = e.dir.doctor(DoctorMode::Check).unwrap();
    let codes: Vec<&str> = check.findings.iter().map(|f| f.code).collect();
    assert_eq!(codes, ["directory-profile-corrupt", "directory-stray"]);
    assert_eq!(check.scanned, 2);
    assert!(agents.join("b.json").exists(), "check changes nothing");
    let fix = e.dir.doctor(DoctorMode::Fix).unwrap();
    assert!(fix.findings[0].is_fixed(), "{:?}", fix.findings[0]);
    assert!(!agents.join("b.json").exists());
    assert!(
        agents.join("notes.txt").exists(),
        "a stray is left for a person"
    );
    assert!(matches!(
        e.dir.read(&agent("b")).unwrap(),
        ReadOutcome::Missing
    ));
    let again = e.dir.doctor(DoctorMode::Check).unwrap();
    let codes: Vec<&str> = again.findings.iter().map(|f| f.code).collect();
    assert_eq!(codes, ["directory-stray"]);
}
