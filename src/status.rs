//! [`Status`]: one line per agent across every channel, built once for the
//! command line's `chipset status` and the MCP server's `status` tool.

use std::collections::{BTreeMap, BTreeSet};
use std::error::Error as StdError;
use std::time::Duration;

use chipset_bus::{AgentStatus, Priority};
use chipset_hook::{BeadId, Hook, HookStatus};
use chipset_nudge::{NudgeType, Received};
use chipset_pool::PoolCounts;
use chipset_store::{AgentId, ReadOutcome, Timestamp};
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

use crate::door::Chipset;
use crate::error::Result;

/// Every agent's line and the open reminders: what `chipset status` shows.
///
/// Serializes as `{"agents": [...], "reminders": {"open", "by_kind"}}`,
/// the command line's `--json` form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Status {
    /// One line per agent with a hook, a nudge directory, an inbox or a
    /// bus queue, sorted by agent.
    pub agents: Vec<AgentLine>,
    /// The open reminders.
    pub reminders: ReminderCounts,
    /// The live path leases, in token order (left out of the JSON when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub leases: Vec<chipset_lease::Lease>,
    /// The work pool's items per state (left out of the JSON when the
    /// pool is empty).
    #[serde(skip_serializing_if = "PoolCounts::is_empty")]
    pub pool: PoolCounts,
}

/// One agent's status and the open reminders: the MCP `status` tool's
/// result. Serializes as the agent's line with `reminders` beside its
/// fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct AgentReport {
    /// The agent's line.
    #[serde(flatten)]
    pub line: AgentLine,
    /// The open reminders.
    pub reminders: ReminderCounts,
    /// The work pool's items per state (left out of the JSON when the
    /// pool is empty).
    #[serde(skip_serializing_if = "PoolCounts::is_empty")]
    pub pool: PoolCounts,
}

/// One agent's line: its hook, its nudge, its inbox and its bus queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct AgentLine {
    /// The agent.
    pub agent: AgentId,
    /// Its hook.
    pub hook: HookLine,
    /// Its latest nudge; `None` when it has no nudge directory.
    pub nudge: Option<NudgeLine>,
    /// Messages in its inbox.
    pub inbox: usize,
    /// Its bus queue; `None` when it has no bus directory.
    pub bus: Option<BusLine>,
    /// What its directory profile says; `None` when it is not registered
    /// (or its profile is unreadable: `chipset doctor` reports that).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<ProfileLine>,
}

/// An agent's directory profile in a [`Status`]: its roles (the lists it
/// is on), program, model, host, current task, and when chipset last saw
/// it active.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ProfileLine {
    /// Its roles, sorted.
    pub roles: Vec<chipset_directory::Role>,
    /// The program driving it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    /// The model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The host it runs on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// What it says it is working on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// Its latest activity chipset saw (`at`, `source`), computed from
    /// files other channels write; `None` in [`Chipset::agent_status`],
    /// which reads only the agent's own files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_seen: Option<chipset_directory::Seen>,
}

impl ProfileLine {
    fn of(p: &chipset_directory::Profile, last_seen: Option<chipset_directory::Seen>) -> Self {
        ProfileLine {
            roles: p.roles.clone(),
            program: p.program.clone(),
            model: p.model.clone(),
            host: p.host.clone(),
            task: p.task.clone(),
            last_seen,
        }
    }
}

/// An agent's hook in a [`Status`].
///
/// Serializes with a `status` field: `none`, `corrupt` or `unsupported`
/// (with an `error`), or the hook's status with `bead_id`,
/// `last_activity`, `age_ms` and `generation`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HookLine {
    /// No hook file.
    None,
    /// A hook.
    Held {
        /// Its lifecycle state.
        status: HookStatus,
        /// The work item's bead, if it holds one.
        bead_id: Option<BeadId>,
        /// When it last changed or was touched.
        last_activity: Timestamp,
        /// How long ago that was.
        age: Duration,
        /// Its generation (the fencing token).
        generation: u64,
    },
    /// A file that is not a legal hook, and why.
    Corrupt(String),
    /// A hook this version does not know, and what it holds.
    Unsupported(String),
}

