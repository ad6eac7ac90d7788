//! Typed, bounded reads that never mistake a bad file for a missing one.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use crate::error::{Error, Result};

/// The default cap on a state file's size: 1 MiB.
pub(crate) const DEFAULT_READ_CAP: u64 = 1024 * 1024;

/// What a typed read found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum ReadOutcome<T> {
    /// No file at the path.
    Missing,
    /// A file that could not be taken as a `T`; see the reason.
    Corrupt(Corruption),
    /// A well-formed file of the right kind holding a value this version does
    /// not know (a newer status, kind or format version written by another
    /// program). Not corrupt: repair never moves it aside; readers whose
    /// answer depends on it fail closed.
    Unsupported(Unsupported),
    /// The file's value.
    Value(T),
}

impl<T> ReadOutcome<T> {
    /// Returns the value, or `None` for missing, corrupt and unsupported.
    pub fn value(self) -> Option<T> {
        match self {
            ReadOutcome::Value(v) => Some(v),
            _ => None,
        }
    }

    /// Returns `Ok(Some(value))`, `Ok(None)` when missing, and an error when
    /// corrupt or unsupported: for callers that cannot proceed past a file
    /// they cannot use.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] when the file is corrupt, [`Error::Unsupported`]
    /// when it holds a value this version does not know.
    pub fn into_result(self) -> Result<Option<T>> {
        match self {
            ReadOutcome::Missing => Ok(None),
            ReadOutcome::Corrupt(c) => Err(Error::Corrupt(c)),
            ReadOutcome::Unsupported(u) => Err(Error::Unsupported(u)),
            ReadOutcome::Value(v) => Ok(Some(v)),
        }
    }

    /// Returns the outcome with the value borrowed, to judge it without
    /// giving it up.
    pub fn as_ref(&self) -> ReadOutcome<&T> {
        match self {
            ReadOutcome::Missing => ReadOutcome::Missing,
            ReadOutcome::Corrupt(c) => ReadOutcome::Corrupt(c.clone()),
            ReadOutcome::Unsupported(u) => ReadOutcome::Unsupported(u.clone()),
            ReadOutcome::Value(v) => ReadOutcome::Value(v),
        }
    }

    /// Maps the value.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> ReadOutcome<U> {
        self.and_then(|v| ReadOutcome::Value(f(v)))
    }

    /// Chains a check that may find the value corrupt or unsupported, such as
    /// converting an on-disk form into a domain type.
    pub fn and_then<U>(self, f: impl FnOnce(T) -> ReadOutcome<U>) -> ReadOutcome<U> {
        match self {
            ReadOutcome::Missing => ReadOutcome::Missing,
            ReadOutcome::Corrupt(c) => ReadOutcome::Corrupt(c),
            ReadOutcome::Unsupported(u) => ReadOutcome::Unsupported(u),
            ReadOutcome::Value(v) => f(v),
        }
    }

    /// Parses `bytes`, already read from `path`, as JSON: the value, or
    /// [`ReadOutcome::Corrupt`] with [`CorruptReason::Unparsable`] or
    /// [`CorruptReason::WrongShape`] (`path` is for the report).
    pub fn from_json(path: &Path, bytes: &[u8]) -> Self
    where
        T: DeserializeOwned,
    {
        parse_json(path, bytes)
    }

    /// Returns true for [`ReadOutcome::Corrupt`] (and not for unsupported).
    pub fn is_corrupt(&self) -> bool {
        matches!(self, ReadOutcome::Corrupt(_))
    }

    /// Returns true for [`ReadOutcome::Unsupported`].
    #[cfg(test)]
    pub(crate) fn is_unsupported(&self) -> bool {
        matches!(self, ReadOutcome::Unsupported(_))
    }
}

/// A well-formed file holding a value this version of chipset does not know,
/// such as a hook status, message kind or format version written by a newer
/// or foreign program.
///
/// Distinct from [`Corruption`]: the file is what it claims to be, so repair
/// leaves it where it is, and a reader that needs its answer (a gate, a
/// transition) refuses to guess.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{path}` holds {what}, which this version of chipset does not support")]
pub struct Unsupported {
    /// The file.
    pub path: PathBuf,
    /// What is not supported, as a noun phrase ("hook status `paused`").
    pub what: String,
}

