//! The detail pane: what is behind the selected row (an agent's hook and
//! queues, a request's thread, an event queue, a reminder, a lease, a work
//! item), read
//! when the row is selected.

use chipset::Chipset;
use chipset::mail::MessageId;
use chipset::nudge::{Received, ReminderId};
use chipset::pool::ItemId;
use chipset::store::{AgentId, ReadOutcome, Timestamp};

use chipset_failure::{chain, plural};

use crate::model::{Snapshot, View, one_line, short_age};

/// How many entries of a list (inbox, events) the pane shows.
const LIST_CAP: usize = 12;

/// The pane's title and lines.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Detail {
    /// What it shows.
    pub title: String,
    /// One line each.
    pub lines: Vec<String>,
}

impl Detail {
    pub(crate) fn new(title: impl Into<String>) -> Self {
        Detail {
            title: one_line(title.into()),
            lines: Vec::new(),
        }
    }

    /// Adds a line; its control characters (what another agent wrote may
    /// hold escape sequences) are escaped, never sent to the terminal.
    pub(crate) fn line(&mut self, line: impl Into<String>) {
        self.lines.push(one_line(line.into()));
    }
}

/// Reads the detail of the row `key` of `view`. A key that does not name
/// a valid id (it came from a URL) is refused without touching a file.
pub fn detail(chipset: &Chipset, snapshot: &Snapshot, view: View, key: &str) -> Detail {
    let now = chipset.state().now();
    match view {
        View::Agents | View::Queues => match key.parse::<AgentId>() {
            Ok(agent) if view == View::Agents => agent_detail(chipset, now, &agent),
            Ok(agent) => queue_detail(chipset, now, &agent),
            Err(e) => refused(key, &e),
        },
        View::Requests => match key.parse::<MessageId>() {
            Ok(id) => thread_detail(chipset, now, &id),
            Err(e) => refused(key, &e),
        },
        View::Reminders => match key.parse::<ReminderId>() {
            Ok(id) => reminder_detail(chipset, now, &id),
            Err(e) => refused(key, &e),
        },
        View::Leases => {
            let mut d = Detail::new(format!("lease {key}"));
            match snapshot
                .table(View::Leases)
                .rows
                .iter()
                .find(|r| r.key == key)
            {
                Some(row) => {
                    for (c, v) in View::Leases.columns().iter().zip(&row.cells) {
                        d.line(format!("{}: {v}", c.to_lowercase()));
                    }
                }
                None => d.line("no such live lease"),
            }
            d
        }
        View::Pool => match key.parse::<ItemId>() {
            Ok(id) => crate::pool::detail(chipset, snapshot, &id),
            Err(e) => refused(key, &e),
        },
    }
}

fn refused(key: &str, e: &dyn std::error::Error) -> Detail {
    let mut d = Detail::new("nothing to show");
    let shown: String = key.chars().take(64).collect();
    d.line(format!("{shown:?} is not an id here: {e}"));
    d
}

fn agent_detail(chipset: &Chipset, now: Timestamp, agent: &AgentId) -> Detail {
    let mut d = Detail::new(format!("agent {agent}"));
    match chipset.hooks().read(agent) {
        Ok(ReadOutcome::Value(h)) => {
            d.line(format!(
                "hook: {} (generation {}, last activity {} ago at {})",
                h.state.status(),
                h.generation,
                short_age(now.since(h.last_activity)),
                h.last_activity
            ));
            if let Some(w) = h.state.work() {
                d.line(format!("  bead {}: {}", w.bead_id, w.title));
                d.line(format!(
                    "  assigned {} ago at {} by {}",
                    short_age(now.since(w.assigned_at)),
                    w.assigned_at,
                    w.assigned_by
                        .as_ref()
                        .map_or("-".to_owned(), ToString::to_string)
                ));
            }
        }
        Ok(ReadOutcome::Missing) => d.line("hook: none"),
        Ok(ReadOutcome::Corrupt(c)) => d.line(format!("hook: unreadable: {c}")),
        Ok(ReadOutcome::Unsupported(u)) => d.line(format!("hook: unsupported: {u}")),
        Err(e) => d.line(format!("hook: {}", chain(&e))),
    }
    // The latest nudge, read as the brief reads it: nothing is marked.
    let nudge = |state: &str, n: &chipset::nudge::Nudge| {
        let ago = short_age(now.since(n.timestamp));
        format!(
            "nudge ({state}): {} from {} {ago} ago: {}",
            n.kind, n.from, n.message
        )
    };
    match chipset.nudges().receive(agent) {
        Ok(ReadOutcome::Value(Received::New(n) | Received::Unsure { nudge: n, .. })) => {
            d.line(nudge("new", &n));
        }
        Ok(ReadOutcome::Value(Received::Seen(n))) => d.line(nudge("seen", &n)),
        Ok(ReadOutcome::Corrupt(c)) => d.line(format!("nudge: unreadable: {c}")),
        Ok(ReadOutcome::Unsupported(u)) => d.line(format!("nudge: unsupported: {u}")),
        Ok(_) => {}
        Err(e) => d.line(format!("nudge: {}", chain(&e))),
    }
    match chipset.directory().whois(agent) {
        Ok(info) => {
            let p = &info.profile;
            let roles: Vec<&str> = p.roles.iter().map(|r| r.as_str()).collect();
            d.line(format!(
                "profile: roles {}; last seen {} ago ({})",
                if roles.is_empty() {
                    "-".to_owned()
                } else {
                    roles.join(", ")
                },
                short_age(now.since(info.last_seen.at)),
                info.last_seen.source.as_str()
            ));
            let fields = [
                ("working on", &p.task),
                ("program", &p.program),
                ("model", &p.model),
                ("host", &p.host),
                ("note", &p.note),
            ];
            for (name, value) in fields {
                if let Some(v) = value {
                    d.line(format!("  {name}: {v}"));
                }
            }
        }
        Err(e) => d.line(format!("profile: {}", chain(&e))),
    }
    match chipset.mail().inbox_listing(agent) {
        Ok(listing) => {
            let messages = &listing.items;
            d.line(format!("inbox: {}", plural(messages.len(), "message")));
            // What could not be read first: a message may hide behind each.
            for bad in listing.unreadable() {
                d.line(format!("  unreadable: {bad}"));
            }
            for m in messages.iter().rev().take(LIST_CAP) {
                d.line(format!(
                    "  {} ago {} from {} [{}] {}",
                    short_age(now.since(m.created_at)),
                    m.kind,
                    m.from,
                    m.task(),
                    m.subject
                ));
            }
        }
        Err(e) => d.line(format!("inbox: {}", chain(&e))),
    }
    events(chipset, now, agent, &mut d);
    d
}