/// An agent's latest nudge in a [`Status`].
///
/// Serializes with `pending`: `true` (with `type` and `from`), `false`, or
/// `null` with an `error` when it cannot be read (the last three variants).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NudgeLine {
    /// No unprocessed nudge.
    None,
    /// A nudge waits to be processed.
    Pending {
        /// Its type.
        kind: NudgeType,
        /// Its sender.
        from: String,
    },
    /// Whether one waits is unknown: `latest.json` is there but is not a
    /// nudge; why.
    Corrupt(String),
    /// Whether one waits is unknown: `latest.json` holds a value this
    /// version does not know; what.
    Unsupported(String),
    /// Whether one waits is unknown: the agent's nudge directory could not
    /// be read; why.
    Failed(String),
}

/// An agent's bus queue in a [`Status`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct BusLine {
    /// Unacknowledged events.
    pub pending: usize,
    /// Unacknowledged events per priority name.
    pub by_priority: BTreeMap<&'static str, usize>,
    /// Files in the queue whose names are not events.
    pub unreadable_names: usize,
    /// Whether the agent is present.
    pub presence: PresenceLine,
}

/// An agent's presence on the bus, as a [`BusLine`] shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum PresenceLine {
    /// It never registered.
    Absent,
    /// Seen recently.
    Live,
    /// Not seen for a while.
    Stale,
    /// The presence file is unreadable.
    Unreadable,
    /// The presence file holds a value this version does not know.
    Unsupported,
}

/// The open reminders in a [`Status`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[non_exhaustive]
pub struct ReminderCounts {
    /// How many are open.
    pub open: usize,
    /// How many are open per kind.
    pub by_kind: BTreeMap<String, usize>,
}

impl Chipset {
    /// Returns every agent's line and the open reminders, from the
    /// channels' cheap listings and counts.
    ///
    /// One agent's unreadable nudge directory is shown on its line
    /// ([`NudgeLine::Failed`]) rather than failing the whole view.
    ///
    /// # Errors
    ///
    /// A channel's error when one of its listings fails.
    pub fn status(&self) -> Result<Status> {
        let now = self.now()?;
        let hooks: BTreeMap<AgentId, ReadOutcome<Hook>> = self.hooks().list()?;
        let nudge_agents: BTreeSet<AgentId> = self.nudges().agents()?.into_iter().collect();
        let inbox = self.mail().inbox_counts()?;
        let bus: BTreeMap<AgentId, AgentStatus> = self
            .bus()
            .status()?
            .into_iter()
            .map(|s| (s.agent.clone(), s))
            .collect();
        let reminders = self.reminder_counts()?;
        let profiles: BTreeMap<AgentId, ProfileLine> = self
            .directory()
            .list(&chipset_directory::Filter::default())?
            .items
            .iter()
            .map(|i| {
                (
                    i.profile.name.clone(),
                    ProfileLine::of(&i.profile, Some(i.last_seen)),
                )
            })
            .collect();
        let agents: BTreeSet<&AgentId> = hooks
            .keys()
            .chain(&nudge_agents)
            .chain(inbox.keys())
            .chain(bus.keys())
            .chain(profiles.keys())
            .collect();
        let agents = agents
            .into_iter()
            .map(|agent| AgentLine {
                agent: agent.clone(),
                hook: hooks
                    .get(agent)
                    .map_or(HookLine::None, |read| HookLine::of(now, read)),
                nudge: nudge_agents
                    .contains(agent)
                    .then(|| match self.nudges().receive(agent) {
                        Ok(received) => NudgeLine::of(&received),
                        Err(e) => NudgeLine::Failed(chain(&e)),
                    }),
                inbox: inbox.get(agent).copied().unwrap_or(0),
                bus: bus.get(agent).map(BusLine::of),
                profile: profiles.get(agent).cloned(),
            })
            .collect();
        let leases = self.leases().live()?;
        let pool = self.pool().counts()?;
        Ok(Status {
            agents,
            reminders,
            leases,
            pool,
        })
    }

    /// Returns `agent`'s line and the open reminders, reading only that
    /// agent's files: its nudge and bus queue are always shown (an agent
    /// without a nudge or a queue has none pending).
    ///
    /// # Errors
    ///
    /// A channel's error when one of the agent's files or directories
    /// cannot be read.
    pub fn agent_status(&self, agent: &AgentId) -> Result<AgentReport> {
        let now = self.now()?;
        let hook = HookLine::of(now, &self.hooks().read(agent)?);
        let nudge = NudgeLine::of(&self.nudges().receive(agent)?);
        let bus = self.bus().agent_status(agent)?;
        Ok(AgentReport {
            line: AgentLine {
                agent: agent.clone(),
                hook,
                nudge: Some(nudge),
                inbox: self.mail().inbox_len(agent)?,
                bus: Some(BusLine::of(&bus)),
                profile: match self.directory().read(agent)? {
                    ReadOutcome::Value(p) => Some(ProfileLine::of(&p, None)),
                    _ => None,
                },
            },
            reminders: self.reminder_counts()?,
            pool: self.pool().counts()?,
        })
    }

