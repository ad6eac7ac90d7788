//! [`JsonLog::repair`]: the one change to an append-only log that is not
//! an append.

use super::*;

impl JsonLog {
    /// Repairs the log, under its lock: every whole line that reads as a `T`
    /// stays, in order, and every other line (bad JSON, the wrong shape, over
    /// 1 MiB) and a torn tail move, byte for byte and in order, to one
    /// file in `.quarantine/` beside the log (`{timestamp}-{name}`). Returns
    /// that file's path (for showing), or `None` when there was nothing to
    /// repair (nothing is changed then).
    ///
    /// This is the one change to an append-only log that is not an append:
    /// the log is durably replaced by a copy holding exactly its whole
    /// records, and nothing is deleted. **Commit point:** the rename of the
    /// copy over the log. Offsets from reads before a repair are void.
    ///
    /// # Errors
    ///
    /// As [`JsonLog::read_from`], and [`Error::Io`] or [`Error::Rename`] when a
    /// step before the commit point fails (the log is unchanged);
    /// [`Error::OutcomeUnknown`] when a sync after it fails.
    pub fn repair<T: DeserializeOwned>(&self) -> Result<Option<PathBuf>> {
        let _guard = self.lock.exclusive()?;
        let Some(file) = self.open_read()? else {
            return Ok(None);
        };
        let needs = {
            let mut lines = Lines::new(&file, 0);
            let mut found = false;
            while let Some(line) = lines.next().map_err(|e| Error::io("read", &self.path, e))? {
                if matches!(line.kind::<T>(), LineKind::Torn | LineKind::Bad(_)) {
                    found = true;
                    break;
                }
            }
            found
        };
        if !needs {
            return Ok(None);
        }
        let io = &*self.io;
        let dir = parent(&self.path);
        let qdir = dir.join(crate::state::QUARANTINE_DIR);
        match io.create_dir(&qdir) {
            Ok(()) => sync_dir_with(io, dir)?,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::io("create directory", &qdir, e)),
        }
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let stamp = SystemClock.now().to_string().replace(':', "");
        let (qpath, qfile) = (0u32..)
            .map(|n| match n {
                0 => qdir.join(format!("{stamp}-{name}")),
                n => qdir.join(format!("{stamp}-{name}.{n}")),
            })
            .find_map(|p| match io.create_new(&p, false) {
                Ok(f) => Some(Ok((p, f))),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => None,
                Err(e) => Some(Err(Error::io("create quarantine file", &p, e))),
            })
            .expect("u32 suffixes exhausted")?;
        let (tmp, tmp_file) = match create_temp(io, &self.path) {
            Ok(t) => t,
            Err(e) => {
                let _ = io.remove_file(&qpath);
                return Err(e);
            }
        };
        let copied = self.copy_sorted::<T>(&file, (&tmp, &tmp_file), (&qpath, &qfile));
        let report = match copied.and_then(|report| {
            io.sync_all(&tmp_file, &tmp)
                .and_then(|()| io.sync_all(&qfile, &qpath))
                .map_err(|e| Error::io("sync", &tmp, e))?;
            sync_dir_with(io, &qdir)?;
            Ok(report)
        }) {
            Ok(r) => r,
            Err(e) => {
                let _ = io.remove_file(&tmp);
                let _ = io.remove_file(&qpath);
                return Err(e);
            }
        };
        if let Err(e) = io.rename(&tmp, &self.path) {
            let _ = io.remove_file(&tmp);
            let _ = io.remove_file(&qpath);
            return Err(Error::Rename {
                op: "rename",
                from: tmp,
                to: self.path.clone(),
                source: e,
            });
        }
        sync_dir_with(io, dir).map_err(|e| e.after_commit(&self.path))?;
        let (kept, moved, moved_bytes) = report;
        tracing::warn!(path = %self.path.display(), kept, moved, moved_bytes, quarantined = %qpath.display(), "repaired log");
        Ok(Some(qpath))
    }

    /// Copies the log's whole records to `keep` and everything else to `bad`,
    /// in bounded memory. Returns (records kept, lines moved, bytes moved).
    fn copy_sorted<T: DeserializeOwned>(
        &self,
        file: &File,
        keep: (&Path, &File),
        bad: (&Path, &File),
    ) -> Result<(usize, usize, u64)> {
        let io = &*self.io;
        let mut out = Chunked::new(io, keep.0, keep.1);
        let mut quarantine = Chunked::new(io, bad.0, bad.1);
        let mut file = file;
        file.seek(SeekFrom::Start(0))
            .map_err(|e| Error::io("seek", &self.path, e))?;
        let mut lines = Lines::new(file, 0);
        let (mut kept, mut moved, mut moved_bytes) = (0, 0, 0);
        let read_err = |e| Error::io("read", &self.path, e);
        while let Some(line) = lines.next().map_err(read_err)? {
            match line.kind::<T>() {
                LineKind::Blank => {}
                LineKind::Record(_) => {
                    kept += 1;
                    out.push(line.bytes.as_deref().unwrap_or_default())?;
                }
                LineKind::Bad(_) | LineKind::Torn => {
                    moved += 1;
                    moved_bytes += line.len;
                    match line.bytes.as_deref() {
                        Some(b) => quarantine.push(b)?,
                        None => {
                            // Over the line cap: copy it in chunks, never holding it whole.
                            let mut buf = vec![0u8; 64 * 1024];
                            let mut at = line.start;
                            let end = line.start + line.len;
                            while at < end {
                                let n = buf.len().min((end - at) as usize);
                                file.read_exact_at(&mut buf[..n], at).map_err(read_err)?;
                                quarantine.push(&buf[..n])?;
                                at += n as u64;
                            }
                        }
                    }
                    if matches!(line.kind::<T>(), LineKind::Torn) {
                        // Keep the quarantine file line-shaped.
                        quarantine.push(b"\n")?;
                    }
                }
            }
        }
        out.flush()?;
        quarantine.flush()?;
        Ok((kept, moved, moved_bytes))
    }
}

/// Buffers writes through the seam in 64 KiB chunks.
struct Chunked<'a> {
    io: &'a dyn IoBackend,
    path: &'a Path,
    file: &'a File,
    buf: Vec<u8>,
}

impl<'a> Chunked<'a> {
    fn new(io: &'a dyn IoBackend, path: &'a Path, file: &'a File) -> Self {
        Chunked {
            io,
            path,
            file,
            buf: Vec::with_capacity(64 * 1024),
        }
    }

    fn push(&mut self, bytes: &[u8]) -> Result<()> {
        if self.buf.len() + bytes.len() > 64 * 1024 {
            self.flush()?;
        }
        if bytes.len() > 64 * 1024 {
            return self.write(bytes);
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        let buf = std::mem::take(&mut self.buf);
        self.write(&buf)?;
        self.buf = buf;
        self.buf.clear();
        Ok(())
    }

    fn write(&self, bytes: &[u8]) -> Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        self.io
            .write_all(self.file, self.path, bytes)
            .map_err(|e| Error::io("write", self.path, e))
    }
}
