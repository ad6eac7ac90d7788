//! Reading the channels into [`Doc`]s: what changed since the last look,
//! found from the mail manifest and the folders' stamps.
//!
//! A folder's stamp is its device, inode, mtime and ctime: every create,
//! rename and unlink in a folder changes its mtime and ctime, and no
//! program can set a ctime. A stamp younger than [`SETTLE`] is not trusted
//! (two changes within one tick of a coarse clock can share it), so such a
//! folder is read again at the next look.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chipset_backend::{Backend, LogPos};
use chipset_bus::{Bus, Event};
use chipset_hook::{Hook, Hooks};
use chipset_mail::{Mail, Message, MessageId};
use chipset_nudge::{Reminder, ReminderFilter, Reminders};
use chipset_store::{AgentId, ReadOutcome, StateDir, StatePath};
use rusqlite::Transaction;
use serde_json::Value;

use crate::error::Result;
use crate::index::{self, Doc};
use crate::query::Origin;

/// How old a folder's stamp must be before it is trusted.
pub(crate) const SETTLE: Duration = Duration::from_secs(2);

/// The largest message file read: mail's own cap.
const MESSAGE_CAP: u64 = 16 * 1024 * 1024;

const MAIL: &str = "mail";
pub(crate) const MANIFEST: &str = "mail-manifest";
/// The stamp naming the mail folder the index's messages come from.
const MAIL_STORE: &str = "mail-store";
pub(crate) const HOOK: &str = "hook";
pub(crate) const REMINDER: &str = "reminder";
const BUS_PREFIX: &str = "bus/";
const INBOX_PREFIX: &str = "inbox/";

/// The channels a catch-up reads.
#[derive(Debug, Clone)]
pub(crate) struct Sources {
    pub(crate) state: StateDir,
    pub(crate) mail: Mail,
    pub(crate) bus: Bus,
    pub(crate) hooks: Hooks,
    pub(crate) reminders: Reminders,
    /// The server the channels are on; `None`: the state root's files.
    pub(crate) seam: Option<Arc<dyn Backend>>,
    /// On a server, where this handle's next read of the manifest starts.
    pub(crate) read_to: Arc<Mutex<Option<LogPos>>>,
}

/// What one catch-up did, for the caller and the tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) read: usize,
}

/// Returns the stamp of `dir` (`absent` when it is not there), or `None`
/// when it is too young to trust.
fn stamp_of(state: &StateDir, dir: &StatePath) -> Result<Option<String>> {
    let Some(stat) = state.stat(dir)? else {
        return Ok(Some("absent".to_owned()));
    };
    let (ms, mn) = stat.mtime;
    let (cs, cn) = stat.ctime;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let newest = Duration::new(ms.max(cs).max(0).unsigned_abs(), 0);
    if now.saturating_sub(newest) < SETTLE + Duration::from_secs(1) {
        return Ok(None);
    }
    Ok(Some(format!(
        "{}:{}:{ms}.{mn}:{cs}.{cn}",
        stat.dev, stat.ino
    )))
}

/// Compares `dir`'s stamp with the one kept for `place`: returns the new
/// stamp to keep when the folder changed (or is unsettled), `None` when it
/// is as it was.
fn changed(
    tx: &Transaction<'_>,
    state: &StateDir,
    place: &str,
    dir: &StatePath,
) -> Result<Option<String>> {
    let now = stamp_of(state, dir)?;
    let kept = index::stamp(tx, place).map_err(db)?;
    match now {
        Some(s) if kept.as_deref() == Some(s.as_str()) => Ok(None),
        Some(s) => Ok(Some(s)),
        // Unsettled: read it, and keep a stamp that never matches.
        None => Ok(Some(String::new())),
    }
}

pub(crate) fn db(e: rusqlite::Error) -> crate::Error {
    crate::search::Damage(e).into()
}

impl Sources {
    /// Brings every channel's docs up to date; `full` reads every message
    /// folder instead of the manifest's tail.
    pub(crate) fn catch_up(&self, tx: &Transaction<'_>, full: bool) -> Result<Counts> {
        if let Some(seam) = &self.seam {
            return self.catch_up_rows(seam, tx, full);
        }
        let mut counts = Counts::default();
        self.mail(tx, full, &mut counts)?;
        self.bus(tx, &mut counts)?;
        self.hooks(tx, &mut counts)?;
        self.reminders(tx, &mut counts)?;
        Ok(counts)
    }

