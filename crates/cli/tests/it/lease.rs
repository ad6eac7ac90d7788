//! `chipset lease ...`, and the pre-commit guard installed in a scratch
//! git repository.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use crate::Env;

#[test]
fn acquire_conflict_renew_release_in_text_and_json() {
    let mut env = Env::new();
    let granted = env
        .ok(&[
            "--json",
            "lease",
            "acquire",
            "--agent",
            "alice",
            "--reason",
            "login",
            "src/auth/**",
        ])
        .json();
    assert_eq!(granted["lease"]["token"], 1);
    assert_eq!(granted["lease"]["mode"], "exclusive");
    assert_eq!(granted["existing"], false);
    let refused = env.fails(
        1,
        &[
            "lease",
            "acquire",
            "--agent",
            "bob",
            "--shared",
            "src/auth/a.rs",
        ],
    );
    assert!(
        refused
            .stderr
            .contains("`alice` holds exclusive src/auth/**"),
        "{}",
        refused.stderr
    );
    env.fails(2, &["lease", "acquire", "--agent", "bob", "../outside"]);
    env.fails(
        2,
        &[
            "lease", "acquire", "--agent", "bob", "--ttl", "876000h", "x",
        ],
    );
    env.fails(
        2,
        &["lease", "acquire", "--agent", "bob", "--ttl", "0s", "x"],
    );
    env.fails(2, &["lease", "release", "--agent", "bob", "1", "--force"]);
    env.fails(1, &["lease", "renew", "--agent", "bob", "1"]);
    let renewed = env
        .ok(&[
            "--json", "lease", "renew", "--agent", "alice", "1", "--ttl", "2h",
        ])
        .json();
    assert_eq!(renewed["lease"]["token"], 1);
    let list = env.ok(&["--json", "lease", "list"]).json();
    assert_eq!(list["leases"].as_array().unwrap().len(), 1);
    let released = env
        .ok(&["--json", "lease", "release", "--agent", "alice", "1"])
        .json();
    assert_eq!(released["released"]["token"], 1);
    let again = env.ok(&["lease", "release", "--agent", "alice", "1"]);
    assert_eq!(
        again.stdout,
        "lease 1 is no longer held (released or expired)\n"
    );
    // A token never granted is a mistake, not a release.
    let never = env.fails(2, &["lease", "release", "--agent", "alice", "4242"]);
    assert!(
        never.stderr.contains("no lease 4242 was ever granted"),
        "{}",
        never.stderr
    );
    assert_eq!(env.ok(&["lease", "list"]).stdout, "no leases\n");
    // Fenced: a new grant gets a larger token, and the old one renews no more.
    let next = env
        .ok(&[
            "--json",
            "lease",
            "acquire",
            "--agent",
            "bob",
            "src/auth/a.rs",
        ])
        .json();
    assert_eq!(next["lease"]["token"], 2);
    env.fails(1, &["lease", "renew", "--agent", "alice", "1"]);
}

/// A retry of an acquire (paths in any order, another --ttl) returns the
/// lease held, and its text says so; a ttl in days is understood; a path
/// or reason with a line break is refused before anything is written.
#[test]
fn a_retried_acquire_says_it_is_the_lease_held() {
    let mut env = Env::new();
    let first = env.ok(&["lease", "acquire", "--agent", "a", "--ttl", "1m", "x", "y"]);
    assert!(!first.stdout.contains("already held"), "{}", first.stdout);
    let again = env.ok(&[
        "--json", "lease", "acquire", "--agent", "a", "--ttl", "2h", "y", "x",
    ]);
    let again = again.json();
    assert_eq!(
        (
            again["existing"].as_bool(),
            again["lease"]["token"].as_u64()
        ),
        (Some(true), Some(1))
    );
    let text = env.ok(&["lease", "acquire", "--agent", "a", "--ttl", "2h", "x", "y"]);
    assert!(
        text.stdout.contains("already held: this lease, unchanged"),
        "{}",
        text.stdout
    );
    env.ok(&["lease", "acquire", "--agent", "b", "--ttl", "7d", "docs"]);
    let said = env.fails(2, &["lease", "acquire", "--agent", "c", "a\nb"]);
    assert!(said.stderr.contains("control character"), "{}", said.stderr);
    env.fails(
        2,
        &[
            "lease",
            "acquire",
            "--agent",
            "c",
            "--reason",
            "two\nlines",
            "z",
        ],
    );
    let list = env.ok(&["--json", "lease", "list"]).json();
    assert_eq!(list["leases"].as_array().map(Vec::len), Some(2), "{list}");
}

