//! The bus on the storage seam (issue 30): the queues, read and
//! acknowledged through a `chipset_backend::Backend` (a PostgreSQL server)
//! when the bus was made with [`Bus::with_backend`].
//!
//! The keys mirror the files: `bus/{agent}/queue/{event name}`,
//! `bus/{agent}/processed/{event name}`, `bus/{agent}/dedup/{key name}`,
//! `presence.json`, `registry.json`, `nag.json`, the log `control.jsonl`,
//! and the marker `available.json` that [`Bus::ensure_queue`] creates (a
//! server has no empty folder to stand for an agent's queue). Values are
//! the files' bytes, so moving a state between a directory and a server
//! keeps them byte for byte.

use std::path::{Path, PathBuf};

use chipset_backend::{Backend, Dir, Key, Version};
use chipset_store::{Corruption, ReadOutcome, Timestamp};
use serde::de::DeserializeOwned;

use super::*;
use crate::format::parse_event;

/// The marker of an agent's queue on a server.
pub(crate) const AVAILABLE: &str = "available.json";

/// Turns a seam error into the bus's.
pub(crate) fn seam_error(e: chipset_backend::Error) -> Error {
    Error::Backend(Box::new(e))
}

/// The path a key is shown by in what the bus reports (`bus/a/queue/…`).
pub(crate) fn key_path(key: &Key) -> PathBuf {
    PathBuf::from(key.to_string())
}

/// Parses a value's bytes as the store's typed reads do.
pub(crate) fn parse<T: DeserializeOwned>(path: &Path, bytes: &[u8]) -> ReadOutcome<T> {
    ReadOutcome::from_json(path, bytes)
}

impl Bus {
    /// Returns the folder `bus/{agent}[/{folder}]` on the seam.
    pub(crate) fn seam_dir(&self, agent: &AgentId, folder: Option<&str>) -> Dir {
        let dir = Dir::new(Bus::CHANNEL.as_str())
            .and_then(|d| d.join(agent.as_str()))
            .expect("a validated agent id is a valid name");
        match folder {
            Some(f) => dir.join(f).expect("a bus folder is a valid name"),
            None => dir,
        }
    }

    /// Returns the key `bus/{agent}[/{folder}]/{name}` on the seam.
    pub(crate) fn seam_key(
        &self,
        agent: &AgentId,
        folder: Option<&str>,
        name: &str,
    ) -> Result<Key> {
        self.seam_dir(agent, folder).key(name).map_err(seam_error)
    }

    /// Returns the time on the backend's clock (the server's).
    pub(crate) fn seam_now(&self, seam: &dyn Backend) -> Result<Timestamp> {
        seam.now().map_err(seam_error)
    }

    /// Reads `key` as a `T`, with the version to swap at.
    pub(crate) fn seam_read<T: DeserializeOwned>(
        &self,
        seam: &dyn Backend,
        key: &Key,
    ) -> Result<(ReadOutcome<T>, Option<Version>)> {
        match seam.read(key) {
            Ok(None) => Ok((ReadOutcome::Missing, None)),
            Ok(Some(v)) => Ok((parse(&key_path(key), &v.value), Some(v.version))),
            Err(chipset_backend::Error::Corrupt { reason, .. }) => Ok((
                ReadOutcome::Corrupt(Corruption {
                    path: key_path(key),
                    reason,
                }),
                None,
            )),
            Err(e) => Err(seam_error(e)),
        }
    }

    /// Moves the unreadable value at `key` aside into the folder
    /// `quarantine` beside it, named `{unix-ms}-{name}` (a server's
    /// quarantine; nothing is deleted). Returns false when it changed
    /// meanwhile (the caller reads again).
    pub(crate) fn seam_quarantine(&self, seam: &dyn Backend, key: &Key) -> Result<bool> {
        let Some(found) = seam.read(key).map_err(seam_error)? else {
            return Ok(false);
        };
        let now = self.seam_now(seam)?;
        let to = key.quarantined_at(now).map_err(seam_error)?;
        tracing::warn!(%key, to = %to, "moving an unreadable bus value aside");
        let aside = seam
            .quarantine(key, found.version, now)
            .map_err(seam_error)?;
        Ok(aside.is_some())
    }

