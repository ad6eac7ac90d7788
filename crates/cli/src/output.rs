//! Rendering: what a command prints, as text or as one JSON document, and
//! the small pieces text output is built from (aligned tables, ages, colour).

use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::process::ExitCode;
use std::time::Duration;

use anstyle::{AnsiColor, Style};
use chipset_store::Timestamp;
use serde::Serialize;
use serde_json::Value;

use crate::error::CliError;

/// What a command produced: text and JSON forms of one result, plus an
/// optional note (stderr, still success) or failure (stderr, exit code).
#[derive(Debug)]
pub(crate) struct Output {
    /// The text form.
    pub(crate) text: String,
    /// The JSON form.
    pub(crate) json: Value,
    compact: bool,
    note: Option<String>,
    failure: Option<CliError>,
    /// Writes the output in place of `text` and `json` (see [`Output::streamed`]).
    body: Option<Body>,
}

/// Writes an output too large to build in memory: to the writer, as JSON
/// when asked (`true`) and as text otherwise.
pub(crate) struct Body(Box<WriteBody>);

/// What a [`Body`] runs: write to this, as JSON when the flag is set.
type WriteBody = dyn FnOnce(&mut dyn io::Write, bool) -> io::Result<()>;

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Body(..)")
    }
}

impl Output {
    /// Returns an output with `text` (newline-terminated lines, or empty) and `json`.
    pub(crate) fn new(text: impl Into<String>, json: Value) -> Self {
        Output {
            text: text.into(),
            json,
            compact: false,
            note: None,
            failure: None,
            body: None,
        }
    }

    /// Returns an output that `write` prints as it goes (text, or JSON
    /// when its flag is set) instead of one built in memory first: for a
    /// result that can be as large as the state (`doctor` on a state with
    /// a finding per message).
    pub(crate) fn streamed(
        write: impl FnOnce(&mut dyn io::Write, bool) -> io::Result<()> + 'static,
    ) -> Self {
        let mut out = Output::new("", Value::Null);
        out.body = Some(Body(Box::new(write)));
        out
    }

    /// Returns this output with a note for stderr; the command still succeeds.
    #[must_use]
    pub(crate) fn with_note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }

    /// Returns this output with `note` for stderr when there is one (the
    /// notes the shared views return beside themselves).
    #[must_use]
    pub(crate) fn with_note_if(self, note: Option<impl Into<String>>) -> Self {
        match note {
            Some(note) => self.with_note(note),
            None => self,
        }
    }

    /// Returns this output with a failure: the result is printed, then the
    /// failure's line on stderr, and the command exits with its code.
    #[must_use]
    pub(crate) fn with_failure(mut self, failure: Option<CliError>) -> Self {
        self.failure = failure;
        self
    }

    /// Returns this output printing its JSON on one line (for commands
    /// that print a stream of one-line documents before it).
    #[must_use]
    pub(crate) fn compact(mut self) -> Self {
        self.compact = true;
        self
    }

    /// Prints the output (text or JSON) and returns the exit code.
    ///
    /// A failed write to stdout is a failure (exit 1, one line on stderr that
    /// says the command itself succeeded and repeats a short result, such as
    /// the new ids, so they are not lost), except a
    /// closed pipe (`chipset mail inbox a | head -1`): the reader has what it
    /// wanted, so the command exits quietly with its own status.
    pub(crate) fn emit(self, json: bool) -> ExitCode {
        let doc = if self.body.is_some() {
            String::new()
        } else if json {
            let mut doc = if self.compact {
                serde_json::to_string(&self.json)
            } else {
                serde_json::to_string_pretty(&self.json)
            }
            .unwrap_or_else(|_| "null".into());
            doc.push('\n');
            doc
        } else {
            self.text
        };
        let written = {
            let mut out = io::stdout().lock();
            match self.body {
                Some(Body(write)) => {
                    let mut out = io::BufWriter::with_capacity(64 * 1024, out);
                    write(&mut out, json).and_then(|()| out.flush())
                }
                None => out.write_all(doc.as_bytes()).and_then(|()| out.flush()),
            }
        };
        if let Err(e) = written
            && e.kind() != io::ErrorKind::BrokenPipe
        {
            // Whatever the command did is done: say so, with what it
            // printed when that is short (the new ids of a group send).
            let shown: Vec<&str> = doc
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            let shown = shown.join("; ");
            let what = if shown.is_empty() || shown.len() > 300 {
                " (the command itself succeeded; its output is lost)".to_owned()
            } else {
                format!(" (the command itself succeeded: {shown})")
            };
            let failure = CliError::refused(format!("failed to write to stdout: {e}{what}"));
            if let Some(note) = self.note {
                say(&format!("chipset: note: {note}"));
            }
            return fail(self.failure.as_ref().unwrap_or(&failure), false);
        }
        if let Some(note) = self.note {
            say(&format!("chipset: note: {note}"));
        }
        match self.failure {
            Some(failure) => fail(&failure, false),
            None => ExitCode::SUCCESS,
        }
    }
}

