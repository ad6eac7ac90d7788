//! The walk over one task's folders through its task cache: what the
//! gate, the sweep and the thread take from each inbox and `archive/`.

use std::collections::btree_map::Entry;

use super::*;

impl TaskFiles<'_> {
    /// As [`TaskFiles::folder_at`] for `gate` ([`Look::Gate`]) or not
    /// ([`Look::Read`]), stat-ing the folder by its path.
    ///
    /// # Errors
    ///
    /// As [`TaskFiles::folder_at`].
    pub(crate) fn folder(&mut self, folder: &Folder, gate: bool) -> Result<Option<Vec<TaskFile>>> {
        let look = if gate { Look::Gate } else { Look::Read };
        self.folder_at(folder, look, None)
    }

    /// Returns the task's files in `folder` (`None` when the folder does
    /// not exist), from the task's cache while the folder's stamp is the one
    /// it was taken at, else by listing the folder (and reading only the
    /// files its folder cache does not know). With `gate`, an inbox whose
    /// `.quarantine/` holds a file fails ([`Error::QuarantinedInbox`]).
    ///
    /// # Errors
    ///
    /// As the gate: a folder holding a file that is not a readable,
    /// supported message fails ([`Error::Corrupt`],
    /// [`Error::Unsupported`]) when it is listed, whatever its task.
    ///
    /// `stat` is the folder's stat when the caller has it (a directory's,
    /// from [`Mail::inbox_stats`]); otherwise the folder is stat-ed here.
    ///
    /// With [`Look::Sweep`], an inbox whose slice holds none of the task's
    /// files, taken by the task's last gate less than [`SWEEP_TRUST`] ago,
    /// is not listed even when its stamp changed since (it is the same
    /// directory): the sweep then misses a file of the task that entered
    /// that inbox after that gate looked at it. It stays in its inbox, and
    /// [`Mail::doctor`] reports it (`messaging-orphan-inbox`, its task swept).
    pub(crate) fn folder_at(
        &mut self,
        folder: &Folder,
        look: Look,
        stat: Option<chipset_store::Stat>,
    ) -> Result<Option<Vec<TaskFile>>> {
        let gate = look == Look::Gate;
        let mail = self.mail;
        let inbox = match folder {
            Folder::Inbox(agent) => Some(agent),
            Folder::Archive => None,
        };
        let (dir, cache_path, skip): (StatePath, StatePath, &[&str]) = match folder {
            Folder::Inbox(agent) => (mail.layout.inbox(agent), mail.inbox_cache_path(agent), &[]),
            Folder::Archive => (
                mail.layout.archive_root(),
                mail.archive_cache_path(),
                &[BY_TASK, ORPHAN],
            ),
        };
        let taken = match stat {
            Some(meta) if meta.is_dir() => {
                let stamp = Stamp::from(&meta);
                Some((stamp, stamp.settled(SystemTime::now())))
            }
            _ => Stamp::of(&self.mail.state, &dir)?,
        };
        let Some((stamp, settled)) = taken else {
            return Ok(None);
        };
        let slot = match folder {
            Folder::Inbox(agent) => self.cache.inboxes.get(agent),
            Folder::Archive => self.cache.archive.as_ref(),
        };
        let known = slot.is_some();
        let cached = slot.filter(|s| settled && s.stamp == Some(stamp)).cloned();
        let slice = match cached {
            Some(slice) => {
                if gate && slice.quarantine {
                    mail.check_quarantine(&dir)?;
                }
                slice
            }
            None if look == Look::Sweep
                && matches!(folder, Folder::Inbox(_))
                && slot.is_some_and(|old| self.empty_at_gate(old, stamp)) =>
            {
                return Ok(Some(Vec::new()));
            }
            None => {
                let quarantine = match folder {
                    Folder::Archive => false,
                    Folder::Inbox(_) if gate => mail.check_quarantine(&dir)?,
                    Folder::Inbox(_) => self.mail.state.has_quarantine(&dir)?,
                };
                let since = match slot {
                    Some(old) if !gate => self.since(old, &dir, skip, stamp)?,
                    _ => None,
                };
                let (files, others) = match since {
                    Some((files, others)) => (
                        files.into_iter().collect::<Vec<_>>(),
                        others.into_iter().collect::<Vec<_>>(),
                    ),
                    None => {
                        let listed =
                            mail.folder_files(&cache_path, &dir, skip, stamp, settled, inbox)?;
                        let (mut files, mut others) = (Vec::new(), Vec::new());
                        for (name, e) in listed.files {
                            if e.task != self.cache.task {
                                continue;
                            }
                            match e.facts {
                                Some(facts) => files.push((name, facts)),
                                None => others.push((name, e.parent)),
                            }
                        }
                        // The task's open requests among those read (each
                        // file's task is its message's).
                        let mut read = listed.read;
                        read.retain(|_, message| message.phase == self.cache.task);
                        if let Some(agent) = inbox
                            && !read.is_empty()
                        {
                            match self.read.entry(agent.clone()) {
                                Entry::Vacant(slot) => {
                                    slot.insert(read);
                                }
                                Entry::Occupied(mut slot) => slot.get_mut().extend(read),
                            }
                        }
                        (files, others)
                    }
                };
                if !(settled || known) {
                    // Not kept (a racy stamp the task never had a slice for):
                    // no map is built. The gate's caller orders what it
                    // returns; the others get the names in order, as from a
                    // slice.
                    return Ok(Some(task_files(files, others, look != Look::Gate)));
                }
                let slice = Slice {
                    stamp: settled.then_some(stamp),
                    quarantine,
                    files: files.into_iter().collect(),
                    others: others.into_iter().collect(),
                    listed: Some(stamp),
                    requests: BTreeMap::new(),
                };
                match folder {
                    Folder::Inbox(agent) => {
                        self.cache.inboxes.insert(agent.clone(), slice.clone());
                    }
                    Folder::Archive => self.cache.archive = Some(slice.clone()),
                }
                self.dirty = true;
                slice
            }
        };
        Ok(Some(task_files(
            slice.files.into_iter().collect(),
            slice.others.into_iter().collect(),
            false,
        )))
    }

    /// The task's files in `dir`, changed since the slice `old` was listed,
    /// without its folder cache: one listing with a `statx` per entry, the
    /// files the slice knows taken from it, and only the entries that came
    /// in since read. `None` (take the folder cache) when the slice has no
    /// listing stamp, the folder is another directory, its ctime went back,
    /// or more than [`SINCE_READS`] entries are new.
    ///
    /// What this relies on: an entry enters a directory by a create, a
    /// rename or a link, and each sets the entry's own ctime to the time it
    /// entered (on Linux's local filesystems, ext4, xfs, btrfs and tmpfs:
    /// a rename sets the moved inode's ctime), which no program can set
    /// back. So an entry whose ctime is older than the directory's ctime
    /// when the slice was listed (`then`, stamped before that listing) was
    /// in the directory then and was listed: the slice holds it if it is
    /// the task's. Every other entry is read, as a new file is. Where it
    /// would not hold: a system clock stepped back after `then` stamps new
    /// entries in its past, so the gate (which must never miss a request)
    /// never takes this path; the sweep and the thread do, and a message a
    /// sweep missed that way stays in its inbox, where [`Mail::doctor`]
    /// reports it (`messaging-orphan-inbox`, its task swept).
    #[allow(clippy::type_complexity, reason = "the two maps of a slice")]
    fn since(
        &self,
        old: &Slice,
        dir: &StatePath,
        skip: &[&str],
        now: Stamp,
    ) -> Result<Option<(BTreeMap<String, Facts>, BTreeMap<String, Option<MessageId>>)>> {
        let Some(then) = old.listed.or(old.stamp) else {
            return Ok(None);
        };
        if then.dev != now.dev || then.ino != now.ino || now.ctime < then.ctime {
            return Ok(None);
        }
        let (mut files, mut others) = (BTreeMap::new(), BTreeMap::new());
        let mut new = Vec::new();
        for (name, meta) in self.mail.state.list_stats(dir)? {
            if skip.contains(&name.as_str()) || never_a_message(&name) {
                continue;
            }
            match meta {
                // Listed when the slice was: the slice knows it if it is the task's.
                Some(meta) if meta.ctime < then.ctime => {
                    if let Some(facts) = old.files.get(&name) {
                        files.insert(name, facts.clone());
                    } else if let Some(parent) = old.others.get(&name) {
                        others.insert(name, parent.clone());
                    }
                }
                // Gone since the listing.
                None => {}
                Some(_) => {
                    if new.len() == SINCE_READS {
                        return Ok(None);
                    }
                    new.push(name);
                }
            }
        }
        for name in new {
            let Some(message) = read_entry(&self.mail.state, dir, &name)? else {
                continue;
            };
            if message.phase != self.cache.task {
                continue;
            }
            match Facts::of(&message) {
                Some(facts) => {
                    files.insert(name, facts);
                }
                None => {
                    others.insert(name, message.in_reply_to);
                }
            }
        }
        Ok(Some((files, others)))
    }

    /// True when `old`, an inbox's slice, held none of the task's files
    /// when the task's last gate (less than [`SWEEP_TRUST`] ago) looked, and
    /// the inbox is still the directory it was then (`now`'s device and
    /// inode).
    fn empty_at_gate(&self, old: &Slice, now: Stamp) -> bool {
        let Some(gated) = self.cache.gated else {
            return false;
        };
        let Some(then) = old.listed.or(old.stamp) else {
            return false;
        };
        let now_ms = unix_ms(SystemTime::now());
        let trust = u64::try_from(SWEEP_TRUST.as_millis()).unwrap_or(u64::MAX);
        old.files.is_empty()
            && old.others.is_empty()
            && then.dev == now.dev
            && then.ino == now.ino
            && gated <= now_ms
            && now_ms - gated < trust
    }

    /// Records that a gate walk that began at `started` (Unix ms) looked at
    /// every inbox. Written with the cache when it changed anyway, or when
    /// the recorded gate is older than half of [`SWEEP_TRUST`].
    pub(super) fn gated(&mut self, started: u64) {
        let half = u64::try_from(SWEEP_TRUST.as_millis() / 2).unwrap_or(u64::MAX);
        if self
            .cache
            .gated
            .is_none_or(|g| g > started || started - g >= half)
        {
            self.dirty = true;
        }
        if self.dirty {
            self.cache.gated = Some(started);
        }
    }

    /// Returns the open request `name` of `agent`'s inbox, from its slice
    /// when the slice holds it, else read (failing closed as
    /// [`Mail::pending_replies`] does) and kept in the slice; `None` when it
    /// left the inbox since the listing.
    ///
    /// A message the slice keeps is not cloned: it comes back as
    /// [`Request::Kept`], to be taken from the cache that
    /// [`TaskFiles::finish_cache`] returns once it is written.
    pub(super) fn request(&mut self, agent: &AgentId, name: &str) -> Result<Request> {
        let read = self.read.get_mut(agent).and_then(|r| r.remove(name));
        let slice = self.cache.inboxes.get_mut(agent);
        // Kept by this version (the cache's format version says so), for
        // this very name, in the schema this version reads.
        if let Some(m) = slice.as_ref().and_then(|s| s.requests.get(name))
            && id_of(name).is_some_and(|id| id == m.id)
            && m.schema.as_deref().is_none_or(|s| s == MESSAGE_SCHEMA)
        {
            return Ok(Request::Kept);
        }
        // Read by this walk's listing of the inbox, or read now.
        let message = match read {
            Some(message) => message,
            None => {
                let inbox = self.mail.layout.inbox(agent);
                match read_entry(&self.mail.state, &inbox, name)? {
                    Some(message) => message,
                    None => return Ok(Request::Gone),
                }
            }
        };
        // Only a slice this walk confirmed or listed is here; one that holds
        // for its stamp keeps the message while that stamp holds.
        if let Some(slice) = slice
            && slice.stamp.is_some()
        {
            slice.requests.insert(name.to_owned(), message);
            self.dirty = true;
            return Ok(Request::Kept);
        }
        Ok(Request::Read(Box::new(message)))
    }

    /// Writes the task's cache back when it changed, forgetting inboxes
    /// that are no longer among `agents`.
    pub(crate) fn finish(self, agents: &[AgentId]) {
        self.finish_cache(agents);
    }

    /// As [`TaskFiles::finish`], returning the cache (written or not): the
    /// messages [`TaskFiles::request`] kept are taken from it.
    pub(super) fn finish_cache(mut self, agents: &[AgentId]) -> TaskCache {
        let before = self.cache.inboxes.len();
        self.cache
            .inboxes
            .retain(|a, _| agents.binary_search(a).is_ok());
        if self.dirty || self.cache.inboxes.len() != before {
            self.mail.store_cache(&self.path, &self.cache);
        }
        self.cache
    }
}

/// What [`TaskFiles::request`] found for an open request.
pub(super) enum Request {
    /// It left its inbox since the listing.
    Gone,
    /// Its inbox's slice keeps it: taken from the cache after it is
    /// written ([`TaskFiles::finish_cache`]), not cloned.
    Kept,
    /// Read, and not kept (its slice holds for no stamp).
    Read(Box<Message>),
}

/// A folder's files of the task as [`TaskFiles::folder_at`] returns them:
/// the gate's files, then the others; with `sort`, each part by name (as a
/// slice holds them).
fn task_files(
    mut files: Vec<(String, Facts)>,
    mut others: Vec<(String, Option<MessageId>)>,
    sort: bool,
) -> Vec<TaskFile> {
    if sort {
        files.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        others.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    }
    let mut out: Vec<TaskFile> = Vec::with_capacity(files.len() + others.len());
    out.extend(files.into_iter().map(|(name, facts)| TaskFile {
        name,
        parent: facts.in_reply_to.clone(),
        facts: Some(facts),
    }));
    out.extend(others.into_iter().map(|(name, parent)| TaskFile {
        name,
        facts: None,
        parent,
    }));
    out
}
