//! Moving messages forward: archive, and the sweep of a committed task.

use chipset_store::{ReadOutcome, TaskId};

use crate::MessageId;

use crate::error::{Error, Result};
use crate::format::{ManifestEvent, Message, ReplyMarker};
use crate::gate::{Folder, Look};
use crate::layout::{BY_TASK, Location, ORPHAN, id_of};
use crate::mail::{ArchiveOutcome, Mail, Moved, SweepReport};

impl Mail {
    pub(crate) fn move_message(
        &self,
        id: &MessageId,
        from: &Location,
        to: &Location,
    ) -> Result<Moved> {
        let src = self.layout.file(from, id);
        let dst = self.layout.file(to, id);
        match self.state.move_noclobber(&src, &dst) {
            Ok(()) => {
                tracing::debug!(%id, from = %from, to = %to, "moved message");
                Ok(Moved::Done)
            }
            Err(chipset_store::Error::NotFound { .. }) => Ok(Moved::Gone),
            Err(chipset_store::Error::AlreadyExists { .. }) => Ok(Moved::Taken),
            Err(e) => Err(e.into()),
        }
    }

    // ---- changing ------------------------------------------------------

    /// Archives a message: moves it from its inbox to `archive/{id}.json`
    /// and appends an `archived` event (without a data sync of its own:
    /// see the crate docs, Durability).
    ///
    /// **Commit point:** the no-clobber move into `archive/`. A failure
    /// before it leaves nothing visible. After it the message is archived;
    /// the follow-up (entering an unindexed response in the reply index,
    /// the `archived` event) is done as well as it can be, and its failure
    /// is logged, not returned (the doctor completes a missing index entry
    /// and a missing `archived` event).
    ///
    /// Of two processes archiving the same message, exactly one gets
    /// [`ArchiveOutcome::Archived`]; the other gets
    /// [`ArchiveOutcome::AlreadyArchived`], as does archiving a message that
    /// has left its inbox in any other way, which makes archiving again (a
    /// retry) a success that changes nothing. Whether a request has a reply is
    /// answered as [`Mail::has_reply`] answers it: from the reply index, and
    /// on a miss from the response files that exist (a response found that
    /// way is entered in the index). For replies chipset sent the cost does
    /// not grow with the archive.
    ///
    /// # Errors
    ///
    /// [`Error::ArchiveWithoutReply`] for a message that needs a reply
    /// ([`Message::needs_reply`](crate::Message::needs_reply)) and has none; [`Error::NotFound`] when
    /// no message has this id; [`Error::Corrupt`] when its file is
    /// unreadable (it might be a request); [`Error::Store`] when a step
    /// before the commit point fails, or, with
    /// [`chipset_store::Error::OutcomeUnknown`], when the move's sync failed
    /// (the message may be archived: archive again).
    pub fn archive(&self, id: &MessageId) -> Result<ArchiveOutcome> {
        if let Some(server) = self.server() {
            return server.archive(id);
        }
        let found = self
            .found(id)?
            .ok_or_else(|| Error::NotFound { id: id.clone() })?;
        let Location::Inbox(agent) = &found.location else {
            return Ok(ArchiveOutcome::AlreadyArchived(found.location));
        };
        let message = found.message;
        let mut unindexed = None;
        if message.needs_reply() && !self.indexed_reply(id)? && !self.answered_by_group(&message)? {
            match self.unindexed_reply(&message)? {
                Some(response) => unindexed = Some(response),
                None => return Err(Error::ArchiveWithoutReply { id: id.clone() }),
            }
        }
        match self.move_message(id, &found.location, &Location::Archive)? {
            Moved::Done => {
                if message.kind != crate::format::Kind::Response {
                    // Its `archived` event answers nothing: the tail need
                    // not read its file.
                    self.tail.archived(id);
                }
                // Enter the response in the index, so the next look is the
                // fast one. Unsynced: the index is a cache (the response
                // file decides), and an entry a power cut loses is the
                // doctor's `messaging-missing-reply-index`, as for any
                // response another program wrote.
                if let Some(response) = unindexed
                    && let Err(e) = self.link_reply_unsynced(&response)
                {
                    tracing::warn!(%id, error = %e, "archived, but the reply index was not updated");
                }
                let event = ManifestEvent::Archived {
                    id: id.clone(),
                    agent: agent.clone(),
                    task: message.phase.clone(),
                    reply: None,
                    at: self.state.now(),
                    reconciled: false,
                };
                // Not synced on its own, as a send's `sent` event: the move
                // is durable, and the doctor rebuilds the event of a message
                // in `archive/` that a power cut lost it for.
                let appended = self
                    .manifest()
                    .and_then(|log| Ok(log.append_batch_unsynced([&event])?));
                if let Err(e) = appended {
                    tracing::warn!(%id, error = %e, "archived, but the `archived` event was not appended");
                }
                Ok(ArchiveOutcome::Archived(message))
            }
            Moved::Gone | Moved::Taken => Ok(ArchiveOutcome::AlreadyArchived(
                self.locate(id)?.unwrap_or(Location::Archive),
            )),
        }
    }

