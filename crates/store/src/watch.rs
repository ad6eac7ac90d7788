//! Wake-ups on change: a watcher over a few places under the state root,
//! with directory notifications (inotify, through `notify`) and a periodic
//! rescan as the safety net.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use notify::{RecommendedWatcher, RecursiveMode, Watcher as _};

use crate::error::Result;
use crate::path::StatePath;
use crate::state::StateDir;

/// One place a [`Watcher`] watches.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum WatchTarget {
    /// A directory: changes to its entries.
    Dir(StatePath),
    /// A directory and everything below it (subdirectories created later
    /// too).
    Tree(StatePath),
    /// One file: watched through its directory, and only its own changes
    /// (created, written, renamed into place, removed) are reported.
    File(StatePath),
}

impl WatchTarget {
    /// Returns the path watched for.
    pub fn path(&self) -> &Path {
        match self {
            WatchTarget::Dir(path) | WatchTarget::Tree(path) | WatchTarget::File(path) => path,
        }
    }

    /// The directory the notification watch is placed on, and how.
    fn watch_dir(&self) -> Option<(&Path, RecursiveMode)> {
        match self {
            WatchTarget::Dir(path) => Some((path, RecursiveMode::NonRecursive)),
            WatchTarget::Tree(path) => Some((path, RecursiveMode::Recursive)),
            WatchTarget::File(path) => path.parent().map(|p| (p, RecursiveMode::NonRecursive)),
        }
    }

    /// Returns true when a change at `changed` concerns this target.
    fn concerns(&self, changed: &Path) -> bool {
        match self {
            WatchTarget::Dir(path) | WatchTarget::Tree(path) => changed.starts_with(path),
            WatchTarget::File(path) => changed == path,
        }
    }
}

/// How a [`Watcher`] learns of changes: built as a literal,
/// `WatchConfig { notify: false, ..WatchConfig::default() }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchConfig {
    /// Use directory notifications (true, the default) or rescans only.
    pub notify: bool,
    /// How often [`Watcher::wait`] returns [`WatchWake::Rescan`] whatever the
    /// notifications say: the safety net, and the latency bound when
    /// notifications fail. Default 1 s.
    pub rescan_interval: Duration,
}

impl Default for WatchConfig {
    fn default() -> Self {
        WatchConfig {
            notify: true,
            rescan_interval: Duration::from_secs(1),
        }
    }
}

/// Why [`Watcher::wait`] returned.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum WatchWake {
    /// Notifications reported changes at these paths (each concerning a
    /// target, sorted, deduplicated). A hint: look again at what they name.
    Changed(Vec<PathBuf>),
    /// Time to look at everything again: the rescan interval passed, or a
    /// notification was lost (overflow, error, watch gone).
    Rescan,
    /// The timeout passed first.
    TimedOut,
}

/// Blocks until something changes at one of a few places under the state
/// root, or a rescan is due, or a timeout passes.
///
/// A watcher tells its caller *when to look*, never what is there: the
/// caller reads the state after every [`Watcher::wait`] that returns other
/// than [`WatchWake::TimedOut`]. Notifications make that fast (a change is seen
/// within milliseconds); the periodic [`WatchWake::Rescan`] makes it safe (a
/// notification that is lost, a filesystem that does not notify, a watch
/// that could not be set up or that ended with its directory, delay a
/// wake-up by at most [`WatchConfig::rescan_interval`], never forever).
///
/// A target that does not exist yet is watched through its nearest existing
/// ancestor below the root, and watched itself once it appears, so a
/// watcher never creates directories.
///
/// The loop that avoids missed wake-ups: make the watcher, read the state,
/// then `wait`; a change made after the watcher was made is always reported.
///
/// ```
/// use std::time::Duration;
/// use chipset_store::{Channel, StateDir, WatchWake, WatchConfig, WatchTarget, Watcher};
///
/// let tmp = tempfile::tempdir()?;
/// let state = StateDir::open(tmp.path())?;
/// let hook = state.channel(Channel::new("hooks")).join("polecat-alpha.json")?;
/// let mut watcher = Watcher::new(&state, [WatchTarget::File(hook.clone())], WatchConfig::default())?;
/// state.write_json(&hook, &serde_json::json!({"status": "pending"}))?;
/// // Notifications, or at the latest the rescan, report it.
/// assert_ne!(watcher.wait(Duration::from_secs(10)), WatchWake::TimedOut);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Watcher {
    targets: Vec<WatchTarget>,
    /// The state root of each target (same index): where the search for
    /// its nearest existing ancestor stops.
    roots: Vec<PathBuf>,
    /// The directories a notification watch is on.
    watched: BTreeSet<PathBuf>,
    /// The targets whose own directory is watched (the others wait for
    /// theirs to appear, watched through an ancestor).
    armed: BTreeSet<usize>,
    watch: Option<Watch>,
    rescan_interval: Duration,
    last_scan: Instant,
}

