//! `chipset mail ...`.

use std::fs;

use crate::{Env, Run, snap};

pub(crate) const TASK: &str = "M005-S007-T0002";

pub(crate) fn request() -> Vec<&'static str> {
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

/// `mail pending --check` is the commit gate for a script: exit 1 while a
/// request of the task waits, 0 once it is answered; the listing prints
/// either way.
#[test]
fn pending_check_fails_while_the_gate_is_closed() {
    let mut env = Env::new();
    let id = env.ok(&request()).line();
    let closed = env.fails(1, &["mail", "pending", "--check", TASK]);
    assert!(closed.stdout.contains(&id), "{closed:?}");
    assert!(
        closed.stderr.contains("commit gate") && closed.stderr.contains("1 request"),
        "{closed:?}"
    );
    env.ok(&response(&id));
    let open = env.ok(&["mail", "pending", "--check", TASK]);
    assert!(open.stdout.contains("no pending replies"), "{open:?}");
}

/// `mail pending --wait` returns as soon as another process answers the
/// request, and exits as `pending` does with what is open at the end.
#[test]
fn pending_wait_returns_once_the_gate_opens() {
    let mut env = Env::new();
    let id = env.ok(&request()).line();
    let waiting = env
        .command(&["mail", "pending", "--check", "--wait", "10s", TASK])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    std::thread::sleep(std::time::Duration::from_millis(300));
    env.ok(&response(&id));
    let out = waiting.wait_with_output().unwrap();
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(stdout.contains("no pending replies"), "{stdout}");
    assert!(took < std::time::Duration::from_secs(10), "{took:?}");
}

/// With nobody answering, `--wait` ends at its duration with the request,
/// and `--check` fails as the gate is closed.
#[test]
fn pending_wait_ends_at_its_duration_with_what_is_open() {
    let mut env = Env::new();
    let id = env.ok(&request()).line();
    let started = std::time::Instant::now();
    let closed = env.fails(1, &["mail", "pending", "--check", "--wait", "300ms", TASK]);
    assert!(started.elapsed() >= std::time::Duration::from_millis(300));
    assert!(closed.stdout.contains(&id), "{closed:?}");
    assert!(closed.stderr.contains("commit gate"), "{closed:?}");
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

// ---- nubos-pilot's scripts and folders -----------------------------------

/// The nubos fixture's open request (round null) and answered request.
pub(crate) const OPEN: &str = "1795408569995-7a703292-f1d1-4900-b635-8fd9f1df7f88";
const ANSWERED: &str = "1795408570001-af0bcc55-dbc3-4b45-a04f-312f26ea7034";
const RESPONSE: &str = "1795408570002-ed4443a2-9829-4dff-88f9-08c209e1cd7d";

/// Returns `fixtures/peers/`: `$CHIPSET_PEER_FIXTURES` when set, else
/// `<workspace>/../shared/fixtures/peers` (where CI keeps it). Fails the test
/// when it is missing: these tests are never skipped.
fn peers() -> std::path::PathBuf {
    let dir = std::env::var_os("CHIPSET_PEER_FIXTURES")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/peers")
        });
    assert!(
        dir.join("nubos-pilot/messages").is_dir(),
        "the peer fixtures are missing at `{}`: check out `shared` beside the workspace \
         or set CHIPSET_PEER_FIXTURES",
        dir.display()
    );
    dir
}

/// A nubos-pilot project (a copy of the fixture folder in
/// `.nubos-pilot/messages`), commands run in it without `--root`, and a
/// transcript.
pub(crate) struct Project {
    _tmp: tempfile::TempDir,
    pub(crate) dir: std::path::PathBuf,
    pub(crate) env: Env,
}

impl Project {
    pub(crate) fn new() -> Project {
        let p = Project::empty();
        chipset_testkit::copy_dir(&peers().join("nubos-pilot/messages"), &p.messages());
        p
    }

    /// A nubos-pilot project whose agents have sent no mail yet:
    /// `.nubos-pilot/` without `messages/`.
    pub(crate) fn empty() -> Project {
        let tmp = tempfile::tempdir().unwrap();
        let dir = fs::canonicalize(tmp.path()).unwrap().join("project");
        fs::create_dir_all(dir.join(".nubos-pilot")).unwrap();
        fs::create_dir_all(dir.join("src/deep")).unwrap();
        Project {
            _tmp: tmp,
            dir,
            env: Env::new(),
        }
    }

