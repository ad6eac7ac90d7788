//! Persistent reminders for open obligations: the I/O shell, split by concept.
//!
//! - `mod.rs` (this file): the public request and answer types and
//!   [`Reminders`]' write path (open, resolve, snooze), each change made
//!   under the key's stripe lock.
//! - `maintain.rs`: the snooze sweep and the doctor.
//! - `rules.rs`: the pure rules those changes follow (what a resolution
//!   leaves, when a snooze is due, how a snoozed reminder reopens, which
//!   reminders a filter keeps and in what order).
//! - `query.rs`: the read side (listings, lookups by id, counts)
//!   and the index scans the write path and the doctor share.
//! - `seam.rs`: where the records live, the state root's files or a
//!   storage backend ([`Reminders::with_backend`], issue 30).

use chipset_store::StatePath;
use std::sync::Arc;
use std::time::Duration;

use chipset_backend::Backend;
use chipset_store::{ReadOutcome, SortableId, StateDir, Timestamp};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::format::{Reminder, ReminderId, Resolution, Severity};
use crate::key::{ReminderKey, check_text};
use crate::kinds::{KindRegistry, check_severity};

mod maintain;
mod query;
mod rules;
mod seam;

use query::Located;
pub(crate) use query::parse_reminder;
use rules::{Change, is_due, reopened};
use seam::{Moved, StripeGuard};

/// `reminders/open/{kind}/{source_type}/{escaped source id}.json`: open reminders.
pub(crate) const OPEN_DIR: &str = "open";
/// `reminders/snoozed/{kind}/{source_type}/{escaped source id}.json`: snoozed reminders.
pub(crate) const SNOOZED_DIR: &str = "snoozed";
/// `reminders/history/{id}.json`: resolved reminders (never deleted).
pub(crate) const HISTORY_DIR: &str = "history";
/// `reminders/locks/`: the lock files the keys are spread over.
pub(crate) const LOCKS_DIR: &str = "locks";
/// The seed's manual resolution verb, the default [`ReminderConfig::manual_verb`].
pub(crate) const DEFAULT_MANUAL_VERB: &str = "prism_nudge.resolve";

/// How reminders are resolved by hand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReminderConfig {
    /// The `resolved_by_verb` written by [`Reminders::resolve`] and
    /// [`Reminders::snooze`]. Default `prism_nudge.resolve`.
    pub manual_verb: String,
}

impl Default for ReminderConfig {
    fn default() -> Self {
        ReminderConfig {
            manual_verb: DEFAULT_MANUAL_VERB.to_owned(),
        }
    }
}

/// A reminder to open: what the writer supplies. The id, `created_at` and
/// the resolution columns are filled in by [`Reminders::open`], which
/// checks every field.
///
/// Plain data: set the fields, the rest from [`Default`] (severity
/// `nudge`, the kind's default actions, no metadata).
///
/// ```
/// use chipset_nudge::NewReminder;
/// let new = NewReminder {
///     tenant_id: "acme".into(),
///     kind: "spec_draft".into(),
///     source_type: "spec".into(),
///     source_id: "parser-spec".into(),
///     message: "Finish the parser spec".into(),
///     ..NewReminder::default()
/// };
/// assert!(new.actions.is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewReminder {
    /// Organisation scope.
    pub tenant_id: String,
    /// Project scope; `None` for organisation-level reminders.
    pub project_id: Option<String>,
    /// A registered kind: with the source type and the source id, the key
    /// of which at most one reminder is open (or snoozed) at a time.
    pub kind: String,
    /// The kind's canonical source type.
    pub source_type: String,
    /// The entity it refers to: at most 64 characters, no control
    /// characters.
    pub source_id: String,
    /// Human-readable prompt.
    pub message: String,
    /// Offered actions; empty takes the kind's defaults.
    pub actions: Vec<String>,
    /// `info` or `nudge` (default); `blocking` is refused.
    pub severity: Severity,
    /// Kind-specific extras.
    pub metadata: Map<String, Value>,
}

