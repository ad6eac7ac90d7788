//! Releases, dones and the witness's return: the steps that take an item
//! off a hook.

use std::collections::HashMap;

use chipset_hook::{Assignment, HookStatus};
use chipset_store::{AgentId, Timestamp};

use crate::error::{Error, Result, cut_short};
use crate::format::{DoneRecord, Entry, Record, ReleaseRecord, Table};
use crate::id::ItemId;
use crate::store::{Pool, Settled};
use crate::transition::{Hold, Index, check_reason};

impl Pool {
    /// Returns item `id`, on `agent`'s hook, to the pool with `reason`: the
    /// hook is emptied and the item is ready again (its release recorded).
    /// Releasing again once released (same agent and reason) is a retry.
    ///
    /// The reason is recorded first, then the hook is emptied (**commit
    /// point:** the hook's rename); a crash between leaves the item on the
    /// hook, and a retry finishes the release without counting it twice.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for an empty or too long reason; [`Error::NotFound`];
    /// [`Error::AlreadyDone`] (done, or completed on the hook);
    /// [`Error::NotHolder`] when the item is not on `agent`'s hook; a corrupt
    /// table or hook; a store error; [`Error::OutcomeUnknown`] when the
    /// hook could not be emptied after the reason was recorded (release
    /// again: it is not counted twice).
    pub fn release(&self, agent: &AgentId, id: &ItemId, reason: &str) -> Result<Settled> {
        check_reason(reason)?;
        let _guard = self.lock()?;
        let (table, logged) = self.load("release work")?;
        let entry = Index::new(&table)
            .get(id)
            .cloned()
            .ok_or_else(|| Error::NotFound { id: id.clone() })?;
        if entry.done.is_some() {
            return Err(Error::AlreadyDone { id: id.clone() });
        }
        if let Some(hold) = self.hold_of(agent, "release the work on")?
            && ItemId::of_bead(&hold.assignment.work.bead_id) == *id
        {
            if hold.status == HookStatus::Completed {
                return Err(Error::AlreadyDone { id: id.clone() });
            }
            let entry = self.give_back(table, logged, &hold.assignment, agent, reason)?;
            return Ok(Settled {
                entry,
                existing: false,
            });
        }
        if entry
            .released
            .as_ref()
            .is_some_and(|r| &r.by == agent && &r.holder == agent && r.reason == reason)
        {
            return Ok(Settled {
                entry,
                existing: true,
            });
        }
        Err(self.not_holder(agent, id)?)
    }

    /// Marks item `id`, on `agent`'s hook in any state, done and clears the
    /// hook (activating and completing it first if need be). Once done,
    /// `done` again is a retry.
    ///
    /// **Commit point:** the rename of the table that records it done. The
    /// hook is cleared after; a crash between leaves a done item on the
    /// hook, which the agent's next claim (or `done` again) clears.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`]; [`Error::NotHolder`] when the item is neither on
    /// `agent`'s hook nor done; a corrupt table or hook; a store error;
    /// [`Error::OutcomeUnknown`] when the hook could not be cleared after
    /// the done was recorded (`done` again clears it).
    pub fn done(&self, agent: &AgentId, id: &ItemId) -> Result<Settled> {
        const OP: &str = "finish work";
        let _guard = self.lock()?;
        let (mut table, mut logged) = self.load(OP)?;
        let Some(n) = Index::new(&table).position(id) else {
            return Err(Error::NotFound { id: id.clone() });
        };
        let existing = table.items[n].done.is_some();
        match self.hold_of(agent, "finish the work on")? {
            Some(hold) if ItemId::of_bead(&hold.assignment.work.bead_id) == *id => {
                if !existing {
                    let done = DoneRecord {
                        by: agent.clone(),
                        at: self.now()?,
                    };
                    table.items[n].done = Some(done.clone());
                    let record = Record {
                        id: id.clone(),
                        done: Some(done),
                        released: None,
                        releases: None,
                    };
                    self.record("finishing", &table, &mut logged, &[record])?;
                }
                // Past the commit point (unless a retry): a failure to
                // clear the hook is an unknown outcome; `done` again
                // clears it.
                let _ = self
                    .retire(&hold)
                    .map_err(|e| cut_short("finishing", std::slice::from_ref(id), !existing, e))?;
                tracing::debug!(item = %id, %agent, "work done");
            }
            _ if existing => {}
            _ => return Err(self.not_holder(agent, id)?),
        }
        Ok(Settled {
            entry: table.items.swap_remove(n),
            existing,
        })
    }

