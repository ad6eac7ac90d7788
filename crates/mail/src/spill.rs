//! An external sort of byte lines, so that the doctor can join what it
//! scans (message files, manifest events, reply-index entries) by message
//! id in memory that does not grow with the number of messages.
//!
//! Lines are collected in one buffer; when it holds more than the budget
//! they are sorted and written as a *run* to a scratch file
//! ([`StateDir::scratch_file`]: nameless, gone when dropped, never synced).
//! Reading merges the runs. Lines are compared as bytes, so a record that
//! starts with its key and a tab sorts by key first (a tab sorts below
//! every character an id may hold: ids have no control characters).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use chipset_store::ScratchFile;
use chipset_store::{StateDir, StatePath};

use crate::error::Result;

/// Bytes a sorter holds before it spills a run (lines and their offsets).
pub(crate) const BUDGET: usize = 8 * 1024 * 1024;
/// How much of a run a merge reads at a time.
const CHUNK: usize = 64 * 1024;
// A merge that read nothing at a time would never reach a run's end.
const _: () = assert!(CHUNK > 0);

/// Collects lines; [`Sorter::finish`] returns them sorted.
pub(crate) struct Sorter<'a> {
    state: &'a StateDir,
    dir: StatePath,
    budget: usize,
    buf: Vec<u8>,
    spans: Vec<(u32, u32)>,
    file: Option<ScratchFile>,
    end: u64,
    runs: Vec<(u64, u64)>,
}

impl<'a> Sorter<'a> {
    /// A sorter that spills into scratch files in `dir`.
    pub(crate) fn new(state: &'a StateDir, dir: &StatePath, budget: usize) -> Self {
        Sorter {
            state,
            dir: dir.clone(),
            budget,
            buf: Vec::new(),
            spans: Vec::new(),
            file: None,
            end: 0,
            runs: Vec::new(),
        }
    }

    /// Adds one line (which must hold no `\n`).
    pub(crate) fn push(&mut self, line: &[u8]) -> Result<()> {
        debug_assert!(!line.contains(&b'\n'));
        if self.buf.len() + line.len() > u32::MAX as usize
            || self.buf.len() + self.spans.len() * 8 + line.len() > self.budget
        {
            self.spill()?;
        }
        let start = u32::try_from(self.buf.len()).expect("checked above");
        self.buf.extend_from_slice(line);
        self.spans
            .push((start, u32::try_from(line.len()).expect("checked above")));
        Ok(())
    }

    fn sort(&mut self) {
        let buf = &self.buf;
        self.spans
            .sort_unstable_by(|a, b| slice(buf, *a).cmp(slice(buf, *b)));
    }

    /// Writes the buffered lines, sorted, as a run.
    fn spill(&mut self) -> Result<()> {
        if self.spans.is_empty() {
            return Ok(());
        }
        self.sort();
        if self.file.is_none() {
            self.file = Some(self.state.scratch_file(&self.dir)?);
        }
        let file = self.file.as_ref().expect("just created");
        let start = self.end;
        let mut out = Vec::with_capacity(CHUNK * 4);
        for span in &self.spans {
            out.extend_from_slice(slice(&self.buf, *span));
            out.push(b'\n');
            if out.len() >= CHUNK * 4 {
                file.write_all_at(&out, self.end)?;
                self.end += out.len() as u64;
                out.clear();
            }
        }
        file.write_all_at(&out, self.end)?;
        self.end += out.len() as u64;
        self.runs.push((start, self.end));
        self.buf.clear();
        self.spans.clear();
        // Give the memory back: the next run fills it again from empty.
        self.buf.shrink_to(self.budget / 2);
        Ok(())
    }

    /// Returns every line pushed, in byte order.
    pub(crate) fn finish(mut self) -> Result<Sorted> {
        if self.runs.is_empty() {
            self.sort();
            return Ok(Sorted::Memory {
                buf: self.buf,
                spans: self.spans.into_iter(),
            });
        }
        self.spill()?;
        let file = self.file.take().expect("runs were written");
        let mut runs: Vec<Run> = self
            .runs
            .iter()
            .map(|&(pos, end)| Run {
                pos,
                end,
                buf: Vec::new(),
                at: 0,
            })
            .collect();
        let mut heap = BinaryHeap::new();
        for (i, run) in runs.iter_mut().enumerate() {
            if let Some(line) = run.next(&file)? {
                heap.push(Reverse((line, i)));
            }
        }
        Ok(Sorted::Merge { file, runs, heap })
    }
}

fn slice(buf: &[u8], (start, len): (u32, u32)) -> &[u8] {
    &buf[start as usize..start as usize + len as usize]
}

/// One sorted run in the scratch file.
pub(crate) struct Run {
    pos: u64,
    end: u64,
    buf: Vec<u8>,
    at: usize,
}

impl Run {
    fn next(&mut self, file: &ScratchFile) -> Result<Option<Vec<u8>>> {
        loop {
            if let Some(nl) = self.buf[self.at..].iter().position(|b| *b == b'\n') {
                let line = self.buf[self.at..self.at + nl].to_vec();
                self.at += nl + 1;
                return Ok(Some(line));
            }
            if self.pos >= self.end {
                return Ok(None);
            }
            self.buf.drain(..self.at);
            self.at = 0;
            let want = CHUNK.min(usize::try_from(self.end - self.pos).unwrap_or(CHUNK));
            let old = self.buf.len();
            self.buf.resize(old + want, 0);
            file.read_exact_at(&mut self.buf[old..], self.pos)?;
            self.pos += want as u64;
        }
    }
}

