//! `chipset doctor [--fix]`: every library's doctor in turn (hooks, nudges,
//! reminders, mail, bus, loop state), then stale temp files under the whole root.
//!
//! Without `--fix` nothing is changed. With it, each library repairs what it
//! can (quarantining, never deleting, bad files) and the store sweeps temp
//! files older than [`STALE_TEMP_AGE`]. The command fails (exit 1) when
//! problems remain: any finding without `--fix`, and with it the findings
//! the libraries leave alone by design (stray names, a response whose
//! request does not match), which need a person, and mail in flight (a
//! message younger than the grace period whose `sent` event is not there
//! yet: the doctor says when to run again rather than "clean", and exits 1,
//! since a doctor run then could still find it missing). A library doctor that cannot
//! finish (say, a lock path that is a directory) is reported as an open
//! problem of its area, and the others still run.

use std::time::Duration;

use chipset_bus::Bus;
use chipset_hook::Hooks;
use chipset_loop::LoopState;
use chipset_mail::Mail;
use chipset_nudge::Nudges;
use chipset_store::Channel;
use serde_json::json;

use crate::Ctx;
use crate::cli::DoctorArgs;
use crate::error::{CliError, Result};
use crate::output::{self, Cell, Output, Table, Tone};
use crate::remind;

/// Temp files older than this are left by a crashed writer.
pub(crate) const STALE_TEMP_AGE: Duration = Duration::from_secs(600);

/// One problem found, and what was done about it (`None`: still there).
struct Row {
    area: &'static str,
    problem: String,
    action: Option<String>,
}

/// Runs `chipset doctor`.
pub(crate) fn run(ctx: &Ctx, args: &DoctorArgs) -> Result<Output> {
    let fix = args.fix;
    let mut rows = Vec::new();
    let mut scanned = serde_json::Map::new();

    let hooks = Hooks::new(ctx.state.clone()).doctor(if fix {
        chipset_hook::DoctorMode::Fix
    } else {
        chipset_hook::DoctorMode::Check
    });
    let hooks = or_row(&mut rows, "hooks", hooks);
    scanned.insert("hooks".into(), json!(hooks.as_ref().map(|h| h.scanned)));
    for f in hooks.into_iter().flat_map(|h| h.findings) {
        let problem = match &f.problem {
            chipset_hook::Problem::Corrupt(reason) => format!("corrupt hook ({reason})"),
            chipset_hook::Problem::Unsupported(what) => {
                format!("holds {what}, unsupported by this version (left in place)")
            }
            chipset_hook::Problem::Stray => "not a hook file (left alone)".to_owned(),
            _ => "unusable".to_owned(),
        };
        rows.push(Row {
            area: "hooks",
            problem: format!("`{}`: {problem}", f.path.display()),
            action: f
                .quarantined
                .map(|q| format!("quarantined to `{}`, reset to empty", q.display())),
        });
    }

    let repair = if fix {
        chipset_nudge::Repair::Fix
    } else {
        chipset_nudge::Repair::ReportOnly
    };
    let nudge_report = or_row(
        &mut rows,
        "nudge",
        Nudges::new(ctx.state.clone()).doctor(repair),
    );
    scanned.insert(
        "nudge".into(),
        json!(nudge_report.as_ref().map(|r| r.scanned)),
    );
    if let Some(report) = nudge_report {
        rows.extend(nudge_rows("nudge", report));
    }
    let reminder_report = or_row(
        &mut rows,
        "reminders",
        remind::reminders(ctx).doctor(repair),
    );
    scanned.insert(
        "reminders".into(),
        json!(reminder_report.as_ref().map(|r| r.scanned)),
    );
    if let Some(report) = reminder_report {
        rows.extend(nudge_rows("reminders", report));
    }

    let mail = Mail::new(ctx.state.clone()).doctor(if fix {
        chipset_mail::DoctorMode::Fix
    } else {
        chipset_mail::DoctorMode::Check
    });
    let mail = or_row(&mut rows, "mail", mail);
    scanned.insert("mail".into(), json!(mail.as_ref().map(|m| m.messages)));
    let mut in_flight = InFlight::default();
    for f in mail.into_iter().flat_map(|m| m.findings) {
        in_flight.add(&f);
        let action = (fix && f.is_fixable()).then(|| mail_fix(&f).to_owned());
        rows.push(Row {
            area: "mail",
            problem: f.to_string(),
            action,
        });
    }

    let bus = Bus::new(ctx.state.clone()).doctor(if fix {
        chipset_bus::Repair::Fix
    } else {
        chipset_bus::Repair::ReportOnly
    });
    let bus = or_row(&mut rows, "bus", bus);
    scanned.insert("bus".into(), json!(bus.as_ref().map(|b| b.events_checked)));
    for f in bus.into_iter().flat_map(|b| b.findings) {
        let action = match &f.action {
            chipset_bus::Action::Quarantined(to) => {
                Some(format!("quarantined to `{}`", to.display()))
            }
            chipset_bus::Action::Removed => Some("removed".to_owned()),
            chipset_bus::Action::Truncated => Some("truncated".to_owned()),
            _ => None,
        };
        rows.push(Row {
            area: "bus",
            problem: format!(
                "`{}`: {}",
                f.file.path.display(),
                crate::bus::problem(&f.file.problem)
            ),
            action,
        });
    }

    let loops = LoopState::new(ctx.state.clone()).doctor(if fix {
        chipset_loop::DoctorMode::Fix
    } else {
        chipset_loop::DoctorMode::Check
    });
    let loops = or_row(&mut rows, "loop", loops);
    scanned.insert("loop".into(), json!(loops.as_ref().map(|l| l.scanned)));
    for f in loops.into_iter().flat_map(|l| l.findings) {
        let problem = match &f.problem {
            chipset_loop::Problem::Corrupt(reason) => format!("corrupt loop file ({reason})"),
            chipset_loop::Problem::Stray => "not a loop file (left alone)".to_owned(),
            chipset_loop::Problem::TornLog { offset, len } => {
                format!("torn last line at byte {offset} ({len} bytes)")
            }
            chipset_loop::Problem::BadLogLine { offset } => {
                format!("unreadable line at byte {offset}")
            }
            _ => "unusable".to_owned(),
        };
        let action = match (&f.quarantined, f.repaired) {
            (Some(q), _) => Some(format!("quarantined to `{}`", q.display())),
            (None, true) => Some("repaired".to_owned()),
            (None, false) => None,
        };
        rows.push(Row {
            area: "loop",
            problem: format!("`{}`: {problem}", f.path.display()),
            action,
        });
    }

    if fix {
        let removed = ctx.state.sweep_temps(STALE_TEMP_AGE)?;
        if removed > 0 {
            rows.push(Row {
                area: "temps",
                problem: output::plural(removed, "stale temp file"),
                action: Some("removed".to_owned()),
            });
        }
    } else {
        // The bus doctor reports the temps under `bus/` itself.
        let bus_dir = ctx.state.channel_path(Channel::Bus);
        for path in ctx.state.stale_temps(STALE_TEMP_AGE)? {
            if !path.starts_with(&bus_dir) {
                rows.push(Row {
                    area: "temps",
                    problem: format!("`{}`: stale temp file", path.display()),
                    action: None,
                });
            }
        }
    }

    Ok(render(ctx, fix, &rows, scanned, &in_flight))
}