    fn reminder_counts(&self) -> Result<ReminderCounts> {
        let by_kind = self.reminders().open_counts()?;
        Ok(ReminderCounts {
            open: by_kind.values().sum(),
            by_kind,
        })
    }
}

impl HookLine {
    fn of(now: Timestamp, read: &ReadOutcome<Hook>) -> Self {
        match read {
            ReadOutcome::Missing => HookLine::None,
            ReadOutcome::Corrupt(c) => HookLine::Corrupt(c.to_string()),
            ReadOutcome::Unsupported(u) => HookLine::Unsupported(u.to_string()),
            ReadOutcome::Value(h) => HookLine::Held {
                status: h.state.status(),
                bead_id: h.state.work().map(|w| w.bead_id.clone()),
                last_activity: h.last_activity,
                age: now.since(h.last_activity),
                generation: h.generation,
            },
        }
    }
}

impl Serialize for HookLine {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        match self {
            HookLine::None => map.serialize_entry("status", "none")?,
            HookLine::Corrupt(e) => {
                map.serialize_entry("status", "corrupt")?;
                map.serialize_entry("error", e)?;
            }
            HookLine::Unsupported(e) => {
                map.serialize_entry("status", "unsupported")?;
                map.serialize_entry("error", e)?;
            }
            HookLine::Held {
                status,
                bead_id,
                last_activity,
                age,
                generation,
            } => {
                map.serialize_entry("status", status)?;
                map.serialize_entry("bead_id", bead_id)?;
                map.serialize_entry("last_activity", last_activity)?;
                map.serialize_entry("age_ms", &age.as_millis())?;
                map.serialize_entry("generation", generation)?;
            }
        }
        map.end()
    }
}

impl NudgeLine {
    fn of(received: &ReadOutcome<Received>) -> Self {
        match received {
            ReadOutcome::Value(Received::New(n) | Received::Unsure { nudge: n, .. }) => {
                NudgeLine::Pending {
                    kind: n.kind.clone(),
                    from: n.from.clone(),
                }
            }
            ReadOutcome::Corrupt(c) => NudgeLine::Corrupt(c.to_string()),
            ReadOutcome::Unsupported(u) => NudgeLine::Unsupported(u.to_string()),
            _ => NudgeLine::None,
        }
    }
}

impl Serialize for NudgeLine {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        match self {
            NudgeLine::None => map.serialize_entry("pending", &false)?,
            NudgeLine::Pending { kind, from } => {
                map.serialize_entry("pending", &true)?;
                map.serialize_entry("type", kind)?;
                map.serialize_entry("from", from)?;
            }
            NudgeLine::Corrupt(e) | NudgeLine::Unsupported(e) | NudgeLine::Failed(e) => {
                map.serialize_entry("pending", &())?;
                map.serialize_entry("error", e)?;
            }
        }
        map.end()
    }
}

impl BusLine {
    fn of(status: &AgentStatus) -> Self {
        let (presence, live) = (&status.presence, status.live);
        BusLine {
            pending: status.pending_total(),
            by_priority: Priority::ALL
                .iter()
                .map(|p| (p.as_str(), status.pending_at(*p)))
                .collect(),
            unreadable_names: status.foreign,
            presence: match presence {
                ReadOutcome::Missing => PresenceLine::Absent,
                ReadOutcome::Value(_) if live => PresenceLine::Live,
                ReadOutcome::Value(_) => PresenceLine::Stale,
                ReadOutcome::Corrupt(_) => PresenceLine::Unreadable,
                ReadOutcome::Unsupported(_) => PresenceLine::Unsupported,
            },
        }
    }

    /// Returns the unacknowledged critical events.
    pub fn critical(&self) -> usize {
        self.by_priority
            .get(Priority::Critical.as_str())
            .copied()
            .unwrap_or(0)
    }
}

/// Returns the error and its sources joined by `: `, the way the command
/// line words a failure.
fn chain(error: &dyn StdError) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let next = e.to_string();
        if !text.ends_with(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = e.source();
    }
    text
}
