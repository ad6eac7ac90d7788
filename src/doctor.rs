//! [`Checkup`]: every channel's doctor run once, in one report.

use std::path::PathBuf;
use std::time::Duration;

use chipset_store::{Defect, DoctorMode, Finding, Report};

use crate::door::Chipset;
use crate::error::{Error, Result};

/// Temp files older than this were left by a writer that crashed: the
/// doctor reports them, and with [`DoctorMode::Fix`] removes them.
pub const STALE_TEMP_AGE: Duration = Duration::from_secs(600);

/// What [`Chipset::doctor`] found: one [`Area`] per channel, and the stale
/// temp files under the whole root (and a mail folder kept outside it).
#[derive(Debug)]
#[non_exhaustive]
pub struct Checkup {
    /// The mode the doctors ran in.
    pub mode: DoctorMode,
    /// One per channel, in this order: `hooks`, `nudge`, `reminders`,
    /// `mail`, `bus`, `loop`, `leases`, `directory`, `pool`; then `search`
    /// when the search index was damaged or could not be rebuilt.
    pub areas: Vec<Area>,
    /// With [`DoctorMode::Check`], the stale temp files outside `bus/`
    /// (whose doctor reports its own).
    pub stale_temps: Vec<PathBuf>,
    /// With [`DoctorMode::Fix`], how many stale temp files were removed,
    /// anywhere under the root.
    pub removed_temps: usize,
}

/// One channel's doctor run: its report, or why it could not finish.
#[derive(Debug)]
#[non_exhaustive]
pub struct Area {
    /// The channel's name: `hooks`, `nudge`, `reminders`, `mail`, `bus`,
    /// `loop`, `leases`, `directory`, `pool`, `search`.
    pub name: &'static str,
    /// Its report; an error when it could not finish (an unreadable
    /// directory, a lock path that is a directory). The other areas still ran.
    pub report: Result<Report>,
}

impl Chipset {
    /// Runs every channel's doctor in turn, then looks for stale temp files
    /// under the root. With [`DoctorMode::Check`] nothing changes; with
    /// [`DoctorMode::Fix`] each channel repairs what it can (moving bad
    /// files aside, never deleting them) and temp files older than
    /// [`STALE_TEMP_AGE`] are removed.
    ///
    /// On a server every part checks its rows, and a fix moves a bad row
    /// into the folder `quarantine` beside it (never deleting it). The
    /// temp files looked for are the local folder's.
    ///
    /// ```
    /// use chipset::DoctorMode;
    ///
    /// let tmp = tempfile::tempdir()?;
    /// let chipset = chipset::Chipset::open(tmp.path().join("state"))?;
    /// let checkup = chipset.doctor(DoctorMode::Check)?;
    /// for (area, finding) in checkup.findings() {
    ///     println!("{area}: {finding:?}");
    /// }
    /// assert!(checkup.is_clean() && checkup.failures().next().is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the root cannot be listed for temp files. A
    /// channel's doctor that fails is an [`Area`] with an error instead.
    pub fn doctor(&self, mode: DoctorMode) -> Result<Checkup> {
        self.checkup(mode, None)
    }

