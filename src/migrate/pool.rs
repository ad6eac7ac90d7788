//! The pool's part of a migration when a side is a server, where the pool
//! is not its directory's files: there each item is two rows,
//! `pool/items/{id}.json` (the item file's bytes) and
//! `pool/entries/{id}.json` (its table entry); on a directory it is the
//! item files and `pool/table.json` (with `log.jsonl`, whose dones and
//! releases the entries carry).
//!
//! Either side is read as the pool reads it ([`Pool::entries`]: a
//! directory's table with its log applied, a server's entry rows) and
//! written in the target's form by the pool's own serializers
//! ([`entry_row`], [`table_file`]): to a directory, the item files first
//! and the table last (its commit point, as for a post), with an empty
//! log. Only the items the pool names are copied: an item file no entry
//! names (a post cut short) is not in the pool. Counted: the items plus
//! the entries on each side (a table counts as the entries it holds).

use std::collections::HashMap;
use std::sync::Arc;

use chipset_backend::Dir;
use chipset_pool::{Pool, entry_row, table_file};

use super::plan::{Item, Plan};
use super::side::Side;
use super::{MigrateError, POOL};

/// Reads the pool on `side` in the form `to_server` says: a server's rows,
/// or a directory's item files and table.
pub(crate) fn read(side: &Side, to_server: bool) -> Result<Plan, MigrateError> {
    let failed = |e: chipset_pool::Error| MigrateError::Pool {
        end: side.end,
        source: e,
    };
    let pool = Pool::with_backend(side.state.clone(), Arc::clone(&side.backend));
    let entries = pool.entries().map_err(failed)?;
    let channel = Dir::new(POOL).map_err(|e| side.err(e))?;
    let items_dir = channel.join("items").map_err(|e| side.err(e))?;
    let entries_dir = channel.join("entries").map_err(|e| side.err(e))?;
    let mut files: HashMap<String, Vec<u8>> = if entries.is_empty() {
        HashMap::new()
    } else {
        side.values(&items_dir)?.into_iter().collect()
    };
    let mut items = Vec::with_capacity(entries.len() * 2 + 1);
    for entry in &entries {
        let name = format!("{}.json", entry.id);
        let key = items_dir.key(&name).map_err(|e| side.err(e))?;
        let Some(bytes) = files.remove(&name) else {
            return Err(MigrateError::Corrupt {
                key: key.to_string(),
                why: "the pool names the item but its file is missing".into(),
            });
        };
        items.push(Item::Value { key, bytes });
        if to_server {
            let key = entries_dir.key(&name).map_err(|e| side.err(e))?;
            let bytes = entry_row(entry).map_err(failed)?;
            items.push(Item::Value { key, bytes });
        }
    }
    if !to_server && !entries.is_empty() {
        let key = channel.key("table.json").map_err(|e| side.err(e))?;
        let bytes = table_file(&entries).map_err(failed)?;
        items.push(Item::Table {
            key,
            bytes,
            entries: entries.len() as u64,
        });
    }
    Ok(Plan::new(POOL, items))
}
