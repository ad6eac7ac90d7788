//! The lease doctor on both backends from one body (issue 30): a table
//! damaged through the backend (the directory's file, or the server's row)
//! is found, moved aside (never deleted) and restarted with tokens above
//! any granted before.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chipset_backend::testing::{Intercept, Intercepted, Op};
use chipset_backend::{Backend, Dir};
use chipset_lease::{Error, Leases};
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

/// Fails the `n`th change a handle makes (from 1), as a server that goes
/// away in the middle of a repair.
#[derive(Debug)]
struct FailNth {
    n: u64,
    seen: AtomicU64,
}

impl Intercept for FailNth {
    fn before(&self, _inner: &dyn Backend, op: Op<'_>) -> chipset_backend::Result<()> {
        let change = matches!(
            op,
            Op::Create(_)
                | Op::Replace(_)
                | Op::Put(_)
                | Op::Remove(_)
                | Op::MoveNew(..)
                | Op::Transact(_)
        );
        if change && self.seen.fetch_add(1, Ordering::SeqCst) + 1 == self.n {
            return Err(chipset_backend::Error::Config {
                why: "injected: the server went away".to_owned(),
            });
        }
        Ok(())
    }
}

/// A repair on a server that fails at any of its changes never leaves the
/// table missing (an empty table granting token 1 again): a later Fix
/// finishes it, and the next token is above every one granted before.
#[test]
fn a_failed_repair_on_postgres_never_lets_tokens_go_back() {
    for n in 1..=3 {
        let Some(place) = Place::pg(&format!("a_failed_lease_repair_{n}")) else {
            return;
        };
        let t = TempState::new();
        let leases = place.open(&t.state);
        let raw = place.backend(&t.state);
        let granted = leases
            .acquire(&exclusive(&agent("alice"), &["src"]))
            .unwrap()
            .lease
            .token;
        let key = Dir::new("leases").unwrap().key("table.json").unwrap();
        raw.put(&key, b"{ not json").unwrap();
        let failing = Leases::with_backend(
            t.state.clone(),
            Arc::new(Intercepted {
                inner: place.seam().unwrap(),
                by: FailNth {
                    n,
                    seen: AtomicU64::new(0),
                },
            }),
        );
        let first = failing.doctor(DoctorMode::Fix);
        let later = leases.doctor(DoctorMode::Fix).unwrap();
        assert!(
            leases.doctor(DoctorMode::Check).unwrap().is_clean(),
            "change {n}: {first:?}, then {later:?}"
        );
        let next = leases
            .acquire(&exclusive(&agent("bob"), &["other"]))
            .unwrap()
            .lease;
        assert!(
            next.token > granted,
            "change {n} failed ({first:?}): token {} granted again",
            next.token
        );
    }
}
