//! The pool's values as each backend keeps them, for a migration between
//! a directory and a server (`chipset migrate`, issue 30): the entries as
//! the pool reads them, a server's entry row and a directory's table,
//! each written by the pool's own serializer.

use std::path::PathBuf;

use chipset_store::StateDir;

use crate::TABLE_CAP;
use crate::error::{Error, Result};
use crate::format::{Entry, Table};
use crate::store::Pool;

impl Pool {
    /// Returns every posted item's entry, in posting order: on a directory
    /// the table with the log's dones and releases applied (as every read
    /// does), on a server the entry rows.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] or [`Error::Unsupported`] for a table, log or row
    /// that does not read; [`Error::Store`] or [`Error::Backend`] when the
    /// storage fails.
    pub fn entries(&self) -> Result<Vec<Entry>> {
        Ok(self.load("read the pool's entries")?.0.items)
    }
}

/// Returns the bytes of the server's `pool/entries/{id}.json` row for
/// `entry`, exactly as the pool on a server writes it (canonical JSON
/// with `format`).
///
/// # Errors
///
/// [`Error::Store`] when the entry does not serialize.
pub fn entry_row(entry: &Entry) -> Result<Vec<u8>> {
    let key = crate::server::entry_key(&entry.id)?;
    crate::server::row_bytes(&key, entry)
}

/// Returns the bytes of a directory's `pool/table.json` holding `entries`
/// (sorted by `seq`; `next_seq` the largest plus one), exactly as the pool
/// on a directory writes it; its log is then empty.
///
/// # Errors
///
/// [`Error::TableFull`] past [`TABLE_CAP`]; [`Error::Store`] when the
/// table does not serialize.
pub fn table_file(entries: &[Entry]) -> Result<Vec<u8>> {
    let mut table = Table::empty();
    table.items = entries.to_vec();
    table.items.sort_by_key(|e| e.seq);
    table.next_seq = table.items.last().map_or(1, |e| e.seq + 1);
    let bytes = StateDir::to_canonical_json(&table).map_err(|source| {
        Error::Store(chipset_store::Error::Serialize {
            path: PathBuf::from("pool/table.json"),
            source,
        })
    })?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > TABLE_CAP {
        return Err(Error::TableFull {
            size: bytes.len(),
            cap: TABLE_CAP,
        });
    }
    Ok(bytes)
}