/// The lines of a [`Sorter`], in order.
pub(crate) enum Sorted {
    Memory {
        buf: Vec<u8>,
        spans: std::vec::IntoIter<(u32, u32)>,
    },
    Merge {
        file: ScratchFile,
        runs: Vec<Run>,
        heap: BinaryHeap<Reverse<(Vec<u8>, usize)>>,
    },
}

impl Sorted {
    /// The next line, or `None` at the end.
    pub(crate) fn next_line(&mut self) -> Result<Option<Vec<u8>>> {
        match self {
            Sorted::Memory { buf, spans } => Ok(spans.next().map(|s| slice(buf, s).to_vec())),
            Sorted::Merge { file, runs, heap } => {
                let Some(Reverse((line, i))) = heap.pop() else {
                    return Ok(None);
                };
                if let Some(next) = runs[i].next(file)? {
                    heap.push(Reverse((next, i)));
                }
                Ok(Some(line))
            }
        }
    }
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "the test plants and inspects files as another program would, outside the store's API"
)]
mod tests {
    use std::path::Path;

    use super::*;

    fn sorted(budget: usize, lines: &[&str]) -> Vec<String> {
        let tmp = tempfile::tempdir().unwrap();
        let out = sorted_in(tmp.path(), budget, lines);
        // The scratch file has no name: nothing is left behind.
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
        out
    }

    fn sorted_in(dir: &Path, budget: usize, lines: &[&str]) -> Vec<String> {
        let tmp = dir;
        let state = StateDir::open(tmp).unwrap();
        let mut sorter = Sorter::new(&state, &state.root_path(), budget);
        for l in lines {
            sorter.push(l.as_bytes()).unwrap();
        }
        drain(sorter.finish().unwrap(), lines.len())
    }

    /// The lines of `s`, failing as soon as there are more than `pushed`
    /// (a merge that never ends fails here instead of running forever).
    fn drain(mut s: Sorted, pushed: usize) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(l) = s.next_line().unwrap() {
            assert!(out.len() < pushed, "more lines than the {pushed} pushed");
            out.push(String::from_utf8(l).unwrap());
        }
        out
    }

    #[test]
    fn spilled_runs_merge_into_the_same_order_as_memory() {
        let lines: Vec<String> = (0..5_000u32)
            .map(|i| format!("{:08}\tM\t{}", (i * 7919) % 5_000, i % 13))
            .collect();
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let mut want = lines.clone();
        want.sort();
        assert_eq!(sorted(BUDGET, &refs), want);
        // A tiny budget: dozens of runs, merged.
        assert_eq!(sorted(4_096, &refs), want);
        assert_eq!(sorted(64, &[]), Vec::<String>::new());
    }

    #[test]
    fn lines_that_fill_the_budget_exactly_stay_in_memory() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path()).unwrap();
        // Two 4-byte lines and the first one's 8-byte span: exactly 16.
        let mut sorter = Sorter::new(&state, &state.root_path(), 16);
        sorter.push(b"b\tM1").unwrap();
        sorter.push(b"a\tM2").unwrap();
        assert!(sorter.runs.is_empty(), "spilled at the budget");
        // One byte more is over it: the two are spilled as a run first.
        sorter.push(b"c").unwrap();
        assert_eq!(sorter.runs.len(), 1);
        assert_eq!(drain(sorter.finish().unwrap(), 3), ["a\tM2", "b\tM1", "c"]);
    }

    /// About 1 MiB of lines: held in memory under the doctor's budget
    /// (8 MiB: an ordinary project's scan never touches the disk), and
    /// under a budget of 300 KiB spilled as runs each larger than the
    /// 256 KiB a spill writes at a time, merged into the same order.
    #[test]
    fn runs_larger_than_a_write_merge_into_the_same_order() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::open(tmp.path()).unwrap();
        let lines: Vec<String> = (0..10_000u32)
            .map(|i| format!("{:08}\t{}", (i * 7919) % 10_000, "x".repeat(90)))
            .collect();
        let mut want = lines.clone();
        want.sort();
        for (budget, runs) in [(BUDGET, 0), (300 * 1024, 3)] {
            let mut sorter = Sorter::new(&state, &state.root_path(), budget);
            for l in &lines {
                sorter.push(l.as_bytes()).unwrap();
            }
            assert_eq!(sorter.runs.len(), runs, "budget {budget}");
            for (start, end) in &sorter.runs {
                assert!(end - start > 4 * CHUNK as u64, "a run of {}", end - start);
            }
            // After a spill the buffer keeps half the budget, not all it grew to.
            if runs > 0 {
                assert_eq!(sorter.buf.capacity(), budget / 2);
            }
            let out = drain(sorter.finish().unwrap(), lines.len());
            assert_eq!(out, want, "budget {budget}");
        }
    }

    #[test]
    fn a_key_sorts_before_its_extensions() {
        assert_eq!(
            sorted(16, &["ab\tM", "a\tS", "a\tM", "a-\tM"]),
            ["a\tM", "a\tS", "a-\tM", "ab\tM"]
        );
    }
}
