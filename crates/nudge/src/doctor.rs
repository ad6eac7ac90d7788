//! What a doctor scan reports, shared by signals and reminders.

use std::path::{Path, PathBuf};

use chipset_store::{CorruptReason, Corruption, Lock, ReadOutcome, StateDir};
use serde::de::DeserializeOwned;

use crate::error::Result;

/// Whether a doctor only reports or also repairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Repair {
    /// Report what is wrong; change nothing.
    #[default]
    ReportOnly,
    /// Quarantine corrupt files (moved aside into `.quarantine/`, never
    /// deleted) and finish interrupted transitions.
    Fix,
}

/// What a doctor scan found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DoctorReport {
    /// How many files were checked.
    pub scanned: usize,
    /// Every problem found, with what was done about it.
    pub findings: Vec<Finding>,
}

impl DoctorReport {
    /// Returns true when nothing was found.
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty()
    }

    /// Appends another report's counts and findings.
    pub fn merge(&mut self, other: DoctorReport) {
        self.scanned += other.scanned;
        self.findings.extend(other.findings);
    }
}

/// One problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The file or directory concerned.
    pub path: PathBuf,
    /// What is wrong.
    pub problem: Problem,
    /// What the doctor did.
    pub action: Action,
}

/// What is wrong with a file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// It cannot be read as what it should be.
    Corrupt(CorruptReason),
    /// It holds a value this version does not know (left in place).
    Unsupported(String),
    /// A transition was interrupted (a crash between its two durable steps).
    Unfinished(&'static str),
    /// A name that chipset does not write here (left alone).
    StrayEntry,
}

/// What the doctor did about a finding.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action {
    /// Nothing (report only, or nothing safe to do).
    None,
    /// Moved aside to this path.
    Quarantined(PathBuf),
    /// The interrupted transition was completed.
    Completed,
}

/// A file type the doctor checks: how to read it, telling a value this
/// version does not know (unsupported) from a corrupt file.
pub(crate) trait OnDisk: DeserializeOwned {
    /// Reads `path` as this type.
    fn read_from(state: &StateDir, path: &Path) -> chipset_store::Result<ReadOutcome<Self>> {
        state.read_json(path)
    }
}

impl OnDisk for crate::format::Nudge {}
impl OnDisk for crate::format::ProcessedRecord {}
impl OnDisk for crate::format::Reminder {
    fn read_from(state: &StateDir, path: &Path) -> chipset_store::Result<ReadOutcome<Self>> {
        crate::reminders::read_reminder(state, path)
    }
}

/// Checks one JSON file: records it as scanned and, when corrupt, as a
/// finding, quarantining it under its lock when repairing. Returns the value.
pub(crate) fn check_file<T: OnDisk>(
    state: &StateDir,
    path: &Path,
    lock: &Lock,
    repair: Repair,
    report: &mut DoctorReport,
) -> Result<Option<T>> {
    report.scanned += 1;
    match T::read_from(state, path)? {
        ReadOutcome::Missing => Ok(None),
        ReadOutcome::Value(v) => Ok(Some(v)),
        ReadOutcome::Corrupt(c) => {
            let action = match repair {
                Repair::ReportOnly => Action::None,
                Repair::Fix => quarantine_if_corrupt::<T>(state, path, lock)?
                    .map_or(Action::None, Action::Quarantined),
            };
            report.findings.push(Finding {
                path: path.to_owned(),
                problem: Problem::Corrupt(c.reason),
                action,
            });
            Ok(None)
        }
        // Well-formed but newer than this version: reported, never moved aside.
        ReadOutcome::Unsupported(u) => {
            report.findings.push(Finding {
                path: path.to_owned(),
                problem: Problem::Unsupported(u.what),
                action: Action::None,
            });
            Ok(None)
        }
    }
}

/// Quarantines `path` under `lock` (the lock its writers take) if it is
/// (still) corrupt. Returns where it went.
pub(crate) fn quarantine_if_corrupt<T: OnDisk>(
    state: &StateDir,
    path: &Path,
    lock: &Lock,
) -> Result<Option<PathBuf>> {
    let _guard = lock.exclusive()?;
    match T::read_from(state, path)? {
        ReadOutcome::Corrupt(Corruption { path, .. }) => Ok(Some(state.quarantine(&path)?)),
        _ => Ok(None),
    }
}
