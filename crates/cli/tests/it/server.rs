//! `--root postgres://…` and `CHIPSET_ROOT` on a PostgreSQL server (issue
//! 30): the commands run there, and a password is never printed. The
//! server half runs when `CHIPSET_TEST_PG` names a server.

use std::process::Command;

/// The test server's URL split as `(url, url without password, password)`
/// and a schema of the test's own, or `None` (the test says it skipped).
pub(crate) fn server(test: &str) -> Option<(String, String, String, String)> {
    let Some(url) = std::env::var("CHIPSET_TEST_PG")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        #[allow(clippy::print_stderr, reason = "a skipped test must say so")]
        {
            eprintln!("{test}: SKIPPED on PostgreSQL: CHIPSET_TEST_PG is not set");
        }
        return None;
    };
    let (scheme, rest) = url.split_once("://").unwrap();
    let (userinfo, host) = rest.split_once('@').unwrap();
    let (user, password) = userinfo.split_once(':').unwrap();
    let bare = format!("{scheme}://{user}@{host}");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let schema = format!("cli_{}_{nanos}", std::process::id());
    Some((url.clone(), bare, password.to_owned(), schema))
}

pub(crate) fn chipset(cache: &std::path::Path, schema: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_chipset"));
    cmd.args(args)
        .env_remove("CHIPSET_ROOT")
        .env_remove("PGPASSWORD")
        .env("CHIPSET_PG_SCHEMA", schema)
        .env("XDG_CACHE_HOME", cache)
        .env("NO_COLOR", "1");
    cmd
}

pub(crate) fn run(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_server_root_runs_the_commands_there() {
    let Some((url, bare, password, schema)) = server("a_server_root_runs_the_commands_there")
    else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let assign = [
        "hook", "assign", "polecat", "--bead", "bd-1", "--title", "Fix it",
    ];
    let mut with_url = ["--root", url.as_str()].to_vec();
    with_url.extend(assign);
    let (code, out, err) = run(&mut chipset(cache.path(), &schema, &with_url));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("assigned bd-1 to polecat"), "{out}");
    // The password from the environment, the root from CHIPSET_ROOT.
    let (code, out, err) = run(chipset(
        cache.path(),
        &schema,
        &["--json", "hook", "show", "polecat"],
    )
    .env("CHIPSET_ROOT", &bare)
    .env("PGPASSWORD", &password));
    assert_eq!(code, 0, "{err}");
    let hook: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(hook["work_item"]["bead_id"], "bd-1");
    // The hooks' listing is on the server too.
    let (code, out, err) = run(&mut chipset(
        cache.path(),
        &schema,
        &["--root", url.as_str(), "hook", "list"],
    ));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("polecat"), "{out}");
    // The work pool is on the server too: posted, claimed onto a hook
    // there, and listed.
    for (args, says) in [
        (
            &[
                "work",
                "post",
                "--agent",
                "lead",
                "--id",
                "w-1",
                "Fix the parser",
            ][..],
            "posted",
        ),
        (&["work", "claim", "--agent", "crew"], "w-1"),
        (&["hook", "show", "crew"], "w-1"),
        (&["work", "list"], "claimed"),
    ] {
        let mut all = vec!["--root", url.as_str()];
        all.extend(args);
        let (code, out, err) = run(&mut chipset(cache.path(), &schema, &all));
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(out.contains(says), "{args:?}: {out}");
    }
    // The status view is built from the server's rows.
    let (code, out, err) = run(&mut chipset(
        cache.path(),
        &schema,
        &["--root", url.as_str(), "--json", "status"],
    ));
    assert_eq!(code, 0, "{err}");
    let status: serde_json::Value = serde_json::from_str(&out).unwrap();
    let polecat = status["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["agent"] == "polecat")
        .unwrap_or_else(|| panic!("no line for polecat: {out}"));
    assert_eq!(polecat["hook"]["bead_id"], "bd-1", "{out}");
    assert_eq!(status["pool"]["claimed"], 1, "{out}");
    witness_runs_and_stops(cache.path(), &schema, &url);
    // `chipset top` draws the team read from the server.
    let (code, out, err) = run(&mut chipset(
        cache.path(),
        &schema,
        &["--root", url.as_str(), "top", "--once", "120x20"],
    ));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("polecat") && out.contains("bd-1"), "{out}");
    // Search catches its local index up from the server's rows.
    let (code, out, err) = run(&mut chipset(
        cache.path(),
        &schema,
        &["--root", url.as_str(), "--json", "search", "fix"],
    ));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("polecat"), "{out}");
    // A wrong password: refused, and neither password is printed.
    let wrong = url.replace(&password, "not-the-pw-1234");
    let (code, _, err) = run(&mut chipset(
        cache.path(),
        &schema,
        &["--root", &wrong, "hook", "show", "polecat"],
    ));
    assert_eq!(code, 1);
    assert!(err.contains("refused the login"), "{err}");
    assert!(
        !err.contains("not-the-pw-1234") && !err.contains(&password),
        "{err}"
    );
    if let Ok(mut c) = postgres::Client::connect(&url, postgres::NoTls) {
        // The schema's name is ours: lower-case letters, digits and `_`.
        let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
    }
}

/// `chipset witness run` ticks on the server (its records and the hooks
/// it watches are there) and stops on SIGTERM with exit 0.
fn witness_runs_and_stops(cache: &std::path::Path, schema: &str, url: &str) {
    use std::io::{BufRead, BufReader};
    let mut child = chipset(
        cache,
        schema,
        &["--root", url, "witness", "run", "--every", "50ms"],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    assert!(first.contains("witness witness watching"), "{first}");
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("witness witness stopped after"), "{stdout}");
}

/// `chipset init` on a server root once made a folder named after the URL.
#[test]
fn init_refuses_a_server_root_and_makes_no_folder() {
    let cwd = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_chipset"))
        .args(["init", "--root", "postgres://u:s3cret@127.0.0.1:1/d"])
        .current_dir(cwd.path())
        .env_remove("CHIPSET_ROOT")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("is a server") && !err.contains("s3cret"),
        "{err}"
    );
    let made = chipset_store::StateDir::stat_outside(&cwd.path().join("postgres:")).unwrap();
    assert!(made.is_none());
}
