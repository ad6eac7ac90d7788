//! The I/O layer: profiles in `agents/{agent}.json`, changed with a
//! compare-and-swap on the storage seam.

use std::sync::Arc;
use std::time::Duration;

use chipset_backend::{Backend, FsBackend};

use chipset_bus::Bus;
use chipset_hook::Hooks;
use chipset_mail::Mail;
use chipset_store::{AgentId, Corruption, Decision, Listing, ReadOutcome, StateDir, StatePath};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::profile::{Profile, Registration, Role};
use crate::seen::Seen;

/// A profile with its computed last activity: what `whois` and `list` give.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct AgentInfo {
    /// The profile as stored.
    #[serde(flatten)]
    pub profile: Profile,
    /// The latest activity chipset saw.
    pub last_seen: Seen,
}

/// What [`Directory::register`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Registered {
    /// A new profile.
    Created(Profile),
    /// The profile changed.
    Updated(Profile),
    /// The profile already said all that: nothing was written (a retry).
    Unchanged(Profile),
}

impl Registered {
    /// Returns the profile now.
    pub fn profile(&self) -> &Profile {
        match self {
            Registered::Created(p) | Registered::Updated(p) | Registered::Unchanged(p) => p,
        }
    }
}

/// Which agents [`Directory::list`] returns. The default is every one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Filter {
    /// Only agents holding this role.
    pub role: Option<Role>,
    /// Only agents seen within this long of now.
    pub seen_within: Option<Duration>,
}

/// The agent directory under one state root: `agents/{agent}.json`.
///
/// Cheap to clone. A registration reads the profile and its version on
/// the storage seam (`chipset_backend::Backend`), decides at the backend's
/// clock, and writes with a compare-and-swap at that version (read and
/// decided again when another writer came first), so registrations are
/// linearizable across processes and (on PostgreSQL) hosts. On a directory
/// the swap is the store's replace under `.{agent}.json.lock`, the lock
/// [`StateDir::update`] takes, so the files are what they always were.
/// Reading never writes.
#[derive(Debug, Clone)]
pub struct Directory {
    pub(crate) state: StateDir,
    pub(crate) seam: Arc<dyn Backend>,
    pub(crate) dir: StatePath,
    pub(crate) hooks: Hooks,
    pub(crate) bus: Bus,
    /// Whose manifest tells when an agent last sent or archived mail.
    pub(crate) mail: Mail,
}

impl Directory {
    /// Returns the directory under `state`. Creates nothing until the first
    /// registration.
    pub fn new(state: StateDir) -> Self {
        let seam = Arc::new(FsBackend::new(state.clone()));
        Self::with_backend(state, seam)
    }

    /// Returns the directory whose profiles, and the hooks it reads for
    /// last activity, live on `backend` (a PostgreSQL server, issue 30),
    /// with `state` as the local root that the bus presence and the mail
    /// manifest still use until they move onto the seam.
    pub fn with_backend(state: StateDir, backend: Arc<dyn Backend>) -> Self {
        Directory {
            dir: state.channel(crate::DIRECTORY_CHANNEL),
            hooks: Hooks::with_backend(state.clone(), Arc::clone(&backend)),
            bus: Bus::new(state.clone()),
            mail: Mail::new(state.clone()),
            seam: backend,
            state,
        }
    }

    /// Returns this directory with agents' last mail activity read from
    /// `mail`'s manifest: the mail handle the program uses, say a folder of
    /// the seed's layout ([`Mail::in_folder`]) outside the state root.
    #[must_use]
    pub fn with_mail(mut self, mail: Mail) -> Self {
        self.mail = mail;
        self
    }

    /// Returns the `agents/` directory.
    pub fn dir(&self) -> &StatePath {
        &self.dir
    }

    /// Returns the path of `agent`'s profile, `agents/{agent}.json`.
    pub fn path(&self, agent: &AgentId) -> StatePath {
        self.dir.join_id(agent, ".json")
    }

    /// Creates or updates `agent`'s profile. Fields `change` leaves `None`
    /// keep their value; an empty value clears one. Idempotent: registering
    /// again with what the profile says writes nothing.
    ///
    /// **Commit point**: the rename of the new profile under its lock; a
    /// crash before it leaves the old profile, after it the new one.
    ///
    /// # Errors
    ///
    /// Bad input ([`ErrorKind::Invalid`](chipset_store::ErrorKind::Invalid)) before anything is read;
    /// [`Error::Corrupt`] or [`Error::Unsupported`] when the profile file is
    /// (nothing is overwritten); [`Error::Store`].
    pub fn register(&self, agent: &AgentId, change: &Registration) -> Result<Registered> {
        change.validate()?;
        let op = "register";
        self.swap(agent, |read, now| {
            let old = match read {
                ReadOutcome::Missing => None,
                ReadOutcome::Value(p) => Some(p),
                ReadOutcome::Corrupt(corruption) => {
                    return Err(Error::Corrupt {
                        agent: agent.clone(),
                        op,
                        corruption,
                    });
                }
                ReadOutcome::Unsupported(unsupported) => {
                    return Err(Error::Unsupported {
                        agent: agent.clone(),
                        op,
                        unsupported,
                    });
                }
            };
            let mut new = change.apply(agent, old.as_ref(), now);
            Ok(match old {
                None => Decision::Write(new.clone(), Registered::Created(new)),
                Some(old) if old == new => Decision::Keep(Registered::Unchanged(old)),
                Some(_) => {
                    new.updated_at = now;
                    Decision::Write(new.clone(), Registered::Updated(new))
                }
            })
        })
    }