fn events(chipset: &Chipset, now: Timestamp, agent: &AgentId, d: &mut Detail) {
    match chipset.bus().pending(agent) {
        Ok(pending) => {
            let bad = match pending.unreadable.len() {
                0 => String::new(),
                n => format!(" and {n} unreadable"),
            };
            d.line(format!(
                "bus: {} pending{bad}",
                plural(pending.events.len(), "event")
            ));
            for e in pending.events.iter().take(LIST_CAP) {
                let mut payload = e.payload.to_string();
                if payload.len() > 80 {
                    let cut = (0..=80).rev().find(|i| payload.is_char_boundary(*i));
                    payload.truncate(cut.unwrap_or(0));
                    payload.push('…');
                }
                d.line(format!(
                    "  {} {} from {} {} ago {payload}",
                    e.priority.as_str(),
                    e.kind,
                    e.source,
                    short_age(now.since(e.created_at))
                ));
            }
            for (path, problem) in &pending.unreadable {
                d.line(format!("  unreadable: `{}`: {problem}", path.display()));
            }
        }
        Err(e) => d.line(format!("bus: {}", chain(&e))),
    }
}

fn queue_detail(chipset: &Chipset, now: Timestamp, agent: &AgentId) -> Detail {
    let mut d = Detail::new(format!("queue of {agent}"));
    match chipset.bus().presence(agent) {
        Ok(ReadOutcome::Value(p)) => d.line(format!("presence: {p:?}")),
        Ok(ReadOutcome::Missing) => d.line("presence: never registered"),
        Ok(_) => d.line("presence: unreadable"),
        Err(e) => d.line(format!("presence: {}", chain(&e))),
    }
    events(chipset, now, agent, &mut d);
    d
}

fn thread_detail(chipset: &Chipset, now: Timestamp, id: &MessageId) -> Detail {
    let mut d = Detail::new(format!("thread of {id}"));
    match chipset.mail().thread(id) {
        Ok(messages) => {
            for m in messages {
                let here = if m.id == *id { "▶" } else { " " };
                d.line(format!(
                    "{here} {} ago {} {} → {}: {}",
                    short_age(now.since(m.created_at)),
                    m.kind,
                    m.from,
                    m.to,
                    m.subject
                ));
                for body in m.body.lines().take(4) {
                    d.line(format!("    {body}"));
                }
            }
        }
        Err(e) => d.line(chain(&e)),
    }
    d
}

fn reminder_detail(chipset: &Chipset, now: Timestamp, id: &ReminderId) -> Detail {
    let mut d = Detail::new(format!("reminder {id}"));
    match chipset.reminders().get(id) {
        Ok(Some(r)) => {
            d.line(format!("kind: {} ({:?})", r.kind, r.severity));
            d.line(format!("source: {}:{}", r.source_type, r.source_id));
            d.line(format!(
                "opened {} ago at {}",
                short_age(now.since(r.created_at)),
                r.created_at
            ));
            if let Some(until) = r.snooze_until {
                d.line(format!("snoozed until {until}"));
            }
            d.line(format!("message: {}", r.message));
            if !r.actions.is_empty() {
                d.line(format!("actions: {}", r.actions.join(", ")));
            }
        }
        Ok(None) => d.line("no such reminder"),
        Err(e) => d.line(chain(&e)),
    }
    d
}

/// Returns true when `key` is an id of `view`'s rows (a URL can carry
/// anything; only a valid id goes near a file).
pub(crate) fn valid_key(view: View, key: &str) -> bool {
    match view {
        View::Agents | View::Queues => key.parse::<AgentId>().is_ok(),
        View::Requests => key.parse::<MessageId>().is_ok(),
        View::Reminders => key.parse::<ReminderId>().is_ok(),
        View::Leases => key.parse::<u64>().is_ok(),
        View::Pool => key.parse::<ItemId>().is_ok(),
    }
}
