//! `chipset bus ...`: [`chipset_bus::Bus`] from a shell.
//!
//! `bus wait` follows the waiter's documented loop (make the waiter, then
//! read the queue, then wait), so an event published between two `wait`
//! calls is never missed: it returns at once when events are pending, and
//! otherwise blocks until one arrives or the timeout passes. A timeout is
//! not a failure: it exits 0 with no text (`"timed_out": true` in JSON).
//!
//! `bus prune` is the operator's upkeep: [`Bus::prune`] for one agent or
//! every agent with a bus folder, a line each.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use chipset_bus::{
    Bus, ControlOp, Event, EventId, NewEvent, Occasion, Pending, Presence, Problem, Resource,
};
use chipset_mcp::view::{Acked, BadEntry, Events, Published};
use chipset_store::{AgentId, ErrorKind, ReadOutcome};
use serde_json::Value;

use crate::Ctx;
use crate::cli::{BusCommand, ControlCommand, PruneArgs, agent_or_env};
use crate::error::{CliError, Result};
use crate::output::{self, Cell, Output, Table, Tone};
use crate::view::{AgentFailed, AgentPruned, BusPruned, PresenceView, Started};

/// The longest single wait handed to the waiter (its deadline must fit an `Instant`).
const WAIT_SLICE: Duration = Duration::from_secs(3600);

/// Runs one bus command.
pub(crate) fn run(ctx: &Ctx, command: BusCommand) -> Result<Output> {
    let bus = ctx.chipset.bus().clone();
    match command {
        BusCommand::Publish {
            to,
            source,
            kind,
            priority,
            dedup_key,
            payload,
            id,
        } => {
            let mut event = NewEvent::new(source, kind);
            if let Some(id) = id {
                event = event.with_id(id);
            }
            if let Some(priority) = priority {
                event = event.with_priority(priority);
            }
            if let Some(key) = dedup_key {
                event = event.with_dedup_key(key);
            }
            if let Some(payload) = payload {
                event = event.with_payload(payload);
            }
            let view = Published::from(bus.publish(&to, &event)?);
            let doc = output::json(&view);
            Ok(match view {
                Published::Delivered { event } => Output::new(format!("{}\n", event.id), doc),
                Published::Duplicate {
                    key,
                    original,
                    accepted_at,
                } => Output::new("", doc).with_note(format!(
                    "duplicate: key `{key}` was accepted for `{to}` at {accepted_at} \
                     (event {original}); nothing was published"
                )),
            })
        }
        BusCommand::Pending { who } => {
            let agent = who.agent()?;
            let pending = bus.pending(&agent)?;
            Ok(listing(ctx, &agent, &pending, None).0)
        }
        BusCommand::Ack {
            first,
            event_id,
            agent_opt,
        } => {
            // `ack AGENT EVENT_ID`, or `ack EVENT_ID` with the agent from
            // --agent or $CHIPSET_AGENT.
            let (agent, event_id) = match event_id {
                Some(_) if agent_opt.is_some() => {
                    return Err(CliError::usage(
                        "the agent twice: give AGENT or --agent, not both",
                    ));
                }
                Some(event_id) => (
                    AgentId::new(&first).map_err(|e| invalid("[AGENT]", &first, &e))?,
                    EventId::new(&event_id).map_err(|e| invalid("<EVENT_ID>", &event_id, &e))?,
                ),
                None => (
                    agent_or_env(agent_opt)?,
                    EventId::new(&first).map_err(|e| invalid("<EVENT_ID>", &first, &e))?,
                ),
            };
            let acked = bus.ack(&agent, &event_id)?;
            let view = Acked::of(&agent, &event_id, acked);
            let text = match acked {
                true => format!("acked {event_id}\n"),
                false => format!("{event_id} was acknowledged already\n"),
            };
            Ok(Output::new(text, output::json(&view)))
        }
        BusCommand::Wait { who, timeout } => wait(ctx, &bus, &who.agent()?, timeout),
        BusCommand::Start { who, pid } => {
            let agent = who.agent()?;
            // Never this command's own pid: it exits as soon as it prints.
            let pid = pid.unwrap_or_else(std::os::unix::process::parent_id);
            let startup = bus.start(&agent, pid)?;
            let (mut out, events) = listing(ctx, &agent, &startup.pending, None);
            let (word, prev) = presence_words(ctx, &bus, &startup.previous);
            let head = format!(
                "started {agent} (pid {}); before: {word}{prev}\n",
                startup.presence.pid
            );
            out.text = format!("{head}{}", out.text);
            out.json = output::json(&Started {
                events,
                previous: PresenceView::of(&bus, &startup.previous),
                presence: startup.presence,
            });
            Ok(out)
        }
        BusCommand::Presence { who } => {
            let agent = who.agent()?;
            let state = bus.presence(&agent)?;
            let (word, detail) = presence_words(ctx, &bus, &state);
            let out = Output::new(
                format!("{agent}: {word}{detail}\n"),
                output::json(&PresenceView::of(&bus, &state)),
            );
            Ok(match &state {
                ReadOutcome::Corrupt(c) => out.with_failure(Some(CliError::new(
                    ErrorKind::Corrupt,
                    format!(
                        "the presence file of `{agent}` is unreadable ({c}); `chipset doctor --fix` quarantines it"
                    ),
                ))),
                ReadOutcome::Unsupported(u) => out.with_failure(Some(CliError::new(
                    ErrorKind::Unsupported,
                    format!("{u}; `chipset doctor` names it"),
                ))),
                _ => out,
            })
        }
        BusCommand::Control(command) => {
            let (args, op) = match command {
                ControlCommand::Register(a) => (a, ControlOp::Register),
                ControlCommand::Unregister(a) => (a, ControlOp::Unregister),
            };
            let agent = args.who.agent()?;
            bus.control(&agent, op, &Resource::new(&args.kind, &args.target))?;
            // Logged: a failure to apply it is an unknown outcome (the
            // same command again logs and applies it; applying is
            // idempotent), never "nothing changed".
            let registry = bus.apply_control(&agent).map_err(|e| {
                let e = CliError::from(e);
                let then = match e.kind() {
                    ErrorKind::Corrupt | ErrorKind::Unsupported => {
                        "run `chipset doctor`, then the command again"
                    }
                    _ => "run it again",
                };
                CliError::new(
                    ErrorKind::OutcomeUnknown,
                    format!(
                        "the control command is logged, but the registry of `{agent}` \
                         was not updated ({e}): {then}"
                    ),
                )
            })?;
            let mut table = Table::new(&["KIND", "TARGET"]);
            for r in registry.resources.keys() {
                table.row(vec![r.kind.clone().into(), r.target.clone().into()]);
            }
            let text = if table.is_empty() {
                format!("no resources registered for {agent}\n")
            } else {
                table.render(ctx.paint)
            };
            Ok(Output::new(text, output::json(&registry)))
        }
        BusCommand::Nag { who, poll } => {
            let agent = who.agent()?;
            let occasion = if poll {
                Occasion::Poll
            } else {
                Occasion::Pause
            };
            let due = bus.due_reminders(&agent, occasion)?;
            let (mut out, _) = listing_of(ctx, &agent, &due, &BTreeMap::new(), None);
            if due.is_empty() {
                out.text = format!("nothing due for a reminder for {agent}\n");
            }
            Ok(out)
        }
        BusCommand::Prune(args) => prune(ctx, &bus, &args),
    }
}