struct Watch {
    watcher: RecommendedWatcher,
    events: Receiver<notify::Result<notify::Event>>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watch")
    }
}

impl Watcher {
    /// Returns a watcher on `targets`, which must lie inside `state`'s root.
    ///
    /// # Errors
    ///
    /// [`Error::OutsideRoot`](crate::Error::OutsideRoot) for a target outside the root;
    /// [`Error::Symlink`](crate::Error::Symlink) or
    /// [`Error::NotADirectory`](crate::Error::NotADirectory) when a directory on
    /// the way to a target is not a real directory. A notification watch
    /// that cannot be set up is not an error: the watcher falls back to
    /// rescans and logs a warning.
    pub fn new(
        state: &StateDir,
        targets: impl IntoIterator<Item = WatchTarget>,
        config: WatchConfig,
    ) -> Result<Self> {
        let watch = if config.notify { start() } else { None };
        let mut watcher = Watcher {
            targets: Vec::new(),
            roots: Vec::new(),
            watched: BTreeSet::new(),
            armed: BTreeSet::new(),
            watch,
            rescan_interval: config.rescan_interval.max(Duration::from_millis(1)),
            last_scan: Instant::now(),
        };
        watcher.add(state, targets)?;
        Ok(watcher)
    }

    /// Watches `targets` too, which must lie inside `state`'s root: a
    /// root other than the first one's (say, a mail folder kept outside
    /// the state root) is fine. Changes made from now on are reported.
    ///
    /// # Errors
    ///
    /// As [`Watcher::new`]; on an error no target is added.
    pub fn add(
        &mut self,
        state: &StateDir,
        targets: impl IntoIterator<Item = WatchTarget>,
    ) -> Result<()> {
        let targets: Vec<WatchTarget> = targets.into_iter().collect();
        for t in &targets {
            state.parents_ok(t.path())?;
        }
        for t in targets {
            self.targets.push(t);
            self.roots.push(state.root().to_owned());
        }
        self.arm();
        Ok(())
    }

    /// Returns the targets.
    #[cfg(test)]
    pub(crate) fn targets(&self) -> &[WatchTarget] {
        &self.targets
    }

    /// Returns true when directory notifications are in use (false: rescans only).
    pub fn is_notified(&self) -> bool {
        self.watch.is_some()
    }

