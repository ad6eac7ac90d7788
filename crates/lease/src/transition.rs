//! The pure core: each operation is a function from (table, request, now)
//! to a new table and an answer, or a typed error. The store applies them
//! under the table's lock.

use std::time::Duration;

use chipset_store::{AgentId, Timestamp};

use crate::error::Error;
use crate::format::{Lease, LeaseMode, Table};
use crate::pattern::LeasePath;
use crate::{MAX_PATHS, MAX_REASON, MAX_TTL, MIN_TTL};

/// What an agent asks for: paths, a mode, a TTL and a reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRequest {
    holder: AgentId,
    mode: LeaseMode,
    paths: Vec<String>,
    ttl: Duration,
    reason: String,
}

impl LeaseRequest {
    /// Returns a request by `holder` for `paths` in `mode`, with the
    /// default TTL ([`DEFAULT_TTL`](crate::DEFAULT_TTL)) and no reason.
    /// Nothing is checked until it is acquired.
    pub fn new<I, S>(holder: AgentId, mode: LeaseMode, paths: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        LeaseRequest {
            holder,
            mode,
            paths: paths.into_iter().map(|p| p.as_ref().to_owned()).collect(),
            ttl: crate::DEFAULT_TTL,
            reason: String::new(),
        }
    }

    /// Returns the request with its TTL set.
    #[must_use]
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Returns the request with its reason set.
    #[must_use]
    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = reason.into();
        self
    }

    /// Returns the holder.
    pub fn holder(&self) -> &AgentId {
        &self.holder
    }

    /// Checks every bound and returns the normalised, de-duplicated paths.
    pub(crate) fn validate(&self) -> Result<Vec<LeasePath>, Error> {
        if self.paths.is_empty() {
            return Err(Error::NoPaths);
        }
        if self.paths.len() > MAX_PATHS {
            return Err(Error::TooManyPaths {
                count: self.paths.len(),
                max: MAX_PATHS,
            });
        }
        check_ttl(self.ttl)?;
        check_reason(&self.reason)?;
        let mut out: Vec<LeasePath> = Vec::with_capacity(self.paths.len());
        for raw in &self.paths {
            let p = LeasePath::new(raw)?;
            if !out.contains(&p) {
                out.push(p);
            }
        }
        Ok(out)
    }
}

/// What [`Leases::acquire`](crate::Leases::acquire) granted.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[must_use]
pub struct Acquired {
    /// The lease.
    pub lease: Lease,
    /// True when the holder already held a live lease with the same mode,
    /// paths and reason (a retry): it is returned unchanged and nothing is
    /// written.
    pub existing: bool,
}

/// What a release did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Released {
    /// The lease was removed.
    Released(Lease),
    /// No lease holds the token (already released: a retry); nothing changed.
    AlreadyGone,
}

/// A path that [`Leases::check`](crate::Leases::check) found leased
/// exclusively by another agent.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Blocked {
    /// The path checked.
    pub path: LeasePath,
    /// The live exclusive lease of another agent that covers it.
    pub lease: Lease,
}

pub(crate) fn check_ttl(ttl: Duration) -> Result<(), Error> {
    if ttl < MIN_TTL || ttl > MAX_TTL {
        return Err(Error::Ttl {
            ttl_ms: ttl.as_millis(),
            min_ms: MIN_TTL.as_millis(),
            max_ms: MAX_TTL.as_millis(),
        });
    }
    Ok(())
}

pub(crate) fn check_reason(reason: &str) -> Result<(), Error> {
    if reason.len() > MAX_REASON {
        return Err(Error::Reason("longer than 1024 bytes"));
    }
    if reason.chars().any(char::is_control) {
        return Err(Error::Reason(
            "holds a control character (a line break, a tab): it is shown on one line",
        ));
    }
    Ok(())
}

/// Whether two leases name the same patterns, in whatever order.
fn same_paths(a: &[LeasePath], b: &[LeasePath]) -> bool {
    fn sorted(p: &[LeasePath]) -> Vec<&LeasePath> {
        let mut v: Vec<&LeasePath> = p.iter().collect();
        v.sort_unstable();
        v.dedup();
        v
    }
    sorted(a) == sorted(b)
}

/// Live leases of other holders that conflict with `lease`.
fn conflicts(table: &Table, lease: &Lease, now: Timestamp) -> Vec<Lease> {
    table
        .leases
        .iter()
        .filter(|l| l.token != lease.token && l.is_live(now) && l.conflicts_with(lease))
        .cloned()
        .collect()
}