/// Writes one line on stderr; a stderr that cannot be written to is not
/// worth a panic (which `eprintln!` would give).
fn say(line: &str) {
    let _ = writeln!(io::stderr().lock(), "{line}");
}

/// Prints `error` as one line on stderr and returns its exit code. With
/// `--json` (`json`), it is also the command's one JSON document on
/// stdout, on one line: its `error`, `class` and `kind`, as an MCP tool's
/// failure gives them, so a program can tell a stale hook from a corrupt
/// file (both exit 1).
pub(crate) fn fail(error: &CliError, json: bool) -> ExitCode {
    if json {
        refusal(error);
    }
    say(&format!("chipset: error: {error}"));
    ExitCode::from(error.exit_status())
}

/// Prints `error` as the `--json` document of a failure, on one line. A
/// closed or broken stdout is left be: stderr says what failed.
pub(crate) fn refusal(error: &CliError) {
    let mut doc = serde_json::to_string(&chipset_mcp::view::Refusal::of(error))
        .unwrap_or_else(|_| "null".into());
    doc.push('\n');
    let _ = io::stdout().lock().write_all(doc.as_bytes());
}

/// Serializes a library value for JSON output.
pub(crate) fn json<T: Serialize + ?Sized>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// How a cell is coloured on a terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tone {
    /// No colour.
    Plain,
    /// Green: healthy or active.
    Good,
    /// Yellow: waiting for someone.
    Warn,
    /// Red: corrupt, urgent, refused.
    Bad,
    /// Dim: nothing there.
    Dim,
}

/// Whether text output is coloured, as anstream decides for stdout (the
/// rules clap follows for its own help): never with `NO_COLOR` set, always
/// with `CLICOLOR_FORCE` set, otherwise only on a terminal that supports
/// colour (and not with `CLICOLOR=0`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Paint {
    color: bool,
}

impl Paint {
    /// Decides from the environment and stdout.
    pub(crate) fn detect() -> Self {
        Paint {
            color: anstream::AutoStream::choice(&io::stdout()) != anstream::ColorChoice::Never,
        }
    }

    fn apply(self, tone: Tone, text: &str) -> String {
        let style = match tone {
            _ if !self.color => return text.to_owned(),
            Tone::Plain => return text.to_owned(),
            Tone::Good => AnsiColor::Green.on_default(),
            Tone::Warn => AnsiColor::Yellow.on_default(),
            Tone::Bad => AnsiColor::Red.on_default(),
            Tone::Dim => Style::new().dimmed(),
        };
        format!("{style}{text}{style:#}")
    }
}

/// One table cell: its text and tone.
#[derive(Debug, Clone)]
pub(crate) struct Cell {
    text: String,
    tone: Tone,
}

impl Cell {
    /// Returns a plain cell.
    pub(crate) fn plain(text: impl Into<String>) -> Self {
        Cell::toned(text, Tone::Plain)
    }

    /// Returns a coloured cell. A control character in `text` (a line
    /// break in a subject a peer wrote) is shown as its escape (`\n`): a
    /// row is one line.
    pub(crate) fn toned(text: impl Into<String>, tone: Tone) -> Self {
        let text = text.into();
        let text = match chipset_mcp::view::one_line(&text) {
            std::borrow::Cow::Borrowed(_) => text,
            escaped => escaped.into_owned(),
        };
        Cell { text, tone }
    }
}

