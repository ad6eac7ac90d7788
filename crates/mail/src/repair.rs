//! The mail doctor in the store's one shape: [`Mail::doctor`] returns a
//! [`Report`] of [`chipset_store::Finding`]s. The scan itself is the
//! `doctor` module.

use chipset_store::{Action, Defect, DoctorMode, Report};

use crate::doctor::Finding;
use crate::error::Result;
use crate::mail::Mail;

impl Mail {
    /// Scans all of `mail/` and reports (with [`DoctorMode::Fix`], repairs)
    /// what is wrong, as the store's [`Report`]: `scanned` counts the
    /// readable messages; each finding has its stable code
    /// (`messaging-orphan-inbox`, `messaging-in-flight`, …), its
    /// [`Defect`] class, the file (a corrupt or unsupported file, the extra
    /// copy of a duplicate, the manifest) and the id it is about (a message,
    /// or for a missing `task-swept` event the task).
    ///
    /// An *orphan* is an inbox message whose task has been swept, whose
    /// recipient is not in the recipient registry (when one is configured),
    /// or that is older than
    /// [`MailConfig::orphan_after`](crate::MailConfig::orphan_after). A
    /// message younger than
    /// [`MailConfig::in_flight_grace`](crate::MailConfig::in_flight_grace)
    /// without its `sent` (or, in `archive/`, `archived`) event is
    /// [`Defect::InFlight`], which no mode repairs and which keeps the report
    /// from being clean: right after a crash the doctor says "check again
    /// after T", never "clean". A response that does not fit its request
    /// is a [`Defect::Conflict`] a person settles; an unsupported file is
    /// reported and never moved.
    ///
    /// Nothing is deleted: bad files are quarantined (through the store's
    /// checked quarantine), messages are moved. Safe to run while agents
    /// work.
    ///
    /// # Errors
    ///
    /// [`Error::Store`](crate::Error::Store) when a directory cannot be listed or a repair
    /// fails; findings already repaired stay repaired.
    pub fn doctor(&self, mode: DoctorMode) -> Result<Report> {
        let mut findings = Vec::new();
        let passed = self.doctor_to(mode, &mut |f| findings.push(f))?;
        let mut report = Report::new(mode);
        report.scanned = passed.scanned;
        report.findings = findings;
        Ok(report)
    }

    /// [`Mail::doctor`], handing each finding to `sink` (in the same
    /// order) instead of keeping it: the report counts them
    /// (its counts, such as [`Report::open`], cover them) and holds none. Its memory does not grow
    /// with the number of findings (one per message when the manifest was
    /// lost), as it does not with the number of messages.
    ///
    /// The findings are handed over once the scan, and with
    /// [`DoctorMode::Fix`] the repairs, are done: a run that fails there
    /// hands over none (one whose own scratch data cannot be read back
    /// fails after handing over those before it).
    ///
    /// # Errors
    ///
    /// As [`Mail::doctor`].
    pub fn doctor_to(
        &self,
        mode: DoctorMode,
        sink: &mut dyn FnMut(chipset_store::Finding),
    ) -> Result<Report> {
        if let Some(server) = self.server() {
            return server.doctor_to(mode, sink);
        }
        let mut report = Report::new(mode);
        let scan = self.scan_doctor(mode, &mut |f| {
            let finding = self.finding(mode, f);
            report.pass_on(finding, sink);
        })?;
        report.scanned = scan.messages;
        Ok(report)
    }

