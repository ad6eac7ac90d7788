//! Reading one entry of a folder as a message, failing closed as the
//! uncached gate does.

use chipset_store::{ReadOutcome, StateDir, StatePath};

use crate::error::{Error, Result};
use crate::format::{Message, parse_message};
use crate::layout::id_of;
use crate::mail::{check_id, read_message_bytes_stat, stray};

/// Reads the entry `name` of the folder `dir` as a message, failing closed
/// as the uncached gate does (a `.json` name that is not `{id}.json`, an
/// unreadable, oversized or unsupported file, an id that does not match its
/// name); `None` when it moved on since the listing. Names that do not end
/// in `.json` are never read: the seed's readers skip them too.
pub(super) fn read_entry(state: &StateDir, dir: &StatePath, name: &str) -> Result<Option<Message>> {
    Ok(read_entry_stat(state, dir, name)?.map(|(m, _)| m))
}

/// As [`read_entry`], with the stat of the file read (taken from the open
/// file before its bytes were read: the identity of the very file read).
pub(super) fn read_entry_stat(
    state: &StateDir,
    dir: &StatePath,
    name: &str,
) -> Result<Option<(Message, chipset_store::Stat)>> {
    let Some(id) = id_of(name) else {
        return Err(Error::Corrupt(stray(
            dir.as_path().join(name),
            "not a message file: expected `{id}.json`",
        )));
    };
    let path = dir.join_id(&id, ".json");
    let (bytes, stat) = match read_message_bytes_stat(state, &path)? {
        ReadOutcome::Missing => return Ok(None),
        ReadOutcome::Corrupt(c) => return Err(c.into()),
        ReadOutcome::Unsupported(u) => return Err(u.into()),
        ReadOutcome::Value(read) => read,
    };
    match parse_message(&path, &bytes) {
        ReadOutcome::Missing => Ok(None),
        ReadOutcome::Corrupt(c) => Err(c.into()),
        ReadOutcome::Unsupported(u) => Err(u.into()),
        ReadOutcome::Value(m) => Ok(Some((check_id(&path, &id, m)?, stat))),
    }
}
