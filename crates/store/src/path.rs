//! A path inside the state root, made only of validated segments.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::id::segment_rule;

/// The longest single name [`StatePath::join`] accepts, in bytes (Linux's
/// `NAME_MAX`).
pub(crate) const MAX_NAME_LEN: usize = 255;

/// A path inside the state root: a channel's directory
/// ([`StateDir::channel`](crate::StateDir::channel)) and
/// the single segments joined to it with [`StatePath::join`] or
/// [`StatePath::join_id`], each checked by the rules of
/// an id ([`define_id!`](crate::define_id)) (not empty, no `/` or `\`,
/// not `.` or `..`, no leading `.`, no control character; at most
/// 255 bytes). There is no other way to make one (besides
/// [`StateDir::root_path`](crate::StateDir::root_path), the root itself,
/// and [`StatePath::join_static`], a constant of the caller's layout, which
/// may be a channel's own dot-name), so a
/// `StatePath` cannot name anything outside the root, or a store's own
/// dot-file. Every [`StateDir`](crate::StateDir) method that takes a path
/// takes a `&StatePath`; a bare [`Path`] does not compile:
///
/// ```compile_fail
/// use chipset_store::StateDir;
/// let tmp = tempfile::tempdir()?;
/// let state = StateDir::open(tmp.path())?;
/// // A joined `&Path`, inside the root or not, is not a `StatePath`.
/// state.read_bytes(&state.root().join("../../etc/passwd"))?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// It derefs to [`Path`] for display and for building names to show; a
/// [`PathBuf`] made that way is only a path again.
///
/// ```
/// use chipset_store::{Channel, StateDir};
/// let tmp = tempfile::tempdir()?;
/// let state = StateDir::open(tmp.path())?;
/// let dir = state.channel(Channel::new("reviews"));
/// let file = dir.join("r-1.json")?;
/// state.write_json(&file, &serde_json::json!({"ok": true}))?;
/// assert!(file.starts_with(state.root()));
/// assert!(dir.join("../etc").is_err());
/// assert!(dir.join(".hidden").is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StatePath {
    path: PathBuf,
}

impl StatePath {
    /// The kind of value, as named in errors.
    const KIND: &'static str = "path segment";

    /// Wraps a path the store built from its root and checked names.
    pub(crate) fn from_checked(path: PathBuf) -> StatePath {
        StatePath { path }
    }

    /// Returns this path with one more segment.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidId`] (kind `path segment`) when `segment` is not one
    /// safe path segment.
    pub fn join(&self, segment: impl AsRef<str>) -> Result<StatePath> {
        let segment = segment.as_ref();
        Self::check_segment(segment)?;
        Ok(StatePath {
            path: self.path.join(segment),
        })
    }

    /// Checks that `segment` is one safe path segment, as
    /// [`StatePath::join`] does.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidId`] (kind `path segment`) when it is not.
    pub(crate) fn check_segment(segment: &str) -> Result<()> {
        match segment_rule(segment, MAX_NAME_LEN) {
            Some(rule) => Err(Error::InvalidId {
                kind: Self::KIND,
                value: segment.to_owned(),
                rule,
            }),
            None => Ok(()),
        }
    }

    /// Returns this path with `{id}{suffix}` joined, `id` being a validated
    /// id (at most 128 bytes, one safe
    /// segment) and `suffix` a fixed ending such as `".json"` or `""`:
    /// infallible, since the two together are always one safe segment.
    ///
    /// # Panics
    ///
    /// When `suffix` is over 64 bytes or holds `/`, `\`, NUL or another
    /// control character: a bug in the caller, whose suffix is a constant.
    pub fn join_id(&self, id: &impl Segment, suffix: &'static str) -> StatePath {
        assert!(
            suffix.len() <= 64
                && !suffix.contains(['/', '\\'])
                && !suffix.chars().any(char::is_control),
            "StatePath::join_id: suffix {suffix:?} is not a safe file-name ending"
        );
        StatePath {
            path: self.path.join(format!("{}{suffix}", id.segment())),
        }
    }

