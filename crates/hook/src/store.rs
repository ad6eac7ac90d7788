//! The I/O layer: applies the pure transitions to `hooks/{agent}.json` under
//! the hook's lock.

use std::path::Path;
use std::sync::Arc;

use crate::BeadId;
use chipset_backend::{Backend, FsBackend};
use chipset_store::{
    AgentId, Channel, CorruptReason, Corruption, Decision, ReadOutcome, StateDir, StatePath,
    Timestamp, Unsupported,
};

use crate::error::{Error, Result};
use crate::format::{HookFile, Invalid, parse};
use crate::state::{Assignment, Hook, HookState, HookStatus};
use crate::transition::{Actor, HookEvent, already_applied, transition};

/// What [`Hooks::pickup`] found: GUPP's answer to "is there work for me?".
///
/// There is no way to decline: pending work is activated in the same locked
/// step that finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
#[non_exhaustive]
pub enum Pickup {
    /// Nothing is assigned.
    Idle,
    /// Pending work was found and is now active: execute it.
    Started(Assignment),
    /// The hook was already active (the agent restarted mid-work); it was
    /// touched: continue the work.
    Resumed(Assignment),
    /// The work is completed and awaits the dispatcher's clear: nothing to do.
    AwaitingClear(Assignment),
}

impl Pickup {
    /// Returns the assignment to execute (started or resumed).
    pub fn work(&self) -> Option<&Assignment> {
        match self {
            Pickup::Started(a) | Pickup::Resumed(a) => Some(a),
            Pickup::Idle | Pickup::AwaitingClear(_) => None,
        }
    }
}

/// What [`Hooks::reassign`] took away.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reassigned {
    /// The assignment taken away; its agent can no longer touch or complete it.
    pub taken: Assignment,
    /// The status it was taken from (pending or active), or empty when the
    /// hook was empty already at the next generation: a retry of a
    /// reassignment that applied.
    pub was: HookStatus,
    /// The hook now (empty).
    pub hook: Hook,
}

/// The hooks' directory under the state root, `hooks/`.
pub(crate) const HOOK_CHANNEL: Channel = Channel::new("hooks");

/// The hooks of every agent under one state root: `hooks/{agent}.json`.
///
/// Cheap to clone. Every change reads the hook, applies the pure
/// transition rules, and writes the result with a compare-and-swap on the
/// storage seam (`chipset_backend::Backend`): a create of a missing hook,
/// a swap at the version read otherwise, read again and decided again when
/// another writer came first. Changes to one hook are therefore
/// linearizable across threads, processes and (on PostgreSQL) hosts. On a
/// directory the swap is the store's durable replace under the hook's lock
/// (`.{agent}.json.lock`), so the files are what they always were.
#[derive(Debug, Clone)]
pub struct Hooks {
    pub(crate) state: StateDir,
    pub(crate) dir: StatePath,
    pub(crate) seam: Arc<dyn Backend>,
}

impl Hooks {
    /// Returns the hooks under `state`. Creates nothing until the first write.
    pub fn new(state: StateDir) -> Self {
        let seam = Arc::new(FsBackend::new(state.clone()));
        Self::with_backend(state, seam)
    }

    /// Returns the hooks whose reads and transitions go through `backend`
    /// (a PostgreSQL server, issue 30). The listing, the doctor and
    /// [`Hooks::watch`] go through it too; `state` is the local root that
    /// only a directory backend's repairs use.
    pub fn with_backend(state: StateDir, backend: Arc<dyn Backend>) -> Self {
        let dir = state.channel(HOOK_CHANNEL);
        Hooks {
            state,
            dir,
            seam: backend,
        }
    }

    /// Returns `agent`'s hook on the seam: `hooks/{agent}.json`.
    pub(crate) fn key(&self, agent: &AgentId) -> chipset_backend::Key {
        chipset_backend::Dir::new(HOOK_CHANNEL.as_str())
            .and_then(|d| d.key(&format!("{agent}.json")))
            .expect("a validated agent id is a valid name")
    }

    /// Returns the state root.
    pub fn state(&self) -> &StateDir {
        &self.state
    }