impl From<String> for Cell {
    fn from(text: String) -> Self {
        Cell::plain(text)
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Self {
        Cell::plain(text)
    }
}

/// A table with a header, aligned on two spaces; the last column is not padded.
#[derive(Debug)]
pub(crate) struct Table {
    rows: Vec<Vec<Cell>>,
}

impl Table {
    /// Returns a table with this header row.
    pub(crate) fn new(header: &[&str]) -> Self {
        Table {
            rows: vec![header.iter().map(|h| Cell::plain(*h)).collect()],
        }
    }

    /// Adds a row.
    pub(crate) fn row(&mut self, cells: Vec<Cell>) {
        self.rows.push(cells);
    }

    /// Returns true when only the header is there.
    pub(crate) fn is_empty(&self) -> bool {
        self.rows.len() <= 1
    }

    /// Renders the table, one line per row.
    pub(crate) fn render(&self, paint: Paint) -> String {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|c| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(c))
                    .map(|cell| cell.text.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in &self.rows {
            out.push_str(&Table::line(paint, &widths, row));
        }
        out
    }

    /// Renders one row of a table whose column widths (in characters) are
    /// known before its rows are: the line [`Table::render`] gives it.
    pub(crate) fn line(paint: Paint, widths: &[usize], row: &[Cell]) -> String {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c > 0 {
                line.push_str("  ");
            }
            line.push_str(&paint.apply(cell.tone, &cell.text));
            if c + 1 < row.len() {
                let pad = widths[c].saturating_sub(cell.text.chars().count());
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        let mut out = line.trim_end().to_owned();
        out.push('\n');
        out
    }
}

/// Renders `key  value` lines aligned on the keys.
pub(crate) fn fields(pairs: &[(&str, String)]) -> String {
    let width = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (k, v) in pairs {
        let _ = writeln!(out, "{k:width$}  {v}");
    }
    out
}

/// Returns a short age: `42s`, `5m`, `3h`, `2d`.
pub(crate) fn age(now: Timestamp, then: Timestamp) -> String {
    short_duration(now.since(then))
}

/// Returns a short duration: `42s`, `5m`, `3h`, `2d`.
pub(crate) fn short_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..172_800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

pub(crate) use chipset_failure::plural;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_and_do_not_pad_the_last_column() {
        let mut t = Table::new(&["AGENT", "STATUS", "TITLE"]);
        t.row(vec!["a".into(), "active".into(), "x y".into()]);
        t.row(vec![
            "polecat-alpha".into(),
            "-".into(),
            String::new().into(),
        ]);
        let paint = Paint { color: false };
        assert_eq!(
            t.render(paint),
            "AGENT          STATUS  TITLE\na              active  x y\npolecat-alpha  -\n"
        );
    }

    #[test]
    fn colour_is_applied_only_when_asked() {
        let cell = |color| {
            let mut t = Table::new(&["A", "B"]);
            t.row(vec![Cell::toned("x", Tone::Bad), "y".into()]);
            t.render(Paint { color })
        };
        assert_eq!(cell(false), "A  B\nx  y\n");
        assert_eq!(cell(true), "A  B\n\x1b[31mx\x1b[0m  y\n");
        // Every tone's escape, as anstyle renders it.
        let paint = Paint { color: true };
        assert_eq!(paint.apply(Tone::Good, "g"), "\x1b[32mg\x1b[0m");
        assert_eq!(paint.apply(Tone::Warn, "w"), "\x1b[33mw\x1b[0m");
        assert_eq!(paint.apply(Tone::Dim, "d"), "\x1b[2md\x1b[0m");
        assert_eq!(paint.apply(Tone::Plain, "p"), "p");
    }

    #[test]
    fn ages_are_short() {
        let t = |s| short_duration(Duration::from_secs(s));
        assert_eq!(
            [t(0), t(59), t(60), t(3599), t(3600), t(172_799), t(172_800)],
            ["0s", "59s", "1m", "59m", "1h", "47h", "2d"]
        );
    }
}
