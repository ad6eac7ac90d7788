//! The I/O layer: applies the pure transitions to `leases/table.json` with
//! a compare-and-swap on the storage seam.

use std::sync::Arc;
use std::time::Duration;

use chipset_backend::{Backend, FsBackend, Key, Step, Version};
use chipset_mail::{Mail, MailConfig, MessageId, NewMessage};
use chipset_store::{
    AgentId, Corruption, Defect, DoctorMode, Finding, ReadOutcome, Report, StateDir, StatePath,
    TaskId, Timestamp, Unsupported,
};

use crate::error::Error;
use crate::format::{Lease, TABLE_FORMAT, Table};
use crate::pattern::LeasePath;
use crate::transition::{self, Acquired, Blocked, LeaseRequest, Released, check_reason};

/// The file name of the table in the channel's directory.
const TABLE_FILE: &str = "table.json";

/// What the doctor did when it replaced a corrupt table.
const RESTARTED: &str = "started an empty table with tokens above any granted before";

/// The path leases under one state root: `leases/table.json`.
///
/// Cheap to clone. Every change reads the table and its version on the
/// storage seam (`chipset_backend::Backend`), decides with the pure
/// transition rules at the backend's clock, and writes with a
/// compare-and-swap at the version read (read and decided again when
/// another writer came first). Grants are therefore linearizable across
/// threads, processes and (on PostgreSQL) hosts, tokens come from the one
/// counter in the table, and expiry is judged on one clock: the injected
/// clock of a directory, the server's on PostgreSQL. On a directory the
/// swap is the store's durable replace under `leases/.table.json.lock`, the
/// lock [`StateDir::update`] takes, so the file is what it always was and
/// a reader always sees a whole table.
#[derive(Debug, Clone)]
pub struct Leases {
    state: StateDir,
    seam: Arc<dyn Backend>,
    /// Where a forced release's notice goes: the same place as the table.
    mail: Mail,
}

impl Leases {
    /// Returns the leases of `state`.
    pub fn new(state: StateDir) -> Self {
        Leases {
            seam: Arc::new(FsBackend::new(state.clone())),
            mail: Mail::new(state.clone()),
            state,
        }
    }

    /// Returns the leases whose table, and the mail a forced release
    /// sends, live on `backend` (a PostgreSQL server, issue 30), with
    /// `state` as the local root.
    ///
    /// This is for servers: on a directory use [`Leases::new`], whose
    /// forced-release mail is in the seed's files (mail on a backend keeps
    /// the server's layout; see `chipset_mail::Mail::with_backend`).
    pub fn with_backend(state: StateDir, backend: Arc<dyn Backend>) -> Self {
        Leases {
            mail: Mail::with_backend(state.clone(), MailConfig::default(), Arc::clone(&backend)),
            seam: backend,
            state,
        }
    }

    /// Returns these leases with a forced release's notice sent through
    /// `mail`: the mail handle the program uses (its
    /// [`MailConfig`](chipset_mail::MailConfig), or a folder of the seed's
    /// layout such as a nubos-pilot project's, [`Mail::in_folder`]), so the
    /// holder finds the notice where it reads its mail.
    #[must_use]
    pub fn with_mail(mut self, mail: Mail) -> Self {
        self.mail = mail;
        self
    }

    /// Returns the state root.
    pub fn state(&self) -> &StateDir {
        &self.state
    }

    fn table_path(&self) -> Result<StatePath, Error> {
        Ok(self.state.channel(Leases::CHANNEL).join(TABLE_FILE)?)
    }

    /// Returns the table's key on the seam: `leases/table.json`.
    fn table_key() -> Key {
        chipset_backend::Dir::new(Leases::CHANNEL.as_str())
            .and_then(|d| d.key(TABLE_FILE))
            .expect("a constant name is valid")
    }

    /// Returns the time on the backend's clock.
    fn now(&self) -> Result<Timestamp, Error> {
        self.seam.now().map_err(|e| self.seam_error(e))
    }