/// Returns a library doctor's report, or, when it could not finish (an
/// unreadable directory, a lock path that is a directory), records that as
/// an open problem of its area and returns `None`, so the other doctors still run.
fn or_row<T, E: Into<CliError>>(
    rows: &mut Vec<Row>,
    area: &'static str,
    result: std::result::Result<T, E>,
) -> Option<T> {
    match result {
        Ok(report) => Some(report),
        Err(e) => {
            rows.push(Row {
                area,
                problem: format!("could not finish: {}", e.into()),
                action: None,
            });
            None
        }
    }
}

/// Says what [`chipset_mail::Mail::doctor`] does to fix a finding.
fn mail_fix(f: &chipset_mail::Finding) -> &'static str {
    use chipset_mail::Finding as F;
    match f {
        F::Corrupt { .. } => "quarantined",
        F::Duplicate { .. } => "extra copy quarantined",
        F::MissingReplyMarker { .. } => "reply index entry added",
        F::AnsweredRequest { .. } => "archived",
        F::Orphan { .. } => "moved to archive/orphan/",
        F::MissingSentEvent { .. } => "`sent` event appended (reconciled)",
        F::MissingArchivedEvent { .. } => "`archived` event appended (reconciled)",
        F::MissingSweptEvent { .. } => "`task-swept` event appended (reconciled)",
        F::TornManifestTail { .. } => {
            "torn line truncated (or, with bad lines, moved to `mail/.quarantine/`)"
        }
        F::BadManifestLine { .. } => "moved to `mail/.quarantine/`, every whole record kept",
        _ => "repaired",
    }
}

fn nudge_rows(area: &'static str, report: chipset_nudge::DoctorReport) -> Vec<Row> {
    report
        .findings
        .into_iter()
        .map(|f| {
            let problem = match &f.problem {
                chipset_nudge::Problem::Corrupt(reason) => format!("corrupt ({reason})"),
                chipset_nudge::Problem::Unfinished(what) => format!("unfinished: {what}"),
                chipset_nudge::Problem::Unsupported(what) => {
                    format!("holds {what}, unsupported by this version (left in place)")
                }
                chipset_nudge::Problem::StrayEntry => "not written by chipset (left alone)".into(),
                _ => "unusable".to_owned(),
            };
            let action = match &f.action {
                chipset_nudge::Action::Quarantined(to) => {
                    Some(format!("quarantined to `{}`", to.display()))
                }
                chipset_nudge::Action::Completed => Some("completed".to_owned()),
                _ => None,
            };
            Row {
                area,
                problem: format!("`{}`: {problem}", f.path.display()),
                action,
            }
        })
        .collect()
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
    pub(crate) fn add(&mut self, f: &chipset_mail::Finding) {
        if let Some(after) = f.check_after() {
            self.count += 1;
            self.wait = self.wait.max(after);
        }
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
    scanned: serde_json::Map<String, serde_json::Value>,
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
        table.row(vec![r.area.into(), state, short(&r.problem).into()]);
        docs.push(json!({
            "area": r.area,
            "problem": short(&r.problem),
            "action": r.action.as_deref().map(short),
        }));
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
    let doc = json!({
        "fix": fix,
        "scanned": scanned,
        "findings": docs,
        "fixed": fixed,
        "remaining": remaining,
        "in_flight": in_flight.count,
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
