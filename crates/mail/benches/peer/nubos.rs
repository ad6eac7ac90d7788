//! nubos-pilot's side of the peer bench: `node` running
//! `nubos-driver.cjs`, a child process kept for the whole run, asked one
//! command per line.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// The driver process and its pipes.
pub(crate) struct Nubos {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Nubos {
    pub(crate) fn start(dir: &str) -> Nubos {
        let driver = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/peer/nubos-driver.cjs");
        let mut child = Command::new("node")
            .arg(driver)
            .env("NUBOS_PILOT_DIR", dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start node with the nubos-pilot driver");
        let stdin = child.stdin.take().expect("driver stdin");
        let stdout = BufReader::new(child.stdout.take().expect("driver stdout"));
        Nubos {
            child,
            stdin,
            stdout,
        }
    }

    /// `n` sequential sends into `project`; returns the microseconds they took.
    pub(crate) fn send(&mut self, project: &Path, n: usize) -> f64 {
        writeln!(self.stdin, "send {} {n}", project.display()).expect("write to the driver");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read the driver");
        line.trim()
            .parse()
            .unwrap_or_else(|_| panic!("the nubos driver answered {line:?}"))
    }

    /// Sends the driver one command and returns its answer's words.
    pub(crate) fn ask(&mut self, command: &str) -> Vec<String> {
        writeln!(self.stdin, "{command}").expect("write to the driver");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read the driver");
        line.split_whitespace().map(str::to_owned).collect()
    }

    /// Microseconds from the first word of an answer.
    pub(crate) fn micros(words: &[String]) -> f64 {
        words
            .first()
            .and_then(|w| w.parse().ok())
            .unwrap_or_else(|| panic!("the nubos driver answered {words:?}"))
    }
}

impl Drop for Nubos {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
