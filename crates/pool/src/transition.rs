//! The pure core: checking a post, and deriving each item's state from the
//! table and the hooks at a given time.

use std::collections::{HashMap, HashSet};

use chipset_hook::{Assignment, HookStatus};
use chipset_store::{AgentId, Timestamp};

use crate::error::Error;
use crate::format::{Entry, Item, POOL_FORMAT, Table};
use crate::id::ItemId;
use crate::{
    DEFAULT_PRIORITY, MAX_BODY, MAX_DEPENDENCIES, MAX_LABEL_LEN, MAX_LABELS, MAX_PRIORITY,
    MAX_REASON, MAX_TITLE,
};

/// A request to post one item: built with [`NewItem::new`] and the `with_`
/// methods, checked by [`Pool::post`](crate::Pool::post).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewItem {
    pub(crate) id: Option<ItemId>,
    pub(crate) title: String,
    pub(crate) body: String,
    pub(crate) labels: Vec<String>,
    pub(crate) priority: u8,
    pub(crate) depends_on: Vec<ItemId>,
    pub(crate) deferral: Option<Deferral>,
    pub(crate) role: Option<String>,
}

/// When an item becomes ready, as its poster said it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Deferral {
    /// Not before this time ([`NewItem::with_not_before`]).
    At(Timestamp),
    /// This long after the post's own time ([`NewItem::with_defer`]).
    After(std::time::Duration),
}

impl NewItem {
    /// Returns a request for an item titled `title`, at priority
    /// [`DEFAULT_PRIORITY`], with no body, labels, dependencies, deferral or
    /// role, and an id the pool generates.
    pub fn new(title: impl Into<String>) -> Self {
        NewItem {
            id: None,
            title: title.into(),
            body: String::new(),
            labels: Vec::new(),
            priority: DEFAULT_PRIORITY,
            depends_on: Vec::new(),
            deferral: None,
            role: None,
        }
    }

    /// Returns this request with the caller's id: a retry with the same id
    /// and content returns the first post's result.
    #[must_use]
    pub fn with_id(mut self, id: ItemId) -> Self {
        self.id = Some(id);
        self
    }

    /// Returns this request with a body.
    #[must_use]
    pub fn with_body(mut self, body: impl Into<String>) -> Self {
        self.body = body.into();
        self
    }

    /// Returns this request with labels (sorted and de-duplicated when posted).
    #[must_use]
    pub fn with_labels<S: Into<String>>(mut self, labels: impl IntoIterator<Item = S>) -> Self {
        self.labels = labels.into_iter().map(Into::into).collect();
        self
    }

    /// Returns this request with a priority, 0 (most urgent) ..= [`MAX_PRIORITY`].
    #[must_use]
    pub fn with_priority(mut self, priority: u8) -> Self {
        self.priority = priority;
        self
    }

    /// Returns this request depending on `ids`: it is not ready until each is done.
    #[must_use]
    pub fn with_depends_on(mut self, ids: impl IntoIterator<Item = ItemId>) -> Self {
        self.depends_on = ids.into_iter().collect();
        self
    }

    /// Returns this request deferred: not ready before `at`.
    #[must_use]
    pub fn with_not_before(mut self, at: Timestamp) -> Self {
        self.deferral = Some(Deferral::At(at));
        self
    }

    /// Returns this request deferred by `by` from the time it is posted,
    /// on the pool's clock: a retry of the post (same id and content) is
    /// judged against the first post's time, so it matches the first.
    #[must_use]
    pub fn with_defer(mut self, by: std::time::Duration) -> Self {
        self.deferral = Some(Deferral::After(by));
        self
    }

    /// Returns this request for one role.
    #[must_use]
    pub fn with_role(mut self, role: impl Into<String>) -> Self {
        self.role = Some(role.into());
        self
    }

    /// Returns the caller's id, if it gave one.
    pub fn id(&self) -> Option<&ItemId> {
        self.id.as_ref()
    }

