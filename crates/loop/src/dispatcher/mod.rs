//! The dispatcher: assigns work items to idle agents, verifies and clears
//! completed work, and takes work away from silent agents. Its ledger under
//! `loop/dispatcher/` makes every multi-step change resumable.
//!
//! - `transition.rs`: the pure core. [`ledger_transition`] takes a ledger entry, an
//!   event (a report, an escalation, the sweep, or what the shell saw on a
//!   hook) and the time, and returns the entry to write, the effects around
//!   the write, the action to report and the next [`LedgerCommand`].
//! - `shell.rs`: reads the mail and bus, locks each entry, and drives it
//!   through `ledger_transition`, carrying out each command and feeding its
//!   result back as the next event.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chipset_hook::BeadId;
use chipset_mail::MessageId;
use chipset_store::{AgentId, Listing, Timestamp};
use serde::{Deserialize, Serialize};

use crate::channels::Channels;
use crate::error::Tick;
use crate::error::{Error, Result};
use crate::files::Files;
use crate::format::{AgentBook, BeadState, LedgerEntry};

mod events;
mod shell;
#[cfg(test)]
mod tests;
mod transition;

#[cfg(test)]
use events::LedgerTransition;
pub(crate) use events::{LedgerCommand, LedgerEffect, LedgerEvent};
pub(crate) use transition::ledger_transition;

/// The default time [`Dispatcher::run_until`] waits for a wake-up before ticking anyway: 1 s.
pub(crate) const DEFAULT_DISPATCH_POLL: Duration = Duration::from_secs(1);

/// How a dispatcher paces itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DispatcherConfig {
    /// How long [`Dispatcher::run_until`] waits on the bus for a wake-up
    /// before ticking anyway (the safety net). Default 1 s.
    pub poll_every: Duration,
}

impl Default for DispatcherConfig {
    fn default() -> Self {
        DispatcherConfig {
            poll_every: DEFAULT_DISPATCH_POLL,
        }
    }
}

/// Why the dispatcher ignored a report or an escalation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum IgnoreReason {
    /// The bead is not in the ledger.
    UnknownBead,
    /// The bead was completed already, by another assignment.
    AlreadyDone,
    /// The report or escalation is about an assignment that is no longer current.
    NotCurrent,
    /// A completion report, but the hook does not show the work completed.
    NotCompleted,
}