/// Grants `req` or returns every conflicting lease. A granted table drops
/// every expired lease (they never block, and the holder of one can no
/// longer renew it).
pub(crate) fn acquire(
    table: &Table,
    req: &LeaseRequest,
    now: Timestamp,
) -> Result<(Option<Table>, Acquired), Error> {
    let paths = req.validate()?;
    if let Some(same) = table.leases.iter().find(|l| {
        l.is_live(now)
            && l.holder == req.holder
            && l.mode == req.mode
            && same_paths(&l.paths, &paths)
            && l.reason == req.reason
    }) {
        let acquired = Acquired {
            lease: same.clone(),
            existing: true,
        };
        return Ok((None, acquired));
    }
    let lease = Lease {
        token: table.next_token,
        holder: req.holder.clone(),
        mode: req.mode,
        paths,
        reason: req.reason.clone(),
        acquired_at: now,
        renewed_at: now,
        expires_at: now + req.ttl,
    };
    let conflicts = conflicts(table, &lease, now);
    if !conflicts.is_empty() {
        return Err(Error::Conflict { conflicts });
    }
    let mut next = Table {
        format: table.format.max(crate::format::TABLE_FORMAT),
        next_token: table.next_token + 1,
        leases: table
            .leases
            .iter()
            .filter(|l| l.is_live(now))
            .cloned()
            .collect(),
    };
    next.leases.push(lease.clone());
    let acquired = Acquired {
        lease,
        existing: false,
    };
    Ok((Some(next), acquired))
}

/// Finds the lease of `token` and checks that `agent` holds it.
fn held<'t>(table: &'t Table, agent: &AgentId, token: u64) -> Result<Option<&'t Lease>, Error> {
    let Some(lease) = recorded(table, token)? else {
        return Ok(None);
    };
    if &lease.holder != agent {
        return Err(Error::NotHolder {
            token,
            holder: lease.holder.clone(),
            agent: agent.clone(),
        });
    }
    Ok(Some(lease))
}

/// Extends the lease of `token` to `now + ttl`. An expired lease that is
/// still recorded (no grant has pruned it) is renewed only if no live lease
/// conflicts with it.
pub(crate) fn renew(
    table: &Table,
    agent: &AgentId,
    token: u64,
    ttl: Duration,
    now: Timestamp,
) -> Result<(Table, Lease), Error> {
    check_ttl(ttl)?;
    let Some(lease) = held(table, agent, token)? else {
        return Err(Error::Fenced { token });
    };
    if !lease.is_live(now) {
        let conflicts = conflicts(table, lease, now);
        if !conflicts.is_empty() {
            return Err(Error::Conflict { conflicts });
        }
    }
    let mut renewed = lease.clone();
    renewed.renewed_at = now;
    renewed.expires_at = now + ttl;
    let mut next = table.clone();
    for l in &mut next.leases {
        if l.token == token {
            *l = renewed.clone();
        }
    }
    Ok((next, renewed))
}

/// Removes the lease of `token`, which `agent` must hold; a token no lease
/// holds is a retry of a release that applied.
pub(crate) fn release(
    table: &Table,
    agent: &AgentId,
    token: u64,
) -> Result<(Option<Table>, Released), Error> {
    match held(table, agent, token)? {
        None => Ok((None, Released::AlreadyGone)),
        Some(lease) => Ok((
            Some(without(table, token)),
            Released::Released(lease.clone()),
        )),
    }
}

/// Removes the lease of `token` whoever holds it.
pub(crate) fn force_release(table: &Table, token: u64) -> Result<(Option<Table>, Released), Error> {
    Ok(match recorded(table, token)? {
        None => (None, Released::AlreadyGone),
        Some(lease) => (
            Some(without(table, token)),
            Released::Released(lease.clone()),
        ),
    })
}

/// The lease of `token` in `table`, or `None` for one granted and gone
/// since; [`Error::NeverGranted`] for a token no grant has given yet.
fn recorded(table: &Table, token: u64) -> Result<Option<&Lease>, Error> {
    if token == 0 || token >= table.next_token {
        return Err(Error::NeverGranted {
            token,
            next: table.next_token,
        });
    }
    Ok(table.leases.iter().find(|l| l.token == token))
}

fn without(table: &Table, token: u64) -> Table {
    Table {
        format: table.format,
        next_token: table.next_token,
        leases: table
            .leases
            .iter()
            .filter(|l| l.token != token)
            .cloned()
            .collect(),
    }
}

/// Every live exclusive lease of another agent covering one of `paths`.
pub(crate) fn check(
    table: &Table,
    agent: &AgentId,
    paths: &[LeasePath],
    now: Timestamp,
) -> Vec<Blocked> {
    let mut out = Vec::new();
    for lease in &table.leases {
        if lease.mode != LeaseMode::Exclusive || &lease.holder == agent || !lease.is_live(now) {
            continue;
        }
        for pattern in &lease.paths {
            // A file the pattern covers; a directory it holds something
            // under; a glob that may name a file it covers.
            let around = paths.iter().filter(|p| {
                if p.is_glob() {
                    p.overlaps(pattern)
                } else {
                    pattern.lies_under(p)
                }
            });
            for path in pattern.covered(paths).into_iter().chain(around) {
                out.push(Blocked {
                    path: path.clone(),
                    lease: lease.clone(),
                });
            }
        }
    }
    out.sort_by(|a, b| (&a.path, a.lease.token).cmp(&(&b.path, b.lease.token)));
    out.dedup_by(|a, b| a.path == b.path && a.lease.token == b.lease.token);
    out
}