    /// Checks every field alone (dependencies are checked against the table
    /// when posting).
    pub(crate) fn validate(&self) -> Result<(), Error> {
        let title = self.title.trim();
        if title.is_empty() {
            return Err(invalid("title", "must not be empty"));
        }
        if self.title.len() > MAX_TITLE {
            return Err(invalid(
                "title",
                format!(
                    "is {} bytes; at most {MAX_TITLE} are allowed",
                    self.title.len()
                ),
            ));
        }
        if self.title.chars().any(char::is_control) {
            return Err(invalid(
                "title",
                "must be one line without control characters",
            ));
        }
        if self.body.len() > MAX_BODY {
            return Err(Error::BodyTooLarge {
                size: self.body.len(),
                max: MAX_BODY,
            });
        }
        if self.priority > MAX_PRIORITY {
            return Err(invalid(
                "priority",
                format!("{} is outside 0 ..= {MAX_PRIORITY}", self.priority),
            ));
        }
        if self.labels.len() > MAX_LABELS {
            return Err(invalid(
                "labels",
                format!(
                    "{} given; at most {MAX_LABELS} are allowed",
                    self.labels.len()
                ),
            ));
        }
        for label in &self.labels {
            check_word("label", label)?;
        }
        // A role no agent can hold would keep the item from every brief:
        // the directory's rules for a role an agent holds.
        if let Some(role) = &self.role {
            chipset_directory::Role::new(role.as_str())
                .and_then(|r| r.check_held())
                .map_err(|e| invalid("role", e.to_string()))?;
        }
        if self.depends_on.len() > MAX_DEPENDENCIES {
            return Err(invalid(
                "depends_on",
                format!(
                    "{} given; at most {MAX_DEPENDENCIES} are allowed",
                    self.depends_on.len()
                ),
            ));
        }
        Ok(())
    }

    /// Returns the item file this request becomes.
    pub(crate) fn to_item(&self, id: ItemId, by: &AgentId, now: Timestamp) -> Item {
        let mut labels = self.labels.clone();
        labels.sort();
        labels.dedup();
        let mut depends_on = self.depends_on.clone();
        depends_on.sort();
        depends_on.dedup();
        Item {
            format: POOL_FORMAT,
            id,
            title: self.title.clone(),
            body: self.body.clone(),
            labels,
            priority: self.priority,
            depends_on,
            not_before: self.deferral.map(|d| match d {
                Deferral::At(at) => at,
                Deferral::After(by) => now + by,
            }),
            role: self.role.clone(),
            posted_by: by.clone(),
            posted_at: now,
        }
    }
}

fn invalid(field: &'static str, reason: impl Into<String>) -> Error {
    Error::Invalid {
        field,
        reason: reason.into(),
    }
}

/// A label or a role: a short word, no spaces, commas or control characters.
pub(crate) fn check_word(field: &'static str, word: &str) -> Result<(), Error> {
    if word.is_empty() {
        return Err(invalid(field, "must not be empty"));
    }
    if word.len() > MAX_LABEL_LEN {
        return Err(invalid(
            field,
            format!("`{word}` is over {MAX_LABEL_LEN} bytes"),
        ));
    }
    if word
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || c == ',')
    {
        return Err(invalid(
            field,
            format!("`{word}` must not contain spaces, commas or control characters"),
        ));
    }
    Ok(())
}

/// Checks a release reason: not blank, at most [`MAX_REASON`] bytes.
pub(crate) fn check_reason(reason: &str) -> Result<(), Error> {
    if reason.trim().is_empty() {
        return Err(invalid("reason", "a release needs a reason"));
    }
    if reason.len() > MAX_REASON {
        return Err(invalid(
            "reason",
            format!(
                "is {} bytes; at most {MAX_REASON} are allowed",
                reason.len()
            ),
        ));
    }
    Ok(())
}

/// Checks the dependencies of a batch of new items against the table and
/// each other: each must name a posted item or one of the batch, and the
/// batch must not close a cycle (an item cannot depend on itself, even
/// through others). Items already posted cannot depend on new ones, so a
/// cycle can only run through the batch.
pub(crate) fn check_dependencies(table: &Index<'_>, batch: &[Item]) -> Result<(), Error> {
    let new: HashMap<&ItemId, &Item> = batch.iter().map(|i| (&i.id, i)).collect();
    for item in batch {
        for dep in &item.depends_on {
            if !new.contains_key(dep) && table.get(dep).is_none() {
                return Err(Error::UnknownDependency {
                    id: item.id.clone(),
                    dependency: dep.clone(),
                });
            }
        }
    }
    // Depth-first search over the batch's own edges.
    let mut done: HashSet<&ItemId> = HashSet::new();
    for start in batch {
        let mut path: Vec<&ItemId> = Vec::new();
        visit(&start.id, &new, &mut done, &mut path)?;
    }
    Ok(())
}

