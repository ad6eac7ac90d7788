//! Issue 12: the exit status tells the truth about output, `bus publish --id`
//! retries, exact payloads, and a doctor that does not stop on bad files.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use crate::Env;

const ID: &str = "1772706900123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab";

fn publish<'a>(kind: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "bus", "publish", "--to", "bob", "--source", "s", "--kind", kind,
    ];
    args.extend_from_slice(extra);
    args
}

/// `chipset bus publish … > /dev/full` exited 0 having printed no id.
#[test]
fn a_failed_write_to_stdout_is_a_failure_that_still_names_the_id() {
    let env = Env::new();
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = env
        .command(&publish("k", &["--id", ID]))
        .stdout(full)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("chipset: error: failed to write to stdout"),
        "{stderr}"
    );
    assert!(stderr.contains(ID), "the id is not lost: {stderr}");
    // It was published; the retry with the id is a no-op success.
    let again = env.run(&publish("k", &["--id", ID]));
    assert_eq!((again.code, again.line()), (0, ID.to_owned()));
    let pending = env.run(&["--json", "bus", "pending", "bob"]).json();
    assert_eq!(
        pending["events"].as_array().map(Vec::len),
        Some(1),
        "{pending}"
    );
}

/// A group send to a full stdout said nothing of the copies it delivered:
/// the line on stderr says the command succeeded, with each copy's id.
#[test]
fn a_failed_write_after_a_group_send_names_every_copy() {
    let env = Env::new();
    for a in ["ann", "bob"] {
        assert_eq!(env.run(&["agent", "register", a, "--role", "dev"]).code, 0);
    }
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let send = [
        "mail",
        "send",
        "--from",
        "lead",
        "--to",
        "@dev",
        "--kind",
        "notify",
        "--task",
        "t5",
        "--subject",
        "s",
        "--body",
        "b",
    ];
    let out = env.command(&send).stdout(full).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("(the command itself succeeded: "),
        "{stderr}"
    );
    for a in ["ann", "bob"] {
        let inbox = env.run(&["--json", "mail", "inbox", a]).json();
        let id = inbox[0]["id"].as_str().unwrap().to_owned();
        assert!(
            stderr.contains(&format!("{id} {a}")),
            "{a}'s copy: {stderr}"
        );
    }
}

/// `chipset bus pending bob | head -1` exits quietly with 0.
#[test]
fn a_closed_pipe_after_a_listing_exits_quietly() {
    let env = Env::new();
    // Enough output to fill the pipe: one event with a large payload.
    let payload = format!("{{\"text\":\"{}\"}}", "x".repeat(100 * 1024));
    assert_eq!(env.run(&publish("k", &["--payload", &payload])).code, 0);
    let mut child = env
        .command(&["--json", "bus", "pending", "bob"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first, "{\n");
    // The reader is gone (stdout dropped): the next write gets EPIPE.
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8(out.stderr).unwrap(), "");
}