/// What [`Reminders::open`] found or made.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Opened {
    /// A new open reminder.
    New(Reminder),
    /// One was open for the key already (possibly just reopened from an
    /// expired snooze); nothing was written for this request.
    Existing(Reminder),
    /// The key's reminder is snoozed and not due yet; it reopens when due.
    Snoozed(Reminder),
}

impl Opened {
    /// Returns the reminder.
    pub fn reminder(&self) -> &Reminder {
        match self {
            Opened::New(r) | Opened::Existing(r) | Opened::Snoozed(r) => r,
        }
    }
}

/// A manual resolution (seed §6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ManualResolution {
    /// Done.
    Completed,
    /// Dismissed.
    Ignored,
}

impl From<ManualResolution> for Resolution {
    fn from(m: ManualResolution) -> Self {
        match m {
            ManualResolution::Completed => Resolution::Completed,
            ManualResolution::Ignored => Resolution::Ignored,
        }
    }
}

/// Which reminders [`Reminders::list`] returns; the default is every open
/// one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReminderFilter {
    /// Only this tenant's.
    pub tenant_id: Option<String>,
    /// Only this project's.
    pub project_id: Option<String>,
    /// Only this kind.
    pub kind: Option<String>,
    /// Every reminder ever opened (open, snoozed and resolved), which reads
    /// the whole history; `false` (the default): the open ones, which
    /// reads only the open and snoozed indexes.
    pub history: bool,
}

/// The reminder channel under `reminders/`.
///
/// Cheap to clone. See the crate docs for the layout and the rules.
#[derive(Debug, Clone)]
pub struct Reminders {
    state: StateDir,
    registry: Arc<KindRegistry>,
    config: ReminderConfig,
    /// The backend the records live on, when it is not the directory
    /// `state` (whose files are written as they always were).
    seam: Option<Arc<dyn Backend>>,
}

impl Reminders {
    /// Returns the channel on `state`, allowing the kinds in `registry`.
    pub fn new(state: StateDir, registry: KindRegistry) -> Self {
        Self::with_config(state, registry, ReminderConfig::default())
    }

    /// Returns the channel with `config`.
    pub fn with_config(state: StateDir, registry: KindRegistry, config: ReminderConfig) -> Self {
        Reminders {
            state,
            registry: Arc::new(registry),
            config,
            seam: None,
        }
    }

    /// Returns the channel whose records (the open and snoozed indexes and
    /// the history) live on `backend`, a PostgreSQL server (issue 30): the
    /// same rules, each change under the key's stripe lock, which is the
    /// server's lock; due times on the server's clock; the doctor checks
    /// the rows. `state` is the local root, whose clock makes ids.
    /// An index walk lists the registered kinds' folders (a server has no
    /// folders to list).
    pub fn with_backend(
        state: StateDir,
        registry: KindRegistry,
        config: ReminderConfig,
        backend: Arc<dyn Backend>,
    ) -> Self {
        Reminders {
            state,
            registry: Arc::new(registry),
            config,
            seam: Some(backend),
        }
    }

    /// Returns the state root.
    pub fn state(&self) -> &StateDir {
        &self.state
    }

    /// Returns the kinds allowed.
    pub fn registry(&self) -> &KindRegistry {
        &self.registry
    }

    fn root(&self) -> StatePath {
        self.state.channel(crate::Reminders::CHANNEL)
    }

    /// Returns where the key's reminder lives while open.
    pub(crate) fn open_path(&self, key: &ReminderKey) -> StatePath {
        self.index_path(OPEN_DIR, key)
    }

    /// Returns where the key's reminder lives while snoozed.
    pub(crate) fn snoozed_path(&self, key: &ReminderKey) -> StatePath {
        self.index_path(SNOOZED_DIR, key)
    }

    /// Returns where a resolved reminder lives.
    pub(crate) fn history_path(&self, id: &ReminderId) -> StatePath {
        self.root().join_static(HISTORY_DIR).join_id(id, ".json")
    }

