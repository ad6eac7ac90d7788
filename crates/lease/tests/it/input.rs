//! Bad input: a clear, typed error, and nothing written.

use std::time::Duration;

use chipset_lease::{Error, MAX_PATHS};

use crate::{agent, exclusive, setup, table_bytes};

fn refused(paths: &[&str], ttl: Duration) -> Error {
    let s = setup();
    let a = agent("alice");
    let _ = s.leases.acquire(&exclusive(&a, &["keep"])).unwrap();
    let before = table_bytes(&s);
    let err = s
        .leases
        .acquire(&exclusive(&a, paths).with_ttl(ttl))
        .unwrap_err();
    assert_eq!(table_bytes(&s), before, "{err}");
    err
}

const HOUR: Duration = Duration::from_secs(3600);

#[test]
fn paths_escaping_the_root_are_refused() {
    for bad in [
        "../x",
        "src/../../etc",
        "/etc/passwd",
        "",
        ".",
        "a\\b",
        "src/[oops",
    ] {
        let err = refused(&["ok", bad], HOUR);
        assert!(matches!(err, Error::InvalidPath { .. }), "{bad:?}: {err}");
    }
}

#[test]
fn ttls_out_of_bounds_are_refused() {
    for ttl in [
        Duration::ZERO,
        Duration::from_millis(999),
        Duration::from_secs(10 * 365 * 86_400),
    ] {
        let err = refused(&["x"], ttl);
        assert!(matches!(err, Error::Ttl { .. }), "{ttl:?}: {err}");
    }
    let s = setup();
    let a = agent("alice");
    let l = s.leases.acquire(&exclusive(&a, &["x"])).unwrap().lease;
    assert!(matches!(
        s.leases.renew(&a, l.token, Duration::ZERO),
        Err(Error::Ttl { .. })
    ));
}

#[test]
fn no_paths_and_too_many_paths_are_refused() {
    assert!(matches!(refused(&[], HOUR), Error::NoPaths));
    let many: Vec<String> = (0..10_000).map(|i| format!("f{i}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let err = refused(&many, HOUR);
    assert!(
        matches!(
            err,
            Error::TooManyPaths {
                count: 10_000,
                max: MAX_PATHS
            }
        ),
        "{err}"
    );
}

#[test]
fn a_reason_too_long_is_refused() {
    let s = setup();
    let a = agent("alice");
    let req = exclusive(&a, &["x"]).with_reason("r".repeat(2000));
    assert!(matches!(s.leases.acquire(&req), Err(Error::Reason(_))));
    assert_eq!(table_bytes(&s), None);
}

#[test]
fn a_check_of_a_path_outside_the_root_is_an_error() {
    let s = setup();
    assert!(matches!(
        s.leases.check(&agent("a"), &["../x"]),
        Err(Error::InvalidPath { .. })
    ));
}

#[test]
fn a_table_over_the_read_cap_is_refused() {
    let (tmp, _clock) = chipset_testkit::TempState::manual_with(chipset_store::StateOptions {
        read_cap: 4096,
        ..chipset_store::StateOptions::default()
    });
    let leases = chipset_lease::Leases::new(tmp.state.clone());
    let a = agent("alice");
    let mut n = 0;
    let err = loop {
        match leases.acquire(&exclusive(&a, &[&format!("dir{n}/{}", "x".repeat(100))])) {
            Ok(_) => n += 1,
            Err(e) => break e,
        }
    };
    assert!(matches!(err, Error::TableFull { cap: 4096, .. }), "{err}");
    assert_eq!(leases.list().unwrap().len(), n);
}
