//! A backend that records every call and replays the power cuts it allows.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use chipset_store::{IoBackend, RealIo, SyncOrder};

/// Above this many combinations of choices at one crash point, the
/// enumeration is cut down (see [`RecordIo::crash_states`]).
const FULL_ENUMERATION_LIMIT: usize = 256;

/// What a path holds in a [`CrashState`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Entry {
    /// A directory.
    Dir,
    /// A file with these bytes.
    File(Vec<u8>),
}

/// One state a power cut could leave: what the tree under the recorded root
/// holds, and which operations had returned before the cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrashState {
    /// How many recorded calls had been made when the power went.
    pub crash_point: usize,
    /// The labels of [`RecordIo::mark`]s made before the cut: the operations
    /// that had returned.
    pub returned: Vec<String>,
    /// Every path (relative to the root) and what it holds.
    pub entries: BTreeMap<PathBuf, Entry>,
}

impl CrashState {
    /// Writes the state into `root` (which must be empty or missing).
    ///
    /// # Errors
    ///
    /// Any I/O error.
    pub fn materialize(&self, root: &Path) -> io::Result<()> {
        fs::create_dir_all(root)?;
        for (rel, entry) in &self.entries {
            let path = root.join(rel);
            match entry {
                Entry::Dir => fs::create_dir_all(&path)?,
                Entry::File(bytes) => fs::write(&path, bytes)?,
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
enum Event {
    /// A new file (fresh inode) named `path`.
    Create { path: PathBuf, ino: u64 },
    /// After a write or truncate, the file holds `content`.
    Data { ino: u64, content: Vec<u8> },
    /// The file's data was synced.
    SyncFile { ino: u64 },
    /// The file's data was written back without a cache flush
    /// (`sync_file_range`): durable with the journal's next commit, on a
    /// journalled recorder.
    WriteBack { ino: u64 },
    /// The directory's entries were synced.
    SyncDir { dir: PathBuf },
    /// `from` was renamed to `to` (replacing it).
    Rename {
        from: PathBuf,
        to: PathBuf,
        ino: u64,
    },
    /// `to` was linked to the file.
    Link { to: PathBuf, ino: u64 },
    /// A directory was made.
    Mkdir { path: PathBuf },
    /// A name was removed (file or empty directory).
    Remove { path: PathBuf },
    /// A test's label: the operation before it returned.
    Mark(String),
}

#[derive(Debug, Default)]
struct Log {
    events: Vec<Event>,
    /// Real (dev, ino) of live files to recorder ids.
    ids: HashMap<(u64, u64), u64>,
    next_id: u64,
    baseline: BTreeMap<PathBuf, Node>,
    contents: HashMap<u64, Vec<u8>>,
    /// Whether the recorded filesystem commits a journal in order
    /// ([`SyncOrder::WriteBackThenDir`]).
    journalled: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    Dir,
    File(u64),
}

/// A backend that performs every call through [`RealIo`] and records it,
/// with the contents of every file after each write, so that
/// [`RecordIo::crash_states`] can list the states a power cut could leave.
#[derive(Debug)]
pub struct RecordIo {
    root: PathBuf,
    order: SyncOrder,
    log: Mutex<Log>,
}

impl RecordIo {
    /// Starts recording changes under `root`, taking what is there now as
    /// durable (the baseline), as on a filesystem with no ordering beyond
    /// the rules of the crate docs: the store publishes in
    /// [`SyncOrder::FileThenDir`].
    ///
    /// # Errors
    ///
    /// When the tree cannot be read.
    pub fn start(root: &Path) -> io::Result<Arc<Self>> {
        Self::start_with_order(root, SyncOrder::FileThenDir)
    }

    /// Starts recording as [`RecordIo::start`] does, telling the store to
    /// publish in `order`. With [`SyncOrder::WriteBackThenDir`] the
    /// recorder models a journalling filesystem that commits in order (ext4
    /// with a journal, XFS): data written back ([`IoBackend::write_back`])
    /// becomes durable with the next commit, which is any later sync (of a
    /// file or a directory) or any later namespace change a crash state
    /// keeps (a commit carried it, after the write-back completed). Until
    /// then it is unsynced data, lost, kept or torn like any other.
    ///
    /// # Errors
    ///
    /// When the tree cannot be read.
    pub fn start_with_order(root: &Path, order: SyncOrder) -> io::Result<Arc<Self>> {
        let root = fs::canonicalize(root)?;
        let mut log = Log {
            journalled: order == SyncOrder::WriteBackThenDir,
            ..Log::default()
        };
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            for entry in fs::read_dir(&dir)? {
                let entry = entry?;
                let path = entry.path();
                let meta = fs::symlink_metadata(&path)?;
                let rel = path.strip_prefix(&root).unwrap_or(&path).to_owned();
                if meta.is_dir() {
                    log.baseline.insert(rel, Node::Dir);
                    stack.push(path);
                } else if meta.is_file() {
                    let id = log.next_id;
                    log.next_id += 1;
                    log.ids.insert((meta.dev(), meta.ino()), id);
                    log.contents.insert(id, fs::read(&path)?);
                    log.baseline.insert(rel, Node::File(id));
                }
            }
        }
        Ok(Arc::new(RecordIo {
            root,
            order,
            log: Mutex::new(log),
        }))
    }

    fn lock(&self) -> MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that the operation labelled `label` has returned: states cut
    /// after this point list it in [`CrashState::returned`].
    pub fn mark(&self, label: impl Into<String>) {
        self.lock().events.push(Event::Mark(label.into()));
    }

    /// Returns how many calls were recorded.
    pub fn calls(&self) -> usize {
        self.lock()
            .events
            .iter()
            .filter(|e| !matches!(e, Event::Mark(_)))
            .count()
    }

    fn rel(&self, path: &Path) -> PathBuf {
        path.strip_prefix(&self.root).unwrap_or(path).to_owned()
    }

    fn id_of(log: &mut Log, meta: &fs::Metadata) -> u64 {
        let key = (meta.dev(), meta.ino());
        if let Some(id) = log.ids.get(&key) {
            return *id;
        }
        let id = log.next_id;
        log.next_id += 1;
        log.ids.insert(key, id);
        id
    }

    fn record_data(&self, file: &File) -> io::Result<()> {
        let meta = file.metadata()?;
        let mut content = vec![0u8; meta.len() as usize];
        let mut at = 0;
        while at < content.len() {
            let n = file.read_at(&mut content[at..], at as u64)?;
            if n == 0 {
                content.truncate(at);
                break;
            }
            at += n;
        }
        let mut log = self.lock();
        let ino = Self::id_of(&mut log, &meta);
        log.events.push(Event::Data { ino, content });
        Ok(())
    }

    /// Renames `from` to `to` by `rename` (replacing or not), then records it.
    fn record_rename(
        &self,
        from: &Path,
        to: &Path,
        rename: impl FnOnce() -> io::Result<()>,
    ) -> io::Result<()> {
        let meta = fs::symlink_metadata(from)?;
        rename()?;
        let mut log = self.lock();
        let ino = Self::id_of(&mut log, &meta);
        let (from, to) = (self.rel(from), self.rel(to));
        log.events.push(Event::Rename { from, to, ino });
        Ok(())
    }

    /// Returns the states a power cut at any point of the recording could
    /// leave, without duplicates, under these rules (the crate docs'
    /// Durability section):
    ///
    /// - The cut comes between two calls (every call boundary is tried).
    /// - A file's data written since its last sync is, per file, all lost,
    ///   all kept, or (when it only grew) kept up to half of the new bytes.
    /// - The namespace changes (create, rename, link, mkdir, remove) in a
    ///   directory since its last sync are, per directory, all lost or all
    ///   kept. A rename between directories is two changes (the new name in
    ///   the destination, the removal in the source); the removal is kept
    ///   only with the new name, so a file is never in neither place.
    /// - A name whose directory is lost is lost with it.
    ///
    /// The choices at one crash point are enumerated in full when there are
    /// at most 256 combinations; beyond that, all-lost, all-kept, and every
    /// single choice flipped from each of those two.
    pub fn crash_states(&self) -> Vec<CrashState> {
        let log = self.lock();
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for k in 0..=log.events.len() {
            // A cut just before a mark is the same cut as just after it,
            // which knows one more operation returned: take only that one.
            if k < log.events.len() && matches!(log.events[k], Event::Mark(_)) {
                continue;
            }
            for state in states_at(&log, k) {
                if seen.insert((state.entries.clone(), state.returned.len())) {
                    out.push(state);
                }
            }
        }
        out
    }
}

/// The directory a namespace change lives in.
fn dir_of(p: &Path) -> PathBuf {
    p.parent().map(Path::to_owned).unwrap_or_default()
}

fn states_at(log: &Log, k: usize) -> Vec<CrashState> {
    let events = &log.events[..k];
    // Which namespace changes are synced: a SyncDir of their directory after them.
    let synced_dir_after = |i: usize, dir: &Path| {
        events[i + 1..]
            .iter()
            .any(|e| matches!(e, Event::SyncDir { dir: d } if d == dir))
    };
    let mut dirs: BTreeSet<PathBuf> = BTreeSet::new();
    for (i, e) in events.iter().enumerate() {
        let touched: Vec<PathBuf> = match e {
            Event::Create { path, .. } | Event::Mkdir { path } | Event::Remove { path } => {
                vec![dir_of(path)]
            }
            Event::Link { to, .. } => vec![dir_of(to)],
            Event::Rename { from, to, .. } => vec![dir_of(from), dir_of(to)],
            _ => vec![],
        };
        for d in touched {
            if !synced_dir_after(i, &d) {
                dirs.insert(d);
            }
        }
    }
    // Per file: its synced content and its latest.
    let mut latest: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    let mut synced: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    for (id, c) in &log.contents {
        latest.insert(*id, c.clone());
        synced.insert(*id, c.clone());
    }
    // Journalled: data written back and not yet committed, with the index
    // of its write-back.
    let mut written: BTreeMap<u64, (usize, Vec<u8>)> = BTreeMap::new();
    for (i, e) in events.iter().enumerate() {
        match e {
            Event::Create { ino, .. } => {
                latest.insert(*ino, Vec::new());
                synced.insert(*ino, Vec::new());
            }
            Event::Data { ino, content } => {
                latest.insert(*ino, content.clone());
            }
            Event::WriteBack { ino } if log.journalled => {
                let c = latest.get(ino).cloned().unwrap_or_default();
                written.insert(*ino, (i, c));
            }
            Event::SyncFile { .. } | Event::SyncDir { .. } if log.journalled => {
                // A sync commits the journal, and every write-back before it.
                for (id, (_, c)) in std::mem::take(&mut written) {
                    synced.insert(id, c);
                }
            }
            _ => {}
        }
        if let Event::SyncFile { ino } = e {
            let c = latest.get(ino).cloned().unwrap_or_default();
            synced.insert(*ino, c);
        }
    }
    let mut files: Vec<(u64, Vec<Vec<u8>>)> = Vec::new();
    for (id, l) in &latest {
        let s = synced.get(id).cloned().unwrap_or_default();
        if *l == s {
            continue;
        }
        let mut options = vec![s.clone(), l.clone()];
        if l.len() > s.len() + 1 && l.starts_with(&s) {
            options.push(l[..s.len() + (l.len() - s.len()) / 2].to_vec());
        }
        files.push((*id, options));
    }
    let dirs: Vec<PathBuf> = dirs.into_iter().collect();
    // The choice vectors: for each dir 0/1 (lost/kept), for each file an option index.
    let arity: Vec<usize> = dirs
        .iter()
        .map(|_| 2)
        .chain(files.iter().map(|(_, o)| o.len()))
        .collect();
    let total = arity
        .iter()
        .try_fold(1usize, |acc, a| acc.checked_mul(*a))
        .unwrap_or(usize::MAX);
    let mut choices: Vec<Vec<usize>> = Vec::new();
    if total <= FULL_ENUMERATION_LIMIT {
        let mut c = vec![0usize; arity.len()];
        loop {
            choices.push(c.clone());
            let mut i = 0;
            loop {
                if i == c.len() {
                    break;
                }
                c[i] += 1;
                if c[i] < arity[i] {
                    break;
                }
                c[i] = 0;
                i += 1;
            }
            if i == c.len() {
                break;
            }
        }
    } else {
        let lost = vec![0usize; arity.len()];
        let kept: Vec<usize> = arity.iter().map(|_| 1).collect();
        for base in [lost, kept] {
            choices.push(base.clone());
            for i in 0..arity.len() {
                for v in 0..arity[i] {
                    if v != base[i] {
                        let mut c = base.clone();
                        c[i] = v;
                        choices.push(c);
                    }
                }
            }
        }
    }
    let returned: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::Mark(l) => Some(l.clone()),
            _ => None,
        })
        .collect();
    choices
        .into_iter()
        .map(|c| {
            let keep_dir = |d: &Path| {
                !dirs.iter().any(|x| x == d)
                    || c[dirs.iter().position(|x| x == d).unwrap_or(0)] == 1
            };
            let mut tree = log.baseline.clone();
            // The last namespace change this state keeps: a journal commit
            // carried it, and every write-back before it.
            let mut last_kept: Option<usize> = None;
            for (i, e) in events.iter().enumerate() {
                let kept = |d: &Path| synced_dir_after(i, d) || keep_dir(d);
                let changed = match e {
                    Event::Create { path, .. } | Event::Mkdir { path } | Event::Remove { path } => {
                        Some(dir_of(path))
                    }
                    Event::Link { to, .. } | Event::Rename { to, .. } => Some(dir_of(to)),
                    _ => None,
                };
                if changed.is_some_and(|d| kept(&d)) {
                    last_kept = Some(i);
                }
                match e {
                    Event::Create { path, ino } if kept(&dir_of(path)) => {
                        tree.insert(path.clone(), Node::File(*ino));
                    }
                    Event::Link { to, ino } if kept(&dir_of(to)) => {
                        tree.insert(to.clone(), Node::File(*ino));
                    }
                    Event::Mkdir { path } if kept(&dir_of(path)) => {
                        tree.insert(path.clone(), Node::Dir);
                    }
                    Event::Remove { path } if kept(&dir_of(path)) => {
                        tree.remove(path);
                    }
                    // The removal from the source is kept only with the new name.
                    Event::Rename { from, to, ino } if kept(&dir_of(to)) => {
                        tree.insert(to.clone(), Node::File(*ino));
                        if kept(&dir_of(from)) {
                            tree.remove(from);
                        }
                    }
                    _ => {}
                }
            }
            let content = |id: u64| -> Vec<u8> {
                let Some(i) = files.iter().position(|(f, _)| *f == id) else {
                    return latest.get(&id).cloned().unwrap_or_default();
                };
                let option = c[dirs.len() + i];
                match written.get(&id) {
                    // Committed after its write-back: at least what was written back.
                    Some((w, wc)) if option != 1 && last_kept.is_some_and(|k| k > *w) => wc.clone(),
                    _ => files[i].1[option].clone(),
                }
            };
            let mut entries = BTreeMap::new();
            for (path, node) in &tree {
                let reachable = path
                    .ancestors()
                    .skip(1)
                    .filter(|a| !a.as_os_str().is_empty())
                    .all(|a| tree.get(a) == Some(&Node::Dir));
                if !reachable {
                    continue;
                }
                let entry = match node {
                    Node::Dir => Entry::Dir,
                    Node::File(id) => Entry::File(content(*id)),
                };
                entries.insert(path.clone(), entry);
            }
            CrashState {
                crash_point: events
                    .iter()
                    .filter(|e| !matches!(e, Event::Mark(_)))
                    .count(),
                returned: returned.clone(),
                entries,
            }
        })
        .collect()
}

#[deny(
    clippy::missing_trait_methods,
    reason = "every change is recorded for the replay: a call the trait gains must not pass by"
)]
impl IoBackend for RecordIo {
    fn create_new(&self, path: &Path, append: bool) -> io::Result<File> {
        let file = RealIo.create_new(path, append)?;
        let meta = file.metadata()?;
        let mut log = self.lock();
        let ino = log.next_id;
        log.next_id += 1;
        log.ids.insert((meta.dev(), meta.ino()), ino);
        let path = self.rel(path);
        log.events.push(Event::Create { path, ino });
        Ok(file)
    }

