//! The operator's model: one [`Snapshot`] of the team, a table per
//! [`View`], built from the front door ([`Chipset::status`] and the
//! channels' listings). The terminal and the dashboard draw the same one.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use chipset::bus::Priority;
use chipset::directory::{AgentInfo, Filter};
use chipset::hook::HookStatus;
use chipset::mail::Message;
use chipset::nudge::ReminderFilter;
use chipset::store::{AgentId, Timestamp};
use chipset::{Chipset, HookLine, NudgeLine, PresenceLine};

use crate::error::{Error, Result};
use crate::requests::Requests;

/// A pending or active hook untouched this long is marked stalled: the
/// witness's default stall threshold.
pub const STALL_AFTER: Duration = Duration::from_secs(300);

/// One of the operator's views, each on its own key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum View {
    /// Who works on what: hook, bead, age, last seen, nudge, inbox and bus.
    Agents,
    /// Requests that wait for a reply, by task: what the commit gate says.
    Requests,
    /// The bus queues by priority.
    Queues,
    /// The open reminders.
    Reminders,
    /// The live path leases.
    Leases,
    // The work pool (`Chipset::pool()`) joins here when it lands: one
    // variant, its key in `View::key`, its columns, and a `pool` loader
    // beside `leases` below.
}

impl View {
    /// Every view, in tab order.
    pub const ALL: [View; 5] = [
        View::Agents,
        View::Requests,
        View::Queues,
        View::Reminders,
        View::Leases,
    ];

    /// Returns the key that shows this view.
    pub fn key(self) -> char {
        match self {
            View::Agents => 'a',
            View::Requests => 'r',
            View::Queues => 'b',
            View::Reminders => 'm',
            View::Leases => 'l',
        }
    }

    /// Returns the view's name, as in the dashboard's `?view=`.
    pub fn name(self) -> &'static str {
        match self {
            View::Agents => "agents",
            View::Requests => "requests",
            View::Queues => "bus",
            View::Reminders => "reminders",
            View::Leases => "leases",
        }
    }

    /// Returns the view named `name`, if any.
    pub fn from_name(name: &str) -> Option<View> {
        View::ALL.into_iter().find(|v| v.name() == name)
    }

    /// Returns the view shown by `key`, if any.
    pub fn from_key(key: char) -> Option<View> {
        View::ALL.into_iter().find(|v| v.key() == key)
    }

    /// Returns the view's title.
    pub fn title(self) -> &'static str {
        match self {
            View::Agents => "Agents",
            View::Requests => "Requests",
            View::Queues => "Bus",
            View::Reminders => "Reminders",
            View::Leases => "Leases",
        }
    }

    /// Returns the view's column headers.
    pub fn columns(self) -> &'static [&'static str] {
        match self {
            View::Agents => &[
                "AGENT",
                "HOOK",
                "BEAD",
                "AGE",
                "LAST SEEN",
                "NUDGE",
                "INBOX",
                "BUS",
                "NOTE",
            ],
            View::Requests => &["TASK", "FROM", "TO", "AGE", "SUBJECT", "REQUEST"],
            View::Queues => &[
                "AGENT", "PRESENCE", "CRITICAL", "HIGH", "NORMAL", "LOW", "PENDING", "NOTE",
            ],
            View::Reminders => &["KIND", "SEVERITY", "SOURCE", "AGE", "MESSAGE", "ID"],
            View::Leases => &["TOKEN", "HOLDER", "MODE", "PATHS", "EXPIRES", "REASON"],
        }
    }

    fn index(self) -> usize {
        match self {
            View::Agents => 0,
            View::Requests => 1,
            View::Queues => 2,
            View::Reminders => 3,
            View::Leases => 4,
        }
    }
}

/// How a row asks for attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Mark {
    /// Nothing to see.
    #[default]
    Plain,
    /// Worth a look (an unread nudge, a request waiting).
    Warn,
    /// Needs someone (a stalled agent, a corrupt file, a critical event).
    Alert,
}

/// One row of a view: its cells and the key its detail is loaded by.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Row {
    /// What names the row for [`crate::detail`]: an agent, a message id, a
    /// reminder id or a lease token.
    pub key: String,
    /// One cell per column.
    pub cells: Vec<String>,
    /// How it asks for attention.
    pub mark: Mark,
}

impl Row {
    fn new(key: impl Into<String>, cells: Vec<String>, mark: Mark) -> Self {
        Row {
            key: key.into(),
            cells,
            mark,
        }
    }

