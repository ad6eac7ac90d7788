//! Claims: the decision, the claimer's finished item and the assignment,
//! under the pool's lock on a directory, by the backend's claim on a
//! server.

use chipset_hook::HookStatus;
use chipset_store::AgentId;

use crate::error::{Error, Result, cut_short};
use crate::format::{DoneRecord, Entry, Record};
use crate::id::ItemId;
use crate::settle::record_completed;
use crate::store::{Claimed, Pool};
use crate::transition::{Index, ReadyFilter, View, WorkState};

/// Which item a claim wants.
pub(crate) enum Want<'a> {
    Next(&'a ReadyFilter),
    Named(&'a ItemId),
}

impl Pool {
    pub(crate) fn claim_inner(&self, agent: &AgentId, want: Want<'_>) -> Result<Option<Claimed>> {
        // On a directory the first try decides under the pool's lock; on a
        // server a try whose snapshot went stale (its candidates taken
        // meanwhile) is made again on a fresh one.
        let mut finished = None;
        for _ in 0..crate::server::ATTEMPTS {
            match self.claim_once(agent, &want, &mut finished) {
                Ok(Some(done)) => return Ok(done),
                Ok(None) => {}
                // A later try's refusal or failure comes after an earlier
                // try cleared the claimer's finished item: not "nothing
                // changed".
                Err(e) => {
                    let ids: Vec<ItemId> = finished.into_iter().collect();
                    return Err(cut_short("claiming", &ids, !ids.is_empty(), e));
                }
            }
        }
        // A try may have recorded the finished item before the others.
        let ids: Vec<ItemId> = finished.into_iter().collect();
        let wrote = !ids.is_empty();
        Err(cut_short(
            "claiming",
            &ids,
            wrote,
            crate::server::contended(agent),
        ))
    }

    /// One try of a claim: `None` when a server's candidates were all
    /// taken since the snapshot (try again), `Some(None)` when nothing is
    /// ready (decided before the claimer's finished item is cleared).
    /// `finished` keeps the item a try recorded done across tries.
    fn claim_once(
        &self,
        agent: &AgentId,
        want: &Want<'_>,
        finished: &mut Option<ItemId>,
    ) -> Result<Option<Option<Claimed>>> {
        const OP: &str = "claim work";
        // A server locks the claimed item's row instead.
        let _guard = match self.seam {
            None => Some(self.lock()?),
            Some(_) => None,
        };
        let now = self.now()?;
        let (mut table, mut logged) = self.load(OP)?;
        let (mut holds, by_agent) = self.holds("claim the work on")?;
        let mut records = record_completed(&mut table, &holds, now);
        // The claimer's finished item, to record done and take off its
        // hook before the claim.
        let mut retire = None;
        if let Some(mine) = by_agent.get(agent) {
            let id = ItemId::of_bead(&mine.assignment.work.bead_id);
            let Some(n) = Index::new(&table).position(&id) else {
                return Err(Error::HookBusy {
                    agent: agent.clone(),
                    bead: String::from(id),
                });
            };
            let entry = &table.items[n];
            if entry.done.is_none() && mine.status != HookStatus::Completed {
                if matches!(want, Want::Named(w) if **w != id) {
                    return Err(Error::HookBusy {
                        agent: agent.clone(),
                        bead: String::from(id),
                    });
                }
                let entry = entry.clone();
                self.record("claiming", &table, &mut logged, &records)?;
                return Ok(Some(Some(Claimed {
                    entry,
                    assignment: mine.assignment.clone(),
                    existing: true,
                    // Cleared by an earlier try on a server, if any.
                    finished: finished.take(),
                })));
            }
            if entry.done.is_none() {
                let done = DoneRecord {
                    by: agent.clone(),
                    at: now,
                };
                table.items[n].done = Some(done.clone());
                records.push(Record {
                    id: id.clone(),
                    done: Some(done),
                    released: None,
                    releases: None,
                });
            }
            holds.remove(&id);
            retire = Some((mine, id));
        }
        // Decide before writing anything: a refused claim changes nothing.
        let view = View {
            index: Index::new(&table),
            holds: &holds,
            now,
        };
        let candidates: Vec<Entry> = match want {
            Want::Next(filter) if self.seam.is_some() => {
                view.ready(filter).into_iter().cloned().collect()
            }
            Want::Next(filter) => view.next(filter).into_iter().cloned().collect(),
            Want::Named(id) => {
                let entry = view
                    .index
                    .get(id)
                    .ok_or_else(|| Error::NotFound { id: (*id).clone() })?;
                match view.state(entry) {
                    WorkState::Ready => vec![entry.clone()],
                    WorkState::Done { .. } => {
                        return Err(Error::AlreadyDone { id: (*id).clone() });
                    }
                    state => {
                        return Err(Error::NotReady {
                            id: (*id).clone(),
                            state,
                        });
                    }
                }
            }
        };
        if candidates.is_empty() {
            if let Some(id) = finished {
                // An earlier try on a server cleared the finished item (one
                // whose hook was not completed), then other claims took
                // every candidate.
                return Err(Error::FinishedNothingClaimed {
                    agent: agent.clone(),
                    finished: id.clone(),
                });
            }
            // Nothing to claim: the claimer's hook stays as it is, its
            // finished item cleared by the claim that takes work. The
            // records change nothing a reader sees (a completed hook's
            // item reads done already).
            self.record("claiming", &table, &mut logged, &records)?;
            return Ok(Some(None));
        }
        // The records, then the finished item off the hook, then the
        // claim (its commit point). A failure after the first write is
        // an unknown outcome: the claim again returns the item it took,
        // or takes one.
        let wrote = !records.is_empty();
        self.record("claiming", &table, &mut logged, &records)?;
        let mut clearing = None;
        if let Some((mine, id)) = retire {
            if self.seam.is_some() && mine.status == HookStatus::Completed {
                // On a server the claim's own swap of the hook takes the
                // finished item off it: a claim that finds every
                // candidate taken meanwhile has changed nothing.
                clearing = Some((mine.assignment.clone(), id));
            } else {
                let _ = self
                    .retire(mine)
                    .map_err(|e| cut_short("claiming", std::slice::from_ref(&id), wrote, e))?;
                *finished = Some(id);
            }
        }
        let wrote = wrote || finished.is_some();
        let mut ids: Vec<ItemId> = finished.iter().cloned().collect();
        if self.seam.is_some() {
            let clearing = clearing.as_ref().map(|(a, id)| (a, id));
            return self
                .claim_first(agent, &candidates, finished, clearing)
                .map(|claimed| claimed.map(Some))
                .map_err(|e| cut_short("claiming", &ids, wrote, e));
        }
        let entry = candidates.into_iter().next().expect("a candidate");
        ids.insert(0, entry.id.clone());
        let assignment = self
            .hooks
            .assign(agent, entry.id.bead(), entry.title.clone(), Some(agent))
            .map_err(|e| cut_short("claiming", &ids, wrote, e.into()))?;
        tracing::debug!(item = %entry.id, %agent, "work claimed");
        Ok(Some(Some(Claimed {
            entry,
            assignment,
            existing: false,
            finished: finished.take(),
        })))
    }
}
