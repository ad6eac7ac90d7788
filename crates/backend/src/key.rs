//! Names under the seam: a [`Dir`] (a channel and its folders) and a
//! [`Key`] (one value or log in a dir), validated once when built.

use std::fmt;

use crate::error::{Error, Result};

/// The longest segment accepted, in bytes: a file name's limit on Linux.
pub const MAX_SEGMENT: usize = 255;

/// A folder of values: a channel (`hooks`, `mail`) and zero or more
/// folders below it (`mail/inbox/alice`). Every segment is checked as a
/// file name is: not empty, at most [`MAX_SEGMENT`] bytes, no `/`, `\` or
/// NUL, not `.` or `..`, no leading dot (dot-names are the store's own).
///
/// On a directory it is the folder `{root}/{channel}/{folders…}`; on
/// PostgreSQL it is the text `channel/folders…` in the `dir` column.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Dir {
    segments: Vec<String>,
}

impl Dir {
    /// Returns the top folder of `channel`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] when `channel` is not a valid segment.
    pub fn new(channel: &str) -> Result<Self> {
        check("channel", channel)?;
        Ok(Dir {
            segments: vec![channel.to_owned()],
        })
    }

    /// Returns the folder `segment` below this one.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] when `segment` is not a valid segment.
    pub fn join(&self, segment: &str) -> Result<Self> {
        check("folder", segment)?;
        let mut segments = self.segments.clone();
        segments.push(segment.to_owned());
        Ok(Dir { segments })
    }

    /// Returns the key `name` in this folder.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] when `name` is not a valid segment.
    pub fn key(&self, name: &str) -> Result<Key> {
        check("name", name)?;
        Ok(Key {
            dir: self.clone(),
            name: name.to_owned(),
        })
    }

    /// Returns the segments, the channel first.
    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    /// Returns the segments joined by `/`: the `dir` column on PostgreSQL.
    pub fn as_text(&self) -> String {
        self.segments.join("/")
    }
}

impl fmt::Display for Dir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_text())
    }
}

impl fmt::Debug for Dir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Dir({self})")
    }
}

/// One value (a file) or one log in a [`Dir`]: `hooks/alice.json`,
/// `mail/manifest.jsonl`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    dir: Dir,
    name: String,
}

impl Key {
    /// Returns the folder.
    pub fn dir(&self) -> &Dir {
        &self.dir
    }

    /// Returns the name in the folder (the file name, `alice.json`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Returns where a doctor on a server moves this value when it cannot
    /// be read: `quarantine/{unix-ms}-{name}` beside it, `at` being the
    /// time of the move (the server's analogue of a directory's
    /// `.quarantine/`; nothing is deleted).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] only if the stamped name is too long for a segment.
    pub fn quarantined_at(&self, at: chipset_store::Timestamp) -> Result<Key> {
        self.dir
            .join("quarantine")?
            .key(&format!("{}-{}", at.unix_ms(), self.name))
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.dir, self.name)
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key({self})")
    }
}

fn check(kind: &'static str, value: &str) -> Result<()> {
    let rule = if value.is_empty() {
        Some("must not be empty")
    } else if value.len() > MAX_SEGMENT {
        Some("must be at most 255 bytes")
    } else if value.contains(['/', '\\', '\0']) {
        Some("must not contain `/`, `\\` or NUL")
    } else if value.starts_with('.') {
        Some("must not start with a dot")
    } else {
        None
    };
    match rule {
        Some(rule) => Err(Error::InvalidName {
            kind,
            value: value.to_owned(),
            rule,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_checked_like_file_names() {
        for bad in ["", ".", "..", ".hidden", "a/b", "a\\b", "a\0b"] {
            assert!(Dir::new(bad).is_err(), "{bad:?}");
            assert!(Dir::new("ok").unwrap().key(bad).is_err(), "{bad:?}");
        }
        assert!(Dir::new(&"x".repeat(256)).is_err());
        let key = Dir::new("mail")
            .and_then(|d| d.join("inbox"))
            .and_then(|d| d.key("a.json"))
            .unwrap();
        assert_eq!(key.to_string(), "mail/inbox/a.json");
        assert_eq!(key.dir().as_text(), "mail/inbox");
    }

    #[test]
    fn sql_looking_names_are_just_names() {
        let name = "x'); DROP TABLE chipset_entries; --";
        assert_eq!(Dir::new("hooks").unwrap().key(name).unwrap().name(), name);
    }
}
