//! Reading one entry of a folder as a message, failing closed as the
//! uncached gate does.

use chipset_store::{Folder, ReadOutcome, StateDir, StatePath};

use crate::error::{Error, Result};
use crate::format::{Message, parse_message};
use crate::id::MessageId;
use crate::layout::id_of;
use crate::mail::{check_id, read_message_bytes_stat, stray};

/// Reads the entry `name` of the folder `dir` as a message, failing closed
/// as the uncached gate does (a `.json` name that is not `{id}.json`, an
/// unreadable, oversized or unsupported file, an id that does not match its
/// name); `None` when it moved on since the listing. Names that do not end
/// in `.json` are never read: the seed's readers skip them too.
pub(super) fn read_entry(state: &StateDir, dir: &StatePath, name: &str) -> Result<Option<Message>> {
    let (id, path) = entry_path(dir, name)?;
    let read = read_message_bytes_stat(state, &path)?;
    Ok(entry_message(&path, &id, read)?.map(|(m, _)| m))
}

/// As [`read_entry`], from `folder` (the folder `dir` opened, to read many
/// of its files), with the stat of the file read (taken from the open file
/// before its bytes were read: the identity of the very file read).
pub(super) fn read_entry_in(
    folder: &Folder,
    cap: u64,
    dir: &StatePath,
    name: &str,
) -> Result<Option<(Message, chipset_store::Stat)>> {
    let (id, path) = entry_path(dir, name)?;
    let read = folder.read_bytes_capped(name, cap)?;
    entry_message(&path, &id, read)
}

/// The id and path of the entry `name`, or the stray-file error of a name
/// that is not `{id}.json`.
fn entry_path(dir: &StatePath, name: &str) -> Result<(MessageId, StatePath)> {
    let Some(id) = id_of(name) else {
        return Err(Error::Corrupt(stray(
            dir.as_path().join(name),
            "not a message file: expected `{id}.json`",
        )));
    };
    let path = dir.join_id(&id, ".json");
    Ok((id, path))
}

/// The message an entry's read found, failing closed.
fn entry_message(
    path: &StatePath,
    id: &MessageId,
    read: ReadOutcome<(Vec<u8>, chipset_store::Stat)>,
) -> Result<Option<(Message, chipset_store::Stat)>> {
    let (bytes, stat) = match read {
        ReadOutcome::Missing => return Ok(None),
        ReadOutcome::Corrupt(c) => return Err(c.into()),
        ReadOutcome::Unsupported(u) => return Err(u.into()),
        ReadOutcome::Value(read) => read,
    };
    match parse_message(path, &bytes) {
        ReadOutcome::Missing => Ok(None),
        ReadOutcome::Corrupt(c) => Err(c.into()),
        ReadOutcome::Unsupported(u) => Err(u.into()),
        ReadOutcome::Value(m) => Ok(Some((check_id(path, id, m)?, stat))),
    }
}