    /// Moves every message of `task` from the inboxes and `archive/` into
    /// `archive/by-task/{task}/`, then appends a `task-swept` event. Call it
    /// after the task commits.
    ///
    /// **Commit points:** each message's no-clobber move is its own; the
    /// folder `archive/by-task/{task}/` existing is what marks the task swept
    /// (made by the first move, or by the sweep itself when there is nothing
    /// to move). The `task-swept` event is follow-up: its failure is logged,
    /// not returned. Each move is atomic and never overwrites, so a crash or
    /// failure in the middle loses nothing, and running it again (a retry)
    /// moves the rest. Messages sent to the task afterwards stay in their
    /// inboxes (the doctor treats them as orphans), and so may one sent
    /// after the task's last gate into an inbox that held none of the
    /// task's mail then, when that gate was less than ten minutes ago (the
    /// sweep does not list such an inbox; see the crate docs). Finds the task's
    /// messages in the inboxes and `archive/` through the gate cache (see
    /// the crate docs): a folder unchanged since the cache saw it is not
    /// listed, and files without a cache entry (another program's) are read.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] (or [`Error::Unsupported`]) naming a file it
    /// could not read, when it moved no message; [`Error::PartlySwept`]
    /// holding that error when it moved some first (it moves every message
    /// it can; no event is written, so a run after the doctor completes the
    /// sweep), or when a filesystem step fails after some messages moved
    /// (run it again); [`Error::Store`]
    /// when one fails before any moved (nothing visible changed, or, with
    /// [`chipset_store::Error::OutcomeUnknown`], the first move may have
    /// happened).
    pub fn sweep_task_on_commit(&self, task: &TaskId) -> Result<SweepReport> {
        if let Some(server) = self.server() {
            return server.sweep_task_on_commit(task);
        }
        let mut moved = 0;
        let partly = |moved: usize, e: Error| {
            if moved == 0 {
                e
            } else {
                Error::PartlySwept {
                    task: task.clone(),
                    moved,
                    source: Box::new(e),
                }
            }
        };
        let corrupt = self
            .sweep_moves(task, &mut moved)
            .map_err(|e| partly(moved, e))?;
        if let Some(c) = corrupt {
            return Err(partly(moved, c));
        }
        let dir = self.layout.by_task(task);
        let total = (|| -> Result<usize> {
            self.state.ensure_dir(&dir)?;
            self.count_messages(&dir)
        })()
        .map_err(|e| partly(moved, e))?;
        let event = ManifestEvent::TaskSwept {
            task: task.clone(),
            count: moved,
            total,
            at: self.state.now(),
            reconciled: false,
        };
        if let Err(e) = self.manifest().and_then(|log| Ok(log.append(&event)?)) {
            tracing::warn!(%task, error = %e, "swept, but the `task-swept` event was not appended");
        }
        Ok(SweepReport { moved, total })
    }

    /// The moves of a sweep; counts them in `moved` and returns the first
    /// unreadable file met.
    ///
    /// The task's files in each inbox and in `archive/` come from the gate
    /// cache (see the crate docs): a folder unchanged since the cache saw it
    /// is not listed, a changed one is listed and only its new files read;
    /// an inbox that held none of the task's files at its last gate (less
    /// than ten minutes ago) is not listed at all (see the crate docs for
    /// what that can miss). A folder the cache cannot take (it holds a file that is not a
    /// readable, supported message) is read whole, as without the cache, so
    /// every other message of the task still moves.
    fn sweep_moves(&self, task: &TaskId, moved: &mut usize) -> Result<Option<Error>> {
        let dest = Location::ByTask(task.clone());
        let inboxes = self.inbox_stats()?;
        let mut folders: Vec<(Folder, Option<chipset_store::Stat>)> = inboxes
            .iter()
            .map(|(agent, stat)| (Folder::Inbox(agent.clone()), *stat))
            .collect();
        folders.push((Folder::Archive, None));
        let agents: Vec<_> = inboxes.into_iter().map(|(agent, _)| agent).collect();
        let mut walk = self.task_files(task);
        let mut corrupt: Option<Error> = None;
        for (folder, stat) in &folders {
            let source = match folder {
                Folder::Inbox(agent) => Location::Inbox(agent.clone()),
                Folder::Archive => Location::Archive,
            };
            let ids: Vec<MessageId> = match walk.folder_at(folder, Look::Sweep, *stat) {
                Ok(files) => files
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|f| id_of(&f.name))
                    .collect(),
                Err(Error::Corrupt(_) | Error::Unsupported(_)) => {
                    let mut ids = Vec::new();
                    for read in self.scan(&self.layout.dir_of(&source), &[BY_TASK, ORPHAN])? {
                        match read {
                            ReadOutcome::Value(m) if m.phase == *task => ids.push(m.id),
                            ReadOutcome::Value(_) | ReadOutcome::Missing => {}
                            ReadOutcome::Unsupported(u) if Message::foreign_task(&u) => {}
                            ReadOutcome::Corrupt(c) => {
                                corrupt.get_or_insert(c.into());
                            }
                            ReadOutcome::Unsupported(u) => {
                                corrupt.get_or_insert(u.into());
                            }
                        }
                    }
                    ids
                }
                Err(e) => return Err(e),
            };
            for id in ids {
                match self.move_message(&id, &source, &dest)? {
                    Moved::Done => *moved += 1,
                    Moved::Gone => {}
                    Moved::Taken => {
                        tracing::warn!(%id, "message is in the by-task archive and in {source}");
                    }
                }
            }
        }
        walk.finish(&agents);
        Ok(corrupt)
    }

    /// Enters one response in the reply index without syncing anything (a
    /// marker that exists already is written again with the same bytes).
    fn link_reply_unsynced(&self, response: &Message) -> Result<()> {
        let Some(parent) = &response.in_reply_to else {
            return Ok(());
        };
        let marker = ReplyMarker {
            id: response.id.clone(),
            kind: response.kind,
            to: response.to.clone(),
            parent: parent.clone(),
        };
        let path = self
            .layout
            .reply_marker(parent, response.kind, &response.id);
        let bytes = chipset_store::StateDir::to_canonical_json(&marker).map_err(|source| {
            chipset_store::Error::Serialize {
                path: path.clone().into_path_buf(),
                source,
            }
        })?;
        self.state.write_unsynced(&path, &bytes)?;
        Ok(())
    }
}