    /// Reads `agent`'s profile without locking (a file is always whole).
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when it cannot be read; a corrupt file is
    /// [`ReadOutcome::Corrupt`], never missing.
    pub fn read(&self, agent: &AgentId) -> Result<ReadOutcome<Profile>> {
        let path = self.path(agent);
        Ok(self.read_versioned(agent, &path)?.0)
    }

    /// Returns `agent`'s profile and last activity.
    ///
    /// # Errors
    ///
    /// [`Error::NotRegistered`]; [`Error::Corrupt`]; [`Error::Unsupported`];
    /// [`Error::Store`], [`Error::Hook`] or [`Error::Bus`] when a file cannot
    /// be read.
    pub fn whois(&self, agent: &AgentId) -> Result<AgentInfo> {
        let op = "read";
        let profile = registered(agent, op, self.read(agent)?)?;
        let last_seen = self.seen(agent, profile.updated_at, &self.mail_tail()?)?;
        Ok(AgentInfo { profile, last_seen })
    }

    /// Returns the registered agents `filter` admits, sorted by name, and
    /// every profile that could not be read (a foreign file name in
    /// `agents/` is listed as corrupt too).
    ///
    /// Cost: one listing of `agents/`, the manifest's tail once, and per
    /// agent its profile, presence and hook (each one bounded read) and one
    /// `stat`.
    ///
    /// # Errors
    ///
    /// [`Error::Store`], [`Error::Hook`] or [`Error::Bus`] when a file cannot
    /// be read at all.
    pub fn list(&self, filter: &Filter) -> Result<Listing<AgentInfo>> {
        let mut roster = Listing::default();
        let names = self.names()?;
        let tail = self.mail_tail()?;
        let now = self.now()?;
        for name in names {
            let agent = name
                .strip_suffix(".json")
                .and_then(|stem| AgentId::new(stem).ok());
            let Some(agent) = agent else {
                roster.corrupt.push(Corruption {
                    path: self.dir.join(&name)?.to_path_buf(),
                    reason: chipset_store::CorruptReason::WrongShape(
                        "not a profile file name (`{agent}.json`)".to_owned(),
                    ),
                });
                continue;
            };
            let profile = match self.read(&agent)? {
                ReadOutcome::Value(p) => p,
                ReadOutcome::Missing => continue, // Removed since the listing.
                ReadOutcome::Corrupt(c) => {
                    roster.corrupt.push(c);
                    continue;
                }
                ReadOutcome::Unsupported(u) => {
                    roster.unsupported.push(u);
                    continue;
                }
            };
            if let Some(role) = &filter.role
                && !profile.roles.contains(role)
            {
                continue;
            }
            let last_seen = self.seen(&agent, profile.updated_at, &tail)?;
            if let Some(within) = filter.seen_within
                && now.since(last_seen.at) > within
            {
                continue;
            }
            roster.items.push(AgentInfo { profile, last_seen });
        }
        roster
            .items
            .sort_by(|a, b| a.profile.name.cmp(&b.profile.name));
        Ok(roster)
    }
}

/// A profile whose `name` is not its file's agent is corrupt.
/// Returns the profile `read` holds, or the error that says why there is
/// none for `agent` (`op` names what was being done).
pub(crate) fn registered(
    agent: &AgentId,
    op: &'static str,
    read: ReadOutcome<Profile>,
) -> Result<Profile> {
    match read {
        ReadOutcome::Value(p) => Ok(p),
        ReadOutcome::Missing => Err(Error::NotRegistered {
            agent: agent.clone(),
        }),
        ReadOutcome::Corrupt(corruption) => Err(Error::Corrupt {
            agent: agent.clone(),
            op,
            corruption,
        }),
        ReadOutcome::Unsupported(unsupported) => Err(Error::Unsupported {
            agent: agent.clone(),
            op,
            unsupported,
        }),
    }
}

pub(crate) fn classify(
    agent: &AgentId,
    path: &StatePath,
    read: ReadOutcome<Profile>,
) -> ReadOutcome<Profile> {
    read.and_then(|p| {
        if &p.name == agent {
            ReadOutcome::Value(p)
        } else {
            ReadOutcome::Corrupt(Corruption {
                path: path.to_path_buf(),
                reason: chipset_store::CorruptReason::WrongShape(format!(
                    "name `{}` does not match the file's agent `{agent}`",
                    p.name
                )),
            })
        }
    })
}
