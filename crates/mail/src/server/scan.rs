//! Scans of mail on a server: the counts for a status screen, the
//! doctor's checks of the rows (reported, never changed) and the wait on
//! an inbox.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use chipset_backend::{Backend, Dir, FsBackend, Wait};
use chipset_store::{AgentId, Defect, DoctorMode, Finding, Report};

use super::{Seam, Server, dir};
use crate::error::{Error, Result};
use crate::layout::{ARCHIVE, BY_TASK, INBOX, Location, ORPHAN, id_of};
use crate::mail::{Mail, MailCounts};

impl Server<'_> {
    /// The counts of [`Mail::counts`], from listings of the rows.
    pub(crate) fn counts(&self) -> Result<MailCounts> {
        let mut inbox = BTreeMap::new();
        for name in self.b.list_dirs(&dir(&[INBOX])).seam()? {
            // A folder that is not an agent's is the doctor's to report.
            if let Ok(agent) = AgentId::new(name.as_str()) {
                let n = self.inbox_len(&agent)?;
                inbox.insert(agent, n);
            }
        }
        let count = |d: &Dir| -> Result<usize> {
            let names = self.b.list(d).seam()?;
            Ok(names.iter().filter(|n| id_of(n).is_some()).count())
        };
        Ok(MailCounts {
            inbox,
            archived: count(&Self::dir_of(&Location::Archive))?,
            orphaned: count(&Self::dir_of(&Location::Orphan))?,
            swept_tasks: self.b.list_dirs(&dir(&[ARCHIVE, BY_TASK])).seam()?.len(),
        })
    }

    /// The doctor of [`Mail::doctor_to`] on a server: every message row in
    /// the inboxes, `archive/`, `archive/orphan/` and `archive/by-task/`
    /// is parsed and its id checked against its name. A value that does not
    /// parse (`messaging-corrupt-file`), one of a newer version
    /// (`messaging-unsupported-file`) and a name that is not a message's
    /// (`messaging-stray-file`) are reported, in either mode: nothing is
    /// moved or deleted on a server, so none of them is fixable there.
    pub(crate) fn doctor_to(
        &self,
        mode: DoctorMode,
        sink: &mut dyn FnMut(Finding),
    ) -> Result<Report> {
        let mut report = Report::new(mode);
        let mut findings = Vec::new();
        let mut folders = Vec::new();
        let inbox = dir(&[INBOX]);
        for name in self.b.list_dirs(&inbox).seam()? {
            match AgentId::new(name.as_str()) {
                Ok(agent) => folders.push(Self::dir_of(&Location::Inbox(agent))),
                Err(_) => findings.push(stray(&format!("{inbox}/{name}"))),
            }
        }
        for name in self.b.list(&inbox).seam()? {
            findings.push(stray(&format!("{inbox}/{name}")));
        }
        folders.push(Self::dir_of(&Location::Archive));
        folders.push(dir(&[ARCHIVE, ORPHAN]));
        let by_task = dir(&[ARCHIVE, BY_TASK]);
        for task in self.b.list_dirs(&by_task).seam()? {
            folders.push(by_task.join(&task).seam()?);
        }
        for folder in folders {
            for (name, v) in self.b.read_all(&folder).seam()? {
                if id_of(&name).is_none() {
                    findings.push(stray(&format!("{folder}/{name}")));
                    continue;
                }
                report.scanned += 1;
                match Self::parse_named(&folder, &name, &v.value) {
                    Ok(_) => {}
                    Err(Error::Corrupt(c)) => {
                        let line = format!(
                            "`{}` on the server: corrupt message ({}) (left in place)",
                            c.path.display(),
                            c.reason
                        );
                        findings.push(
                            Finding::new("messaging-corrupt-file", Defect::Corrupt(c.reason), line)
                                .at(c.path),
                        );
                    }
                    Err(Error::Unsupported(u)) => {
                        let line = format!(
                            "`{}` on the server: holds {}, unsupported by this version (left in place)",
                            u.path.display(),
                            u.what
                        );
                        findings.push(
                            Finding::new(
                                "messaging-unsupported-file",
                                Defect::Unsupported(u.what),
                                line,
                            )
                            .at(u.path),
                        );
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        findings.sort_by(|a, b| a.path.cmp(&b.path));
        for finding in findings {
            report.pass_on(finding.fixable(false), sink);
        }
        Ok(report)
    }
}

/// A name that is not a message's, where messages live (left alone).
fn stray(at: &str) -> Finding {
    let line = format!("`{at}` on the server: not a message (left alone)");
    Finding::new("messaging-stray-file", Defect::Stray, line).at(PathBuf::from(at))
}

impl Mail {
    /// Returns a wait woken when `agent`'s inbox changes (a message
    /// delivered, one archived), through any handle on the same state:
    /// another process, and on a server another host. A rescan every
    /// `rescan` is the safety net. It only says when to look: read the
    /// inbox again after every wake.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the watch cannot be set up on a directory;
    /// [`Error::Backend`] on a server.
    pub fn watch_inbox(&self, agent: &AgentId, rescan: Duration) -> Result<Box<dyn Wait>> {
        let folder = Server::dir_of(&Location::Inbox(agent.clone()));
        let watched = match self.server() {
            Some(server) => server.b.watch(&[folder], rescan),
            None => FsBackend::new(self.state.clone()).watch(&[folder], rescan),
        };
        watched.map_err(|e| match e {
            chipset_backend::Error::Store { source, .. } => Error::Store(source),
            e => super::failure(e, Vec::new()),
        })
    }
}
