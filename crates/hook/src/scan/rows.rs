//! The hooks on a server (PostgreSQL through the seam), where `hooks/` is
//! rows, not files: the listing from one read of every row, the doctor's
//! checks and repairs of the rows and the wake-ups.

use std::path::PathBuf;
use std::time::Duration;

use chipset_backend::{Dir, Step, Wait};
use chipset_store::{Action, AgentId, Defect, DoctorMode, Finding, ReadOutcome, Report, StateDir};

use crate::error::{Error, Result};
use crate::format::HookFile;
use crate::state::{Hook, HookState};
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
    /// stray (`hook-stray`) ones. With [`DoctorMode::Fix`] a corrupt row is
    /// repaired as a corrupt file is on a directory, in one transaction:
    /// moved into `hooks/quarantine/{unix-ms}-{name}` (nothing is deleted)
    /// and replaced by an empty hook. The others are only reported.
    pub(super) fn doctor_rows(&self, mode: DoctorMode) -> Result<Report> {
        let rows = self.rows()?;
        let mut report = Report::new(mode);
        report.scanned = rows.hooks.len();
        for (agent, read) in rows.hooks {
            let at = PathBuf::from(self.key(&agent).to_string());
            let finding = match read {
                ReadOutcome::Corrupt(c) => {
                    let line = format!(
                        "`{}` on the server: corrupt hook ({})",
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
            let corrupt = matches!(finding.fault, Defect::Corrupt(_));
            let mut finding = finding.fixable(corrupt).at(at).about(&agent);
            if corrupt && mode == DoctorMode::Fix {
                finding = match self.repair_row(&agent)? {
                    Some(aside) => finding
                        .with(Action::quarantined(aside))
                        .with(Action::Rewrote("reset to empty".to_owned())),
                    None => finding.with(Action::LeftAlone(
                        "changed since the check: the next run looks again".to_owned(),
                    )),
                };
            }
            report.findings.push(finding);
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

    /// Repairs `agent`'s corrupt row on a server: when it is still the
    /// corrupt value (a compare-and-swap at the version read), moves it
    /// into `hooks/quarantine/` and creates an empty hook whose generation
    /// is at least the server's time in Unix milliseconds and above any
    /// generation still legible in the bad value, in one transaction.
    /// Returns where the bad value went; `None` when it changed meanwhile.
    fn repair_row(&self, agent: &AgentId) -> Result<Option<PathBuf>> {
        let key = self.key(agent);
        let path = self.path(agent);
        let Some(seen) = self.seam.read(&key).map_err(backend)? else {
            return Ok(None);
        };
        if !classify(agent, &path, parse_hook_file(&path, &seen.value)).is_corrupt() {
            return Ok(None);
        }
        let legible = serde_json::from_slice::<serde_json::Value>(&seen.value)
            .ok()
            .and_then(|v| v.get("generation").and_then(serde_json::Value::as_u64));
        let now = self.seam.now().map_err(backend)?;
        let generation = u64::try_from(now.unix_ms())
            .unwrap_or(0)
            .max(legible.map_or(0, |g| g.saturating_add(1)));
        let hook = Hook::new(agent.clone(), HookState::Empty, now, generation);
        let bytes = StateDir::to_canonical_json(&HookFile::from(&hook)).map_err(|source| {
            chipset_store::Error::Serialize {
                path: path.to_path_buf(),
                source,
            }
        })?;
        let aside = key.quarantined_at(now).map_err(backend)?;
        let steps = [
            Step::MoveNew {
                from: &key,
                expected: seen.version,
                to: &aside,
            },
            Step::Create {
                key: &key,
                value: &bytes,
            },
        ];
        match self.seam.transact(&steps) {
            Ok(_) => {
                tracing::warn!(%agent, quarantined = %aside, "repaired corrupt hook row");
                Ok(Some(PathBuf::from(aside.to_string())))
            }
            Err(
                chipset_backend::Error::Conflict { .. }
                | chipset_backend::Error::NotFound { .. }
                | chipset_backend::Error::Exists { .. },
            ) => Ok(None),
            Err(e) => Err(backend(e)),
        }
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
