//! The task cache as it is written: borrowed from the walk, the open
//! requests from what the gate returns, and the names of a slice this walk
//! listed from its folder's listing (the same JSON as a [`TaskCache`]).

use super::*;

/// [`TaskCache`] as it is written: its slices borrowed, with the open
/// requests read by this walk borrowed from what the gate returns (the
/// same JSON).
#[derive(Serialize)]
pub(super) struct TaskCacheRef<'a> {
    pub(super) v: u32,
    pub(super) task: &'a TaskId,
    pub(super) inboxes: BTreeMap<&'a AgentId, SliceRef<'a>>,
    pub(super) archive: Option<SliceRef<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) gated: Option<u64>,
}

/// [`Slice`] as it is written (the same JSON): its `requests` are the
/// ones it kept and the ones read by this walk, in name order, and its
/// `files` all but those.
#[derive(Serialize)]
pub(super) struct SliceRef<'a> {
    stamp: Option<Stamp>,
    quarantine: bool,
    files: Files<'a>,
    others: Others<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    listed: Option<Stamp>,
    #[serde(skip_serializing_if = "Requests::is_empty")]
    requests: Requests<'a>,
}

impl<'a> SliceRef<'a> {
    /// `slice` as it is written, with the open requests `new`; its names
    /// from `listing` (the listing of its folder, whose files of `task`
    /// are its own) when the walk did not fill it from there.
    pub(super) fn new(
        slice: &'a Slice,
        listing: Option<&'a [(String, FileEntry)]>,
        task: &'a TaskId,
        new: &'a [(&'a str, &'a Message)],
    ) -> Self {
        let requests = Requests {
            kept: &slice.requests,
            new,
        };
        let names = match listing {
            Some(entries) => Names::Listing { entries, task },
            None => Names::Maps(slice),
        };
        SliceRef {
            stamp: slice.stamp,
            quarantine: slice.quarantine,
            files: Files { names, requests },
            others: Others(names),
            listed: slice.listed,
            requests,
        }
    }
}

/// Where a slice's names are taken from as it is written.
#[derive(Clone, Copy)]
enum Names<'a> {
    /// Its own maps.
    Maps(&'a Slice),
    /// The listing of its folder (sorted by name), for the files of `task`.
    Listing {
        entries: &'a [(String, FileEntry)],
        task: &'a TaskId,
    },
}

impl<'a> Names<'a> {
    /// The task's requests that need a reply and responses, by name.
    fn files(self) -> Box<dyn Iterator<Item = (&'a String, &'a Facts)> + 'a> {
        match self {
            Names::Maps(slice) => Box::new(slice.files.iter()),
            Names::Listing { entries, task } => Box::new(
                entries
                    .iter()
                    .filter(move |(_, e)| e.task == *task)
                    .filter_map(|(name, e)| Some((name, e.facts.as_ref()?))),
            ),
        }
    }

    /// The task's other files, by name, with their parent.
    fn others(self) -> Box<dyn Iterator<Item = (&'a String, &'a Option<MessageId>)> + 'a> {
        match self {
            Names::Maps(slice) => Box::new(slice.others.iter()),
            Names::Listing { entries, task } => Box::new(
                entries
                    .iter()
                    .filter(move |(_, e)| e.task == *task && e.facts.is_none())
                    .map(|(name, e)| (name, &e.parent)),
            ),
        }
    }
}

/// A slice's `others` as written.
struct Others<'a>(Names<'a>);

impl Serialize for Others<'_> {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.others())
    }
}

/// A slice's open requests as written: those it kept and those read by
/// this walk (sorted by name; no name in both), merged in name order.
#[derive(Clone, Copy)]
struct Requests<'a> {
    kept: &'a BTreeMap<String, Message>,
    new: &'a [(&'a str, &'a Message)],
}

impl Requests<'_> {
    fn is_empty(&self) -> bool {
        self.kept.is_empty() && self.new.is_empty()
    }
}

impl<'a> Requests<'a> {
    /// The requests, by name.
    fn merged(self) -> impl Iterator<Item = (&'a str, &'a Message)> {
        let mut kept = self.kept.iter().map(|(n, m)| (n.as_str(), m)).peekable();
        let mut new = self.new.iter().copied().peekable();
        std::iter::from_fn(move || match (kept.peek(), new.peek()) {
            (Some(k), Some(n)) if k.0 < n.0 => kept.next(),
            (Some(k), Some(n)) if k.0 == n.0 => {
                // Never expected: the walk's read replaces what was kept.
                kept.next();
                new.next()
            }
            (_, Some(_)) => new.next(),
            (Some(_), None) => kept.next(),
            (None, None) => None,
        })
    }
}

impl Serialize for Requests<'_> {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_map(self.merged())
    }
}

/// A slice's `files` as written: all but the open requests its `requests`
/// keep (their facts are their messages', [`Slice::restore_files`]).
struct Files<'a> {
    names: Names<'a>,
    requests: Requests<'a>,
}

impl Serialize for Files<'_> {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        let mut kept = self.requests.merged().map(|(name, _)| name).peekable();
        serializer.collect_map(self.names.files().filter(|(name, _)| {
            while kept.next_if(|k| *k < name.as_str()).is_some() {}
            kept.next_if(|k| *k == name.as_str()).is_none()
        }))
    }
}
