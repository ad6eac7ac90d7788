//! Moving a bad file aside safely: what a doctor saw at a path
//! ([`StateDir::observe`]) and the one checked move into `.quarantine/`
//! ([`StateDir::quarantine_checked`]), which leaves alone a file a writer
//! changed since it was judged.

use std::fs;
use std::io;

use crate::error::{Error, Result};
use crate::path::StatePath;
use crate::read::{CorruptReason, Corruption, ReadOutcome};
use crate::repair::Action;
use crate::state::StateDir;

impl StateDir {
    /// Returns what is at `path` as [`StateDir::read_bytes`] would, without
    /// following a symlink and without opening anything but a regular file:
    /// a FIFO, device, directory or symlink is corrupt with
    /// [`CorruptReason::NotARegularFile`] (opening a FIFO or a device can
    /// block or act), a file over the read cap is corrupt with
    /// [`CorruptReason::TooLarge`] (not read). What a doctor judges, and
    /// what [`StateDir::quarantine_checked`] compares.
    ///
    /// # Errors
    ///
    /// [`Error::OutsideRoot`], [`Error::Symlink`] for a symlinked directory on
    /// the way, [`Error::Io`] when `path` cannot be examined or read.
    pub fn observe(&self, path: &StatePath) -> Result<ReadOutcome<Vec<u8>>> {
        self.observe_capped(path, self.read_cap())
    }

