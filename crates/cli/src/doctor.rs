//! `chipset doctor [--fix]`: every library's doctor in turn (hooks, nudges,
//! reminders, mail, bus, loop state), then stale temp files under the whole root.
//!
//! Without `--fix` nothing is changed. With it, each library repairs what it
//! can (quarantining, never deleting, bad files) and the store sweeps temp
//! files older than [`chipset::STALE_TEMP_AGE`]. The command fails (exit 1) when
//! problems remain: any finding without `--fix`, and with it the findings
//! the libraries leave alone by design (stray names, a response whose
//! request does not match), which need a person, and mail in flight (a
//! message younger than the grace period whose `sent` event is not there
//! yet: the doctor says when to run again rather than "clean", and exits 1,
//! since a doctor run then could still find it missing). A library doctor that cannot
//! finish (say, a lock path that is a directory) is reported as an open
//! problem of its area, and the others still run.
//!
//! A state can hold a finding per message (a lost mail manifest: 100,000
//! of them), so the findings are not all kept in memory: the libraries
//! hand them over one at a time ([`Chipset::doctor_to`]), the first few
//! thousand rows are kept and the rest written to a nameless scratch file
//! under the root ([`Rows`]), and the output (text or JSON) is written
//! from there as it is read back, the same bytes as if it had been built
//! whole.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::time::Duration;

