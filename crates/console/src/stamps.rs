//! What changed under the state root since the last look, from directory
//! stamps: so that a rescan rereads only the areas that changed.
//!
//! Every create, rename into or out of, and unlink in a directory moves its
//! stamp (device, inode, mtime, ctime; see the mail's gate cache, which
//! relies on the same). Every channel writes its files by a rename or an
//! exclusive create, so a file's change shows in its directory's stamp,
//! except the logs that are appended in place: those are stamped as files
//! ([`APPENDED`]). A directory's subdirectories are listed again only when
//! its own stamp moved, so a look at an idle root is one `stat` per
//! directory, whatever the number of files. A stamp younger than [`RACY`]
//! is not trusted (two changes within one tick of the filesystem's clock
//! leave one stamp): its area counts as changed until it settles.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chipset::store::{Stat, StateDir, StatePath};

/// A stamp younger than this is not trusted to show every change.
pub(crate) const RACY: Duration = Duration::from_secs(2);

/// Files appended in place (no rename moves their directory's stamp) that
/// a view shows: the mail manifest (the directory's last seen) and the
/// pool's log (dones and releases).
const APPENDED: [&str; 2] = ["mail/manifest.jsonl", "pool/log.jsonl"];

/// Returns true for a directory whose subdirectories no view reads, and
/// which may hold many files: its stamp is kept, its listing is not read
/// (an inbox, an event queue, the mail archive, which the open requests
/// stamp themselves).
fn leaf(rel: &str) -> bool {
    let depth = rel.matches('/').count();
    rel == "mail/archive"
        || (rel.starts_with("mail/inbox/") && depth == 2)
        || (rel.starts_with("bus/") && depth >= 2)
}

/// The most directories followed: a tree larger than this is cut, and
/// the areas below the cut count as changed at every look.
const MAX_DIRS: usize = 100_000;

/// What one directory looked like.
#[derive(Debug, Clone)]
struct Seen {
    stamp: Option<Stat>,
    subdirs: Vec<String>,
}

/// The stamps of the root's directories at the last look.
#[derive(Debug, Default)]
pub(crate) struct Stamps {
    /// By path relative to the root, `/`-separated (`mail/inbox/alice`).
    dirs: BTreeMap<String, Seen>,
    files: BTreeMap<&'static str, Option<Stat>>,
    /// False until the first look: then everything is new.
    looked: bool,
}

/// The directories (relative, `/`-separated) that changed since the last
/// look, and whether the walk was complete.
#[derive(Debug, Default)]
pub(crate) struct Changed {
    paths: BTreeSet<String>,
    everything: bool,
}

impl Changed {
    /// Returns a change set that says everything changed.
    pub(crate) fn everything() -> Self {
        Changed {
            paths: BTreeSet::new(),
            everything: true,
        }
    }

    /// Returns true when anything at or below `prefix` (relative,
    /// `/`-separated, no trailing slash) changed.
    pub(crate) fn under(&self, prefix: &str) -> bool {
        self.everything
            || self.paths.iter().any(|p| {
                p == prefix
                    || (p.starts_with(prefix) && p.as_bytes().get(prefix.len()) == Some(&b'/'))
            })
    }

    /// Returns true when nothing changed.
    pub(crate) fn is_empty(&self) -> bool {
        !self.everything && self.paths.is_empty()
    }
}