    pub(crate) fn messages(&self) -> std::path::PathBuf {
        self.dir.join(".nubos-pilot/messages")
    }

    /// Runs the binary in `cwd` (relative to the project) with no
    /// `--root` and no `CHIPSET_ROOT`, feeding `stdin`, and records it.
    pub(crate) fn run(&mut self, cwd: &str, args: &[&str], stdin: &str) -> Run {
        use std::io::Write as _;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_chipset"))
            .args(args)
            .current_dir(self.dir.join(cwd))
            .env_remove("CHIPSET_ROOT")
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let clean = |b: &[u8]| {
            String::from_utf8_lossy(b).replace(&self.dir.display().to_string(), "[PROJECT]")
        };
        let run = Run {
            code: out.status.code().unwrap(),
            stdout: clean(&out.stdout),
            stderr: clean(&out.stderr),
        };
        let mut shown = vec![format!("(in {cwd})")];
        shown.extend(
            args.iter()
                .map(|a| a.replace(&self.dir.display().to_string(), "[PROJECT]")),
        );
        let shown: Vec<&str> = shown.iter().map(String::as_str).collect();
        self.env.record(&shown, &run);
        run
    }

    pub(crate) fn ok(&mut self, cwd: &str, args: &[&str]) -> Run {
        self.ok_with(cwd, args, "")
    }

    pub(crate) fn ok_with(&mut self, cwd: &str, args: &[&str], stdin: &str) -> Run {
        let run = self.run(cwd, args, stdin);
        assert_eq!(run.code, 0, "`{}` failed: {}", args.join(" "), run.stderr);
        run
    }

    /// Runs a command that must fail with `code` and change nothing in the project.
    pub(crate) fn fails(&mut self, code: i32, cwd: &str, args: &[&str]) -> Run {
        let before = crate::tree(&self.dir);
        let run = self.run(cwd, args, "");
        assert_eq!(run.code, code, "`{}`: {run:?}", args.join(" "));
        assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
        assert_eq!(
            before,
            crate::tree(&self.dir),
            "`{}` changed files",
            args.join(" ")
        );
        run
    }
}

/// A nubos-pilot project whose agents have sent nothing yet has
/// `.nubos-pilot/` but no `messages/`: the mail commands still run on the
/// folder nubos-pilot will use (reading it as empty, making it on the
/// first send), never on a `.chipset/state` of their own, which nubos-pilot
/// would never read and whose commit gate would miss its requests.
#[test]
fn a_nubos_project_without_messages_yet_gets_them_in_its_folder() {
    let mut p = Project::empty();
    let open = p.ok("src", &["mail", "pending", "--check", TASK]);
    assert_eq!(open.stdout.trim(), format!("no pending replies for {TASK}"));
    let id = p.ok("src", &request()).line();
    let sent = p.messages().join(format!("inbox/np-executor/{id}.json"));
    assert!(sent.is_file(), "{sent:?}");
    assert!(!p.dir.join(".chipset").exists() && !p.dir.join("src/.chipset").exists());
    let closed = p.run("src", &["mail", "pending", "--check", TASK], "");
    assert_eq!(closed.code, 1, "{closed:?}");
}

