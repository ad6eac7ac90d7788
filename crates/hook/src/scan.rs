//! Queries over every hook (for the witness, `chipset status` and operators)
//! and the repair of corrupt hooks.

use std::collections::BTreeMap;
use std::path::PathBuf;

use chipset_store::{
    Action, AgentId, Corruption, Defect, DoctorMode, Finding, ReadOutcome, Report,
};

use crate::error::Result;
use crate::state::{Hook, HookState};
use crate::store::Hooks;

/// What [`Hooks::repair`] did to a corrupt hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Repaired {
    /// Why the file was corrupt.
    pub(crate) corruption: Corruption,
    /// Where the bad bytes are kept, in `hooks/.quarantine/`.
    pub(crate) quarantined: PathBuf,
    /// The empty hook written in its place.
    pub(crate) hook: Hook,
}

impl Hooks {
    /// Returns the hook file names in `hooks/` split into agents and strays.
    fn scan(&self) -> Result<(Vec<AgentId>, Vec<String>)> {
        let mut agents = Vec::new();
        let mut strays = Vec::new();
        for name in self.state.list(&self.dir)? {
            match name.strip_suffix(".json").map(AgentId::new) {
                Some(Ok(agent)) => agents.push(agent),
                _ => {
                    tracing::debug!(name, "not a hook file name");
                    strays.push(name);
                }
            }
        }
        Ok((agents, strays))
    }

    /// Returns every hook file with what it holds, by agent (never
    /// [`ReadOutcome::Missing`] unless a file vanished between listing and
    /// reading). Corrupt files are listed as [`ReadOutcome::Corrupt`], never skipped; names that
    /// are not `{agent}.json` are skipped (see [`Hooks::doctor`]). On a
    /// server the rows of `hooks/`, read in one statement.
    ///
    /// # Errors
    ///
    /// [`Error::Store`](crate::Error::Store) when the directory or a file cannot be read;
    /// [`Error::Backend`](crate::Error::Backend) on a server.
    pub fn list(&self) -> Result<BTreeMap<AgentId, ReadOutcome<Hook>>> {
        if self.seam.local_state().is_none() {
            return Ok(self.rows()?.hooks.into_iter().collect());
        }
        let (agents, _) = self.scan()?;
        agents
            .into_iter()
            .map(|agent| {
                let read = self.read(&agent)?;
                Ok((agent, read))
            })
            .collect()
    }

    /// Repairs `agent`'s hook if it is corrupt: under the hook's lock, copies
    /// the file into `hooks/.quarantine/` (nothing is deleted) and replaces
    /// it with an empty hook in one atomic write. A missing or legal hook is
    /// left alone (`Ok(None)`), and so is an unsupported one: it is what it
    /// claims to be, only newer.
    ///
    /// The new generation is at least the repair time in Unix milliseconds
    /// (and above any generation still legible in the bad file), so no
    /// assignment held from before the corruption can match again. A
    /// failure or crash before the write leaves the corrupt file in place
    /// (refusing every transition) for a later repair, never no file: that
    /// reads as an empty hook at generation 0, from which an assignment
    /// held before could match again, and a later repair finds nothing to
    /// do. The quarantined copy is kept either way.
    ///
    /// # Errors
    ///
    /// [`Error::Store`](crate::Error::Store) when the lock, the move or the write fails.
    pub(crate) fn repair(&self, agent: &AgentId) -> Result<Option<Repaired>> {
        let path = self.path(agent);
        let _guard = self.state.lock(&path)?;
        let corruption = match self.read(agent)? {
            ReadOutcome::Corrupt(c) => c,
            ReadOutcome::Missing | ReadOutcome::Value(_) | ReadOutcome::Unsupported(_) => {
                return Ok(None);
            }
        };
        // What was judged corrupt, so the store moves exactly that aside.
        let seen = self.state.observe(&path)?;
        let legible = match &seen {
            ReadOutcome::Value(bytes) => serde_json::from_slice::<serde_json::Value>(bytes)
                .ok()
                .and_then(|v| v.get("generation").and_then(serde_json::Value::as_u64)),
            _ => None,
        };
        if seen == ReadOutcome::Missing {
            // Under the lock nothing else writes it; it went between two
            // reads only if something outside chipset removed it.
            return Ok(None);
        }
        // A copy, not a move: the empty hook replaces the file in one write.
        let quarantined = self.state.quarantine_copy(&path, self.state.read_cap())?;
        let now = self.state.now();
        let generation = u64::try_from(now.unix_ms())
            .unwrap_or(0)
            .max(legible.map_or(0, |g| g.saturating_add(1)));
        let hook = Hook::new(agent.clone(), HookState::Empty, now, generation);
        self.state.write_json(&path, &hook)?;
        tracing::warn!(%agent, quarantined = %quarantined.display(), "repaired corrupt hook");
        Ok(Some(Repaired {
            corruption,
            quarantined,
            hook,
        }))
    }

    /// Checks every file in `hooks/`: corrupt hooks (`hook-corrupt`,
    /// repaired with [`DoctorMode::Fix`]: copied into `hooks/.quarantine/`
    /// and replaced by an empty hook), unsupported
    /// hooks (`hook-unsupported`) and stray names (`hook-stray`), which are
    /// only reported. The findings are in path order; each names its agent
    /// as its subject.
    ///
    /// On a server the rows of `hooks/` are checked for the same three
    /// findings; with [`DoctorMode::Fix`] a corrupt row is moved into
    /// `hooks/quarantine/` and replaced by an empty hook in one
    /// transaction (nothing is deleted), the others only reported.
    ///
    /// # Errors
    ///
    /// [`Error::Store`](crate::Error::Store) when a file cannot be read,
    /// moved or written; [`Error::Backend`](crate::Error::Backend) on a server.
    pub fn doctor(&self, mode: DoctorMode) -> Result<Report> {
        if self.seam.local_state().is_none() {
            return self.doctor_rows(mode);
        }
        let (agents, strays) = self.scan()?;
        let mut report = Report::new(mode);
        report.scanned = agents.len();
        for agent in agents {
            let corruption = match self.read(&agent)? {
                ReadOutcome::Corrupt(c) => c,
                ReadOutcome::Unsupported(u) => {
                    let line = format!(
                        "`{}`: holds {}, unsupported by this version (left in place)",
                        u.path.display(),
                        u.what
                    );
                    report.findings.push(
                        Finding::new("hook-unsupported", Defect::Unsupported(u.what), line)
                            .at(u.path)
                            .about(&agent),
                    );
                    continue;
                }
                ReadOutcome::Missing | ReadOutcome::Value(_) => continue,
            };
            let line = format!(
                "`{}`: corrupt hook ({})",
                corruption.path.display(),
                corruption.reason
            );
            let mut finding =
                Finding::new("hook-corrupt", Defect::Corrupt(corruption.reason), line)
                    .at(corruption.path)
                    .about(&agent);
            if mode == DoctorMode::Fix
                && let Some(repaired) = self.repair(&agent)?
            {
                finding = finding
                    .with(Action::quarantined(repaired.quarantined))
                    .with(Action::Rewrote("reset to empty".to_owned()));
            }
            report.findings.push(finding);
        }
        for name in strays {
            // For the report only: a stray's name is whatever is there.
            let path = self.dir.as_path().join(&name);
            let line = format!("`{}`: not a hook file (left alone)", path.display());
            report
                .findings
                .push(Finding::new("hook-stray", Defect::Stray, line).at(path));
        }
        report.sort_by_path();
        Ok(report)
    }
}

mod rows;
#[cfg(test)]
mod tests;
