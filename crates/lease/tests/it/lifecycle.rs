//! Grants, conflicts, expiry, fencing, retries and forced releases.

use std::time::Duration;

use chipset_lease::{Error, LeaseMode, Released};

use crate::{agent, exclusive, setup, shared, table_bytes};
use chipset_store::{Classify, ErrorKind};

#[test]
fn a_conflict_names_every_conflicting_lease_and_changes_nothing() {
    let s = setup();
    let (a, b, c) = (agent("alice"), agent("bob"), agent("carol"));
    let la = s
        .leases
        .acquire(&exclusive(&a, &["src/auth/**"]))
        .unwrap()
        .lease;
    let lb = s.leases.acquire(&shared(&b, &["docs"])).unwrap().lease;
    let before = table_bytes(&s);
    let err = s
        .leases
        .acquire(&exclusive(
            &c,
            &["src/auth/login.rs", "docs/a.md", "README.md"],
        ))
        .unwrap_err();
    let Error::Conflict { conflicts } = &err else {
        panic!("{err}")
    };
    let tokens: Vec<u64> = conflicts.iter().map(|l| l.token).collect();
    assert_eq!(tokens, [la.token, lb.token]);
    assert!(
        err.to_string()
            .contains("`alice` holds exclusive src/auth/**"),
        "{err}"
    );
    assert_eq!(table_bytes(&s), before);
}

#[test]
fn shared_leases_coexist_and_exclusive_ones_do_not() {
    let s = setup();
    let (a, b) = (agent("alice"), agent("bob"));
    let _ = s.leases.acquire(&shared(&a, &["src"])).unwrap();
    let _ = s.leases.acquire(&shared(&b, &["src/lib.rs"])).unwrap();
    assert!(s.leases.acquire(&exclusive(&b, &["src/main.rs"])).is_err());
    // An agent's own leases never conflict.
    let _ = s.leases.acquire(&exclusive(&a, &["src/main.rs"])).unwrap();
    assert_eq!(s.leases.live().unwrap().len(), 3);
}

#[test]
fn an_expired_lease_never_blocks_and_its_holder_is_fenced() {
    let s = setup();
    let (a, b) = (agent("alice"), agent("bob"));
    let old = s
        .leases
        .acquire(&exclusive(&a, &["src"]).with_ttl(Duration::from_secs(60)))
        .unwrap()
        .lease;
    s.clock.advance(Duration::from_secs(61));
    assert!(s.leases.check(&b, &["src/x.rs"]).unwrap().is_empty());
    let new = s
        .leases
        .acquire(&exclusive(&b, &["src/x.rs"]))
        .unwrap()
        .lease;
    assert!(new.token > old.token);
    // Alice's late renew cannot extend her lease over Bob's.
    let err = s
        .leases
        .renew(&a, old.token, Duration::from_secs(600))
        .unwrap_err();
    assert!(
        matches!(err, Error::Fenced { token } if token == old.token),
        "{err}"
    );
    assert_eq!(
        s.leases.check(&a, &["src/x.rs"]).unwrap()[0].lease.holder,
        b
    );
}

#[test]
fn an_expired_lease_nobody_took_can_be_renewed() {
    let s = setup();
    let a = agent("alice");
    let l = s
        .leases
        .acquire(&exclusive(&a, &["src"]).with_ttl(Duration::from_secs(60)))
        .unwrap()
        .lease;
    s.clock.advance(Duration::from_secs(120));
    let renewed = s
        .leases
        .renew(&a, l.token, Duration::from_secs(60))
        .unwrap();
    assert_eq!(renewed.token, l.token);
    assert!(renewed.is_live(s.tmp.state.now()));
}

#[test]
fn renew_and_release_check_the_holder_and_release_is_retry_safe() {
    let s = setup();
    let (a, b) = (agent("alice"), agent("bob"));
    let l = s.leases.acquire(&exclusive(&a, &["x"])).unwrap().lease;
    assert!(matches!(
        s.leases.renew(&b, l.token, Duration::from_secs(5)),
        Err(Error::NotHolder { .. })
    ));
    assert!(matches!(
        s.leases.release(&b, l.token),
        Err(Error::NotHolder { .. })
    ));
    let before = s.tmp.state.now();
    s.clock.advance(Duration::from_secs(10));
    let r = s.leases.renew(&a, l.token, Duration::from_secs(5)).unwrap();
    assert_eq!(r.expires_at, before + Duration::from_secs(15));
    assert!(matches!(
        s.leases.release(&a, l.token).unwrap(),
        Released::Released(_)
    ));
    assert_eq!(
        s.leases.release(&a, l.token).unwrap(),
        Released::AlreadyGone
    );
    assert!(matches!(
        s.leases.renew(&a, l.token, Duration::from_secs(5)),
        Err(Error::Fenced { .. })
    ));
}

/// A token no grant has given (a mistyped one) is refused by release,
/// renew and a forced release, and changes nothing: it never reads as a
/// lease released while the real one goes on blocking others.
#[test]
fn a_token_never_granted_is_refused_not_taken_as_released() {
    let s = setup();
    let a = agent("alice");
    let l = s.leases.acquire(&exclusive(&a, &["x"])).unwrap().lease;
    let before = table_bytes(&s);
    assert!(before.is_some());
    for token in [0, l.token + 1, 4242] {
        let never = |r: Result<_, Error>| matches!(r, Err(Error::NeverGranted { token: t, next }) if t == token && next == l.token + 1);
        assert!(never(s.leases.release(&a, token).map(drop)), "{token}");
        assert!(
            never(s.leases.renew(&a, token, Duration::from_secs(5)).map(drop)),
            "{token}"
        );
        assert!(
            never(s.leases.force_release(&a, token, "why").map(drop)),
            "{token}"
        );
        assert_eq!(
            Error::NeverGranted { token, next: 1 }.kind(),
            ErrorKind::Invalid
        );
    }
    assert_eq!(table_bytes(&s), before, "nothing written");
    assert_eq!(s.leases.list().unwrap(), [l]);
}