fn visit<'a>(
    id: &'a ItemId,
    new: &HashMap<&'a ItemId, &'a Item>,
    done: &mut HashSet<&'a ItemId>,
    path: &mut Vec<&'a ItemId>,
) -> Result<(), Error> {
    if done.contains(id) {
        return Ok(());
    }
    if let Some(at) = path.iter().position(|p| *p == id) {
        let mut cycle: Vec<ItemId> = path[at..].iter().map(|i| (*i).clone()).collect();
        cycle.push(id.clone());
        return Err(Error::Cycle { ids: cycle });
    }
    let Some(item) = new.get(id) else {
        return Ok(());
    };
    path.push(id);
    for dep in &item.depends_on {
        visit(dep, new, done, path)?;
    }
    path.pop();
    done.insert(id);
    Ok(())
}

/// A claimed item as its hook shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hold {
    /// The hook's status: pending, active or completed.
    pub(crate) status: HookStatus,
    /// The assignment the hook holds.
    pub(crate) assignment: Assignment,
}

/// Where each item is, derived from the table, the hooks and the time.
///
/// The hooks are the truth for "claimed": an item is claimed exactly when a
/// hook holds it; the table records only what the hooks cannot say (done,
/// the last release).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WorkState {
    /// Claimable now.
    Ready,
    /// Not ready before `until`.
    Deferred {
        /// Its `not_before`.
        until: Timestamp,
    },
    /// Waiting for these dependencies to be done.
    Blocked {
        /// The dependencies not done yet.
        on: Vec<ItemId>,
    },
    /// On `holder`'s hook, pending or active.
    Claimed {
        /// The agent whose hook holds it.
        holder: AgentId,
        /// Pending (not started) or active.
        hook: HookStatus,
    },
    /// Done: recorded in the table, or completed on its holder's hook and
    /// not recorded yet (`recorded` false; the next claim or `done` records it).
    Done {
        /// Who did it.
        by: AgentId,
        /// Whether the table records it yet.
        recorded: bool,
    },
}

impl WorkState {
    /// Returns the state's name: `ready`, `deferred`, `blocked`, `claimed`, `done`.
    pub fn as_str(&self) -> &'static str {
        match self {
            WorkState::Ready => "ready",
            WorkState::Deferred { .. } => "deferred",
            WorkState::Blocked { .. } => "blocked",
            WorkState::Claimed { .. } => "claimed",
            WorkState::Done { .. } => "done",
        }
    }
}

/// One item with its derived state, as [`Pool::list`](crate::Pool::list),
/// [`Pool::listing`](crate::Pool::listing) and
/// [`Pool::ready`](crate::Pool::ready) return it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Listed {
    /// The item's table entry.
    pub entry: Entry,
    /// Where it is now.
    pub state: WorkState,
    /// True when a hook that [`Pool::listing`](crate::Pool::listing) could
    /// not read might hold the item: `state` (ready, blocked or deferred)
    /// is then what the table and the readable hooks say, and the item may
    /// be claimed or done. Always false from the reads that fail on such
    /// a hook.
    pub unconfirmed: bool,
}

/// Which ready items a `ready` or a claim of the next item considers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadyFilter {
    labels: Vec<String>,
    /// `None`: every item; `Some(roles)`: items for one of `roles` or for
    /// no role.
    roles: Option<Vec<String>>,
}

impl ReadyFilter {
    /// Returns a filter that keeps everything.
    pub fn new() -> Self {
        Self::default()
    }