    /// [`Chipset::doctor`], handing each finding to `sink` with its area's
    /// name (area by area, in the order [`Checkup::areas`] lists them)
    /// instead of keeping it: the areas' reports count what they handed
    /// over (their counts, such as [`Report::open`], cover them) and hold none, so that a state with a
    /// finding per message (a lost mail manifest) is checked in memory
    /// that does not grow with them. The mail doctor, whose findings can be
    /// that many, hands them over as it reads them back from its scratch
    /// data; the others, whose findings are one per file of their own
    /// channel, hand theirs over when they finish.
    ///
    /// An area whose doctor could not finish hands over nothing.
    ///
    /// # Errors
    ///
    /// As [`Chipset::doctor`].
    pub fn doctor_to(
        &self,
        mode: DoctorMode,
        sink: &mut dyn FnMut(&'static str, Finding),
    ) -> Result<Checkup> {
        self.checkup(mode, Some(sink))
    }

    /// Runs every area's doctor, keeping the findings or handing them to
    /// `sink`; one list of areas for both.
    fn checkup(
        &self,
        mode: DoctorMode,
        mut sink: Option<&mut dyn FnMut(&'static str, Finding)>,
    ) -> Result<Checkup> {
        let mut areas = Vec::with_capacity(10);
        keep(
            &mut areas,
            &mut sink,
            area("hooks", self.hooks().doctor(mode)),
        );
        keep(
            &mut areas,
            &mut sink,
            area("nudge", self.nudges().doctor(mode)),
        );
        let reminders = self.reminders().doctor(mode);
        keep(&mut areas, &mut sink, area("reminders", reminders));
        let mut mail = match sink.as_mut() {
            // Mail hands its findings over as it reads them back.
            Some(sink) => self.mail().doctor_to(mode, &mut |f| sink("mail", f)),
            None => self.mail().doctor(mode),
        };
        // A root mail/ that cannot be read fails the mail area, not the
        // checkup.
        if let Ok(report) = &mut mail {
            match self.unread_root_mail() {
                Ok(finding) => report.findings.extend(finding),
                Err(e) => mail = Err(e),
            }
        }
        keep(&mut areas, &mut sink, area("mail", mail));
        keep(&mut areas, &mut sink, area("bus", self.bus().doctor(mode)));
        keep(
            &mut areas,
            &mut sink,
            area("loop", self.loop_state().doctor(mode)),
        );
        keep(
            &mut areas,
            &mut sink,
            area("leases", self.leases().doctor(mode)),
        );
        let directory = self.directory().doctor(mode);
        keep(&mut areas, &mut sink, area("directory", directory));
        // After the hooks: a pool item on a repaired hook counts as it is now.
        keep(
            &mut areas,
            &mut sink,
            area("pool", self.pool().doctor(mode)),
        );
        if let Some(search) = self.search_doctor(mode) {
            keep(&mut areas, &mut sink, area("search", search));
        }
        self.temps(mode, areas)
    }

    /// The search index's doctor (a cache: checked, and with a fix rebuilt
    /// from the files just repaired), or `None` when it has nothing to say:
    /// its area is there only for a damaged index or a rebuild that failed.
    fn search_doctor(&self, mode: DoctorMode) -> Option<chipset_search::Result<Report>> {
        let search = self.search_index().doctor(mode);
        (!matches!(&search, Ok(report) if report.is_clean())).then_some(search)
    }

    /// With mail kept in a folder beside the root (as a nubos-pilot
    /// project's `.nubos-pilot/messages` is beside its `.chipset/state`),
    /// mail under the root's own `mail/`, sent there before the folder was
    /// used, is read by nothing: a finding for a person, who moves what
    /// still matters and removes `mail/`. A folder elsewhere (a wider
    /// folder's root above a project) says nothing: commands run outside
    /// the project still use the root's mail.
    fn unread_root_mail(&self) -> chipset_mail::Result<Option<Finding>> {
        let grandparent = |p: &std::path::Path| {
            p.parent()
                .and_then(std::path::Path::parent)
                .map(std::path::Path::to_owned)
        };
        let beside = self.mail_folder().is_some_and(|folder| {
            grandparent(folder.root()).is_some_and(|g| Some(g) == grandparent(self.state().root()))
        });
        if !beside {
            return Ok(None);
        }
        let own = chipset_mail::Mail::new(self.state().clone());
        let logged = self
            .state()
            .stat(&own.manifest_path())?
            .is_some_and(|s| s.len > 0);
        let waiting: usize = own.inbox_counts()?.values().sum();
        if !logged && waiting == 0 {
            return Ok(None);
        }
        let folder = self.mail().dir().as_path().display();
        let message = format!(
            "mail under the state root is not read: this project keeps its mail in \
             `{folder}` ({waiting} message(s) waiting here); move what still matters there, \
             then remove this `mail/`"
        );
        Ok(Some(
            Finding::new("mail-elsewhere", Defect::Stray, message).at(own.dir().as_path()),
        ))
    }

    /// Looks for stale temp files under the root and a mail folder kept
    /// outside it (with Fix, removes them) and returns the checkup.
    fn temps(&self, mode: DoctorMode, areas: Vec<Area>) -> Result<Checkup> {
        let mut temps =
            self.state()
                .sweep_temps(&self.state().root_path(), STALE_TEMP_AGE, mode)?;
        // A folder under the root was swept with it.
        if let Some(folder) = self.mail_folder()
            && !folder.root().starts_with(self.state().root())
        {
            temps.extend(folder.sweep_temps(&folder.root_path(), STALE_TEMP_AGE, mode)?);
        }
        let (stale_temps, removed_temps) = if mode == DoctorMode::Fix {
            (Vec::new(), temps.len())
        } else {
            let bus = self.state().channel(chipset_bus::Bus::CHANNEL);
            let stale = temps.into_iter().filter(|p| !p.starts_with(&bus)).collect();
            (stale, 0)
        };
        Ok(Checkup {
            mode,
            areas,
            stale_temps,
            removed_temps,
        })
    }
}

fn area<E: Into<Error>>(name: &'static str, report: std::result::Result<Report, E>) -> Area {
    Area {
        name,
        report: report.map_err(Into::into),
    }
}

/// Adds `area` to `areas`, first handing its findings to `sink` if there
/// is one, so that findings reach the sink area by area.
fn keep(
    areas: &mut Vec<Area>,
    sink: &mut Option<&mut dyn FnMut(&'static str, Finding)>,
    mut area: Area,
) {
    if let (Some(sink), Ok(report)) = (sink.as_mut(), &mut area.report) {
        for f in std::mem::take(&mut report.findings) {
            report.pass_on(f, &mut |f| sink(area.name, f));
        }
    }
    areas.push(area);
}

impl Checkup {
    /// Returns every finding kept with its area's name, area by area (none
    /// after [`Chipset::doctor_to`], which handed them over).
    pub fn findings(&self) -> impl Iterator<Item = (&'static str, &Finding)> {
        self.areas.iter().flat_map(|a| {
            a.report
                .as_ref()
                .map(|r| r.findings.as_slice())
                .unwrap_or_default()
                .iter()
                .map(move |f| (a.name, f))
        })
    }

    /// Returns the areas whose doctor could not finish, with why.
    pub fn failures(&self) -> impl Iterator<Item = (&'static str, &Error)> {
        self.areas
            .iter()
            .filter_map(|a| a.report.as_ref().err().map(|e| (a.name, e)))
    }

    /// Returns true when every doctor finished and found nothing, and no
    /// stale temp file was there.
    pub fn is_clean(&self) -> bool {
        self.stale_temps.is_empty()
            && self.removed_temps == 0
            && self
                .areas
                .iter()
                .all(|a| a.report.as_ref().is_ok_and(Report::is_clean))
    }

    /// Returns the problems still there: open findings, areas that could
    /// not finish, and stale temp files left in place.
    pub fn open(&self) -> usize {
        let areas: usize = self
            .areas
            .iter()
            .map(|a| a.report.as_ref().map_or(1, Report::open))
            .sum();
        areas + self.stale_temps.len()
    }

    /// Returns the findings in flight (a message whose `sent` event may
    /// still come) and the longest wait before the doctor should run again.
    pub fn in_flight(&self) -> (usize, Duration) {
        self.areas
            .iter()
            .filter_map(|a| a.report.as_ref().ok())
            .map(Report::in_flight)
            .fold((0, Duration::ZERO), |(n, w), (m, v)| (n + m, w.max(v)))
    }
}