    /// Returns the `hooks/` directory.
    pub fn dir(&self) -> &StatePath {
        &self.dir
    }

    /// Returns the path of `agent`'s hook file, `hooks/{agent}.json`.
    pub fn path(&self, agent: &AgentId) -> StatePath {
        self.dir.join_id(agent, ".json")
    }

    /// Reads `agent`'s hook without locking (a file is always whole).
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the file cannot be read; a corrupt file is
    /// [`ReadOutcome::Corrupt`] and an unsupported one
    /// [`ReadOutcome::Unsupported`], not errors.
    pub fn read(&self, agent: &AgentId) -> Result<ReadOutcome<Hook>> {
        let path = self.path(agent);
        match self.read_raw(agent, &path) {
            Ok((read, _)) => Ok(classify(agent, &path, read)),
            Err(Failure::Corrupt(c)) => Ok(ReadOutcome::Corrupt(c)),
            Err(Failure::Error(e)) => Err(e),
        }
    }

    /// Reads `agent`'s hook file on the seam, with the version to swap at.
    fn read_raw(
        &self,
        agent: &AgentId,
        path: &Path,
    ) -> Result<(ReadOutcome<HookFile>, Option<chipset_backend::Version>), Failure> {
        match self.seam.read(&self.key(agent)) {
            Ok(None) => Ok((ReadOutcome::Missing, None)),
            Ok(Some(v)) => Ok((parse_hook_file(path, &v.value), Some(v.version))),
            Err(e) => Err(failure(path, e)),
        }
    }

