//! Reading one entry of a folder as a message, failing closed as the
//! uncached gate does.

use chipset_store::{Folder, ReadOutcome, StateDir, StatePath};

use crate::error::{Error, Result};
use crate::format::Message;
use crate::layout::message_stem;
use crate::mail::{named_message, read_message_bytes_stat, stray};

/// Reads the entry `name` of the folder `dir` as a message, failing closed
/// as the uncached gate does (a `.json` name that is not `{id}.json`, an
/// unreadable, oversized or unsupported file, an id that does not match its
/// name); `None` when it moved on since the listing. Names that do not end
/// in `.json` are never read: the seed's readers skip them too.
pub(super) fn read_entry(state: &StateDir, dir: &StatePath, name: &str) -> Result<Option<Message>> {
    let stem = message_stem(name).ok_or_else(|| not_a_message(dir, name))?;
    let path = dir.join(name)?;
    let read = read_message_bytes_stat(state, &path)?;
    Ok(entry_message(dir, name, stem, read)?.map(|(m, _)| m))
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
    let stem = message_stem(name).ok_or_else(|| not_a_message(dir, name))?;
    let read = folder.read_bytes_capped(name, cap)?;
    entry_message(dir, name, stem, read)
}

/// The stray-file error of a name that is not `{id}.json`.
fn not_a_message(dir: &StatePath, name: &str) -> Error {
    Error::Corrupt(stray(
        dir.as_path().join(name),
        "not a message file: expected `{id}.json`",
    ))
}

/// The message an entry's read found, failing closed.
fn entry_message(
    dir: &StatePath,
    name: &str,
    stem: &str,
    read: ReadOutcome<(Vec<u8>, chipset_store::Stat)>,
) -> Result<Option<(Message, chipset_store::Stat)>> {
    let message = named_message(
        dir.as_path(),
        name,
        stem,
        read.as_ref().map(|(bytes, _)| bytes.as_slice()),
    );
    match (message, read) {
        (ReadOutcome::Value(m), ReadOutcome::Value((_, stat))) => Ok(Some((m, stat))),
        (ReadOutcome::Corrupt(c), _) => Err(c.into()),
        (ReadOutcome::Unsupported(u), _) => Err(u.into()),
        // Gone since the listing (a message comes only from bytes read).
        _ => Ok(None),
    }
}
