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
    /// counts as changed (the channel's own read then says why). With a
    /// `mail` folder kept outside the root, its tree is looked at as
    /// `mail/` ([`Chipset::mail_folder`](chipset::Chipset::mail_folder)).
    pub(crate) fn look(&mut self, state: &StateDir, mail: Option<&StateDir>) -> Changed {
        let places = Places { state, mail };
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
            let Some((state, path)) = places.resolve(&rel) else {
                changed.paths.insert(rel);
                continue;
            };
            if rel.is_empty() || path == state.root_path() {
                // A root has no stamp of its own here (a stat names a
                // path below it); its few directories are listed.
                let mut subdirs = state.list_dirs(&path).unwrap_or_default();
                if rel.is_empty() && mail.is_some() && !subdirs.iter().any(|d| d == "mail") {
                    subdirs.push("mail".to_owned());
                }
                todo.extend(subdirs.iter().map(|d| match rel.as_str() {
                    "" => d.clone(),
                    _ => format!("{rel}/{d}"),
                }));
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
            let stamp = places
                .resolve(file)
                .and_then(|(state, p)| state.stat(&p).ok().flatten());
            let known = self.files.insert(file, stamp);
            if known != Some(stamp) || stamp.is_some_and(|s| !settled(&s, now)) {
                changed.paths.insert(file.to_owned());
            }
        }
        changed
    }
}

/// Where a look reads: the state root, and mail in its own folder.
struct Places<'a> {
    state: &'a StateDir,
    mail: Option<&'a StateDir>,
}

impl<'a> Places<'a> {
    /// Returns the root holding `rel` (`/`-separated segments, relative to
    /// the state root) and its path, if every segment is one a state path
    /// may hold: `mail/…` is in the mail folder when there is one.
    fn resolve(&self, rel: &str) -> Option<(&'a StateDir, StatePath)> {
        let mut segments = rel.split('/').filter(|s| !s.is_empty()).peekable();
        let state = match self.mail {
            Some(folder) if segments.peek() == Some(&"mail") => {
                segments.next();
                folder
            }
            _ => self.state,
        };
        let mut path = state.root_path();
        for segment in segments {
            path = path.join(segment).ok()?;
        }
        Some((state, path))
    }
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

    /// Makes the stamps of `dirs` a minute old: old enough to trust.
    fn age<P: AsRef<std::path::Path>>(dirs: &[P]) {
        let old =
            std::fs::FileTimes::new().set_modified(SystemTime::now() - Duration::from_secs(60));
        for dir in dirs {
            std::fs::File::open(dir).unwrap().set_times(old).unwrap();
        }
    }

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
        assert!(
            stamps.look(&state, None).everything,
            "the first look sees all"
        );
        age(&[hooks.clone(), hooks.join("deep")]);
        let again = stamps.look(&state, None);
        // The times were set after the first look: every stamp moved once.
        assert!(again.under("hooks/deep"), "{again:?}");
        assert!(stamps.look(&state, None).is_empty(), "idle");
        std::fs::write(hooks.join("deep/a.json"), b"{}").unwrap();
        let c = stamps.look(&state, None);
        assert!(c.under("hooks/deep") && !c.under("mail"), "{c:?}");
        std::fs::remove_dir_all(hooks.join("deep")).unwrap();
        let c = stamps.look(&state, None);
        assert!(c.under("hooks/deep") && c.under("hooks"), "{c:?}");
    }

    /// A mail folder outside the root is looked at as `mail/`: a message
    /// in one of its inboxes, or an event appended to its manifest, is a
    /// change under `mail/inbox` or the manifest; the root's own `mail/`
    /// is not read.
    #[test]
    fn a_mail_folder_outside_the_root_is_looked_at_as_mail() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path().join("state")).unwrap();
        let folder = StateDir::open(tmp.path().join("messages")).unwrap();
        let inbox = folder.root().join("inbox/np-executor");
        std::fs::create_dir_all(&inbox).unwrap();
        std::fs::create_dir_all(state.root().join("mail/inbox/other")).unwrap();
        let mut stamps = Stamps::default();
        stamps.look(&state, Some(&folder));
        age(&[folder.root().join("inbox"), inbox.clone()]);
        stamps.look(&state, Some(&folder));
        assert!(stamps.look(&state, Some(&folder)).is_empty(), "idle");
        std::fs::write(inbox.join("m.json"), b"{}").unwrap();
        let c = stamps.look(&state, Some(&folder));
        assert!(c.under("mail/inbox/np-executor"), "{c:?}");
        assert!(!c.under("mail/inbox/other") && !c.under("hooks"), "{c:?}");
        std::fs::write(folder.root().join("manifest.jsonl"), b"{}\n").unwrap();
        let c = stamps.look(&state, Some(&folder));
        assert!(c.under("mail/manifest.jsonl"), "{c:?}");
    }
}
