//! Lists and recipients: `@list` is the agents holding the role `list`,
//! `@all` every registered agent; [`Directory::resolve`] turns what a
//! sender wrote in `--to` into agents, and `list_add`/`list_remove` change
//! a list's members, each under its profile's lock.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use chipset_store::{AgentId, Decision, Listing, ReadOutcome};

use crate::directory::{Directory, Registered, registered};
use crate::error::{Error, Result};
use crate::profile::{MAX_ROLES, Profile, Role};

/// The list name `@all` takes: no role may be called it.
pub const ALL: &str = "all";

/// One item of a recipient list.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Target {
    /// One agent, by name; it must be registered.
    Agent(AgentId),
    /// `@list`: the agents holding the role `list`; it must have one.
    List(Role),
    /// `@all`: every registered agent but the sender.
    All,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Agent(a) => write!(f, "{a}"),
            Target::List(l) => write!(f, "@{l}"),
            Target::All => write!(f, "@{ALL}"),
        }
    }
}

/// What a sender writes after `--to`: comma-separated agent names, `@list`
/// names and `@all`, in any mix (`ann,bob`, `@reviewers`, `@all`,
/// `ann,@qa`).
///
/// ```
/// use chipset_directory::{Recipients, Target};
///
/// let to: Recipients = "ann, @reviewers".parse()?;
/// assert_eq!(to.targets().len(), 2);
/// assert!(matches!(to.targets()[1], Target::List(_)));
/// assert!("@../x".parse::<Recipients>().is_err());
/// assert!("ann".parse::<Recipients>()?.single().is_some());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Recipients(Vec<Target>);

impl Recipients {
    /// Returns the items in the order written, without repeats.
    pub fn targets(&self) -> &[Target] {
        &self.0
    }

    /// Returns the agent when this names exactly one agent and no list:
    /// an ordinary message, not a group.
    pub fn single(&self) -> Option<&AgentId> {
        match self.0.as_slice() {
            [Target::Agent(a)] => Some(a),
            _ => None,
        }
    }
}

impl FromStr for Recipients {
    type Err = Error;

    /// Parses `a,b,@list,@all`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRecipients`] for an empty list or item, a bad agent
    /// name, or a list name that is not a role (`@../x`, `@a/b`).
    fn from_str(text: &str) -> Result<Self> {
        let invalid = |value: &str, reason: String| Error::InvalidRecipients {
            value: value.to_owned(),
            reason,
        };
        let mut out: Vec<Target> = Vec::new();
        if text.trim().is_empty() {
            return Err(invalid(text, "no recipient given".to_owned()));
        }
        for item in text.split(',').map(str::trim) {
            let target = if item.is_empty() {
                return Err(invalid(text, "an empty item between commas".to_owned()));
            } else if let Some(list) = item.strip_prefix('@') {
                if list == ALL {
                    Target::All
                } else {
                    match Role::new(list) {
                        Ok(role) => Target::List(role),
                        Err(Error::InvalidRole { reason, .. }) => {
                            return Err(invalid(item, format!("not a list name: {reason}")));
                        }
                        Err(e) => return Err(invalid(item, e.to_string())),
                    }
                }
            } else {
                AgentId::new(item)
                    .map(Target::Agent)
                    .map_err(|e| invalid(item, e.to_string()))?
            };
            if !out.contains(&target) {
                out.push(target);
            }
        }
        Ok(Recipients(out))
    }
}

impl fmt::Display for Recipients {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{t}")?;
        }
        Ok(())
    }
}

/// The agents a [`Recipients`] names, from [`Directory::resolve`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Resolved {
    /// Who gets a copy: sorted, without repeats; the sender among them
    /// when it is on a list or named (group mail leaves it out and says
    /// so).
    pub agents: Vec<AgentId>,
    /// Members of a `@list` or of `@all` whose names mail cannot address
    /// ([`Message::can_address`](chipset_mail::Message::can_address): the
    /// seed allows only ASCII letters, digits, `_` and `-`), left out of
    /// `agents`: sorted. An agent named on its own is never left out: the
    /// send refuses its name.
    pub left_out: Vec<AgentId>,
}

