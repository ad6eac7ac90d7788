//! The lease doctor on both backends from one body (issue 30): a table
//! damaged through the backend (the directory's file, or the server's row)
//! is found, moved aside (never deleted) and restarted with tokens above
//! any granted before.

use chipset_backend::Dir;
use chipset_lease::Error;
use chipset_store::{Action, DoctorMode};
use chipset_testkit::TempState;

use crate::place::{Place, table};
use crate::{agent, exclusive};

fn corrupt_table_is_moved_aside(place: &Place) {
    let t = TempState::new();
    let leases = place.open(&t.state);
    let raw = place.backend(&t.state);
    let _ = leases
        .acquire(&exclusive(&agent("alice"), &["src"]))
        .unwrap();
    assert!(leases.doctor(DoctorMode::Check).unwrap().is_clean());
    let dir = Dir::new("leases").unwrap();
    raw.put(&dir.key("table.json").unwrap(), b"{ not json")
        .unwrap();
    assert!(matches!(
        leases.check(&agent("bob"), &["src/x"]),
        Err(Error::Corrupt { .. })
    ));

    let check = leases.doctor(DoctorMode::Check).unwrap();
    assert_eq!(check.findings.len(), 1, "{check:#?}");
    assert_eq!(check.findings[0].code, "lease-table-corrupt");
    assert_eq!(table(raw.as_ref()).unwrap(), b"{ not json");

    let fixed = leases.doctor(DoctorMode::Fix).unwrap();
    assert_eq!(fixed.open(), 0, "{fixed:#?}");
    assert!(
        fixed.findings[0]
            .actions
            .iter()
            .any(|a| matches!(a, Action::Quarantined { .. })),
        "{fixed:#?}"
    );
    if place.is_pg() {
        let aside = raw.list(&dir.join("quarantine").unwrap()).unwrap();
        assert_eq!(aside.len(), 1, "{aside:?}");
        let bytes = raw
            .read(&dir.join("quarantine").unwrap().key(&aside[0]).unwrap())
            .unwrap()
            .unwrap()
            .value;
        assert_eq!(bytes, b"{ not json");
    }
    assert!(leases.list().unwrap().is_empty());
    let next = leases
        .acquire(&exclusive(&agent("bob"), &["other"]))
        .unwrap()
        .lease;
    assert!(
        next.token > 1_000_000,
        "tokens restart above: {}",
        next.token
    );
    assert!(leases.doctor(DoctorMode::Check).unwrap().is_clean());
}

#[test]
fn corrupt_table_is_moved_aside_on_a_directory() {
    corrupt_table_is_moved_aside(&Place::fs());
}

#[test]
fn corrupt_table_is_moved_aside_on_postgres() {
    if let Some(place) = Place::pg("corrupt_table_is_moved_aside_on_postgres") {
        corrupt_table_is_moved_aside(&place);
    }
}
