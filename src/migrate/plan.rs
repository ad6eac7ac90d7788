//! The plan of one channel: its values and logs read from the source,
//! checked against the target, then copied.

use std::collections::HashMap;

use chipset_backend::{Created, Dir, Key};
use chipset_mail::{Location, Mail, MailConfig, MessageId};
use chipset_store::{AgentId, StateDir};

use super::side::Side;
use super::{MigrateError, POOL};

/// How many log records one append carries.
const LOG_BATCH: usize = 1000;

/// One thing a channel holds.
#[derive(Debug)]
pub(crate) enum Item {
    /// A value, created if absent on the target; counted.
    Value { key: Key, bytes: Vec<u8> },
    /// An index value (a reply index entry): created if absent, not
    /// counted (a server makes its own for messages without one).
    Index { key: Key, bytes: Vec<u8> },
    /// A message: on a server imported with its index rows, on a directory
    /// a value; counted.
    Message {
        location: Location,
        id: MessageId,
        key: Key,
        bytes: Vec<u8>,
        /// An unanswered request in an inbox: in the commit gate.
        open: bool,
    },
    /// A directory's pool table (see `pool.rs`): a value, counted as the
    /// entries it holds.
    Table {
        key: Key,
        bytes: Vec<u8>,
        entries: u64,
    },
    /// A log's records, in order; each counted.
    Log { key: Key, records: Vec<Vec<u8>> },
    /// A bus agent whose queue exists (an empty folder on a directory, a
    /// marker on a server): made on the target; not counted.
    Queue { agent: AgentId },
    /// A bus agent's registry, whose `applied_offset` is a byte offset
    /// into `control.jsonl` on a directory and a record count on a server.
    Registry {
        key: Key,
        bytes: Vec<u8>,
        from_server: bool,
        /// The records applied.
        applied: u64,
        /// The byte offset on a directory after each record of the log.
        ends: Vec<u64>,
    },
}

impl Item {
    fn counted(&self) -> u64 {
        match self {
            Item::Value { .. } | Item::Message { .. } | Item::Registry { .. } => 1,
            Item::Log { records, .. } => records.len() as u64,
            Item::Table { entries, .. } => *entries,
            Item::Index { .. } | Item::Queue { .. } => 0,
        }
    }
}

/// A channel's items, and after [`check`] what the target lacks.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) channel: String,
    pub(crate) items: Vec<Item>,
    /// Per item, after [`check`]: how much of it the target already holds
    /// (a value: 0 or 1; a log: its records there).
    there: Vec<u64>,
    /// Counted values and records the target already holds.
    pub(crate) present: u64,
}

impl Plan {
    pub(crate) fn new(channel: &str, items: Vec<Item>) -> Plan {
        Plan {
            channel: channel.to_owned(),
            there: vec![0; items.len()],
            items,
            present: 0,
        }
    }

    pub(crate) fn counted(&self) -> u64 {
        self.items.iter().map(Item::counted).sum()
    }
}

/// Reads `channel` on `side`. `counting`: only for its counts (a
/// message's gate state is not worked out).
pub(crate) fn read(side: &Side, channel: &str, counting: bool) -> Result<Plan, MigrateError> {
    let dir = Dir::new(channel).map_err(|e| side.err(e))?;
    let mut items = Vec::new();
    match channel {
        "mail" => super::mail::read(side, &dir, counting, &mut items)?,
        "bus" => super::bus::read(side, &dir, &mut items)?,
        _ => {
            walk(side, &dir, &mut items)?;
            for log in server_logs(channel) {
                if side.is_server() {
                    let key = key_at(side, &dir, log)?;
                    push_log(side, key, &mut items)?;
                }
            }
        }
    }
    Ok(Plan::new(channel, items))
}

/// The logs a channel keeps on a server, where a log is not a value and
/// cannot be listed: `(folder below the channel, name)`.
fn server_logs(channel: &str) -> &'static [&'static [&'static str]] {
    match channel {
        "loop" => &[&["witness", "log.jsonl"], &["dispatcher", "log.jsonl"]],
        POOL => &[&["log.jsonl"]],
        _ => &[],
    }
}

fn key_at(side: &Side, dir: &Dir, path: &[&str]) -> Result<Key, MigrateError> {
    let (name, folders) = path.split_last().expect("a log has a name");
    let mut d = dir.clone();
    for f in folders {
        d = d.join(f).map_err(|e| side.err(e))?;
    }
    d.key(name).map_err(|e| side.err(e))
}

/// Every value and log below `dir`, as plain values.
pub(crate) fn walk(side: &Side, dir: &Dir, items: &mut Vec<Item>) -> Result<(), MigrateError> {
    for (name, bytes) in side.values(dir)? {
        let key = dir.key(&name).map_err(|e| side.err(e))?;
        items.push(Item::Value { key, bytes });
    }
    for name in side.log_names(dir)? {
        let key = dir.key(&name).map_err(|e| side.err(e))?;
        push_log(side, key, items)?;
    }
    for folder in side.dirs(dir)? {
        walk(side, &dir.join(&folder).map_err(|e| side.err(e))?, items)?;
    }
    Ok(())
}

/// The log `key`, when it holds records.
pub(crate) fn push_log(side: &Side, key: Key, items: &mut Vec<Item>) -> Result<(), MigrateError> {
    let records = side.log(&key)?;
    if !records.is_empty() {
        items.push(Item::Log { key, records });
    }
    Ok(())
}

