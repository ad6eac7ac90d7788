//! `chipset top` in a real terminal: the binary runs in `tmux`, keys go
//! in by `send-keys`, the screen comes out by `capture-pane`.

#![allow(
    clippy::print_stderr,
    reason = "the test reports the latencies it measured"
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::Env;

/// A tmux server of its own (its socket in a temporary folder), killed
/// when dropped.
struct Tmux {
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmux {
    /// Starts `chipset --root ROOT top ARGS` in a 140x40 session.
    fn start(root: &Path, args: &[&str]) -> Tmux {
        let mut top = vec![
            "env".into(),
            "NO_COLOR=1".into(),
            std::ffi::OsString::from(env!("CARGO_BIN_EXE_chipset")),
            "--root".into(),
            root.as_os_str().to_owned(),
            "top".into(),
        ];
        top.extend(args.iter().map(std::ffi::OsString::from));
        Tmux::session(&top)
    }

    /// Starts `command` in a 140x40 session.
    fn session(command: &[std::ffi::OsString]) -> Tmux {
        let dir = tempfile::tempdir().unwrap();
        let tmux = Tmux {
            socket: dir.path().join("tmux.sock"),
            _dir: dir,
        };
        let mut cmd = tmux.command();
        cmd.args([
            "new-session",
            "-d",
            "-s",
            "top",
            "-x",
            "140",
            "-y",
            "40",
            "--",
        ])
        .args(command);
        let out = cmd
            .output()
            .expect("tmux runs (apt-get install tmux: the top test needs it)");
        assert!(out.status.success(), "tmux: {out:?}");
        tmux
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.arg("-S").arg(&self.socket).env_remove("TMUX");
        cmd
    }

    fn screen(&self) -> String {
        let out = self
            .command()
            .args(["capture-pane", "-p", "-t", "top"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let status = self
            .command()
            .args(["send-keys", "-t", "top"])
            .args(keys)
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits up to `limit` for the screen to satisfy `ok`; returns how long
    /// it took, or panics with the last screen.
    fn until(&self, limit: Duration, what: &str, ok: impl Fn(&str) -> bool) -> Duration {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if ok(&screen) {
                return start.elapsed();
            }
            assert!(
                start.elapsed() < limit,
                "not within {limit:?}: {what}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Asks tmux for `format` (`#{alternate_on}`, …) about the pane.
    fn display(&self, format: &str) -> String {
        let out = self
            .command()
            .args(["display-message", "-p", "-t", "top", format])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    fn alive(&self) -> bool {
        self.command()
            .args(["has-session", "-t", "top"])
            .output()
            .is_ok_and(|o| o.status.success())
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command().arg("kill-server").output();
    }
}

/// A state where `polecat-alpha`'s hook holds `bd-1`, what the views
/// below start from.
fn alpha_at_work() -> Env {
    let env = Env::new();
    let run = env.run(&[
        "hook",
        "assign",
        "polecat-alpha",
        "--bead",
        "bd-1",
        "--title",
        "First",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    env
}

#[test]
fn an_agent_assigned_from_outside_appears_within_two_seconds() {
    let env = alpha_at_work();
    let tmux = Tmux::start(env.root(), &[]);
    let started = tmux.until(Duration::from_secs(5), "top starts", |s| {
        s.contains("chipset top") && s.contains("polecat-alpha")
    });
    eprintln!("top drew its first screen after {started:?}");
    let run = env.run(&[
        "hook",
        "assign",
        "polecat-zulu",
        "--bead",
        "bd-2",
        "--title",
        "Second",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let seen = tmux.until(Duration::from_secs(2), "the new agent shows", |s| {
        s.contains("polecat-zulu")
    });
    eprintln!("the new agent showed after {seen:?}");

    // One key per view; `/` searches within it.
    tmux.keys(&["r"]);
    tmux.until(Duration::from_secs(2), "the requests view", |s| {
        s.contains("no open requests: every commit gate passes")
    });
    tmux.keys(&["a", "/", "z", "u", "l", "u", "Enter"]);
    tmux.until(Duration::from_secs(2), "the search keeps zulu only", |s| {
        s.contains("1 of 2 match /zulu") && !s.contains("polecat-alpha")
    });
    // The work pool's view: an item posted from outside shows there too.
    tmux.keys(&["w"]);
    let run = env.run(&[
        "work",
        "post",
        "--agent",
        "lead",
        "--id",
        "w-tmux",
        "Seen in top",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    tmux.until(Duration::from_secs(2), "the posted item shows", |s| {
        s.contains("w-tmux") && s.contains("Seen in top") && s.contains("1 ready")
    });
    tmux.keys(&["q"]);
    let start = Instant::now();
    while tmux.alive() {
        assert!(start.elapsed() < Duration::from_secs(2), "q quits top");
        std::thread::sleep(Duration::from_millis(25));
    }
}

#[test]
fn a_vanished_root_keeps_the_last_view_with_an_error_line() {
    let env = alpha_at_work();
    let tmux = Tmux::start(env.root(), &["--rescan", "1s"]);
    tmux.until(Duration::from_secs(5), "top starts", |s| {
        s.contains("polecat-alpha")
    });
    std::fs::remove_dir_all(env.root()).unwrap();
    // A read may land midway through the removal and show what was left
    // then: the last view is the last one read.
    tmux.until(Duration::from_secs(5), "the error line", |s| {
        s.contains("error: state root")
            && s.contains("no longer exists")
            && s.contains("chipset top")
    });
    assert!(tmux.alive(), "top keeps running");
    tmux.keys(&["q"]);
    let start = Instant::now();
    while tmux.alive() {
        assert!(start.elapsed() < Duration::from_secs(2), "q quits top");
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// `--once` with `--json` prints the frame as JSON, a line each (it printed
/// `null`).
#[test]
fn one_frame_as_json_is_the_frame_a_line_each() {
    let mut env = Env::new();
    env.ok(&[
        "hook", "assign", "polecat", "--bead", "bd-7", "--title", "T", "--by", "mayor",
    ]);
    let text = env.ok(&["top", "--once", "100x12"]).stdout;
    let frame = env.ok(&["--json", "top", "--once", "100x12"]).json();
    assert_eq!(
        (frame["width"].as_u64(), frame["height"].as_u64()),
        (Some(100), Some(12))
    );
    let lines: Vec<&str> = frame["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    // The same frame as the text, but for the time in the first line.
    assert_eq!(lines.len(), 12, "{lines:?}");
    assert_eq!(lines[1..], text.lines().skip(1).collect::<Vec<_>>());
    assert!(
        lines
            .iter()
            .any(|l| l.contains("polecat") && l.contains("bd-7")),
        "{lines:?}"
    );
}

/// SIGTERM gives the terminal back as `q` does: the pane leaves the
/// alternate screen and the process exits 0, where it died inside it. A
/// shell runs top and says how it ended (tmux may reap a pane's own
/// process late, so its exit status is read from the shell).
#[test]
fn sigterm_leaves_the_terminal_as_it_found_it() {
    let env = alpha_at_work();
    let script = format!(
        "NO_COLOR=1 '{}' --root '{}' top; echo \"EXIT=$?\"; exec sleep 60",
        env!("CARGO_BIN_EXE_chipset"),
        env.root().display()
    );
    let tmux = Tmux::session(&["sh".into(), "-c".into(), script.into()]);
    tmux.until(Duration::from_secs(5), "top starts", |s| {
        s.contains("polecat-alpha")
    });
    assert_eq!(tmux.display("#{alternate_on}"), "1");
    let shell = tmux.display("#{pane_pid}");
    let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children")).unwrap();
    let top: i32 = children
        .split_whitespace()
        .next()
        .expect("top runs")
        .parse()
        .unwrap();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(top).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    tmux.until(Duration::from_secs(10), "top exits", |s| {
        s.contains("EXIT=")
    });
    assert!(tmux.screen().contains("EXIT=0"), "{}", tmux.screen());
    assert_eq!(
        tmux.display("#{alternate_on}"),
        "0",
        "left the alternate screen"
    );
}