    // ---- mail ----------------------------------------------------------

    /// Keeps the index to one mail store: when the mail read now is not
    /// the one the index holds (a mail folder given, or taken away, since:
    /// an index without the stamp holds the root's `mail/`), forgets every
    /// message and returns true, to read every folder again.
    fn mail_moved(&self, tx: &Transaction<'_>) -> Result<bool> {
        let here = self.mail.dir().as_path().display().to_string();
        let held = index::stamp(tx, MAIL_STORE).map_err(db)?;
        if held.as_deref() == Some(here.as_str()) {
            return Ok(false);
        }
        let root_mail = Mail::new(self.state.clone())
            .dir()
            .as_path()
            .display()
            .to_string();
        let moved = held.unwrap_or(root_mail) != here;
        if moved {
            index::forget_origin(tx, Origin::Mail, MANIFEST, INBOX_PREFIX).map_err(db)?;
        }
        index::set_stamp(tx, MAIL_STORE, &here).map_err(db)?;
        Ok(moved)
    }

    fn mail(&self, tx: &Transaction<'_>, full: bool, counts: &mut Counts) -> Result<()> {
        let full = self.mail_moved(tx)? || full;
        let dir = self.mail.dir().clone();
        let manifest = dir.join("manifest.jsonl")?;
        let log = self.mail.state().log_reader(&manifest)?;
        let kept = index::stamp(tx, MANIFEST).map_err(db)?;
        let ino = self.mail.state().stat(&manifest)?.map_or(0, |s| s.ino);
        // Where the tail is, if the manifest is still the one it was read from.
        let from = match (full, kept.as_deref().and_then(parse_tail)) {
            (false, Some((kept_ino, offset, tail))) if kept_ino == ino => {
                let start = offset.saturating_sub(tail.len() as u64);
                let now = log.bytes_at(start, offset)?.unwrap_or_default();
                (now == tail).then_some(offset)
            }
            _ => None,
        };
        match from {
            Some(offset) => {
                let contents = log.read_from::<Value>(offset)?;
                for record in &contents.records {
                    self.mail_event(tx, record, counts)?;
                }
                self.keep_tail(tx, &log, ino, contents.end_offset)?;
                self.inboxes(tx, &dir, counts)?;
            }
            None => {
                // Read where the manifest ends first: whatever is sent while
                // the folders are walked is in the tail next time.
                let end = log.for_each::<serde::de::IgnoredAny>(|_| {})?.end_offset;
                self.inboxes(tx, &dir, counts)?;
                for folder in self.archive_folders(&dir)? {
                    self.folder(tx, &folder, None, counts)?;
                }
                self.keep_tail(tx, &log, ino, end)?;
            }
        }
        Ok(())
    }

    fn keep_tail(
        &self,
        tx: &Transaction<'_>,
        log: &chipset_store::JsonLog,
        ino: u64,
        offset: u64,
    ) -> Result<()> {
        let tail = log
            .bytes_at(offset.saturating_sub(16), offset)?
            .unwrap_or_default();
        let hex: String = tail.iter().map(|b| format!("{b:02x}")).collect();
        let stamp = format!("{ino}:{offset}:{hex}");
        // Nothing new is no write: the catch-up then commits nothing.
        if index::stamp(tx, MANIFEST).map_err(db)?.as_deref() == Some(stamp.as_str()) {
            return Ok(());
        }
        index::set_stamp(tx, MANIFEST, &stamp).map_err(db)
    }