    /// Blocks until a change concerning a target is notified, a rescan is
    /// due, or `timeout` passes. Returns at once when a notification came
    /// since the last call.
    pub fn wait(&mut self, timeout: Duration) -> WatchWake {
        let deadline = Instant::now() + timeout;
        let mut changed = BTreeSet::new();
        let mut rescan = false;
        loop {
            let mut events = Vec::new();
            let mut lost = false;
            if let Some(w) = &self.watch {
                loop {
                    match w.events.try_recv() {
                        Ok(ev) => events.push(ev),
                        Err(TryRecvError::Empty) => break,
                        Err(TryRecvError::Disconnected) => {
                            lost = true;
                            break;
                        }
                    }
                }
            }
            for ev in events {
                rescan |= self.note(ev, &mut changed);
            }
            if lost {
                self.lose_watch();
                rescan = true;
            }
            if !changed.is_empty() {
                self.arm();
                return WatchWake::Changed(changed.into_iter().collect());
            }
            if rescan || self.last_scan.elapsed() >= self.rescan_interval {
                self.last_scan = Instant::now();
                self.check_armed();
                self.arm();
                return WatchWake::Rescan;
            }
            let now = Instant::now();
            if now >= deadline {
                return WatchWake::TimedOut;
            }
            let next_scan = self
                .rescan_interval
                .saturating_sub(self.last_scan.elapsed());
            let pause = (deadline - now).min(next_scan);
            let got = match &self.watch {
                Some(w) => Some(w.events.recv_timeout(pause)),
                None => {
                    std::thread::sleep(pause);
                    None
                }
            };
            match got {
                Some(Ok(ev)) => rescan |= self.note(ev, &mut changed),
                Some(Err(RecvTimeoutError::Disconnected)) => {
                    self.lose_watch();
                    rescan = true;
                }
                Some(Err(RecvTimeoutError::Timeout)) | None => {}
            }
        }
    }

    /// Takes one notification: paths concerning a target go to `changed`.
    /// Returns true when it asks for a rescan (an overflow or an error).
    fn note(&mut self, ev: notify::Result<notify::Event>, changed: &mut BTreeSet<PathBuf>) -> bool {
        let ev = match ev {
            Ok(ev) => ev,
            Err(e) => {
                tracing::debug!(error = %e, "notification error; rescanning");
                return true;
            }
        };
        if ev.need_rescan() {
            return true;
        }
        // Opening, reading and closing a file unwritten change nothing
        // (notify reports opens on Linux): a reader must not wake
        // watchers, itself included.
        if let notify::EventKind::Access(access) = ev.kind
            && access != notify::event::AccessKind::Close(notify::event::AccessMode::Write)
        {
            return false;
        }
        let removed = matches!(ev.kind, notify::EventKind::Remove(_));
        for path in ev.paths {
            let mut relevant = false;
            for (i, t) in self.targets.iter().enumerate() {
                if t.concerns(&path) {
                    relevant = true;
                }
                // A directory on the way to an unarmed target appeared: the
                // target may be there now; report it so the caller looks.
                if !self.armed.contains(&i) && t.path().starts_with(&path) {
                    relevant = true;
                }
                // The target's watched directory itself went away: its watch
                // ended with it; watch the way to it again.
                if removed
                    && let Some((dir, _)) = t.watch_dir()
                    && path == dir
                {
                    self.armed.remove(&i);
                    self.watched.remove(dir);
                    relevant = true;
                }
            }
            if relevant {
                changed.insert(path);
            }
        }
        false
    }

    /// Places notification watches: on each target's directory when it
    /// exists, else on its nearest existing ancestor below the root.
    fn arm(&mut self) {
        let Some(w) = &mut self.watch else {
            return;
        };
        let mut failed = None;
        for (i, t) in self.targets.iter().enumerate() {
            if self.armed.contains(&i) {
                continue;
            }
            let root = &self.roots[i];
            let Some((dir, mode)) = t.watch_dir() else {
                continue;
            };
            // Until the watch stands where the way stops: a directory on
            // the way made after its ancestor was found and before that
            // ancestor's watch was placed sent no notification, so after
            // each watch the way is looked at again.
            loop {
                let (at, mode, arms) = if is_dir(dir) {
                    (dir.to_owned(), mode, true)
                } else {
                    let Some(ancestor) = dir
                        .ancestors()
                        .skip(1)
                        .take_while(|a| a.starts_with(root))
                        .find(|a| is_dir(a))
                    else {
                        break;
                    };
                    (ancestor.to_owned(), RecursiveMode::NonRecursive, false)
                };
                let placed = !self.watched.contains(&at);
                if placed || (arms && mode == RecursiveMode::Recursive) {
                    if let Err(e) = w.watcher.watch(&at, mode) {
                        failed = Some((at, e));
                        break;
                    }
                    self.watched.insert(at);
                }
                if arms {
                    self.armed.insert(i);
                    break;
                }
                if !placed {
                    break;
                }
            }
            if failed.is_some() {
                break;
            }
        }
        if let Some((at, e)) = failed {
            tracing::warn!(dir = %at.display(), error = %e, "directory notifications unavailable; waiting by rescans");
            self.watch = None;
        }
    }

