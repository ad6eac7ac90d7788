//! End-to-end tests of the `chipset` binary: every command, success and
//! failure, against a temporary state root, with transcripts snapshotted
//! by insta (ids, times and ages redacted).

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "tests plant, corrupt and inspect files as another program would, outside the store's API"
)]

mod agent;
mod attention;
mod bus;
mod bus_prune;
mod coverage;
mod dashboard;
mod doctor;
mod exit;
mod fresh;
mod global;
mod group;
mod hook;
mod interop;
mod lease;
mod mail;
mod mcp;
mod mcp_brief;
mod mcp_http;
mod mcp_stdio;
mod mcp_tools;
mod migrate;
mod nubos;
mod nudge;
mod peers;
mod remind;
mod server;
mod status;
mod top;
mod witness;
mod work;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use chipset_store::StateDir;
use serde_json::Value;

/// One run of the binary.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Run {
    fn from_output(out: &Output, root: &Path, canonical: &Path) -> Run {
        let clean = |bytes: &[u8]| {
            String::from_utf8_lossy(bytes)
                .replace(&canonical.display().to_string(), "[ROOT]")
                .replace(&root.display().to_string(), "[ROOT]")
        };
        Run {
            code: out.status.code().expect("the binary exits with a code"),
            stdout: clean(&out.stdout),
            stderr: clean(&out.stderr),
        }
    }

    /// Returns stdout parsed as the one JSON document it must be.
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{}", self.stdout))
    }

    /// Returns stdout's only line (an id printed by `send` or `publish`).
    pub(crate) fn line(&self) -> String {
        let lines: Vec<&str> = self.stdout.lines().collect();
        assert_eq!(lines.len(), 1, "expected one line, got {:?}", self.stdout);
        lines[0].to_owned()
    }
}

/// A temporary state root and a transcript of the commands run against it.
pub(crate) struct Env {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    canonical: PathBuf,
    transcript: String,
}

impl Env {
    /// Returns a fresh, empty state root.
    pub(crate) fn new() -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("state");
        fs::create_dir(&root).unwrap();
        let canonical = fs::canonicalize(&root).unwrap();
        Env {
            _tmp: tmp,
            root,
            canonical,
            transcript: String::new(),
        }
    }

    /// Returns the state root.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Returns the state root opened for the libraries.
    pub(crate) fn state(&self) -> StateDir {
        StateDir::open(&self.root).unwrap()
    }

    /// Returns the command with `--root` set and the environment cleared of
    /// what would change the output.
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_chipset"));
        cmd.arg("--root")
            .arg(&self.root)
            .args(args)
            .env_remove("CHIPSET_ROOT")
            .env_remove("CHIPSET_AGENT")
            .env("NO_COLOR", "1");
        cmd
    }

    /// Runs the binary without recording it.
    pub(crate) fn run(&self, args: &[&str]) -> Run {
        let out = self.command(args).output().unwrap();
        Run::from_output(&out, &self.root, &self.canonical)
    }

    /// Runs the binary with `$CHIPSET_AGENT` set to `agent`, without
    /// recording it.
    pub(crate) fn run_as(&self, agent: &str, args: &[&str]) -> Run {
        let out = self
            .command(args)
            .env("CHIPSET_AGENT", agent)
            .output()
            .unwrap();
        Run::from_output(&out, &self.root, &self.canonical)
    }

    /// Runs the binary and records the command and what it printed.
    pub(crate) fn step(&mut self, args: &[&str]) -> Run {
        let run = self.run(args);
        self.record(args, &run);
        run
    }

    /// Records a run in the transcript.
    pub(crate) fn record(&mut self, args: &[&str], run: &Run) {
        let shown: Vec<String> = args
            .iter()
            .map(|a| {
                if a.is_empty() || a.contains([' ', '"', '{']) {
                    format!("'{a}'")
                } else {
                    (*a).to_owned()
                }
            })
            .collect();
        let t = &mut self.transcript;
        let _ = writeln!(t, "$ chipset {}", shown.join(" "));
        t.push_str(&run.stdout);
        for line in run.stderr.lines() {
            let _ = writeln!(t, "! {line}");
        }
        let _ = writeln!(t, "[exit {}]\n", run.code);
    }

    /// Runs a command that must succeed (exit 0); with `--json` first in
    /// `args`, its stdout must be one JSON document.
    pub(crate) fn ok(&mut self, args: &[&str]) -> Run {
        let run = self.step(args);
        assert_eq!(run.code, 0, "`{}` failed: {}", args.join(" "), run.stderr);
        if args.first() == Some(&"--json") {
            run.json();
        }
        run
    }

    /// Runs a command that must fail with `code`, print exactly one
    /// `chipset: error:` line on stderr, and change nothing under the root.
    pub(crate) fn fails(&mut self, code: i32, args: &[&str]) -> Run {
        let before = tree(&self.root);
        let run = self.step(args);
        assert_eq!(run.code, code, "`{}`: {run:?}", args.join(" "));
        let lines: Vec<&str> = run.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "one line on stderr: {:?}", run.stderr);
        assert!(lines[0].starts_with("chipset: error: "), "{}", lines[0]);
        assert_eq!(
            before,
            tree(&self.root),
            "`{}` changed the state root",
            args.join(" ")
        );
        run
    }

    /// Returns the transcript so far and starts a new one.
    pub(crate) fn take(&mut self) -> String {
        std::mem::take(&mut self.transcript)
    }
}

