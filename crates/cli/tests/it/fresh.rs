//! What a new user meets first (issue 31): `init`, errors that name it,
//! help that says where the root is looked for, and no panic on a closed
//! pipe.

use std::process::{Command, Stdio};

use crate::Env;

fn chipset(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_chipset"))
        .current_dir(dir)
        .args(args)
        .env_remove("CHIPSET_ROOT")
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

/// The JSON a command that succeeded printed.
fn ok_json(out: std::process::Output) -> serde_json::Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_closed_pipe_is_not_a_panic() {
    // Regression: `chipset completions bash | head -1` exited 101 with a backtrace.
    let env = Env::new();
    for args in [
        &["completions", "bash"][..],
        &["completions", "zsh"],
        &["--help"],
        &["hook", "list"],
        &["mail", "inbox", "a"],
    ] {
        let mut child = env
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Close the reading end before the command writes.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn init_creates_the_root_and_prints_the_mcp_entry() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let out = chipset(dir, &["status"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "chipset: error: state root `.chipset/state` does not exist: `chipset init` creates it \
         (or check --root or CHIPSET_ROOT)\n"
    );
    let out = chipset(dir, &["brief", "a"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("`chipset init` creates it"));

    let doc = ok_json(chipset(
        dir,
        &["--json", "init", "--agent", "polecat-alpha"],
    ));
    assert_eq!(doc["created"], true);
    assert_eq!(
        doc["mcp_json"]["mcpServers"]["chipset"],
        serde_json::json!({"command": "chipset", "args": ["mcp", "--agent", "polecat-alpha"]})
    );
    assert!(dir.join(".chipset/state").is_dir());
    assert_eq!(
        doc["root"],
        dir.join(".chipset/state").display().to_string()
    );
    assert_eq!(chipset(dir, &["status"]).status.code(), Some(0));

    // From a folder below, the root above is found, not made again.
    let below = dir.join("src/deep");
    std::fs::create_dir_all(&below).unwrap();
    let out = chipset(&below, &["init"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("found the state root"), "{text}");
    assert!(text.contains("\"mcpServers\""), "{text}");
    assert!(!below.join(".chipset").exists());
}

/// A root named by `--root` or `$CHIPSET_ROOT` travels with the snippet,
/// as its absolute path: the host may start the server in another folder,
/// without the variable. A found root is absolute in `--json` too.
#[test]
fn init_names_a_given_root_by_its_absolute_path() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let sub = dir.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let args_of = |out: std::process::Output| {
        let doc = ok_json(out);
        (
            doc["root"].clone(),
            doc["mcp_json"]["mcpServers"]["chipset"]["args"].clone(),
        )
    };
    let custom = dir.join("custom").display().to_string();
    let by_env = Command::new(env!("CARGO_BIN_EXE_chipset"))
        .current_dir(dir)
        .args(["--json", "init", "--agent", "y"])
        .env("CHIPSET_ROOT", "custom")
        .output()
        .unwrap();
    assert_eq!(
        args_of(by_env),
        (
            serde_json::json!(custom),
            serde_json::json!(["mcp", "--agent", "y", "--root", custom])
        )
    );
    let rel = dir.join("sub/../rel").display().to_string();
    assert_eq!(
        args_of(chipset(
            &sub,
            &["--json", "--root", "../rel", "init", "--agent", "z"]
        )),
        (
            serde_json::json!(rel),
            serde_json::json!(["mcp", "--agent", "z", "--root", rel])
        )
    );
    assert!(dir.join("rel").is_dir() && dir.join("custom").is_dir());
}

#[test]
fn help_says_the_root_is_found_upward() {
    let tmp = tempfile::tempdir().unwrap();
    let help = String::from_utf8_lossy(&chipset(tmp.path(), &["--help"]).stdout).into_owned();
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        help.contains("the nearest `.chipset/state` in the current directory or one above it"),
        "{help}"
    );
    assert!(!help.contains("under the current directory]"), "{help}");
}
