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

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::time::Duration;

use chipset_mail::Mail;
use chipset_store::{DoctorMode, Report};
use serde::ser::{Error as _, SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::Ctx;
use crate::cli::DoctorArgs;
use crate::error::{CliError, Result};
use crate::output::{self, Cell, Output, Paint, Table, Tone};
use crate::view::{DoctorReport, Finding, MailDoctor, MailFinding};

mod rows;

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
    // What a fix would repair, of what a check finds.
    let mut fixable = 0;
    let checkup = ctx.chipset.clone().doctor_to(mode, &mut |area, f| {
        fixable += usize::from(f.fixable);
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
    let mut unfinished = 0;
    for area in checkup.areas {
        let report = match area.report {
            Ok(report) => Some(report),
            Err(e) => {
                unfinished += 1;
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
    fixable += checkup.stale_temps.len();
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
        CliError::refused(if fix || fixable == 0 {
            // An area that could not finish (a full disk, a lost server)
            // is not left to a person: the same run again may finish it.
            let person = remaining - in_flight.count - unfinished;
            let parts: Vec<String> = [
                (unfinished > 0).then(|| {
                    format!(
                        "{} could not finish (see above): run it again once the cause is gone",
                        output::plural(unfinished, "area")
                    )
                }),
                (person > 0).then(|| {
                    format!(
                        "{} remaining that --fix leaves to a person (see above)",
                        output::plural(person, "problem")
                    )
                }),
            ]
            .into_iter()
            .flatten()
            .collect();
            let note = in_flight.note();
            let flight = note.strip_prefix("; ").filter(|n| !n.is_empty());
            parts
                .into_iter()
                .chain(flight.map(str::to_owned))
                .collect::<Vec<_>>()
                .join("; ")
        } else {
            format!(
                "{} found ({fixable} repairable with `chipset doctor --fix`){}",
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
            Document::new(head, move |each| {
                listing.each(|row| {
                    each(output::json(&Finding {
                        area: row.area.to_owned(),
                        problem: row.problem,
                        action: row.action,
                    }))
                })
            })
            .write(out)
        } else {
            if total > 0 {
                listing.text(out, paint)?;
            }
            out.write_all(summary.as_bytes())
        }
    })
    .with_failure(failure))
}

/// Runs `chipset mail doctor [--fix]`: the mail library's doctor alone
/// ([`Mail::doctor_to`]), for a mail folder that is not under a chipset
/// state root, rendered as it comes as `chipset doctor` is. Fails (exit 1)
/// when problems remain, as `chipset doctor` does.
pub(crate) fn mail(mail: &Mail, fix: bool) -> Result<Output> {
    let mode = if fix {
        DoctorMode::Fix
    } else {
        DoctorMode::Check
    };
    // A row per finding: its code where `doctor` has an area, and an
    // (empty) action when it was repaired.
    let mut found = Rows::new(mail.state().clone(), rows::HELD);
    let mut fixable = 0;
    let report = mail.doctor_to(mode, &mut |f| {
        fixable += usize::from(f.fixable);
        found.push(Row {
            area: f.code,
            action: f.is_fixed().then(String::new),
            problem: f.message,
        });
    })?;
    let mut found = found.finish()?;
    let (total, repaired) = (found.total(), found.fixed());
    let open = total - repaired;
    let mut summary = format!(
        "{} scanned, {}",
        output::plural(report.scanned, "message"),
        output::plural(total, "problem")
    );
    if fix {
        summary.push_str(&format!(", {repaired} repaired"));
    }
    summary.push('\n');
    let head = output::json(&MailDoctor {
        messages: report.scanned,
        findings: Vec::new(),
        remaining: open,
    });
    let in_flight = InFlight::of(&report);
    let failure = (open > 0).then(|| {
        CliError::refused(if fix || fixable == 0 {
            format!(
                "{} in the mail folder left for a person{}",
                output::plural(open - in_flight.count, "problem"),
                in_flight.note()
            )
        } else {
            format!(
                "{} found in the mail folder ({fixable} repairable with `chipset mail doctor --fix`){}",
                output::plural(open, "problem"),
                in_flight.note()
            )
        })
    });
    Ok(Output::streamed(move |out, json| {
        if json {
            Document::new(head, move |each| {
                while let Some(row) = found.next()? {
                    each(output::json(&MailFinding {
                        code: row.area,
                        problem: row.problem,
                        repaired: row.action.is_some(),
                    }))?;
                }
                Ok(())
            })
            .write(out)
        } else {
            while let Some(row) = found.next()? {
                let repaired = if row.action.is_some() {
                    " (repaired)"
                } else {
                    ""
                };
                writeln!(out, "{}{repaired}", row.problem)?;
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

/// Calls its argument with every finding's JSON document, in order.
type EachFinding = Box<dyn FnOnce(&mut dyn FnMut(Value) -> io::Result<()>) -> io::Result<()>>;

/// A JSON document: `head` (every field but the findings, its keys in
/// the order `serde_json` prints an object's), with the findings written
/// in place as they are read back.
struct Document {
    head: Value,
    findings: RefCell<Option<EachFinding>>,
}

impl Document {
    fn new(
        head: Value,
        findings: impl FnOnce(&mut dyn FnMut(Value) -> io::Result<()>) -> io::Result<()> + 'static,
    ) -> Self {
        Document {
            head,
            findings: RefCell::new(Some(Box::new(findings))),
        }
    }

    /// Writes the document as the output of a whole `Value` is printed:
    /// pretty, and a newline.
    fn write(self, out: &mut dyn Write) -> io::Result<()> {
        let mut ser = serde_json::Serializer::pretty(&mut *out);
        self.serialize(&mut ser).map_err(io::Error::other)?;
        out.write_all(b"\n")
    }
}

impl Serialize for Document {
    fn serialize<S: Serializer>(&self, ser: S) -> std::result::Result<S::Ok, S::Error> {
        let Value::Object(fields) = &self.head else {
            return self.head.serialize(ser);
        };
        let mut map = ser.serialize_map(Some(fields.len()))?;
        for (key, value) in fields {
            if key == "findings" {
                map.serialize_entry(key, &Findings(&self.findings))?;
            } else {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

/// The findings of a [`Document`], serialized as they come.
struct Findings<'a>(&'a RefCell<Option<EachFinding>>);

impl Serialize for Findings<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> std::result::Result<S::Ok, S::Error> {
        let mut seq = ser.serialize_seq(None)?;
        let Some(findings) = self.0.borrow_mut().take() else {
            return seq.end();
        };
        let mut failed = None;
        let read = findings(&mut |doc| {
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
