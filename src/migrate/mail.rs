//! Mail's part of a migration: its messages where they are, the reply
//! index, the manifest; never a server's own index rows.

use std::collections::HashSet;

use chipset_backend::Dir;
use chipset_mail::{Kind, Location, Message, MessageId};
use chipset_store::{AgentId, TaskId};

use super::MigrateError;
use super::plan::{Item, push_log, walk};
use super::side::Side;

/// The folders of a server's own index rows (`ids/`, `task/`, `open/`):
/// rebuilt by [`Mail::import`](chipset_mail::Mail::import) on a server,
/// never copied to a directory.
const SERVER_INDEX: &[&str] = &["ids", "task", "open"];

/// Reads mail on `side` into `items`.
pub(crate) fn read(
    side: &Side,
    mail: &Dir,
    counting: bool,
    items: &mut Vec<Item>,
) -> Result<(), MigrateError> {
    let join = |d: &Dir, s: &str| d.join(s).map_err(|e| side.err(e));
    let first = items.len();
    // Requests answered: by a response's reply index entry (any
    // responder), or by a response from the request's addressee.
    let mut marked: HashSet<MessageId> = HashSet::new();
    for folder in side.dirs(mail)? {
        let dir = join(mail, &folder)?;
        match folder.as_str() {
            "inbox" => {
                for agent in side.dirs(&dir)? {
                    let location = Location::Inbox(parse_id::<AgentId>(&dir, &agent)?);
                    messages(side, &join(&dir, &agent)?, &location, counting, items)?;
                }
            }
            "archive" => {
                messages(side, &dir, &Location::Archive, counting, items)?;
                for sub in side.dirs(&dir)? {
                    let sub_dir = join(&dir, &sub)?;
                    match sub.as_str() {
                        "by-task" => {
                            for task in side.dirs(&sub_dir)? {
                                let location =
                                    Location::ByTask(parse_id::<TaskId>(&sub_dir, &task)?);
                                messages(
                                    side,
                                    &join(&sub_dir, &task)?,
                                    &location,
                                    counting,
                                    items,
                                )?;
                            }
                        }
                        "orphan" => messages(side, &sub_dir, &Location::Orphan, counting, items)?,
                        _ => walk(side, &sub_dir, items)?,
                    }
                }
            }
            "replies" => {
                for parent in side.dirs(&dir)? {
                    let parent_dir = join(&dir, &parent)?;
                    for (name, bytes) in side.values(&parent_dir)? {
                        if name.starts_with("response-")
                            && let Ok(id) = MessageId::new(parent.clone())
                        {
                            marked.insert(id);
                        }
                        let key = parent_dir.key(&name).map_err(|e| side.err(e))?;
                        items.push(Item::Index { key, bytes });
                    }
                }
            }
            f if SERVER_INDEX.contains(&f) => {}
            _ => walk(side, &dir, items)?,
        }
    }
    for (name, bytes) in side.values(mail)? {
        let key = mail.key(&name).map_err(|e| side.err(e))?;
        items.push(Item::Value { key, bytes });
    }
    let manifest = mail.key("manifest.jsonl").map_err(|e| side.err(e))?;
    push_log(side, manifest, items)?;
    if !counting {
        settle_open(&mut items[first..], &marked);
    }
    Ok(())
}

/// A folder's name as the id it stands for.
fn parse_id<T: std::str::FromStr>(dir: &Dir, name: &str) -> Result<T, MigrateError> {
    name.parse().map_err(|_| MigrateError::Corrupt {
        key: format!("{dir}/{name}"),
        why: format!("`{name}` is not a valid id"),
    })
}

/// The messages directly in `dir`; other values there are plain values.
fn messages(
    side: &Side,
    dir: &Dir,
    location: &Location,
    counting: bool,
    items: &mut Vec<Item>,
) -> Result<(), MigrateError> {
    for (name, bytes) in side.values(dir)? {
        let key = dir.key(&name).map_err(|e| side.err(e))?;
        let id = name
            .strip_suffix(".json")
            .and_then(|s| MessageId::new(s).ok());
        let Some(id) = id else {
            items.push(Item::Value { key, bytes });
            continue;
        };
        if !counting {
            // Fails closed: a file that is not a message could be a request.
            let m: Message = serde_json::from_slice(&bytes).map_err(|e| MigrateError::Corrupt {
                key: key.to_string(),
                why: format!("not a message: {e}"),
            })?;
            if m.id != id {
                return Err(MigrateError::Corrupt {
                    key: key.to_string(),
                    why: format!("its id field `{}` is not its name's", m.id),
                });
            }
        }
        items.push(Item::Message {
            location: location.clone(),
            id,
            key,
            bytes,
            open: false,
        });
    }
    Ok(())
}

/// Marks the requests in an inbox that no response answers: what a
/// directory's commit gate lists, and a server's `open/` rows hold.
fn settle_open(items: &mut [Item], marked: &HashSet<MessageId>) {
    let parse = |bytes: &[u8]| serde_json::from_slice::<Message>(bytes).ok();
    let mut answered: HashSet<(MessageId, AgentId)> = HashSet::new();
    for item in items.iter() {
        if let Item::Message { bytes, .. } = item
            && let Some(m) = parse(bytes)
            && m.kind == Kind::Response
            && let Some(parent) = m.in_reply_to
        {
            answered.insert((parent, m.from));
        }
    }
    for item in items.iter_mut() {
        if let Item::Message {
            location: Location::Inbox(_),
            id,
            bytes,
            open,
            ..
        } = item
            && let Some(m) = parse(bytes)
        {
            *open = m.needs_reply()
                && !marked.contains(id)
                && !answered.contains(&(m.id.clone(), m.to.clone()));
        }
    }
}