    /// Returns this filter keeping only items that carry `label` (every
    /// label given must be on the item).
    #[must_use]
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.labels.push(label.into());
        self
    }

    /// Returns this filter for an agent of `role`: items for that role and
    /// items for no role. Without a role, every item is kept.
    #[must_use]
    pub fn with_role(mut self, role: impl Into<String>) -> Self {
        self.roles.get_or_insert_with(Vec::new).push(role.into());
        self
    }

    /// Returns this filter for an agent holding `roles` (its directory
    /// profile's): items for one of them and items for no role. Unlike a
    /// filter without a role, an agent holding none is kept to the items
    /// for no role.
    #[must_use]
    pub fn with_roles<S: Into<String>>(mut self, roles: impl IntoIterator<Item = S>) -> Self {
        self.roles
            .get_or_insert_with(Vec::new)
            .extend(roles.into_iter().map(Into::into));
        self
    }

    /// Returns true when `entry` passes.
    pub fn keeps(&self, entry: &Entry) -> bool {
        self.labels.iter().all(|l| entry.labels.contains(l))
            && match (&self.roles, &entry.role) {
                (Some(want), Some(has)) => want.contains(has),
                _ => true,
            }
    }
}

/// The table indexed by id.
pub(crate) struct Index<'a> {
    pub(crate) table: &'a Table,
    by_id: HashMap<&'a ItemId, usize>,
}

impl<'a> Index<'a> {
    pub(crate) fn new(table: &'a Table) -> Self {
        let by_id = table
            .items
            .iter()
            .enumerate()
            .map(|(n, e)| (&e.id, n))
            .collect();
        Index { table, by_id }
    }

    pub(crate) fn get(&self, id: &ItemId) -> Option<&'a Entry> {
        self.by_id.get(id).map(|n| &self.table.items[*n])
    }

    pub(crate) fn position(&self, id: &ItemId) -> Option<usize> {
        self.by_id.get(id).copied()
    }
}

/// The derivation: [`WorkState`] of each entry.
pub(crate) struct View<'a> {
    pub(crate) index: Index<'a>,
    pub(crate) holds: &'a HashMap<ItemId, Hold>,
    pub(crate) now: Timestamp,
}

impl View<'_> {
    fn is_done(&self, id: &ItemId) -> bool {
        self.index.get(id).is_some_and(|e| e.done.is_some())
            || self
                .holds
                .get(id)
                .is_some_and(|h| h.status == HookStatus::Completed)
    }

    /// Returns where `entry` is.
    pub(crate) fn state(&self, entry: &Entry) -> WorkState {
        if let Some(done) = &entry.done {
            return WorkState::Done {
                by: done.by.clone(),
                recorded: true,
            };
        }
        if let Some(hold) = self.holds.get(&entry.id) {
            let holder = hold.assignment.agent.clone();
            return match hold.status {
                HookStatus::Completed => WorkState::Done {
                    by: holder,
                    recorded: false,
                },
                status => WorkState::Claimed {
                    holder,
                    hook: status,
                },
            };
        }
        let on: Vec<ItemId> = entry
            .depends_on
            .iter()
            .filter(|d| !self.is_done(d))
            .cloned()
            .collect();
        if !on.is_empty() {
            return WorkState::Blocked { on };
        }
        match entry.not_before {
            Some(until) if self.now < until => WorkState::Deferred { until },
            _ => WorkState::Ready,
        }
    }

    /// Returns every item with its state, in posting order.
    pub(crate) fn list(&self) -> Vec<Listed> {
        self.index
            .table
            .items
            .iter()
            .map(|e| Listed {
                entry: e.clone(),
                state: self.state(e),
                unconfirmed: false,
            })
            .collect()
    }

    /// Returns the ready items `filter` keeps, by priority then age.
    pub(crate) fn ready<'e>(&'e self, filter: &ReadyFilter) -> Vec<&'e Entry> {
        let mut ready: Vec<&Entry> = self
            .index
            .table
            .items
            .iter()
            .filter(|e| filter.keeps(e) && self.state(e) == WorkState::Ready)
            .collect();
        ready.sort_by_key(|e| (e.priority, e.seq));
        ready
    }

    /// Returns the first ready item `filter` keeps, without sorting them all.
    pub(crate) fn next(&self, filter: &ReadyFilter) -> Option<&Entry> {
        self.index
            .table
            .items
            .iter()
            .filter(|e| e.done.is_none() && !self.holds.contains_key(&e.id) && filter.keeps(e))
            .filter(|e| self.state(e) == WorkState::Ready)
            .min_by_key(|e| (e.priority, e.seq))
    }
}

#[cfg(test)]
#[path = "transition_tests.rs"]
mod tests;
