//! Upkeep of the reminder indexes: the snooze sweep and the doctor.

use chipset_store::{Action, Corruption, Defect, DoctorMode, ReadOutcome, Report, StatePath};

use super::rules::{is_due, path_key};
use super::{OPEN_DIR, Reminders, SNOOZED_DIR};
use crate::doctor;
use crate::error::{Error, Result};
use crate::format::{Reminder, Resolution};

impl Reminders {
    /// Reopens every snoozed reminder whose time has come (seed §6.3, on
    /// read: [`Reminders::list`] calls it). Returns the reopened ones
    /// and the snoozed files that could not be read: a corrupt snoozed
    /// reminder may be due, so a listing must say so rather than look clean.
    pub(super) fn sweep_snoozes(&self) -> Result<(Vec<Reminder>, Vec<Corruption>)> {
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
    /// On a server the rows get the same checks (the kinds scanned are the
    /// registered ones, whose folders a server lists), and a repair moves
    /// an unreadable record, still unreadable under its stripe's lock, into
    /// the folder `quarantine` beside it: nothing is deleted.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] on I/O failure; [`Error::Backend`] on a server.
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
                let Some(r) = self.check_record(stripe, &path, &mut report)? else {
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
        for path in self.history_files()? {
            self.check_record(0, &path, &mut report)?;
        }
        Ok(report)
    }

    /// Checks the record at `path`, whose writers take the stripe lock
    /// `stripe`: counts it as scanned, reports it when it does not parse or
    /// is newer, and moves a corrupt one aside when fixing (on a directory
    /// through the store's checked quarantine; on a server, under the
    /// stripe's lock and when it still does not parse, into the folder
    /// `quarantine` beside it). Returns the record when it reads.
    fn check_record(
        &self,
        stripe: u64,
        path: &StatePath,
        report: &mut Report,
    ) -> Result<Option<Reminder>> {
        let area = doctor::Area::Reminders;
        if self.seam.is_none() {
            let lock = self.stripe_path(stripe)?;
            return doctor::check_file::<Reminder>(&self.state, area, path, &lock, report);
        }
        report.scanned += 1;
        match self.read_at(path)? {
            ReadOutcome::Missing => Ok(None),
            ReadOutcome::Value(r) => Ok(Some(r)),
            ReadOutcome::Corrupt(c) => {
                let mut finding = area.finding(path, Defect::Corrupt(c.reason), "");
                if report.mode == DoctorMode::Fix {
                    let _guard = self.lock_stripe(stripe)?;
                    // Under the lock its writers take: rewritten since, it stays.
                    let action = match self.read_at(path)? {
                        ReadOutcome::Corrupt(_) => Action::quarantined(self.quarantine_at(path)?),
                        _ => Action::LeftAlone("changed since the check".to_owned()),
                    };
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
}
