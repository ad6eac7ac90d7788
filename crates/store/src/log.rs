//! Append-only JSONL logs.

mod repair;

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::atomic::{create_temp, sync_dir_with};
use crate::backend::{IoBackend, SharedIo};
use crate::canonical::{append_canonical_line, to_canonical_line};
use crate::error::{Error, Result};
use crate::lock::Lock;
use crate::read::{CorruptReason, Corruption, classify, open_nofollow};
use crate::time::{Clock, SystemClock};

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// The longest line a reader accepts as a record: 1 MiB. Longer lines are reported as bad.
pub(crate) const MAX_LINE: usize = 1024 * 1024;

/// An append-only log of JSON records, one canonical line each.
///
/// Appends take the log's lock (`.{name}.lock` beside it), write each record as
/// part of one `write` of whole lines, and sync the data before returning.
/// Readers take no lock: they return every whole record and report (never
/// fail on) a torn last line left by a writer that crashed mid-write.
///
/// ```
/// use chipset_store::{Channel, StateDir};
/// let dir = tempfile::tempdir()?;
/// let state = StateDir::open(dir.path())?;
/// let log = state.log(&state.channel(Channel::new("bus")).join("events.jsonl")?)?;
/// log.append(&serde_json::json!({"event": "sent", "id": 1}))?;
/// log.append_batch(&[serde_json::json!({"id": 2}), serde_json::json!({"id": 3})])?;
/// let read = log.read_from::<serde_json::Value>(0)?;
/// assert_eq!(read.records.len(), 3);
/// assert!(read.torn_tail.is_none());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct JsonLog {
    path: PathBuf,
    lock: Lock,
    io: SharedIo,
}

/// What a log reader found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogContents<T> {
    /// Every whole, parsable record, in file order.
    pub records: Vec<T>,
    /// Whole lines that did not parse as a record (reported, not dropped silently).
    pub bad_lines: Vec<BadLine>,
    /// The length of an unterminated last line, a write cut short by a
    /// crash; it starts at `end_offset`.
    pub torn_tail: Option<u64>,
    /// The byte offset just past the last whole line: where the next
    /// [`JsonLog::read_from`] should start.
    pub end_offset: u64,
}

/// A whole line that is not a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    /// Where the line starts.
    pub offset: u64,
    /// Why it was refused.
    pub reason: CorruptReason,
}

impl JsonLog {
    /// Returns the log at `path`, guarded by [`Lock::beside`]`(path)`,
    /// changing it through `io`. Only the store makes one, after the
    /// [`StateDir`](crate::StateDir) checked `path` (inside the root, no
    /// symlink on the way): [`StateDir::log`](crate::StateDir::log) and
    /// [`StateDir::log_reader`](crate::StateDir::log_reader).
    pub(crate) fn with_io(path: impl Into<PathBuf>, io: SharedIo) -> Self {
        let path = path.into();
        let lock = Lock::beside(&path);
        JsonLog { path, lock, io }
    }

    /// Returns the log file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record durably.
    ///
    /// **Commit point:** the data sync after the write. A failure before it
    /// truncates the log back to its length before the append (under the
    /// lock), so no torn tail is left to become a bad line.
    ///
    /// # Errors
    ///
    /// [`Error::Serialize`] when the record cannot be serialized (nothing is
    /// written); [`Error::Io`] when a step fails and the log was rolled back;
    /// [`Error::OutcomeUnknown`] when the rollback failed too, or the
    /// directory sync of a new log failed (the record may be visible);
    /// [`Error::Corrupt`] when something other than a regular file stands at
    /// the log's path.
    pub fn append<T: Serialize + ?Sized>(&self, record: &T) -> Result<()> {
        let line = self.line(record)?;
        self.append_bytes(line)
    }

    /// Appends many records with one write and one data sync. Returns how many.
    /// All of them are committed by the one sync, or none.
    ///
    /// # Errors
    ///
    /// As [`JsonLog::append`]; on a serialization error nothing is written.
    pub fn append_batch<'a, T, I>(&self, records: I) -> Result<usize>
    where
        T: Serialize + 'a,
        I: IntoIterator<Item = &'a T>,
    {
        self.append_lines(records, true)
    }