    /// Returns the assignment `agent`'s hook holds now (pending, active or
    /// completed), or `None` when it is empty: what the command line's
    /// agent-side commands act on.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] when the hook file is corrupt; [`Error::Unsupported`]
    /// when it holds a value this version does not know; [`Error::Store`].
    pub fn current(&self, agent: &AgentId) -> Result<Option<Assignment>> {
        let op = "read the assignment of";
        match self.read(agent)? {
            ReadOutcome::Missing => Ok(None),
            ReadOutcome::Value(h) => Ok(h.assignment()),
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

    /// Assigns work to `agent`'s empty hook (dispatcher), recording `by` as
    /// `assigned_by` when given, and returns the new assignment.
    ///
    /// Assigning again with the same bead, title and `by` while the hook
    /// holds that work (pending, active or completed) is a retry: it returns
    /// the assignment the hook holds and writes nothing. So a retry after an
    /// [`OutcomeUnknown`](chipset_store::Error::OutcomeUnknown) failure
    /// returns the first assignment. Once the work is cleared, the same
    /// request is a new assignment.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidTitle`] for an empty title, one over
    /// 1024 bytes or one with a control
    /// character (a newline among them); [`Error::AlreadyAssigned`]
    /// when the hook holds other work (another bead, title or dispatcher);
    /// [`Error::Corrupt`]
    /// when the file is corrupt (repair it first); [`Error::Store`].
    pub fn assign(
        &self,
        agent: &AgentId,
        bead_id: BeadId,
        title: impl Into<String>,
        by: Option<&AgentId>,
    ) -> Result<Assignment> {
        let title = title.into();
        check_title(&title)?;
        let event = HookEvent::Assign { bead_id, title };
        let hook = self.apply_event(agent, event, &Actor::Dispatcher(by.cloned()))?;
        Ok(hook.assignment().expect("an assigned hook holds work"))
    }

    /// Returns what [`Hooks::assign`] would write over `current` (the
    /// bytes of `agent`'s hook as read, `None` when it has none) at `now`:
    /// the new hook's bytes and the assignment it holds. The bytes are
    /// `None` when the hook holds this assignment already (a retry). For a
    /// caller that makes the write itself, as one step of a larger one: the
    /// work pool's claim on a server swaps the hook in the claim's
    /// transaction, at the version it read.
    ///
    /// `clearing` is completed work the hook may hold: when it does, the
    /// work is cleared in the same write ([`Hooks::clear`] then
    /// [`Hooks::assign`], the generation two on), so that the claim which
    /// takes the next work is the one that takes the last off the hook.
    ///
    /// # Errors
    ///
    /// As [`Hooks::assign`]: [`Error::InvalidTitle`],
    /// [`Error::AlreadyAssigned`], [`Error::Corrupt`],
    /// [`Error::Unsupported`].
    pub fn plan_assign(
        &self,
        agent: &AgentId,
        current: Option<&[u8]>,
        clearing: Option<&Assignment>,
        work: (BeadId, String),
        by: Option<&AgentId>,
        now: Timestamp,
    ) -> Result<(Option<Vec<u8>>, Assignment)> {
        check_title(&work.1)?;
        let op = "assign";
        let path = self.path(agent);
        let hook = match current.map(|b| classify(agent, &path, parse_hook_file(&path, b))) {
            None | Some(ReadOutcome::Missing) => Hook::missing(agent.clone()),
            Some(ReadOutcome::Value(hook)) => hook,
            Some(ReadOutcome::Corrupt(corruption)) => {
                return Err(Error::Corrupt {
                    agent: agent.clone(),
                    op,
                    corruption,
                });
            }
            Some(ReadOutcome::Unsupported(unsupported)) => {
                return Err(Error::Unsupported {
                    agent: agent.clone(),
                    op,
                    unsupported,
                });
            }
        };
        let actor = Actor::Dispatcher(by.cloned());
        let hook = match clearing {
            Some(done) if done.matches(&hook) && hook.state.status() == HookStatus::Completed => {
                transition(&hook, &HookEvent::Clear(done.clone()), &actor, now)?
            }
            _ => hook,
        };
        let (bead_id, title) = work;
        let event = HookEvent::Assign { bead_id, title };
        let after = match transition(&hook, &event, &actor, now) {
            Ok(after) => after,
            Err(
                Error::AlreadyAssigned { .. }
                | Error::WrongState { .. }
                | Error::StaleAssignment { .. },
            ) if already_applied(&hook, &event, &actor) => {
                return Ok((
                    None,
                    hook.assignment().expect("an assigned hook holds work"),
                ));
            }
            Err(e) => return Err(e),
        };
        let bytes = StateDir::to_canonical_json(&HookFile::from(&after)).map_err(|source| {
            chipset_store::Error::Serialize {
                path: path.to_path_buf(),
                source,
            }
        })?;
        Ok((
            Some(bytes),
            after.assignment().expect("an assigned hook holds work"),
        ))
    }

    /// Starts the held, pending assignment (the owning agent).
    /// [`Hooks::pickup`] finds and activates in one step. Activating again
    /// once active (a retry) returns the hook unchanged.
    ///
    /// **Commit point** (of every hook transition): the rename of the new
    /// hook file (a no-clobber publish for the first, a replace under the
    /// hook's lock after). A failure before it changes nothing;
    /// a failed sync after it is the store's
    /// [`OutcomeUnknown`](chipset_store::Error::OutcomeUnknown), and the
    /// retry with the same assignment is then a success that changes nothing.
    ///
    /// # Errors
    ///
    /// [`Error::StaleAssignment`]
    /// when the hook no longer holds `held`;
    /// [`Error::WrongState`]
    /// when it is not pending; [`Error::Corrupt`]; [`Error::Store`].
    pub fn activate(&self, held: &Assignment) -> Result<Hook> {
        self.apply_event(
            &held.agent,
            HookEvent::Activate(held.clone()),
            &Actor::Agent(held.agent.clone()),
        )
    }

    /// Updates `last_activity` on the held, active assignment (the owning
    /// agent's heartbeat). A touch after a clear or reassignment fails as
    /// stale and writes nothing, so it can never bring the work back.
    ///
    /// # Errors
    ///
    /// As [`Hooks::activate`]; the hook must be active.
    pub fn touch(&self, held: &Assignment) -> Result<Hook> {
        self.apply_event(
            &held.agent,
            HookEvent::Touch(held.clone()),
            &Actor::Agent(held.agent.clone()),
        )
    }

    /// Completes the held, active assignment (the owning agent). Completing
    /// again once completed (a retry) returns the hook unchanged.
    ///
    /// # Errors
    ///
    /// As [`Hooks::activate`]; the hook must be active.
    pub fn complete(&self, held: &Assignment) -> Result<Hook> {
        self.apply_event(
            &held.agent,
            HookEvent::Complete(held.clone()),
            &Actor::Agent(held.agent.clone()),
        )
    }

    /// Retires a completed assignment (dispatcher, after verifying the
    /// work): the hook becomes empty; the file stays. Clearing again (a
    /// retry: the hook is empty at the next generation) returns the hook
    /// unchanged.
    ///
    /// # Errors
    ///
    /// [`Error::StaleAssignment`]
    /// when the hook no longer holds `held`;
    /// [`Error::WrongState`]
    /// when it is pending or active (use [`Hooks::reassign`]); [`Error::Corrupt`]; [`Error::Store`].
    pub fn clear(&self, held: &Assignment) -> Result<Hook> {
        self.apply_event(
            &held.agent,
            HookEvent::Clear(held.clone()),
            &Actor::Dispatcher(None),
        )
    }

    /// Takes a pending or active assignment away from its agent (dispatcher):
    /// the hook becomes empty and the generation moves on, so the agent's
    /// later touch or complete fails as stale. Returns what was taken.
    /// Reassigning again (a retry: the hook is empty at the next generation)
    /// returns `held` as taken, with [`Reassigned::was`] empty.
    ///
    /// # Errors
    ///
    /// [`Error::StaleAssignment`]
    /// when the hook no longer holds `held`;
    /// [`Error::WrongState`]
    /// when it is completed (use [`Hooks::clear`]); [`Error::Corrupt`]; [`Error::Store`].
    pub fn reassign(&self, held: &Assignment) -> Result<Reassigned> {
        let (before, hook) = self.change(
            &held.agent,
            "reassign",
            HookEvent::Reassign(held.clone()),
            &Actor::Dispatcher(None),
        )?;
        let Some(taken) = before.assignment() else {
            // Already taken away: a retry of a reassignment that applied.
            return Ok(Reassigned {
                taken: held.clone(),
                was: HookStatus::Empty,
                hook,
            });
        };
        tracing::info!(agent = %held.agent, bead = %held.work.bead_id, was = %before.state.status(), "hook reassigned");
        Ok(Reassigned {
            taken,
            was: before.state.status(),
            hook,
        })
    }

    /// GUPP, the agent side: finds `agent`'s work and starts it in one locked
    /// step. Pending work is activated ([`Pickup::Started`]); active work is
    /// touched and handed back ([`Pickup::Resumed`], for an agent that
    /// restarted); completed work waits for the dispatcher
    /// ([`Pickup::AwaitingClear`]); an empty hook is [`Pickup::Idle`].
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] when the hook file is corrupt; [`Error::Store`].
    pub fn pickup(&self, agent: &AgentId) -> Result<Pickup> {
        let me = Actor::Agent(agent.clone());
        self.locked(agent, "pick up work from", |hook, now| {
            let (event, pickup) = match (&hook.state, hook.assignment()) {
                (_, None) => return Ok(Decision::Keep(Pickup::Idle)),
                (HookState::Pending(_), Some(a)) => {
                    (HookEvent::Activate(a.clone()), Pickup::Started(a))
                }
                (HookState::Active(_), Some(a)) => {
                    (HookEvent::Touch(a.clone()), Pickup::Resumed(a))
                }
                (_, Some(a)) => return Ok(Decision::Keep(Pickup::AwaitingClear(a))),
            };
            let new = transition(&hook, &event, &me, now)?;
            Ok(write_if_changed(&hook, new, pickup))
        })
    }

    /// Applies any [`HookEvent`] by `actor` to `agent`'s hook under its lock and
    /// returns the new hook. The typed methods above are this with the actor
    /// filled in.
    ///
    /// # Errors
    ///
    /// A refusal (of kind [`ErrorKind::Refused`](chipset_store::ErrorKind::Refused) or [`ErrorKind::Stale`](chipset_store::ErrorKind::Stale)) when the rules refuse; [`Error::Corrupt`]; [`Error::Store`].
    #[cfg(test)]
    pub(crate) fn apply(&self, agent: &AgentId, event: HookEvent, actor: &Actor) -> Result<Hook> {
        self.apply_event(agent, event, actor)
    }

    /// Applies `event` by `actor` to `agent`'s hook: what the typed methods
    /// (and the tests' `Hooks::apply`) run.
    fn apply_event(&self, agent: &AgentId, event: HookEvent, actor: &Actor) -> Result<Hook> {
        let op = event.op().as_str();
        self.change(agent, op, event, actor).map(|(_, after)| after)
    }

    fn change(
        &self,
        agent: &AgentId,
        op: &'static str,
        event: HookEvent,
        actor: &Actor,
    ) -> Result<(Hook, Hook)> {
        self.locked(agent, op, |before, now| {
            let after = match transition(&before, &event, actor, now) {
                Ok(after) => after,
                // A retry of a transition that took effect: success, nothing changes.
                Err(
                    Error::AlreadyAssigned { .. }
                    | Error::WrongState { .. }
                    | Error::StaleAssignment { .. },
                ) if already_applied(&before, &event, actor) => {
                    tracing::debug!(%agent, op, "hook transition had already applied");
                    return Ok(Decision::Keep((before.clone(), before)));
                }
                Err(e) => return Err(e),
            };
            let out = (before.clone(), after.clone());
            Ok(write_if_changed(&before, after, out))
        })
    }

    /// Runs `decide` on the current hook (missing = [`Hook::missing`]) and
    /// writes its decision with a compare-and-swap at the version read; when
    /// another writer came first, reads and decides again. A corrupt or
    /// unsupported file never reaches `decide`.
    pub(crate) fn locked<R>(
        &self,
        agent: &AgentId,
        op: &'static str,
        mut decide: impl FnMut(Hook, Timestamp) -> Result<Decision<Hook, R>>,
    ) -> Result<R> {
        let path = self.path(agent);
        let key = self.key(agent);
        let corrupt = |corruption| Error::Corrupt {
            agent: agent.clone(),
            op,
            corruption,
        };
        let fail = |f: Failure| match f {
            Failure::Corrupt(c) => corrupt(c),
            Failure::Error(e) => e,
        };
        // A symlinked directory on the way is the store refusing the path,
        // not a corrupt hook (which repair would move aside): checked
        // before the read, which cannot tell the two apart.
        self.state.check_parents(&path)?;
        loop {
            let (read, version) = self.read_raw(agent, &path).map_err(fail)?;
            let hook = match classify(agent, &path, read) {
                ReadOutcome::Missing => Hook::missing(agent.clone()),
                ReadOutcome::Value(hook) => hook,
                ReadOutcome::Corrupt(c) => return Err(corrupt(c)),
                ReadOutcome::Unsupported(unsupported) => {
                    return Err(Error::Unsupported {
                        agent: agent.clone(),
                        op,
                        unsupported,
                    });
                }
            };
            // Time is read after the hook: a change that commits was decided
            // on the newest hook, at a time no earlier than the one before.
            let now = self.seam.now().map_err(|e| fail(failure(&path, e)))?;
            let (after, r) = match decide(hook, now)? {
                Decision::Keep(r) => return Ok(r),
                Decision::Write(after, r) => (after, r),
            };
            let bytes = StateDir::to_canonical_json(&HookFile::from(&after)).map_err(|source| {
                chipset_store::Error::Serialize {
                    path: path.to_path_buf(),
                    source,
                }
            })?;
            match self.seam.create_or_replace(&key, version, &bytes) {
                Ok(Some(_)) => return Ok(r),
                Ok(None) => tracing::debug!(%agent, op, "hook changed under us; deciding again"),
                Err(e) => return Err(fail(failure(&path, e))),
            }
        }
    }
}

/// Parses a hook file's bytes as the store's typed reads do: a syntax
/// error is unparsable, valid JSON of another shape is the wrong shape.
pub(crate) fn parse_hook_file(path: &Path, bytes: &[u8]) -> ReadOutcome<HookFile> {
    match serde_json::from_slice(bytes) {
        Ok(file) => ReadOutcome::Value(file),
        Err(e) => ReadOutcome::Corrupt(Corruption {
            path: path.to_owned(),
            reason: match e.classify() {
                serde_json::error::Category::Data => CorruptReason::WrongShape(e.to_string()),
                _ => CorruptReason::Unparsable(e.to_string()),
            },
        }),
    }
}

/// A seam failure, as the hook reports it.
enum Failure {
    /// The hook is there but unreadable (a symlink, a FIFO, over the cap).
    Corrupt(Corruption),
    /// Anything else.
    Error(Error),
}

/// Turns a seam error into the hook's: a directory's failures stay the
/// store's errors ([`Error::Store`], an unknown outcome included), a
/// symlink or unreadable file is a corrupt hook, and a server's failures
/// are [`Error::Backend`].
fn failure(path: &Path, e: chipset_backend::Error) -> Failure {
    let store = match e {
        chipset_backend::Error::Store { source, .. } => source,
        chipset_backend::Error::Corrupt { reason, .. } => {
            return Failure::Corrupt(Corruption {
                path: path.to_owned(),
                reason,
            });
        }
        chipset_backend::Error::OutcomeUnknown { op, key, source } => {
            match source.downcast::<chipset_store::Error>() {
                Ok(store) => *store,
                Err(source) => {
                    return Failure::Error(Error::Backend(Box::new(
                        chipset_backend::Error::OutcomeUnknown { op, key, source },
                    )));
                }
            }
        }
        other => return Failure::Error(Error::Backend(Box::new(other))),
    };
    match symlink_corruption(path, store) {
        Ok(c) => Failure::Corrupt(c),
        Err(e) => Failure::Error(e.into()),
    }
}

/// Skips the write (and its syncs) when a transition changes nothing, such as
/// two touches within one millisecond.
fn write_if_changed<R>(before: &Hook, after: Hook, out: R) -> Decision<Hook, R> {
    if *before == after {
        Decision::Keep(out)
    } else {
        Decision::Write(after, out)
    }
}

/// Turns a raw read into a hook. A hook whose `agent_id` is not its file's
/// agent is corrupt: acting on it would act on the wrong agent's work.
pub(crate) fn classify(
    agent: &AgentId,
    path: &Path,
    read: ReadOutcome<HookFile>,
) -> ReadOutcome<Hook> {
    read.and_then(|file| match parse(file) {
        Ok(hook) if hook.agent == *agent => ReadOutcome::Value(hook),
        Ok(hook) => ReadOutcome::Corrupt(Corruption {
            path: path.to_owned(),
            reason: CorruptReason::WrongShape(format!(
                "agent_id `{}` does not match the file's agent `{agent}`",
                hook.agent
            )),
        }),
        Err(Invalid::Unsupported(what)) => ReadOutcome::Unsupported(Unsupported::new(path, what)),
        Err(Invalid::Corrupt(why)) => ReadOutcome::Corrupt(Corruption {
            path: path.to_owned(),
            reason: CorruptReason::WrongShape(why),
        }),
    })
}

/// A symlink where the hook file should be is reported as a corrupt hook
/// (not a regular file), so it is listed, refused and repaired like one.
pub(crate) fn symlink_corruption(
    path: &Path,
    e: chipset_store::Error,
) -> Result<Corruption, chipset_store::Error> {
    match e {
        chipset_store::Error::Symlink { path: p } if p == path => Ok(Corruption {
            path: p,
            reason: CorruptReason::NotARegularFile,
        }),
        e => Err(e),
    }
}

#[cfg(test)]
pub(crate) mod tests;

/// The longest title [`Hooks::assign`] writes, in bytes (a work pool
/// item's title, at most 256, always fits). A hook file another program
/// wrote is read whatever its title.
const MAX_TITLE: usize = 1024;

/// Checks a title [`Hooks::assign`] writes: not blank, at most
/// [`MAX_TITLE`] bytes, one line without control
/// characters. A hook file another program wrote is read whatever its
/// title.
fn check_title(title: &str) -> Result<()> {
    let reason = if title.trim().is_empty() {
        "it must not be empty".to_owned()
    } else if title.len() > MAX_TITLE {
        format!(
            "it is {} bytes; at most {} are allowed",
            title.len(),
            MAX_TITLE
        )
    } else if title.chars().any(char::is_control) {
        "it must be one line without control characters".to_owned()
    } else {
        return Ok(());
    };
    Err(Error::InvalidTitle { reason })
}
