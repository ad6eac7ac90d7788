//! What the examples share: printing to a reader that may go away.
//!
//! `println!` panics when stdout is a pipe whose reader has gone
//! (`cargo run --example gastown | head`). The examples print with
//! [`say!`] instead: a closed pipe ends the example quietly with success,
//! as it ends `cat` or `chipset` (a closed pipe is not a failure), and any
//! other failure to print ends it with the reason and exit status 1. Each
//! example keeps its state directory, so ending early loses nothing.

use std::fmt;
use std::io::{self, Write as _};

/// Prints a line as `println!` does, through [`line`].
macro_rules! say {
    () => {
        $crate::support::line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::support::line(format_args!($($arg)*))
    };
}

/// Writes `args` and a newline to stdout; on a closed pipe, exits with
/// status 0; on any other error, exits with status 1 after saying why.
pub(crate) fn line(args: fmt::Arguments<'_>) {
    let mut out = io::stdout().lock();
    let written = out
        .write_fmt(args)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            drop(writeln!(io::stderr(), "cannot print: {e}"));
            std::process::exit(1);
        }
    }
}