    /// Indexes the message a manifest record names (a `sent` event, in
    /// chipset's shape or nubos-pilot's), unless it is there already.
    fn mail_event(&self, tx: &Transaction<'_>, record: &Value, counts: &mut Counts) -> Result<()> {
        let event = record
            .get("event")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if event == "task-swept" {
            // A message can be swept before it was ever seen in its inbox
            // (another program's file, with no `sent` line): list the folder.
            let task = record.get("task").or_else(|| record.get("task_id"));
            if let Some(folder) = task.and_then(Value::as_str).and_then(|t| {
                self.mail
                    .dir()
                    .join("archive")
                    .and_then(|a| a.join("by-task"))
                    .and_then(|b| b.join(t))
                    .ok()
            }) {
                self.folder(tx, &folder, None, counts)?;
            }
            return Ok(());
        }
        if !matches!(event, "sent" | "archived" | "orphaned") {
            return Ok(());
        }
        let Some(id) = unindexed_id(tx, record)? else {
            return Ok(());
        };
        let inbox = record
            .get("to")
            .and_then(Value::as_str)
            .and_then(|to| self.mail.dir().join("inbox").and_then(|p| p.join(to)).ok());
        if let Some(inbox) = inbox
            && let Some(m) = read_message(self.mail.state(), &inbox, &format!("{id}.json"))?
        {
            return self.add_message(tx, &m, counts);
        }
        // Moved on since (archived, swept, orphaned): mail finds it.
        self.add_found(tx, &id, counts)
    }

    /// Indexes the message `id` wherever it is now ([`Mail::find`]); one
    /// that cannot be read is left out.
    pub(crate) fn add_found(
        &self,
        tx: &Transaction<'_>,
        id: &MessageId,
        counts: &mut Counts,
    ) -> Result<()> {
        match self.mail.find(id) {
            Ok(Some(message)) => self.add_message(tx, &message, counts),
            Ok(None) => Ok(()),
            Err(e) => {
                tracing::debug!(%id, error = %e, "a sent message could not be read; left out of the index");
                Ok(())
            }
        }
    }

    fn add_message(&self, tx: &Transaction<'_>, m: &Message, counts: &mut Counts) -> Result<()> {
        if index::insert(tx, &message_doc(m)).map_err(db)? {
            counts.read += 1;
        }
        Ok(())
    }

    /// Lists every inbox whose stamp changed and reads the files not yet indexed.
    fn inboxes(&self, tx: &Transaction<'_>, dir: &StatePath, counts: &mut Counts) -> Result<()> {
        let root = dir.join("inbox")?;
        for agent in self.mail.state().list_dirs(&root)? {
            let Ok(inbox) = root.join(&agent) else {
                continue;
            };
            let place = format!("{INBOX_PREFIX}{agent}");
            if let Some(stamp) = changed(tx, self.mail.state(), &place, &inbox)? {
                // What the index holds for this addressee, in one query
                // rather than one per listed file.
                let known = index::idents_of(tx, &format!("{MAIL}/{agent}")).map_err(db)?;
                self.folder(tx, &inbox, Some(&known), counts)?;
                index::set_stamp(tx, &place, &stamp).map_err(db)?;
            }
        }
        Ok(())
    }

    /// `archive/`, `archive/orphan/` and each `archive/by-task/{task}/`.
    fn archive_folders(&self, dir: &StatePath) -> Result<Vec<StatePath>> {
        let archive = dir.join("archive")?;
        let mut out = vec![archive.clone(), archive.join("orphan")?];
        let by_task = archive.join("by-task")?;
        for task in self.mail.state().list_dirs(&by_task)? {
            if let Ok(p) = by_task.join(&task) {
                out.push(p);
            }
        }
        Ok(out)
    }

    /// Reads every `{id}.json` in `folder` that the index does not hold
    /// (`known`: the ids it holds there, when the caller has them).
    fn folder(
        &self,
        tx: &Transaction<'_>,
        folder: &StatePath,
        known: Option<&HashSet<String>>,
        counts: &mut Counts,
    ) -> Result<()> {
        for name in self.mail.state().list(folder)? {
            let Some(stem) = name.strip_suffix(".json") else {
                continue;
            };
            if known.is_some_and(|k| k.contains(stem)) {
                continue;
            }
            let Ok(id) = MessageId::new(stem) else {
                continue;
            };
            if index::has(tx, &format!("mail/{id}")).map_err(db)? {
                continue;
            }
            if let Some(m) = read_message(self.mail.state(), folder, &name)? {
                self.add_message(tx, &m, counts)?;
            }
        }
        Ok(())
    }