impl Unsupported {
    /// Returns the finding that `path` holds `what`, a value this version does not know.
    pub fn new(path: impl Into<PathBuf>, what: impl Into<String>) -> Self {
        Unsupported {
            path: path.into(),
            what: what.into(),
        }
    }
}

/// A file that is there but cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{path}` is corrupt: {reason}")]
pub struct Corruption {
    /// The bad file.
    pub path: PathBuf,
    /// Why it is bad.
    pub reason: CorruptReason,
}

/// Why a file is corrupt.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CorruptReason {
    /// Not valid JSON (or truncated).
    Unparsable(String),
    /// Valid JSON of the wrong shape for the expected type.
    WrongShape(String),
    /// Larger than the read cap.
    TooLarge {
        /// The size found (at least this large).
        size: u64,
        /// The cap.
        cap: u64,
    },
    /// A directory, FIFO, socket or device where a regular file is expected.
    NotARegularFile,
}

impl fmt::Display for CorruptReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CorruptReason::Unparsable(msg) => write!(f, "unparsable JSON: {msg}"),
            CorruptReason::WrongShape(msg) => write!(f, "unexpected JSON shape: {msg}"),
            CorruptReason::TooLarge { size, cap } => {
                write!(f, "{size} bytes is over the {cap}-byte cap")
            }
            CorruptReason::NotARegularFile => f.write_str("not a regular file"),
        }
    }
}

/// What a read of many files found: the values, and every file that
/// could not be read as one, never dropped as if it were not there.
///
/// The one shape of every listing: reminders, responses, the dispatcher's
/// ledger, the agent directory. A caller that reports a listing reports
/// [`Listing::unreadable`], corrupt and unsupported files alike.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Listing<T> {
    /// The values read, in the order the listing documents.
    pub items: Vec<T>,
    /// Files that could not be read (an item may hide behind each; the
    /// doctor quarantines them).
    pub corrupt: Vec<Corruption>,
    /// Well-formed files holding values this version does not know (an
    /// item may hide behind each too; repair leaves them in place).
    pub unsupported: Vec<Unsupported>,
}

impl<T> Default for Listing<T> {
    fn default() -> Self {
        Listing {
            items: Vec::new(),
            corrupt: Vec::new(),
            unsupported: Vec::new(),
        }
    }
}

impl<T> Listing<T> {
    /// Adds what one read found: its value to [`Listing::items`], a corrupt
    /// or unsupported file to its list; a missing file adds nothing.
    pub fn push(&mut self, read: ReadOutcome<T>) {
        match read {
            ReadOutcome::Missing => {}
            ReadOutcome::Corrupt(c) => self.corrupt.push(c),
            ReadOutcome::Unsupported(u) => self.unsupported.push(u),
            ReadOutcome::Value(v) => self.items.push(v),
        }
    }

    /// Returns the files that could not be read, corrupt first, each as the
    /// error that says which file and why.
    pub fn unreadable(
        &self,
    ) -> impl Iterator<Item = &(dyn std::error::Error + Send + Sync + 'static)> {
        let corrupt = self.corrupt.iter().map(|c| c as &_);
        corrupt.chain(self.unsupported.iter().map(|u| u as &_))
    }
}

pub(crate) fn nofollow_flags() -> i32 {
    // O_NONBLOCK keeps open() from hanging on a FIFO planted at a state path.
    (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32
}

/// Opens `path` for reading without following a symlink at its last component.
/// Returns `None` when missing.
pub(crate) fn open_nofollow(path: &Path) -> Result<Option<File>> {
    match OpenOptions::new()
        .read(true)
        .custom_flags(nofollow_flags())
        .open(path)
    {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::open_nofollow("open", path, e)),
    }
}