    /// Returns true when `needle` (lower case) is in one of the cells,
    /// ignoring case: the `/` search.
    pub fn matches(&self, needle: &str) -> bool {
        needle.is_empty() || self.cells.iter().any(|c| c.to_lowercase().contains(needle))
    }
}

/// One view's rows, and what could not be read for it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Table {
    /// The rows, in the view's order.
    pub rows: Vec<Row>,
    /// A line per thing that could not be read (never dropped in silence).
    pub problems: Vec<String>,
    /// A one-line summary (what the commit gate says, totals).
    pub summary: String,
}

impl Table {
    /// Returns the rows `filter` admits (a case-insensitive substring).
    pub fn filtered<'a>(&'a self, filter: &str) -> Vec<&'a Row> {
        let needle = filter.to_lowercase();
        self.rows.iter().filter(|r| r.matches(&needle)).collect()
    }
}

/// The whole team at one instant: a [`Table`] per [`View`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Snapshot {
    /// The state root.
    pub root: PathBuf,
    /// When it was taken (the state's clock).
    pub at: Timestamp,
    tables: [Table; 5],
}

impl Snapshot {
    /// Reads every view from `chipset`'s state root, as a fresh
    /// [`Loader`] does.
    ///
    /// # Errors
    ///
    /// As [`Loader::load`].
    pub fn load(chipset: &Chipset) -> Result<Snapshot> {
        Loader::new().load(chipset)
    }

    /// Returns `view`'s table.
    pub fn table(&self, view: View) -> &Table {
        &self.tables[view.index()]
    }
}

/// Reads [`Snapshot`]s, remembering between reads what lets the next one
/// read only what changed (the inboxes and the commit gates, see the open
/// requests view). Keep one per live view.
#[derive(Debug, Default)]
pub struct Loader {
    requests: Mutex<Requests>,
}

impl Loader {
    /// Returns a loader that remembers nothing yet.
    pub fn new() -> Self {
        Loader::default()
    }

    /// Reads every view from `chipset`'s state root.
    ///
    /// A view whose listing fails shows the failure as a problem line; the
    /// other views are still read.
    ///
    /// # Errors
    ///
    /// [`Error::RootGone`] when the state root no longer exists (a listing
    /// of a removed directory would read as an empty, healthy team).
    pub fn load(&self, chipset: &Chipset) -> Result<Snapshot> {
        self.read(chipset, true)
    }

    /// Reads every view but the open requests, whose table says it is
    /// being read: the quick first frame of a large state (reading every
    /// inbox the first time costs what all mail costs).
    ///
    /// # Errors
    ///
    /// As [`Loader::load`].
    pub fn load_quick(&self, chipset: &Chipset) -> Result<Snapshot> {
        self.read(chipset, false)
    }

    fn read(&self, chipset: &Chipset, requests: bool) -> Result<Snapshot> {
        let root = chipset.state().root().to_owned();
        check_root(&root)?;
        let now = chipset.state().now();
        let mut tables: [Table; 5] = Default::default();
        // The agents with mail in their inbox: where requests can wait.
        let mut inboxes: Vec<AgentId> = Vec::new();
        match chipset.status() {
            Ok(status) => {
                inboxes = status
                    .agents
                    .iter()
                    .filter(|l| l.inbox > 0)
                    .map(|l| l.agent.clone())
                    .collect();
                let roster = chipset.directory().list(&Filter::default());
                let (seen, mut problems) = match roster {
                    Ok(r) => {
                        let problems = r
                            .corrupt
                            .iter()
                            .map(|c| format!("unreadable profile: {c}"))
                            .collect();
                        (r.agents, problems)
                    }
                    Err(e) => (Vec::new(), vec![format!("agent directory: {}", chain(&e))]),
                };
                tables[0] = agents(now, &status, &seen);
                tables[0].problems.append(&mut problems);
                tables[2] = queues(&status);
                tables[4] = leases(now, &status.leases);
            }
            Err(e) => {
                let line = format!("status: {}", chain(&e));
                tables[0].problems.push(line.clone());
                tables[2].problems.push(line.clone());
                tables[4].problems.push(line);
            }
        }
        tables[1] = if requests {
            let mut cache = self
                .requests
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            cache.table(chipset, now, &inboxes)
        } else {
            Table {
                summary: "reading the inboxes…".to_owned(),
                ..Table::default()
            }
        };
        tables[3] = reminders(chipset, now);
        // The root may have gone while it was read.
        check_root(&root)?;
        Ok(Snapshot {
            root,
            at: now,
            tables,
        })
    }
}

