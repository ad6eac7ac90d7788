//! `chipset mail ...`.

use std::fs;

use crate::{Env, snap};

const TASK: &str = "M005-S007-T0002";

fn request() -> Vec<&'static str> {
    vec![
        "mail",
        "send",
        "--from",
        "np-critic",
        "--to",
        "np-executor",
        "--kind",
        "request",
        "--subject",
        "dead-code",
        "--body",
        "did you intend to delete FoobarService?",
        "--task",
        TASK,
        "--round",
        "2",
        "--priority",
        "urgent",
    ]
}

fn response(parent: &str) -> Vec<&str> {
    vec![
        "mail",
        "send",
        "--from",
        "np-executor",
        "--to",
        "np-critic",
        "--kind",
        "response",
        "--subject",
        "dead-code",
        "--body",
        "yes: it was unused",
        "--in-reply-to",
        parent,
    ]
}

#[test]
fn request_response_archive_sweep_in_text() {
    let mut env = Env::new();
    env.ok(&["mail", "inbox", "np-executor"]);
    let question = env.ok(&request()).line();
    env.ok(&[
        "mail",
        "send",
        "--from",
        "np-critic",
        "--to",
        "np-executor",
        "--kind",
        "notify",
        "--subject",
        "fyi",
        "--body",
        "line one\nline two",
        "--task",
        TASK,
        "--priority",
        "low",
    ]);
    env.ok(&["mail", "inbox", "np-executor"]);
    env.ok(&["mail", "inbox", "np-executor", "--kind", "request"]);
    env.ok(&["mail", "inbox", "np-executor", "--task", "other-task"]);
    env.ok(&["mail", "pending", TASK]);
    env.fails(1, &["mail", "archive", &question]);
    let answer = env.ok(&response(&question)).line();
    env.ok(&["mail", "pending", TASK]);
    env.ok(&["mail", "thread", &answer]);
    env.ok(&["mail", "archive", &answer]);
    env.ok(&["mail", "archive", &answer]);
    let sweep = env.ok(&["mail", "sweep", TASK]);
    assert!(
        sweep.stdout.starts_with("swept 3 messages"),
        "{}",
        sweep.stdout
    );
    env.ok(&["mail", "inbox", "np-executor"]);
    snap!("mail_text", env.take());
}

#[test]
fn request_response_archive_sweep_in_json() {
    let mut env = Env::new();
    let mut args = vec!["--json"];
    args.extend(request());
    let question = env.ok(&args).json();
    assert_eq!(question["expects_reply"], true);
    assert_eq!(question["priority"], "urgent");
    assert_eq!(question["round"], 2);
    let id = question["id"].as_str().unwrap().to_owned();
    let inbox = env.ok(&["--json", "mail", "inbox", "np-executor"]).json();
    assert_eq!(inbox[0]["id"], id.as_str());
    let pending = env.ok(&["--json", "mail", "pending", TASK]).json();
    assert_eq!(pending.as_array().unwrap().len(), 1);
    let mut args = vec!["--json"];
    args.extend(response(&id));
    let answer = env.ok(&args).json();
    assert_eq!(answer["in_reply_to"], id.as_str());
    assert_eq!(answer["phase"], TASK);
    let answer_id = answer["id"].as_str().unwrap().to_owned();
    let thread = env.ok(&["--json", "mail", "thread", &id]).json();
    assert_eq!(thread.as_array().unwrap().len(), 2);
    let archived = env.ok(&["--json", "mail", "archive", &answer_id]).json();
    assert_eq!(archived["outcome"], "archived");
    let again = env.ok(&["--json", "mail", "archive", &id]).json();
    assert_eq!(again["outcome"], "already-archived");
    let swept = env.ok(&["--json", "mail", "sweep", TASK]).json();
    assert_eq!(
        (swept["moved"].as_u64(), swept["total"].as_u64()),
        (Some(2), Some(2))
    );
    snap!("mail_json", env.take());
}

#[test]
fn refusals() {
    let mut env = Env::new();
    let question = env.ok(&request()).line();
    // Usage: malformed ids, subject, missing companions of --kind.
    let mut bad_subject = request();
    bad_subject[9] = "Dead Code";
    env.fails(2, &bad_subject);
    let no_task: Vec<&str> = request()[..12].to_vec();
    env.fails(2, &no_task);
    let mut no_parent = response("x");
    no_parent.truncate(12);
    env.fails(2, &no_parent);
    env.fails(2, &["mail", "archive", "../etc"]);
    env.fails(2, &["mail", "inbox", "np/executor"]);
    env.fails(2, &["mail", "inbox", "np-executor", "--kind", "gossip"]);
    env.fails(
        2,
        &[
            "mail",
            "send",
            "--from",
            "a",
            "--to",
            "b",
            "--kind",
            "notify",
            "--subject",
            "s",
            "--body",
            "x",
            "--task",
            "t",
            "--round",
            "-1",
        ],
    );
    // Refused: what the state does not allow.
    env.fails(1, &["mail", "archive", &question]);
    env.fails(
        1,
        &[
            "mail",
            "archive",
            "1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab",
        ],
    );
    env.fails(
        1,
        &[
            "mail",
            "thread",
            "1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab",
        ],
    );
    env.fails(
        1,
        &response("1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab"),
    );
    let mut not_addressee = response(&question);
    not_addressee[3] = "np-builder";
    env.fails(1, &not_addressee);
    // Fail closed: a corrupt inbox file is never skipped.
    fs::write(
        env.root()
            .join("mail/inbox/np-executor/1730000000999-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab.json"),
        "{",
    )
    .unwrap();
    env.fails(1, &["mail", "inbox", "np-executor"]);
    env.fails(1, &["mail", "pending", TASK]);
    env.fails(1, &["--json", "mail", "pending", TASK]);
    snap!("mail_refusals", env.take());
}
