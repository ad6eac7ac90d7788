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

use std::time::Duration;

use chipset::Chipset;
use chipset_store::{DoctorMode, Report};

use crate::Ctx;
use crate::cli::DoctorArgs;
use crate::error::{CliError, Result};
use crate::output::{self, Cell, Output, Table, Tone};
use crate::view::{DoctorReport, Finding};

/// One problem found, and what was done about it (`None`: still there).
struct Row {
    area: String,
    problem: String,
    action: Option<String>,
}

/// Runs `chipset doctor`: [`Chipset::doctor`], rendered.
pub(crate) fn run(ctx: &Ctx, args: &DoctorArgs) -> Result<Output> {
    let fix = args.fix;
    let mode = if fix {
        DoctorMode::Fix
    } else {
        DoctorMode::Check
    };
    let checkup = Chipset::from_state(ctx.state.clone()).doctor(mode)?;
    let mut rows = Vec::new();
    let mut scanned = std::collections::BTreeMap::new();
    let mut in_flight = InFlight::default();
    for area in checkup.areas {
        let report = or_row(&mut rows, area.name, area.report);
        scanned.insert(area.name.to_owned(), report.as_ref().map(|r| r.scanned));
        let Some(report) = report else { continue };
        in_flight.add(&report);
        for f in report.findings {
            rows.push(Row {
                area: area.name.to_owned(),
                action: f.fix_line(),
                problem: f.message,
            });
        }
    }
    if checkup.removed_temps > 0 {
        rows.push(Row {
            area: "temps".to_owned(),
            problem: output::plural(checkup.removed_temps, "stale temp file"),
            action: Some("removed".to_owned()),
        });
    }
    // Without a fix: those outside `bus/`, whose doctor reports its own.
    for path in checkup.stale_temps {
        rows.push(Row {
            area: "temps".to_owned(),
            problem: format!("`{}`: stale temp file", path.display()),
            action: None,
        });
    }

    Ok(render(ctx, fix, &rows, scanned, &in_flight))
}

/// Returns a library doctor's report, or, when it could not finish (an
/// unreadable directory, a lock path that is a directory), records that as
/// an open problem of its area and returns `None`, so the other doctors still run.
fn or_row<T, E: Into<CliError>>(
    rows: &mut Vec<Row>,
    area: &str,
    result: std::result::Result<T, E>,
) -> Option<T> {
    match result {
        Ok(report) => Some(report),
        Err(e) => {
            rows.push(Row {
                area: area.to_owned(),
                problem: format!("could not finish: {}", e.into()),
                action: None,
            });
            None
        }
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

fn render(
    ctx: &Ctx,
    fix: bool,
    rows: &[Row],
    scanned: std::collections::BTreeMap<String, Option<usize>>,
    in_flight: &InFlight,
) -> Output {
    // Paths are shown relative to the state root.
    let root = format!("{}/", ctx.state.root().display());
    let short = |s: &str| s.replace(&root, "");
    let remaining = rows.iter().filter(|r| r.action.is_none()).count();
    let fixed = rows.len() - remaining;
    let mut table = Table::new(&["AREA", "STATE", "PROBLEM"]);
    let mut docs = Vec::new();
    for r in rows {
        let state = match &r.action {
            Some(_) => Cell::toned("fixed", Tone::Good),
            None => Cell::toned("open", Tone::Bad),
        };
        table.row(vec![
            r.area.as_str().into(),
            state,
            short(&r.problem).into(),
        ]);
        docs.push(Finding {
            area: r.area.clone(),
            problem: short(&r.problem),
            action: r.action.as_deref().map(short),
        });
    }
    // What was done goes on its own line below each fixed finding.
    let mut listing = String::new();
    for (i, line) in table.render(ctx.paint).lines().enumerate() {
        listing.push_str(line);
        listing.push('\n');
        if let Some(action) = i.checked_sub(1).and_then(|r| rows[r].action.as_deref()) {
            listing.push_str(&format!("    -> {}\n", short(action)));
        }
    }
    let mut text = if rows.is_empty() {
        String::new()
    } else {
        listing
    };
    text.push_str(&if rows.is_empty() {
        "clean: no problems found\n".to_owned()
    } else {
        format!(
            "{} found, {fixed} fixed, {remaining} remaining\n",
            output::plural(rows.len(), "problem")
        )
    });
    let doc = output::json(&DoctorReport {
        fix,
        scanned,
        findings: docs,
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
    Output::new(text, doc).with_failure(failure)
}
