//! The signals on a server (PostgreSQL through the seam), where `nudge/`
//! is rows, not folders: the agents, the doctor's checks of the rows and
//! the wake-ups a recipient or a sender waits on.

use std::path::PathBuf;
use std::time::Duration;

use chipset_backend::{Dir, Key, Wait};
use chipset_store::{Action, AgentId, Defect, DoctorMode, ReadOutcome, Report, StatePath};

use super::seam::{QUARANTINE, seam_error};
use super::{LATEST_FILE, Nudges, PROCESSED_FILE, RESPONSES_DIR};
use crate::doctor::{Area, OnDisk};
use crate::error::Result;
use crate::format::{Nudge, ProcessedRecord};

/// The channel's folder on the seam, `nudge`.
fn nudge_dir() -> Dir {
    Dir::new(crate::NUDGE_CHANNEL.as_str()).expect("`nudge` is a valid channel")
}

/// Where a finding about `key` points: its name on the server.
fn at(key: &impl std::fmt::Display) -> PathBuf {
    PathBuf::from(key.to_string())
}

impl Nudges {
    /// The agents with a folder under `nudge/` on the seam, sorted.
    pub(super) fn agents_on_seam(&self) -> Result<Vec<AgentId>> {
        let root = self.state.channel(crate::NUDGE_CHANNEL);
        Ok(self
            .seam
            .list_dirs(&nudge_dir())
            .map_err(|e| seam_error(root.as_path(), e))?
            .into_iter()
            .filter_map(|name| AgentId::new(name).ok())
            .collect())
    }

    /// The doctor on a server: checks every agent's `latest.json`,
    /// `processed.json` and responses for values that do not parse
    /// (`nudge-corrupt`) or are newer (`nudge-unsupported`), and reports
    /// names chipset does not write there (`nudge-stray`). With
    /// [`DoctorMode::Fix`] a corrupt value is moved aside into the folder
    /// `quarantine` beside it, as a send that meets it does; nothing is
    /// deleted.
    pub(super) fn doctor_rows(&self, mode: DoctorMode) -> Result<Report> {
        let mut report = Report::new(mode);
        let area = Area::Nudge;
        let root = nudge_dir();
        let fail = |e| seam_error(self.state.channel(crate::NUDGE_CHANNEL).as_path(), e);
        for name in self.seam.list(&root).map_err(fail)? {
            let key = root.key(&name).map_err(fail)?;
            report.findings.push(area.stray(&at(&key)));
        }
        for name in self.seam.list_dirs(&root).map_err(fail)? {
            let Ok(agent) = AgentId::new(name.as_str()) else {
                report
                    .findings
                    .push(area.stray(&at(&format!("{root}/{name}"))));
                continue;
            };
            let latest = self.seam_key(&agent, &[], LATEST_FILE);
            self.check_row::<Nudge>(&latest, &self.latest_path(&agent), &mut report)?;
            let processed = self.seam_key(&agent, &[], PROCESSED_FILE);
            self.check_row::<ProcessedRecord>(
                &processed,
                &self.processed_path(&agent),
                &mut report,
            )?;
            let responses = self.seam_dir(&agent, &[RESPONSES_DIR]);
            for name in self.seam.list(&responses).map_err(fail)? {
                let responder = name
                    .strip_suffix(".json")
                    .and_then(|n| AgentId::new(n).ok());
                let key = responses.key(&name).map_err(fail)?;
                match responder {
                    Some(responder) => self.check_row::<Nudge>(
                        &key,
                        &self.response_path(&agent, &responder),
                        &mut report,
                    )?,
                    None => report.findings.push(area.stray(&at(&key))),
                }
            }
            // The doctor's and the sends' own quarantine is not a stray.
            for name in self.seam.list_dirs(&responses).map_err(fail)? {
                if name == QUARANTINE {
                    continue;
                }
                report
                    .findings
                    .push(area.stray(&at(&format!("{responses}/{name}"))));
            }
        }
        report.sort_by_path();
        Ok(report)
    }

    /// Checks the value at `key` (the file `path` on a directory) as a `T`:
    /// counts it as scanned, reports it when it does not parse or is
    /// newer, and moves a corrupt one aside when fixing.
    fn check_row<T: OnDisk>(&self, key: &Key, path: &StatePath, report: &mut Report) -> Result<()> {
        // Counted whether or not it is there, as on a directory.
        report.scanned += 1;
        let read = self
            .seam
            .read(key)
            .map_err(|e| seam_error(path.as_path(), e))?;
        let Some(read) = read else {
            return Ok(());
        };
        match T::parse(&at(key), &read.value) {
            ReadOutcome::Missing | ReadOutcome::Value(_) => {}
            ReadOutcome::Corrupt(c) => {
                let mut finding = Area::Nudge.finding(&at(key), Defect::Corrupt(c.reason), "");
                if report.mode == DoctorMode::Fix
                    && let Some(to) = self.quarantine_at::<T>(key, path)?
                {
                    finding = finding.with(Action::quarantined(to));
                }
                report.findings.push(finding);
            }
            ReadOutcome::Unsupported(u) => {
                report.findings.push(Area::Nudge.finding(
                    &at(key),
                    Defect::Unsupported(u.what),
                    "",
                ));
            }
        }
        Ok(())
    }

    /// Returns a wait woken by any change to `agent`'s signals: a nudge
    /// sent to it (`latest.json`), its processed record, and the responses
    /// to the nudges it sent (`responses/`), through any handle on the
    /// same state (another process; on PostgreSQL another host), with a
    /// rescan every `rescan` as the safety net. It only says when to look:
    /// read again after every wake.
    ///
    /// # Errors
    ///
    /// [`Error::Store`](crate::Error::Store) when the watch cannot be set
    /// up on a directory; [`Error::Backend`](crate::Error::Backend) on a
    /// server.
    pub fn watch(&self, agent: &AgentId, rescan: Duration) -> Result<Box<dyn Wait>> {
        let dirs = [
            self.seam_dir(agent, &[]),
            self.seam_dir(agent, &[RESPONSES_DIR]),
        ];
        self.seam
            .watch(&dirs, rescan)
            .map_err(|e| seam_error(self.agent_dir(agent).as_path(), e))
    }
}
