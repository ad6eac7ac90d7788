//! Upkeep of the reminder indexes: the snooze sweep and the doctor.

use chipset_store::{Corruption, Defect, DoctorMode, Report};

use super::rules::{is_due, path_key};
use super::{OPEN_DIR, Reminders, SNOOZED_DIR};
use crate::doctor;
use crate::error::{Error, Result};
use crate::format::{Reminder, Resolution};

impl Reminders {
    /// Reopens every snoozed reminder whose time has come (seed §6.3, on
    /// read). [`Reminders::list_open`] calls it; returns the reopened ones.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] on I/O failure. Unreadable snoozed files are skipped
    /// here; [`Reminders::list_open`] reports them.
    pub fn sweep_snoozes(&self) -> Result<Vec<Reminder>> {
        Ok(self.sweep_snoozes_reporting()?.0)
    }

    /// As [`Reminders::sweep_snoozes`], also returning the snoozed files that
    /// could not be read: a corrupt snoozed reminder may be due, so a listing
    /// must say so rather than look clean.
    pub(super) fn sweep_snoozes_reporting(&self) -> Result<(Vec<Reminder>, Vec<Corruption>)> {
        let now = self.now()?;
        let mut reopened = Vec::new();
        let mut corrupt = Vec::new();
        for path in self.index_files(SNOOZED_DIR, None)? {
            let snoozed = match self.read(&path) {
                Ok(Some(r)) => r,
                Ok(None) => continue,
                Err(Error::Corrupt(c)) => {
                    corrupt.push(c);
                    continue;
                }
                Err(e) => return Err(e),
            };
            if !is_due(&snoozed, now) {
                continue;
            }
            let key = Self::key_of(&snoozed)?;
            let _guard = self.lock_key(&key)?;
            self.settle(&key)?;
            // Re-check under the lock: another process may have reopened it.
            if let Some(current) = self.read(&self.snoozed_path(&key))?
                && current.id == snoozed.id
                && is_due(&current, now)
            {
                reopened.push(self.reopen_locked(&key, &current, now)?);
            }
        }
        Ok((reopened, corrupt))
    }

    /// Scans the open and snoozed indexes and the history: reports unreadable
    /// files, stray names and interrupted transitions; with
    /// [`DoctorMode::Fix`] quarantines the unreadable files (through the
    /// store's checked quarantine, under their stripe lock) and finishes the
    /// transitions. Findings are coded `reminder-corrupt`,
    /// `reminder-unsupported`, `reminder-stray` and `reminder-unfinished`.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] on I/O failure.
    pub fn doctor(&self, mode: DoctorMode) -> Result<Report> {
        let mut report = Report::new(mode);
        let area = doctor::Area::Reminders;
        for dir in [OPEN_DIR, SNOOZED_DIR] {
            for path in self.index_files(dir, None)? {
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let stripe = path_key(&path).map_or(0, |k| k.stripe());
                let lock = self.stripe_path(stripe)?;
                let Some(r) =
                    doctor::check_file::<Reminder>(&self.state, area, &path, &lock, &mut report)?
                else {
                    continue;
                };
                let key = Self::key_of(&r)?;
                if key.file_name() != name {
                    report.findings.push(area.stray(&path));
                    continue;
                }
                let unfinished = if dir == OPEN_DIR {
                    (!r.is_open() || self.exists_at(&self.snoozed_path(&key))?)
                        .then_some("resolved or superseded record still in the index")
                } else {
                    (r.resolution != Some(Resolution::Snoozed))
                        .then_some("unsnoozed record in the snooze index")
                };
                if let Some(what) = unfinished {
                    let mut finding = area.finding(&path, Defect::Unfinished, what);
                    if dir != OPEN_DIR {
                        // Nothing is safe to do: a person decides.
                        finding = finding.fixable(false);
                    } else if mode == DoctorMode::Fix {
                        let _guard = self.lock_key(&key)?;
                        self.settle(&key)?;
                        finding = finding.with(doctor::completed());
                    }
                    report.findings.push(finding);
                }
            }
        }
        let lock = self.stripe_path(0)?;
        for path in self.history_files()? {
            doctor::check_file::<Reminder>(&self.state, area, &path, &lock, &mut report)?;
        }
        Ok(report)
    }
}