use chipset::Chipset;
use chipset_store::{DoctorMode, Report};
use serde::ser::{Error as _, SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::Ctx;
use crate::cli::DoctorArgs;
use crate::error::{CliError, Result};
use crate::output::{self, Cell, Output, Paint, Table, Tone};
use crate::view::{DoctorReport, Finding};

use rows::{Row, Rows};

/// Runs `chipset doctor`: [`Chipset::doctor_to`], rendered as it comes.
pub(crate) fn run(ctx: &Ctx, args: &DoctorArgs) -> Result<Output> {
    let fix = args.fix;
    let mode = if fix {
        DoctorMode::Fix
    } else {
        DoctorMode::Check
    };
    // Paths are shown relative to the state root.
    let root = format!("{}/", ctx.state.root().display());
    let mut found = Rows::new(ctx.state.clone(), rows::HELD);
    let checkup = Chipset::from_state(ctx.state.clone()).doctor_to(mode, &mut |area, f| {
        let action = f.fix_line().map(|a| a.replace(&root, ""));
        found.push(Row {
            area,
            problem: f.message.replace(&root, ""),
            action,
        });
    })?;
    let mut found = found.finish()?;
    // An area that could not finish is an open problem of its own, in its
    // place among the areas; then the stale temp files.
    let mut scanned = BTreeMap::new();
    let mut in_flight = InFlight::default();
    let mut places = Vec::new();
    for area in checkup.areas {
        let report = match area.report {
            Ok(report) => Some(report),
            Err(e) => {
                let row = Row {
                    area: area.name,
                    problem: format!("could not finish: {}", CliError::from(e)).replace(&root, ""),
                    action: None,
                };
                found.count(&row);
                places.push(Place::Failed(row));
                None
            }
        };
        scanned.insert(area.name.to_owned(), report.as_ref().map(|r| r.scanned));
        if let Some(report) = report {
            in_flight.add(&report);
            places.push(Place::Found(area.name));
        }
    }
    if checkup.removed_temps > 0 {
        let row = Row {
            area: "temps",
            problem: output::plural(checkup.removed_temps, "stale temp file"),
            action: Some("removed".to_owned()),
        };
        found.count(&row);
        places.push(Place::Failed(row));
    }
    // Without a fix: those outside `bus/`, whose doctor reports its own.
    for path in checkup.stale_temps {
        let row = Row {
            area: "temps",
            problem: format!("`{}`: stale temp file", path.display()).replace(&root, ""),
            action: None,
        };
        found.count(&row);
        places.push(Place::Failed(row));
    }

    let total = found.total();
    let fixed = found.fixed();
    let remaining = total - fixed;
    let summary = if total == 0 {
        "clean: no problems found\n".to_owned()
    } else {
        format!(
            "{} found, {fixed} fixed, {remaining} remaining\n",
            output::plural(total, "problem")
        )
    };
    let head = output::json(&DoctorReport {
        fix,
        scanned,
        findings: Vec::new(),
        fixed,
        remaining,
        in_flight: in_flight.count,
    });
    let failure = (remaining > 0).then(|| {
        CliError::refused(if fix {
            format!(
                "{} remaining that --fix leaves to a person (see above){}",
                output::plural(remaining - in_flight.count, "problem"),
                in_flight.note()
            )
        } else {
            format!(
                "{} found; `chipset doctor --fix` repairs what it can{}",
                output::plural(remaining, "problem"),
                in_flight.note()
            )
        })
    });
    let paint = ctx.paint;
    let listing = Listing {
        rows: found,
        places,
    };
    Ok(Output::streamed(move |out, json| {
        if json {
            let mut ser = serde_json::Serializer::pretty(&mut *out);
            Document {
                head,
                listing: std::cell::RefCell::new(Some(listing)),
            }
            .serialize(&mut ser)
            .map_err(io::Error::other)?;
            out.write_all(b"\n")
        } else {
            if total > 0 {
                listing.text(out, paint)?;
            }
            out.write_all(summary.as_bytes())
        }
    })
    .with_failure(failure))
}

/// Where the rows of one area go in the listing, in the areas' order.
enum Place {
    /// The rows the area's doctor handed over.
    Found(&'static str),
    /// One row of its own (an area that could not finish, a stale temp file).
    Failed(Row),
}

/// Every row in the order they are listed: each area's findings (read back
/// from [`Rows`]) or its failure, then the stale temp files.
struct Listing {
    rows: rows::Finished,
    places: Vec<Place>,
}

impl Listing {
    /// Calls `each` with every row, in order.
    fn each(self, mut each: impl FnMut(Row) -> io::Result<()>) -> io::Result<()> {
        let Listing { mut rows, places } = self;
        let mut next = rows.next()?;
        for place in places {
            match place {
                Place::Failed(row) => each(row)?,
                Place::Found(area) => {
                    while let Some(row) = next.take_if(|r| r.area == area) {
                        each(row)?;
                        next = rows.next()?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes the table, each fixed finding's action on its own line below it.
    fn text(self, out: &mut dyn Write, paint: Paint) -> io::Result<()> {
        let widths = [
            self.rows.area_width().max("AREA".len()),
            "fixed".len().max("STATE".len()),
            0,
        ];
        let header = ["AREA", "STATE", "PROBLEM"].map(Cell::plain);
        out.write_all(Table::line(paint, &widths, &header).as_bytes())?;
        self.each(|row| {
            let state = match &row.action {
                Some(_) => Cell::toned("fixed", Tone::Good),
                None => Cell::toned("open", Tone::Bad),
            };
            let cells = [Cell::plain(row.area), state, Cell::plain(row.problem)];
            out.write_all(Table::line(paint, &widths, &cells).as_bytes())?;
            if let Some(action) = row.action {
                writeln!(out, "    -> {action}")?;
            }
            Ok(())
        })
    }
}

/// The JSON document: `head` (every field but the findings, its keys in
/// the order `serde_json` prints an object's), with the findings written
/// in place as they are read back.
struct Document {
    head: Value,
    listing: std::cell::RefCell<Option<Listing>>,
}

impl Serialize for Document {
    fn serialize<S: Serializer>(&self, ser: S) -> std::result::Result<S::Ok, S::Error> {
        let Value::Object(fields) = &self.head else {
            return self.head.serialize(ser);
        };
        let mut map = ser.serialize_map(Some(fields.len()))?;
        for (key, value) in fields {
            if key == "findings" {
                map.serialize_entry(key, &Findings(&self.listing))?;
            } else {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

/// The findings of a [`Document`], serialized from the listing.
struct Findings<'a>(&'a std::cell::RefCell<Option<Listing>>);

impl Serialize for Findings<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> std::result::Result<S::Ok, S::Error> {
        let mut seq = ser.serialize_seq(None)?;
        let Some(listing) = self.0.borrow_mut().take() else {
            return seq.end();
        };
        let mut failed = None;
        let read = listing.each(|row| {
            let doc = output::json(&Finding {
                area: row.area.to_owned(),
                problem: row.problem,
                action: row.action,
            });
            seq.serialize_element(&doc).map_err(|e| {
                failed = Some(e);
                io::Error::other("serialize")
            })
        });
        if let Some(e) = failed {
            return Err(e);
        }
        read.map_err(S::Error::custom)?;
        seq.end()
    }
}

/// Messages the mail doctor found in flight (published, their `sent` event
/// not yet appended, younger than the grace period): not clean, not a
/// problem for a person either; the doctor is to run again after `wait`.
#[derive(Default)]
pub(crate) struct InFlight {
    pub(crate) count: usize,
    pub(crate) wait: Duration,
}

impl InFlight {
    /// Returns the findings in flight in `report`.
    pub(crate) fn of(report: &Report) -> Self {
        let mut all = InFlight::default();
        all.add(report);
        all
    }

    /// Adds the findings in flight in `report`.
    pub(crate) fn add(&mut self, report: &Report) {
        let (count, wait) = report.in_flight();
        self.count += count;
        self.wait = self.wait.max(wait);
    }

    /// The failure's wording when some open findings are in flight.
    pub(crate) fn note(&self) -> String {
        if self.count == 0 {
            String::new()
        } else {
            format!(
                "; {} in flight: run the doctor again after {}s",
                self.count,
                self.wait.as_secs().max(1)
            )
        }
    }
}

/// The rows of a doctor run, kept in memory up to a limit and beyond it
/// written to a nameless scratch file under the state root, then read back
/// in the order they came.
mod rows {
    use std::io;

    use chipset_store::{ScratchFile, StateDir};

    /// Rows kept in memory before the rest go to a scratch file.
    pub(super) const HELD: usize = 4096;
    /// How much of the scratch file is written or read at a time.
    const CHUNK: usize = 64 * 1024;

    /// One problem found, and what was done about it (`None`: still there).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(super) struct Row {
        pub(super) area: &'static str,
        pub(super) problem: String,
        pub(super) action: Option<String>,
    }

    /// What every row listed adds up to: the summary line and the table's
    /// first column need it before the first row is written.
    #[derive(Debug, Default)]
    struct Counts {
        total: usize,
        fixed: usize,
        area_width: usize,
    }

    impl Counts {
        fn add(&mut self, row: &Row) {
            self.total += 1;
            self.fixed += usize::from(row.action.is_some());
            self.area_width = self.area_width.max(row.area.chars().count());
        }
    }

    /// Rows as they come: the first [`HELD`] in memory, the rest spilled.
    pub(super) struct Rows {
        state: StateDir,
        limit: usize,
        held: Vec<Row>,
        /// The areas' names, by the index a spilled row carries.
        names: Vec<&'static str>,
        spill: Option<ScratchFile>,
        buf: Vec<u8>,
        end: u64,
        error: Option<chipset_store::Error>,
        counts: Counts,
    }

    impl Rows {
        /// Returns an empty list that keeps `limit` rows in memory.
        pub(super) fn new(state: StateDir, limit: usize) -> Self {
            Rows {
                state,
                limit,
                held: Vec::new(),
                names: Vec::new(),
                spill: None,
                buf: Vec::new(),
                end: 0,
                error: None,
                counts: Counts::default(),
            }
        }

        /// Adds a row. A scratch file that cannot be written is reported by
        /// [`Rows::finish`]; one that cannot be created (a read-only root)
        /// leaves every row in memory, as before the scratch file was there.
        pub(super) fn push(&mut self, row: Row) {
            self.counts.add(&row);
            if self.held.len() < self.limit {
                self.held.push(row);
                return;
            }
            if self.error.is_some() {
                return;
            }
            if self.spill.is_none() {
                match self.state.scratch_file(&self.state.root_path()) {
                    Ok(file) => self.spill = Some(file),
                    Err(_) => {
                        self.limit = usize::MAX;
                        self.held.push(row);
                        return;
                    }
                }
            }
            let area = match self.names.iter().position(|n| *n == row.area) {
                Some(i) => i,
                None => {
                    self.names.push(row.area);
                    self.names.len() - 1
                }
            };
            // JSON strings hold no raw newline: one row per line.
            serde_json::to_writer(&mut self.buf, &(area, &row.problem, &row.action))
                .expect("a tuple of strings serializes");
            self.buf.push(b'\n');
            if self.buf.len() >= CHUNK {
                self.flush();
            }
        }

        fn flush(&mut self) {
            if let Some(file) = &self.spill
                && !self.buf.is_empty()
            {
                match file.write_all_at(&self.buf, self.end) {
                    Ok(()) => self.end += self.buf.len() as u64,
                    Err(e) => self.error = Some(e),
                }
                self.buf.clear();
            }
        }

        /// Returns the rows for reading back, in order.
        ///
        /// # Errors
        ///
        /// The scratch file could not be written.
        pub(super) fn finish(mut self) -> chipset_store::Result<Finished> {
            self.flush();
            if let Some(e) = self.error {
                return Err(e);
            }
            Ok(Finished {
                held: self.held.into_iter(),
                names: self.names,
                spill: self.spill,
                end: self.end,
                pos: 0,
                chunk: Vec::new(),
                start: 0,
                counts: self.counts,
            })
        }
    }

    /// The rows, read back in the order they came.
    pub(super) struct Finished {
        held: std::vec::IntoIter<Row>,
        names: Vec<&'static str>,
        spill: Option<ScratchFile>,
        end: u64,
        /// Where the next read of the scratch file starts.
        pos: u64,
        /// What was read and not yet returned, from `start`.
        chunk: Vec<u8>,
        start: usize,
        counts: Counts,
    }

    impl Finished {
        /// Counts a row listed beside these (an area that could not finish).
        pub(super) fn count(&mut self, row: &Row) {
            self.counts.add(row);
        }

        /// Returns how many rows are listed, counted ones included.
        pub(super) fn total(&self) -> usize {
            self.counts.total
        }

        /// Returns how many of them were fixed.
        pub(super) fn fixed(&self) -> usize {
            self.counts.fixed
        }

        /// Returns the widest area name among them, in characters.
        pub(super) fn area_width(&self) -> usize {
            self.counts.area_width
        }

        /// Returns the next row.
        ///
        /// # Errors
        ///
        /// The scratch file could not be read back as written.
        pub(super) fn next(&mut self) -> io::Result<Option<Row>> {
            if let Some(row) = self.held.next() {
                return Ok(Some(row));
            }
            let Some(file) = &self.spill else {
                return Ok(None);
            };
            loop {
                if let Some(n) = self.chunk[self.start..].iter().position(|b| *b == b'\n') {
                    let line = &self.chunk[self.start..self.start + n];
                    self.start += n + 1;
                    let (area, problem, action): (usize, String, Option<String>) =
                        serde_json::from_slice(line).map_err(io::Error::other)?;
                    let area = *self.names.get(area).ok_or_else(|| {
                        io::Error::new(io::ErrorKind::InvalidData, "a scratch row names no area")
                    })?;
                    return Ok(Some(Row {
                        area,
                        problem,
                        action,
                    }));
                }
                if self.pos >= self.end {
                    return if self.start < self.chunk.len() {
                        Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            "a scratch row did not read back whole",
                        ))
                    } else {
                        Ok(None)
                    };
                }
                self.chunk.drain(..self.start);
                self.start = 0;
                let len =
                    usize::try_from(self.end - self.pos).map_or(CHUNK, |left| left.min(CHUNK));
                let at = self.chunk.len();
                self.chunk.resize(at + len, 0);
                file.read_exact_at(&mut self.chunk[at..], self.pos)
                    .map_err(io::Error::other)?;
                self.pos += len as u64;
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn row(i: usize) -> Row {
            Row {
                area: ["hooks", "mail", "reminders"][i % 3],
                problem: format!("problem {i}: `a\nb` \"quoted\" {}", "x".repeat(i % 97)),
                action: i.is_multiple_of(2).then(|| format!("fixed {i}")),
            }
        }

        #[test]
        fn rows_beyond_the_limit_are_spilled_and_read_back_in_order() {
            let dir = tempfile::tempdir().unwrap();
            let state = StateDir::open(dir.path()).unwrap();
            let mut rows = Rows::new(state, 10);
            for i in 0..5_000 {
                rows.push(row(i));
            }
            // Only the first ten are in memory.
            assert_eq!(rows.held.len(), 10);
            assert!(rows.spill.is_some());
            let mut rows = rows.finish().unwrap();
            assert_eq!(
                (rows.total(), rows.fixed(), rows.area_width()),
                (5_000, 2_500, 9)
            );
            for i in 0..5_000 {
                assert_eq!(rows.next().unwrap(), Some(row(i)));
            }
            assert_eq!(rows.next().unwrap(), None);
        }

        #[test]
        fn rows_within_the_limit_stay_in_memory() {
            let dir = tempfile::tempdir().unwrap();
            let state = StateDir::open(dir.path()).unwrap();
            let mut rows = Rows::new(state, HELD);
            for i in 0..3 {
                rows.push(row(i));
            }
            assert!(rows.spill.is_none());
            let mut rows = rows.finish().unwrap();
            rows.count(&Row {
                area: "temps",
                problem: "p".to_owned(),
                action: None,
            });
            assert_eq!((rows.total(), rows.fixed()), (4, 2));
            for i in 0..3 {
                assert_eq!(rows.next().unwrap(), Some(row(i)));
            }
            assert_eq!(rows.next().unwrap(), None);
        }
    }
}
