//! The operator's model: one [`Snapshot`] of the team, a table per
//! [`View`], built from the channels' listings as [`Reads`] keeps them. The
//! terminal and the dashboard draw the same one.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use chipset::Chipset;
use chipset::bus::{AgentStatus, Priority};
use chipset::directory::AgentInfo;
use chipset::hook::HookStatus;
use chipset::nudge::Received;
use chipset::store::{AgentId, ReadOutcome, Timestamp};
use chipset_failure::plural;

use crate::error::{Error, Result};
use crate::reads::{Area, Reads};
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
    /// The work pool: items by state (claimed, ready, blocked, deferred,
    /// done lately).
    Pool,
}

impl View {
    /// Every view, in tab order.
    pub const ALL: [View; 6] = [
        View::Agents,
        View::Requests,
        View::Queues,
        View::Reminders,
        View::Leases,
        View::Pool,
    ];

    /// Returns the key that shows this view.
    pub fn key(self) -> char {
        match self {
            View::Agents => 'a',
            View::Requests => 'r',
            View::Queues => 'b',
            View::Reminders => 'm',
            View::Leases => 'l',
            View::Pool => 'w',
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
            View::Pool => "pool",
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
            View::Pool => "Pool",
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
            View::Pool => &["ITEM", "STATE", "PRI", "WHO", "SINCE", "TITLE", "NOTE"],
        }
    }