/// Looks every item up on the target: what is there with the same bytes
/// is done, what is there with other bytes a conflict (nothing written).
pub(crate) fn check(mut plan: Plan, target: &Side) -> Result<Plan, MigrateError> {
    let mut folders: HashMap<Dir, HashMap<String, Vec<u8>>> = HashMap::new();
    let mut lookup = |key: &Key| -> Result<Option<Vec<u8>>, MigrateError> {
        if !folders.contains_key(key.dir()) {
            let values = target.values(key.dir())?.into_iter().collect();
            folders.insert(key.dir().clone(), values);
        }
        Ok(folders[key.dir()].get(key.name()).cloned())
    };
    for i in 0..plan.items.len() {
        if let Item::Registry { .. } = &plan.items[i] {
            plan.items[i] = translate(&plan.items[i], target)?;
        }
        let item = &plan.items[i];
        let there = match item {
            Item::Value { key, bytes }
            | Item::Index { key, bytes }
            | Item::Message { key, bytes, .. } => match lookup(key)? {
                None => 0,
                Some(now) if now == *bytes => 1,
                Some(_) => return Err(conflict(key)),
            },
            Item::Table {
                key,
                bytes,
                entries,
            } => match lookup(key)? {
                None => 0,
                Some(now) if now == *bytes => *entries,
                Some(_) => return Err(conflict(key)),
            },
            Item::Log { key, records } => {
                let now = target.log(key)?;
                if now.len() > records.len() || now.iter().zip(records).any(|(a, b)| a != b) {
                    return Err(conflict(key));
                }
                now.len() as u64
            }
            Item::Queue { .. } => 0,
            Item::Registry { .. } => unreachable!("translated above"),
        };
        if !matches!(item, Item::Index { .. } | Item::Queue { .. }) {
            plan.present += there;
        }
        plan.there[i] = there;
    }
    Ok(plan)
}

fn conflict(key: &Key) -> MigrateError {
    MigrateError::Conflict {
        key: key.to_string(),
    }
}

/// A registry as the target keeps it: its `applied_offset` a record count
/// on a server, a byte offset on a directory.
fn translate(item: &Item, target: &Side) -> Result<Item, MigrateError> {
    let Item::Registry {
        key,
        bytes,
        from_server,
        applied,
        ends,
    } = item
    else {
        unreachable!("only a registry is translated")
    };
    if *from_server == target.is_server() {
        return Ok(Item::Value {
            key: key.clone(),
            bytes: bytes.clone(),
        });
    }
    let corrupt = |why: String| MigrateError::Corrupt {
        key: key.to_string(),
        why,
    };
    let mut value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
    let offset = if target.is_server() {
        *applied
    } else {
        match applied.checked_sub(1) {
            None => 0,
            Some(last) => *ends
                .get(usize::try_from(last).unwrap_or(usize::MAX))
                .ok_or_else(|| corrupt("applied past the end of its control log".into()))?,
        }
    };
    let Some(map) = value.as_object_mut() else {
        return Err(corrupt("not an object".into()));
    };
    map.insert("applied_offset".into(), offset.into());
    let bytes = StateDir::to_canonical_json(&value).map_err(|e| corrupt(e.to_string()))?;
    Ok(Item::Value {
        key: key.clone(),
        bytes,
    })
}

/// Writes what the target lacks; returns how many values and records it
/// wrote. Sets `wrote` once anything is written (an index value or a
/// queue too), so that a failure after it is known to follow a write.
pub(crate) fn copy(plan: &Plan, target: &Side, wrote: &mut bool) -> Result<u64, MigrateError> {
    let mut written = 0;
    let mail = || {
        Mail::with_backend(
            target.state.clone(),
            MailConfig::default(),
            std::sync::Arc::clone(&target.backend),
        )
    };
    let mut server_mail = None;
    for (item, &there) in plan.items.iter().zip(&plan.there) {
        match item {
            Item::Value { key, bytes } if there == 0 => {
                *wrote |= create(target, key, bytes)?;
                written += 1;
            }
            // Written, not counted: the source and target counts leave
            // index values out (a server makes its own).
            Item::Index { key, bytes } if there == 0 => *wrote |= create(target, key, bytes)?,
            Item::Table {
                key,
                bytes,
                entries,
            } if there == 0 => {
                *wrote |= create(target, key, bytes)?;
                written += entries;
            }
            Item::Message {
                location,
                id,
                key,
                bytes,
                open,
            } if there == 0 => {
                if target.is_server() {
                    let mail = server_mail.get_or_insert_with(mail);
                    let imported = mail
                        .import(location, id, bytes, *open)
                        .map_err(MigrateError::Mail)?;
                    if imported {
                        *wrote = true;
                        written += 1;
                    }
                } else {
                    *wrote |= create(target, key, bytes)?;
                    written += 1;
                }
            }
            Item::Log { key, records } => {
                let from = usize::try_from(there).unwrap_or(records.len());
                for batch in records[from..].chunks(LOG_BATCH) {
                    let refs: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
                    target
                        .backend
                        .append(key, &refs)
                        .map_err(|e| target.err(e))?;
                    *wrote = true;
                    written += batch.len() as u64;
                }
            }
            Item::Queue { agent } => {
                super::bus::ensure_queue(target, agent)?;
                *wrote = true;
            }
            _ => {}
        }
    }
    Ok(written)
}

/// Creates `key` unless it holds these bytes already; returns whether it
/// wrote it.
fn create(target: &Side, key: &Key, bytes: &[u8]) -> Result<bool, MigrateError> {
    match target
        .backend
        .create(key, bytes)
        .map_err(|e| target.err(e))?
    {
        c @ Created::Existing(_) if !c.is_retry_of(bytes) => Err(conflict(key)),
        Created::Existing(_) => Ok(false),
        _ => Ok(true),
    }
}