    /// Appends many records with one write and **no data sync**: for records
    /// the caller can rebuild from other durable state (mail's `sent`
    /// events, rebuilt from the message files by its doctor).
    ///
    /// When this returns, the records are in the log for every reader. They
    /// become durable with the next synced append to this log (its data sync
    /// covers the whole file, so the sync is shared with the next operation)
    /// or when the kernel writes the file back (within about 5 s on ext4);
    /// a power cut before that may lose them, or keep a prefix as a torn
    /// tail, which the next append cuts (rule 1 of the Durability section).
    /// Everything else is as [`JsonLog::append_batch`]: one write under the
    /// lock, a torn tail cut first, a failed write truncated back.
    ///
    /// **Commit point:** the write.
    ///
    /// # Errors
    ///
    /// As [`JsonLog::append_batch`].
    pub fn append_batch_unsynced<'a, T, I>(&self, records: I) -> Result<usize>
    where
        T: Serialize + 'a,
        I: IntoIterator<Item = &'a T>,
    {
        self.append_lines(records, false)
    }

    /// Encodes `records` as one buffer of lines and appends it with one
    /// write (and, when `sync`, one data sync); nothing is written for no
    /// records, or when one cannot be encoded.
    fn append_lines<'a, T, I>(&self, records: I, sync: bool) -> Result<usize>
    where
        T: Serialize + 'a,
        I: IntoIterator<Item = &'a T>,
    {
        let mut buf = Vec::new();
        let mut n = 0;
        for r in records {
            append_canonical_line(&mut buf, r).map_err(|source| Error::Serialize {
                path: self.path.clone(),
                source,
            })?;
            n += 1;
        }
        if n > 0 {
            self.append_bytes_with(buf, sync)?;
        }
        Ok(n)
    }

    fn line<T: Serialize + ?Sized>(&self, record: &T) -> Result<Vec<u8>> {
        to_canonical_line(record).map_err(|source| Error::Serialize {
            path: self.path.clone(),
            source,
        })
    }

    /// Opens the log for appending, creating it; returns the file, whether
    /// it was created, and its length (from the one `fstat` that checks it
    /// is a regular file).
    fn open_append(&self) -> Result<(File, bool, u64)> {
        let is_dir =
            |e: &io::Error| e.raw_os_error() == Some(rustix::io::Errno::ISDIR.raw_os_error());
        let opened = match self.io.open_append(&self.path) {
            Ok(f) => Ok((f, false)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                match self.io.create_new(&self.path, true) {
                    Ok(f) => Ok((f, true)),
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        self.io.open_append(&self.path).map(|f| (f, false))
                    }
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(e),
        };
        let (file, created) = match opened {
            Ok(ok) => ok,
            Err(e) if is_dir(&e) => return Err(self.not_a_file()),
            Err(e) => return Err(Error::open_nofollow("open log", &self.path, e)),
        };
        let meta = file
            .metadata()
            .map_err(|e| Error::io("stat", &self.path, e))?;
        if !meta.is_file() {
            return Err(self.not_a_file());
        }
        Ok((file, created, meta.len()))
    }

    fn not_a_file(&self) -> Error {
        Error::Corrupt(Corruption {
            path: self.path.clone(),
            reason: CorruptReason::NotARegularFile,
        })
    }

    fn append_bytes(&self, buf: Vec<u8>) -> Result<()> {
        self.append_bytes_with(buf, true)
    }

    fn append_bytes_with(&self, buf: Vec<u8>, sync: bool) -> Result<()> {
        let _guard = self.lock.exclusive()?;
        let (file, created, mut len) = self.open_append()?;
        let mut last = [b'\n'];
        if len > 0 {
            file.read_exact_at(&mut last, len - 1)
                .map_err(|e| Error::io("read", &self.path, e))?;
        }
        if last[0] != b'\n' {
            let whole =
                last_newline_end(&file, len).map_err(|e| Error::io("read", &self.path, e))?;
            // A torn tail: the rest of an append that never returned (its
            // writer crashed or failed). Cut it, as `recover` does, so it can
            // never become a bad line in the middle of the log.
            self.io
                .set_len(&file, &self.path, whole)
                .map_err(|e| Error::io("truncate", &self.path, e))?;
            tracing::warn!(path = %self.path.display(), offset = whole, len = len - whole, "cut a torn log tail before appending");
            len = whole;
        }
        let io = &*self.io;
        let written = io
            .write_all(&file, &self.path, &buf)
            .map_err(|e| ("append to", e))
            .and_then(|()| {
                if sync {
                    io.sync_data(&file, &self.path).map_err(|e| ("sync", e))
                } else {
                    Ok(())
                }
            });
        if let Err((op, source)) = written {
            return Err(self.roll_back(&file, len, created, op, source));
        }
        // A new log's directory entry must be durable too. An empty log found
        // here may come from a writer that died between creating it and
        // syncing the directory, so the first append to it syncs as well.
        if created || len == 0 {
            sync_dir_with(io, parent(&self.path)).map_err(|e| e.after_commit(&self.path))?;
        }
        Ok(())
    }

    /// Undoes a failed append: truncates the log back to `len` and syncs.
    /// Returns the error to report: the original one when the log is back as
    /// it was, [`Error::OutcomeUnknown`] when that could not be made sure.
    fn roll_back(
        &self,
        file: &File,
        len: u64,
        created: bool,
        op: &'static str,
        source: io::Error,
    ) -> Error {
        let io = &*self.io;
        let undone = io
            .set_len(file, &self.path, len)
            .and_then(|()| io.sync_data(file, &self.path));
        match undone {
            Ok(()) => {
                if created && len == 0 {
                    // Ours, under the lock, and empty again: leave no new file behind.
                    let _ = io.remove_file(&self.path);
                }
                tracing::warn!(path = %self.path.display(), len, "rolled back a failed append");
                Error::io(op, &self.path, source)
            }
            Err(undo) => {
                tracing::error!(path = %self.path.display(), error = %undo, "could not roll back a failed append");
                Error::OutcomeUnknown {
                    op,
                    path: self.path.clone(),
                    source,
                }
            }
        }
    }

    /// Opens the log for reading; `None` when missing.
    fn open_read(&self) -> Result<Option<File>> {
        let Some(file) = open_nofollow(&self.path)? else {
            return Ok(None);
        };
        let meta = file
            .metadata()
            .map_err(|e| Error::io("stat", &self.path, e))?;
        if !meta.is_file() {
            return Err(self.not_a_file());
        }
        Ok(Some(file))
    }

    /// Returns the log's bytes from `start` up to `end` (fewer when the log
    /// ends sooner), or `None` when there is no log. A reader that keeps an
    /// offset into the log (see [`JsonLog::read_from`]) can keep the bytes
    /// just before it too and check them here: a log replaced by another
    /// file (a repair, a rotation) may reuse the old one's inode number, but
    /// not its bytes.
    ///
    /// # Errors
    ///
    /// As [`JsonLog::read_from`].
    pub fn bytes_at(&self, start: u64, end: u64) -> Result<Option<Vec<u8>>> {
        use std::os::unix::fs::FileExt;
        let Some(file) = self.open_read()? else {
            return Ok(None);
        };
        let want = usize::try_from(end.saturating_sub(start)).unwrap_or(usize::MAX);
        let mut buf = vec![0; want.min(MAX_LINE)];
        let mut got = 0;
        while got < buf.len() {
            match file.read_at(&mut buf[got..], start + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io("read", &self.path, e)),
            }
        }
        buf.truncate(got);
        Ok(Some(buf))
    }

