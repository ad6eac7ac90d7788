//! Append-only JSONL logs.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::atomic::sync_dir;
use crate::canonical::{append_canonical_line, to_canonical_line};
use crate::error::{Error, Result};
use crate::lock::Lock;
use crate::read::{CorruptReason, classify, open_nofollow};

/// The longest line a reader accepts as a record: 1 MiB. Longer lines are reported as bad.
pub const MAX_LINE: usize = 1024 * 1024;

/// An append-only log of JSON records, one canonical line each.
///
/// Appends take the log's lock ([`Lock::for_file`]), write each record as
/// part of one `write` of whole lines, and sync the data before returning.
/// Readers take no lock: they return every whole record and report (never
/// fail on) a torn last line left by a writer that crashed mid-write.
///
/// ```
/// use chipset_store::JsonLog;
/// let dir = tempfile::tempdir()?;
/// let log = JsonLog::new(dir.path().join("events.jsonl"));
/// log.append(&serde_json::json!({"event": "sent", "id": 1}))?;
/// log.append_batch(&[serde_json::json!({"id": 2}), serde_json::json!({"id": 3})])?;
/// let read = log.read::<serde_json::Value>()?;
/// assert_eq!(read.records.len(), 3);
/// assert!(read.torn_tail.is_none());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct JsonLog {
    path: PathBuf,
    lock: Lock,
}

/// What a log reader found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogContents<T> {
    /// Every whole, parsable record, in file order.
    pub records: Vec<T>,
    /// Whole lines that did not parse as a record (reported, not dropped silently).
    pub bad_lines: Vec<BadLine>,
    /// An unterminated last line: a write cut short by a crash.
    pub torn_tail: Option<TornTail>,
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

/// An unterminated last line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TornTail {
    /// Where it starts.
    pub offset: u64,
    /// How many bytes it has.
    pub len: u64,
}

