//! The rows of a doctor run, kept in memory up to a limit and beyond it
//! written to a nameless scratch file under the state root, then read back
//! in the order they came.

use std::io;

use chipset_store::{ScratchFile, StateDir};

/// Rows kept in memory before the rest go to a scratch file.
pub(super) const HELD: usize = 4096;
/// How much of the scratch file is written or read at a time.
const CHUNK: usize = 64 * 1024;

/// One problem found, and what was done about it (`None`: still there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Row {
    pub(super) area: &'static str,
    pub(super) problem: String,
    pub(super) action: Option<String>,
}

/// What every row listed adds up to: the summary line and the table's
/// first column need it before the first row is written.
#[derive(Debug, Default)]
struct Counts {
    total: usize,
    fixed: usize,
    area_width: usize,
}

impl Counts {
    fn add(&mut self, row: &Row) {
        self.total += 1;
        self.fixed += usize::from(row.action.is_some());
        self.area_width = self.area_width.max(row.area.chars().count());
    }
}

/// Rows as they come: the first [`HELD`] in memory, the rest spilled.
pub(super) struct Rows {
    state: StateDir,
    limit: usize,
    held: Vec<Row>,
    /// The areas' names, by the index a spilled row carries.
    names: Vec<&'static str>,
    spill: Option<ScratchFile>,
    buf: Vec<u8>,
    end: u64,
    error: Option<chipset_store::Error>,
    counts: Counts,
}

impl Rows {
    /// Returns an empty list that keeps `limit` rows in memory.
    pub(super) fn new(state: StateDir, limit: usize) -> Self {
        Rows {
            state,
            limit,
            held: Vec::new(),
            names: Vec::new(),
            spill: None,
            buf: Vec::new(),
            end: 0,
            error: None,
            counts: Counts::default(),
        }
    }

    /// Adds a row. A scratch file that cannot be written is reported by
    /// [`Rows::finish`]; one that cannot be created (a read-only root)
    /// leaves every row in memory, as before the scratch file was there.
    pub(super) fn push(&mut self, row: Row) {
        self.counts.add(&row);
        if self.held.len() < self.limit {
            self.held.push(row);
            return;
        }
        if self.error.is_some() {
            return;
        }
        if self.spill.is_none() {
            match self.state.scratch_file(&self.state.root_path()) {
                Ok(file) => self.spill = Some(file),
                Err(_) => {
                    self.limit = usize::MAX;
                    self.held.push(row);
                    return;
                }
            }
        }
        let area = match self.names.iter().position(|n| *n == row.area) {
            Some(i) => i,
            None => {
                self.names.push(row.area);
                self.names.len() - 1
            }
        };
        // JSON strings hold no raw newline: one row per line.
        serde_json::to_writer(&mut self.buf, &(area, &row.problem, &row.action))
            .expect("a tuple of strings serializes");
        self.buf.push(b'\n');
        if self.buf.len() >= CHUNK {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if let Some(file) = &self.spill
            && !self.buf.is_empty()
        {
            match file.write_all_at(&self.buf, self.end) {
                Ok(()) => self.end += self.buf.len() as u64,
                Err(e) => self.error = Some(e),
            }
            self.buf.clear();
        }
    }

    /// Returns the rows for reading back, in order.
    ///
    /// # Errors
    ///
    /// The scratch file could not be written.
    pub(super) fn finish(mut self) -> chipset_store::Result<Finished> {
        self.flush();
        if let Some(e) = self.error {
            return Err(e);
        }
        Ok(Finished {
            held: self.held.into_iter(),
            names: self.names,
            spill: self.spill,
            end: self.end,
            pos: 0,
            chunk: Vec::new(),
            start: 0,
            counts: self.counts,
        })
    }
}

/// The rows, read back in the order they came.
pub(super) struct Finished {
    held: std::vec::IntoIter<Row>,
    names: Vec<&'static str>,
    spill: Option<ScratchFile>,
    end: u64,
    /// Where the next read of the scratch file starts.
    pos: u64,
    /// What was read and not yet returned, from `start`.
    chunk: Vec<u8>,
    start: usize,
    counts: Counts,
}

impl Finished {
    /// Counts a row listed beside these (an area that could not finish).
    pub(super) fn count(&mut self, row: &Row) {
        self.counts.add(row);
    }