/// Refuses a root that is gone or is no longer a directory.
pub(crate) fn check_root(root: &Path) -> Result<()> {
    match chipset::store::stat_outside(root) {
        Ok(Some(m)) if m.is_dir() => Ok(()),
        _ => Err(Error::RootGone {
            path: root.to_owned(),
        }),
    }
}

fn agents(now: Timestamp, status: &chipset::Status, seen: &[AgentInfo]) -> Table {
    let seen: BTreeMap<&AgentId, &AgentInfo> = seen.iter().map(|i| (&i.profile.name, i)).collect();
    let mut names: BTreeSet<&AgentId> = status.agents.iter().map(|l| &l.agent).collect();
    names.extend(seen.keys().copied());
    let lines: BTreeMap<&AgentId, &chipset::AgentLine> =
        status.agents.iter().map(|l| (&l.agent, l)).collect();
    let mut table = Table::default();
    let mut stalled = 0;
    for agent in names {
        let line = lines.get(agent);
        let mut notes = Vec::new();
        let mut mark = Mark::Plain;
        let (hook, bead, age) = match line.map(|l| &l.hook) {
            None | Some(HookLine::None) => ("-".to_owned(), "-".to_owned(), "-".to_owned()),
            Some(HookLine::Held {
                status: s,
                bead_id,
                age,
                ..
            }) => {
                if matches!(s, HookStatus::Pending | HookStatus::Active) && *age >= STALL_AFTER {
                    notes.push("STALLED");
                    mark = Mark::Alert;
                    stalled += 1;
                }
                (
                    s.to_string(),
                    bead_id.as_ref().map_or("-".to_owned(), ToString::to_string),
                    short_age(*age),
                )
            }
            Some(HookLine::Corrupt(_)) => {
                notes.push("corrupt hook");
                mark = Mark::Alert;
                ("corrupt".to_owned(), "?".to_owned(), "-".to_owned())
            }
            Some(_) => {
                notes.push("unsupported hook");
                mark = Mark::Alert;
                ("unsupported".to_owned(), "?".to_owned(), "-".to_owned())
            }
        };
        let last_seen = seen.get(agent).map_or("-".to_owned(), |i| {
            format!(
                "{} ({})",
                short_age(now.since(i.last_seen.at)),
                i.last_seen.source.as_str()
            )
        });
        let nudge = match line.and_then(|l| l.nudge.as_ref()) {
            None | Some(NudgeLine::None) => "-".to_owned(),
            Some(NudgeLine::Pending { kind, from }) => {
                mark = mark.max_with(Mark::Warn);
                format!("{kind} from {from}")
            }
            Some(_) => {
                notes.push("unreadable nudge");
                mark = Mark::Alert;
                "?".to_owned()
            }
        };
        let inbox = line.map_or(0, |l| l.inbox);
        let bus = match line.and_then(|l| l.bus.as_ref()) {
            None => "-".to_owned(),
            Some(b) => {
                if b.critical() > 0 {
                    notes.push("critical");
                    mark = Mark::Alert;
                }
                b.pending.to_string()
            }
        };
        table.rows.push(Row::new(
            agent.to_string(),
            vec![
                agent.to_string(),
                hook,
                bead,
                age,
                last_seen,
                nudge,
                inbox.to_string(),
                bus,
                notes.join(", "),
            ],
            mark,
        ));
    }
    table.summary = format!(
        "{} agents, {} stalled, {} open reminders",
        table.rows.len(),
        stalled,
        status.reminders.open
    );
    table
}

impl Mark {
    fn max_with(self, other: Mark) -> Mark {
        match (self, other) {
            (Mark::Alert, _) | (_, Mark::Alert) => Mark::Alert,
            (Mark::Warn, _) | (_, Mark::Warn) => Mark::Warn,
            _ => Mark::Plain,
        }
    }
}