/// Reads a whole file of at most `cap` bytes.
///
/// # Errors
///
/// [`Error::Symlink`] for a symlink at `path`; [`Error::Io`] for I/O failures.
/// An oversized or non-regular file is `Ok(ReadOutcome::Corrupt(..))`.
pub(crate) fn read_bytes(path: &Path, cap: u64) -> Result<ReadOutcome<Vec<u8>>> {
    match open_nofollow(path)? {
        Some(file) => read_open_file(file, path, cap),
        None => Ok(ReadOutcome::Missing),
    }
}

/// Reads an already opened file of at most `cap` bytes; `path` is for reports.
pub(crate) fn read_open_file(file: File, path: &Path, cap: u64) -> Result<ReadOutcome<Vec<u8>>> {
    Ok(read_open_file_stat(file, path, cap)?.map(|(bytes, _)| bytes))
}

/// As [`read_open_file`], also returning the [`Stat`] of the open file
/// (taken before its bytes were read, from the same `statx`).
pub(crate) fn read_open_file_stat(
    file: File,
    path: &Path,
    cap: u64,
) -> Result<ReadOutcome<(Vec<u8>, crate::Stat)>> {
    let meta = file.metadata().map_err(|e| Error::io("stat", path, e))?;
    let corrupt = |reason| {
        Ok(ReadOutcome::Corrupt(Corruption {
            path: path.to_owned(),
            reason,
        }))
    };
    if !meta.is_file() {
        return corrupt(CorruptReason::NotARegularFile);
    }
    if meta.len() > cap {
        return corrupt(CorruptReason::TooLarge {
            size: meta.len(),
            cap,
        });
    }
    // Read one byte past the cap in case the file grew since the stat.
    let buf = read_sized(file, meta.len(), cap.saturating_add(1))
        .map_err(|e| Error::io("read", path, e))?;
    if buf.len() as u64 > cap {
        return corrupt(CorruptReason::TooLarge {
            size: buf.len() as u64,
            cap,
        });
    }
    Ok(ReadOutcome::Value((buf, crate::Stat::from_metadata(&meta))))
}

/// How many bytes the first read of [`read_open_into`] asks for, before
/// anything is known of the file's size: more than a message or a record
/// holds, so that most files are read whole by that one read.
const FIRST_READ: usize = 16 * 1024;

/// Reads an already opened file of at most `cap` bytes into `buf`
/// (emptied first), as [`read_open_file`] does, but without a `statx` where
/// one read shows the whole file; `path` is for reports.
///
/// The first read is a `pread` at offset 0 into `buf`'s spare room (at
/// least [`FIRST_READ`] bytes). When it returns fewer bytes than it asked
/// for, and no more than `cap`, those are the whole file: a read of a
/// regular file returns less than asked only at its end. A `pread` fails
/// on a FIFO, a pipe or a socket (`ESPIPE`), and on a directory, so what
/// one returned came from a regular file or from a device, which only root
/// can make. Every other case (an empty file, a file the read filled, a
/// failed read) is read again the way [`read_open_file`] reads, after a
/// stat, so an oversized or non-regular file is corrupt as there.
pub(crate) fn read_open_into(
    fd: std::os::fd::OwnedFd,
    path: &dyn Fn() -> PathBuf,
    cap: u64,
    buf: &mut Vec<u8>,
) -> Result<ReadOutcome<()>> {
    buf.clear();
    buf.reserve(FIRST_READ);
    let asked = buf.capacity();
    if let Ok(n) = rustix::io::pread(&fd, rustix::buffer::spare_capacity(&mut *buf), 0)
        && n > 0
        && n < asked
        && n as u64 <= cap
    {
        return Ok(ReadOutcome::Value(()));
    }
    buf.clear();
    // `pread` left the file's offset at 0, so this reads from the start.
    Ok(read_open_file(File::from(fd), &path(), cap)?.map(|bytes| buf.extend_from_slice(&bytes)))
}