    fn index_path(&self, area: &'static str, key: &ReminderKey) -> StatePath {
        // A key's kind and source type are `a-z0-9_` names and its file name
        // is escaped (see `key.rs`): each is always one safe segment.
        let safe = "a reminder key's parts are safe path segments";
        self.root()
            .join_static(area)
            .join(key.kind())
            .and_then(|p| p.join(key.source_type()))
            .and_then(|p| p.join(key.file_name()))
            .expect(safe)
    }

    /// Returns the open and snoozed indexes, `reminders/open/` and
    /// `reminders/snoozed/`: the trees whose changes change which reminders
    /// are open (for a watcher).
    pub fn index_dirs(&self) -> [StatePath; 2] {
        [
            self.root().join_static(OPEN_DIR),
            self.root().join_static(SNOOZED_DIR),
        ]
    }

    fn stripe_path(&self, stripe: u64) -> Result<StatePath> {
        Ok(self
            .root()
            .join_static(LOCKS_DIR)
            .join(format!("stripe-{stripe:02}"))?)
    }

    fn lock_key(&self, key: &ReminderKey) -> Result<StripeGuard> {
        self.lock_stripe(key.stripe())
    }

    fn key_of(r: &Reminder) -> Result<ReminderKey> {
        ReminderKey::new(
            r.kind.as_str(),
            r.source_type.as_str(),
            r.source_id.as_str(),
        )
    }

    fn new_id(&self) -> ReminderId {
        ReminderId::new(String::from(SortableId::generate(
            self.state.clock().as_ref(),
        )))
        .expect("a sortable id is a valid segment")
    }

    fn read(&self, path: &StatePath) -> Result<Option<Reminder>> {
        match self.read_at(path)? {
            ReadOutcome::Missing => Ok(None),
            ReadOutcome::Value(r) => Ok(Some(r)),
            ReadOutcome::Corrupt(c) => Err(Error::Corrupt(c)),
            ReadOutcome::Unsupported(u) => Err(chipset_store::Error::from(u).into()),
        }
    }

    /// Opens a reminder for (kind, source type, source id) unless one is open
    /// or snoozed for that key already: idempotent, and race-free across
    /// processes (the check and the create happen under the key's lock, and
    /// the create never overwrites).
    ///
    /// # Errors
    ///
    /// [`Error::UnknownKind`], [`Error::SourceTypeMismatch`],
    /// [`Error::BlockingSeverity`], [`Error::EmptySourceId`],
    /// [`Error::InvalidField`] for a bad request, a message or metadata
    /// longer than 64 KiB among them (nothing is written);
    /// [`Error::Corrupt`] when the key's file is unreadable (no duplicate is
    /// written over it); [`Error::Store`] on I/O failure.
    pub fn open(&self, new: &NewReminder) -> Result<Opened> {
        // The key first: a malformed name is refused as such, not as an
        // unregistered kind.
        let key = ReminderKey::new(
            new.kind.as_str(),
            new.source_type.as_str(),
            new.source_id.as_str(),
        )?;
        let spec = self.registry.check(&new.kind, &new.source_type)?;
        check_severity(new.severity)?;
        check_text("tenant id", &new.tenant_id, 128)?;
        crate::key::check_message("message", &new.message)?;
        let metadata = serde_json::Value::Object(new.metadata.clone()).to_string();
        crate::key::check_message("metadata", &metadata)?;
        if let Some(p) = &new.project_id {
            check_text("project id", p, 128)?;
        }
        let actions = if new.actions.is_empty() {
            spec.default_actions.clone()
        } else {
            new.actions.clone()
        };
        let _guard = self.lock_key(&key)?;
        self.settle(&key)?;
        let now = self.now()?;
        if let Some(snoozed) = self.read(&self.snoozed_path(&key))? {
            if is_due(&snoozed, now) {
                return Ok(Opened::Existing(self.reopen_locked(&key, &snoozed, now)?));
            }
            return Ok(Opened::Snoozed(snoozed));
        }
        let path = self.open_path(&key);
        if let Some(existing) = self.read(&path)? {
            return Ok(Opened::Existing(existing));
        }
        let reminder = Reminder {
            id: self.new_id(),
            tenant_id: new.tenant_id.clone(),
            project_id: new.project_id.clone(),
            kind: new.kind.clone(),
            source_type: new.source_type.clone(),
            source_id: new.source_id.clone(),
            message: new.message.clone(),
            actions,
            severity: new.severity,
            created_at: now,
            resolved_at: None,
            resolved_by_verb: None,
            resolution: None,
            resolution_note: None,
            snooze_until: None,
            metadata: new.metadata.clone(),
            extra: Map::new(),
        };
        if self.create_at(&path, &reminder)? {
            return Ok(Opened::New(reminder));
        }
        // Only a writer that bypassed the lock can get here; its reminder wins.
        match self.read(&path)? {
            Some(existing) => Ok(Opened::Existing(existing)),
            None => Err(Error::Store(chipset_store::Error::AlreadyExists {
                path: path.into_path_buf(),
            })),
        }
    }

