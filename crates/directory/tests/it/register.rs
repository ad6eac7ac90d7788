//! Registration: idempotent, updates keep unnamed fields, bad input and
//! corrupt profiles.

use std::time::Duration;

use chipset_directory::{Error, Filter, MAX_NOTE_LEN, Registered, Registration, Role};
use chipset_store::{Classify, ErrorKind, ReadOutcome};

use crate::{agent, env};

fn roles(names: &[&str]) -> Option<Vec<Role>> {
    Some(names.iter().map(|n| Role::new(*n).unwrap()).collect())
}

#[test]
fn register_is_idempotent() {
    let e = env();
    let a = agent("alpha");
    let mut r = Registration::new();
    r.roles = roles(&["reviewer", "builder", "reviewer"]);
    r.program = Some("claude-code".into());
    assert!(matches!(
        e.dir.register(&a, &r).unwrap(),
        Registered::Created(_)
    ));
    let bytes = std::fs::read(e.dir.path(&a)).unwrap();
    e.clock.advance(Duration::from_secs(5));
    let again = e.dir.register(&a, &r).unwrap();
    assert!(matches!(again, Registered::Unchanged(_)));
    // Nothing was written: not even updated_at moved.
    assert_eq!(std::fs::read(e.dir.path(&a)).unwrap(), bytes);
    let p = again.profile();
    assert_eq!(p.roles, roles(&["builder", "reviewer"]).unwrap());
    assert_eq!(p.registered_at, p.updated_at);
}

#[test]
fn update_keeps_unnamed_fields_and_empty_clears() {
    let e = env();
    let a = agent("alpha");
    let mut r = Registration::new();
    r.model = Some("opus-4".into());
    r.host = Some("box-1".into());
    r.task = Some("gt-abc12".into());
    let first = e.dir.register(&a, &r).unwrap().profile().clone();
    e.clock.advance(Duration::from_secs(60));
    let mut change = Registration::new();
    change.task = Some(String::new());
    change.note = Some("on lunch\nback at 2".into());
    let Registered::Updated(p) = e.dir.register(&a, &change).unwrap() else {
        panic!("a change is an update");
    };
    assert_eq!(p.model.as_deref(), Some("opus-4"));
    assert_eq!(p.host.as_deref(), Some("box-1"));
    assert_eq!(p.task, None);
    assert_eq!(p.note.as_deref(), Some("on lunch\nback at 2"));
    assert_eq!(p.registered_at, first.registered_at);
    assert_eq!(p.updated_at, first.updated_at + Duration::from_secs(60));
    let read = e.dir.read(&a).unwrap();
    assert_eq!(read, ReadOutcome::Value(p));
}

#[test]
fn bad_input_is_typed_and_changes_nothing() {
    let e = env();
    let a = agent("alpha");
    let mut ok = Registration::new();
    ok.model = Some("m".into());
    e.dir.register(&a, &ok).unwrap();
    let before = std::fs::read(e.dir.path(&a)).unwrap();
    let long = {
        let mut r = Registration::new();
        r.note = Some("x".repeat(MAX_NOTE_LEN + 1));
        r
    };
    let control = {
        let mut r = Registration::new();
        r.host = Some("a\nb".into());
        r
    };
    let many = {
        let mut r = Registration::new();
        r.roles = Some(
            (0..17)
                .map(|i| Role::new(format!("r{i}")).unwrap())
                .collect(),
        );
        r
    };
    let all = {
        let mut r = Registration::new();
        r.roles = roles(&["qa", "all"]);
        r
    };
    for bad in [long, control, many, all] {
        let err = e.dir.register(&a, &bad).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Invalid, "{err}");
    }
    assert!(matches!(
        Role::new("../x").unwrap_err(),
        Error::InvalidRole { .. }
    ));
    assert_eq!(std::fs::read(e.dir.path(&a)).unwrap(), before);
    // A new agent with bad input gets no file at all.
    let b = agent("beta");
    let mut r = Registration::new();
    r.model = Some("\u{7}".into());
    assert!(e.dir.register(&b, &r).is_err());
    assert!(!e.dir.path(&b).exists());
}

