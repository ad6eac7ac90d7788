//! Reading one entry of a folder as a message, failing closed as the
//! uncached gate does.

use std::time::SystemTime;

use chipset_store::{Folder, ReadOutcome, StateDir, StatePath};

use super::{Known, Stamp};

use crate::error::{Error, Result};
use crate::format::Message;
use crate::layout::message_stem;
use crate::mail::{named_message, read_message_bytes_stat, stray};

/// Reads the entry `name` of the folder `dir` as a message, failing closed
/// as the uncached gate does (a `.json` name that is not `{id}.json`, an
/// unreadable, oversized or unsupported file, an id that does not match its
/// name); `None` when it moved on since the listing, or is a message of a
/// task chipset cannot name ([`Message::foreign_task`]). Names that do not end
/// in `.json` are never read: the seed's readers skip them too.
pub(super) fn read_entry(state: &StateDir, dir: &StatePath, name: &str) -> Result<Option<Message>> {
    let stem = message_stem(name).ok_or_else(|| not_a_message(dir, name))?;
    let path = dir.join(name)?;
    let read = read_message_bytes_stat(state, &path)?;
    Ok(entry_message(dir, name, stem, read)?.map(|(m, _)| m))
}

/// As [`read_entry`], from `folder` (the folder `dir` opened, to read many
/// of its files), with what is known of the file read:
///
/// - with `unstat` `None`, its stat (taken from the open file before its
///   bytes were read: the identity of the very file read);
/// - with `unstat` `Some(at)`, a time before the read began, no stat (the
///   read's `openat`, `read` and `close` only, through `buf`, one buffer
///   for every file of a folder): its length and `at`.
pub(super) fn read_entry_in(
    folder: &Folder,
    cap: u64,
    dir: &StatePath,
    name: &str,
    buf: &mut Vec<u8>,
    unstat: Option<SystemTime>,
) -> Result<Option<(Message, Known)>> {
    let stem = message_stem(name).ok_or_else(|| not_a_message(dir, name))?;
    let Some(at) = unstat else {
        let read = folder.read_bytes_capped(name, cap)?;
        return Ok(entry_message(dir, name, stem, read)?.map(|(m, stat)| {
            let known = Known::Stat {
                stamp: Stamp::from(&stat),
                size: stat.len,
            };
            (m, known)
        }));
    };
    let read = folder.read_into(name, cap, buf)?;
    let message = named_message(dir.as_path(), name, stem, read.map(|()| buf.as_slice()));
    Ok(ok_message(message)?.map(|m| {
        (
            m,
            Known::Read {
                len: buf.len() as u64,
                at,
            },
        )
    }))
}

/// What a message's read found, failing closed; `None` when its file went
/// away since the listing, or is a message of a task chipset cannot name
/// ([`Message::foreign_task`]: no gate asks for it).
fn ok_message(read: ReadOutcome<Message>) -> Result<Option<Message>> {
    match read {
        ReadOutcome::Value(m) => Ok(Some(m)),
        ReadOutcome::Corrupt(c) => Err(c.into()),
        ReadOutcome::Unsupported(u) if Message::foreign_task(&u) => Ok(None),
        ReadOutcome::Unsupported(u) => Err(u.into()),
        ReadOutcome::Missing => Ok(None),
    }
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
    match (ok_message(message)?, read) {
        (Some(m), ReadOutcome::Value((_, stat))) => Ok(Some((m, stat))),
        // Gone since the listing (a message comes only from bytes read).
        _ => Ok(None),
    }
}