    /// Auto-resolves the key's reminder when `verb` fires (seed §6.1):
    /// resolution `auto_cleared`, `resolved_by_verb` = `verb`. Only the
    /// reminder with exactly this (kind, source type, source id) is touched.
    /// A snoozed one is cleared too (its snooze would otherwise reopen an
    /// obligation that is gone): it is reopened and cleared at once, as a new
    /// record naming it in `reopened_from`. Returns the resolved reminder, or
    /// `None` when nothing was open or snoozed for the key.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownKind`], [`Error::SourceTypeMismatch`],
    /// [`Error::NotAResolvingVerb`], [`Error::EmptySourceId`],
    /// [`Error::InvalidField`]; [`Error::Corrupt`] when the key's file is
    /// unreadable; [`Error::Store`] on I/O failure.
    pub fn auto_resolve(
        &self,
        kind: &str,
        source_type: &str,
        source_id: &str,
        verb: &str,
    ) -> Result<Option<Reminder>> {
        let spec = self.registry.check(kind, source_type)?;
        if !spec.is_resolved_by(verb) {
            return Err(Error::NotAResolvingVerb {
                kind: kind.to_owned(),
                verb: verb.to_owned(),
                resolving: spec.resolving_verbs.clone(),
            });
        }
        let key = ReminderKey::new(kind, source_type, source_id)?;
        let _guard = self.lock_key(&key)?;
        let change = Change {
            resolution: Resolution::AutoCleared,
            verb: verb.to_owned(),
            note: None,
            snooze_for: None,
        };
        self.resolve_locked(&key, None, &change)
    }

    /// Resolves reminder `id` by hand (seed §6.2) with an optional note.
    /// Resolving a snoozed reminder reopens and resolves it at once, as a new
    /// record naming it in `reopened_from`.
    ///
    /// **Commit point:** the replace of the reminder's index file by the
    /// resolved record (for a snoozed one, the create of the reopened and
    /// resolved record); the move into the history after it is follow-up,
    /// finished by the next operation on the key if it fails. Resolving
    /// again the same way (same resolution and note) is a retry and returns
    /// the resolved reminder as success; for a snoozed reminder, that is the
    /// new record that names it in `reopened_from`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidField`] for a note over 64 KiB (nothing is written);
    /// [`Error::ReminderNotFound`]; [`Error::AlreadyResolved`] when it was
    /// resolved in another way; [`Error::Corrupt`] when its file is unreadable, or when it
    /// is not found and an unreadable index file could have held it;
    /// [`Error::Store`] on I/O failure.
    pub fn resolve(
        &self,
        id: &ReminderId,
        resolution: ManualResolution,
        note: Option<String>,
    ) -> Result<Reminder> {
        self.change_by_id(
            id,
            Change {
                resolution: resolution.into(),
                verb: self.config.manual_verb.clone(),
                note,
                snooze_for: None,
            },
        )
    }