    /// Reads the records from byte `offset` on: 0 for every record, or an
    /// `end_offset` from an earlier read for those appended since. A
    /// missing log reads as empty.
    ///
    /// Memory is bounded whatever the file holds: a line longer than
    /// 1 MiB is skipped (reported as a bad line) without being held.
    ///
    /// # Errors
    ///
    /// [`Error::Symlink`] or [`Error::Io`]; [`Error::Corrupt`] (reason
    /// [`CorruptReason::NotARegularFile`]) when a directory, FIFO or device
    /// stands at the log's path. Bad lines and a torn tail are reported in the result.
    pub fn read_from<T: DeserializeOwned>(&self, offset: u64) -> Result<LogContents<T>> {
        let mut records = Vec::new();
        let contents = self.for_each_from(offset, |r| records.push(r))?;
        Ok(LogContents {
            records,
            ..contents
        })
    }

    /// Reads the whole log as [`JsonLog::read_from`] does, handing each record to
    /// `each` in file order instead of collecting them: memory stays flat
    /// however long the log is. The result holds the bad lines, the torn
    /// tail and the end offset, and no records.
    ///
    /// # Errors
    ///
    /// As [`JsonLog::read_from`].
    pub fn for_each<T: DeserializeOwned>(&self, each: impl FnMut(T)) -> Result<LogContents<T>> {
        self.for_each_from(0, each)
    }

