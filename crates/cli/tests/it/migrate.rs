//! `chipset migrate`: a state moved to another directory and, when
//! `CHIPSET_TEST_PG` names a server, to the server and back; a rerun
//! writes nothing, a conflict is refused with exit 1, and the password is
//! never printed.

use crate::Env;

/// Fills a few channels through the command line.
fn populate(env: &mut Env) {
    env.ok(&[
        "hook", "assign", "alpha", "--bead", "bd-1", "--title", "Fix it",
    ]);
    env.ok(&[
        "mail",
        "send",
        "--from",
        "alpha",
        "--to",
        "mayor",
        "--kind",
        "request",
        "--subject",
        "scope",
        "--task",
        "t1",
        "--body",
        "Usage?",
    ]);
    env.ok(&[
        "bus", "publish", "--to", "alpha", "--source", "mayor", "--kind", "ready",
    ]);
}

#[test]
fn a_directory_is_migrated_counted_and_a_rerun_writes_nothing() {
    let mut env = Env::new();
    populate(&mut env);
    let target = tempfile::tempdir().unwrap();
    let to = target.path().join("state");
    let to = to.to_str().unwrap();
    let first = env.ok(&["migrate", "--to", to]);
    assert!(first.stdout.starts_with("CHANNEL "), "{}", first.stdout);
    let mail = first
        .stdout
        .lines()
        .find(|l| l.starts_with("mail "))
        .unwrap();
    let cells: Vec<&str> = mail.split_whitespace().collect();
    // One request and its `sent` event; written, and counted on the target.
    assert_eq!(cells, ["mail", "2", "2", "0", "2", "ok"], "{mail}");
    let again = env.ok(&["--json", "migrate", "--to", to]).json();
    assert_eq!(again["verified"], true);
    assert_eq!(again["written"], 0);
    let hooks = &again["channels"][0];
    assert_eq!(
        (hooks["channel"].as_str(), hooks["present"].as_u64()),
        (Some("hooks"), Some(1))
    );
    let text = env.ok(&["migrate", "--to", to]).stdout;
    assert!(
        text.contains("0 written (the target held everything)"),
        "{text}"
    );
    // Another hook on the target: refused, exit 1, nothing overwritten.
    let hook = target.path().join("state/hooks/alpha.json");
    std::fs::write(&hook, "{}\n").unwrap();
    let refused = env.run(&["migrate", "--to", to]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("hooks/alpha.json"),
        "{}",
        refused.stderr
    );
    assert_eq!(std::fs::read(&hook).unwrap(), b"{}\n");
}

#[test]
fn a_state_goes_to_a_server_and_back_without_showing_the_password() {
    let Some(url) = std::env::var("CHIPSET_TEST_PG")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        #[allow(clippy::print_stderr, reason = "a skipped test must say so")]
        {
            eprintln!(
                "a_state_goes_to_a_server_and_back_without_showing_the_password: \
                 SKIPPED on PostgreSQL: CHIPSET_TEST_PG is not set"
            );
        }
        return;
    };
    let (scheme, rest) = url.split_once("://").unwrap();
    let (userinfo, host) = rest.split_once('@').unwrap();
    let (user, password) = userinfo.split_once(':').unwrap();
    let bare = format!("{scheme}://{user}@{host}");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let schema = format!("cli_migrate_{}_{nanos}", std::process::id());
    let mut env = Env::new();
    populate(&mut env);
    let cache = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = env
            .command(args)
            .env("PGPASSWORD", password)
            .env("CHIPSET_PG_SCHEMA", &schema)
            .env("XDG_CACHE_HOME", cache.path())
            .output()
            .unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (
            out.status.code().unwrap(),
            text(&out.stdout),
            text(&out.stderr),
        )
    };
    let (code, out, err) = run(&["migrate", "--to", &bare]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !out.contains(password) && !err.contains(password),
        "{out}{err}"
    );
    let back = tempfile::tempdir().unwrap();
    let to = back.path().join("state");
    let (code, out, err) = run(&[
        "--json",
        "migrate",
        "--from",
        &bare,
        "--to",
        to.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["verified"], true, "{doc}");
    let hook = std::fs::read(env.root().join("hooks/alpha.json")).unwrap();
    assert_eq!(std::fs::read(to.join("hooks/alpha.json")).unwrap(), hook);
    if let Ok(mut c) = postgres::Client::connect(&url, postgres::NoTls) {
        let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
    }
}