impl Stamps {
    /// Looks at every directory known (and at new ones) and returns what
    /// changed since the last look. A directory that cannot be looked at
    /// counts as changed (the channel's own read then says why).
    pub(crate) fn look(&mut self, state: &StateDir) -> Changed {
        let mut changed = Changed::default();
        if !self.looked {
            changed.everything = true;
            self.looked = true;
        }
        let now = SystemTime::now();
        let mut next: BTreeMap<String, Seen> = BTreeMap::new();
        let mut todo: Vec<String> = vec![String::new()];
        while let Some(rel) = todo.pop() {
            if next.len() >= MAX_DIRS {
                changed.everything = true;
                break;
            }
            let Some(path) = state_path(state, &rel) else {
                changed.paths.insert(rel);
                continue;
            };
            if rel.is_empty() {
                // The root has no stamp of its own here (a stat names a
                // path below it); its few channel directories are listed.
                let subdirs = state.list_dirs(&path).unwrap_or_default();
                todo.extend(subdirs.iter().cloned());
                next.insert(
                    rel,
                    Seen {
                        stamp: None,
                        subdirs,
                    },
                );
                continue;
            }
            let stamp = state.stat(&path).ok().flatten();
            let known = self.dirs.get(&rel);
            let same =
                known.is_some_and(|k| k.stamp == stamp) && stamp.is_some_and(|s| settled(&s, now));
            let subdirs = match known {
                Some(k) if same => k.subdirs.clone(),
                _ => {
                    changed.paths.insert(rel.clone());
                    match stamp {
                        Some(s) if s.is_dir() && !leaf(&rel) => {
                            state.list_dirs(&path).unwrap_or_default()
                        }
                        _ => Vec::new(),
                    }
                }
            };
            todo.extend(subdirs.iter().map(|d| format!("{rel}/{d}")));
            next.insert(rel, Seen { stamp, subdirs });
        }
        // A directory that went away changed too.
        for gone in self.dirs.keys().filter(|k| !next.contains_key(*k)) {
            changed.paths.insert(gone.clone());
        }
        self.dirs = next;
        for file in APPENDED {
            let stamp = state_path(state, file).and_then(|p| state.stat(&p).ok().flatten());
            let known = self.files.insert(file, stamp);
            if known != Some(stamp) || stamp.is_some_and(|s| !settled(&s, now)) {
                changed.paths.insert(file.to_owned());
            }
        }
        changed
    }
}

/// Returns the state path of `rel` (`/`-separated segments), if every
/// segment is one a state path may hold.
fn state_path(state: &StateDir, rel: &str) -> Option<StatePath> {
    let mut path = state.root_path();
    for segment in rel.split('/').filter(|s| !s.is_empty()) {
        path = path.join(segment).ok()?;
    }
    Some(path)
}

/// Returns true when `stat`'s modification time is old enough to trust.
pub(crate) fn settled(stat: &Stat, now: SystemTime) -> bool {
    let (secs, nanos) = stat.mtime;
    let Ok(secs) = u64::try_from(secs) else {
        return false;
    };
    let at = UNIX_EPOCH + Duration::new(secs, u32::try_from(nanos).unwrap_or(0));
    now.duration_since(at).is_ok_and(|age| age >= RACY)
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "the test plants directories and files as another program would"
)]
mod tests {
    use super::*;

    fn changed(paths: &[&str]) -> Changed {
        Changed {
            paths: paths.iter().map(|p| (*p).to_owned()).collect(),
            everything: false,
        }
    }

    #[test]
    fn inboxes_queues_and_the_archive_are_not_listed() {
        assert!(leaf("mail/inbox/alice"));
        assert!(leaf("mail/archive"));
        assert!(leaf("bus/alice/queue"));
        assert!(!leaf("mail/inbox"));
        assert!(!leaf("bus/alice"));
        assert!(!leaf("hooks"));
    }

    #[test]
    fn under_matches_whole_segments() {
        let c = changed(&["mail/inbox/alice", "hooks"]);
        assert!(c.under("mail"));
        assert!(c.under("mail/inbox"));
        assert!(c.under("hooks"));
        assert!(!c.under("hook"));
        assert!(!c.under("mail/inbox/al"));
        assert!(!c.under("bus"));
        assert!(Changed::everything().under("bus"));
        assert!(changed(&[]).is_empty());
    }

    #[test]
    fn an_idle_root_is_unchanged_and_a_new_file_is_seen() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path()).unwrap();
        let hooks = tmp.path().join("hooks");
        std::fs::create_dir_all(hooks.join("deep")).unwrap();
        let mut stamps = Stamps::default();
        assert!(stamps.look(&state).everything, "the first look sees all");
        // Make the stamps old enough to trust.
        let old =
            std::fs::FileTimes::new().set_modified(SystemTime::now() - Duration::from_secs(60));
        for dir in [&hooks, &hooks.join("deep")] {
            std::fs::File::open(dir).unwrap().set_times(old).unwrap();
        }
        let again = stamps.look(&state);
        // The times were set after the first look: every stamp moved once.
        assert!(again.under("hooks/deep"), "{again:?}");
        assert!(stamps.look(&state).is_empty(), "idle");
        std::fs::write(hooks.join("deep/a.json"), b"{}").unwrap();
        let c = stamps.look(&state);
        assert!(c.under("hooks/deep") && !c.under("mail"), "{c:?}");
        std::fs::remove_dir_all(hooks.join("deep")).unwrap();
        let c = stamps.look(&state);
        assert!(c.under("hooks/deep") && c.under("hooks"), "{c:?}");
    }
}