    /// Passed on, not recorded: opening a file changes nothing; the
    /// writes to it are recorded.
    fn open_append(&self, path: &Path) -> io::Result<File> {
        RealIo.open_append(path)
    }

    fn write_all(&self, file: &File, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let r = RealIo.write_all(file, path, bytes);
        self.record_data(file)?;
        r
    }

    fn sync_all(&self, file: &File, path: &Path) -> io::Result<()> {
        RealIo.sync_all(file, path)?;
        let meta = file.metadata()?;
        let mut log = self.lock();
        let ino = Self::id_of(&mut log, &meta);
        log.events.push(Event::SyncFile { ino });
        Ok(())
    }

    fn sync_data(&self, file: &File, path: &Path) -> io::Result<()> {
        self.sync_all(file, path)
    }

    fn write_back(&self, file: &File, path: &Path) -> io::Result<()> {
        RealIo.write_back(file, path)?;
        let meta = file.metadata()?;
        let mut log = self.lock();
        let ino = Self::id_of(&mut log, &meta);
        log.events.push(Event::WriteBack { ino });
        Ok(())
    }

    /// Passed on, not recorded: a started write-back makes nothing
    /// durable; the wait after it ([`IoBackend::write_back`]) is recorded.
    fn start_write_back(&self, file: &File, path: &Path) {
        RealIo.start_write_back(file, path);
    }