/// A check of a directory, or of a glob, is not told "clear" while
/// another agent holds files under it; files beside the lease are clear.
#[test]
fn a_check_of_a_directory_or_glob_sees_the_leases_under_it() {
    let mut env = Env::new();
    env.ok(&["lease", "acquire", "--agent", "alice", "src/auth/**"]);
    for path in [
        "src",
        "src/",
        "src/*",
        "src/**/*.rs",
        "src/auth",
        "src/auth/a.rs",
    ] {
        let run = env.fails(1, &["lease", "check", "--agent", "bob", path]);
        assert!(
            run.stdout.contains("alice") || run.stderr.contains("alice"),
            "{path}: {run:?}"
        );
    }
    for path in ["src/main.rs", "docs", "src/authz", "docs/*.md"] {
        env.ok(&["lease", "check", "--agent", "bob", path]);
    }
}

#[test]
fn check_names_the_holder_and_exits_one() {
    let mut env = Env::new();
    env.ok(&["lease", "acquire", "--agent", "alice", "src/*.rs"]);
    let blocked = env.step(&[
        "lease",
        "check",
        "--agent",
        "bob",
        "src/lib.rs",
        "README.md",
    ]);
    assert_eq!(blocked.code, 1);
    assert!(
        blocked
            .stdout
            .starts_with("src/lib.rs: leased exclusively by alice until "),
        "{}",
        blocked.stdout
    );
    assert!(blocked.stderr.contains("by `alice`"), "{}", blocked.stderr);
    let doc = env
        .step(&["--json", "lease", "check", "--agent", "bob", "src/lib.rs"])
        .json();
    assert_eq!(doc["clear"], false);
    assert_eq!(doc["blocked"][0]["lease"]["holder"], "alice");
    env.ok(&["lease", "check", "--agent", "alice", "src/lib.rs"]);
    env.ok(&["lease", "check", "--agent", "bob", "src/auth/x.rs"]);
    // `chipset status` shows the live leases.
    let status = env.ok(&["status"]);
    assert!(
        status
            .stdout
            .contains("leases: 1 live\n  lease 1 alice exclusive src/*.rs"),
        "{}",
        status.stdout
    );
    let doc = env.ok(&["--json", "status"]).json();
    assert_eq!(doc["leases"][0]["holder"], "alice");
}

/// The hook exactly as `docs/leases.md` shows it, with `chipset` replaced
/// by the binary under test.
fn documented_hook() -> String {
    let doc =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/leases.md"))
            .unwrap();
    let start = doc
        .find("```sh\n#!/bin/sh\n# .git/hooks/pre-commit")
        .expect("the hook in docs/leases.md");
    let body = &doc[start + "```sh\n".len()..];
    let body = &body[..body.find("```").unwrap()];
    body.replace(
        "exec chipset ",
        &format!("exec '{}' ", env!("CARGO_BIN_EXE_chipset")),
    )
}

fn git(repo: &Path, agent: &str, root: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .current_dir(repo)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .env("CHIPSET_AGENT", agent)
        .env("CHIPSET_ROOT", root)
        .env_remove("GIT_DIR")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .unwrap()
}

#[test]
fn the_documented_pre_commit_hook_refuses_another_agents_commit() {
    let mut env = Env::new();
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path();
    assert!(git(repo, "x", env.root(), &["init", "-q"]).status.success());
    let hook = repo.join(".git/hooks/pre-commit");
    fs::create_dir_all(hook.parent().unwrap()).unwrap();
    fs::write(&hook, documented_hook()).unwrap();
    fs::set_permissions(&hook, fs::Permissions::from_mode(0o755)).unwrap();

    env.ok(&[
        "lease",
        "acquire",
        "--agent",
        "alice",
        "--reason",
        "rewrite login",
        "src/auth/**",
    ]);
    fs::create_dir_all(repo.join("src/auth")).unwrap();
    fs::write(repo.join("src/auth/login.rs"), "fn login() {}\n").unwrap();
    assert!(
        git(repo, "bob", env.root(), &["add", "src"])
            .status
            .success()
    );

    let refused = git(
        repo,
        "bob",
        env.root(),
        &["commit", "-q", "-m", "bob's change"],
    );
    assert!(!refused.status.success(), "bob's commit must be refused");
    let said = String::from_utf8_lossy(&refused.stdout).into_owned()
        + &String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("leased exclusively by alice"), "{said}");
    let log = git(repo, "bob", env.root(), &["rev-list", "--all"]);
    assert!(log.stdout.is_empty(), "no commit was made");

    let allowed = git(
        repo,
        "alice",
        env.root(),
        &["commit", "-q", "-m", "alice's change"],
    );
    assert!(
        allowed.status.success(),
        "{}",
        String::from_utf8_lossy(&allowed.stderr)
    );
    // Without an agent the hook refuses rather than lets the commit through.
    fs::write(repo.join("src/auth/login.rs"), "fn login() { }\n").unwrap();
    assert!(
        git(repo, "bob", env.root(), &["add", "src"])
            .status
            .success()
    );
    let anonymous = Command::new("git")
        .current_dir(repo)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "commit",
            "-q",
            "-m",
            "who?",
        ])
        .env_remove("CHIPSET_AGENT")
        .env("CHIPSET_ROOT", env.root())
        .output()
        .unwrap();
    assert!(!anonymous.status.success());
}