impl JsonLog {
    /// Returns the log at `path`, guarded by [`Lock::for_file`]`(path)`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        let lock = Lock::for_file(&path);
        JsonLog { path, lock }
    }

    /// Returns the log file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Returns the lock that appends and recovery take.
    pub fn lock(&self) -> &Lock {
        &self.lock
    }

    /// Appends one record durably.
    ///
    /// # Errors
    ///
    /// [`Error::Serialize`] when the record cannot be serialized (nothing is
    /// written); [`Error::Io`] when a step fails.
    pub fn append<T: Serialize + ?Sized>(&self, record: &T) -> Result<()> {
        let line = self.line(record)?;
        self.append_bytes(line)
    }

    /// Appends many records with one write and one data sync. Returns how many.
    ///
    /// # Errors
    ///
    /// As [`JsonLog::append`]; on a serialization error nothing is written.
    pub fn append_batch<'a, T, I>(&self, records: I) -> Result<usize>
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
            self.append_bytes(buf)?;
        }
        Ok(n)
    }

    fn line<T: Serialize + ?Sized>(&self, record: &T) -> Result<Vec<u8>> {
        to_canonical_line(record).map_err(|source| Error::Serialize {
            path: self.path.clone(),
            source,
        })
    }

    fn open_append(&self) -> Result<(File, bool)> {
        let open = |create| {
            OpenOptions::new()
                .read(true)
                .append(true)
                .create_new(create)
                .mode(0o644)
                .custom_flags(crate::read::nofollow_flags())
                .open(&self.path)
        };
        match open(false) {
            Ok(f) => Ok((f, false)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => match open(true) {
                Ok(f) => Ok((f, true)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => open(false)
                    .map(|f| (f, false))
                    .map_err(|e| self.open_error(e)),
                Err(e) => Err(self.open_error(e)),
            },
            Err(e) => Err(self.open_error(e)),
        }
    }

    fn open_error(&self, e: io::Error) -> Error {
        Error::open_nofollow("open log", &self.path, e)
    }

    fn append_bytes(&self, mut buf: Vec<u8>) -> Result<()> {
        let _guard = self.lock.exclusive()?;
        let (mut file, created) = self.open_append()?;
        let len = file
            .metadata()
            .map_err(|e| Error::io("stat", &self.path, e))?
            .len();
        if len > 0 {
            let mut last = [0u8];
            file.read_exact_at(&mut last, len - 1)
                .map_err(|e| Error::io("read", &self.path, e))?;
            if last[0] != b'\n' {
                // A torn tail from a crashed writer: end it, so our records stay whole
                // and the fragment is reported as a bad line instead of swallowing ours.
                buf.insert(0, b'\n');
            }
        }
        file.write_all(&buf)
            .map_err(|e| Error::io("append to", &self.path, e))?;
        file.sync_data()
            .map_err(|e| Error::io("sync", &self.path, e))?;
        // A new log's directory entry must be durable too. An empty log found
        // here may come from a writer that died between creating it and
        // syncing the directory, so the first append to it syncs as well.
        if created || len == 0 {
            sync_dir(self.path.parent().unwrap_or(Path::new(".")))?;
        }
        Ok(())
    }

    /// Reads every record.
    ///
    /// # Errors
    ///
    /// [`Error::Symlink`] or [`Error::Io`]; bad lines and a torn tail are reported in the result.
    pub fn read<T: DeserializeOwned>(&self) -> Result<LogContents<T>> {
        self.read_from(0)
    }

    /// Reads the records from byte `offset` on (an `end_offset` from an earlier read).
    /// A missing log reads as empty.
    ///
    /// # Errors
    ///
    /// As [`JsonLog::read`].
    pub fn read_from<T: DeserializeOwned>(&self, offset: u64) -> Result<LogContents<T>> {
        let mut contents = LogContents {
            records: Vec::new(),
            bad_lines: Vec::new(),
            torn_tail: None,
            end_offset: offset,
        };
        let Some(mut file) = open_nofollow(&self.path)? else {
            return Ok(contents);
        };
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| Error::io("seek", &self.path, e))?;
        let mut reader = BufReader::with_capacity(64 * 1024, file);
        let mut line = Vec::new();
        let mut pos = offset;
        loop {
            line.clear();
            let n = reader
                .read_until(b'\n', &mut line)
                .map_err(|e| Error::io("read", &self.path, e))?;
            if n == 0 {
                break;
            }
            if line.last() != Some(&b'\n') {
                contents.torn_tail = Some(TornTail {
                    offset: pos,
                    len: n as u64,
                });
                break;
            }
            let start = pos;
            pos += n as u64;
            contents.end_offset = pos;
            let body = &line[..n - 1];
            if body.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if body.len() > MAX_LINE {
                contents.bad_lines.push(BadLine {
                    offset: start,
                    reason: CorruptReason::TooLarge {
                        size: body.len() as u64,
                        cap: MAX_LINE as u64,
                    },
                });
                continue;
            }
            match serde_json::from_slice(body) {
                Ok(r) => contents.records.push(r),
                Err(e) => contents.bad_lines.push(BadLine {
                    offset: start,
                    reason: classify(&e),
                }),
            }
        }
        Ok(contents)
    }

    /// Truncates a torn tail, under the log's lock, and syncs. Returns what was cut.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the log cannot be read, truncated or synced.
    pub fn recover(&self) -> Result<Option<TornTail>> {
        let _guard = self.lock.exclusive()?;
        let Some(file) = open_nofollow(&self.path)? else {
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
        let file = OpenOptions::new()
            .write(true)
            .custom_flags(crate::read::nofollow_flags())
            .open(&self.path)
            .map_err(|e| Error::io("open log", &self.path, e))?;
        file.set_len(keep)
            .map_err(|e| Error::io("truncate", &self.path, e))?;
        file.sync_data()
            .map_err(|e| Error::io("sync", &self.path, e))?;
        let torn = TornTail {
            offset: keep,
            len: len - keep,
        };
        tracing::warn!(path = %self.path.display(), offset = keep, len = torn.len, "truncated torn log tail");
        Ok(Some(torn))
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
