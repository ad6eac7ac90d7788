//! The doctor's repairs on a server, each one transaction that is made
//! against the versions read just before it: a row changed since the
//! check is left for the next run.

use chipset_backend::{Key, Step};
use chipset_store::{Action, AgentId, DoctorMode, Finding};

use super::doctor::{Copy, Group, at};
use super::{Op, Seam, Server, failure};
use crate::MessageId;
use crate::doctor::OrphanReason;
use crate::error::Result;
use crate::format::ManifestEvent;
use crate::layout::Location;

impl Server<'_> {
    /// Applies `repair` with Fix and records what it did.
    pub(super) fn fix(
        &self,
        mode: DoctorMode,
        finding: Finding,
        repair: impl FnOnce() -> Result<Action>,
    ) -> Result<Finding> {
        if mode != DoctorMode::Fix || !finding.fixable {
            return Ok(finding);
        }
        Ok(finding.with(repair()?))
    }

    /// Applies `steps` as one transaction; a row changed since the check
    /// is left for the next run.
    pub(super) fn steps(&self, steps: &[Step<'_>]) -> Result<Action> {
        match self.b.transact(steps) {
            Ok(_) => Ok(Action::Rewrote("index row written".to_owned())),
            Err(
                chipset_backend::Error::Conflict { .. }
                | chipset_backend::Error::NotFound { .. }
                | chipset_backend::Error::Exists { .. },
            ) => Ok(changed()),
            Err(e) => Err(failure(e, Vec::new())),
        }
    }

    /// Replaces an index row with `bytes`: the one there moved aside, in
    /// the same transaction.
    pub(super) fn rewrite(&self, key: &Key, bytes: &[u8]) -> Result<Action> {
        let Some(v) = self.b.read(key).seam()? else {
            return Ok(changed());
        };
        let aside = aside_key(key, self.now()?)?;
        self.steps(&[
            Step::MoveNew {
                from: key,
                expected: v.version,
                to: &aside,
            },
            Step::Create { key, value: bytes },
        ])
        .map(|a| match a {
            Action::Rewrote(_) => {
                Action::Rewrote(format!("rewritten; the old row is at `{aside}`"))
            }
            other => other,
        })
    }

    /// Removes a derived index row at the version it is at now.
    pub(super) fn remove_row(&self, key: &Key) -> Result<Action> {
        let Some(v) = self.b.read(key).seam()? else {
            return Ok(changed());
        };
        self.steps(&[Step::Remove {
            key,
            expected: v.version,
        }])
        .map(|a| match a {
            Action::Rewrote(_) => Action::Removed("index row removed".to_owned()),
            other => other,
        })
    }

    /// Moves the row at `key` into the folder `quarantine` beside it, at
    /// the version it is at now. With `id`, only while it still reads as
    /// that message (a duplicate); without, only while it does not read.
    pub(super) fn move_aside(&self, key: &Key, id: Option<&MessageId>) -> Result<Action> {
        let v = match self.b.read(key) {
            Ok(Some(v)) => v,
            Ok(None) => return Ok(changed()),
            Err(e) => return Err(failure(e, Vec::new())),
        };
        let parses = matches!(
            Self::parse_named(key.dir(), key.name(), &v.value),
            Ok(Some(m)) if id.is_none_or(|id| m.id == *id)
        );
        if parses != id.is_some() {
            return Ok(changed());
        }
        let aside = aside_key(key, self.now()?)?;
        self.steps(&[Step::MoveNew {
            from: key,
            expected: v.version,
            to: &aside,
        }])
        .map(|a| match a {
            Action::Rewrote(_) => Action::quarantined(at(&aside)),
            other => other,
        })
    }

    /// Writes the open row of the request `id` from its message: a
    /// missing one created, or with `bad` the unreadable one moved aside
    /// and replaced, in one transaction. Done only while the request is
    /// still in its inbox without a response (read again just before).
    pub(super) fn reopen(&self, id: &MessageId, m: &Copy, bad: Option<&Key>) -> Result<Action> {
        let msg_key = Self::file(&m.loc, id);
        let Some(v) = self.b.read(&msg_key).seam()? else {
            return Ok(changed());
        };
        if self.has_reply(id)? {
            return Ok(changed());
        }
        let open_key = Self::open_key(&m.task, id);
        let now = self.now()?;
        let mut steps = Vec::new();
        let aside;
        if let Some(bad) = bad {
            let Some(old) = self.b.read(bad).seam()? else {
                return Ok(changed());
            };
            aside = aside_key(bad, now)?;
            steps.push(Step::MoveNew {
                from: bad,
                expected: old.version,
                to: &aside,
            });
        }
        steps.push(Step::Create {
            key: &open_key,
            value: &v.value,
        });
        self.steps(&steps).map(|a| match a {
            Action::Rewrote(_) => Action::Rewrote(
                "open row written from the request: the gate holds it again".to_owned(),
            ),
            other => other,
        })
    }

    /// Moves an orphan from its inbox to `archive/orphan/`, removes its
    /// open rows and appends the `orphaned` event, in one transaction.
    pub(super) fn orphan(
        &self,
        id: &MessageId,
        agent: &AgentId,
        m: &Copy,
        g: &Group,
        reason: OrphanReason,
    ) -> Result<Action> {
        let from = Self::file(&m.loc, id);
        let Some(v) = self.b.read(&from).seam()? else {
            return Ok(changed());
        };
        let to = Self::file(&Location::Orphan, id);
        let open: Vec<(Key, chipset_backend::Version)> = g
            .open
            .iter()
            .map(|(task, _)| {
                let key = Self::open_key(task, id);
                Ok(self.b.read(&key).seam()?.map(|v| (key, v.version)))
            })
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .flatten()
            .collect();
        let event = Self::append_events(&[ManifestEvent::Orphaned {
            id: id.clone(),
            agent: agent.clone(),
            task: m.task.clone(),
            reason,
            at: self.now()?,
        }])?;
        let Op::Append(log, records) = event else {
            unreachable!("append_events is an append")
        };
        let records: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
        let mut steps = vec![Step::MoveNew {
            from: &from,
            expected: v.version,
            to: &to,
        }];
        for (key, version) in &open {
            steps.push(Step::Remove {
                key,
                expected: *version,
            });
        }
        steps.push(Step::Append {
            log: &log,
            records: &records,
        });
        self.steps(&steps).map(|a| match a {
            Action::Rewrote(_) => Action::Moved(
                "moved to archive/orphan/, the seed's fix for `messaging-orphan-inbox`".to_owned(),
            ),
            other => other,
        })
    }
}

/// `{dir}/quarantine/{unix-ms}-{name}`.
fn aside_key(key: &Key, now: chipset_store::Timestamp) -> Result<Key> {
    key.quarantined_at(now).seam()
}

pub(super) fn changed() -> Action {
    Action::LeftAlone("changed since the check: the next run looks again".to_owned())
}
