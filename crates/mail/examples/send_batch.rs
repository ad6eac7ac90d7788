//! Sends a batch of notes with `Mail::send_batch` and reports what happened:
//! a way to watch a batch's system calls, or to fail one of them.
//!
//! ```text
//! cargo build --release -p chipset-mail --example send_batch
//! strace -f -e trace=fsync,linkat -e inject=fsync:error=EIO:when=3 \
//!     target/release/examples/send_batch /tmp/state 100
//! ```
//!
//! Arguments: the state root and how many notes (default 100); the batch
//! is published in the order the store picks for the root's filesystem
//! (printed first). Exit status 0 when the batch was sent (then it says
//! whether the store's batch helper thread ran), 1 when it failed (the
//! error and what the inbox then holds are printed).

use std::fmt::Write as _;
use std::io::Write as _;
use std::process::ExitCode;

use chipset_mail::{Mail, NewMessage};
use chipset_store::{AgentId, IoBackend, RealIo, StateDir, SyncOrder, TaskId};

fn main() -> ExitCode {
    let mut report = String::new();
    let code = run(&mut report);
    // Printed once the batch is over, so that a reader that has gone
    // (`| head`) cannot stop it midway; a closed pipe is not a failure.
    match std::io::stdout().write_all(report.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => ExitCode::from(1),
        _ => ExitCode::from(code),
    }
}

/// Sends the batch, saying what happened in `report`; returns the exit
/// status.
fn run(report: &mut String) -> u8 {
    let mut say = |line: String| {
        report.push_str(&line);
        report.push('\n');
    };
    let mut args = std::env::args().skip(1);
    let Some(root) = args.next() else {
        say("usage: send_batch STATE_ROOT [COUNT]".into());
        return 2;
    };
    let count: usize = args.next().and_then(|c| c.parse().ok()).unwrap_or(100);
    let state = match StateDir::open(&root) {
        Ok(state) => state,
        Err(e) => {
            say(format!("cannot open {root}: {e}"));
            return 2;
        }
    };
    let order = RealIo.sync_order(state.root());
    say(format!("order: {order:?}"));
    let mail = Mail::new(state);
    let to = AgentId::new("exec").expect("a valid agent id");
    let drafts: Vec<NewMessage> = (0..count)
        .map(|i| {
            NewMessage::notify(
                AgentId::new("critic").expect("a valid agent id"),
                to.clone(),
                TaskId::new("t1").expect("a valid task id"),
                "fyi",
                format!("note {i}"),
            )
        })
        .collect();
    let before = threads();
    let result = mail.send_batch(&drafts);
    let helper = match (order, before, threads()) {
        (SyncOrder::WriteBackThenDir, Some(before), Some(after)) if after > before => "yes",
        (SyncOrder::WriteBackThenDir, Some(_), Some(_)) => "no",
        (SyncOrder::WriteBackThenDir, ..) => "unknown (no /proc/self/status)",
        _ => "no (this order writes on one thread)",
    };
    let inbox = mail.inbox(&to).map(|m| m.len());
    match result {
        Ok(sent) => {
            say(format!(
                "sent {} messages; the inbox holds {inbox:?}",
                sent.len()
            ));
            say(format!("batch helper thread: {helper}"));
            0
        }
        Err(e) => {
            let mut chain = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                let _ = write!(chain, ": {s}");
                source = s.source();
            }
            say(format!("failed: {chain}; the inbox holds {inbox:?}"));
            1
        }
    }
}

/// This process's threads, from `/proc/self/status` (`None` where it
/// cannot be read): under `WriteBackThenDir` the one thread a batch of 16
/// or more starts is the store's batch helper (`chipset-batch`, which
/// writes temps beside the caller where another processor is allowed).
fn threads() -> Option<usize> {
    let status =
        StateDir::read_outside(std::path::Path::new("/proc/self/status"), 64 * 1024).ok()?;
    String::from_utf8_lossy(&status)
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
}