fn queues(status: &chipset::Status) -> Table {
    let mut table = Table::default();
    let mut total = 0;
    for line in &status.agents {
        let Some(bus) = &line.bus else { continue };
        total += bus.pending;
        let count = |p: Priority| bus.by_priority.get(p.as_str()).copied().unwrap_or(0);
        let presence = match bus.presence {
            PresenceLine::Absent => "absent",
            PresenceLine::Live => "live",
            PresenceLine::Stale => "stale",
            PresenceLine::Unreadable => "unreadable",
            PresenceLine::Unsupported => "unsupported",
            _ => "?",
        };
        let mut mark = if bus.pending > 0 {
            Mark::Warn
        } else {
            Mark::Plain
        };
        let mut note = String::new();
        if bus.critical() > 0 {
            mark = Mark::Alert;
        }
        if bus.unreadable_names > 0 {
            mark = Mark::Alert;
            note = format!("{} unreadable names", bus.unreadable_names);
        }
        let mut cells = vec![line.agent.to_string(), presence.to_owned()];
        cells.extend(Priority::ALL.iter().map(|p| count(*p).to_string()));
        cells.push(bus.pending.to_string());
        cells.push(note);
        table
            .rows
            .push(Row::new(line.agent.to_string(), cells, mark));
    }
    table.summary = format!("{} queues, {} events pending", table.rows.len(), total);
    table
}

fn leases(now: Timestamp, leases: &[chipset::lease::Lease]) -> Table {
    let mut table = Table::default();
    for l in leases {
        let paths: Vec<String> = l.paths.iter().map(ToString::to_string).collect();
        table.rows.push(Row::new(
            l.token.to_string(),
            vec![
                l.token.to_string(),
                l.holder.to_string(),
                l.mode.as_str().to_owned(),
                paths.join(" "),
                format!("in {}", short_age(l.expires_at.since(now))),
                l.reason.clone(),
            ],
            Mark::Plain,
        ));
    }
    table.summary = format!("{} live leases", table.rows.len());
    table
}

pub(crate) fn request_row(now: Timestamp, m: &Message) -> Row {
    Row::new(
        m.id.to_string(),
        vec![
            m.task().to_string(),
            m.from.to_string(),
            m.to.to_string(),
            short_age(now.since(m.created_at)),
            m.subject.to_owned(),
            m.id.to_string(),
        ],
        Mark::Warn,
    )
}

fn reminders(chipset: &Chipset, now: Timestamp) -> Table {
    let mut table = Table::default();
    match chipset.reminders().list_open(&ReminderFilter::default()) {
        Ok(listing) => {
            for r in &listing.reminders {
                table.rows.push(Row::new(
                    r.id.to_string(),
                    vec![
                        r.kind.clone(),
                        format!("{:?}", r.severity).to_lowercase(),
                        format!("{}:{}", r.source_type, r.source_id),
                        short_age(now.since(r.created_at)),
                        r.message.clone(),
                        r.id.to_string(),
                    ],
                    Mark::Warn,
                ));
            }
            for c in &listing.corrupt {
                table.problems.push(format!("unreadable reminder: {c}"));
            }
            for u in &listing.unsupported {
                table.problems.push(format!("unsupported reminder: {u}"));
            }
        }
        Err(e) => table.problems.push(format!("reminders: {}", chain(&e))),
    }
    table.summary = format!("{} open reminders", table.rows.len());
    table
}

/// Returns `d` in its two largest units: `42s`, `4m12s`, `2h03m`, `3d04h`.
pub fn short_age(d: Duration) -> String {
    let s = d.as_secs();
    let mut out = String::new();
    let _ = match s {
        0..60 => write!(out, "{s}s"),
        60..3600 => write!(out, "{}m{:02}s", s / 60, s % 60),
        3600..86_400 => write!(out, "{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => write!(out, "{}d{:02}h", s / 86_400, (s % 86_400) / 3600),
    };
    out
}

/// Returns the error and its sources joined by `: `.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let next = e.to_string();
        if !text.ends_with(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_are_short() {
        assert_eq!(short_age(Duration::from_secs(42)), "42s");
        assert_eq!(short_age(Duration::from_secs(252)), "4m12s");
        assert_eq!(short_age(Duration::from_secs(7380)), "2h03m");
        assert_eq!(short_age(Duration::from_secs(273_600)), "3d04h");
    }

    #[test]
    fn views_round_trip_by_key_and_name() {
        for v in View::ALL {
            assert_eq!(View::from_key(v.key()), Some(v));
            assert_eq!(View::from_name(v.name()), Some(v));
            assert_eq!(View::ALL[v.index()], v);
        }
        assert_eq!(View::from_name("../../etc/passwd"), None);
    }
}
