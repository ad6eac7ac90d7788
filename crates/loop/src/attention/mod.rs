//! What needs an agent now, across every channel, and a wait that returns
//! as soon as anything does.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chipset_backend::Backend;

use chipset_bus::Bus;
use chipset_hook::{HookStatus, Hooks};
use chipset_mail::{Mail, Message};
use chipset_nudge::{KindRegistry, Nudge, Nudges, Received, Reminder, ReminderFilter, Reminders};
use chipset_store::{AgentId, ReadOutcome, StateDir, Timestamp, WatchConfig, WatchTarget};

use crate::channels::Channels;
use crate::error::Result;

mod brief;
mod lease;
mod pool;
mod wake;

pub use brief::{Brief, BriefEntry, BriefItem, WorkKind};
use wake::Watch;

/// How [`Attention`] waits: built as a literal,
/// `AttentionConfig { watch, ..AttentionConfig::default() }`, as the
/// other loops' configs are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AttentionConfig {
    /// Notifications and the rescan interval of the watcher.
    pub watch: WatchConfig,
}

/// Every channel at once, from one agent's point of view: what needs it
/// ([`Attention::brief`]) and a wait until something does ([`Attention::wait`]).
///
/// Reading a brief changes nothing in any channel, with one exception that
/// is the reminder channel's own rule: a snoozed reminder that has come due
/// is reopened by the listing that finds it.
#[derive(Debug, Clone)]
pub struct Attention {
    hooks: Hooks,
    nudges: Nudges,
    mail: Mail,
    bus: Bus,
    reminders: Reminders,
    config: AttentionConfig,
    /// The server the channels are on ([`Channels::with_backend`]);
    /// `None`: the state root's files.
    seam: Option<Arc<dyn Backend>>,
}

impl Attention {
    /// The metadata field of a reminder that names the agent it is for
    /// (`"metadata": {"agent": "polecat-alpha"}`).
    ///
    /// Reminders are scoped to a tenant and a project in the seed, not to an
    /// agent; one that names no agent is everyone's and no one's, so it is
    /// listed by `remind list` and the status screen but wakes no agent.
    pub const REMINDER_AGENT_FIELD: &str = "agent";

    /// Returns attention over `channels` (a [`StateDir`] for every channel
    /// with its default config, or [`Channels`] you configured) and
    /// `reminders`, which should share their state root.
    ///
    /// On channels on a server ([`Channels::with_backend`], issue 30)
    /// attention is on that server too, and `reminders` must be built
    /// `with_backend` on it as well. The leases and the directory profile
    /// it reads are then the server's, its lease window is judged by the
    /// server's clock, and its waits are woken by the server's
    /// notifications (`LISTEN/NOTIFY`, from any host) on the folders of
    /// the agent's places, with
    /// [`WatchConfig::rescan_interval`](chipset_store::WatchConfig::rescan_interval)
    /// as the safety net. The work pool is the server's too. A backend that
    /// is a local directory
    /// ([`Backend::local_state`](chipset_backend::Backend::local_state))
    /// changes nothing: attention reads and watches the files, as on
    /// [`Channels::new`].
    pub fn new(channels: impl Into<Channels>, reminders: Reminders) -> Self {
        let channels = channels.into();
        Attention {
            seam: channels.seam.filter(|b| b.local_state().is_none()),
            hooks: channels.hooks,
            nudges: channels.nudges,
            mail: channels.mail,
            bus: channels.bus,
            reminders,
            config: AttentionConfig::default(),
        }
    }

    /// Returns attention over every channel of `state` with default
    /// settings and the seed's preset reminder kinds.
    pub fn from_state(state: &StateDir) -> Self {
        Self::new(
            state.clone(),
            Reminders::new(state.clone(), KindRegistry::preset()),
        )
    }

    /// Returns this attention with `config`.
    #[must_use]
    pub fn with_config(mut self, config: AttentionConfig) -> Self {
        self.config = config;
        self
    }