/// What the dispatcher did in one tick, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
#[non_exhaustive]
pub enum DispatchAction {
    /// A work item went onto an idle agent's hook, with a `work-assignment` mail.
    Assigned {
        /// The bead.
        bead_id: BeadId,
        /// The agent.
        agent: AgentId,
        /// The hook generation.
        generation: u64,
        /// The `work-assignment` mail.
        mail: MessageId,
        /// When.
        at: Timestamp,
    },
    /// A completion was verified on the hook and the hook cleared: the bead is done.
    Completed {
        /// The bead.
        bead_id: BeadId,
        /// The agent that completed it.
        agent: AgentId,
        /// The hook generation.
        generation: u64,
        /// When.
        at: Timestamp,
    },
    /// After an escalation, the work was taken away from the silent agent
    /// (fenced: it can no longer complete it) and queued again; the agent
    /// is suspended and sent an `abort`.
    Reassigned {
        /// The bead.
        bead_id: BeadId,
        /// The silent agent.
        from: AgentId,
        /// The generation taken away.
        generation: u64,
        /// When.
        at: Timestamp,
    },
    /// The hook stopped holding the assignment without a completion (someone
    /// else cleared or reassigned it): the bead was queued again.
    Requeued {
        /// The bead.
        bead_id: BeadId,
        /// The agent whose hook let go of it.
        agent: AgentId,
        /// The generation.
        generation: u64,
        /// When.
        at: Timestamp,
    },
    /// A report or escalation that changes nothing.
    Ignored {
        /// What it said.
        kind: String,
        /// The bead.
        bead_id: BeadId,
        /// The agent it named.
        agent: AgentId,
        /// The generation it named.
        generation: u64,
        /// Why.
        reason: IgnoreReason,
    },
    /// A file or message that could not be read; it was left alone (a mail
    /// with an unreadable body is archived, so it is seen once).
    Unreadable {
        /// The file or message.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// The dispatcher: owns the assignment of work items to a pool of agents.
///
/// Cheap to clone (clones share the cache of finished beads).
#[derive(Debug, Clone)]
pub struct Dispatcher {
    me: AgentId,
    pool: Vec<AgentId>,
    config: DispatcherConfig,
    channels: Channels,
    files: Files,
    finished: Arc<Mutex<BTreeSet<BeadId>>>,
}

impl Dispatcher {
    /// Returns the dispatcher `me` over the agents of `pool` (assigned in
    /// that order of preference), working through `channels`: a
    /// [`StateDir`](chipset_store::StateDir) for every channel with its default config, or
    /// [`Channels`] you configured (so their configs apply: assignment mail
    /// goes through its [`Mail`](chipset_mail::Mail), wake-ups and its own
    /// queue through its [`Bus`](chipset_bus::Bus)).
    pub fn new(
        channels: impl Into<Channels>,
        me: AgentId,
        pool: impl IntoIterator<Item = AgentId>,
        config: DispatcherConfig,
    ) -> Self {
        let channels = channels.into();
        Dispatcher {
            me,
            pool: pool.into_iter().collect(),
            config,
            files: channels.files(),
            channels,
            finished: Arc::default(),
        }
    }

    /// Adds a work item to the ledger, queued. It is assigned by a later
    /// [`Dispatcher::tick`].
    ///
    /// Retry rule: the same request again (the same bead and title), after
    /// a failure of unknown outcome or not, returns the entry the ledger
    /// holds for it, as the attempt that created it wrote it and in
    /// whatever state it is now, and writes nothing: a bead is in the
    /// ledger once.
    ///
    /// # Errors
    ///
    /// [`Error::AlreadySubmitted`] when the bead is in the ledger already
    /// under another title (whatever its state: a bead is done at most
    /// once); [`Error::Corrupt`] when its entry is unreadable;
    /// [`Error::Store`].
    pub fn submit(&self, bead: BeadId, title: impl Into<String>) -> Result<LedgerEntry> {
        let now = self.files.now()?;
        let entry = LedgerEntry {
            bead_id: bead.clone(),
            title: title.into(),
            submitted_at: now,
            state: BeadState::Queued,
            attempts: Vec::new(),
            updated_at: now,
        };
        if self.files.create(&self.files.bead(&bead), &entry)? {
            return Ok(entry);
        }
        match self.entry(&bead)? {
            Some(first) if first.title == entry.title => Ok(first),
            _ => Err(Error::AlreadySubmitted { bead }),
        }
    }

    /// Reads one ledger entry.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] when it is unreadable; [`Error::Store`].
    pub fn entry(&self, bead: &BeadId) -> Result<Option<LedgerEntry>> {
        self.files.read(&self.files.bead(bead))
    }

    /// Reads the whole ledger: every readable entry, by submission time
    /// then bead, and the entries that could not be read (never taken as
    /// absent).
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the directory cannot be listed.
    pub fn ledger(&self) -> Result<Listing<LedgerEntry>> {
        let mut ledger = Listing::default();
        for name in self.files.list(&self.files.beads_dir())? {
            let Some(bead) = name.strip_suffix(".json").and_then(|b| BeadId::new(b).ok()) else {
                continue;
            };
            match self.entry(&bead) {
                Ok(Some(e)) => ledger.items.push(e),
                Ok(None) => {}
                Err(Error::Corrupt(c)) => ledger.corrupt.push(c),
                Err(e) => return Err(e),
            }
        }
        ledger
            .items
            .sort_by(|a, b| (a.submitted_at, &a.bead_id).cmp(&(b.submitted_at, &b.bead_id)));
        Ok(ledger)
    }

    /// Reads the agents given no new work, for the assignment path.
    pub(crate) fn read_suspended(&self) -> Result<AgentBook> {
        Ok(self.files.read(&self.files.agents())?.unwrap_or_default())
    }

    /// Gives `agent` work again after a suspension. Returns false when it
    /// was not suspended.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`]; [`Error::Store`].
    pub fn reinstate(&self, agent: &AgentId) -> Result<bool> {
        let mut locked = self.files.lock::<AgentBook>(&self.files.agents())?;
        let mut book = locked.take().unwrap_or_default();
        if book.suspended.remove(agent).is_none() {
            return Ok(false);
        }
        locked.write(book)?;
        Ok(true)
    }

    /// Does everything that is due, at the state clock's now: handles the
    /// completion reports and escalations in the dispatcher's inbox and bus
    /// queue, finishes changes a crashed predecessor started, verifies and
    /// clears completed hooks even without a report, and assigns queued
    /// work to idle agents. Returns what it did; the actions are also
    /// appended to `loop/dispatcher/log.jsonl`.
    ///
    /// Every report, event and change is idempotent against the ledger, so
    /// a report seen twice (by mail and by bus) completes a bead once.
    ///
    /// Retry rule: the retry of a tick that failed is the next tick, which
    /// finishes what the failed one started and assigns, completes or
    /// reassigns each bead once.
    ///
    /// # Errors
    ///
    /// Channel errors. Changes made before the error stay made and are
    /// consistent; the next tick goes on from them. A tick that fails after
    /// it changed something returns [`Error::PartlyDone`] (its outcome is
    /// unknown), unless the failure says so already, and logs the actions
    /// it took before the failure (best effort: the ledger, not the log,
    /// is what the next tick goes on from).
    pub fn tick(&self) -> Result<Vec<DispatchAction>> {
        let now = self.files.now()?;
        let mut tick = Tick::new();
        let done = (|| {
            self.read_mail(now, &mut tick)?;
            self.read_bus(now, &mut tick)?;
            let queued = self.sweep(now, &mut tick)?;
            self.assign_queued(queued, now, &mut tick)
        })();
        tick.finish("dispatcher tick", done, |actions| {
            self.files.append(&self.files.dispatcher_log(), actions)
        })
    }

    /// Ticks until `until` says stop, waiting on the dispatcher's bus queue
    /// between ticks (an escalation or a completion wakes it at once), or at
    /// most [`DispatcherConfig::poll_every`]. A blocking convenience for a
    /// dispatcher thread or process.
    ///
    /// # Errors
    ///
    /// As [`Dispatcher::tick`].
    pub fn run_until(&self, mut until: impl FnMut(&[DispatchAction]) -> bool) -> Result<()> {
        let mut waiter = self.channels.bus.waiter(&self.me)?;
        loop {
            let actions = self.tick()?;
            if until(&actions) {
                return Ok(());
            }
            let _ = waiter.wait(self.config.poll_every)?;
        }
    }
}
