//! `chipset status` and `chipset doctor [--fix]`.

use std::fs;
use std::time::{Duration, SystemTime};

use crate::{Env, snap, tree};

/// Fills the root with a little of everything, through the command line.
fn populate(env: &mut Env) {
    env.ok(&[
        "hook",
        "assign",
        "polecat-alpha",
        "--bead",
        "gt-abc12",
        "--title",
        "README",
    ]);
    env.ok(&["hook", "activate", "polecat-alpha"]);
    env.ok(&[
        "hook",
        "assign",
        "polecat-beta",
        "--bead",
        "gt-def34",
        "--title",
        "CI",
    ]);
    env.ok(&[
        "nudge",
        "send",
        "--from",
        "witness",
        "--to",
        "polecat-beta",
        "--type",
        "stall_warning",
        "--message",
        "quiet for 10 minutes",
    ]);
    env.ok(&[
        "mail",
        "send",
        "--from",
        "mayor",
        "--to",
        "polecat-alpha",
        "--kind",
        "notify",
        "--subject",
        "heads-up",
        "--body",
        "b",
        "--task",
        "T1",
    ]);
    for priority in ["critical", "low"] {
        env.ok(&[
            "bus",
            "publish",
            "--to",
            "polecat-alpha",
            "--source",
            "mayor",
            "--kind",
            "k",
            "--priority",
            priority,
        ]);
    }
    env.ok(&[
        "remind",
        "open",
        "--kind",
        "wrap_session",
        "--source-type",
        "session",
        "--source-id",
        "s1",
        "--message",
        "wrap",
    ]);
}

#[test]
fn status_is_one_line_per_agent() {
    let mut env = Env::new();
    env.ok(&["status"]);
    env.ok(&["--json", "status"]);
    populate(&mut env);
    env.take();
    let text = env.ok(&["status"]);
    let lines: Vec<&str> = text.stdout.lines().collect();
    // Header, one line per agent (polecat-alpha, polecat-beta), reminders.
    assert_eq!(lines.len(), 4, "{}", text.stdout);
    assert!(
        lines[1].starts_with("polecat-alpha  active"),
        "{}",
        lines[1]
    );
    assert!(lines[1].contains("2 (1 critical)"), "{}", lines[1]);
    assert!(lines[2].contains("stall_warning"), "{}", lines[2]);
    assert_eq!(lines[3], "reminders: 1 open (wrap_session 1)");
    let json = env.ok(&["--json", "status"]).json();
    assert_eq!(json["agents"][0]["inbox"], 1);
    assert_eq!(json["agents"][0]["bus"]["by_priority"]["critical"], 1);
    assert_eq!(json["agents"][1]["nudge"]["pending"], true);
    assert_eq!(json["reminders"]["open"], 1);
    snap!("status", env.take());
}

#[test]
fn status_fits_a_screen_for_twenty_agents() {
    let mut env = Env::new();
    for i in 0..20 {
        let agent = format!("polecat-{i:02}");
        let bead = format!("gt-{i:02}");
        env.ok(&["hook", "assign", &agent, "--bead", &bead, "--title", "work"]);
        env.ok(&[
            "bus", "publish", "--to", &agent, "--source", "mayor", "--kind", "k",
        ]);
    }
    let status = env.ok(&["status"]);
    let lines: Vec<&str> = status.stdout.lines().collect();
    assert_eq!(lines.len(), 22);
    assert!(lines.iter().all(|l| l.len() <= 80), "{}", status.stdout);
}

fn age(path: &std::path::Path) {
    let old = SystemTime::now() - Duration::from_secs(3600);
    fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(old)
        .unwrap();
}

#[test]
fn doctor_reports_without_fix_and_repairs_with_it() {
    let mut env = Env::new();
    env.ok(&["doctor"]);
    env.ok(&["--json", "doctor"]);
    populate(&mut env);
    env.take();
    let root = env.root().to_owned();
    fs::write(root.join("hooks/broken.json"), "{").unwrap();
    fs::write(
        root.join(
            "bus/polecat-alpha/queue/2-1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab-w-k.json",
        ),
        "[]",
    )
    .unwrap();
    fs::write(
        root.join(
            "mail/inbox/polecat-alpha/1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab.json",
        ),
        "nope",
    )
    .unwrap();
    fs::create_dir_all(root.join("loop/dispatcher/beads")).unwrap();
    fs::write(
        root.join("loop/dispatcher/beads/gt-abc12.json"),
        "{\"state\":",
    )
    .unwrap();
    let temp = root.join("hooks/.polecat-alpha.json.1.2.3.tmp");
    fs::write(&temp, "half").unwrap();
    age(&temp);
    // A fresh temp belongs to a writer at work: not stale.
    fs::write(root.join("hooks/.polecat-beta.json.1.2.3.tmp"), "x").unwrap();

    let check = env.fails(1, &["doctor"]);
    assert_eq!(check.stdout.matches("open ").count(), 5, "{}", check.stdout);
    assert!(
        check.stdout.contains("corrupt loop file"),
        "{}",
        check.stdout
    );
    env.fails(1, &["--json", "doctor"]);
    let fixed = env.ok(&["doctor", "--fix"]);
    assert!(
        fixed
            .stdout
            .ends_with("5 problems found, 5 fixed, 0 remaining\n"),
        "{}",
        fixed.stdout
    );
    assert!(!temp.exists());
    assert!(root.join("hooks/.polecat-beta.json.1.2.3.tmp").exists());
    assert!(root.join("hooks/.quarantine").is_dir());
    assert!(!root.join("loop/dispatcher/beads/gt-abc12.json").exists());
    assert!(root.join("loop/dispatcher/beads/.quarantine").is_dir());
    env.ok(&["doctor"]);
    env.ok(&["hook", "list"]);
    snap!("doctor", env.take());
}