#[test]
fn a_corrupt_profile_is_reported_never_absent() {
    let e = env();
    let (a, b) = (agent("alpha"), agent("beta"));
    e.dir.register(&a, &Registration::new()).unwrap();
    e.dir.register(&b, &Registration::new()).unwrap();
    std::fs::write(e.dir.path(&a), b"{\"name\": ").unwrap();
    assert!(e.dir.read(&a).unwrap().is_corrupt());
    assert_eq!(e.dir.whois(&a).unwrap_err().kind(), ErrorKind::Corrupt);
    // Register refuses to overwrite it.
    assert!(e.dir.register(&a, &Registration::new()).unwrap_err().kind() == ErrorKind::Corrupt);
    assert_eq!(std::fs::read(e.dir.path(&a)).unwrap(), b"{\"name\": ");
    let roster = e.dir.list(&Filter::default()).unwrap();
    assert_eq!(roster.items.len(), 1);
    assert_eq!(roster.corrupt.len(), 1);
    assert_eq!(roster.corrupt[0].path, e.dir.path(&a).to_path_buf());
    // Another agent's profile under this name is corrupt too.
    std::fs::copy(e.dir.path(&b), e.dir.path(&a)).unwrap();
    assert!(e.dir.read(&a).unwrap().is_corrupt());
}

#[test]
fn whois_of_an_unknown_agent_is_not_registered() {
    let e = env();
    assert!(matches!(
        e.dir.whois(&agent("ghost")).unwrap_err(),
        Error::NotRegistered { .. }
    ));
}

#[test]
fn list_filters_by_role_and_seen_within() {
    let e = env();
    let mut reviewer = Registration::new();
    reviewer.roles = roles(&["reviewer"]);
    e.dir.register(&agent("old-reviewer"), &reviewer).unwrap();
    e.clock.advance(Duration::from_secs(3600));
    e.dir.register(&agent("new-reviewer"), &reviewer).unwrap();
    e.dir
        .register(&agent("builder"), &Registration::new())
        .unwrap();
    let names = |f: &Filter| -> Vec<String> {
        e.dir
            .list(f)
            .unwrap()
            .items
            .iter()
            .map(|i| i.profile.name.to_string())
            .collect()
    };
    assert_eq!(
        names(&Filter::default()),
        ["builder", "new-reviewer", "old-reviewer"]
    );
    let mut by_role = Filter::default();
    by_role.role = Some(Role::new("reviewer").unwrap());
    assert_eq!(names(&by_role), ["new-reviewer", "old-reviewer"]);
    let mut recent = Filter::default();
    recent.seen_within = Some(Duration::from_secs(600));
    assert_eq!(names(&recent), ["builder", "new-reviewer"]);
    by_role.seen_within = recent.seen_within;
    assert_eq!(names(&by_role), ["new-reviewer"]);
}

#[test]
fn the_profile_file_is_pinned() {
    let e = env();
    let mut r = Registration::new();
    r.roles = roles(&["reviewer"]);
    r.model = Some("opus-4".into());
    e.dir.register(&agent("alpha"), &r).unwrap();
    let text = std::fs::read_to_string(e.dir.path(&agent("alpha"))).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        value,
        serde_json::json!({
            "model": "opus-4",
            "name": "alpha",
            "registered_at": "2026-03-05T10:00:00.000Z",
            "roles": ["reviewer"],
            "updated_at": "2026-03-05T10:00:00.000Z",
        })
    );
    assert_eq!(
        e.state.root().join("agents/alpha.json"),
        e.dir.path(&agent("alpha")).to_path_buf()
    );
}

/// `@all` and `@list` resolve to the members mail can address, and name
/// the others; an agent named on its own is never left out (the send
/// refuses its name); a list of only such names leaves nobody.
#[test]
fn lists_leave_out_names_mail_cannot_address() {
    let e = env();
    let qa = || {
        let mut r = Registration::new();
        r.roles = roles(&["qa"]);
        r
    };
    for name in ["lead", "ann"] {
        e.dir.register(&agent(name), &Registration::new()).unwrap();
    }
    for name in ["Bob.Smith", "ünï"] {
        e.dir.register(&agent(name), &qa()).unwrap();
    }
    let lead = agent("lead");
    let all = e.dir.resolve(&"@all".parse().unwrap(), &lead).unwrap();
    assert_eq!(all.agents, [agent("ann"), lead.clone()]);
    assert_eq!(all.left_out, [agent("Bob.Smith"), agent("ünï")]);
    let named = e
        .dir
        .resolve(&"@all,Bob.Smith".parse().unwrap(), &lead)
        .unwrap();
    assert_eq!(
        named.agents,
        [agent("Bob.Smith"), agent("ann"), lead.clone()]
    );
    assert_eq!(named.left_out, [agent("ünï")]);
    assert!(matches!(
        e.dir.resolve(&"@qa".parse().unwrap(), &lead),
        Err(Error::NoOtherAgent { .. })
    ));
}