    /// Snoozes reminder `id` for `duration` (seed §6.2, `snooze_hours`):
    /// resolved as `snoozed` with `snooze_until` = now + `duration`. When that
    /// time has come, the next read reopens it as a new reminder whose
    /// `metadata.reopened_from` is this one's id; until then opening its key
    /// again is a no-op. Snoozing it again for as long with the same note
    /// before it is due (a retry) returns the snoozed reminder as it is, its
    /// `snooze_until` unchanged; another duration snoozes it anew.
    ///
    /// # Errors
    ///
    /// As [`Reminders::resolve`].
    pub fn snooze(
        &self,
        id: &ReminderId,
        duration: Duration,
        note: Option<String>,
    ) -> Result<Reminder> {
        self.change_by_id(
            id,
            Change {
                resolution: Resolution::Snoozed,
                verb: self.config.manual_verb.clone(),
                note,
                snooze_for: Some(duration),
            },
        )
    }

    fn change_by_id(&self, id: &ReminderId, change: Change) -> Result<Reminder> {
        if let Some(note) = &change.note {
            crate::key::check_message("note", note)?;
        }
        let key = match self.locate(id)? {
            Located::Live(key) => key,
            // A retry of a change that applied: success, nothing changes.
            Located::History(reminder) if change.applied_to(&reminder) => return Ok(*reminder),
            Located::History(reminder) => {
                return match self.superseding(&reminder, &change)? {
                    Some(r) => Ok(r),
                    None => Err(Error::AlreadyResolved { reminder }),
                };
            }
            Located::Nowhere => return Err(Error::ReminderNotFound { id: id.to_string() }),
        };
        let done = {
            let _guard = self.lock_key(&key)?;
            self.resolve_locked(&key, Some(id), &change)?
        };
        match done {
            Some(r) => Ok(r),
            // Another process resolved it between the scan and the lock.
            None => match self.read(&self.history_path(id))? {
                Some(reminder) if change.applied_to(&reminder) => Ok(reminder),
                Some(reminder) => match self.superseding(&reminder, &change)? {
                    Some(r) => Ok(r),
                    None => Err(Error::AlreadyResolved {
                        reminder: Box::new(reminder),
                    }),
                },
                None => Err(Error::ReminderNotFound { id: id.to_string() }),
            },
        }
    }

    /// Returns the record that took over from `snoozed` when a change
    /// reopened it under a new id (naming it in `reopened_from`), if that
    /// record carries `change`: what a retry of resolving or snoozing a
    /// snoozed reminder finds, since the id it names is now history.
    /// Reads the key's snooze index and the whole history, so it runs only
    /// on the way to [`Error::AlreadyResolved`].
    fn superseding(&self, snoozed: &Reminder, change: &Change) -> Result<Option<Reminder>> {
        if snoozed.resolution != Some(Resolution::Snoozed) {
            return Ok(None);
        }
        let key = Self::key_of(snoozed)?;
        let successor =
            |r: &Reminder| r.reopened_from() == Some(snoozed.id.as_str()) && change.applied_to(r);
        {
            let _guard = self.lock_key(&key)?;
            // A change interrupted after its commit point is finished first.
            self.settle(&key)?;
            if let Some(r) = self.read(&self.snoozed_path(&key))?
                && successor(&r)
            {
                return Ok(Some(r));
            }
        }
        for path in self.history_files()? {
            // An unreadable record is the doctor's to report; it cannot be the one.
            if let Ok(Some(r)) = self.read(&path)
                && successor(&r)
            {
                return Ok(Some(r));
            }
        }
        Ok(None)
    }