    /// Forgets armed targets whose directory is gone (removed, maybe made
    /// again: a new directory needs a new watch).
    fn check_armed(&mut self) {
        let gone: Vec<usize> = self
            .armed
            .iter()
            .copied()
            .filter(|&i| {
                self.targets[i]
                    .watch_dir()
                    .is_none_or(|(dir, _)| !is_dir(dir))
            })
            .collect();
        for i in gone {
            self.armed.remove(&i);
            if let Some((dir, _)) = self.targets[i].watch_dir() {
                self.watched.remove(dir);
            }
        }
    }

    fn lose_watch(&mut self) {
        tracing::warn!("directory notifications ended; waiting by rescans");
        self.watch = None;
    }
}

fn start() -> Option<Watch> {
    let (tx, rx) = mpsc::channel();
    match notify::recommended_watcher(tx) {
        Ok(watcher) => Some(Watch {
            watcher,
            events: rx,
        }),
        Err(e) => {
            tracing::warn!(error = %e, "directory notifications unavailable; waiting by rescans");
            None
        }
    }
}

/// Returns true when a real directory (not a symlink) is at `path`.
fn is_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

#[cfg(test)]
mod tests {
    //! What the watcher makes of each notification, fed by the test in
    //! place of the notification thread (the real watch is set up, its
    //! events go nowhere). No timing is asserted: [`GUARD`] only bounds a
    //! wait that should return at once, so a broken watcher fails rather
    //! than hangs.

    use std::sync::mpsc::Sender;
    use std::thread;

    use notify::event::{CreateKind, DataChange, Flag, ModifyKind, RemoveKind};
    use notify::{Event, EventKind};

    use super::*;
    use crate::state::Channel;

    type Feed = Sender<notify::Result<Event>>;

    /// Long enough that no test is woken by a rescan it did not ask for.
    const LONG: Duration = Duration::from_secs(600);
    const GUARD: Duration = Duration::from_secs(10);

    fn fed(state: &StateDir, targets: impl IntoIterator<Item = WatchTarget>) -> (Watcher, Feed) {
        let mut w = Watcher::new(
            state,
            targets,
            WatchConfig {
                notify: true,
                rescan_interval: LONG,
            },
        )
        .unwrap();
        let (tx, rx) = mpsc::channel();
        w.watch.as_mut().expect("notifications available").events = rx;
        (w, tx)
    }

    fn event(kind: EventKind, path: &Path) -> notify::Result<Event> {
        Ok(Event::new(kind).add_path(path.to_owned()))
    }

    fn created(path: &Path) -> notify::Result<Event> {
        event(EventKind::Create(CreateKind::Any), path)
    }

    fn rescan_asked() -> notify::Result<Event> {
        Ok(Event::new(EventKind::Other).set_flag(Flag::Rescan))
    }