    /// No: the calls come on the caller's thread in item order, so that
    /// the log is the same on every run.
    fn concurrent_batch_writes(&self) -> bool {
        false
    }

    fn sync_order(&self, _root: &Path) -> SyncOrder {
        self.order
    }

    fn set_len(&self, file: &File, path: &Path, len: u64) -> io::Result<()> {
        RealIo.set_len(file, path, len)?;
        self.record_data(file)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        RealIo.sync_dir(dir)?;
        let dir = self.rel(dir);
        self.lock().events.push(Event::SyncDir { dir });
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.record_rename(from, to, || RealIo.rename(from, to))
    }

    fn rename_noreplace(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.record_rename(from, to, || RealIo.rename_noreplace(from, to))
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        let meta = fs::symlink_metadata(from)?;
        RealIo.hard_link(from, to)?;
        let mut log = self.lock();
        let ino = Self::id_of(&mut log, &meta);
        let to = self.rel(to);
        log.events.push(Event::Link { to, ino });
        Ok(())
    }

    /// None: the replay knows only named files, so the store writes a
    /// named temp and renames it, and every step is recorded.
    fn create_unnamed(&self, _dir: &Path) -> io::Result<Option<File>> {
        Ok(None)
    }

    /// Never called: [`IoBackend::create_unnamed`] makes no unnamed file.
    fn link_unnamed(&self, _file: &File, _to: &Path) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }

    fn create_dir(&self, path: &Path) -> io::Result<()> {
        RealIo.create_dir(path)?;
        let path = self.rel(path);
        self.lock().events.push(Event::Mkdir { path });
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        RealIo.remove_file(path)?;
        let path = self.rel(path);
        self.lock().events.push(Event::Remove { path });
        Ok(())
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        RealIo.remove_dir(path)?;
        let path = self.rel(path);
        self.lock().events.push(Event::Remove { path });
        Ok(())
    }
}
