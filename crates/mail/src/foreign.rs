//! Messages another seed program wrote for a phase no chipset task can
//! be named (nubos-pilot takes any non-empty phase, such as
//! `plan/phase-1`): read as unsupported, and left out of every gate
//! ([`Message::foreign_task`]).

use std::fmt;
use std::path::Path;

use chipset_store::{ReadOutcome, TaskId, Unsupported};
use serde::{Deserialize, Deserializer};

use crate::format::{Message, parse_message};

/// How [`Unsupported::what`] ends for a message of a task chipset cannot
/// name ([`Message::foreign_task`]).
pub(crate) const FOREIGN_TASK: &str = "` (no chipset task can have that name)";

/// A message another seed program wrote for a phase no [`TaskId`] can be
/// (nubos-pilot takes any non-empty phase: `plan/phase-1`), and otherwise
/// a message this version reads: unsupported, naming the phase (escaped,
/// cut at 200 characters); `None` for any other file. A file naming its
/// phase twice (another reader may take the other one) stays corrupt, as
/// does one in a format this version does not know (its phase could mean
/// anything).
pub(crate) fn foreign_task(path: &Path, bytes: &[u8]) -> Option<ReadOutcome<Message>> {
    if serde_json::from_slice::<Phases>(bytes).ok()?.0 != 1 {
        return None;
    }
    let Ok(serde_json::Value::Object(mut object)) = serde_json::from_slice(bytes) else {
        return None;
    };
    let phase = match object.get_mut("phase") {
        Some(serde_json::Value::String(p)) if !p.is_empty() && TaskId::new(p.as_str()).is_err() => {
            std::mem::replace(p, "phase".to_owned())
        }
        _ => return None,
    };
    // The rest must read: a file broken elsewhere stays corrupt.
    let rest = serde_json::to_vec(&object).ok()?;
    parse_message(path, &rest).value()?;
    let shown: String = phase
        .chars()
        .take(200)
        .flat_map(char::escape_debug)
        .collect();
    let cut = if phase.chars().nth(200).is_some() {
        "…"
    } else {
        ""
    };
    let what = format!("message phase `{shown}{cut}{FOREIGN_TASK}");
    Some(ReadOutcome::Unsupported(Unsupported::new(path, what)))
}

/// How many times a JSON object names `phase` (escapes decoded).
struct Phases(usize);

impl<'de> Deserialize<'de> for Phases {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(Phases(0))
    }
}

impl<'de> serde::de::Visitor<'de> for Phases {
    type Value = Phases;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Phases, A::Error> {
        let mut n = 0;
        while let Some(key) = map.next_key::<String>()? {
            n += usize::from(key == "phase");
            map.next_value::<serde::de::IgnoredAny>()?;
        }
        Ok(Phases(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(phase: &str, extra: &str) -> String {
        format!(
            r#"{{"id":"1-a","from":"a","to":"b","phase":{phase},"kind":"request",
            "subject":"s","body":"","expects_reply":true,
            "created_at":"2026-11-23T04:36:09.995Z"{extra}}}"#
        )
    }

    fn read(json: &str) -> ReadOutcome<Message> {
        parse_message(Path::new("m.json"), json.as_bytes())
    }

    #[test]
    fn a_phase_no_task_can_be_is_foreign_and_escaped() {
        let ReadOutcome::Unsupported(u) = read(&message(r#""plan/\u001b[2J""#, "")) else {
            panic!()
        };
        assert!(Message::foreign_task(&u), "{u}");
        assert!(u.what.contains(r"`plan/\u{1b}[2J`"), "{u}");
        assert!(!u.what.contains('\u{1b}'), "{u}");
        let long = format!("\"a/{}\"", "x".repeat(300));
        let ReadOutcome::Unsupported(u) = read(&message(&long, "")) else {
            panic!()
        };
        assert!(u.what.contains("x…` ("), "{u}");
    }

    #[test]
    fn only_a_message_this_version_reads_is_foreign() {
        // Named twice: a reader taking the first sees task t1's request.
        let twice = message(r#""t1","phase":"plan/x""#, "");
        assert!(read(&twice).is_corrupt());
        // A format or kind this version does not know: its phase may mean
        // anything, so every gate stays closed.
        for extra in [r#","schema":"message.v2""#, r#","priority":"asap""#] {
            match read(&message(r#""plan/x""#, extra)) {
                ReadOutcome::Unsupported(u) => assert!(!Message::foreign_task(&u), "{u}"),
                other => panic!("{other:?}"),
            }
        }
        // Broken besides: corrupt.
        assert!(read(&message(r#""plan/x""#, r#","round":"one""#)).is_corrupt());
        // A task chipset can name is no foreign phase.
        assert!(matches!(
            read(&message(r#""t1""#, "")),
            ReadOutcome::Value(_)
        ));
    }
}