    /// Returns the item of `held` to the pool on behalf of a witness (`by`)
    /// that judged its holder stalled, recording `reason`. Returns the
    /// item's entry, or `None` when `held` is not a pool item or the hook no
    /// longer holds it pending or active (it moved on: nothing to return).
    /// Calling it again after it applied returns `None`.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for an empty reason; a corrupt table or hook; a
    /// store error; [`Error::OutcomeUnknown`] as [`Pool::release`].
    pub fn return_stalled(
        &self,
        held: &Assignment,
        by: &AgentId,
        reason: &str,
    ) -> Result<Option<Entry>> {
        check_reason(reason)?;
        let _guard = self.lock()?;
        let (table, logged) = self.load("return stalled work")?;
        let id = ItemId::of_bead(&held.work.bead_id);
        match Index::new(&table).get(&id) {
            Some(e) if e.done.is_none() => {}
            _ => return Ok(None),
        }
        match self.hold_of(&held.agent, "return the stalled work on")? {
            Some(hold)
                if hold.assignment.same_fence(held) && hold.status != HookStatus::Completed => {}
            _ => return Ok(None),
        }
        let entry = self.give_back(table, logged, held, by, reason)?;
        tracing::info!(item = %id, holder = %held.agent, %by, "stalled work returned to the pool");
        Ok(Some(entry))
    }

    /// Records the release of `held` (unless this release was recorded
    /// already, by a try that crashed before emptying the hook), then
    /// empties the hook.
    pub(crate) fn give_back(
        &self,
        mut table: Table,
        mut logged: usize,
        held: &Assignment,
        by: &AgentId,
        reason: &str,
    ) -> Result<Entry> {
        let id = ItemId::of_bead(&held.work.bead_id);
        let n = Index::new(&table).position(&id).expect("checked");
        let op = if by == &held.agent {
            "releasing"
        } else {
            "returning"
        };
        let recorded = table.items[n].released.as_ref().is_some_and(|r| {
            &r.by == by
                && r.holder == held.agent
                && r.reason == reason
                && r.at >= held.work.assigned_at
        });
        if !recorded {
            let record = Record {
                id: id.clone(),
                done: None,
                released: Some(ReleaseRecord {
                    by: by.clone(),
                    holder: held.agent.clone(),
                    at: self.now()?,
                    reason: reason.to_owned(),
                }),
                releases: Some(table.items[n].releases + 1),
            };
            record.apply(&mut table.items[n]);
            self.record(op, &table, &mut logged, std::slice::from_ref(&record))?;
        }
        // Once this try recorded the release, a failure to empty the hook
        // is an unknown outcome: the same request again empties it
        // without counting the release twice.
        match self.hooks.reassign(held) {
            Ok(_) => {}
            Err(chipset_hook::Error::StaleAssignment { .. }) => {}
            Err(e) => return Err(cut_short(op, &[id], !recorded, e.into())),
        }
        Ok(table.items.swap_remove(n))
    }

    /// Empties a hook holding a done item: activates and completes it if
    /// need be, then clears it, and returns true. A hook that moved on
    /// meanwhile is left alone (false). A step failing after another
    /// changed the hook is [`Error::OutcomeUnknown`].
    pub(crate) fn retire(&self, hold: &Hold) -> Result<bool> {
        let a = &hold.assignment;
        let mut changed = false;
        let mut step = |s: &dyn Fn() -> chipset_hook::Result<chipset_hook::Hook>| match s() {
            Ok(_) => {
                changed = true;
                Ok(true)
            }
            Err(chipset_hook::Error::StaleAssignment { .. }) => Ok(false),
            Err(e) => {
                let id = ItemId::of_bead(&a.work.bead_id);
                Err(cut_short("finishing", &[id], changed, e.into()))
            }
        };
        if hold.status == HookStatus::Pending && !step(&|| self.hooks.activate(a))? {
            return Ok(false);
        }
        if hold.status != HookStatus::Completed && !step(&|| self.hooks.complete(a))? {
            return Ok(false);
        }
        step(&|| self.hooks.clear(a))
    }

    pub(crate) fn not_holder(&self, agent: &AgentId, id: &ItemId) -> Result<Error> {
        let holder = self
            .holds("find the work on")?
            .0
            .get(id)
            .map(|h| h.assignment.agent.clone());
        Ok(Error::NotHolder {
            id: id.clone(),
            agent: agent.clone(),
            holder,
        })
    }
}

/// Records done every item completed on a hook that the pool does not
/// record yet (an agent ran `chipset hook complete`). Returns the records
/// to append.
pub(crate) fn record_completed(
    table: &mut Table,
    holds: &HashMap<ItemId, Hold>,
    now: Timestamp,
) -> Vec<Record> {
    let mut records = Vec::new();
    for entry in &mut table.items {
        if entry.done.is_some() {
            continue;
        }
        if let Some(hold) = holds.get(&entry.id)
            && hold.status == HookStatus::Completed
        {
            let done = DoneRecord {
                by: hold.assignment.agent.clone(),
                at: now,
            };
            entry.done = Some(done.clone());
            records.push(Record {
                id: entry.id.clone(),
                done: Some(done),
                released: None,
                releases: None,
            });
        }
    }
    records
}