    fn index(self) -> usize {
        match self {
            View::Agents => 0,
            View::Requests => 1,
            View::Queues => 2,
            View::Reminders => 3,
            View::Leases => 4,
            View::Pool => 5,
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
    /// A row of `cells`, each on one line: a control character another
    /// agent wrote (an escape sequence in a message) shows as its escape,
    /// never reaching the terminal.
    pub(crate) fn new(key: impl Into<String>, cells: Vec<String>, mark: Mark) -> Self {
        Row {
            key: key.into(),
            cells: cells.into_iter().map(one_line).collect(),
            mark,
        }
    }

    /// Returns true when `needle` (lower case) is in one of the cells,
    /// ignoring case: the `/` search.
    pub fn matches(&self, needle: &str) -> bool {
        needle.is_empty() || self.cells.iter().any(|c| c.to_lowercase().contains(needle))
    }
}

/// Returns `text` with its control characters escaped ([`view::one_line`]).
///
/// [`view::one_line`]: chipset_mcp::view::one_line
pub(crate) fn one_line(text: String) -> String {
    match chipset_mcp::view::one_line(&text) {
        std::borrow::Cow::Borrowed(_) => text,
        escaped => escaped.into_owned(),
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
    /// Whether the view's listing could not be read at all (or is not
    /// read yet): its count is unknown, never "0".
    pub(crate) unread: bool,
}

impl Table {
    /// Returns a table that only says `what` cannot be read, and why.
    pub(crate) fn unread(what: &str, why: String) -> Table {
        Table {
            problems: vec![why],
            summary: format!("the {what} cannot be read"),
            unread: true,
            ..Table::default()
        }
    }

    /// Returns how many rows the view holds, as its tab shows it: `?` when
    /// its listing could not be read.
    pub(crate) fn count(&self) -> String {
        if self.unread {
            "?".to_owned()
        } else {
            self.rows.len().to_string()
        }
    }

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
    /// The folder mail is kept in when it is not `mail/` under the root
    /// (a nubos-pilot project's `.nubos-pilot/messages`).
    pub mail: Option<PathBuf>,
    /// When it was taken (the state's clock).
    pub at: Timestamp,
    tables: [Table; 6],
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
/// read only what changed: each area's last read under the stamps of its
/// directories, each inbox and commit gate (see the open requests view).
/// Keep one per live view.
#[derive(Debug, Default)]
pub struct Loader {
    reads: Mutex<Reads>,
    requests: Mutex<Requests>,
    /// Whether the last load found anything changed.
    changed: std::sync::atomic::AtomicBool,
}

impl Loader {
    /// Returns a loader that remembers nothing yet.
    pub fn new() -> Self {
        Loader::default()
    }

    /// Returns true when the last load found something changed under the
    /// root since the load before (always after the first): false means it
    /// read no file, and what is behind a row (a [`crate::detail`]) need
    /// not be read again either.
    pub fn changed(&self) -> bool {
        self.changed.load(std::sync::atomic::Ordering::Relaxed)
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
        let mut reads = self
            .reads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let changed = reads.refresh(chipset, now);
        self.changed
            .store(!changed.is_empty(), std::sync::atomic::Ordering::Relaxed);
        let mut tables: [Table; 6] = Default::default();
        tables[0] = agents(chipset, now, &reads);
        tables[2] = queues(chipset, &reads);
        tables[4] = match &reads.leases {
            Some(Ok(all)) => leases(now, all),
            Some(Err(e)) => Table::unread("leases", format!("leases: {e}")),
            None => Table::default(),
        };
        tables[1] = if requests {
            let mut cache = self
                .requests
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            cache.of_inboxes(chipset, now, reads.inboxes.as_ref(), &changed)
        } else {
            Table {
                summary: "reading the inboxes…".to_owned(),
                // Not read yet: how many there are is unknown.
                unread: true,
                ..Table::default()
            }
        };
        tables[3] = reminders(now, &reads);
        tables[5] = crate::pool::table(now, &reads);
        drop(reads);
        // The root may have gone while it was read.
        check_root(&root)?;
        Ok(Snapshot {
            root,
            mail: chipset.mail_folder().map(|f| f.root().to_owned()),
            at: now,
            tables,
        })
    }
}

/// Refuses a root that is gone or is no longer a directory.
pub(crate) fn check_root(root: &Path) -> Result<()> {
    match chipset::store::StateDir::stat_outside(root) {
        Ok(Some(m)) if m.is_dir() => Ok(()),
        _ => Err(Error::RootGone {
            path: root.to_owned(),
        }),
    }
}

fn agents(chipset: &Chipset, now: Timestamp, reads: &Reads) -> Table {
    let mut table = Table::default();
    // An area that could not be read says so in each of its cells: `-`
    // and `0` would tell the operator nothing is there.
    let hooks = area(&reads.hooks, "hooks", &mut table.problems);
    let nudges = area(&reads.nudges, "nudges", &mut table.problems);
    let inboxes = area(&reads.inboxes, "mail", &mut table.problems);
    let bus: Option<BTreeMap<&AgentId, BusLine>> = area(&reads.bus, "bus", &mut table.problems)
        .map(|all| {
            all.iter()
                .map(|s| (&s.agent, BusLine::of(chipset, s)))
                .collect()
        });
    let roster = area(&reads.roster, "agent directory", &mut table.problems);
    let mut seen: BTreeMap<&AgentId, &AgentInfo> = BTreeMap::new();
    if let Some(r) = roster {
        let bad = r.unreadable().map(|b| format!("unreadable profile: {b}"));
        table.problems.extend(bad);
        seen.extend(r.items.iter().map(|i| (&i.profile.name, i)));
    }
    let mut names: BTreeSet<&AgentId> = hooks.iter().flat_map(|h| h.keys()).collect();
    names.extend(nudges.iter().flat_map(|n| n.keys()));
    names.extend(inboxes.iter().flat_map(|i| i.keys()));
    names.extend(bus.iter().flat_map(|b| b.keys()));
    names.extend(seen.keys().copied());
    let unknown = || "?".to_owned();
    let mut stalled = 0;
    for agent in names {
        let mut notes = Vec::new();
        let mut mark = Mark::Plain;
        let (hook, bead, age) = match hooks.map(|h| h.get(agent)) {
            None => (unknown(), unknown(), unknown()),
            Some(None | Some(ReadOutcome::Missing)) => {
                ("-".to_owned(), "-".to_owned(), "-".to_owned())
            }
            Some(Some(ReadOutcome::Value(h))) => {
                let s = h.state.status();
                let age = now.since(h.last_activity);
                if matches!(s, HookStatus::Pending | HookStatus::Active) && age >= STALL_AFTER {
                    notes.push("STALLED");
                    mark = Mark::Alert;
                    stalled += 1;
                }
                (
                    s.to_string(),
                    h.state
                        .work()
                        .map_or("-".to_owned(), |w| w.bead_id.to_string()),
                    short_age(age),
                )
            }
            Some(Some(ReadOutcome::Corrupt(_))) => {
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
        let last_seen = match seen.get(agent) {
            Some(i) => format!(
                "{} ({})",
                short_age(now.since(i.last_seen.at)),
                i.last_seen.source.as_str()
            ),
            None if roster.is_none() => unknown(),
            None => "-".to_owned(),
        };
        let nudge = match nudges.map(|n| n.get(agent)) {
            None => unknown(),
            Some(Some(Ok(ReadOutcome::Value(
                Received::New(n) | Received::Unsure { nudge: n, .. },
            )))) => {
                mark = mark.max_with(Mark::Warn);
                format!("{} from {}", n.kind, n.from)
            }
            Some(None | Some(Ok(ReadOutcome::Value(_) | ReadOutcome::Missing))) => "-".to_owned(),
            Some(Some(_)) => {
                notes.push("unreadable nudge");
                mark = Mark::Alert;
                "?".to_owned()
            }
        };
        let inbox = match inboxes.map(|i| i.get(agent)) {
            None | Some(Some(Err(_))) => unknown(),
            Some(Some(Ok(n))) => n.to_string(),
            Some(None) => "0".to_owned(),
        };
        let bus = match bus.as_ref().map(|b| b.get(agent)) {
            None => unknown(),
            Some(None) => "-".to_owned(),
            Some(Some(b)) => {
                if b.critical > 0 {
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
                inbox,
                bus,
                notes.join(", "),
            ],
            mark,
        ));
    }
    for (agent, n) in inboxes.into_iter().flatten() {
        if let Err(e) = n {
            table.problems.push(format!("inbox of {agent}: {e}"));
        }
    }
    let open = match &reads.reminders {
        Some(Ok((open, _))) => plural(*open, "open reminder"),
        _ => "? open reminders".to_owned(),
    };
    let agents = plural(table.rows.len(), "agent");
    // Stalls are read from the hooks: none read, none known.
    let stalled = match hooks {
        Some(_) => stalled.to_string(),
        None => unknown(),
    };
    table.summary = format!("{agents}, {stalled} stalled, {open}");
    table
}

/// Returns an area's read, or `None` with a problem line when it failed.
fn area<'a, T>(read: &'a Area<T>, what: &str, problems: &mut Vec<String>) -> Option<&'a T> {
    match read {
        Some(Ok(t)) => Some(t),
        Some(Err(e)) => {
            problems.push(format!("{what}: {e}"));
            None
        }
        None => None,
    }
}

/// One agent's bus queue, as the views show it.
struct BusLine {
    pending: usize,
    critical: usize,
    by_priority: Vec<usize>,
    unreadable_names: usize,
    presence: &'static str,
}

impl BusLine {
    fn of(chipset: &Chipset, s: &AgentStatus) -> Self {
        let by_priority: Vec<usize> = Priority::ALL.iter().map(|p| s.pending_at(*p)).collect();
        BusLine {
            pending: s.pending_total(),
            critical: s.pending_at(Priority::Critical),
            by_priority,
            unreadable_names: s.foreign,
            // Live or stale is the clock's: asked again at every load.
            presence: match &s.presence {
                ReadOutcome::Missing => "absent",
                ReadOutcome::Value(p) if chipset.bus().is_live(p) => "live",
                ReadOutcome::Value(_) => "stale",
                ReadOutcome::Corrupt(_) => "unreadable",
                ReadOutcome::Unsupported(_) => "unsupported",
            },
        }
    }
}

impl Mark {
    pub(crate) fn max_with(self, other: Mark) -> Mark {
        match (self, other) {
            (Mark::Alert, _) | (_, Mark::Alert) => Mark::Alert,
            (Mark::Warn, _) | (_, Mark::Warn) => Mark::Warn,
            _ => Mark::Plain,
        }
    }
}

fn queues(chipset: &Chipset, reads: &Reads) -> Table {
    let mut table = Table::default();
    let mut total = 0;
    let all = match &reads.bus {
        Some(Ok(all)) => all,
        Some(Err(e)) => return Table::unread("bus", format!("bus: {e}")),
        None => return table,
    };
    for status in all {
        let bus = BusLine::of(chipset, status);
        total += bus.pending;
        let mut mark = if bus.pending > 0 {
            Mark::Warn
        } else {
            Mark::Plain
        };
        let mut note = String::new();
        if bus.critical > 0 {
            mark = Mark::Alert;
        }
        if bus.unreadable_names > 0 {
            mark = Mark::Alert;
            note = format!("{} unreadable names", bus.unreadable_names);
        }
        let mut cells = vec![status.agent.to_string(), bus.presence.to_owned()];
        cells.extend(bus.by_priority.iter().map(ToString::to_string));
        cells.push(bus.pending.to_string());
        cells.push(note);
        table
            .rows
            .push(Row::new(status.agent.to_string(), cells, mark));
    }
    table.summary = format!("{} queues, {} events pending", table.rows.len(), total);
    table
}

fn leases(now: Timestamp, leases: &[chipset::lease::Lease]) -> Table {
    let mut table = Table::default();
    // Read once, shown while live: expiry is the clock's.
    for l in leases.iter().filter(|l| l.is_live(now)) {
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
    table.summary = plural(table.rows.len(), "live lease");
    table
}

fn reminders(now: Timestamp, reads: &Reads) -> Table {
    let mut table = Table::default();
    match &reads.reminders {
        Some(Ok((_, listing))) => {
            for r in &listing.items {
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
        Some(Err(e)) => return Table::unread("reminders", format!("reminders: {e}")),
        None => {}
    }
    table.summary = plural(table.rows.len(), "open reminder");
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