#[test]
fn a_nubos_project_is_usable_in_place() {
    let mut p = Project::new();
    // Found by walking up from a subdirectory, as nubos finds its own.
    let inbox = p
        .ok("src/deep", &["--json", "mail", "inbox", "np-executor"])
        .json();
    assert_eq!(inbox[0]["id"], OPEN);
    assert_eq!(inbox[0]["round"], serde_json::Value::Null);
    p.ok("src/deep", &["mail", "inbox", "--agent", "np-critic"]);
    p.ok("src", &["mail", "pending", TASK]);
    p.ok(".", &["mail", "thread", "--id", RESPONSE]);
    let before = crate::tree(&p.messages());
    p.fails(1, ".", &["mail", "archive", OPEN]);
    let again = p
        .ok(".", &["--json", "mail", "archive", "--id", ANSWERED])
        .json();
    assert_eq!(again["outcome"], "already-archived");
    // The folder as nubos left it is clean (its response is not in chipset's
    // reply index, which is no part of nubos's layout); --fix writes nothing.
    p.ok(".", &["mail", "doctor"]);
    p.ok(".", &["mail", "doctor", "--fix"]);
    assert_eq!(
        crate::tree(&p.messages()),
        before,
        "the fix wrote or moved nothing"
    );
    // Answer the open request from a script written for nubos: body on stdin.
    let answer = p
        .ok_with(
            "src",
            &[
                "mail",
                "send",
                "--from",
                "np-executor",
                "--to",
                "np-critic",
                "--kind",
                "response",
                "--phase",
                TASK,
                "--subject",
                "dead-code",
                "--body",
                "-",
                "--in-reply-to",
                OPEN,
            ],
            "yes: it was unused\n",
        )
        .line();
    assert!(
        p.messages()
            .join(format!("inbox/np-critic/{answer}.json"))
            .is_file()
    );
    p.ok(".", &["mail", "pending", TASK]);
    let swept = p.ok(".", &["--json", "mail", "sweep", TASK]).json();
    assert_eq!(swept["moved"], 5);
    // --mail-dir names the folder from anywhere.
    let dir = p.messages().display().to_string();
    p.ok("/", &["--mail-dir", &dir, "mail", "inbox", "np-executor"]);
    let missing = format!("{dir}/nowhere");
    p.fails(1, ".", &["--mail-dir", &missing, "mail", "pending", TASK]);
    snap!("mail_nubos_project", p.env.take());
}