    /// Returns this path with `name`, a constant of the caller's layout
    /// (`"witness"`, `"log.jsonl"`, or a dot-name such as mail's `.gate`
    /// cache folder, for a channel's own hidden files, which listings skip
    /// and other programs ignore), joined: infallible, as the constant is
    /// checked on every call and a bad one is a bug, not input. The
    /// store's own dot-names stay out of reach: `.quarantine` and dot-names
    /// ending in `.lock` or `.tmp` are refused.
    ///
    /// # Panics
    ///
    /// When `name` (after a leading `.`) is not one safe path segment (the
    /// rules of [`StatePath::join`]), or when it is one of the store's own
    /// dot-names: a bug in the caller, whose name is a constant.
    pub fn join_static(&self, name: &'static str) -> StatePath {
        match name.strip_prefix('.') {
            None => {
                if let Some(rule) = segment_rule(name, MAX_NAME_LEN) {
                    panic!("StatePath::join_static: {name:?} {rule}");
                }
            }
            Some(rest) => {
                if let Some(rule) = segment_rule(rest, MAX_NAME_LEN - 1) {
                    panic!("StatePath::join_static: {name:?} {rule}");
                }
                assert!(
                    name != crate::state::QUARANTINE_DIR
                        && !name.ends_with(".lock")
                        && !name.ends_with(".tmp"),
                    "StatePath::join_static: {name:?} is the store's own name"
                );
            }
        }
        StatePath {
            path: self.path.join(name),
        }
    }

    /// Returns the path.
    pub fn as_path(&self) -> &Path {
        &self.path
    }

    /// Returns the owned path.
    pub fn into_path_buf(self) -> PathBuf {
        self.path
    }
}

impl Deref for StatePath {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for StatePath {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl Borrow<Path> for StatePath {
    fn borrow(&self) -> &Path {
        &self.path
    }
}

impl From<StatePath> for PathBuf {
    fn from(path: StatePath) -> PathBuf {
        path.path
    }
}

impl From<&StatePath> for PathBuf {
    fn from(path: &StatePath) -> PathBuf {
        path.path.clone()
    }
}

impl fmt::Debug for StatePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.path, f)
    }
}

impl PartialEq<Path> for StatePath {
    fn eq(&self, other: &Path) -> bool {
        self.path == other
    }
}

impl PartialEq<PathBuf> for StatePath {
    fn eq(&self, other: &PathBuf) -> bool {
        &self.path == other
    }
}

impl PartialEq<StatePath> for PathBuf {
    fn eq(&self, other: &StatePath) -> bool {
        self == &other.path
    }
}

impl PartialEq<StatePath> for Path {
    fn eq(&self, other: &StatePath) -> bool {
        self == other.path
    }
}

/// A value already checked as one safe path segment: every id made with
/// [`define_id!`](crate::define_id) ([`AgentId`](crate::AgentId),
/// [`TaskId`](crate::TaskId), a channel's own). Sealed: only the store and
/// its macro implement it.
pub trait Segment: crate::__private::Sealed {
    /// Returns the segment.
    fn segment(&self) -> &str;
}

