//! The open requests by task, kept up to date at the cost of what changed.
//!
//! Which tasks have a request waiting comes from the inboxes; what waits
//! in each is what the commit gate ([`Mail::pending_replies`]) says. Both
//! are remembered between loads: an inbox is read again only when its
//! directory's stamp (device, inode, times) changed, or is younger than
//! [`RACY`](crate::stamps::RACY) (two changes within one tick of the file system's clock leave
//! one stamp, as the gate's own cache knows), and a task's gate is asked
//! again only when a message of that task entered or left an inbox. And
//! when the loader's stamps say nothing under `mail/` moved, none of this
//! is asked: a rescan of an idle team reads no message.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use chipset::Chipset;
use chipset::mail::{Kind, Mail, Message, MessageId};
use chipset::store::{AgentId, Stat, TaskId, Timestamp};

use chipset_failure::{chain, plural};

use crate::model::{Mark, Row, Table, short_age};
use crate::stamps::Changed;

/// What one inbox held when it was last read.
#[derive(Debug, Default)]
struct Inbox {
    stamp: Option<Stat>,
    /// Each message's task, by id.
    tasks: BTreeMap<MessageId, TaskId>,
    /// The tasks of the requests that need a reply.
    waiting: BTreeSet<TaskId>,
    /// Its messages of tasks chipset cannot name ([`Message::foreign_task`]):
    /// unreadable here, but no gate's.
    foreign: Vec<String>,
}

/// The inboxes and gates seen so far.
#[derive(Debug, Default)]
pub(crate) struct Requests {
    /// The stamp of `archive/`: a response archived there by another
    /// program changes no inbox, so every gate is asked again.
    archive: Option<Stat>,
    inboxes: BTreeMap<AgentId, Inbox>,
    /// Each task's gate: its open requests, or why it cannot be read.
    gates: BTreeMap<TaskId, Result<Vec<Message>, String>>,
    /// What the last read could not read.
    problems: Vec<String>,
    /// False until the first read.
    loaded: bool,
}

/// The inboxes as the loader counted them: each agent's count, or why
/// it could not be read; or why they could not be listed.
type Counts = Result<BTreeMap<AgentId, Result<usize, String>>, String>;

impl Requests {
    /// [`Requests::table`] of the agents with mail in their inbox, where
    /// requests can wait. Inboxes that cannot be listed hide every
    /// request: the gates fail closed, and so does the view.
    pub(crate) fn of_inboxes(
        &mut self,
        chipset: &Chipset,
        now: Timestamp,
        inboxes: Option<&Counts>,
        changed: &Changed,
    ) -> Table {
        let agents: Vec<AgentId> = match inboxes {
            Some(Ok(counts)) => counts
                .iter()
                .filter(|(_, n)| matches!(n, Ok(n) if *n > 0))
                .map(|(a, _)| a.clone())
                .collect(),
            _ => Vec::new(),
        };
        let mut table = self.table(chipset, now, &agents, changed);
        if let Some(Err(e)) = inboxes {
            let mut unread = Table::unread("inboxes", format!("inboxes: {e}"));
            unread.summary.push_str(": every commit gate is closed");
            unread.problems.append(&mut table.problems);
            return unread;
        }
        table
    }

    /// Brings the inboxes and gates up to date and returns the table.
    /// `agents` are those with messages in their inbox. When nothing under
    /// `mail/` `changed` since the last call, nothing is read: the rows are
    /// built again from what is kept.
    fn table(
        &mut self,
        chipset: &Chipset,
        now: Timestamp,
        agents: &[AgentId],
        changed: &Changed,
    ) -> Table {
        if !self.loaded || changed.under("mail") {
            self.problems = self.read(chipset, agents);
            self.loaded = true;
        }
        let mut table = Table {
            problems: self.problems.clone(),
            ..Table::default()
        };
        // Another program's tasks' messages: said, but no gate is closed.
        let foreign = self.inboxes.iter().flat_map(|(agent, inbox)| {
            let problem = move |e: &String| format!("inbox of {agent}: {e}");
            inbox.foreign.iter().map(problem)
        });
        let foreign: Vec<String> = foreign.collect();
        let mut blocked = 0;
        for (task, gate) in &self.gates {
            match gate {
                Ok(open) => {
                    blocked += usize::from(!open.is_empty());
                    table.rows.extend(open.iter().map(|m| request_row(now, m)));
                }
                // The gate fails closed: so does the view.
                Err(e) => table
                    .problems
                    .push(format!("task {task}: gate closed, unreadable: {e}")),
            }
        }
        let n = table.rows.len();
        let verb = if n == 1 { "blocks" } else { "block" };
        let open = format!(
            "{} {verb} the commit of {}",
            plural(n, "open request"),
            plural(blocked, "task")
        );
        table.summary = match (blocked, table.problems.is_empty()) {
            (0, true) => "no open requests: every commit gate passes".to_owned(),
            (_, true) => open,
            // A message the gates cannot read may be a request of any
            // task: each gate fails closed until it is read or moved.
            (_, false) => {
                format!("{open}; a file the gates read is unreadable: every gate is closed")
            }
        };
        table.problems.extend(foreign);
        table
    }

