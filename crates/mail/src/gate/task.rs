//! The walk over one task's folders through its task cache: what the
//! gate, the sweep and the thread take from each inbox and `archive/`.

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
        if self.unfilled.iter().any(|(f, _)| f == folder) {
            self.fill();
        }
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
        match slot.filter(|s| settled && s.stamp == Some(stamp)) {
            Some(slice) => {
                if gate && slice.quarantine {
                    mail.check_quarantine(&dir)?;
                }
                // The names and facts only (not the kept messages).
                Ok(Some(task_files(
                    slice
                        .files
                        .iter()
                        .map(|(n, f)| (n.clone(), f.clone(), None))
                        .collect(),
                    slice
                        .others
                        .iter()
                        .map(|(n, p)| (n.clone(), p.clone()))
                        .collect(),
                    false,
                )))
            }
            None if look == Look::Sweep
                && matches!(folder, Folder::Inbox(_))
                && slot.is_some_and(|old| self.empty_at_gate(old, stamp)) =>
            {
                Ok(Some(Vec::new()))
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
                // The folder's listing, when the folder cache is being
                // written from it: the slice is filled from it once that
                // write is over (without cloning its names and facts).
                let mut shared = None;
                let (files, others) = match since {
                    Some((files, others)) => (
                        files
                            .into_iter()
                            .map(|(n, f)| (n, f, None))
                            .collect::<Vec<_>>(),
                        others.into_iter().collect::<Vec<_>>(),
                    ),
                    None => {
                        let listed =
                            mail.folder_files(&cache_path, &dir, skip, stamp, settled, inbox)?;
                        // Written while the walk goes on; joined at its end.
                        self.writing.extend(listed.writing);
                        let (mut files, mut others) =
                            (Vec::with_capacity(listed.files.len()), Vec::new());
                        // Each file's task is its message's: the task's open
                        // requests read by the listing come with their file.
                        let mut messages = listed.messages;
                        shared = task_entries(
                            listed.files,
                            &self.cache.task,
                            |at, name, facts, parent| match facts {
                                Some(facts) => files.push((name, facts, messages[at].take())),
                                None => others.push((name, parent)),
                            },
                        );
                        (files, others)
                    }
                };
                if settled || known {
                    // The slice's names and facts: taken from the listing
                    // later when it is shared, else cloned from what the
                    // walk returns (which keeps the originals, and the
                    // messages read).
                    let (slice_files, slice_others) = match &shared {
                        Some(_) => (BTreeMap::new(), BTreeMap::new()),
                        None => (
                            files
                                .iter()
                                .map(|(n, f, _)| (n.clone(), f.clone()))
                                .collect(),
                            others.iter().cloned().collect(),
                        ),
                    };
                    let slice = Slice {
                        stamp: settled.then_some(stamp),
                        quarantine,
                        files: slice_files,
                        others: slice_others,
                        listed: Some(stamp),
                        requests: BTreeMap::new(),
                    };
                    match folder {
                        Folder::Inbox(agent) => {
                            self.cache.inboxes.insert(agent.clone(), slice);
                        }
                        Folder::Archive => self.cache.archive = Some(slice),
                    }
                    if let Some(listing) = shared {
                        self.unfilled.push((folder.clone(), listing));
                    }
                    self.dirty = true;
                }
                // Each part in name order, as from a slice (a listing is
                // sorted by name; the gate's caller orders what it returns).
                Ok(Some(task_files(files, others, look != Look::Gate)))
            }
        }
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

    /// Adds to `open` the open request `name` of `agent`'s inbox (the
    /// `inbox`-th of the walk's agents): kept by its slice (its message
    /// taken from there by [`TaskFiles::take_kept`]), or `listed` (the
    /// message this walk's listing read), or read now (failing closed as
    /// [`Mail::pending_replies`] does); nothing when it left the inbox
    /// since the listing. A message read for a slice that holds for its
    /// stamp is to be kept there ([`Open::keep`]).
    pub(super) fn request(
        &mut self,
        inbox: usize,
        agent: &AgentId,
        name: String,
        listed: Option<Box<Message>>,
        open: &mut Vec<Open>,
    ) -> Result<()> {
        let slice = self.cache.inboxes.get_mut(agent);
        let mut stale = false;
        // Kept by this version (the cache's format version says so), for
        // this very name, in the schema this version reads.
        if let Some(m) = slice.as_ref().and_then(|s| s.requests.get(&name)) {
            if id_of(&name).is_some_and(|id| id == m.id)
                && m.schema.as_deref().is_none_or(|s| s == MESSAGE_SCHEMA)
            {
                open.push(Open {
                    inbox,
                    name,
                    message: None,
                    keep: true,
                });
                return Ok(());
            }
            stale = true;
        }
        // Read by this walk's listing of the inbox, or read now.
        let message = match listed {
            Some(message) => message,
            None => match read_entry(&self.mail.state, &self.mail.layout.inbox(agent), &name)? {
                Some(message) => Box::new(message),
                None => return Ok(()),
            },
        };
        // Only a slice this walk confirmed or listed is here; one that holds
        // for its stamp keeps the message while that stamp holds (the one
        // it kept for this name, which did not pass, is dropped).
        let keep = match slice {
            Some(slice) => {
                if stale {
                    slice.requests.remove(&name);
                    self.dirty = true;
                }
                slice.stamp.is_some()
            }
            None => false,
        };
        if keep {
            self.dirty = true;
        }
        open.push(Open {
            inbox,
            name,
            message: Some(message),
            keep,
        });
        Ok(())
    }

    /// Moves into `open` the messages its slices keep (for the requests
    /// [`TaskFiles::request`] found kept), not cloned; `agents` are the
    /// walk's agents. When the cache is written, they are written from
    /// `open` again. A message its slice should keep and does not is read
    /// again (never expected), and a request whose file is gone since is
    /// dropped from `open`.
    pub(super) fn take_kept(&mut self, agents: &[AgentId], open: &mut Vec<Open>) -> Result<()> {
        if open.iter().all(|o| o.message.is_some()) {
            return Ok(());
        }
        // Each inbox's kept messages, in name order as `open` lists them.
        let mut from: Option<(
            usize,
            std::iter::Peekable<std::collections::btree_map::IntoIter<String, Message>>,
        )> = None;
        for o in open.iter_mut().filter(|o| o.message.is_none()) {
            if from.as_ref().is_none_or(|(at, _)| *at != o.inbox) {
                let requests = self
                    .cache
                    .inboxes
                    .get_mut(&agents[o.inbox])
                    .map(|s| std::mem::take(&mut s.requests))
                    .unwrap_or_default();
                from = Some((o.inbox, requests.into_iter().peekable()));
            }
            let message = from.as_mut().and_then(|(_, requests)| {
                while requests
                    .next_if(|(n, _)| n.as_str() < o.name.as_str())
                    .is_some()
                {}
                requests.next_if(|(n, _)| *n == o.name).map(|(_, m)| m)
            });
            o.message = match message {
                Some(message) => Some(Box::new(message)),
                // Never expected (a kept message stays in its slice); read
                // it again rather than ever count it as gone.
                None => {
                    let inbox = self.mail.layout.inbox(&agents[o.inbox]);
                    read_entry(&self.mail.state, &inbox, &o.name)?.map(Box::new)
                }
            };
        }
        open.retain(|o| o.message.is_some());
        Ok(())
    }

    /// Fills the slices whose files are still to be taken from their
    /// folder's listing: moved from it when the folder cache being written
    /// from it is written (its writer lets go of it then), else cloned
    /// (its writer is not waited for). Only a walk that lists a folder
    /// again needs them (the cache is written from the listing itself).
    fn fill(&mut self) {
        let task = &self.cache.task;
        for (folder, listing) in std::mem::take(&mut self.unfilled) {
            let slice = match &folder {
                Folder::Inbox(agent) => self.cache.inboxes.get_mut(agent),
                Folder::Archive => self.cache.archive.as_mut(),
            };
            let Some(slice) = slice else {
                continue;
            };
            let (mut files, mut others) = (Vec::new(), Vec::new());
            task_entries(listing, task, |_, name, facts, parent| match facts {
                Some(facts) => files.push((name, facts)),
                None => others.push((name, parent)),
            });
            // In name order, as the listing is: built in one pass.
            slice.files = files.into_iter().collect();
            slice.others = others.into_iter().collect();
        }
    }

    /// Forgets the inboxes that are no longer among `agents` (sorted).
    pub(super) fn prune(&mut self, agents: &[AgentId]) {
        let before = self.cache.inboxes.len();
        self.cache
            .inboxes
            .retain(|a, _| agents.binary_search(a).is_ok());
        if self.cache.inboxes.len() != before {
            self.dirty = true;
        }
    }

    /// Whether the task's cache changed since it was loaded.
    pub(super) fn dirty(&self) -> bool {
        self.dirty
    }

    /// Writes the task's cache back when it changed, forgetting inboxes
    /// that are no longer among `agents`.
    pub(crate) fn finish(mut self, agents: &[AgentId]) {
        self.prune(agents);
        if self.dirty {
            self.write(&[]);
        }
    }

    /// Writes the task's cache, with the open requests `new` (inbox, name,
    /// message) that its slices are to keep beside the ones they kept,
    /// written from these borrows (and the names of a slice not filled yet
    /// from its folder's listing: [`TaskFiles::fill`]); then lets the walk
    /// go (joining the folder caches it is writing).
    pub(super) fn write(self, new: &[(&AgentId, &str, &Message)]) {
        let mut by_inbox: BTreeMap<&AgentId, Vec<(&str, &Message)>> = BTreeMap::new();
        for &(agent, name, message) in new {
            by_inbox.entry(agent).or_default().push((name, message));
        }
        for requests in by_inbox.values_mut() {
            requests.sort_unstable_by(|a, b| a.0.cmp(b.0));
        }
        let cache = &self.cache;
        let listing = |folder: &Folder| {
            self.unfilled
                .iter()
                .find(|(f, _)| f == folder)
                .map(|(_, listing)| listing.as_slice())
        };
        let none = Vec::new();
        self.mail.store_cache(
            &self.path,
            &encode::TaskCacheRef {
                v: cache.v,
                task: &cache.task,
                inboxes: cache
                    .inboxes
                    .iter()
                    .map(|(agent, s)| {
                        let new = by_inbox.get(agent).unwrap_or(&none);
                        let listing = listing(&Folder::Inbox(agent.clone()));
                        (agent, encode::SliceRef::new(s, listing, &cache.task, new))
                    })
                    .collect(),
                archive: cache.archive.as_ref().map(|s| {
                    encode::SliceRef::new(s, listing(&Folder::Archive), &cache.task, &none)
                }),
                gated: cache.gated,
            },
        );
    }
}