#[test]
fn a_retried_acquire_returns_the_same_lease() {
    let s = setup();
    let a = agent("alice");
    let req = exclusive(&a, &["src/a.rs", "./src/a.rs", "src/b.rs"]).with_reason("fix");
    let first = s.leases.acquire(&req).unwrap();
    let again = s.leases.acquire(&req).unwrap();
    assert!(!first.existing && again.existing);
    assert_eq!(first.lease, again.lease);
    assert_eq!(first.lease.paths.len(), 2, "duplicates are dropped");
    assert_eq!(s.leases.list().unwrap().len(), 1);
}

#[test]
fn tokens_only_increase_across_releases_and_handles() {
    let s = setup();
    let a = agent("alice");
    let mut last = 0;
    for n in 0..5 {
        let l = s
            .leases
            .acquire(&exclusive(&a, &[&format!("f{n}")]))
            .unwrap()
            .lease;
        assert!(l.token > last);
        last = l.token;
        let _ = s.leases.release(&a, l.token).unwrap();
    }
    let other = chipset_lease::Leases::new(s.tmp.state.clone());
    assert!(other.acquire(&exclusive(&a, &["g"])).unwrap().lease.token > last);
}

#[test]
fn a_forced_release_needs_a_reason_and_mails_the_holder() {
    let s = setup();
    let (a, b) = (agent("alice"), agent("bob"));
    let l = s.leases.acquire(&exclusive(&a, &["src"])).unwrap().lease;
    assert!(matches!(
        s.leases.force_release(&b, l.token, " "),
        Err(Error::Reason(_))
    ));
    let r = s
        .leases
        .force_release(&b, l.token, "alice crashed")
        .unwrap();
    assert!(matches!(r, Released::Released(_)));
    assert!(s.leases.list().unwrap().is_empty());
    let mail = chipset_mail::Mail::new(s.tmp.state.clone());
    let inbox = mail.inbox(&a).unwrap();
    assert_eq!(inbox.len(), 1);
    assert_eq!(inbox[0].subject, "lease-force-released");
    assert!(inbox[0].body.contains("alice crashed"));
    // A retry finds nothing to release and sends nothing more.
    assert_eq!(
        s.leases.force_release(&b, l.token, "again").unwrap(),
        Released::AlreadyGone
    );
    assert_eq!(mail.inbox(&a).unwrap().len(), 1);
}

#[test]
fn check_is_exact_and_ignores_shared_and_own_leases() {
    let s = setup();
    let (a, b) = (agent("alice"), agent("bob"));
    let _ = s.leases.acquire(&exclusive(&a, &["src/*.rs"])).unwrap();
    let _ = s.leases.acquire(&shared(&a, &["docs"])).unwrap();
    let blocked = s
        .leases
        .check(
            &b,
            &["src/lib.rs", "src/auth/x.rs", "docs/a.md", "README.md"],
        )
        .unwrap();
    let paths: Vec<&str> = blocked.iter().map(|x| x.path.as_str()).collect();
    assert_eq!(paths, ["src/lib.rs"]);
    assert_eq!(blocked[0].lease.mode, LeaseMode::Exclusive);
    assert!(s.leases.check(&a, &["src/lib.rs"]).unwrap().is_empty());
}

#[test]
fn a_corrupt_table_fails_closed() {
    let s = setup();
    let a = agent("alice");
    let _ = s.leases.acquire(&exclusive(&a, &["src"])).unwrap();
    let path = s.tmp.state.root().join("leases/table.json");
    std::fs::write(&path, b"{ not json").unwrap();
    assert!(matches!(
        s.leases.check(&agent("bob"), &["src/x"]),
        Err(Error::Corrupt { .. })
    ));
    assert!(matches!(
        s.leases.acquire(&exclusive(&agent("bob"), &["other"])),
        Err(Error::Corrupt { .. })
    ));
    assert_eq!(std::fs::read(&path).unwrap(), b"{ not json");
    // The doctor reports it, and with fix moves it aside (never deletes it).
    let check = s.leases.doctor(chipset_store::DoctorMode::Check).unwrap();
    assert_eq!(check.findings[0].code, "lease-table-corrupt");
    assert!(path.exists());
    let fixed = s.leases.doctor(chipset_store::DoctorMode::Fix).unwrap();
    assert_eq!(fixed.open(), 0);
    assert!(s.leases.list().unwrap().is_empty());
    let next = s
        .leases
        .acquire(&exclusive(&agent("bob"), &["other"]))
        .unwrap()
        .lease;
    assert!(
        next.token > 1_000_000,
        "tokens restart above any granted: {}",
        next.token
    );
    assert!(
        s.leases
            .doctor(chipset_store::DoctorMode::Check)
            .unwrap()
            .is_clean()
    );
}

#[test]
fn a_newer_table_format_is_unsupported() {
    let s = setup();
    let dir = s.tmp.state.root().join("leases");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("table.json"),
        br#"{"format":2,"next_token":1,"leases":[]}"#,
    )
    .unwrap();
    assert!(matches!(s.leases.list(), Err(Error::Unsupported { .. })));
}

#[test]
fn the_table_format_is_pinned() {
    let s = setup();
    let a = agent("alice");
    let _ = s
        .leases
        .acquire(&exclusive(&a, &["src/auth/**", "Cargo.toml"]).with_reason("rewrite login"))
        .unwrap();
    let text = String::from_utf8(table_bytes(&s).unwrap()).unwrap();
    insta::assert_snapshot!(text);
}
