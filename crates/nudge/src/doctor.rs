//! The doctor's shared steps for signals and reminders, in the store's one
//! shape ([`chipset_store::Report`]).

use std::path::Path;

use chipset_store::{
    Action, Defect, DoctorMode, Finding, ReadOutcome, Report, StateDir, StatePath,
};
use serde::de::DeserializeOwned;

use crate::error::Result;

/// The two areas this crate's doctors cover, which name their findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Area {
    /// `nudge/`: latest, processed and response records.
    Nudge,
    /// `reminders/`: the open and snoozed indexes and the history.
    Reminders,
}

impl Area {
    fn code(self, fault: &Defect) -> &'static str {
        match (self, fault) {
            (Area::Nudge, Defect::Corrupt(_)) => "nudge-corrupt",
            (Area::Nudge, Defect::Unsupported(_)) => "nudge-unsupported",
            (Area::Nudge, Defect::Unfinished) => "nudge-unfinished",
            (Area::Nudge, _) => "nudge-stray",
            (Area::Reminders, Defect::Corrupt(_)) => "reminder-corrupt",
            (Area::Reminders, Defect::Unsupported(_)) => "reminder-unsupported",
            (Area::Reminders, Defect::Unfinished) => "reminder-unfinished",
            (Area::Reminders, _) => "reminder-stray",
        }
    }

    /// Returns the finding of `fault` at `path`, worded as `chipset doctor` prints it.
    pub(crate) fn finding(self, path: &Path, fault: Defect, unfinished: &str) -> Finding {
        let what = match &fault {
            Defect::Corrupt(reason) => format!("corrupt ({reason})"),
            Defect::Unfinished => format!("unfinished: {unfinished}"),
            Defect::Unsupported(what) => {
                format!("holds {what}, unsupported by this version (left in place)")
            }
            _ => "not written by chipset (left alone)".to_owned(),
        };
        let line = format!("`{}`: {what}", path.display());
        Finding::new(self.code(&fault), fault, line).at(path)
    }

    /// Returns the finding of a name chipset does not write here (left alone).
    pub(crate) fn stray(self, path: &Path) -> Finding {
        self.finding(path, Defect::Stray, "")
    }
}

/// A file type the doctor checks: how to take its bytes, telling a value
/// this version does not know (unsupported) from a corrupt file.
pub(crate) trait OnDisk: DeserializeOwned {
    /// Takes the bytes read from `path` as this type.
    fn parse(path: &Path, bytes: &[u8]) -> ReadOutcome<Self> {
        ReadOutcome::from_json(path, bytes)
    }
}

impl OnDisk for crate::format::Nudge {}
impl OnDisk for crate::format::ProcessedRecord {}
impl OnDisk for crate::format::Reminder {
    fn parse(path: &Path, bytes: &[u8]) -> ReadOutcome<Self> {
        crate::reminders::parse_reminder(path, bytes)
    }
}

/// Reads `path` as a `T`.
fn read<T: OnDisk>(state: &StateDir, path: &StatePath) -> chipset_store::Result<ReadOutcome<T>> {
    Ok(state
        .read_bytes(path)?
        .and_then(|bytes| T::parse(path, &bytes)))
}

/// Checks one JSON file: records it as scanned and, when corrupt, as a
/// finding, quarantining it (through the store's checked quarantine, under
/// `lock`, the lock its writers take) when fixing. Returns the value.
pub(crate) fn check_file<T: OnDisk>(
    state: &StateDir,
    area: Area,
    path: &StatePath,
    lock: &StatePath,
    report: &mut Report,
) -> Result<Option<T>> {
    report.scanned += 1;
    match read::<T>(state, path)? {
        ReadOutcome::Missing => Ok(None),
        ReadOutcome::Value(v) => Ok(Some(v)),
        ReadOutcome::Corrupt(c) => {
            let mut finding = area.finding(path, Defect::Corrupt(c.reason), "");
            if report.mode == DoctorMode::Fix {
                let action = state.quarantine_checked(path, Some(lock), |seen| {
                    seen.as_ref().and_then(|b| T::parse(path, b)).is_corrupt()
                })?;
                finding = finding.with(action);
            }
            report.findings.push(finding);
            Ok(None)
        }
        // Well-formed but newer than this version: reported, never moved aside.
        ReadOutcome::Unsupported(u) => {
            report
                .findings
                .push(area.finding(path, Defect::Unsupported(u.what), ""));
            Ok(None)
        }
    }
}

/// Returns the action of finishing an interrupted transition.
pub(crate) fn completed() -> Action {
    Action::Completed("completed".to_owned())
}
