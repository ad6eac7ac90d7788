//! `chipset status`: one screen, one line per agent, from the libraries'
//! cheap listings and counts ([`Hooks::list`], [`Nudges::receive`],
//! [`Mail::counts`], [`Bus::status`], [`Reminders::open_counts`]).
//!
//! [`Reminders::open_counts`]: chipset_nudge::Reminders::open_counts

use std::collections::{BTreeMap, BTreeSet};

use chipset_bus::{AgentStatus, Bus, Priority};
use chipset_hook::{HookRead, Hooks};
use chipset_mail::Mail;
use chipset_nudge::{Nudges, Received};
use chipset_store::{AgentId, ReadOutcome, Timestamp};
use serde_json::{Value, json};

use crate::Ctx;
use crate::error::{CliError, Result};
use crate::hook::status_cell;
use crate::output::{self, Cell, Output, Table, Tone};
use crate::remind;

/// Runs `chipset status`.
pub(crate) fn run(ctx: &Ctx) -> Result<Output> {
    let now = ctx.state.now();
    let hooks: BTreeMap<AgentId, HookRead> = Hooks::new(ctx.state.clone())
        .list()?
        .into_iter()
        .map(|e| (e.agent, e.read))
        .collect();
    let nudges = Nudges::new(ctx.state.clone());
    let nudge_agents: BTreeSet<AgentId> = nudges.agents()?.into_iter().collect();
    let inbox = Mail::new(ctx.state.clone()).counts()?.inbox;
    let bus: BTreeMap<AgentId, AgentStatus> = Bus::new(ctx.state.clone())
        .status()?
        .into_iter()
        .map(|s| (s.agent.clone(), s))
        .collect();
    let open = remind::reminders(ctx).open_counts()?;

    let agents: BTreeSet<&AgentId> = hooks
        .keys()
        .chain(&nudge_agents)
        .chain(inbox.keys())
        .chain(bus.keys())
        .collect();
    let mut table = Table::new(&["AGENT", "HOOK", "AGE", "BEAD", "NUDGE", "INBOX", "BUS"]);
    let mut rows = Vec::new();
    for agent in agents {
        let (hook_cells, hook_doc) = hook(now, hooks.get(agent));
        let (nudge_cell, nudge_doc) = if nudge_agents.contains(agent) {
            match nudges.receive(agent) {
                Ok(received) => nudge(&received),
                // One agent's unreadable nudge directory must not hide the screen.
                Err(e) => (
                    Cell::toned("error", Tone::Bad),
                    json!({"pending": null, "error": CliError::from(e).to_string()}),
                ),
            }
        } else {
            (Cell::toned("-", Tone::Dim), Value::Null)
        };
        let mail = inbox.get(agent).copied().unwrap_or(0);
        let (bus_cell, bus_doc) = bus_line(bus.get(agent));
        let mut cells = vec![agent.to_string().into()];
        cells.extend(hook_cells);
        cells.extend([nudge_cell, count_cell(mail, Tone::Warn), bus_cell]);
        table.row(cells);
        rows.push(json!({
            "agent": agent,
            "hook": hook_doc,
            "nudge": nudge_doc,
            "inbox": mail,
            "bus": bus_doc,
        }));
    }
    let total: usize = open.values().sum();
    let mut text = if table.is_empty() {
        "no agents\n".to_owned()
    } else {
        table.render(ctx.paint)
    };
    let by_kind: Vec<String> = open.iter().map(|(k, n)| format!("{k} {n}")).collect();
    text.push_str(&if total == 0 {
        "reminders: none open\n".to_owned()
    } else {
        format!("reminders: {total} open ({})\n", by_kind.join(", "))
    });
    let doc = json!({
        "agents": rows,
        "reminders": {"open": total, "by_kind": open},
    });
    Ok(Output::new(text, doc))
}

fn hook(now: Timestamp, read: Option<&HookRead>) -> (Vec<Cell>, Value) {
    let dash = || Cell::toned("-", Tone::Dim);
    match read {
        None | Some(HookRead::Missing) => (vec![dash(), dash(), dash()], json!({"status": "none"})),
        Some(HookRead::Corrupt(c)) => (
            vec![Cell::toned("corrupt", Tone::Bad), dash(), dash()],
            json!({"status": "corrupt", "error": c.to_string()}),
        ),
        Some(HookRead::Unsupported(u)) => (
            vec![Cell::toned("unsupported", Tone::Bad), dash(), dash()],
            json!({"status": "unsupported", "error": u.to_string()}),
        ),
        Some(HookRead::Value(h)) => {
            let bead = h
                .work()
                .map_or_else(dash, |w| Cell::plain(w.bead_id().to_string()));
            let doc = json!({
                "status": h.status(),
                "bead_id": h.work().map(|w| w.bead_id()),
                "last_activity": h.last_activity(),
                "age_ms": now.since(h.last_activity()).as_millis(),
                "generation": h.generation(),
            });
            let age = Cell::plain(output::age(now, h.last_activity()));
            (vec![status_cell(h.status()), age, bead], doc)
        }
    }
}

fn nudge(received: &ReadOutcome<Received>) -> (Cell, Value) {
    match received {
        ReadOutcome::Value(Received::New(n) | Received::Unsure { nudge: n, .. }) => {
            let tone = if n.kind.urgency() >= chipset_nudge::Urgency::Warning {
                Tone::Bad
            } else {
                Tone::Warn
            };
            (
                Cell::toned(n.kind.to_string(), tone),
                json!({"pending": true, "type": n.kind, "from": n.from}),
            )
        }
        ReadOutcome::Corrupt(c) => (
            Cell::toned("corrupt", Tone::Bad),
            json!({"pending": null, "error": c.to_string()}),
        ),
        ReadOutcome::Unsupported(u) => (
            Cell::toned("unsupported", Tone::Bad),
            json!({"pending": null, "error": u.to_string()}),
        ),
        _ => (Cell::toned("-", Tone::Dim), json!({"pending": false})),
    }
}

fn bus_line(status: Option<&AgentStatus>) -> (Cell, Value) {
    let Some(s) = status else {
        return (Cell::toned("-", Tone::Dim), Value::Null);
    };
    let total = s.counts.pending_total();
    let critical = s.counts.pending_at(Priority::Critical);
    let cell = if critical > 0 {
        Cell::toned(format!("{total} ({critical} critical)"), Tone::Bad)
    } else {
        count_cell(total, Tone::Warn)
    };
    let by_priority: BTreeMap<&str, usize> = Priority::ALL
        .iter()
        .map(|p| (p.as_str(), s.counts.pending_at(*p)))
        .collect();
    let presence = match &s.presence {
        ReadOutcome::Missing => "absent",
        ReadOutcome::Value(_) if s.live => "live",
        ReadOutcome::Value(_) => "stale",
        ReadOutcome::Corrupt(_) => "unreadable",
        ReadOutcome::Unsupported(_) => "unsupported",
    };
    let doc = json!({
        "pending": total,
        "by_priority": by_priority,
        "unreadable_names": s.counts.foreign,
        "presence": presence,
    });
    (cell, doc)
}

fn count_cell(n: usize, tone: Tone) -> Cell {
    if n == 0 {
        Cell::toned("0", Tone::Dim)
    } else {
        Cell::toned(n.to_string(), tone)
    }
}
