//! The commit gate, archiving and the sweep on a server.

use chipset_store::TaskId;

use super::{Op, Seam, Server, failure};
use crate::MessageId;
use crate::error::{Error, Result};
use crate::format::{ManifestEvent, Message};
use crate::layout::{Location, id_of};
use crate::mail::{ArchiveOutcome, SweepReport};

/// How often a sweep that lost a race is tried again.
const ATTEMPTS: usize = 16;

impl Server<'_> {
    /// The task's requests without a response: the rows of `open/{task}/`,
    /// each written in its request's send transaction and removed in its
    /// response's (or its archive's, or sweep's), less the copies of
    /// `any` groups another copy of which is answered. One read, so every
    /// client sees a request the moment its send committed.
    pub(crate) fn pending_replies(&self, task: &TaskId) -> Result<Vec<Message>> {
        let folder = Self::open_dir(task);
        let mut out = Vec::new();
        for (name, v) in self.b.read_all(&folder).seam()? {
            // Only chipset writes here: anything else fails closed.
            match Self::parse_named(&folder, &name, &v.value)? {
                Some(m) => out.push(m),
                None => {
                    return Err(Error::Corrupt(crate::mail::stray(
                        std::path::PathBuf::from(format!("{folder}/{name}")),
                        "not an open request's row",
                    )));
                }
            }
        }
        self.mail.settle_groups(&mut out)?;
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    /// Archives `id`: its move into `archive/`, the removal of its open
    /// row and its `archived` event, in one transaction.
    pub(crate) fn archive(&self, id: &MessageId) -> Result<ArchiveOutcome> {
        let (found, version) = self
            .find_versioned(id)?
            .ok_or_else(|| Error::NotFound { id: id.clone() })?;
        let Location::Inbox(agent) = &found.location else {
            return Ok(ArchiveOutcome::AlreadyArchived(found.location));
        };
        let message = found.message;
        let mut open = None;
        if message.needs_reply() {
            if !self.has_reply(id)? && !self.mail.answered_by_group(&message)? {
                return Err(Error::ArchiveWithoutReply { id: id.clone() });
            }
            open = self
                .b
                .read(&Self::open_key(&message.phase, id))
                .seam()?
                .map(|v| v.version);
        }
        let mut ops = vec![Op::Move(
            Self::file(&found.location, id),
            version,
            Self::file(&Location::Archive, id),
        )];
        if let Some(open) = open {
            ops.push(Op::Remove(Self::open_key(&message.phase, id), open));
        }
        ops.push(Self::append_events(&[ManifestEvent::Archived {
            id: id.clone(),
            agent: agent.clone(),
            task: message.phase.clone(),
            reply: None,
            at: self.now()?,
            reconciled: false,
        }])?);
        match self.apply(&ops) {
            Ok(()) => Ok(ArchiveOutcome::Archived(message)),
            Err(
                chipset_backend::Error::NotFound { .. }
                | chipset_backend::Error::Conflict { .. }
                | chipset_backend::Error::Exists { .. },
            ) => Ok(ArchiveOutcome::AlreadyArchived(
                self.find(id)?.map_or(Location::Archive, |f| f.location),
            )),
            Err(e) => Err(failure(e, Vec::new())),
        }
    }

    /// Moves every message of `task` still in an inbox or `archive/` into
    /// `archive/by-task/{task}/`, removes its open rows and appends the
    /// `task-swept` event, in one transaction.
    pub(crate) fn sweep_task_on_commit(&self, task: &TaskId) -> Result<SweepReport> {
        let folder = Self::task_dir(task);
        let to = Location::ByTask(task.clone());
        let mut last = None;
        for _ in 0..ATTEMPTS {
            let mut ops = Vec::new();
            let mut moved = 0;
            let mut total = 0;
            for (name, _) in self.b.read_all(&folder).seam()? {
                let Some(id) = id_of(&name) else { continue };
                let Some((found, version)) = self.find_versioned(&id)? else {
                    continue;
                };
                if matches!(found.location, Location::ByTask(_)) {
                    total += 1;
                    continue;
                }
                // The doctor's orphans stay where it put them, as on a directory.
                if matches!(found.location, Location::Orphan) {
                    continue;
                }
                ops.push(Op::Move(
                    Self::file(&found.location, &id),
                    version,
                    Self::file(&to, &id),
                ));
                if let Some(v) = self.b.read(&Self::open_key(task, &id)).seam()? {
                    ops.push(Op::Remove(Self::open_key(task, &id), v.version));
                }
                moved += 1;
                total += 1;
            }
            ops.push(Self::append_events(&[ManifestEvent::TaskSwept {
                task: task.clone(),
                count: moved,
                total,
                at: self.now()?,
                reconciled: false,
            }])?);
            match self.apply(&ops) {
                Ok(()) => return Ok(SweepReport { moved, total }),
                Err(
                    e @ (chipset_backend::Error::NotFound { .. }
                    | chipset_backend::Error::Conflict { .. }
                    | chipset_backend::Error::Exists { .. }),
                ) => last = Some(e),
                Err(e) => return Err(failure(e, Vec::new())),
            }
        }
        Err(failure(
            last.expect("a failed attempt keeps its error"),
            Vec::new(),
        ))
    }
}