    /// Applies `change` to the key's open or snoozed reminder (when its id is
    /// `expected`, if given). The caller holds the key's lock.
    fn resolve_locked(
        &self,
        key: &ReminderKey,
        expected: Option<&ReminderId>,
        change: &Change,
    ) -> Result<Option<Reminder>> {
        self.settle(key)?;
        let now = self.now()?;
        let wanted = |r: &Reminder| expected.is_none_or(|id| *id == r.id);
        let open_path = self.open_path(key);
        if let Some(open) = self.read(&open_path)? {
            if !wanted(&open) {
                return Ok(None);
            }
            let resolved = change.apply(open, now);
            // Two durable steps: the index file takes the resolved record
            // (the commit point), then moves out of the index. `settle`
            // finishes the second if a crash or failure comes between them,
            // so its failure here does not fail the change.
            self.write_at(&open_path, &resolved)?;
            self.settle_after_commit(key);
            return Ok(Some(resolved));
        }
        if let Some(snoozed) = self.read(&self.snoozed_path(key))? {
            if !wanted(&snoozed) {
                return Ok(None);
            }
            // Snoozing a reminder that is snoozed this way already (for as
            // long, and not yet due): a retry.
            if expected.is_some() && change.applied_to(&snoozed) && !is_due(&snoozed, now) {
                return Ok(Some(snoozed));
            }
            let resolved = change.apply(reopened(&snoozed, self.new_id(), now), now);
            self.create_new(&open_path, &resolved)?;
            self.settle_after_commit(key);
            return Ok(Some(resolved));
        }
        Ok(None)
    }

    /// Reopens a due snoozed reminder. The caller holds the key's lock.
    fn reopen_locked(
        &self,
        key: &ReminderKey,
        snoozed: &Reminder,
        now: Timestamp,
    ) -> Result<Reminder> {
        let fresh = reopened(snoozed, self.new_id(), now);
        self.create_new(&self.open_path(key), &fresh)?;
        // Reopened: retiring the snoozed record is finished later if it
        // fails now, never reported as a reopen that did not happen.
        self.settle_after_commit(key);
        tracing::debug!(from = %snoozed.id, to = %fresh.id, "reopened snoozed reminder");
        Ok(fresh)
    }

    /// [`Reminders::settle`] after a commit point: a failure is logged, and
    /// the next operation on the key (or a listing) finishes the move.
    fn settle_after_commit(&self, key: &ReminderKey) {
        if let Err(e) = self.settle(key) {
            tracing::warn!(error = %e, "reminder changed, but its record was not moved on yet");
        }
    }

    /// Finishes an interrupted transition of the key (the caller holds its
    /// lock). Returns true when it changed something. The rules: a record in
    /// the open index supersedes a snoozed one of the same key (which goes to
    /// the history); a resolved record in the open index moves on, to
    /// `snoozed/` if snoozed, otherwise to the history.
    fn settle(&self, key: &ReminderKey) -> Result<bool> {
        let open_path = self.open_path(key);
        let Some(open) = self.read(&open_path)? else {
            return Ok(false);
        };
        let snoozed_path = self.snoozed_path(key);
        if let Some(snoozed) = self.read(&snoozed_path)? {
            self.retire(&snoozed_path, &self.history_path(&snoozed.id))?;
        }
        let mut changed = false;
        if !open.is_open() {
            let to = if open.resolution == Some(Resolution::Snoozed) {
                snoozed_path
            } else {
                self.history_path(&open.id)
            };
            self.retire(&open_path, &to)?;
            changed = true;
        }
        Ok(changed)
    }

    /// Moves `from` to `to`. If `to` already holds the same record (a cross-
    /// directory move that a crash left visible in both places), the leftover
    /// is quarantined rather than deleted.
    fn retire(&self, from: &StatePath, to: &StatePath) -> Result<()> {
        match self.move_at(from, to)? {
            Moved::Done => Ok(()),
            Moved::DestinationExists
                if self.read(to)?.is_some() && self.read(to)? == self.read(from)? =>
            {
                let aside = self.quarantine_at(from)?;
                tracing::warn!(from = %from.display(), to = %aside.display(), "moved aside a duplicate reminder record");
                Ok(())
            }
            Moved::DestinationExists => Err(Error::Store(chipset_store::Error::AlreadyExists {
                path: to.as_path().to_owned(),
            })),
        }
    }

    /// Creates `r` at `path`, which must hold nothing (the store's
    /// `AlreadyExists` otherwise, as a no-clobber create reports it).
    fn create_new(&self, path: &StatePath, r: &Reminder) -> Result<()> {
        if self.create_at(path, r)? {
            return Ok(());
        }
        Err(Error::Store(chipset_store::Error::AlreadyExists {
            path: path.as_path().to_owned(),
        }))
    }
}