impl Directory {
    /// Returns the agents `to` names (see [`Resolved`]). Reads every
    /// profile once (a listing of `agents/` and one bounded read per
    /// profile); writes nothing.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownAgent`] naming an agent without a profile;
    /// [`Error::EmptyList`] for a `@list` no agent holds;
    /// [`Error::NoOtherAgent`] when nobody mail can address but the
    /// sender is left (`@all` alone in the directory, or a list of only
    /// the sender);
    /// [`Error::Corrupt`] or [`Error::Unsupported`] when a profile cannot be
    /// read (fail closed: a group is never sent short of an agent);
    /// [`Error::Store`].
    pub fn resolve(&self, to: &Recipients, sender: &AgentId) -> Result<Resolved> {
        let profiles = self.all_profiles()?;
        let mut out = BTreeSet::new();
        let mut left_out = BTreeSet::new();
        let mut member = |agent: &AgentId| {
            if chipset_mail::Message::can_address(agent) {
                out.insert(agent.clone());
            } else {
                left_out.insert(agent.clone());
            }
        };
        let mut named = Vec::new();
        for target in to.targets() {
            match target {
                Target::Agent(agent) => {
                    if !profiles.iter().any(|p| &p.name == agent) {
                        return Err(Error::UnknownAgent {
                            agent: agent.clone(),
                        });
                    }
                    named.push(agent.clone());
                }
                Target::List(list) => {
                    let mut any = false;
                    for p in profiles.iter().filter(|p| p.roles.contains(list)) {
                        any = true;
                        member(&p.name);
                    }
                    if !any {
                        return Err(Error::EmptyList { list: list.clone() });
                    }
                }
                Target::All => profiles.iter().for_each(|p| member(&p.name)),
            }
        }
        for agent in named {
            left_out.remove(&agent);
            out.insert(agent);
        }
        if out.iter().all(|a| a == sender) {
            return Err(Error::NoOtherAgent {
                sender: sender.clone(),
            });
        }
        Ok(Resolved {
            agents: out.into_iter().collect(),
            left_out: left_out.into_iter().collect(),
        })
    }

    /// Returns the members of `list`, sorted, and the profiles that could
    /// not be read: each may be a member, and is never taken as not one.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when `agents/` cannot be listed or a file opened.
    pub fn members(&self, list: &Role) -> Result<Listing<AgentId>> {
        let mut members = Listing::default();
        self.each_profile(|_, read| {
            match read {
                ReadOutcome::Value(p) if p.roles.contains(list) => members.items.push(p.name),
                ReadOutcome::Value(_) => {}
                other => members.push(other.map(|p| p.name)),
            }
            Ok(())
        })?;
        members.items.sort();
        Ok(members)
    }

    /// Adds every agent of `agents` to `list` (gives it the role). Each
    /// profile changes under its own lock; an agent already on the list is
    /// left alone.
    ///
    /// **Retry rule:** every agent is checked before any profile is
    /// written, so bad input changes nothing; a failure after some
    /// profiles changed is [`Error::PartlyChanged`], an unknown outcome:
    /// the same call again finishes the change and leaves the agents done
    /// alone ([`Registered::Unchanged`]).
    ///
    /// # Errors
    ///
    /// Before anything is written: [`Error::ReservedList`] for `all`;
    /// naming the first agent it applies to, [`Error::NotRegistered`],
    /// [`Error::TooManyRoles`], [`Error::Corrupt`], [`Error::Unsupported`].
    /// Then [`Error::PartlyChanged`] when a profile before the failing one
    /// changed, else the failure itself ([`Error::Store`]; a profile that
    /// another writer changed since the check may still be refused).
    pub fn list_add(&self, list: &Role, agents: &[AgentId]) -> Result<Vec<Registered>> {
        self.change_list(list, agents, true)
    }

    /// Takes every agent of `agents` off `list`. As [`Directory::list_add`]
    /// (an agent not on the list is left alone).
    ///
    /// # Errors
    ///
    /// As [`Directory::list_add`], without [`Error::TooManyRoles`].
    pub fn list_remove(&self, list: &Role, agents: &[AgentId]) -> Result<Vec<Registered>> {
        self.change_list(list, agents, false)
    }

    fn change_list(&self, list: &Role, agents: &[AgentId], add: bool) -> Result<Vec<Registered>> {
        list.check_held()?;
        for agent in agents {
            let p = registered(agent, "change a list of", self.read(agent)?)?;
            if add && !p.roles.contains(list) && p.roles.len() >= MAX_ROLES {
                return Err(Error::TooManyRoles {
                    count: p.roles.len() + 1,
                    max: MAX_ROLES,
                });
            }
        }
        let mut done = Vec::with_capacity(agents.len());
        for agent in agents {
            match self.change_roles(agent, list, add) {
                Ok(r) => done.push(r),
                Err(source) => {
                    let changed: Vec<AgentId> = done
                        .iter()
                        .filter(|r| matches!(r, Registered::Updated(_)))
                        .map(|r| r.profile().name.clone())
                        .collect();
                    if changed.is_empty() {
                        return Err(source);
                    }
                    return Err(Error::PartlyChanged {
                        changed,
                        source: Box::new(source),
                    });
                }
            }
        }
        Ok(done)
    }

