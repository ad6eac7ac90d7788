//! `chipset witness run`: ticks until SIGTERM or SIGINT, then exit 0.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use rustix::process::{Pid, Signal, kill_process};

use crate::{Env, Run, snap};

fn run_until(env: &mut Env, args: &[&str], signal: Signal) -> Run {
    let mut child = env
        .command(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    // The first line (stderr) is printed once the signals are handled.
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    kill_process(pid, signal).unwrap();
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    let status = child.wait().unwrap();
    Run {
        code: status.code().expect("exited, not killed by the signal"),
        stdout,
        stderr: format!("{first}{rest}"),
    }
}

/// Replaces the tick count, which depends on timing.
fn steady(mut run: Run) -> Run {
    run.stdout = {
        let s = &run.stdout;
        s.split_inclusive('\n')
            .map(|l| {
                if let Some(i) = l.find("stopped after ") {
                    let tail = &l[i + "stopped after ".len()..];
                    let rest = tail.trim_start_matches(|c: char| c.is_ascii_digit());
                    let rest = rest
                        .strip_prefix(" ticks")
                        .or(rest.strip_prefix(" tick"))
                        .unwrap_or(rest);
                    format!("{}stopped after N tick(s){rest}", &l[..i])
                } else if l.starts_with("{\"actions\"") {
                    "{\"actions\":0,\"stopped\":true,\"ticks\":N}\n".to_owned()
                } else {
                    l.to_owned()
                }
            })
            .collect::<String>()
    };
    run
}

#[test]
fn witness_run_stops_cleanly_on_sigterm_and_sigint() {
    let mut env = Env::new();
    let args = ["witness", "run", "--every", "50ms"];
    let term = run_until(&mut env, &args, Signal::TERM);
    assert_eq!(term.code, 0, "{term:?}");
    assert!(term.stdout.contains("stopped after "), "{}", term.stdout);
    let term = steady(term);
    env.record(&args, &term);
    let json = ["--json", "witness", "run", "--every", "1h", "--me", "w2"];
    let int = run_until(&mut env, &json, Signal::INT);
    assert_eq!(int.code, 0, "{int:?}");
    let last: serde_json::Value = serde_json::from_str(int.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["stopped"], true);
    assert_eq!(
        last["ticks"], 1,
        "an hour's pause is cut short by the signal"
    );
    let int = steady(int);
    env.record(&json, &int);
    snap!("witness_run", env.take());
}

/// `--stall-after`, `--nudge-interval` and `--grace` tune the witness: a
/// hook quiet for a second is checked on within seconds, where the
/// defaults (five minutes untouched, a minute's grace) would do nothing.
#[test]
fn witness_run_takes_its_thresholds() {
    let mut env = Env::new();
    env.ok(&["hook", "assign", "quiet", "--bead", "b-1", "--title", "job"]);
    let args = [
        "witness",
        "run",
        "--every",
        "100ms",
        "--stall-after",
        "1s",
        "--nudge-interval",
        "1h",
        "--grace",
        "1ms",
    ];
    let mut child = env
        .command(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("health_check") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the witness stopped");
        assert!(started.elapsed().as_secs() < 60, "no check: {line}");
    }
    assert!(line.contains(r#""agent":"quiet""#), "{line}");
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    kill_process(pid, Signal::TERM).unwrap();
    assert!(child.wait().unwrap().success());
    let nudge = env.ok(&["--json", "nudge", "read", "quiet"]).json();
    assert_eq!(nudge["nudge"]["type"], "health_check", "{nudge}");
    env.fails(2, &["witness", "run", "--every", "1s", "--grace", "soon"]);
}

#[test]
fn witness_refusals() {
    let mut env = Env::new();
    env.fails(2, &["witness", "run", "--every", "0s"]);
    env.fails(2, &["witness", "run", "--every", "soon"]);
    env.fails(2, &["witness", "run"]);
    env.fails(2, &["witness", "run", "--every", "1s", "--me", "../w"]);
    let missing = Env::new();
    std::fs::remove_dir(missing.root()).unwrap();
    let run = missing.run(&["witness", "run", "--every", "1s"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(!missing.root().exists());
    snap!("witness_refusals", env.take());
}