/// Hands `each` the files of `task` in `listing`, in its order, each with
/// its position there, its name, its facts and its parent: moved out of
/// the listing when nothing else holds it, else cloned (it is being
/// written as the folder cache meanwhile). Returns the listing when it is
/// shared.
fn task_entries(
    listing: Listing,
    task: &TaskId,
    mut each: impl FnMut(usize, String, Option<Facts>, Option<MessageId>),
) -> Option<Listing> {
    match Arc::try_unwrap(listing) {
        Ok(entries) => {
            for (at, (name, e)) in entries.into_iter().enumerate() {
                if e.task == *task {
                    each(at, name, e.facts, e.parent);
                }
            }
            None
        }
        Err(listing) => {
            for (at, (name, e)) in listing.iter().enumerate() {
                if e.task == *task {
                    each(at, name.clone(), e.facts.clone(), e.parent.clone());
                }
            }
            Some(listing)
        }
    }
}

/// An open request of the task that a gate found in an inbox.
pub(super) struct Open {
    /// Its inbox: the position of its agent among the walk's agents.
    pub(super) inbox: usize,
    /// Its file's name.
    pub(super) name: String,
    /// Its message (`None` while its slice keeps it: taken from there by
    /// [`TaskFiles::take_kept`]). Boxed: thousands of these move from one
    /// list to the next.
    pub(super) message: Option<Box<Message>>,
    /// Whether its slice keeps it when the cache is written.
    pub(super) keep: bool,
}

/// A folder's files of the task as [`TaskFiles::folder_at`] returns them:
/// the gate's files, then the others; with `sort`, each part by name (as a
/// slice holds them).
fn task_files(
    mut files: Vec<(String, Facts, Option<Box<Message>>)>,
    mut others: Vec<(String, Option<MessageId>)>,
    sort: bool,
) -> Vec<TaskFile> {
    if sort {
        files.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        others.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    }
    let mut out: Vec<TaskFile> = Vec::with_capacity(files.len() + others.len());
    out.extend(files.into_iter().map(|(name, facts, message)| TaskFile {
        name,
        parent: facts.in_reply_to.clone(),
        facts: Some(facts),
        message,
    }));
    out.extend(others.into_iter().map(|(name, parent)| TaskFile {
        name,
        facts: None,
        parent,
        message: None,
    }));
    out
}