    /// Grants `req`, or refuses it with [`Error::Conflict`] listing
    /// every live lease of another agent that conflicts, changing nothing.
    /// A retry (the holder already holds a live lease with the same mode,
    /// paths and reason) returns that lease with `existing` set.
    ///
    /// # Errors
    ///
    /// [`Error::Conflict`]; the input errors ([`Error::InvalidPath`],
    /// [`Error::NoPaths`], [`Error::TooManyPaths`],
    /// [`Error::Ttl`], [`Error::Reason`]); [`Error::TableFull`];
    /// a corrupt or unsupported table; a store error.
    pub fn acquire(&self, req: &LeaseRequest) -> Result<Acquired, Error> {
        req.validate()?;
        let acquired = self.apply("acquire a lease", |table, now| {
            transition::acquire(table, req, now)
        })?;
        tracing::debug!(token = acquired.lease.token, holder = %acquired.lease.holder, "lease acquired");
        Ok(acquired)
    }

    /// Extends the lease of `token`, held by `agent`, to now plus `ttl`.
    ///
    /// # Errors
    ///
    /// [`Error::Fenced`] when no lease holds the token any more (the
    /// holder lost it), [`Error::NeverGranted`] for a token no grant has
    /// given, [`Error::NotHolder`], [`Error::Conflict`]
    /// (an expired lease that another now overlaps), [`Error::Ttl`], a
    /// corrupt or unsupported table, a store error.
    pub fn renew(&self, agent: &AgentId, token: u64, ttl: Duration) -> Result<Lease, Error> {
        transition::check_ttl(ttl)?;
        self.apply("renew a lease", |table, now| {
            transition::renew(table, agent, token, ttl, now).map(|(t, l)| (Some(t), l))
        })
    }

    /// Releases the lease of `token`, held by `agent`. Releasing a token no
    /// lease holds any more is a retry: [`Released::AlreadyGone`].
    ///
    /// # Errors
    ///
    /// [`Error::NeverGranted`] for a token no grant has given (a mistyped
    /// one: it would otherwise read as released while the real lease goes
    /// on blocking others); [`Error::NotHolder`], a corrupt or unsupported
    /// table, a store error.
    pub fn release(&self, agent: &AgentId, token: u64) -> Result<Released, Error> {
        self.apply("release a lease", |table, _| {
            transition::release(table, agent, token)
        })
    }

    /// Releases the lease of `token` on behalf of its holder (an expired or
    /// abandoned lease), and mails the holder a `notify` saying who released
    /// it and why (subject `lease-force-released`, task `lease-{token}`).
    /// Releasing one's own lease this way sends no mail.
    ///
    /// The notice is sent first, under an id the lease fixes
    /// (`{acquired-ms}-1ea5e000-f0ce-4000-8…-{token in hex}`), then the
    /// lease is removed: whatever fails, the holder is never left without
    /// a notice of a release that happened. **Retry rule:** after any
    /// failure, the same call is safe to repeat and finishes the release:
    /// a notice already sent for the lease is not sent again (whoever sent
    /// it), and a lease already removed answers [`Released::AlreadyGone`].
    ///
    /// # Errors
    ///
    /// [`Error::Reason`] when `reason` is empty or too long;
    /// [`Error::NeverGranted`] for a token no grant has given;
    /// [`Error::NoticeFailed`] when the mail failed (nothing was released);
    /// [`Error::PartlyReleased`] when the notice went out but the release
    /// failed (retry); a corrupt or unsupported table; a store error.
    pub fn force_release(&self, by: &AgentId, token: u64, reason: &str) -> Result<Released, Error> {
        if reason.trim().is_empty() {
            return Err(Error::Reason("a forced release needs a reason"));
        }
        check_reason(reason)?;
        let op = "force-release a lease";
        let (_, found) = transition::force_release(&self.read(op)?, token)?;
        let notified = match &found {
            Released::Released(lease) if &lease.holder != by => {
                self.notify(by, lease, reason)?;
                Some(lease)
            }
            _ => None,
        };
        let released = self.apply(op, |table, _| transition::force_release(table, token));
        match (released, notified) {
            (Err(e), Some(lease)) => Err(Error::PartlyReleased {
                lease: Box::new(lease.clone()),
                source: Box::new(e),
            }),
            (released, _) => released,
        }
    }

