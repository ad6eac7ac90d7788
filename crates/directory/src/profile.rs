//! The profile: what an agent says about itself, its validation, and the
//! on-disk form `agents/{agent}.json`.

use std::fmt;
use std::str::FromStr;

use chipset_store::{AgentId, Timestamp};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The most roles one profile holds.
pub const MAX_ROLES: usize = 16;
/// The longest role name, in bytes.
pub const MAX_ROLE_LEN: usize = 64;
/// The longest `program`, `model`, `host` or `task`, in bytes.
pub const MAX_FIELD_LEN: usize = 256;
/// The longest free-text `note`, in bytes.
pub const MAX_NOTE_LEN: usize = 2048;

/// A role name: 1 to 64 of `a-z`, `0-9`, `-` and `_`, starting with a
/// letter or digit. Lower case only, so `@Reviewers` and `@reviewers`
/// cannot name two lists; never a path (no `/`, `.` or `@`), so a later
/// group-mail `@role` list can use it as a file name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Role(String);

impl Role {
    /// Returns the role after checking it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRole`] when it breaks the rules above.
    pub fn new(value: impl Into<String>) -> Result<Self> {
        let value = value.into();
        let reason = if value.is_empty() {
            Some("empty")
        } else if value.len() > MAX_ROLE_LEN {
            Some("longer than 64 bytes")
        } else if !value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            Some("only a-z, 0-9, `-` and `_` are allowed")
        } else if !value.as_bytes()[0].is_ascii_alphanumeric() {
            Some("must start with a letter or digit")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(Error::InvalidRole { value, reason }),
            None => Ok(Role(value)),
        }
    }

    /// Checks that an agent may hold this role (a list may be called it):
    /// not `all`, the name `@all` takes. A stored profile naming it is
    /// still read.
    ///
    /// # Errors
    ///
    /// [`Error::ReservedList`] for `all`.
    pub fn check_held(&self) -> Result<()> {
        if self.0 == crate::ALL {
            return Err(Error::ReservedList);
        }
        Ok(())
    }

    /// Returns the name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Role {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Role::new(s)
    }
}

impl TryFrom<String> for Role {
    type Error = Error;
    fn try_from(s: String) -> Result<Self> {
        Role::new(s)
    }
}

impl TryFrom<&str> for Role {
    type Error = Error;
    fn try_from(s: &str) -> Result<Self> {
        Role::new(s)
    }
}

impl AsRef<str> for Role {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for Role {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<Role> for String {
    fn from(r: Role) -> String {
        r.0
    }
}

/// An agent's profile, as stored in `agents/{agent}.json` (canonical JSON,
/// sorted keys; fields this version does not know are kept on update).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Profile {
    /// The agent: the file's name, repeated.
    pub name: AgentId,
    /// Its roles, sorted and without duplicates.
    #[serde(default)]
    pub roles: Vec<Role>,
    /// The program driving it (`claude-code`, `codex`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    /// The model (`opus-4`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The host it runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// What it says it is working on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// When it first registered.
    pub registered_at: Timestamp,
    /// When its profile last changed.
    pub updated_at: Timestamp,
    /// Fields written by a newer version, kept as they are.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// What [`Directory::register`](crate::Directory::register) changes.
///
/// A field left `None` keeps its value. `Some("")` (and, for roles,
/// `Some(vec![])`) clears it. The CLI's `--model ''` and the MCP's
/// `"model": ""` are the same.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Registration {
    /// The roles, replacing the old list.
    pub roles: Option<Vec<Role>>,
    /// The program.
    pub program: Option<String>,
    /// The model.
    pub model: Option<String>,
    /// The host.
    pub host: Option<String>,
    /// The current task.
    pub task: Option<String>,
    /// Free text (line breaks allowed).
    pub note: Option<String>,
}

impl Registration {
    /// Returns a registration that changes nothing (a bare "I am here").
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks every bound.
    ///
    /// # Errors
    ///
    /// [`Error::TooManyRoles`], [`Error::ReservedList`] for a role named
    /// `all` (the name `@all` takes), [`Error::TooLong`],
    /// [`Error::ControlCharacter`].
    pub fn validate(&self) -> Result<()> {
        if let Some(roles) = &self.roles
            && roles.len() > MAX_ROLES
        {
            return Err(Error::TooManyRoles {
                count: roles.len(),
                max: MAX_ROLES,
            });
        }
        for role in self.roles.iter().flatten() {
            role.check_held()?;
        }
        for (field, value) in [
            ("program", &self.program),
            ("model", &self.model),
            ("host", &self.host),
            ("task", &self.task),
        ] {
            check_text(field, value.as_deref(), MAX_FIELD_LEN, false)?;
        }
        check_text("note", self.note.as_deref(), MAX_NOTE_LEN, true)
    }

    /// Applies the changes to `profile` (a new one when `None`) at `now`.
    pub(crate) fn apply(&self, agent: &AgentId, old: Option<&Profile>, now: Timestamp) -> Profile {
        let mut p = old.cloned().unwrap_or_else(|| Profile {
            name: agent.clone(),
            roles: Vec::new(),
            program: None,
            model: None,
            host: None,
            task: None,
            note: None,
            registered_at: now,
            updated_at: now,
            extra: serde_json::Map::new(),
        });
        if let Some(roles) = &self.roles {
            let mut roles = roles.clone();
            roles.sort();
            roles.dedup();
            p.roles = roles;
        }
        for (slot, change) in [
            (&mut p.program, &self.program),
            (&mut p.model, &self.model),
            (&mut p.host, &self.host),
            (&mut p.task, &self.task),
            (&mut p.note, &self.note),
        ] {
            if let Some(v) = change {
                *slot = (!v.is_empty()).then(|| v.clone());
            }
        }
        p
    }
}

fn check_text(field: &'static str, value: Option<&str>, max: usize, multiline: bool) -> Result<()> {
    let Some(value) = value else { return Ok(()) };
    if value.len() > max {
        return Err(Error::TooLong {
            field,
            len: value.len(),
            max,
        });
    }
    if value
        .chars()
        .any(|c| c.is_control() && !(multiline && (c == '\n' || c == '\t')))
    {
        return Err(Error::ControlCharacter { field });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(role: &str, ok: bool) {
        assert_eq!(Role::new(role).is_ok(), ok, "{role:?}");
    }

    #[test]
    fn role_names_are_checked() {
        check("reviewer", true);
        check("qa-2", true);
        check("build_bot", true);
        check("", false);
        check("Reviewer", false);
        check("../etc", false);
        check("a/b", false);
        check("@all", false);
        check("-x", false);
        check(".hidden", false);
        check(&"r".repeat(64), true);
        check(&"r".repeat(65), false);
    }

    #[test]
    fn empty_text_clears_and_none_keeps() {
        let agent = AgentId::new("a").unwrap();
        let t = Timestamp::from_unix_ms(1);
        let mut r = Registration::new();
        r.model = Some("m".into());
        r.host = Some("h".into());
        let p = r.apply(&agent, None, t);
        let mut clear = Registration::new();
        clear.model = Some(String::new());
        let q = clear.apply(&agent, Some(&p), t);
        assert_eq!(q.model, None);
        assert_eq!(q.host.as_deref(), Some("h"));
    }
}