    fn change_roles(&self, agent: &AgentId, list: &Role, add: bool) -> Result<Registered> {
        let op = if add {
            "add a list to"
        } else {
            "remove a list from"
        };
        self.swap(agent, |read, now| {
            let old = registered(agent, op, read)?;
            let mut new = old.clone();
            if add {
                if let Err(at) = new.roles.binary_search(list) {
                    new.roles.insert(at, list.clone());
                }
            } else {
                new.roles.retain(|r| r != list);
            }
            if new.roles.len() > MAX_ROLES {
                return Err(Error::TooManyRoles {
                    count: new.roles.len(),
                    max: MAX_ROLES,
                });
            }
            if new == old {
                return Ok(Decision::Keep(Registered::Unchanged(old)));
            }
            new.updated_at = now;
            Ok(Decision::Write(new.clone(), Registered::Updated(new)))
        })
    }

    /// Returns every readable profile, sorted by name, without computing
    /// last-seen: one listing of `agents/` and one bounded read per
    /// profile. Profiles that cannot be read are left out (the doctor and
    /// [`Directory::list`] report them). For views such as `status`.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when `agents/` cannot be listed or a file opened.
    pub fn profiles(&self) -> Result<Vec<Profile>> {
        let mut out = Vec::new();
        self.each_profile(|_, read| {
            out.extend(read.value());
            Ok(())
        })?;
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Reads every profile, failing on any that cannot be read.
    fn all_profiles(&self) -> Result<Vec<Profile>> {
        let mut out = Vec::new();
        self.each_profile(|agent, read| {
            match read {
                ReadOutcome::Value(p) => out.push(p),
                ReadOutcome::Missing => {}
                ReadOutcome::Corrupt(corruption) => {
                    return Err(Error::Corrupt {
                        agent,
                        op: "resolve",
                        corruption,
                    });
                }
                ReadOutcome::Unsupported(unsupported) => {
                    return Err(Error::Unsupported {
                        agent,
                        op: "resolve",
                        unsupported,
                    });
                }
            }
            Ok(())
        })?;
        Ok(out)
    }

    /// Reads each profile in `agents/`, in the listing's order, and hands
    /// it to `each` with its agent. Names that are not profiles are passed
    /// over (the doctor reports them).
    fn each_profile(
        &self,
        mut each: impl FnMut(AgentId, ReadOutcome<Profile>) -> Result<()>,
    ) -> Result<()> {
        for name in self.names()? {
            if let Some(agent) = profile_agent(&name) {
                let read = self.read(&agent)?;
                each(agent, read)?;
            }
        }
        Ok(())
    }
}

/// The agent a file name of `agents/` is the profile of, if it is one.
fn profile_agent(name: &str) -> Option<AgentId> {
    name.strip_suffix(".json")
        .and_then(|stem| AgentId::new(stem).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: std::result::Result<&str, &str>) {
        match (text.parse::<Recipients>(), expected) {
            (Ok(r), Ok(shown)) => assert_eq!(r.to_string(), shown, "{text:?}"),
            (Err(e), Err(part)) => assert!(e.to_string().contains(part), "{text:?}: {e}"),
            (got, want) => panic!("{text:?}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn recipients_parse() {
        check("ann", Ok("ann"));
        check("ann,bob, ann", Ok("ann,bob"));
        check("@reviewers,ann", Ok("@reviewers,ann"));
        check("@all", Ok("@all"));
        check("", Err("no recipient"));
        check("ann,,bob", Err("empty item"));
        check("@../x", Err("not a list name"));
        check("@a/b", Err("not a list name"));
        check("@", Err("not a list name"));
        check("a/b", Err("invalid recipients `a/b`"));
        assert!("ann".parse::<Recipients>().unwrap().single().is_some());
        assert!("@all".parse::<Recipients>().unwrap().single().is_none());
        assert!("ann,bob".parse::<Recipients>().unwrap().single().is_none());
    }
}