/// Reads `file` to its end, at most `limit` bytes, where its stat said it
/// holds `expected` (less than `limit`).
///
/// The first `read` asks for one byte more than `expected`. When the bytes
/// read reach `expected`, the read is done: those are all the bytes the file
/// held when it was statted, and any more were written after. So a file
/// read whole costs one `read`, not two (`read_to_end` reads until a `read`
/// returns nothing, a system call per file that a listing of many files
/// pays for each). A file that the first `read` shows has grown since the
/// stat is read on, to `limit`.
fn read_sized(mut file: impl Read, expected: u64, limit: u64) -> io::Result<Vec<u8>> {
    let want = usize::try_from(expected.saturating_add(1).min(limit)).unwrap_or(usize::MAX);
    let mut buf = vec![0; want];
    let mut filled = 0;
    while filled < want {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => {
                filled += n;
                if filled as u64 == expected {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(filled);
    if filled == want {
        // Grown since the stat: the rest, up to the limit.
        file.take(limit - want as u64).read_to_end(&mut buf)?;
    }
    Ok(buf)
}

/// Reads and parses a JSON file of at most `cap` bytes.
///
/// # Errors
///
/// As [`read_bytes`]; unparsable JSON or the wrong shape is `Ok(ReadOutcome::Corrupt(..))`.
pub(crate) fn read_json<T: DeserializeOwned>(path: &Path, cap: u64) -> Result<ReadOutcome<T>> {
    Ok(read_bytes(path, cap)?.and_then(|bytes| parse_json(path, &bytes)))
}

/// Parses bytes already read from `path`, classifying failures.
pub(crate) fn parse_json<T: DeserializeOwned>(path: &Path, bytes: &[u8]) -> ReadOutcome<T> {
    match serde_json::from_slice(bytes) {
        Ok(v) => ReadOutcome::Value(v),
        Err(e) => ReadOutcome::Corrupt(Corruption {
            path: path.to_owned(),
            reason: classify(&e),
        }),
    }
}

pub(crate) fn classify(e: &serde_json::Error) -> CorruptReason {
    match e.classify() {
        serde_json::error::Category::Data => CorruptReason::WrongShape(e.to_string()),
        _ => CorruptReason::Unparsable(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A domain check that finds a value it does not know.
    fn status(path: &Path, s: &str) -> ReadOutcome<String> {
        match s {
            "empty" | "active" => ReadOutcome::Value(s.to_owned()),
            other => ReadOutcome::Unsupported(Unsupported::new(path, format!("status `{other}`"))),
        }
    }

    #[test]
    fn a_listing_keeps_every_file_it_could_not_read() {
        let mut listing = Listing::default();
        listing.push(status(Path::new("hooks/a.json"), "paused"));
        listing.push(ReadOutcome::Missing);
        listing.push(status(Path::new("hooks/b.json"), "active"));
        listing.push(parse_json::<String>(Path::new("hooks/c.json"), b"{"));
        assert_eq!(listing.items, ["active"]);
        let unreadable: Vec<String> = listing.unreadable().map(|e| e.to_string()).collect();
        assert_eq!(unreadable.len(), 2, "{unreadable:?}");
        assert!(unreadable[0].starts_with("`hooks/c.json` is corrupt"));
        assert!(unreadable[1].starts_with("`hooks/a.json` holds status `paused`"));
    }

    #[test]
    fn unsupported_is_neither_corrupt_nor_a_value() {
        let path = Path::new("hooks/a.json");
        let read = parse_json::<String>(path, br#""paused""#).and_then(|s| status(path, &s));
        assert!(read.is_unsupported());
        assert!(!read.is_corrupt());
        assert_eq!(read.clone().value(), None);
        let err = read.into_result().unwrap_err();
        assert!(matches!(&err, Error::Unsupported(u) if u.what == "status `paused`"));
        assert_eq!(
            err.to_string(),
            "`hooks/a.json` holds status `paused`, which this version of chipset does not support"
        );
    }

    /// Each outcome answers yes to its own predicate only: a caller that
    /// tells corrupt from unsupported (repair moves only the corrupt aside)
    /// never takes one for the other, nor a value or a missing file for either.
    #[test]
    fn each_outcome_has_its_own_predicate() {
        let path = Path::new("hooks/a.json");
        let unsupported = ReadOutcome::<()>::Unsupported(Unsupported::new(path, "status `x`"));
        let corrupt = ReadOutcome::<()>::Corrupt(Corruption {
            path: path.to_owned(),
            reason: CorruptReason::NotARegularFile,
        });
        for (outcome, is_corrupt, is_unsupported) in [
            (ReadOutcome::Missing, false, false),
            (ReadOutcome::Value(()), false, false),
            (corrupt, true, false),
            (unsupported, false, true),
        ] {
            assert_eq!(outcome.is_corrupt(), is_corrupt, "{outcome:?}");
            assert_eq!(outcome.is_unsupported(), is_unsupported, "{outcome:?}");
        }
    }

    /// The cap is the largest size accepted: a file of exactly `cap` bytes
    /// reads whole, one byte more is too large.
    #[test]
    fn a_file_of_exactly_the_cap_is_read() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("a.json");
        std::fs::write(&file, b"[1,2]").unwrap();
        assert_eq!(
            read_bytes(&file, 5).unwrap(),
            ReadOutcome::Value(b"[1,2]".to_vec())
        );
        assert_eq!(
            read_bytes(&file, 4).unwrap(),
            ReadOutcome::Corrupt(Corruption {
                path: file.clone(),
                reason: CorruptReason::TooLarge { size: 5, cap: 4 },
            })
        );
    }

    #[test]
    fn and_then_passes_missing_and_corrupt_through_untouched() {
        let path = Path::new("hooks/a.json");
        let corrupt = parse_json::<String>(path, b"{").and_then(|s| status(path, &s));
        assert!(corrupt.is_corrupt());
        let missing = ReadOutcome::<String>::Missing.and_then(|s| status(path, &s));
        assert_eq!(missing, ReadOutcome::Missing);
        let good = parse_json::<String>(path, br#""active""#).and_then(|s| status(path, &s));
        assert_eq!(good, ReadOutcome::Value("active".to_owned()));
    }

    /// A reader over `bytes` that counts its `read` calls and returns at
    /// most `chunk` bytes from each.
    struct Counting<'a> {
        bytes: &'a [u8],
        chunk: usize,
        reads: usize,
    }

    impl Read for Counting<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            self.reads += 1;
            let n = out.len().min(self.chunk).min(self.bytes.len());
            out[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    fn sized(bytes: &[u8], chunk: usize, expected: u64, limit: u64) -> (Vec<u8>, usize) {
        let mut r = Counting {
            bytes,
            chunk,
            reads: 0,
        };
        let got = read_sized(&mut r, expected, limit).unwrap();
        (got, r.reads)
    }

    /// A file of the size its stat gave is read with one `read`: no second
    /// one to see the end (which `read_to_end` makes for every file).
    #[test]
    fn a_file_of_its_stat_size_is_read_in_one_read() {
        assert_eq!(sized(b"[1,2]", usize::MAX, 5, 101), (b"[1,2]".to_vec(), 1));
        assert_eq!(sized(b"", usize::MAX, 0, 101), (Vec::new(), 1));
        // At the limit's edge: the file is the cap.
        assert_eq!(sized(b"[1,2]", usize::MAX, 5, 6), (b"[1,2]".to_vec(), 1));
        // A reader that returns less than asked goes on to the stat's size.
        assert_eq!(sized(b"[1,2]", 2, 5, 101), (b"[1,2]".to_vec(), 3));
    }

    /// A file that grew or shrank since its stat is read to its end, and
    /// never past the limit.
    #[test]
    fn a_file_that_changed_since_its_stat_is_read_to_its_end() {
        let grown = b"[1,2,3,4,5,6]";
        assert_eq!(sized(grown, usize::MAX, 5, 101).0, grown.to_vec());
        // Read in pieces, the bytes the stat counted are the file as it was
        // then (a file grows by appends; a published one never changes).
        assert_eq!(sized(grown, 1, 5, 101).0, grown[..5].to_vec());
        // Grown past the cap: read to the limit (cap + 1), no further.
        assert_eq!(sized(grown, usize::MAX, 5, 9).0, grown[..9].to_vec());
        assert_eq!(sized(grown, 3, 5, 6).0, grown[..6].to_vec());
        let (shrunk, reads) = sized(b"[1]", usize::MAX, 5, 101);
        assert_eq!((shrunk, reads), (b"[1]".to_vec(), 2));
    }
}