#[test]
fn publish_with_an_id_is_safe_to_retry_and_payloads_are_exact() {
    let mut env = Env::new();
    let payload = r#"{"m":123456789012345678901234567890,"f":1.10}"#;
    let first = env.ok(&publish("k", &["--id", ID, "--payload", payload]));
    assert_eq!(first.line(), ID);
    let again = env.ok(&publish("k", &["--id", ID, "--payload", payload]));
    assert_eq!(again.line(), ID);
    // Same id, other content: refused, nothing changes.
    env.fails(1, &publish("k", &["--id", ID, "--payload", "{}"]));
    env.fails(2, &publish("k", &["--id", "not-an-id"]));
    let shown = env.ok(&["--json", "bus", "pending", "bob"]);
    assert!(
        shown
            .stdout
            .contains("\"m\": 123456789012345678901234567890"),
        "{}",
        shown.stdout
    );
    assert!(shown.stdout.contains("\"f\": 1.10"), "{}", shown.stdout);
    let file = std::fs::read_dir(env.root().join("bus/bob/queue"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .next()
        .unwrap();
    assert!(
        file.contains("\"m\": 123456789012345678901234567890"),
        "{file}"
    );
}

/// `doctor --fix` stopped with "Is a directory" / "Illegal seek" on a
/// directory or FIFO where a log belongs; a lock path that is a directory
/// stopped it too. Now each is reported, logs are moved aside, and the rest
/// of the doctor runs.
#[test]
fn the_doctor_reports_and_moves_aside_directories_and_fifos_where_logs_belong() {
    let mut env = Env::new();
    let manifest = env.root().join("mail/manifest.jsonl");
    std::fs::create_dir_all(&manifest).unwrap();
    env.ok(&publish("k", &[]));
    let control = env.root().join("bus/bob/control.jsonl");
    let made = std::process::Command::new("mkfifo").arg(&control).status();
    assert!(made.unwrap().success());
    // (Not `env.fails`: its before-and-after snapshot would block reading the FIFO.)
    let check = env.step(&["doctor"]);
    assert_eq!(check.code, 1, "{check:?}");
    assert!(
        check.stdout.contains("mail/manifest.jsonl"),
        "{}",
        check.stdout
    );
    assert!(
        check.stdout.contains("bus/bob/control.jsonl"),
        "{}",
        check.stdout
    );
    env.ok(&["doctor", "--fix"]);
    env.ok(&["doctor"]);
    assert!(!manifest.exists(), "moved aside");
    assert_eq!(
        std::fs::read_dir(env.root().join("mail/.quarantine"))
            .unwrap()
            .count(),
        1
    );

    // A lock path that is a directory is reported, and the other doctors still run.
    std::fs::create_dir_all(env.root().join("hooks/.bad.json.lock")).unwrap();
    std::fs::write(env.root().join("hooks/bad.json"), "{").unwrap();
    std::fs::write(env.root().join("bus/bob/presence.json"), "{").unwrap();
    let run = env.step(&["doctor", "--fix"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stdout.contains(".bad.json.lock"), "{}", run.stdout);
    assert!(
        run.stdout.contains("presence.json"),
        "the bus doctor ran: {}",
        run.stdout
    );
}

fn mail_send<'a>(body: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "mail",
        "send",
        "--from",
        "alice",
        "--to",
        "bob",
        "--kind",
        "notify",
        "--subject",
        "status",
        "--task",
        "t1",
        "--body",
        body,
    ];
    args.extend_from_slice(extra);
    args
}

#[test]
fn mail_send_with_an_id_is_safe_to_retry_wherever_the_message_went() {
    let mut env = Env::new();
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    // The first attempt delivers but cannot print: a failure that names the id.
    let out = env
        .command(&mail_send("hi", &["--id", ID]))
        .stdout(full)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8(out.stderr).unwrap().contains(ID));
    // The retry is the first delivery, not a second copy.
    assert_eq!(env.ok(&mail_send("hi", &["--id", ID])).line(), ID);
    let inbox = env.ok(&["--json", "mail", "inbox", "bob"]).json();
    assert_eq!(inbox.as_array().map(Vec::len), Some(1), "{inbox}");
    // Archived, then swept: still the first delivery.
    env.ok(&["mail", "archive", ID]);
    assert_eq!(env.ok(&mail_send("hi", &["--id", ID])).line(), ID);
    env.ok(&["mail", "sweep", "t1"]);
    assert_eq!(env.ok(&mail_send("hi", &["--id", ID])).line(), ID);
    // Same id, other content: refused, nothing written.
    let refused = env.fails(1, &mail_send("other", &["--id", ID]));
    assert!(
        refused.stderr.contains("other content"),
        "{}",
        refused.stderr
    );
    env.fails(2, &mail_send("hi", &["--id", "a/b"]));
    // Not the seed's `{unix-ms}-{uuid}`: other programs would never see it.
    let refused = env.fails(2, &mail_send("hi", &["--id", "garbage"]));
    assert!(
        refused.stderr.contains("invalid message id"),
        "{}",
        refused.stderr
    );
    let inbox = env.ok(&["--json", "mail", "inbox", "bob"]).json();
    assert_eq!(inbox.as_array().map(Vec::len), Some(0), "{inbox}");
    let manifest = std::fs::read_to_string(env.root().join("mail/manifest.jsonl")).unwrap();
    assert_eq!(
        manifest.matches("\"sent\"").count(),
        1,
        "one `sent` event: {manifest}"
    );
}

/// Right after a crash between a send's publish and its manifest line, the
/// doctor does not say "clean": the message is in flight, and it says when
/// to check again (exit 1, since a doctor then could still find it missing).
#[test]
fn the_doctor_reports_a_message_in_flight_rather_than_clean() {
    let mut env = Env::new();
    let id = env.ok(&mail_send("hi", &[])).line();
    std::fs::write(env.root().join("mail/manifest.jsonl"), b"").unwrap();
    for args in [
        &["doctor", "--fix"][..],
        &["mail", "doctor", "--fix"],
        &["doctor"],
    ] {
        let run = env.run(args);
        assert_eq!(run.code, 1, "{args:?}");
        assert!(run.stdout.contains(&id), "{args:?}: {}", run.stdout);
        assert!(run.stdout.contains("in flight"), "{args:?}: {}", run.stdout);
        assert!(
            run.stderr.contains("in flight: run the doctor again after"),
            "{args:?}: {}",
            run.stderr
        );
        assert!(!run.stdout.contains("clean"), "{args:?}: {}", run.stdout);
    }
    let json = env.run(&["--json", "doctor"]).json();
    assert_eq!(json["in_flight"], 1, "{json}");
    // Nothing was appended for it yet: the sender may still be appending.
    let manifest = std::fs::read_to_string(env.root().join("mail/manifest.jsonl")).unwrap();
    assert_eq!(manifest, "");
}

/// Exit 3 without an id (the store's "the change to … is not known to be
/// durable") means, says `--help` and the README, that the same command
/// again finishes it. That holds when the command, run again once its
/// change is in place, succeeds and changes nothing more: this checks it
/// for the commands that print such a line (an unknown outcome itself
/// needs an injected fault, which the store's and the crates' fault tests
/// make).
#[test]
fn the_same_command_again_after_its_change_succeeds_and_changes_nothing() {
    let env = Env::new();
    let cases = [
        ("hook assign ann --bead b-1 --title t", "hook show ann"),
        ("lease acquire --agent ann --ttl 5m src/**", "lease list"),
        ("agent register ann --roles dev", "agent whois ann"),
        (
            "remind open --kind handoff_pending --source-type handoff --source-id h1 --message m",
            "remind list",
        ),
    ];
    for (args, show) in cases {
        let args: Vec<&str> = args.split(' ').collect();
        let show: Vec<&str> = ["--json"].into_iter().chain(show.split(' ')).collect();
        assert_eq!(env.run(&args).code, 0, "{args:?}");
        let before = env.run(&show).json();
        let again = env.run(&args);
        assert_eq!(again.code, 0, "{args:?}: {again:?}");
        assert_eq!(env.run(&show).json(), before, "{args:?}");
    }
}