    /// Reads the inboxes that may have changed and asks again the gates
    /// they concern; returns what could not be read.
    fn read(&mut self, chipset: &Chipset, agents: &[AgentId]) -> Vec<String> {
        let mut problems = Vec::new();
        let mail = chipset.mail();
        let mut dirty: BTreeSet<TaskId> = BTreeSet::new();
        let present: BTreeSet<&AgentId> = agents.iter().collect();
        self.inboxes.retain(|agent, inbox| {
            let keep = present.contains(agent);
            if !keep {
                dirty.extend(inbox.tasks.values().cloned());
            }
            keep
        });
        for agent in agents {
            if let Err(e) = self.refresh(mail, agent, &mut dirty) {
                problems.push(format!("inbox of {agent}: {e}"));
            }
        }
        let archive = mail
            .dir()
            .join("archive")
            .and_then(|dir| mail.state().stat(&dir));
        // A server's archive has no stamp: every gate is asked again.
        let archive_moved = chipset.server().is_some()
            || match archive {
                Ok(stamp) => {
                    let moved = stamp != self.archive || stamp.is_some_and(|s| !settled(&s));
                    self.archive = stamp;
                    moved
                }
                Err(e) => {
                    problems.push(format!("mail archive: {}", chain(&e)));
                    true
                }
            };
        let waiting: BTreeSet<&TaskId> = self.inboxes.values().flat_map(|i| &i.waiting).collect();
        self.gates.retain(|task, _| waiting.contains(task));
        for task in waiting {
            if archive_moved || dirty.contains(task) || !self.gates.contains_key(task) {
                let gate = mail.pending_replies(task).map_err(|e| chain(&e));
                self.gates.insert(task.clone(), gate);
            }
        }
        problems
    }

    /// Reads `agent`'s inbox again if its stamp says it may have changed,
    /// adding to `dirty` the tasks of the messages that came or went.
    fn refresh(
        &mut self,
        mail: &Mail,
        agent: &AgentId,
        dirty: &mut BTreeSet<TaskId>,
    ) -> Result<(), String> {
        let stamp = mail
            .state()
            .stat(&mail.inbox_dir(agent))
            .map_err(|e| chain(&e))?;
        let known = self.inboxes.entry(agent.clone()).or_default();
        if known.stamp.is_some() && known.stamp == stamp && stamp.is_some_and(|s| settled(&s)) {
            return Ok(());
        }
        let listing = match mail.inbox_listing(agent) {
            Ok(listing) => listing,
            Err(e) => {
                // Unreadable now: forget it, so the next load reads it again.
                known.stamp = None;
                known.foreign.clear();
                dirty.extend(known.tasks.values().cloned());
                return Err(chain(&e));
            }
        };
        // A file it could not read is a problem, and the inbox is read
        // again at the next load; the messages it could read still say
        // which tasks wait.
        let (foreign, unsupported) = listing
            .unsupported
            .iter()
            .partition::<Vec<_>, _>(|u| Message::foreign_task(u));
        let corrupt = listing.corrupt.iter().map(|c| c.to_string());
        let unreadable: Vec<String> = corrupt
            .chain(unsupported.iter().map(|u| u.to_string()))
            .collect();
        let foreign = foreign.iter().map(|u| u.to_string()).collect();
        let messages = listing.items;
        let stamp = if unreadable.is_empty() { stamp } else { None };
        let mut tasks = BTreeMap::new();
        let mut waiting = BTreeSet::new();
        for m in &messages {
            if !known.tasks.contains_key(&m.id) {
                dirty.insert(m.task().clone());
            }
            if m.kind == Kind::Request && m.needs_reply() {
                waiting.insert(m.task().clone());
            }
            tasks.insert(m.id.clone(), m.task().clone());
        }
        for (id, task) in &known.tasks {
            if !tasks.contains_key(id) {
                dirty.insert(task.clone());
            }
        }
        *known = Inbox {
            stamp,
            tasks,
            waiting,
            foreign,
        };
        match unreadable.is_empty() {
            true => Ok(()),
            false => Err(unreadable.join("; ")),
        }
    }
}

/// Returns true when `stat`'s modification time is old enough to trust.
fn settled(stat: &Stat) -> bool {
    crate::stamps::settled(stat, SystemTime::now())
}

/// Returns the row of the open request `m`, at `now`.
fn request_row(now: Timestamp, m: &Message) -> Row {
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
