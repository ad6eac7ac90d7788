//! What the views are built from, read area by area and kept between
//! loads: a load rereads an area only when [`Stamps`] says something under
//! it changed, and rebuilds every table from what it holds (the ages move
//! with the clock, the files do not).

use std::collections::BTreeMap;

use chipset::Chipset;
use chipset::bus::AgentStatus;
use chipset::directory::{AgentInfo, Filter};
use chipset::hook::Hook;
use chipset::lease::Lease;
use chipset::nudge::{Received, Reminder, ReminderFilter};
use chipset::pool::{Listed, WorkState};
use chipset::store::{AgentId, Listing, ReadOutcome, Timestamp};

use crate::stamps::{Changed, Stamps};
use chipset_failure::chain;

/// One area's latest read, or why it failed.
pub(crate) type Area<T> = Option<Result<T, String>>;

/// An agent's nudge as read: absent from `nudge/`, read, or failed.
pub(crate) type NudgeRead = Result<ReadOutcome<Received>, String>;

/// Every area's latest read.
#[derive(Debug, Default)]
pub(crate) struct Reads {
    stamps: Stamps,
    /// `hooks/`.
    pub(crate) hooks: Area<BTreeMap<AgentId, ReadOutcome<Hook>>>,
    /// `nudge/`: each agent with a nudge directory.
    pub(crate) nudges: Area<BTreeMap<AgentId, NudgeRead>>,
    /// `mail/inbox/`: each inbox's message count.
    pub(crate) inboxes: Area<BTreeMap<AgentId, Result<usize, String>>>,
    /// `bus/`.
    pub(crate) bus: Area<Vec<AgentStatus>>,
    /// `reminders/`: the open count (by the index) and the open reminders.
    pub(crate) reminders: Area<(usize, Listing<Reminder>)>,
    /// `agents/` with what last seen reads (hooks, bus, the manifest).
    pub(crate) roster: Area<Listing<AgentInfo>>,
    /// `leases/`: every lease, live or not (expiry is the clock's).
    pub(crate) leases: Area<Vec<Lease>>,
    /// `pool/` with the hooks that hold its items, and those that could
    /// not be read.
    pub(crate) pool: Area<Listing<Listed>>,
}

impl Reads {
    /// Looks at the stamps and rereads each area that changed (every area
    /// the first time). Returns what changed, for the readers that keep
    /// finer caches of their own.
    pub(crate) fn refresh(&mut self, chipset: &Chipset, now: Timestamp) -> Changed {
        let on_server = chipset.server().is_some();
        // A server's rows have no directory stamps: every area is read
        // again at each load (a wake-up says when).
        let changed = match on_server {
            false => self.stamps.look(chipset.state(), chipset.mail_folder()),
            true => Changed::everything(),
        };
        let stale = |read: bool, paths: &[&str]| !read || paths.iter().any(|p| changed.under(p));
        if stale(self.hooks.is_some(), &["hooks"]) {
            self.hooks = Some(chipset.hooks().list().map_err(|e| chain(&e)));
        }
        if stale(self.nudges.is_some(), &["nudge"]) {
            self.nudges = Some(read_nudges(chipset));
        }
        if stale(self.inboxes.is_some(), &["mail/inbox"]) {
            let known = self.inboxes.take().and_then(Result::ok).unwrap_or_default();
            self.inboxes = Some(match on_server {
                false => read_inboxes(chipset, &changed, known),
                // The server counts every inbox in one statement.
                true => chipset
                    .mail()
                    .inbox_counts()
                    .map(|c| c.into_iter().map(|(a, n)| (a, Ok(n))).collect())
                    .map_err(|e| chain(&e)),
            });
        }
        if stale(self.bus.is_some(), &["bus"]) {
            self.bus = Some(chipset.bus().status().map_err(|e| chain(&e)));
        }
        if stale(self.reminders.is_some(), &["reminders"]) {
            let reminders = chipset.reminders();
            self.reminders = Some(
                reminders
                    .open_counts()
                    .map(|c| c.values().sum())
                    .and_then(|open| Ok((open, reminders.list(&ReminderFilter::default())?)))
                    .map_err(|e| chain(&e)),
            );
        }
        let seen = ["agents", "bus", "hooks", "mail/manifest.jsonl"];
        if stale(self.roster.is_some(), &seen) {
            self.roster = Some(
                chipset
                    .directory()
                    .list(&Filter::default())
                    .map_err(|e| chain(&e)),
            );
        }
        if stale(self.leases.is_some(), &["leases"]) {
            self.leases = Some(chipset.leases().list().map_err(|e| chain(&e)));
        }
        // A deferred item becomes ready with the clock alone; a hook it
        // could not read is read again at every load, as an inbox is.
        let again = matches!(&self.pool, Some(Ok(listing)) if listing.items.iter().any(
            |l| matches!(l.state, WorkState::Deferred { until } if until <= now)
        ) || listing.unreadable().next().is_some());
        if again || stale(self.pool.is_some(), &["pool", "hooks"]) {
            self.pool = Some(chipset.pool().listing().map_err(|e| chain(&e)));
        }
        changed
    }
}

fn read_nudges(chipset: &Chipset) -> Result<BTreeMap<AgentId, NudgeRead>, String> {
    let nudges = chipset.nudges();
    let agents = nudges.agents().map_err(|e| chain(&e))?;
    Ok(agents
        .into_iter()
        .map(|a| {
            let read = nudges.receive(&a).map_err(|e| chain(&e));
            (a, read)
        })
        .collect())
}

/// Counts each inbox again whose directory changed; keeps the others.
fn read_inboxes(
    chipset: &Chipset,
    changed: &Changed,
    mut known: BTreeMap<AgentId, Result<usize, String>>,
) -> Result<BTreeMap<AgentId, Result<usize, String>>, String> {
    let mail = chipset.mail();
    let root = mail.dir().join("inbox").map_err(|e| chain(&e))?;
    let names = mail.state().list(&root).map_err(|e| chain(&e))?;
    let mut out = BTreeMap::new();
    for name in names {
        let agent = AgentId::new(name.as_str()).map_err(|_| {
            format!(
                "{}: not an agent inbox directory",
                root.as_path().join(&name).display()
            )
        })?;
        let count = match known.remove(&agent) {
            Some(Ok(n)) if !changed.under(&format!("mail/inbox/{agent}")) => Ok(n),
            _ => mail.inbox_len(&agent).map_err(|e| chain(&e)),
        };
        out.insert(agent, count);
    }
    Ok(out)
}