#[test]
fn the_arguments_nubos_scripts_pass() {
    let mut env = Env::new();
    let body_file = env.root().parent().unwrap().join("body.md");
    let big = "x".repeat(200 * 1024);
    fs::write(&body_file, &big).unwrap();
    let body_path = body_file.display().to_string();
    let send = |extra: &[&'static str]| {
        let mut args = vec![
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
            "--phase",
            TASK,
        ];
        args.extend_from_slice(extra);
        args
    };
    // A body over 128 KiB, which argv cannot carry, from a file (run
    // unrecorded: the transcript shows the file as [BODY-FILE]).
    let mut args = send(&["--round", "2", "--expects-reply", "--body-file"]);
    args.push(&body_path);
    let run = env.run(&args);
    assert_eq!(run.code, 0, "{run:?}");
    let mut shown = args.clone();
    *shown.last_mut().unwrap() = "[BODY-FILE]";
    env.record(&shown, &run);
    let first = run.line();
    let stored: serde_json::Value = serde_json::from_slice(
        &fs::read(
            env.root()
                .join(format!("mail/inbox/np-executor/{first}.json")),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(stored["body"].as_str().map(str::len), Some(big.len()));
    assert_eq!(stored["phase"], TASK);
    assert_eq!(stored["round"], 2);
    assert_eq!(stored["expects_reply"], true);
    let second = env.ok(&send(&["--body", "and this?"])).line();
    env.ok(&["mail", "inbox", "--agent", "np-executor", "--since", &first]);
    let since = env
        .ok(&["--json", "mail", "inbox", "np-executor", "--since", &first])
        .json();
    assert_eq!(since.as_array().unwrap().len(), 1);
    assert_eq!(since[0]["id"], second.as_str());
    // A time as nubos passes it: created strictly after (unrecorded: big body).
    let created = stored["created_at"].as_str().unwrap();
    let at = env.run(&["--json", "mail", "inbox", "np-executor", "--since", created]);
    let at = at.json();
    assert!(
        at.as_array()
            .unwrap()
            .iter()
            .all(|m| m["id"] != first.as_str()),
        "strictly after"
    );
    let all = env.run(&[
        "--json",
        "mail",
        "inbox",
        "np-executor",
        "--since",
        "2000-01-01T00:00:00Z",
    ]);
    assert_eq!(all.json().as_array().unwrap().len(), 2);
    env.ok(&[
        "mail",
        "inbox",
        "np-executor",
        "--phase",
        TASK,
        "--since",
        &second,
    ]);
    env.ok(&["mail", "thread", "--id", &second]);
    env.fails(1, &["mail", "archive", "--id", &second]);

    // Usage errors (exit 2), nothing written.
    env.fails(2, &send(&["--body", "x", "--body-file", "/dev/null"]));
    env.fails(2, &send(&[]));
    env.fails(2, &send(&["--body-file", "/nonexistent/body.md"]));
    let mut notify = send(&["--body", "x", "--expects-reply"]);
    notify[7] = "notify";
    env.fails(2, &notify);
    let mut dotted = send(&["--body", "x"]);
    dotted[3] = "np.critic";
    env.fails(2, &dotted);
    let mut spaced = send(&["--body", "x"]);
    spaced[5] = "np executor";
    env.fails(2, &spaced);
    env.fails(2, &send(&["--body", "x", "--round", "9007199254740993"]));
    env.fails(2, &["mail", "inbox"]);
    env.fails(2, &["mail", "inbox", "np-executor", "--agent", "np-critic"]);
    env.fails(2, &["mail", "inbox", "np-executor", "--since", "../x"]);
    env.fails(2, &["mail", "archive"]);
    env.fails(2, &["mail", "archive", &first, "--id", &second]);
    env.fails(2, &["mail", "thread"]);
    snap!("mail_nubos_args", env.take());
}

/// `chipset doctor --fix` over a state root whose `mail/` is the nubos
/// folder: every file stays where nubos wrote it, byte for byte, and the
/// gate answers as nubos intended (one open request).
#[test]
fn doctor_fix_leaves_every_nubos_file_in_place() {
    let env = Env::new();
    chipset_testkit::copy_dir(
        &peers().join("nubos-pilot/messages"),
        &env.root().join("mail"),
    );
    let before = crate::tree(&env.root().join("mail"));
    let fixed = env.run(&["doctor", "--fix"]);
    assert_eq!(fixed.code, 0, "{fixed:?}");
    let after = crate::tree(&env.root().join("mail"));
    for (path, bytes) in &before {
        assert_eq!(
            after.get(path),
            Some(bytes),
            "`{}` moved or changed",
            path.display()
        );
    }
    assert!(
        !after
            .keys()
            .any(|p| p.to_string_lossy().contains(".quarantine")),
        "{:?}",
        after.keys()
    );
    let pending = env.run(&["--json", "mail", "pending", TASK]).json();
    let ids: Vec<&str> = pending
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [OPEN]);
    let check = env.run(&["doctor"]);
    assert_eq!(check.code, 0, "{check:?}");
}

/// A message of a kind this version does not know is reported as
/// unsupported, not corrupt: the gate stays closed and the doctor leaves it.
#[test]
fn an_unknown_kind_is_unsupported_and_left_in_place() {
    let mut env = Env::new();
    let question = env.ok(&request()).line();
    let path = env
        .root()
        .join(format!("mail/inbox/np-executor/{question}.json"));
    let text = fs::read_to_string(&path)
        .unwrap()
        .replace("\"kind\": \"request\"", "\"kind\": \"question\"");
    fs::write(&path, &text).unwrap();
    env.fails(1, &["mail", "pending", TASK]);
    env.fails(1, &["mail", "inbox", "np-executor"]);
    env.fails(1, &["mail", "archive", &question]);
    let fixed = env.step(&["mail", "doctor", "--fix"]);
    assert_eq!(fixed.code, 1, "{fixed:?}");
    assert_eq!(fs::read_to_string(&path).unwrap(), text, "left in place");
    env.fails(1, &["mail", "pending", TASK]);
    snap!("mail_unsupported", env.take());
}

/// A peer may write a subject with a line break (nubos checks only that it
/// is not empty). `mail inbox` and `mail thread` failed with a panic on
/// it; each row is one line, the break shown as `\n`.
#[test]
fn a_subject_with_a_line_break_is_one_row() {
    let env = Env::new();
    let question = env.run(&request()).line();
    let path = env
        .root()
        .join(format!("mail/inbox/np-executor/{question}.json"));
    let text = fs::read_to_string(&path)
        .unwrap()
        .replace("\"subject\": \"dead-code\"", "\"subject\": \"dead\\ncode\"");
    fs::write(&path, &text).unwrap();
    for args in [
        &["mail", "inbox", "np-executor"][..],
        &["mail", "thread", &question][..],
    ] {
        let run = env.run(args);
        assert_eq!(run.code, 0, "{args:?}: {run:?}");
        let rows: Vec<&str> = run.stdout.lines().collect();
        assert_eq!(rows.len(), 3, "header, row, body: {rows:?}");
        assert!(rows[1].ends_with("dead\\ncode"), "{rows:?}");
        assert_eq!(rows[2], "    did you intend to delete FoobarService?");
    }
    let json = env.run(&["--json", "mail", "inbox", "np-executor"]).json();
    assert_eq!(json[0]["subject"], "dead\ncode", "{json}");
}
