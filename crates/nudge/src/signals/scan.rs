//! Scans over every agent's nudges: the agents, the doctor.

use chipset_store::{AgentId, DoctorMode, Report};

use super::{LATEST_FILE, Nudges, PROCESSED_FILE, RESPONSES_DIR};
use crate::doctor;
use crate::error::Result;
use crate::format::{Nudge, ProcessedRecord};

impl Nudges {
    /// Returns the agents that have a nudge directory, sorted. Plain files and
    /// names that are not valid agent ids are skipped (the doctor reports them).
    /// On a server, the agents with a value under `nudge/{agent}/`.
    ///
    /// # Errors
    ///
    /// [`Error::Store`](crate::Error::Store) on I/O failure.
    pub fn agents(&self) -> Result<Vec<AgentId>> {
        if !self.local {
            return self.agents_on_seam();
        }
        let dir = self.state.channel(crate::NUDGE_CHANNEL);
        Ok(self
            .state
            .list_dirs(&dir)?
            .into_iter()
            .filter_map(|name| AgentId::new(name).ok())
            .collect())
    }

    /// Scans every agent's `latest.json`, `processed.json` and response
    /// records; reports unreadable files and stray names, and with
    /// [`DoctorMode::Fix`] quarantines the unreadable ones (through the
    /// store's checked quarantine, under their locks). Findings are coded
    /// `nudge-corrupt`, `nudge-unsupported` and `nudge-stray`. On a server
    /// the rows are checked the same way, and fixing moves a corrupt value
    /// into the folder `quarantine` beside it (nothing is deleted).
    ///
    /// # Errors
    ///
    /// [`Error::Store`](crate::Error::Store) on I/O failure.
    pub fn doctor(&self, mode: DoctorMode) -> Result<Report> {
        if !self.local {
            return self.doctor_rows(mode);
        }
        let mut report = Report::new(mode);
        let area = doctor::Area::Nudge;
        let root = self.state.channel(crate::NUDGE_CHANNEL);
        // Real directories only: a symlink (or a file) in their place is a
        // stray to report, not a directory to follow.
        let dirs = self.state.list_dirs(&root)?;
        for name in self.state.list(&root)? {
            let Ok(agent) = AgentId::new(name.as_str()) else {
                report
                    .findings
                    .push(area.stray(&root.as_path().join(&name)));
                continue;
            };
            let dir = self.agent_dir(&agent);
            if dirs.binary_search(&name).is_err() {
                report.findings.push(area.stray(&dir));
                continue;
            }
            for file in [LATEST_FILE, PROCESSED_FILE] {
                let path = dir.join_static(file);
                if file == LATEST_FILE {
                    doctor::check_file::<Nudge>(&self.state, area, &path, &path, &mut report)?;
                } else {
                    doctor::check_file::<ProcessedRecord>(
                        &self.state,
                        area,
                        &path,
                        &path,
                        &mut report,
                    )?;
                }
            }
            let responses = dir.join_static(RESPONSES_DIR);
            for name in self.state.list(&responses)? {
                let Ok(path) = responses.join(&name) else {
                    report
                        .findings
                        .push(area.stray(&responses.as_path().join(&name)));
                    continue;
                };
                if !name.ends_with(".json") || self.state.stat(&path)?.is_some_and(|m| m.is_dir()) {
                    report.findings.push(area.stray(&path));
                    continue;
                }
                doctor::check_file::<Nudge>(&self.state, area, &path, &path, &mut report)?;
            }
        }
        Ok(report)
    }
}