    /// Mails `lease`'s holder that `by` released it, under the lease's
    /// notice id: a notice of this lease already sent (the same, or by
    /// another attempt since its expiry moved or another agent forced it)
    /// is not sent again.
    fn notify(&self, by: &AgentId, lease: &Lease, reason: &str) -> Result<(), Error> {
        let token = lease.token;
        tracing::info!(token, holder = %lease.holder, by = %by, "lease force-release: telling the holder");
        let paths: Vec<&str> = lease.paths.iter().map(LeasePath::as_str).collect();
        let body = format!(
            "`{by}` released your {} lease {token} on {} (expiry {}): {reason}",
            lease.mode.as_str(),
            paths.join(", "),
            lease.expires_at,
        );
        let task = TaskId::new(format!("lease-{token}"))?;
        let draft = NewMessage::notify(
            by.clone(),
            lease.holder.clone(),
            task,
            "lease-force-released",
            body,
        )
        .with_id(notice_id(lease)?);
        match self.mail.send(&draft) {
            Ok(_) => Ok(()),
            Err(chipset_mail::Error::IdTaken { id, .. }) => {
                tracing::info!(token, %id, "the lease's notice was sent before");
                Ok(())
            }
            Err(error) => Err(Error::NoticeFailed {
                lease: Box::new(lease.clone()),
                error,
            }),
        }
    }

    /// Returns every recorded lease in token order, expired ones included
    /// until a grant prunes them ([`Lease::is_live`] tells them apart).
    ///
    /// # Errors
    ///
    /// A corrupt or unsupported table, a store error.
    pub fn list(&self) -> Result<Vec<Lease>, Error> {
        Ok(self.read("list leases")?.leases)
    }

    /// Returns every live lease in token order.
    ///
    /// # Errors
    ///
    /// As [`Leases::list`].
    pub fn live(&self) -> Result<Vec<Lease>, Error> {
        let mut all = self.list()?;
        let now = self.now()?;
        all.retain(|l| l.is_live(now));
        Ok(all)
    }