    /// Returns how many rows are listed, counted ones included.
    pub(super) fn total(&self) -> usize {
        self.counts.total
    }

    /// Returns how many of them were fixed.
    pub(super) fn fixed(&self) -> usize {
        self.counts.fixed
    }

    /// Returns the widest area name among them, in characters.
    pub(super) fn area_width(&self) -> usize {
        self.counts.area_width
    }

    /// Returns the next row.
    ///
    /// # Errors
    ///
    /// The scratch file could not be read back as written.
    pub(super) fn next(&mut self) -> io::Result<Option<Row>> {
        if let Some(row) = self.held.next() {
            return Ok(Some(row));
        }
        let Some(file) = &self.spill else {
            return Ok(None);
        };
        loop {
            if let Some(n) = self.chunk[self.start..].iter().position(|b| *b == b'\n') {
                let line = &self.chunk[self.start..self.start + n];
                self.start += n + 1;
                let (area, problem, action): (usize, String, Option<String>) =
                    serde_json::from_slice(line).map_err(io::Error::other)?;
                let area = *self.names.get(area).ok_or_else(|| {
                    io::Error::new(io::ErrorKind::InvalidData, "a scratch row names no area")
                })?;
                return Ok(Some(Row {
                    area,
                    problem,
                    action,
                }));
            }
            if self.pos >= self.end {
                return if self.start < self.chunk.len() {
                    Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "a scratch row did not read back whole",
                    ))
                } else {
                    Ok(None)
                };
            }
            self.chunk.drain(..self.start);
            self.start = 0;
            let len = usize::try_from(self.end - self.pos).map_or(CHUNK, |left| left.min(CHUNK));
            let at = self.chunk.len();
            self.chunk.resize(at + len, 0);
            file.read_exact_at(&mut self.chunk[at..], self.pos)
                .map_err(io::Error::other)?;
            self.pos += len as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(i: usize) -> Row {
        Row {
            area: ["hooks", "mail", "reminders"][i % 3],
            problem: format!("problem {i}: `a\nb` \"quoted\" {}", "x".repeat(i % 97)),
            action: i.is_multiple_of(2).then(|| format!("fixed {i}")),
        }
    }

    #[test]
    fn rows_beyond_the_limit_are_spilled_and_read_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path()).unwrap();
        let mut rows = Rows::new(state, 10);
        for i in 0..5_000 {
            rows.push(row(i));
        }
        // Only the first ten are in memory.
        assert_eq!(rows.held.len(), 10);
        assert!(rows.spill.is_some());
        let mut rows = rows.finish().unwrap();
        assert_eq!(
            (rows.total(), rows.fixed(), rows.area_width()),
            (5_000, 2_500, 9)
        );
        for i in 0..5_000 {
            assert_eq!(rows.next().unwrap(), Some(row(i)));
        }
        assert_eq!(rows.next().unwrap(), None);
    }

    #[test]
    fn rows_within_the_limit_stay_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path()).unwrap();
        let mut rows = Rows::new(state, HELD);
        for i in 0..3 {
            rows.push(row(i));
        }
        assert!(rows.spill.is_none());
        let mut rows = rows.finish().unwrap();
        rows.count(&Row {
            area: "temps",
            problem: "p".to_owned(),
            action: None,
        });
        assert_eq!((rows.total(), rows.fixed()), (4, 2));
        for i in 0..3 {
            assert_eq!(rows.next().unwrap(), Some(row(i)));
        }
        assert_eq!(rows.next().unwrap(), None);
    }
}