    /// Lists the names in `agent`'s `folder` (`queue`, `processed`): the
    /// directory's entries, or the seam's keys (so [`Bus::agent_status`]
    /// counts on a server too).
    pub(crate) fn folder_names(
        &self,
        agent: &AgentId,
        folder: &'static str,
    ) -> Result<Vec<String>> {
        match &self.seam {
            None => Ok(self
                .state
                .list(&self.agent_dir(agent).join_static(folder))?),
            Some(seam) => seam
                .list(&self.seam_dir(agent, Some(folder)))
                .map_err(seam_error),
        }
    }

    /// Lists the event names in `bus/{agent}/{folder}`, in processing order.
    pub(crate) fn seam_entries(
        &self,
        seam: &dyn Backend,
        agent: &AgentId,
        folder: &str,
    ) -> Result<Vec<QueueEntry>> {
        Ok(seam
            .list(&self.seam_dir(agent, Some(folder)))
            .map_err(seam_error)?
            .iter()
            .filter_map(|n| QueueEntry::parse(n))
            .collect())
    }

    /// Reads one event value and checks it against its name.
    pub(crate) fn seam_read_event(&self, seam: &dyn Backend, key: &Key) -> Result<EventRead> {
        if QueueEntry::parse(key.name()).is_none() {
            return Ok(EventRead::Bad(Problem::ForeignName));
        }
        let bytes = match seam.read(key) {
            Ok(None) => return Ok(EventRead::Gone),
            Ok(Some(v)) => v.value,
            Err(chipset_backend::Error::Corrupt { reason, .. }) => {
                return Ok(EventRead::Bad(Problem::Corrupt(reason)));
            }
            Err(e) => return Err(seam_error(e)),
        };
        Ok(self.parse_event_at(key, &bytes))
    }

    /// Takes the bytes read at `key` as an event checked against its name.
    fn parse_event_at(&self, key: &Key, bytes: &[u8]) -> EventRead {
        let Some(entry) = QueueEntry::parse(key.name()) else {
            return EventRead::Bad(Problem::ForeignName);
        };
        match parse_event(&key_path(key), bytes) {
            ReadOutcome::Missing => EventRead::Gone,
            ReadOutcome::Corrupt(c) => EventRead::Bad(Problem::Corrupt(c.reason)),
            ReadOutcome::Unsupported(u) => EventRead::Bad(Problem::Unsupported(u.what)),
            ReadOutcome::Value(e) if e.id != *entry.id() || e.priority != entry.priority() => {
                EventRead::Bad(Problem::NameMismatch)
            }
            ReadOutcome::Value(e) => EventRead::Event(e),
        }
    }

    /// [`Bus::pending`] on the seam: the queue's values in one read (one
    /// statement on a server), in name order, each checked against its
    /// name. A backend that cannot read one of them whole (a directory's
    /// unreadable file) is read value by value, so it is reported, not fatal.
    pub(crate) fn seam_pending(&self, seam: &dyn Backend, agent: &AgentId) -> Result<Pending> {
        let dir = self.seam_dir(agent, Some(QUEUE));
        let mut pending = Pending::default();
        let mut note = |key: Key, read: EventRead| match read {
            EventRead::Gone => {}
            EventRead::Event(e) => pending.events.push(e),
            EventRead::Bad(problem) => {
                pending.unreadable.insert(key_path(&key), problem);
            }
        };
        match seam.read_all(&dir) {
            Ok(values) => {
                for (name, v) in values {
                    let key = dir.key(&name).map_err(seam_error)?;
                    let read = self.parse_event_at(&key, &v.value);
                    note(key, read);
                }
            }
            Err(chipset_backend::Error::Corrupt { .. }) => {
                for name in seam.list(&dir).map_err(seam_error)? {
                    let key = dir.key(&name).map_err(seam_error)?;
                    let read = self.seam_read_event(seam, &key)?;
                    note(key, read);
                }
            }
            Err(e) => return Err(seam_error(e)),
        }
        Ok(pending)
    }

    /// [`Bus::ensure_queue`] on the seam: creates the agent's marker.
    pub(crate) fn seam_ensure_queue(&self, seam: &dyn Backend, agent: &AgentId) -> Result<()> {
        let key = self.seam_key(agent, None, AVAILABLE)?;
        // Created or already there: either way the queue exists.
        let _ = seam.create(&key, b"{}\n").map_err(seam_error)?;
        Ok(())
    }