    /// Returns, for each of `paths` (relative to the project root), every
    /// live exclusive lease of an agent other than `agent` that may hold
    /// something there: one that covers the path ([`LeasePath::covers`]),
    /// one that lies under it (a lease on `src/auth/**` for `src`, checked
    /// before editing a directory), and for a glob, one that overlaps it
    /// ([`LeasePath::overlaps`]). Empty means `agent` may edit and commit
    /// them. Shared leases never block.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`] for a path that escapes the root; a
    /// corrupt or unsupported table (fail closed: never "nothing leased");
    /// a store error.
    pub fn check<S: AsRef<str>>(
        &self,
        agent: &AgentId,
        paths: &[S],
    ) -> Result<Vec<Blocked>, Error> {
        let paths = paths
            .iter()
            .map(|p| LeasePath::normalise(p.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        let table = self.read("check leases")?;
        Ok(transition::check(&table, agent, &paths, self.now()?))
    }

    /// Checks `leases/table.json`; with [`DoctorMode::Fix`], copies a
    /// corrupt table aside into `leases/.quarantine/` and replaces it, in
    /// one atomic write, with an empty one whose tokens continue from the
    /// current time in milliseconds, so tokens still only increase. The
    /// leases it held are gone. A table of a newer format is reported and
    /// left alone.
    ///
    /// On a server the table's row is checked the same way, and the fix
    /// moves a corrupt one into `leases/quarantine/{unix-ms}-table.json`
    /// (with a compare-and-swap at the version read) and starts the empty
    /// table on the server's clock, in one transaction.
    ///
    /// # Errors
    ///
    /// A store error reading or moving the table;
    /// [`Error::Backend`] on a server.
    pub fn doctor(&self, mode: DoctorMode) -> Result<Report, Error> {
        let mut report = Report::new(mode);
        let path = self.table_path()?;
        let local = self.seam.local_state().is_some();
        let (outcome, version) = match local {
            true => (self.state.read_json::<Table>(&path)?, None),
            false => self.read_raw()?,
        };
        if !matches!(outcome, ReadOutcome::Missing) {
            report.scanned = 1;
        }
        match decode(outcome, &path, "check the lease table") {
            Err(Error::Corrupt { corruption, .. }) => {
                let line = format!("`{}`: {}", path.display(), corruption.reason);
                let mut finding = Finding::new(
                    "lease-table-corrupt",
                    Defect::Corrupt(corruption.reason),
                    line,
                )
                .at(&path)
                .fixable(true);
                if mode == DoctorMode::Fix && local {
                    for action in self.restart_local(&path)? {
                        finding = finding.with(action);
                    }
                } else if mode == DoctorMode::Fix {
                    let actions = match version {
                        Some(version) => self.restart_row(version)?,
                        None => vec![chipset_store::Action::LeftAlone(
                            "the server cannot read it: a person decides".to_owned(),
                        )],
                    };
                    for action in actions {
                        finding = finding.with(action);
                    }
                }
                report.findings.push(finding);
            }
            Err(Error::Unsupported { unsupported, .. }) => {
                let line = format!("`{}`: {}", path.display(), unsupported.what);
                report.findings.push(
                    Finding::new(
                        "lease-table-unsupported",
                        Defect::Unsupported(unsupported.what),
                        line,
                    )
                    .at(&path),
                );
            }
            _ => {}
        }
        Ok(report)
    }

    /// On a directory: under the table's lock, copies a table still
    /// corrupt into `leases/.quarantine/` and replaces it with an empty one
    /// whose tokens start at [`Leases::token_floor`], in one atomic write.
    ///
    /// Never a move then a write: a failure between the two left no table,
    /// which reads as an empty one granting token 1 again (a fencing token
    /// already granted), and a later Fix found nothing to repair. Copied,
    /// a failure leaves the corrupt table in place (failing closed) for a
    /// later Fix, and its bytes in quarantine either way.
    fn restart_local(&self, path: &StatePath) -> Result<Vec<chipset_store::Action>, Error> {
        use chipset_store::{Action, Decision};
        let floor = self.token_floor()?;
        self.state.update(path, |outcome: ReadOutcome<Table>| {
            let why = match outcome {
                ReadOutcome::Corrupt(_) => None,
                ReadOutcome::Missing => Some("gone before the fix"),
                ReadOutcome::Value(_) | ReadOutcome::Unsupported(_) => Some("no longer bad"),
            };
            if let Some(why) = why {
                return Ok(Decision::Keep(vec![Action::LeftAlone(why.to_owned())]));
            }
            let to = self.state.quarantine_copy(path, self.state.read_cap())?;
            let mut table = Table::empty();
            table.next_token = floor;
            Ok::<_, Error>(Decision::Write(
                table,
                vec![
                    Action::quarantined(to),
                    Action::Rewrote(RESTARTED.to_owned()),
                ],
            ))
        })
    }

    /// On a server: moves the table row, if it is still at `version`, into
    /// `leases/quarantine/{unix-ms}-table.json` (a server's quarantine:
    /// nothing is deleted) and creates an empty table whose tokens start
    /// at [`Leases::token_floor`], in one transaction, so the row is never
    /// missing (which reads as an empty table granting token 1 again). A
    /// table rewritten since is left alone.
    fn restart_row(&self, version: Version) -> Result<Vec<chipset_store::Action>, Error> {
        use chipset_store::Action;
        let key = Self::table_key();
        let path = self.table_path()?;
        let now = self.now()?;
        let mut table = Table::empty();
        table.next_token = self.token_floor()?;
        let bytes = StateDir::to_canonical_json(&table).map_err(|source| {
            Error::Store(chipset_store::Error::Serialize {
                path: path.to_path_buf(),
                source,
            })
        })?;
        let aside = key.quarantined_at(now).map_err(|e| self.seam_error(e))?;
        let steps = [
            Step::MoveNew {
                from: &key,
                expected: version,
                to: &aside,
            },
            Step::Create {
                key: &key,
                value: &bytes,
            },
        ];
        match self.seam.transact(&steps) {
            Ok(_) => Ok(vec![
                Action::quarantined(aside.to_string()),
                Action::Rewrote(RESTARTED.to_owned()),
            ]),
            Err(
                chipset_backend::Error::Conflict { .. }
                | chipset_backend::Error::NotFound { .. }
                | chipset_backend::Error::Exists { .. },
            ) => Ok(vec![Action::LeftAlone(
                "rewritten since the check".to_owned(),
            )]),
            Err(e) => Err(self.seam_error(e)),
        }
    }

    /// The first token of a table restarted after its counter was lost:
    /// the current time in milliseconds, above any token a table could
    /// have handed out one grant at a time.
    fn token_floor(&self) -> Result<u64, Error> {
        Ok(u64::try_from(self.now()?.unix_ms()).unwrap_or(1).max(1))
    }

    fn read(&self, op: &'static str) -> Result<Table, Error> {
        let (outcome, _) = self.read_raw()?;
        Ok(decode(outcome, &self.table_path()?, op)?.unwrap_or_else(Table::empty))
    }

    /// Reads the table on the seam, with the version to swap at.
    fn read_raw(&self) -> Result<(ReadOutcome<Table>, Option<Version>), Error> {
        let path = self.table_path()?;
        match self.seam.read(&Self::table_key()) {
            Ok(None) => Ok((ReadOutcome::Missing, None)),
            Ok(Some(v)) => Ok((ReadOutcome::from_json(&path, &v.value), Some(v.version))),
            Err(chipset_backend::Error::Corrupt { reason, .. }) => Ok((
                ReadOutcome::Corrupt(Corruption {
                    path: path.to_path_buf(),
                    reason,
                }),
                None,
            )),
            Err(e) => Err(self.seam_error(e)),
        }
    }

    /// Applies `decide` to the table read at the backend's clock, and writes
    /// the table it returns (after checking it fits the read cap) with a
    /// compare-and-swap at the version read: a create when there was none,
    /// a replace otherwise. When another writer came first, reads and
    /// decides again.
    fn apply<R>(
        &self,
        op: &'static str,
        mut decide: impl FnMut(&Table, Timestamp) -> Result<(Option<Table>, R), Error>,
    ) -> Result<R, Error> {
        let cap = self
            .state
            .read_cap()
            .min(u64::try_from(chipset_backend::MAX_VALUE).unwrap_or(u64::MAX));
        let path = self.table_path()?;
        let key = Self::table_key();
        loop {
            let (current, version) = self.read_raw()?;
            let table = decode(current, &path, op)?.unwrap_or_else(Table::empty);
            // Time is read after the table: a change that commits was
            // decided on the newest table, at a time no earlier than before.
            let now = self.now()?;
            let (next, answer) = decide(&table, now)?;
            let Some(next) = next else {
                return Ok(answer);
            };
            let bytes = StateDir::to_canonical_json(&next).map_err(|source| {
                Error::Store(chipset_store::Error::Serialize {
                    path: path.to_path_buf(),
                    source,
                })
            })?;
            if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > cap {
                return Err(Error::TableFull {
                    size: bytes.len(),
                    cap,
                });
            }
            match self.seam.create_or_replace(&key, version, &bytes) {
                Ok(Some(_)) => return Ok(answer),
                Ok(None) => tracing::debug!(op, "lease table changed under us; deciding again"),
                Err(e) => return Err(self.seam_error(e)),
            }
        }
    }

    /// Turns a seam error into the lease's: a directory's failures stay the
    /// store's errors ([`Error::Store`], an unknown outcome included), a
    /// server's are [`Error::Backend`].
    fn seam_error(&self, e: chipset_backend::Error) -> Error {
        match e {
            chipset_backend::Error::Store { source, .. } => Error::Store(source),
            chipset_backend::Error::OutcomeUnknown { op, key, source } => match source
                .downcast::<chipset_store::Error>(
            ) {
                Ok(store) => Error::Store(*store),
                Err(source) => Error::Backend(Box::new(chipset_backend::Error::OutcomeUnknown {
                    op,
                    key,
                    source,
                })),
            },
            other => Error::Backend(Box::new(other)),
        }
    }
}

/// The id of the notice of `lease`'s forced release, in the seed's form
/// (`{unix-ms}-{uuid}`): the grant's time, then a fixed prefix (`1ea5e`,
/// `f0ce`: lease, force; the version and variant digits of a UUID v4)
/// and the token, so every attempt to force the lease names the same
/// message, and no other message has it.
fn notice_id(lease: &Lease) -> Result<MessageId, Error> {
    let ms = lease.acquired_at.unix_ms().max(0);
    let token = lease.token;
    let id = format!(
        "{ms:013}-1ea5e000-f0ce-4000-8{:03x}-{:012x}",
        (token >> 48) & 0xfff,
        token & 0xffff_ffff_ffff
    );
    Ok(MessageId::new(id)?)
}

fn decode(
    outcome: ReadOutcome<Table>,
    path: &StatePath,
    op: &'static str,
) -> Result<Option<Table>, Error> {
    match outcome {
        ReadOutcome::Missing => Ok(None),
        ReadOutcome::Value(t) if t.format > TABLE_FORMAT => Err(Error::Unsupported {
            op,
            unsupported: Unsupported::new(
                path.to_path_buf(),
                format!("lease table format {}", t.format),
            ),
        }),
        ReadOutcome::Value(t) => Ok(Some(t)),
        ReadOutcome::Corrupt(corruption) => Err(Error::Corrupt { op, corruption }),
        ReadOutcome::Unsupported(unsupported) => Err(Error::Unsupported { op, unsupported }),
    }
}