    /// Returns the state root the channels share.
    #[cfg(feature = "tokio")]
    pub(crate) fn state_root(&self) -> &std::path::Path {
        self.hooks.state().root()
    }

    /// Returns what needs `agent` now.
    ///
    /// # Errors
    ///
    /// A channel's error when a directory cannot be listed or a file cannot
    /// be opened. A file that is there but unreadable is not an error: it
    /// is an item with [`BriefItem::unreadable`] set, never "nothing there".
    pub fn brief(&self, agent: &AgentId) -> Result<Brief> {
        Ok(self.look(agent, self.pool_present())?.brief)
    }

    /// Reads `agent`'s brief, and when it next changes with no file
    /// changing. `pool` says whether the pool's directory exists (one
    /// `stat`, made by the caller): without it the pool costs nothing more.
    fn look(&self, agent: &AgentId, pool: bool) -> Result<Look> {
        let mut entries = Vec::new();
        entries.extend(self.hook_entry(agent)?);
        entries.extend(self.nudge_entry(agent)?);
        entries.extend(self.mail_entry(agent)?);
        entries.extend(self.bus_entry(agent)?);
        entries.extend(self.reminder_entry(agent)?);
        let (lease, lease_at) = self.lease_entry(agent)?;
        entries.extend(lease);
        let (work, work_at) = if pool {
            self.pool_entry(agent)?
        } else {
            (None, None)
        };
        entries.extend(work);
        brief::flatten(&mut entries);
        let wake_at = match (lease_at, work_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Ok(Look {
            brief: Brief {
                agent: agent.clone(),
                entries,
            },
            wake_at,
        })
    }

    /// Returns the places whose changes can change `agent`'s brief. With
    /// `pool` (the pool's directory exists) they take in the pool, every
    /// hook (a completed dependency makes an item ready) and the agent's
    /// directory profile (its roles choose the items); a wait watching
    /// without the pool watches again when it appears.
    /// The agent's inbox is not among them: [`Attention::mail_target`]
    /// adds it, on the mail's own root.
    fn targets_with(&self, agent: &AgentId, pool: bool) -> Vec<WatchTarget> {
        let [open, snoozed] = self.reminders.index_dirs();
        let state = self.hooks.state();
        let mut targets = vec![
            WatchTarget::File(self.hooks.path(agent)),
            WatchTarget::Dir(self.nudges.agent_dir(agent)),
            WatchTarget::Dir(self.bus.queue_dir(agent)),
            WatchTarget::Tree(open),
            WatchTarget::Tree(snoozed),
            WatchTarget::Dir(state.channel(chipset_lease::Leases::CHANNEL)),
            WatchTarget::Dir(self.pool_dir()),
        ];
        if pool {
            targets.push(WatchTarget::Dir(self.hooks.dir().clone()));
            targets.push(WatchTarget::File(self.directory().path(agent)));
        }
        targets
    }

    /// Returns the root of `agent`'s inbox and the target to watch it by:
    /// the state root, or a mail folder outside it ([`Channels::with_mail`]).
    fn mail_target(&self, agent: &AgentId) -> (&StateDir, WatchTarget) {
        (
            self.mail.state(),
            WatchTarget::Dir(self.mail.inbox_dir(agent)),
        )
    }

    /// Returns a watch on `agent`'s brief: [`BriefWatch::next`] blocks until
    /// the brief differs from the one it last returned.
    ///
    /// # Errors
    ///
    /// [`Error::Store`](crate::Error::Store) when a directory on the way to
    /// one of the agent's places is a symlink or not a directory.
    pub fn watch(&self, agent: &AgentId) -> Result<BriefWatch> {
        let pool = self.pool_present();
        let watcher = self.watcher(agent, pool)?;
        Ok(BriefWatch {
            attention: self.clone(),
            agent: agent.clone(),
            watcher,
            pool,
            last: None,
        })
    }

    fn watcher(&self, agent: &AgentId, pool: bool) -> Result<Watch> {
        self.watch_places(agent, pool)
    }

    /// How long the next wait of the watcher may last: what is left of
    /// `deadline`, and no later than `wake_at`, when the brief changes with
    /// no file changing (a lease drifting into its warning window, a
    /// deferred item becoming ready).
    fn slice(&self, deadline: Deadline, wake_at: Option<Timestamp>) -> Duration {
        let left = deadline.left();
        match wake_at {
            // At least a millisecond: timestamps are in milliseconds, and a
            // wait of zero would spin until the clock ticks.
            Some(at) => left.min(
                at.since(self.hooks.state().now())
                    .max(Duration::from_millis(1)),
            ),
            None => left,
        }
    }

    /// Returns as soon as something needs `agent` (at once if something
    /// does already), with what it is; or an empty brief when `timeout`
    /// passes first (`Duration::MAX` waits for ever).
    ///
    /// Wakes within milliseconds of the change through directory
    /// notifications (on a server, its `LISTEN/NOTIFY`: see
    /// [`Attention::new`]), and within
    /// [`WatchConfig::rescan_interval`] when a notification is lost.
    ///
    /// # Errors
    ///
    /// As [`Attention::watch`] and [`Attention::brief`].
    pub fn wait(&self, agent: &AgentId, timeout: Duration) -> Result<Brief> {
        self.wait_until(agent, Deadline::after(timeout))
    }

    fn wait_until(&self, agent: &AgentId, deadline: Deadline) -> Result<Brief> {
        // Watch first, read second: nothing changed in between is missed.
        let mut pool = self.pool_present();
        let mut watcher = self.watcher(agent, pool)?;
        loop {
            let look = self.look(agent, pool)?;
            if !look.brief.is_empty() {
                return Ok(look.brief);
            }
            let timed_out = watcher.wait(self.slice(deadline, look.wake_at))?;
            if timed_out && deadline.passed() {
                return self.brief(agent);
            }
            // The pool appeared: watch it (and the hooks) before reading.
            if !pool && self.pool_present() {
                pool = true;
                watcher = self.watcher(agent, pool)?;
            }
        }
    }

    fn hook_entry(&self, agent: &AgentId) -> Result<Option<BriefEntry>> {
        Ok(match self.hooks.read(agent)? {
            ReadOutcome::Missing => None,
            ReadOutcome::Value(h) if h.state.status() == HookStatus::Pending => {
                let work = h.state.work().map(|w| {
                    let by = w
                        .assigned_by
                        .as_ref()
                        .map(|b| format!(" (assigned by {b})"))
                        .unwrap_or_default();
                    BriefItem {
                        id: w.bead_id.to_string(),
                        from: w.assigned_by.as_ref().map(ToString::to_string),
                        priority: None,
                        at: Some(w.assigned_at),
                        summary: format!("pending work: {}{by}", w.title),
                        unreadable: false,
                    }
                });
                work.map(|top| BriefEntry {
                    kind: WorkKind::Hook,
                    count: 1,
                    top,
                    more: Vec::new(),
                })
            }
            ReadOutcome::Value(_) => None,
            ReadOutcome::Corrupt(c) => Some(unreadable(WorkKind::Hook, 1, &c)),
            ReadOutcome::Unsupported(u) => Some(unsupported(WorkKind::Hook, 1, &u)),
        })
    }

    fn nudge_entry(&self, agent: &AgentId) -> Result<Option<BriefEntry>> {
        let nudge = |n: &Nudge| BriefEntry {
            kind: WorkKind::Nudge,
            count: 1,
            top: BriefItem {
                id: n
                    .id
                    .as_ref()
                    .map_or_else(|| n.timestamp.to_string(), ToString::to_string),
                from: Some(n.from.clone()),
                priority: Some(n.kind.to_string()),
                at: Some(n.timestamp),
                summary: format!(
                    "{} from {}{}: {}",
                    n.kind,
                    n.from,
                    if n.requires_response {
                        " (answer required)"
                    } else {
                        ""
                    },
                    n.message
                ),
                unreadable: false,
            },
            more: Vec::new(),
        };
        Ok(match self.nudges.receive(agent)? {
            ReadOutcome::Value(Received::New(n) | Received::Unsure { nudge: n, .. }) => {
                Some(nudge(&n))
            }
            ReadOutcome::Corrupt(c) => Some(unreadable(WorkKind::Nudge, 1, &c)),
            ReadOutcome::Unsupported(u) => Some(unsupported(WorkKind::Nudge, 1, &u)),
            _ => None,
        })
    }

    fn mail_entry(&self, agent: &AgentId) -> Result<Option<BriefEntry>> {
        let messages = match self.mail.inbox(agent) {
            Ok(m) => m,
            Err(chipset_mail::Error::Corrupt(c)) => {
                let count = self.mail.inbox_len(agent)?.max(1);
                return Ok(Some(unreadable(WorkKind::Mail, count, &c)));
            }
            Err(e) => {
                if let Some(u) = e.unsupported() {
                    let count = self.mail.inbox_len(agent)?.max(1);
                    return Ok(Some(unsupported(WorkKind::Mail, count, u)));
                }
                return Err(e.into());
            }
        };
        // Urgent first, then oldest (ids sort by time).
        let Some(top) = messages
            .iter()
            .min_by(|a, b| (a.priority, a.id.as_str()).cmp(&(b.priority, b.id.as_str())))
        else {
            return Ok(None);
        };
        Ok(Some(BriefEntry {
            kind: WorkKind::Mail,
            count: messages.len(),
            top: mail_item(top),
            more: Vec::new(),
        }))
    }

    fn bus_entry(&self, agent: &AgentId) -> Result<Option<BriefEntry>> {
        let pending = self.bus.pending(agent)?;
        let count = pending.events.len() + pending.unreadable.len();
        // The queue lists critical first, oldest first within a priority.
        if let Some(e) = pending.events.first() {
            return Ok(Some(BriefEntry {
                kind: WorkKind::Bus,
                count,
                top: BriefItem {
                    id: e.id.to_string(),
                    from: Some(e.source.to_owned()),
                    priority: Some(e.priority.to_string()),
                    at: Some(e.created_at),
                    summary: format!("{} {} from {}", e.priority, e.kind, e.source),
                    unreadable: false,
                },
                more: Vec::new(),
            }));
        }
        Ok(pending.unreadable.first_key_value().map(|(path, problem)| {
            let summary = match problem {
                chipset_bus::Problem::Corrupt(reason) => {
                    format!("unreadable event file ({reason}); see `chipset doctor`")
                }
                other => format!("unusable event file ({other:?}); see `chipset doctor`"),
            };
            bad_file(WorkKind::Bus, count, path, summary)
        }))
    }

    fn reminder_entry(&self, agent: &AgentId) -> Result<Option<BriefEntry>> {
        let listing = self.reminders.list(&ReminderFilter::default())?;
        let mine: Vec<&Reminder> = listing
            .items
            .iter()
            .filter(|r| {
                r.metadata
                    .get(Self::REMINDER_AGENT_FIELD)
                    .and_then(|v| v.as_str())
                    == Some(agent.as_str())
            })
            .collect();
        // Listed oldest first; the most severe (nudge before info) comes first.
        let Some(top) = mine.iter().max_by(|a, b| {
            a.severity
                .cmp(&b.severity)
                .then_with(|| b.created_at.cmp(&a.created_at))
        }) else {
            // An unreadable or unsupported reminder file may be for this
            // agent: fail closed.
            let bad = listing.corrupt.len() + listing.unsupported.len();
            return Ok(
                match (listing.corrupt.first(), listing.unsupported.first()) {
                    (Some(c), _) => Some(unreadable(WorkKind::Reminder, bad, c)),
                    (None, Some(u)) => Some(unsupported(WorkKind::Reminder, bad, u)),
                    (None, None) => None,
                },
            );
        };
        Ok(Some(BriefEntry {
            kind: WorkKind::Reminder,
            count: mine.len(),
            top: BriefItem {
                id: top.id.to_string(),
                from: None,
                priority: Some(severity_name(top)),
                at: Some(top.created_at),
                summary: format!(
                    "{} {}:{}: {}",
                    top.kind, top.source_type, top.source_id, top.message
                ),
                unreadable: false,
            },
            more: Vec::new(),
        }))
    }
}

fn severity_name(r: &Reminder) -> String {
    serde_json::to_value(r.severity)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn mail_item(m: &Message) -> BriefItem {
    BriefItem {
        id: m.id.to_string(),
        from: Some(m.from.to_string()),
        priority: Some(m.priority.to_string()),
        at: Some(m.created_at),
        summary: format!("{} {} from {}: {}", m.priority, m.kind, m.from, m.subject),
        unreadable: false,
    }
}

fn unreadable(kind: WorkKind, count: usize, c: &chipset_store::Corruption) -> BriefEntry {
    bad_file(
        kind,
        count,
        &c.path,
        format!("unreadable file ({}); see `chipset doctor`", c.reason),
    )
}

/// A file holding a value this version does not know: something may need
/// the agent behind it, so it is an item, never nothing.
fn unsupported(kind: WorkKind, count: usize, u: &chipset_store::Unsupported) -> BriefEntry {
    bad_file(
        kind,
        count,
        &u.path,
        format!("file holding {}, unsupported by this version", u.what),
    )
}

fn bad_file(kind: WorkKind, count: usize, path: &std::path::Path, summary: String) -> BriefEntry {
    BriefEntry {
        kind,
        count,
        top: BriefItem {
            id: path.display().to_string(),
            from: None,
            priority: None,
            at: None,
            summary,
            unreadable: true,
        },
        more: Vec::new(),
    }
}

/// When a wait ends (`at`; `None` is never: a timeout too large for an
/// `Instant`), and the longest single wait handed to the watcher on the way.
#[derive(Debug, Clone, Copy)]
struct Deadline {
    at: Option<Instant>,
    slice: Duration,
}

impl Deadline {
    /// The longest single wait handed to the watcher.
    const SLICE: Duration = Duration::from_secs(3600);

    fn after(timeout: Duration) -> Self {
        Self::sliced(timeout, Self::SLICE)
    }

    /// A deadline whose wait is handed out in slices of `slice` (tests use a
    /// short one to see a wait go on past a slice's end).
    fn sliced(timeout: Duration, slice: Duration) -> Self {
        Deadline {
            at: Instant::now().checked_add(timeout),
            slice,
        }
    }

    fn left(self) -> Duration {
        self.at.map_or(self.slice, |d| {
            d.saturating_duration_since(Instant::now()).min(self.slice)
        })
    }

    fn passed(self) -> bool {
        self.at.is_some_and(|d| Instant::now() >= d)
    }
}

/// A brief, and when it next changes with no file changing.
struct Look {
    brief: Brief,
    wake_at: Option<Timestamp>,
}

/// A watch on one agent's brief, made by [`Attention::watch`].
#[derive(Debug)]
pub struct BriefWatch {
    attention: Attention,
    agent: AgentId,
    watcher: Watch,
    /// Whether the watcher watches the pool (its directory existed).
    pool: bool,
    last: Option<Brief>,
}

impl BriefWatch {
    /// Returns the brief last returned by [`BriefWatch::next`] (or, before
    /// the first brief was returned, the empty one it found).
    #[cfg(feature = "tokio")]
    pub(crate) fn last(&self) -> Option<&Brief> {
        self.last.as_ref()
    }

    /// Blocks until the agent's brief differs from the one this watch last
    /// returned (the first call returns the current brief at once unless it
    /// is empty), and returns it; `None` when `timeout` passes first.
    ///
    /// Every change is a new brief: work arriving, and work going away
    /// (a brief that became empty is returned too).
    ///
    /// # Errors
    ///
    /// As [`Attention::brief`].
    pub fn next(&mut self, timeout: Duration) -> Result<Option<Brief>> {
        self.next_until(Deadline::after(timeout))
    }

    fn next_until(&mut self, deadline: Deadline) -> Result<Option<Brief>> {
        loop {
            let Look { brief, wake_at } = self.attention.look(&self.agent, self.pool)?;
            let changed = match &self.last {
                None => !brief.is_empty(),
                Some(last) => *last != brief,
            };
            if changed {
                self.last = Some(brief.clone());
                return Ok(Some(brief));
            }
            if self.last.is_none() {
                self.last = Some(brief);
            }
            let timed_out = self.watcher.wait(self.attention.slice(deadline, wake_at))?;
            if timed_out && deadline.passed() {
                return Ok(None);
            }
            if !self.pool && self.attention.pool_present() {
                self.pool = true;
                self.watcher = self.attention.watcher(&self.agent, true)?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::thread;

    use chipset_mail::{Mail, NewMessage};
    use chipset_store::{StateDir, TaskId, WatchConfig};
    use chipset_testkit::TempState;

    use super::*;

    /// Long enough that only a notification or a slice's end wakes a wait.
    fn notified() -> AttentionConfig {
        AttentionConfig {
            watch: WatchConfig {
                notify: true,
                rescan_interval: Duration::from_secs(600),
            },
        }
    }

    /// A deadline hands out what is left, at most a slice; it has passed
    /// once its time is reached; a timeout too large for an `Instant` never
    /// passes and waits a slice at a time.
    #[test]
    fn a_deadline_hands_out_what_is_left_a_slice_at_most() {
        let slice = Duration::from_millis(20);
        assert_eq!(
            Deadline::sliced(Duration::from_secs(20), slice).left(),
            slice
        );
        let now = Deadline::after(Duration::ZERO);
        assert_eq!(now.left(), Duration::ZERO);
        assert!(now.passed());
        let never = Deadline::after(Duration::MAX);
        assert_eq!(never.left(), Deadline::SLICE);
        assert!(!never.passed());
        let soon = Deadline::after(Duration::from_secs(600));
        assert!(!soon.passed());
    }

    /// Twenty seconds in slices of 20 ms.
    fn sliced() -> Deadline {
        Deadline::sliced(Duration::from_secs(20), Duration::from_millis(20))
    }

    fn alpha() -> AgentId {
        AgentId::new("alpha").unwrap()
    }

    fn mail_for_alpha(state: &StateDir) {
        Mail::new(state.clone())
            .send(&NewMessage::notify(
                AgentId::new("mayor").unwrap(),
                alpha(),
                TaskId::new("t1").unwrap(),
                "status-update",
                "hello",
            ))
            .unwrap();
    }

    /// A wait longer than one slice of the watcher's wait goes on when the
    /// slice ends (every hour, in production), until work or its deadline.
    #[test]
    fn a_wait_goes_on_past_the_end_of_a_slice() {
        let tmp = TempState::new();
        let attention = Attention::from_state(&tmp.state).with_config(notified());
        let waiter = {
            let attention = attention.clone();
            thread::spawn(move || attention.wait_until(&alpha(), sliced()).unwrap())
        };
        thread::sleep(Duration::from_millis(300));
        mail_for_alpha(&tmp.state);
        assert_eq!(waiter.join().unwrap().kinds(), vec![WorkKind::Mail]);
    }

    /// The same for a watch's next brief.
    #[test]
    fn a_watch_goes_on_past_the_end_of_a_slice() {
        let tmp = TempState::new();
        let attention = Attention::from_state(&tmp.state).with_config(notified());
        let mut watch = attention.watch(&alpha()).unwrap();
        let waiter = thread::spawn(move || watch.next_until(sliced()).unwrap());
        thread::sleep(Duration::from_millis(300));
        mail_for_alpha(&tmp.state);
        let brief = waiter.join().unwrap().expect("a brief, not a timeout");
        assert_eq!(brief.kinds(), vec![WorkKind::Mail]);
    }
}