#[test]
fn doctor_fails_while_problems_need_a_person() {
    let mut env = Env::new();
    populate(&mut env);
    env.take();
    fs::write(env.root().join("nudge/notes.txt"), "left by hand").unwrap();
    env.fails(1, &["doctor"]);
    let before = tree(env.root());
    let fix = env.step(&["doctor", "--fix"]);
    assert_eq!(fix.code, 1);
    assert!(fix.stderr.contains("leaves to a person"), "{}", fix.stderr);
    assert_eq!(before, tree(env.root()), "nothing to fix, nothing changed");
    let json = env.step(&["--json", "doctor", "--fix"]);
    assert_eq!(json.json()["remaining"], 1);
    snap!("doctor_stray", env.take());
}

/// A registered agent's profile (roles, program, model, host, last seen,
/// task) shows in the text of `status`, not only in its JSON, as a second
/// table that an unregistered team never sees.
#[test]
fn status_text_shows_the_profiles() {
    let mut env = Env::new();
    env.ok(&[
        "agent",
        "register",
        "ann",
        "--roles",
        "qa,dev",
        "--program",
        "codex",
        "--model",
        "gpt-5",
        "--host",
        "box-1",
        "--task",
        "auth refactor",
    ]);
    env.ok(&["agent", "register", "bob"]);
    env.ok(&["hook", "assign", "cy", "--bead", "gt-1", "--title", "t"]);
    let text = env.ok(&["status"]).stdout;
    let lines: Vec<&str> = text.lines().collect();
    // The agents' table (header, ann, bob, cy), the profiles' table
    // (header, ann, bob), the reminders.
    assert_eq!(lines.len(), 8, "{text}");
    assert!(
        lines[4].starts_with("PROFILE  ROLES   PROGRAM  MODEL  HOST"),
        "{text}"
    );
    let ann = lines[5];
    for part in [
        "ann",
        "dev,qa",
        "codex",
        "gpt-5",
        "box-1",
        "ago (registered)",
    ] {
        assert!(ann.contains(part), "{part}: {ann}");
    }
    assert!(ann.ends_with("auth refactor"), "{ann}");
    assert!(lines[6].starts_with("bob      -"), "{}", lines[6]);
    let json = env.ok(&["--json", "status"]).json();
    let profile = &json["agents"][0]["profile"];
    assert_eq!(profile["host"], "box-1");
    assert_eq!(profile["task"], "auth refactor");
    assert_eq!(profile["last_seen"]["source"], "registered");
    assert!(
        json["agents"][2].get("profile").is_none(),
        "cy is not registered"
    );
}

/// `chipset doctor` checks the work pool as its `pool` area; `--fix`
/// rebuilds a corrupt table from the item files and says so.
#[test]
fn doctor_rebuilds_a_corrupt_pool_table() {
    let mut env = Env::new();
    env.ok(&["work", "post", "--agent", "lead", "--id", "a", "First"]);
    env.ok(&["work", "post", "--agent", "lead", "--id", "b", "Second"]);
    env.ok(&["work", "claim", "--agent", "alice", "a"]);
    fs::write(env.root().join("pool/table.json"), "{").unwrap();
    let failed = env.run(&["work", "ready"]);
    assert_ne!(failed.code, 0, "the pool fails closed");
    let check = env.run(&["doctor"]);
    assert_eq!(check.code, 1, "{check:?}");
    assert!(check.stdout.contains("pool"), "{}", check.stdout);
    let fix = env.ok(&["doctor", "--fix"]);
    assert!(
        fix.stdout.contains("rebuilt the table from 2 item files"),
        "{}",
        fix.stdout
    );
    let list = env.ok(&["work", "list"]).stdout;
    assert!(list.contains("a P2 [claimed by alice"), "{list}");
    assert!(list.contains("b P2 [ready]"), "{list}");
    env.ok(&["doctor"]);
}