/// `bus prune`: each agent's (or the one named) processed events and
/// de-duplication records beyond the limits. Nothing is touched without
/// a limit. An agent whose prune fails does not stop the others: the
/// command prints what it pruned, lists the failures (`failed` in JSON),
/// and exits as the first failure does; the same command again is safe.
fn prune(ctx: &Ctx, bus: &Bus, args: &PruneArgs) -> Result<Output> {
    let Some(retention) = args.retention() else {
        return Err(CliError::usage(
            "name at least one limit: --keep, --max-bytes, --older-than or \
             --dedup-older-than (try --help)",
        ));
    };
    let agents = match &args.agent {
        Some(agent) => vec![agent.clone()],
        None => bus.agents()?,
    };
    let mut view = BusPruned {
        agents: Vec::new(),
        failed: Vec::new(),
    };
    let mut first_failure: Option<(AgentId, CliError)> = None;
    for agent in agents {
        match bus.prune(&agent, &retention) {
            Ok(pruned) => view.agents.push(AgentPruned::of(agent, pruned)),
            Err(e) => {
                let e = CliError::from(e);
                view.failed.push(AgentFailed::of(agent.clone(), &e));
                first_failure.get_or_insert((agent, e));
            }
        }
    }
    let mut table = Table::new(&["AGENT", "EVENTS", "BYTES", "DEDUP"]);
    for a in &view.agents {
        table.row(vec![
            a.agent.as_str().into(),
            a.events.to_string().into(),
            a.bytes.to_string().into(),
            a.dedup_records.to_string().into(),
        ]);
    }
    let text = if table.is_empty() && view.failed.is_empty() {
        "no agent has a bus folder: nothing to prune\n".to_owned()
    } else {
        table.render(ctx.paint)
    };
    let failure = first_failure.map(|(agent, e)| {
        let more = match view.failed.len() - 1 {
            0 => String::new(),
            others => format!(
                " (and {} failed)",
                chipset_failure::plural(others, "other agent")
            ),
        };
        CliError::new(e.kind(), format!("bus prune of {agent}: {e}{more}"))
    });
    Ok(Output::new(text, output::json(&view)).with_failure(failure))
}

