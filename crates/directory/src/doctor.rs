//! The directory's doctor: every file of `agents/` is a readable profile
//! of the agent its name says.

use chipset_store::{Action, AgentId, Defect, DoctorMode, Finding, ReadOutcome, Report};

use crate::directory::{Directory, classify};
use crate::error::Result;
use crate::profile::Profile;

impl Directory {
    /// Checks every profile. A corrupt one (unparsable, or naming another
    /// agent) is `directory-profile-corrupt`, which
    /// [`DoctorMode::Fix`] moves aside into the store's quarantine (the
    /// agent registers again); a profile holding a value this version does
    /// not know is `directory-profile-unsupported` and a name that is not
    /// `{agent}.json` is `directory-stray`: both are left for a person.
    ///
    /// On a server the rows of `agents/` get the same checks, and the fix
    /// moves a corrupt profile into `agents/quarantine/{unix-ms}-{name}`
    /// with a compare-and-swap at the version read (a profile rewritten
    /// since is left alone): nothing is deleted.
    ///
    /// # Errors
    ///
    /// [`Error::Store`](crate::Error::Store) when `agents/` cannot be
    /// listed or a file cannot be read or moved;
    /// [`Error::Backend`](crate::Error::Backend) on a server.
    pub fn doctor(&self, mode: DoctorMode) -> Result<Report> {
        if self.seam.local_state().is_none() {
            return self.doctor_rows(mode);
        }
        let mut report = Report::new(mode);
        let names = match self.state.stat(&self.dir)? {
            Some(_) => self.state.list(&self.dir)?,
            None => Vec::new(),
        };
        for name in names {
            let agent = name
                .strip_suffix(".json")
                .and_then(|stem| AgentId::new(stem).ok());
            let Some(agent) = agent else {
                let line = format!("`agents/{name}` is not a profile (`{{agent}}.json`)");
                report
                    .findings
                    .push(Finding::new("directory-stray", Defect::Stray, line));
                continue;
            };
            let path = self.path(&agent);
            report.scanned += 1;
            match classify(&agent, &path, self.state.read_json::<Profile>(&path)?) {
                ReadOutcome::Value(_) | ReadOutcome::Missing => {}
                ReadOutcome::Corrupt(corruption) => {
                    let line = format!("`{}`: {}", path.display(), corruption.reason);
                    let mut finding = Finding::new(
                        "directory-profile-corrupt",
                        Defect::Corrupt(corruption.reason),
                        line,
                    )
                    .at(&path)
                    .fixable(true);
                    if mode == DoctorMode::Fix {
                        let action = self.state.quarantine_checked(&path, Some(&path), |seen| {
                            seen.as_ref()
                                .and_then(|b| {
                                    classify(
                                        &agent,
                                        &path,
                                        ReadOutcome::<Profile>::from_json(&path, b),
                                    )
                                })
                                .is_corrupt()
                        })?;
                        finding = finding.with(action);
                    }
                    report.findings.push(finding);
                }
                ReadOutcome::Unsupported(unsupported) => {
                    let line = format!("`{}`: {}", path.display(), unsupported.what);
                    report.findings.push(
                        Finding::new(
                            "directory-profile-unsupported",
                            Defect::Unsupported(unsupported.what),
                            line,
                        )
                        .at(&path),
                    );
                }
            }
        }
        Ok(report)
    }

    /// The doctor on a server: the same three findings on the rows.
    fn doctor_rows(&self, mode: DoctorMode) -> Result<Report> {
        let mut report = Report::new(mode);
        for name in self.names()? {
            let agent = name
                .strip_suffix(".json")
                .and_then(|stem| AgentId::new(stem).ok());
            let Some(agent) = agent else {
                let line =
                    format!("`agents/{name}` on the server is not a profile (`{{agent}}.json`)");
                report
                    .findings
                    .push(Finding::new("directory-stray", Defect::Stray, line));
                continue;
            };
            let path = self.path(&agent);
            let at = format!("agents/{name}");
            report.scanned += 1;
            match self.read_versioned(&agent, &path)? {
                (ReadOutcome::Value(_) | ReadOutcome::Missing, _) => {}
                (ReadOutcome::Corrupt(corruption), version) => {
                    let line = format!("`{at}` on the server: {}", corruption.reason);
                    let mut finding = Finding::new(
                        "directory-profile-corrupt",
                        Defect::Corrupt(corruption.reason),
                        line,
                    )
                    .at(&at)
                    .about(&agent)
                    .fixable(true);
                    if mode == DoctorMode::Fix {
                        finding = finding.with(match version {
                            Some(version) => self.quarantine_row(&agent, version)?,
                            None => Action::LeftAlone(
                                "the server cannot read it: a person decides".to_owned(),
                            ),
                        });
                    }
                    report.findings.push(finding);
                }
                (ReadOutcome::Unsupported(unsupported), _) => {
                    let line = format!("`{at}` on the server: {}", unsupported.what);
                    report.findings.push(
                        Finding::new(
                            "directory-profile-unsupported",
                            Defect::Unsupported(unsupported.what),
                            line,
                        )
                        .at(&at)
                        .about(&agent),
                    );
                }
            }
        }
        Ok(report)
    }
}
