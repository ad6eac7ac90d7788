//! The hooks on a server (PostgreSQL through the seam), where `hooks/` is
//! rows, not files: the listing from one read of every row, the doctor's
//! checks of the rows (reported, never changed) and the wake-ups.

use std::path::PathBuf;
use std::time::Duration;

use chipset_backend::{Dir, Wait};
use chipset_store::{AgentId, Defect, DoctorMode, Finding, ReadOutcome, Report};

use crate::error::{Error, Result};
use crate::state::Hook;
use crate::store::{HOOK_CHANNEL, Hooks, classify, parse_hook_file};

/// Every row of `hooks/`: the hooks by agent, and the names that are not
/// `{agent}.json` (strays).
pub(super) struct Rows {
    pub(super) hooks: Vec<(AgentId, ReadOutcome<Hook>)>,
    pub(super) strays: Vec<String>,
}

/// The hooks' folder on the seam, `hooks`.
fn hook_dir() -> Dir {
    Dir::new(HOOK_CHANNEL.as_str()).expect("`hooks` is a valid channel")
}

fn backend(e: chipset_backend::Error) -> Error {
    Error::Backend(Box::new(e))
}

impl Hooks {
    /// Reads every row of `hooks/` in one statement, each judged as
    /// [`Hooks::read`] judges it (a value that does not parse is
    /// [`ReadOutcome::Corrupt`], one of a newer version
    /// [`ReadOutcome::Unsupported`]).
    pub(super) fn rows(&self) -> Result<Rows> {
        let mut rows = Rows {
            hooks: Vec::new(),
            strays: Vec::new(),
        };
        for (name, v) in self.seam.read_all(&hook_dir()).map_err(backend)? {
            match name.strip_suffix(".json").map(AgentId::new) {
                Some(Ok(agent)) => {
                    let path = self.path(&agent);
                    let read = classify(&agent, &path, parse_hook_file(&path, &v.value));
                    rows.hooks.push((agent, read));
                }
                _ => {
                    tracing::debug!(name, "not a hook row name");
                    rows.strays.push(name);
                }
            }
        }
        Ok(rows)
    }

    /// The doctor on a server: checks every row of `hooks/` and reports
    /// the corrupt (`hook-corrupt`), unsupported (`hook-unsupported`) and
    /// stray (`hook-stray`) ones. Nothing is changed, in either mode: a
    /// server keeps no quarantine folder, so a corrupt row stays for an
    /// operator (assigning refuses it; a reassign after a fix moves on).
    pub(super) fn doctor_rows(&self, mode: DoctorMode) -> Result<Report> {
        let rows = self.rows()?;
        let mut report = Report::new(mode);
        report.scanned = rows.hooks.len();
        for (agent, read) in rows.hooks {
            let at = PathBuf::from(self.key(&agent).to_string());
            let finding = match read {
                ReadOutcome::Corrupt(c) => {
                    let line = format!(
                        "`{}` on the server: corrupt hook ({}) (left in place)",
                        at.display(),
                        c.reason
                    );
                    Finding::new("hook-corrupt", Defect::Corrupt(c.reason), line)
                }
                ReadOutcome::Unsupported(u) => {
                    let line = format!(
                        "`{}` on the server: holds {}, unsupported by this version (left in place)",
                        at.display(),
                        u.what
                    );
                    Finding::new("hook-unsupported", Defect::Unsupported(u.what), line)
                }
                ReadOutcome::Missing | ReadOutcome::Value(_) => continue,
            };
            // Not fixable here: a server keeps no quarantine.
            report
                .findings
                .push(finding.fixable(false).at(at).about(&agent));
        }
        for name in rows.strays {
            let at = PathBuf::from(format!("{}/{name}", HOOK_CHANNEL.as_str()));
            let line = format!("`{}` on the server: not a hook (left alone)", at.display());
            report
                .findings
                .push(Finding::new("hook-stray", Defect::Stray, line).at(at));
        }
        report.sort_by_path();
        Ok(report)
    }

    /// Returns a wait woken by any change to any hook, through any handle
    /// on the same state (another process; on PostgreSQL another host),
    /// with a rescan every `rescan` as the safety net. It only says when to
    /// look: read the hooks again after every wake.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the watch cannot be set up on a directory;
    /// [`Error::Backend`] on a server.
    pub fn watch(&self, rescan: Duration) -> Result<Box<dyn Wait>> {
        self.seam.watch(&[hook_dir()], rescan).map_err(|e| match e {
            chipset_backend::Error::Store { source, .. } => Error::Store(source),
            e => backend(e),
        })
    }
}