/// Describes a presence in a word and a detail.
fn presence_words(ctx: &Ctx, bus: &Bus, state: &ReadOutcome<Presence>) -> (&'static str, String) {
    let now = ctx.state.now();
    let seen = |p: &Presence| {
        format!(
            " (pid {}, last seen {} ago)",
            p.pid,
            output::age(now, p.last_seen)
        )
    };
    match state {
        ReadOutcome::Missing => ("absent", String::new()),
        ReadOutcome::Value(p) => (liveness(bus, p), seen(p)),
        ReadOutcome::Corrupt(c) => ("unreadable", format!(" ({c})")),
        ReadOutcome::Unsupported(u) => ("unsupported", format!(" ({u})")),
    }
}

/// Names the bus's judgement of a presence: `live` or `stale`.
fn liveness(bus: &Bus, p: &Presence) -> &'static str {
    if bus.is_live(p) { "live" } else { "stale" }
}

fn wait(ctx: &Ctx, bus: &Bus, agent: &AgentId, timeout: Option<Duration>) -> Result<Output> {
    // No timeout, or one too large for an `Instant`: wait forever, a slice at a time.
    let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
    let mut waiter = bus.waiter(agent)?;
    let mut pending = bus.pending(agent)?;
    while pending.is_empty() {
        let slice = deadline.map_or(WAIT_SLICE, |d| {
            d.saturating_duration_since(Instant::now()).min(WAIT_SLICE)
        });
        if !waiter.wait(slice)?.is_empty() {
            pending = bus.pending(agent)?;
        } else if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(listing(ctx, agent, &pending, Some(true)).0);
        }
    }
    Ok(listing(ctx, agent, &pending, Some(false)).0)
}

/// Renders pending events (and unreadable queue files, which fail the
/// command after the listing), and returns their view too. `timed_out` is
/// set for `bus wait`.
fn listing(
    ctx: &Ctx,
    agent: &AgentId,
    pending: &Pending,
    timed_out: Option<bool>,
) -> (Output, Events) {
    listing_of(ctx, agent, &pending.events, &pending.unreadable, timed_out)
}

fn listing_of(
    ctx: &Ctx,
    agent: &AgentId,
    events: &[Event],
    bad: &BTreeMap<PathBuf, Problem>,
    timed_out: Option<bool>,
) -> (Output, Events) {
    let now = ctx.state.now();
    let mut table = Table::new(&["ID", "PRIORITY", "SOURCE", "KIND", "AGE", "PAYLOAD"]);
    for e in events {
        let tone = match e.priority {
            chipset_bus::Priority::Critical => Tone::Bad,
            chipset_bus::Priority::High => Tone::Warn,
            chipset_bus::Priority::Low => Tone::Dim,
            _ => Tone::Plain,
        };
        let payload = match &e.payload {
            Value::Null => String::new(),
            v => v.to_string(),
        };
        table.row(vec![
            e.id.to_string().into(),
            Cell::toned(e.priority.as_str(), tone),
            e.source.as_str().into(),
            e.kind.as_str().into(),
            output::age(now, e.created_at).into(),
            payload.into(),
        ]);
    }
    let text = match timed_out {
        Some(true) => String::new(),
        _ if table.is_empty() => format!("no pending events for {agent}\n"),
        _ => table.render(ctx.paint),
    };
    let view = Events {
        events: events.to_vec(),
        unreadable: bad.iter().map(BadEntry::from).collect(),
        total: None,
        timed_out,
    };
    let failure = CliError::unreadable_queue(agent, bad);
    let out = Output::new(text, output::json(&view)).with_failure(failure);
    (out, view)
}

/// A usage error for an argument parsed after clap, worded as clap words
/// its own.
fn invalid(arg: &str, value: &str, e: &chipset_store::Error) -> CliError {
    CliError::usage(format!(
        "invalid value '{value}' for '{arg}': {e} (try --help)"
    ))
}