/// Returns `rel`, `/`-separated names below `state`'s root, as a checked
/// [`StatePath`]: the store's own unit tests' way to name a file by its
/// layout (the other crates' tests use `chipset_testkit::state_path`).
#[cfg(test)]
pub(crate) fn at(state: &crate::StateDir, rel: &str) -> StatePath {
    rel.split('/')
        .fold(state.root_path(), |path, name| path.join(name).unwrap())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AgentId, Channel, StateDir};

    #[test]
    fn joins_only_safe_segments() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path()).unwrap();
        let dir = state.channel(Channel::new("reviews"));
        assert_eq!(dir.as_path(), state.root().join("reviews"));
        let file = dir.join("a.json").unwrap();
        assert_eq!(file.as_path(), state.root().join("reviews/a.json"));
        let long = "a".repeat(255);
        assert!(dir.join(&long).is_ok());
        for (bad, rule) in [
            ("", "must not be empty"),
            ("..", "must not be `.` or `..`"),
            (".lock", "must not start with `.`"),
            ("a/b", "must not contain a path separator (`/` or `\\`)"),
            ("a\nb", "must not contain control characters"),
        ] {
            match dir.join(bad) {
                Err(Error::InvalidId {
                    kind, rule: got, ..
                }) => {
                    assert_eq!((kind, got), ("path segment", rule), "{bad:?}");
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        match dir.join("a".repeat(256)) {
            Err(Error::InvalidId { rule, .. }) => assert_eq!(rule, "must be at most 255 bytes"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            dir.join_static("log.jsonl").as_path(),
            state.root().join("reviews/log.jsonl")
        );
        assert_eq!(
            dir.join_static(".gate").as_path(),
            state.root().join("reviews/.gate")
        );
        for bad in [".quarantine", ".x.lock", ".x.tmp", "..", ".a/b", "."] {
            let joined = std::panic::catch_unwind(|| dir.join_static(bad));
            assert!(joined.is_err(), "{bad:?} was accepted");
        }
        assert_eq!(state.root_path().as_path(), state.root());
        assert_eq!(
            state.root_path().join_static("inbox").as_path(),
            state.root().join("inbox")
        );
        let agent = AgentId::new("a".repeat(128)).unwrap();
        let hook = dir.join_id(&agent, ".json");
        assert_eq!(hook.file_name().unwrap().len(), 133);
        assert_eq!(hook.parent().unwrap(), dir.as_path());
    }

    /// A name of `len` bytes, `'static` as `join_static` wants its constants.
    fn leaked(name: String) -> &'static str {
        Box::leak(name.into_boxed_str())
    }

    #[test]
    fn hidden_names_are_at_most_name_max_with_their_dot() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path()).unwrap();
        let dir = state.channel(Channel::new("reviews"));
        // The dot counts: 255 bytes in all is Linux's NAME_MAX, one more is not.
        let longest = leaked(format!(".{}", "g".repeat(MAX_NAME_LEN - 1)));
        assert_eq!(dir.join_static(longest).file_name().unwrap().len(), 255);
        let too_long = leaked(format!(".{}", "g".repeat(MAX_NAME_LEN)));
        let joined = std::panic::catch_unwind(|| dir.join_static(too_long));
        assert!(joined.is_err(), "a 256-byte hidden name was accepted");
    }

    #[test]
    fn compares_converts_and_shows_as_its_path() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path()).unwrap();
        let dir = state.channel(Channel::new("reviews"));
        let a = dir.join("a.json").unwrap();
        let b = dir.join("b.json").unwrap();
        let a_buf = state.root().join("reviews/a.json");
        let a_path: &Path = &a_buf;

        // Equality with the plain path types, both ways round, and only
        // with the same path.
        assert!(a == *a_path);
        assert!(*a_path == a);
        assert!(a == a_buf);
        assert!(a_buf == a);
        assert!(b != *a_path);
        assert!(*a_path != b);
        assert!(b != a_buf);
        assert!(a_buf != b);

        // Conversions give the same path back.
        assert_eq!(PathBuf::from(&a), a_buf);
        assert_eq!(PathBuf::from(a.clone()), a_buf);
        assert_eq!(a.clone().into_path_buf(), a_buf);
        fn as_ref_of(p: impl AsRef<Path>) -> PathBuf {
            p.as_ref().to_path_buf()
        }
        assert_eq!(as_ref_of(&a), a_buf);
        assert_eq!(&*a, a_path);

        // `Borrow<Path>`: a set of `StatePath`s is searched by plain path.
        let set: std::collections::HashSet<StatePath> = [a.clone()].into();
        assert!(set.contains(a_path));
        assert!(!set.contains(b.as_path()));

        // Debug shows the path as a `Path` shows itself.
        assert_eq!(format!("{a:?}"), format!("{a_path:?}"));
    }
}