    fn open() -> (tempfile::TempDir, StateDir) {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path()).unwrap();
        (tmp, state)
    }

    /// Regression: reads woke every watcher of their folder (notify
    /// reports opens), so a live view that reads on a wake woke itself.
    #[test]
    fn opening_or_reading_a_file_wakes_no_one() {
        use notify::event::{AccessKind, AccessMode};
        let (_tmp, state) = open();
        let dir = state.channel_dir(Channel::new("bus")).unwrap();
        let file = dir.join("a.json").unwrap();
        let (mut w, feed) = fed(&state, [WatchTarget::Dir(dir.clone())]);
        for kind in [
            AccessKind::Open(AccessMode::Read),
            AccessKind::Read,
            AccessKind::Close(AccessMode::Read),
        ] {
            feed.send(event(EventKind::Access(kind), &file)).unwrap();
        }
        assert_eq!(w.wait(Duration::from_millis(200)), WatchWake::TimedOut);
        let written = AccessKind::Close(AccessMode::Write);
        feed.send(event(EventKind::Access(written), &file)).unwrap();
        assert_eq!(w.wait(GUARD), WatchWake::Changed(vec![file.to_path_buf()]));
    }

    #[test]
    fn an_overflow_or_an_error_asks_for_a_rescan() {
        let (_tmp, state) = open();
        let dir = state.channel_dir(Channel::new("bus")).unwrap();
        let (mut w, feed) = fed(&state, [WatchTarget::Dir(dir.clone())]);
        feed.send(rescan_asked()).unwrap();
        assert_eq!(w.wait(GUARD), WatchWake::Rescan);
        feed.send(Err(notify::Error::generic("queue overflow")))
            .unwrap();
        assert_eq!(w.wait(GUARD), WatchWake::Rescan);
        assert!(w.is_notified());
    }

    /// The same, for a notification that comes while `wait` blocks (the
    /// feeder keeps its end open, so only the event can wake the wait).
    #[test]
    fn a_rescan_asked_for_during_a_wait_wakes_it() {
        let (_tmp, state) = open();
        let dir = state.channel_dir(Channel::new("bus")).unwrap();
        let (mut w, feed) = fed(&state, [WatchTarget::Dir(dir.clone())]);
        let feeder = thread::spawn(move || {
            thread::sleep(Duration::from_millis(200));
            feed.send(rescan_asked()).unwrap();
            feed
        });
        assert_eq!(w.wait(GUARD), WatchWake::Rescan);
        drop(feeder.join().unwrap());
    }

    /// Notifications that end (their thread gone) are a rescan, and the
    /// watcher goes on by rescans alone, before a wait or during one.
    #[test]
    fn notifications_that_end_fall_back_to_rescans() {
        let (_tmp, state) = open();
        let dir = state.channel_dir(Channel::new("bus")).unwrap();
        let (mut w, feed) = fed(&state, [WatchTarget::Dir(dir.clone())]);
        drop(feed);
        assert_eq!(w.wait(GUARD), WatchWake::Rescan);
        assert!(!w.is_notified());

        let (mut w, feed) = fed(&state, [WatchTarget::Dir(dir.clone())]);
        let feeder = thread::spawn(move || {
            thread::sleep(Duration::from_millis(200));
            drop(feed);
        });
        assert_eq!(w.wait(GUARD), WatchWake::Rescan);
        assert!(!w.is_notified());
        feeder.join().unwrap();
    }

    /// For a target not there yet, a directory appearing on the way to it
    /// is reported (the caller looks); anything else beside that way is not.
    #[test]
    fn only_the_way_to_a_target_not_there_yet_is_reported() {
        let (_tmp, state) = open();
        let inbox = state.root_path().join_static("mail").join_static("inbox");
        let (mut w, feed) = fed(&state, [WatchTarget::Dir(inbox.clone())]);
        let root = state.root().to_owned();
        feed.send(created(&root.join("other.json"))).unwrap();
        feed.send(created(&root.join("mail"))).unwrap();
        assert_eq!(w.wait(GUARD), WatchWake::Changed(vec![root.join("mail")]));
    }

    /// Removing another entry of a file target's directory is not
    /// reported; removing the directory itself is, and the target is then
    /// watched again through the way to it.
    #[test]
    fn a_removal_is_reported_for_the_target_or_its_directory_only() {
        let (_tmp, state) = open();
        let hooks = state.channel_dir(Channel::new("hooks")).unwrap();
        let mine = hooks.join_static("alpha.json");
        let (mut w, feed) = fed(&state, [WatchTarget::File(mine.clone())]);
        assert!(w.armed.contains(&0));
        feed.send(event(
            EventKind::Remove(RemoveKind::File),
            &hooks.join_static("beta.json"),
        ))
        .unwrap();
        feed.send(event(
            EventKind::Modify(ModifyKind::Data(DataChange::Any)),
            &mine,
        ))
        .unwrap();
        assert_eq!(w.wait(GUARD), WatchWake::Changed(vec![mine.to_path_buf()]));
        assert!(w.armed.contains(&0));

        std::fs::remove_dir(&hooks).unwrap();
        feed.send(event(EventKind::Remove(RemoveKind::Folder), &hooks))
            .unwrap();
        assert_eq!(w.wait(GUARD), WatchWake::Changed(vec![hooks.to_path_buf()]));
        assert!(w.armed.is_empty());
        assert!(!w.watched.contains(hooks.as_ref() as &Path));
        assert!(w.watched.contains(state.root()));
    }

    /// A target directory gone without a notification saying so (lost) is
    /// found gone at the rescan, and its new directory is watched anew.
    #[test]
    fn a_rescan_rearms_a_directory_gone_unnoticed() {
        let (_tmp, state) = open();
        let queue = state.channel_dir(Channel::new("bus")).unwrap();
        let (mut w, feed) = fed(&state, [WatchTarget::Dir(queue.clone())]);
        assert!(w.armed.contains(&0));
        std::fs::remove_dir(&queue).unwrap();
        feed.send(rescan_asked()).unwrap();
        assert_eq!(w.wait(GUARD), WatchWake::Rescan);
        assert!(w.armed.is_empty());
        assert!(!w.watched.contains(queue.as_ref() as &Path));
        state.ensure_dir(&queue).unwrap();
        feed.send(rescan_asked()).unwrap();
        assert_eq!(w.wait(GUARD), WatchWake::Rescan);
        assert!(w.armed.contains(&0));
        assert!(w.watched.contains(queue.as_ref() as &Path));
    }

    #[test]
    fn a_watcher_shows_its_targets_and_its_watch() {
        let (_tmp, state) = open();
        let dir = state.channel_dir(Channel::new("bus")).unwrap();
        let targets = [
            WatchTarget::Dir(dir.clone()),
            WatchTarget::Tree(dir.clone()),
        ];
        let (w, _feed) = fed(&state, targets.clone());
        assert_eq!(w.targets(), targets);
        assert!(format!("{w:?}").contains("watch: Some(Watch)"), "{w:?}");
    }

    /// A target added on a second root (a mail folder outside the state
    /// root) is watched as one of the first root's: through its nearest
    /// existing ancestor under its own root until it appears, then itself.
    #[test]
    fn a_target_on_another_root_is_watched_once_added() {
        let (_tmp, state) = open();
        let (_other_tmp, other) = open();
        let mut w = Watcher::new(
            &state,
            [WatchTarget::Dir(state.channel(Channel::new("bus")))],
            WatchConfig {
                notify: true,
                rescan_interval: LONG,
            },
        )
        .unwrap();
        let inbox = other.root_path().join("inbox").unwrap().join("a").unwrap();
        // A target outside the root it is added with is refused, and left out.
        let refused = w.add(&state, [WatchTarget::Dir(inbox.clone())]);
        assert!(
            matches!(refused, Err(crate::Error::OutsideRoot { .. })),
            "{refused:?}"
        );
        assert_eq!(w.targets().len(), 1);
        w.add(&other, [WatchTarget::Dir(inbox.clone())]).unwrap();
        assert!(w.watched.contains(other.root()), "{w:?}");
        other.ensure_dir(&inbox).unwrap();
        assert_ne!(w.wait(GUARD), WatchWake::TimedOut);
        // Armed on the inbox itself now: a message in it is reported.
        let message = inbox.join("m-1.json").unwrap();
        other.write_bytes(&message, b"{}").unwrap();
        let deadline = Instant::now() + GUARD;
        loop {
            match w.wait(GUARD) {
                WatchWake::Changed(paths) if paths.contains(&message.to_path_buf()) => break,
                other => assert!(
                    Instant::now() < deadline,
                    "no wake for the message: {other:?}"
                ),
            }
        }
    }
}
