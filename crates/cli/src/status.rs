//! `chipset status`: one screen, one line per agent, rendered from the
//! view the library builds ([`Chipset::status`]), whose serialization is
//! the `--json` form.

use chipset::{BusLine, HookLine, NudgeLine, Status};

use crate::Ctx;
use crate::error::Result;
use crate::hook::status_cell;
use crate::output::{self, Cell, Output, Table, Tone};

/// Runs `chipset status`.
pub(crate) fn run(ctx: &Ctx) -> Result<Output> {
    let status = ctx.chipset.clone().status()?;
    let text = render(ctx, &status);
    let doc = serde_json::to_value(&status).unwrap_or_default();
    Ok(Output::new(text, doc))
}

fn render(ctx: &Ctx, status: &Status) -> String {
    let mut table = Table::new(&["AGENT", "HOOK", "AGE", "BEAD", "NUDGE", "INBOX", "BUS"]);
    for line in &status.agents {
        let mut cells = vec![line.agent.to_string().into()];
        cells.extend(hook(&line.hook));
        cells.extend([
            nudge(line.nudge.as_ref()),
            count_cell(line.inbox, Tone::Warn),
            bus(line.bus.as_ref()),
        ]);
        table.row(cells);
    }
    let mut text = if table.is_empty() {
        "no agents\n".to_owned()
    } else {
        table.render(ctx.paint)
    };
    text.push_str(&profiles(ctx, status));
    let reminders = &status.reminders;
    let by_kind: Vec<String> = reminders
        .by_kind
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    text.push_str(&if reminders.open == 0 {
        "reminders: none open\n".to_owned()
    } else {
        format!(
            "reminders: {} open ({})\n",
            reminders.open,
            by_kind.join(", ")
        )
    });
    if !status.leases.is_empty() {
        text.push_str(&format!("leases: {} live\n", status.leases.len()));
        let now = ctx.state.now();
        for lease in &status.leases {
            let line = chipset_mcp::view::LeaseRecord::of(lease, now).line();
            text.push_str(&format!("  {line}\n"));
        }
    }
    let pool = &status.pool;
    if !pool.is_empty() {
        text.push_str(&format!(
            "work: {} ready, {} claimed, {} blocked, {} deferred, {} done{}\n",
            pool.ready,
            pool.claimed,
            pool.blocked,
            pool.deferred,
            pool.done,
            match pool.unreadable_hooks {
                0 => String::new(),
                n => format!(" ({n} unreadable hooks: see `chipset doctor`)"),
            }
        ));
    }
    text
}

/// The registered agents' profiles, as `chipset agent list` shows them:
/// a second table under the first, only when an agent is registered, so
/// that the first stays within 80 columns.
fn profiles(ctx: &Ctx, status: &Status) -> String {
    let mut table = Table::new(&[
        "PROFILE", "ROLES", "PROGRAM", "MODEL", "HOST", "SEEN", "TASK",
    ]);
    let dim = |v: &Option<String>| {
        v.as_ref()
            .map_or_else(|| Cell::toned("-", Tone::Dim), |v| Cell::plain(v.clone()))
    };
    for line in &status.agents {
        let Some(p) = &line.profile else { continue };
        let roles: Vec<&str> = p.roles.iter().map(|r| r.as_str()).collect();
        let seen = p.last_seen.as_ref().map_or_else(
            || Cell::toned("-", Tone::Dim),
            |s| {
                Cell::plain(format!(
                    "{} ago ({})",
                    output::age(ctx.state.now(), s.at),
                    s.source.as_str()
                ))
            },
        );
        table.row(vec![
            line.agent.to_string().into(),
            dim(&(!roles.is_empty()).then(|| roles.join(","))),
            dim(&p.program),
            dim(&p.model),
            dim(&p.host),
            seen,
            dim(&p.task),
        ]);
    }
    if table.is_empty() {
        String::new()
    } else {
        table.render(ctx.paint)
    }
}

fn hook(line: &HookLine) -> Vec<Cell> {
    let dash = || Cell::toned("-", Tone::Dim);
    match line {
        HookLine::Corrupt(_) => vec![Cell::toned("corrupt", Tone::Bad), dash(), dash()],
        HookLine::Unsupported(_) => vec![Cell::toned("unsupported", Tone::Bad), dash(), dash()],
        HookLine::Held {
            status,
            bead_id,
            age,
            ..
        } => vec![
            status_cell(*status),
            Cell::plain(output::short_duration(*age)),
            bead_id
                .as_ref()
                .map_or_else(dash, |b| Cell::plain(b.to_string())),
        ],
        _ => vec![dash(), dash(), dash()],
    }
}

fn nudge(line: Option<&NudgeLine>) -> Cell {
    match line {
        Some(NudgeLine::Pending { kind, .. }) => {
            // An abort or a stall warning waiting: the top two urgencies.
            let tone = if matches!(kind.to_string().as_str(), "abort" | "stall_warning") {
                Tone::Bad
            } else {
                Tone::Warn
            };
            Cell::toned(kind.to_string(), tone)
        }
        Some(NudgeLine::Corrupt(_)) => Cell::toned("corrupt", Tone::Bad),
        Some(NudgeLine::Unsupported(_)) => Cell::toned("unsupported", Tone::Bad),
        Some(NudgeLine::Failed(_)) => Cell::toned("error", Tone::Bad),
        _ => Cell::toned("-", Tone::Dim),
    }
}

fn bus(line: Option<&BusLine>) -> Cell {
    let Some(line) = line else {
        return Cell::toned("-", Tone::Dim);
    };
    let critical = line.critical();
    if critical > 0 {
        Cell::toned(format!("{} ({critical} critical)", line.pending), Tone::Bad)
    } else {
        count_cell(line.pending, Tone::Warn)
    }
}

fn count_cell(n: usize, tone: Tone) -> Cell {
    if n == 0 {
        Cell::toned("0", Tone::Dim)
    } else {
        Cell::toned(n.to_string(), tone)
    }
}
