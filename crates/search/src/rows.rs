//! The catch-up on a PostgreSQL server (issue 30): the index stays a
//! local cache (in the server's local folder), read from the server's rows
//! instead of files. A server has no folder stamps, so what changed is
//! found from the rows themselves:
//!
//! - mail: the manifest log, from where this handle last read it (from
//!   its start in a new process: the position is the backend's, not
//!   kept in the index); each `sent`, `archived` or `orphaned` message not
//!   yet indexed is found wherever it is now ([`Mail::find`]);
//! - the bus: each agent's queue, read again when the names in it changed;
//! - hooks and reminders: listed, and written into the index only when
//!   what they say changed (a hash of their docs is the stamp).

use std::sync::Arc;

use chipset_backend::{Backend, Dir, LogPos};
use chipset_nudge::ReminderFilter;
use chipset_store::{AgentId, ReadOutcome};
use rusqlite::Transaction;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::index::{self, Doc};
use crate::sources::{
    Counts, HOOK, MANIFEST, REMINDER, Sources, db, hook_doc, reminder_doc, unindexed_id,
};

/// The manifest's key on the server: `mail/manifest.jsonl`.
fn manifest_key() -> chipset_backend::Key {
    Dir::new("mail")
        .and_then(|d| d.key("manifest.jsonl"))
        .expect("a constant name is valid")
}

impl Sources {
    /// Brings every channel's docs up to date from the server's rows;
    /// `full` reads the manifest from its start.
    pub(crate) fn catch_up_rows(
        &self,
        seam: &Arc<dyn Backend>,
        tx: &Transaction<'_>,
        full: bool,
    ) -> Result<Counts> {
        let mut counts = Counts::default();
        self.mail_rows(seam.as_ref(), tx, full, &mut counts)?;
        self.bus_rows(seam.as_ref(), tx, &mut counts)?;
        let mut hooks = Vec::new();
        for (agent, read) in self.hooks.list()? {
            if let ReadOutcome::Value(hook) = read {
                hooks.extend(hook_doc(&agent, &hook));
            }
        }
        replace_if_changed(tx, HOOK, &hooks, &mut counts)?;
        let listing = self.reminders.list(&ReminderFilter {
            history: true,
            ..ReminderFilter::default()
        })?;
        let reminders: Vec<Doc> = listing.items.iter().map(reminder_doc).collect();
        replace_if_changed(tx, REMINDER, &reminders, &mut counts)?;
        Ok(counts)
    }

    fn mail_rows(
        &self,
        seam: &dyn Backend,
        tx: &Transaction<'_>,
        full: bool,
        counts: &mut Counts,
    ) -> Result<()> {
        let mut read = self
            .read_to
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let from = match *read {
            Some(pos) if !full => pos,
            _ => LogPos::START,
        };
        let log = seam
            .read_log(&manifest_key(), from)
            .map_err(|e| Error::channel("mail", &e))?;
        for record in &log.records {
            let Ok(record) = serde_json::from_slice::<Value>(record) else {
                continue;
            };
            self.message_of(tx, &record, counts)?;
        }
        // Where the next catch-up of this handle goes on; an index made
        // anew (`full`) reads from the start again.
        *read = Some(log.next);
        if index::stamp(tx, MANIFEST).map_err(db)?.is_none() {
            index::set_stamp(tx, MANIFEST, "server").map_err(db)?;
        }
        Ok(())
    }

    /// Indexes the message a manifest record names, unless it is there.
    fn message_of(&self, tx: &Transaction<'_>, record: &Value, counts: &mut Counts) -> Result<()> {
        let event = record.get("event").and_then(Value::as_str);
        if !matches!(event, Some("sent" | "archived" | "orphaned")) {
            return Ok(());
        }
        match unindexed_id(tx, record)? {
            Some(id) => self.add_found(tx, &id, counts),
            None => Ok(()),
        }
    }

    fn bus_rows(
        &self,
        seam: &dyn Backend,
        tx: &Transaction<'_>,
        counts: &mut Counts,
    ) -> Result<()> {
        let bus = Dir::new("bus").expect("a constant name is valid");
        let agents: Vec<AgentId> = seam
            .list_dirs(&bus)
            .map_err(|e| Error::channel("bus", &e))?
            .into_iter()
            .filter_map(|n| AgentId::new(n).ok())
            .collect();
        self.bus_queues(tx, &agents, counts, |agent, place| {
            // A server has no folder stamps: a digest of the names in the
            // queue says whether it changed.
            let queue = bus
                .join(agent.as_str())
                .and_then(|d| d.join("queue"))
                .map_err(|e| Error::channel("bus", &e))?;
            let names = seam.list(&queue).map_err(|e| Error::channel("bus", &e))?;
            let stamp = format!("{:016x}", fnv1a(names.join("\n").as_bytes()));
            let kept = index::stamp(tx, place).map_err(db)?;
            Ok((kept.as_deref() != Some(stamp.as_str())).then_some(stamp))
        })
    }
}

/// Replaces the docs of `place` with `docs` when they differ from what was
/// indexed (a hash of them is the place's stamp).
fn replace_if_changed(
    tx: &Transaction<'_>,
    place: &str,
    docs: &[Doc],
    counts: &mut Counts,
) -> Result<()> {
    let stamp = format!("{:016x}", fnv1a(format!("{docs:?}").as_bytes()));
    if index::stamp(tx, place).map_err(db)?.as_deref() == Some(stamp.as_str()) {
        return Ok(());
    }
    counts.read += docs.len();
    index::replace_place(tx, place, docs).map_err(db)?;
    index::set_stamp(tx, place, &stamp).map_err(db)
}

/// A stamp of what a listing said: the store's stable FNV-1a.
fn fnv1a(bytes: &[u8]) -> u64 {
    chipset_store::EscapeAlphabet::fnv1a_64(bytes.iter().copied())
}