    /// [`Bus::is_available`] on the seam: the marker, or any event queued
    /// or processed (a publish makes an agent available, as it creates the
    /// queue folder on a directory).
    pub(crate) fn seam_is_available(&self, seam: &dyn Backend, agent: &AgentId) -> Result<bool> {
        let key = self.seam_key(agent, None, AVAILABLE)?;
        if seam.read(&key).map_err(seam_error)?.is_some() {
            return Ok(true);
        }
        for folder in [QUEUE, PROCESSED] {
            let dir = self.seam_dir(agent, Some(folder));
            if !seam.list(&dir).map_err(seam_error)?.is_empty() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// [`Bus::ack`] on the seam.
    pub(crate) fn seam_ack(
        &self,
        seam: &dyn Backend,
        agent: &AgentId,
        id: &EventId,
    ) -> Result<bool> {
        let find = |entries: Vec<QueueEntry>| {
            entries
                .into_iter()
                .find(|e| e.id() == id)
                .map(|e| e.name().to_owned())
        };
        if let Some(name) = find(self.seam_entries(seam, agent, QUEUE)?)
            && let Some(outcome) = self.seam_ack_name(seam, agent, &name)?
        {
            return Ok(outcome);
        }
        if find(self.seam_entries(seam, agent, PROCESSED)?).is_some() {
            return Ok(false);
        }
        Err(Error::UnknownEvent {
            agent: agent.clone(),
            id: id.clone(),
        })
    }

    /// Moves `name` from the queue to processed with the seam's no-clobber
    /// move (one statement on a server): whether it moved now, `None`
    /// when it is in neither place. A retry of a move whose outcome was
    /// unknown finds it processed: false.
    pub(crate) fn seam_ack_name(
        &self,
        seam: &dyn Backend,
        agent: &AgentId,
        name: &str,
    ) -> Result<Option<bool>> {
        let from = self.seam_key(agent, Some(QUEUE), name)?;
        let to = self.seam_key(agent, Some(PROCESSED), name)?;
        let processed = || -> Result<Option<bool>> {
            let there = seam.read(&to).map_err(seam_error)?.is_some();
            Ok(there.then_some(false))
        };
        loop {
            let found = match seam.read(&from) {
                Ok(Some(v)) => v,
                Ok(None) => return processed(),
                // An unreadable queue value is acknowledged as it is: the
                // move never looks inside, so read its version another way.
                Err(e) => return Err(seam_error(e)),
            };
            match seam.move_new(&from, found.version, &to) {
                Ok(_) => return Ok(Some(true)),
                Err(chipset_backend::Error::NotFound { .. }) => return processed(),
                // An event's value never changes; read it again.
                Err(chipset_backend::Error::Conflict { .. }) => continue,
                Err(chipset_backend::Error::Exists { current, .. }) => {
                    // In both places (planted, or copied by hand): keep the
                    // processed copy, and drop the queued one only when it
                    // holds the same bytes, as on a directory.
                    if current.is_some_and(|c| c.value == found.value) {
                        seam.remove(&from, found.version).map_err(seam_error)?;
                    } else {
                        tracing::warn!(key = %from, "event in queue and processed with different contents; left alone");
                    }
                    return Ok(Some(false));
                }
                Err(e) => return Err(seam_error(e)),
            }
        }
    }

    /// Finds an event with `built`'s id in `agent`'s queue or processed
    /// area on the seam; as [`Bus::find_published`].
    pub(crate) fn seam_find_published(
        &self,
        seam: &dyn Backend,
        agent: &AgentId,
        built: &Event,
    ) -> Result<Option<Event>> {
        for folder in [QUEUE, PROCESSED] {
            for entry in self.seam_entries(seam, agent, folder)? {
                if *entry.id() != built.id {
                    continue;
                }
                let key = self.seam_key(agent, Some(folder), entry.name())?;
                match self.seam_read_event(seam, &key)? {
                    EventRead::Event(first) if built.same_content(&first) => {
                        return Ok(Some(first));
                    }
                    EventRead::Gone => continue,
                    EventRead::Bad(problem) => return Err(problem.error(key_path(&key))),
                    EventRead::Event(_) => {
                        return Err(Error::IdTaken {
                            agent: agent.clone(),
                            id: built.id.clone(),
                            path: key_path(&key),
                        });
                    }
                }
            }
        }
        Ok(None)
    }
}