    // ---- bus -----------------------------------------------------------

    fn bus(&self, tx: &Transaction<'_>, counts: &mut Counts) -> Result<()> {
        let agents = self.bus.agents()?;
        self.bus_queues(tx, &agents, counts, |agent, place| {
            changed(tx, &self.state, place, &self.bus.queue_dir(agent))
        })
    }

    /// Reads again the pending events of each of `agents` whose queue
    /// changed, and forgets the queues of agents no longer there.
    /// `changed` is the stamp source: given an agent and its place, it
    /// returns the stamp to keep when the queue changed since the kept
    /// one, `None` when it is as it was (a folder's stamp on a directory,
    /// a digest of the queue's names on a server).
    pub(crate) fn bus_queues(
        &self,
        tx: &Transaction<'_>,
        agents: &[AgentId],
        counts: &mut Counts,
        mut changed: impl FnMut(&AgentId, &str) -> Result<Option<String>>,
    ) -> Result<()> {
        for agent in agents {
            let place = format!("{BUS_PREFIX}{agent}");
            let Some(stamp) = changed(agent, &place)? else {
                continue;
            };
            let pending = self.bus.pending(agent)?;
            let docs: Vec<Doc> = pending
                .events
                .iter()
                .map(|e| event_doc(agent.as_str(), e))
                .collect();
            counts.read += docs.len();
            index::replace_place(tx, &place, &docs).map_err(db)?;
            index::set_stamp(tx, &place, &stamp).map_err(db)?;
        }
        for place in index::places_with_prefix(tx, BUS_PREFIX).map_err(db)? {
            let agent = &place[BUS_PREFIX.len()..];
            if !agents.iter().any(|a| a.as_str() == agent) {
                index::forget_place(tx, &place).map_err(db)?;
            }
        }
        Ok(())
    }

    // ---- hooks ---------------------------------------------------------

    fn hooks(&self, tx: &Transaction<'_>, counts: &mut Counts) -> Result<()> {
        let Some(stamp) = changed(tx, &self.state, HOOK, self.hooks.dir())? else {
            return Ok(());
        };
        let mut docs = Vec::new();
        for (agent, read) in self.hooks.list()? {
            if let ReadOutcome::Value(hook) = read {
                docs.extend(hook_doc(&agent, &hook));
            }
        }
        counts.read += docs.len();
        index::replace_place(tx, HOOK, &docs).map_err(db)?;
        index::set_stamp(tx, HOOK, &stamp).map_err(db)
    }

    // ---- reminders -----------------------------------------------------

    fn reminders(&self, tx: &Transaction<'_>, counts: &mut Counts) -> Result<()> {
        // Open and snoozed reminders are files two folders down; resolved
        // ones are in `history/`. Any change changes one of these stamps.
        let root = self.state.channel(chipset_nudge::Reminders::CHANNEL);
        let mut dirs = vec![root.join("history")?];
        for area in ["open", "snoozed"] {
            let area = root.join(area)?;
            for kind in self.state.list_dirs(&area)? {
                let Ok(kind) = area.join(&kind) else { continue };
                for source in self.state.list_dirs(&kind)? {
                    if let Ok(p) = kind.join(&source) {
                        dirs.push(p);
                    }
                }
                dirs.push(kind);
            }
            dirs.push(area);
        }
        let mut stamp = String::new();
        for dir in &dirs {
            match stamp_of(&self.state, dir)? {
                Some(s) => stamp.push_str(&s),
                None => {
                    stamp.clear();
                    break;
                }
            }
            stamp.push('|');
        }
        let kept = index::stamp(tx, REMINDER).map_err(db)?;
        if !stamp.is_empty() && kept.as_deref() == Some(stamp.as_str()) {
            return Ok(());
        }
        let listing = self.reminders.list(&ReminderFilter {
            history: true,
            ..ReminderFilter::default()
        })?;
        let docs: Vec<Doc> = listing.items.iter().map(reminder_doc).collect();
        counts.read += docs.len();
        index::replace_place(tx, REMINDER, &docs).map_err(db)?;
        index::set_stamp(tx, REMINDER, &stamp).map_err(db)
    }
}