    /// [`StateDir::observe`] with a cap of the caller's instead of the
    /// store's read cap.
    pub(crate) fn observe_capped(
        &self,
        path: &StatePath,
        cap: u64,
    ) -> Result<ReadOutcome<Vec<u8>>> {
        let at = path.as_path();
        let not_regular = || {
            ReadOutcome::Corrupt(Corruption {
                path: at.to_owned(),
                reason: CorruptReason::NotARegularFile,
            })
        };
        if !self.parents_ok(at)? {
            return Ok(ReadOutcome::Missing);
        }
        match fs::symlink_metadata(at) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(ReadOutcome::Missing),
            Err(e) => return Err(Error::io("stat", at, e)),
            Ok(m) if !m.file_type().is_file() => return Ok(not_regular()),
            Ok(_) => {}
        }
        match self
            .read_bytes_capped(path, cap)
            .map(|r| r.map(|(bytes, _)| bytes))
        {
            Ok(ReadOutcome::Corrupt(c)) => Ok(match c.reason {
                CorruptReason::TooLarge { .. } => ReadOutcome::Corrupt(c),
                _ => not_regular(),
            }),
            Ok(ReadOutcome::Unsupported(_)) => unreachable!("a byte read is never unsupported"),
            Ok(read) => Ok(read),
            // Replaced by a symlink since the stat.
            Err(Error::Symlink { .. }) => Ok(not_regular()),
            Err(e) => Err(e),
        }
    }

    /// Moves `path` aside into `.quarantine/` beside it if it is still bad:
    /// reads it (without opening anything but a regular file), asks `is_bad`,
    /// takes the lock of `lock` ([`StateDir::lock`]: `path` itself, or the
    /// file whose lock its writers take; `None` for files no writer ever
    /// rewrites, such as no-clobber messages, or when the caller holds the
    /// lock already), reads it again, and moves it only if it is byte for
    /// byte what was judged bad. A file that a writer rewrote, or that went
    /// away, between the check and the fix is left alone, and the returned
    /// [`Action::LeftAlone`] says so.
    ///
    /// This is the one way a doctor moves a file aside; nothing is deleted.
    /// A caller that does more under the same lock (a hook is reset to
    /// empty in the same critical section) holds it, passes `None`, and
    /// judges "still exactly what I saw".
    ///
    /// # Errors
    ///
    /// As [`StateDir::observe`], [`StateDir::lock`] and [`StateDir::quarantine`].
    pub fn quarantine_checked(
        &self,
        path: &StatePath,
        lock: Option<&StatePath>,
        is_bad: impl FnOnce(&ReadOutcome<Vec<u8>>) -> bool,
    ) -> Result<Action> {
        let seen = self.observe(path)?;
        if seen == ReadOutcome::Missing {
            return Ok(Action::LeftAlone("gone before the fix".to_owned()));
        }
        if !is_bad(&seen) {
            return Ok(Action::LeftAlone("no longer bad".to_owned()));
        }
        let _guard = lock.map(|l| self.lock(l)).transpose()?;
        self.quarantine_unchanged(path, &seen)
    }

    /// Moves `path` aside if it is still exactly `seen` (the caller holds the
    /// lock its writers take, or no writer rewrites it). The second half of
    /// [`StateDir::quarantine_checked`].
    ///
    /// # Errors
    ///
    /// As [`StateDir::observe`] and [`StateDir::quarantine`].
    fn quarantine_unchanged(
        &self,
        path: &StatePath,
        seen: &ReadOutcome<Vec<u8>>,
    ) -> Result<Action> {
        let now = self.observe(path)?;
        if now == ReadOutcome::Missing {
            return Ok(Action::LeftAlone("gone before the fix".to_owned()));
        }
        if &now != seen {
            return Ok(Action::LeftAlone(
                "rewritten since it was checked".to_owned(),
            ));
        }
        match self.quarantine(path) {
            Ok(to) => Ok(Action::quarantined(to)),
            Err(Error::NotFound { .. }) => Ok(Action::LeftAlone("gone before the fix".to_owned())),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::path::at;
    use crate::read::parse_json;

    fn temp() -> (tempfile::TempDir, StateDir) {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path()).unwrap();
        (dir, state)
    }

    fn corrupt_json(o: &ReadOutcome<Vec<u8>>) -> bool {
        o.as_ref()
            .and_then(|b| parse_json::<serde_json::Value>(Path::new("x"), b))
            .is_corrupt()
    }

    fn not_regular(o: &ReadOutcome<Vec<u8>>) -> bool {
        matches!(o, ReadOutcome::Corrupt(c) if c.reason == CorruptReason::NotARegularFile)
    }

    #[test]
    fn quarantines_a_file_that_is_still_bad() {
        let (_d, state) = temp();
        let path = at(&state, "hooks/a.json");
        state.write_bytes(&path, b"{").unwrap();
        let action = state
            .quarantine_checked(&path, Some(&path), corrupt_json)
            .unwrap();
        let Action::Quarantined { to: Some(to), .. } = &action else {
            panic!("{action:?}");
        };
        assert_eq!(std::fs::read(to).unwrap(), b"{");
        assert_eq!(state.observe(&path).unwrap(), ReadOutcome::Missing);
        assert!(action.to_string().starts_with("quarantined to `"));
    }

    /// Regression (bus): a file rewritten by its writer between the check and
    /// the fix was moved aside; now it is left alone.
    #[test]
    fn leaves_alone_a_file_rewritten_between_check_and_fix() {
        let (_d, state) = temp();
        let path = at(&state, "bus/a/presence.json");
        state.write_bytes(&path, b"{").unwrap();
        let action = state
            .quarantine_checked(&path, Some(&path), |seen| {
                // A heartbeat rewrites the file after the check, before the lock.
                state.write_bytes(&path, b"{}").unwrap();
                corrupt_json(seen)
            })
            .unwrap();
        assert_eq!(
            action,
            Action::LeftAlone("rewritten since it was checked".to_owned())
        );
        assert!(!action.is_change());
        assert_eq!(
            state.observe(&path).unwrap(),
            ReadOutcome::Value(b"{}".to_vec())
        );
    }

    #[test]
    fn leaves_alone_a_file_that_is_good_or_gone() {
        let (_d, state) = temp();
        let path = at(&state, "hooks/a.json");
        state.write_bytes(&path, b"{}").unwrap();
        assert_eq!(
            state.quarantine_checked(&path, None, corrupt_json).unwrap(),
            Action::LeftAlone("no longer bad".to_owned())
        );
        let gone = at(&state, "hooks/b.json");
        assert_eq!(
            state.quarantine_checked(&gone, None, |_| true).unwrap(),
            Action::LeftAlone("gone before the fix".to_owned())
        );
        assert_eq!(
            state.observe(&path).unwrap(),
            ReadOutcome::Value(b"{}".to_vec())
        );
    }

    /// A FIFO or a directory is observed without being opened (a blocking
    /// open of a FIFO would hang the doctor) and can be moved aside.
    #[test]
    fn observes_and_moves_non_regular_files_without_opening_them() {
        let (_d, state) = temp();
        let dir = at(&state, "loop/witness.jsonl");
        state.ensure_dir(&dir).unwrap();
        assert!(not_regular(&state.observe(&dir).unwrap()));
        let fifo = at(&state, "loop/agents.json");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            fifo.as_path(),
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        let seen = state.observe(&fifo).unwrap();
        assert!(not_regular(&seen));
        assert!(seen.and_then(|_| ReadOutcome::Value(())).is_corrupt());
        for path in [&dir, &fifo] {
            let action = state.quarantine_checked(path, None, not_regular).unwrap();
            assert!(
                matches!(action, Action::Quarantined { to: Some(_), .. }),
                "{action:?}"
            );
            assert_eq!(state.observe(path).unwrap(), ReadOutcome::Missing);
        }
    }

    /// "There but not examinable" is an error, never "not there": a doctor
    /// must not take a file it cannot stat for a missing one.
    #[test]
    fn observe_reports_a_failed_stat_instead_of_missing() {
        let (_d, state) = temp();
        // Too long a name for the kernel: a `StatePath` made past its checks.
        let path = StatePath::from_checked(state.root().join("hooks").join("x".repeat(300)));
        state.ensure_dir(&at(&state, "hooks")).unwrap();
        for err in [
            state.observe(&path).unwrap_err(),
            state.stat(&path).unwrap_err(),
        ] {
            assert!(
                matches!(&err, Error::Io { op: "stat", path: p, .. } if *p == *path),
                "{err:?}"
            );
        }
    }

    #[test]
    fn exists_tells_there_from_not_there() {
        let (_d, state) = temp();
        let path = at(&state, "loop/dispatcher/log.jsonl");
        assert!(state.stat(&path).unwrap().is_none());
        // Its directory there, the log not yet.
        state.ensure_dir(&at(&state, "loop/dispatcher")).unwrap();
        assert!(state.stat(&path).unwrap().is_none());
        state.write_bytes(&path, b"").unwrap();
        assert!(state.stat(&path).unwrap().is_some());
        let dir = at(&state, "loop/dispatcher");
        assert!(state.stat(&dir).unwrap().is_some());
    }

    #[test]
    fn observes_an_oversized_file_without_reading_it() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open_with(
            dir.path(),
            crate::StateOptions {
                read_cap: 4,
                ..Default::default()
            },
        )
        .unwrap();
        let path = at(&state, "hooks/a.json");
        state.write_bytes(&path, b"123456").unwrap();
        let read = state
            .observe(&path)
            .unwrap()
            .and_then(|_| ReadOutcome::Value(()));
        assert_eq!(
            read,
            ReadOutcome::Corrupt(crate::read::Corruption {
                path: path.clone().into_path_buf(),
                reason: CorruptReason::TooLarge { size: 6, cap: 4 }
            })
        );
    }
}