/// Every file under `root` with its bytes, and every empty directory.
///
/// Lock files (`.{name}.lock`) are left out, with the directories that hold
/// nothing else: the store creates them on first use, never renames or
/// writes them, and a refused operation may have taken one before it found
/// out it must refuse. They hold no state. So is the mail gate's cache
/// (`mail/.gate/`), which a read may refresh: it is never trusted without
/// checking it against the inboxes, so it holds no state either.
pub(crate) fn tree(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// Adds `dir`'s contents to `out`; returns true when it holds anything but locks.
fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) -> bool {
    let mut entries = 0;
    let mut kept = false;
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        entries += 1;
        let path = entry.path();
        let rel = path.strip_prefix(root).unwrap().to_owned();
        if entry.file_type().unwrap().is_dir() {
            if entry.file_name() == ".gate" && dir.ends_with("mail") {
                continue;
            }
            kept |= walk(root, &path, out);
        } else if !entry.file_name().to_string_lossy().ends_with(".lock") {
            out.insert(rel, fs::read(&path).unwrap());
            kept = true;
        }
    }
    if entries == 0 && dir != root {
        out.insert(dir.strip_prefix(root).unwrap().to_owned(), Vec::new());
        return true;
    }
    kept
}

/// Asserts a transcript snapshot with ids, times and ages redacted.
#[macro_export]
macro_rules! snap {
    ($name:expr, $text:expr) => {
        insta::with_settings!({
            filters => vec![
                // Placeholders of the same length keep tables aligned.
                (
                    r"\b\d{13}-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b",
                    "<unix-ms-----><uuid------------------------------>",
                ),
                (r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z", "YYYY-MM-DDTHH:MM:SS.mmmZ"),
                (r"\b\d{4}-\d{2}-\d{2}T\d{6}\.\d{3}Z", "YYYY-MM-DDTHHMMSS.mmmZ"),
                (r#""age_ms": \d+"#, r#""age_ms": [MS]"#),
                (r#""median_open_age_ms": \d+"#, r#""median_open_age_ms": [MS]"#),
                (r"\b\d{1,2}s\b", "Ns"),
                (r"\bpid \d+", "pid [PID]"),
                (r#""pid": \d+"#, r#""pid": [PID]"#),
            ],
            prepend_module_to_snapshot => false,
        }, {
            insta::assert_snapshot!($name, $text);
        });
    };
}