    /// Returns the store's finding for one of the scan's.
    fn finding(&self, mode: DoctorMode, f: Finding) -> chipset_store::Finding {
        let fixed = mode == DoctorMode::Fix && f.is_fixable();
        let quarantined = |what: &str| Action::Quarantined {
            what: what.to_owned(),
            to: None,
        };
        let manifest = self.layout.manifest().into_path_buf();
        let (fault, path, subject, action) = match &f {
            Finding::Corrupt { path, reason } => (
                Defect::Corrupt(reason.clone()),
                Some(path.clone()),
                None,
                quarantined("quarantined"),
            ),
            Finding::Stray { path } => (
                Defect::Stray,
                Some(path.clone()),
                None,
                Action::LeftAlone("not a message file: a person decides".to_owned()),
            ),
            Finding::Oversized { path, size, cap } => (
                Defect::Corrupt(chipset_store::CorruptReason::TooLarge {
                    size: *size,
                    cap: *cap,
                }),
                Some(path.clone()),
                None,
                Action::LeftAlone("over the read cap: a person decides".to_owned()),
            ),
            Finding::PeerListed { path, reason } => (
                Defect::Corrupt(reason.clone()),
                Some(path.clone()),
                None,
                Action::LeftAlone(
                    "nubos-pilot still lists it as a message: a person decides".to_owned(),
                ),
            ),
            Finding::Unsupported { path, what } => (
                Defect::Unsupported(what.clone()),
                Some(path.clone()),
                None,
                Action::LeftAlone("unsupported".to_owned()),
            ),
            Finding::Duplicate { id, extra, .. } => (
                Defect::Missing,
                Some(self.layout.file(extra, id).into_path_buf()),
                Some(id.to_string()),
                quarantined(
                    "extra copy quarantined (the seed moves a message forward: inbox, \
                     archive, by-task; this copy is the one a crashed move left behind)",
                ),
            ),
            Finding::MissingReplyMarker { child, .. } => (
                Defect::Missing,
                None,
                Some(child.to_string()),
                Action::Rewrote("reply index entry added".to_owned()),
            ),
            Finding::AnsweredRequest { id, agent } => (
                Defect::Unfinished,
                Some(
                    self.layout
                        .file(&crate::Location::Inbox(agent.clone()), id)
                        .into_path_buf(),
                ),
                Some(id.to_string()),
                Action::Moved(
                    "archived, as the seed says a response archives its request \
                     (nubos-pilot leaves it in the inbox)"
                        .to_owned(),
                ),
            ),
            Finding::Orphan { id, agent, .. } => (
                Defect::Stale,
                Some(
                    self.layout
                        .file(&crate::Location::Inbox(agent.clone()), id)
                        .into_path_buf(),
                ),
                Some(id.to_string()),
                Action::Moved(
                    "moved to archive/orphan/, the seed's fix for `messaging-orphan-inbox`"
                        .to_owned(),
                ),
            ),
            Finding::MissingSentEvent { id, location } => (
                Defect::Missing,
                Some(self.layout.file(location, id).into_path_buf()),
                Some(id.to_string()),
                Action::Appended("`sent` event appended (reconciled)".to_owned()),
            ),
            Finding::MissingArchivedEvent { id, location } => (
                Defect::Missing,
                Some(self.layout.file(location, id).into_path_buf()),
                Some(id.to_string()),
                Action::Appended("`archived` event appended (reconciled)".to_owned()),
            ),
            Finding::MissingSweptEvent { task, .. } => (
                Defect::Missing,
                None,
                Some(task.to_string()),
                Action::Appended("`task-swept` event appended (reconciled)".to_owned()),
            ),
            Finding::TornManifestTail { .. } => (
                Defect::Unfinished,
                Some(manifest),
                None,
                Action::Truncated(
                    "torn line truncated (or, with bad lines, moved to `mail/.quarantine/`)"
                        .to_owned(),
                ),
            ),
            Finding::BadManifestLine { reason, .. } => (
                Defect::Corrupt(reason.clone()),
                Some(manifest),
                None,
                quarantined("moved to `mail/.quarantine/`, every whole record kept"),
            ),
            Finding::InFlight { id, location, .. } => (
                Defect::InFlight {
                    check_after: f.check_after().unwrap_or_default(),
                },
                Some(self.layout.file(location, id).into_path_buf()),
                Some(id.to_string()),
                Action::LeftAlone("in flight".to_owned()),
            ),
            Finding::MismatchedResponse { id, .. } => (
                Defect::Conflict,
                None,
                Some(id.to_string()),
                Action::LeftAlone("a person decides".to_owned()),
            ),
        };
        let mut out = chipset_store::Finding::new(f.code(), fault, f.to_string());
        if !f.is_fixable() {
            out = out.fixable(false);
        }
        if let Some(path) = path {
            out = out.at(path);
        }
        if let Some(subject) = subject {
            out = out.about(subject);
        }
        if fixed {
            out = out.with(action);
        }
        out
    }
}
