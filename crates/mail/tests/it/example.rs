//! The `send_batch` example (`crates/mail/examples/send_batch.rs`), run as
//! a user runs it: it reports the batch it sent, and a reader that has gone
//! (`| head`) neither fails it nor stops the batch midway.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use chipset_mail::Mail;
use chipset_store::StateDir;

use crate::agent;

/// The built example, in `target/<profile>/examples/` beside the test
/// binary's `deps/`.
fn send_batch() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let path = profile_dir.join("examples").join("send_batch");
    assert!(
        path.exists(),
        "{} is missing: run the suite with `cargo test --workspace`, which builds the examples",
        path.display()
    );
    path
}

/// Runs the example on `root` for 20 notes, its stdout `stdout`.
fn run(root: &Path, stdout: Stdio) -> Output {
    Command::new(send_batch())
        .arg(root)
        .arg("20")
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

#[test]
fn send_batch_reports_the_batch_it_sent() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run(tmp.path(), Stdio::piped());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.starts_with("order: "), "{stdout}");
    assert!(
        stdout.contains("sent 20 messages; the inbox holds Ok(20)"),
        "{stdout}"
    );
}

#[test]
fn send_batch_sends_everything_when_its_reader_has_gone() {
    let tmp = tempfile::tempdir().unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = run(tmp.path(), writer.into());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}\n{stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let mail = Mail::new(StateDir::open(tmp.path()).unwrap());
    assert_eq!(mail.inbox(&agent("exec")).unwrap().len(), 20);
}

#[test]
fn send_batch_without_a_root_says_how_to_run_it() {
    let out = Command::new(send_batch()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "usage: send_batch STATE_ROOT [COUNT]\n"
    );
}