    fn for_each_from<T: DeserializeOwned>(
        &self,
        offset: u64,
        mut each: impl FnMut(T),
    ) -> Result<LogContents<T>> {
        let mut contents = LogContents {
            records: Vec::new(),
            bad_lines: Vec::new(),
            torn_tail: None,
            end_offset: offset,
        };
        let Some(mut file) = self.open_read()? else {
            return Ok(contents);
        };
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| Error::io("seek", &self.path, e))?;
        let mut lines = Lines::new(file, offset);
        while let Some(line) = lines.next().map_err(|e| Error::io("read", &self.path, e))? {
            match line.kind::<T>() {
                LineKind::Torn => {
                    contents.torn_tail = Some(line.len);
                    break;
                }
                LineKind::Blank => {}
                LineKind::Record(r) => each(r),
                LineKind::Bad(reason) => contents.bad_lines.push(BadLine {
                    offset: line.start,
                    reason,
                }),
            }
            contents.end_offset = line.start + line.len;
        }
        Ok(contents)
    }

    /// Truncates a torn tail, under the log's lock, and syncs. Returns how
    /// many bytes were cut (the log now ends at its last newline).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the log cannot be read, truncated or synced.
    pub fn recover(&self) -> Result<Option<u64>> {
        let _guard = self.lock.exclusive()?;
        let Some(file) = self.open_read()? else {
            return Ok(None);
        };
        let len = file
            .metadata()
            .map_err(|e| Error::io("stat", &self.path, e))?
            .len();
        let keep = last_newline_end(&file, len).map_err(|e| Error::io("read", &self.path, e))?;
        if keep == len {
            return Ok(None);
        }
        let file = self
            .io
            .open_append(&self.path)
            .map_err(|e| Error::io("open log", &self.path, e))?;
        self.io
            .set_len(&file, &self.path, keep)
            .map_err(|e| Error::io("truncate", &self.path, e))?;
        self.io
            .sync_data(&file, &self.path)
            .map_err(|e| Error::io("sync", &self.path, e).after_commit(&self.path))?;
        let cut = len - keep;
        tracing::warn!(path = %self.path.display(), offset = keep, len = cut, "truncated torn log tail");
        Ok(Some(cut))
    }
}

/// One line as [`Lines`] found it.
struct Line {
    start: u64,
    /// Its length, the newline included.
    len: u64,
    terminated: bool,
    /// Its bytes (newline included), unless it is over the cap.
    bytes: Option<Vec<u8>>,
}

enum LineKind<T> {
    Torn,
    Blank,
    Record(T),
    Bad(CorruptReason),
}

impl Line {
    fn kind<T: DeserializeOwned>(&self) -> LineKind<T> {
        if !self.terminated {
            return LineKind::Torn;
        }
        let Some(bytes) = &self.bytes else {
            return LineKind::Bad(CorruptReason::TooLarge {
                size: self.len - 1,
                cap: MAX_LINE as u64,
            });
        };
        let body = &bytes[..bytes.len() - 1];
        if body.iter().all(u8::is_ascii_whitespace) {
            return LineKind::Blank;
        }
        match serde_json::from_slice(body) {
            Ok(r) => LineKind::Record(r),
            Err(e) => LineKind::Bad(classify(&e)),
        }
    }
}

/// Splits a reader into lines, holding at most [`MAX_LINE`] + 1 bytes of any one.
struct Lines<R> {
    reader: BufReader<R>,
    pos: u64,
}

impl<R: Read> Lines<R> {
    fn new(reader: R, pos: u64) -> Self {
        Lines {
            reader: BufReader::with_capacity(64 * 1024, reader),
            pos,
        }
    }

    fn next(&mut self) -> io::Result<Option<Line>> {
        let start = self.pos;
        let mut bytes = Some(Vec::new());
        loop {
            let avail = match self.reader.fill_buf() {
                Ok(a) => a,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if avail.is_empty() {
                let len = self.pos - start;
                return Ok((len > 0).then_some(Line {
                    start,
                    len,
                    terminated: false,
                    bytes,
                }));
            }
            let (n, found) = match avail.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (avail.len(), false),
            };
            if let Some(b) = &mut bytes {
                if b.len() + n > MAX_LINE + 1 {
                    bytes = None;
                } else {
                    b.extend_from_slice(&avail[..n]);
                }
            }
            self.reader.consume(n);
            self.pos += n as u64;
            if found {
                return Ok(Some(Line {
                    start,
                    len: self.pos - start,
                    terminated: true,
                    bytes,
                }));
            }
        }
    }
}

/// Returns the offset just past the last `\n` in the first `len` bytes (0 if none).
fn last_newline_end(file: &File, len: u64) -> io::Result<u64> {
    let mut end = len;
    let mut buf = vec![0u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(end - start) as usize];
        file.read_exact_at(chunk, start)?;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}