/// Returns the doc of `agent`'s hook, `None` when it holds no work.
pub(crate) fn hook_doc(agent: &AgentId, hook: &Hook) -> Option<Doc> {
    let work = hook.state.work()?;
    let body = work
        .extra
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Some(Doc {
        key: format!("hook/{agent}"),
        origin: Origin::Hook,
        place: HOOK.to_owned(),
        ident: agent.to_string(),
        sender: work.assigned_by.as_ref().map(ToString::to_string),
        recipient: Some(agent.to_string()),
        task: Some(work.bead_id.to_string()),
        kind: Some(hook.state.status().to_string()),
        at_ms: Some(work.assigned_at.unix_ms()),
        title: work.title.clone(),
        body: body.to_owned(),
    })
}

/// Returns the message id a manifest record names, `None` when it names
/// none or the index holds it already.
pub(crate) fn unindexed_id(tx: &Transaction<'_>, record: &Value) -> Result<Option<MessageId>> {
    let Some(id) = record
        .get("id")
        .and_then(Value::as_str)
        .and_then(|s| MessageId::new(s).ok())
    else {
        return Ok(None);
    };
    if index::has(tx, &format!("mail/{id}")).map_err(db)? {
        return Ok(None);
    }
    Ok(Some(id))
}

/// Parses a kept manifest tail: `{inode}:{offset}:{hex of the bytes before it}`.
fn parse_tail(s: &str) -> Option<(u64, u64, Vec<u8>)> {
    let mut parts = s.splitn(3, ':');
    let ino = parts.next()?.parse().ok()?;
    let offset = parts.next()?.parse().ok()?;
    let hex = parts.next()?;
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    Some((ino, offset, bytes))
}

/// Reads `folder/name` as a message whose id is its file name; `None` for
/// anything else (a corrupt or foreign file: mail's doctor reports those).
fn read_message(state: &StateDir, folder: &StatePath, name: &str) -> Result<Option<Message>> {
    let Ok(path) = folder.join(name) else {
        return Ok(None);
    };
    let bytes = match state.read_bytes_capped(&path, MESSAGE_CAP.max(state.read_cap())) {
        Ok(ReadOutcome::Value((b, _))) => b,
        Ok(_) => return Ok(None),
        Err(e) => {
            tracing::debug!(path = %path.display(), error = %e, "unreadable message file left out of the index");
            return Ok(None);
        }
    };
    let Ok(m) = serde_json::from_slice::<Message>(&bytes) else {
        return Ok(None);
    };
    Ok((name.strip_suffix(".json") == Some(m.id.as_str())).then_some(m))
}

fn message_doc(m: &Message) -> Doc {
    Doc {
        key: format!("mail/{}", m.id),
        origin: Origin::Mail,
        place: format!("{MAIL}/{}", m.to),
        ident: m.id.to_string(),
        sender: Some(m.from.to_string()),
        recipient: Some(m.to.to_string()),
        task: Some(m.task().to_string()),
        kind: Some(m.kind.to_string()),
        at_ms: Some(m.created_at.unix_ms()),
        title: m.subject.to_owned(),
        body: m.body.to_owned(),
    }
}

fn event_doc(agent: &str, e: &Event) -> Doc {
    let body = match &e.payload {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Doc {
        key: format!("{BUS_PREFIX}{agent}/{}", e.id),
        origin: Origin::Bus,
        place: format!("{BUS_PREFIX}{agent}"),
        ident: e.id.to_string(),
        sender: Some(e.source.clone()),
        recipient: Some(agent.to_owned()),
        task: None,
        kind: Some(e.kind.clone()),
        at_ms: Some(e.created_at.unix_ms()),
        title: e.kind.clone(),
        body,
    }
}

pub(crate) fn reminder_doc(r: &Reminder) -> Doc {
    Doc {
        key: format!("reminder/{}", r.id),
        origin: Origin::Reminder,
        place: REMINDER.to_owned(),
        ident: r.id.to_string(),
        sender: None,
        recipient: None,
        task: None,
        kind: Some(r.kind.clone()),
        at_ms: Some(r.created_at.unix_ms()),
        title: r.message.clone(),
        body: format!("{} {}", r.source_type, r.source_id),
    }
}
