//! The lease tools (`lease_acquire`, `lease_renew`, `lease_release`,
//! `lease_list`) and their views, which the command line prints too.

use std::time::Duration;

use chipset_failure::Failure;
use chipset_lease::{Blocked, Lease, LeaseMode, LeaseRequest, Released};
use chipset_store::Timestamp;
use schemars::JsonSchema;
use serde::Serialize;

use super::{Ctx, Outcome, Reply};
use crate::params::{LeaseAcquire, LeaseList, LeaseRelease, LeaseRenew};

/// A lease as the views show it: the record on disk, plus whether it is live.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LeaseRecord {
    /// The fencing token: renew and release name the lease by it.
    pub token: u64,
    /// The agent holding it.
    pub holder: String,
    /// `exclusive` or `shared`.
    pub mode: String,
    /// The leased paths and globs, relative to the project root.
    pub paths: Vec<String>,
    /// Why it was taken.
    pub reason: String,
    /// When it was granted (RFC 3339).
    pub acquired_at: String,
    /// When it was last granted or renewed (RFC 3339).
    pub renewed_at: String,
    /// When it stops blocking anyone (RFC 3339).
    pub expires_at: String,
    /// False once it has expired (it then blocks no one).
    pub live: bool,
}

impl LeaseRecord {
    /// Returns the view of `lease` at `now`.
    pub fn of(lease: &Lease, now: Timestamp) -> Self {
        LeaseRecord {
            token: lease.token,
            holder: lease.holder.to_string(),
            mode: lease.mode.as_str().to_owned(),
            paths: lease.paths.iter().map(|p| p.as_str().to_owned()).collect(),
            reason: lease.reason.clone(),
            acquired_at: lease.acquired_at.to_string(),
            renewed_at: lease.renewed_at.to_string(),
            expires_at: lease.expires_at.to_string(),
            live: lease.is_live(now),
        }
    }

    /// Returns one text line: token, holder, mode, paths, expiry.
    pub fn line(&self) -> String {
        let state = if self.live { "until" } else { "expired" };
        format!(
            "lease {} {} {} {} ({state} {})",
            self.token,
            self.holder,
            self.mode,
            self.paths.join(" "),
            self.expires_at
        )
    }
}

/// `lease_acquire`: the lease granted.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LeaseGranted {
    /// The lease.
    pub lease: LeaseRecord,
    /// True when the agent already held this lease (a retry): nothing changed.
    pub existing: bool,
}

/// `lease_renew`: the lease with its new expiry.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LeaseRenewed {
    /// The lease.
    pub lease: LeaseRecord,
}

/// `lease_release`: what was released.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LeaseReleased {
    /// The token named.
    pub token: u64,
    /// The lease removed, or none when it was already gone (a retry).
    pub released: Option<LeaseRecord>,
    /// True for a forced release of another agent's lease (its holder is mailed).
    pub forced: bool,
}

impl LeaseReleased {
    /// Returns the view and its text line.
    pub fn of(token: u64, released: &Released, forced: bool, now: Timestamp) -> (Self, String) {
        let (record, text) = match released {
            Released::Released(l) => (
                Some(LeaseRecord::of(l, now)),
                format!("released lease {token}\n"),
            ),
            // Released before, or expired and dropped by a later grant.
            Released::AlreadyGone => (
                None,
                format!("lease {token} is no longer held (released or expired)\n"),
            ),
        };
        let view = LeaseReleased {
            token,
            released: record,
            forced,
        };
        (view, text)
    }
}

/// `lease_list`: the recorded leases.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LeaseListing {
    /// The leases, in token order (for `lease_list`, at most `limit`).
    pub leases: Vec<LeaseRecord>,
    /// How many there are in all.
    pub total: usize,
}

/// `chipset lease check`: the paths another agent holds exclusively.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LeaseCheck {
    /// The agent that asked.
    pub agent: String,
    /// True when no path is blocked.
    pub clear: bool,
    /// Each blocked path with the lease that blocks it.
    pub blocked: Vec<LeaseBlocked>,
}

/// One blocked path.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LeaseBlocked {
    /// The path checked.
    pub path: String,
    /// The exclusive lease that covers it.
    pub lease: LeaseRecord,
}

impl LeaseBlocked {
    /// Returns the view of `blocked` at `now`.
    pub fn of(blocked: &Blocked, now: Timestamp) -> Self {
        LeaseBlocked {
            path: blocked.path.as_str().to_owned(),
            lease: LeaseRecord::of(&blocked.lease, now),
        }
    }
}

fn ttl(minutes: Option<f64>) -> Result<Option<Duration>, Failure> {
    minutes
        .map(|m| {
            // The input schema holds it to 1 second ..= 7 days already; a
            // value that slips past says so in minutes, never echoed whole.
            Duration::try_from_secs_f64(m * 60.0).map_err(|_| {
                Failure::usage("ttl_minutes must be from 0.0167 (one second) to 10080 (seven days)")
            })
        })
        .transpose()
}

pub(crate) fn lease_acquire(ctx: &Ctx, p: LeaseAcquire) -> Outcome {
    let mode = if p.shared.unwrap_or(false) {
        LeaseMode::Shared
    } else {
        LeaseMode::Exclusive
    };
    let mut req = LeaseRequest::new(ctx.agent.clone(), mode, &p.paths);
    if let Some(ttl) = ttl(p.ttl_minutes)? {
        req = req.with_ttl(ttl);
    }
    if let Some(reason) = p.reason {
        req = req.with_reason(reason);
    }
    let granted = ctx.leases().acquire(&req)?;
    let lease = LeaseRecord::of(&granted.lease, ctx.state.now());
    let text = format!("{}\n", lease.line());
    Ok(Reply::new(
        text,
        LeaseGranted {
            lease,
            existing: granted.existing,
        },
    ))
}

pub(crate) fn lease_renew(ctx: &Ctx, p: LeaseRenew) -> Outcome {
    let ttl = ttl(p.ttl_minutes)?.unwrap_or(chipset_lease::DEFAULT_TTL);
    let lease = ctx.leases().renew(&ctx.agent, p.token, ttl)?;
    let lease = LeaseRecord::of(&lease, ctx.state.now());
    Ok(Reply::new(
        format!("{}\n", lease.line()),
        LeaseRenewed { lease },
    ))
}

pub(crate) fn lease_release(ctx: &Ctx, p: LeaseRelease) -> Outcome {
    let forced = p.force.unwrap_or(false);
    let released = if forced {
        let reason = p.reason.unwrap_or_default();
        ctx.leases().force_release(&ctx.agent, p.token, &reason)?
    } else {
        ctx.leases().release(&ctx.agent, p.token)?
    };
    let (view, text) = LeaseReleased::of(p.token, &released, forced, ctx.state.now());
    Ok(Reply::new(text, view))
}

pub(crate) fn lease_list(ctx: &Ctx, p: LeaseList) -> Outcome {
    let limit = crate::params::limit(p.limit)?;
    let now = ctx.state.now();
    let mut all = ctx.leases().list()?;
    all.retain(|l| p.all.unwrap_or(false) || l.is_live(now));
    let total = all.len();
    let records: Vec<LeaseRecord> = all
        .iter()
        .take(limit)
        .map(|l| LeaseRecord::of(l, now))
        .collect();
    let mut text: String = records.iter().map(|r| format!("{}\n", r.line())).collect();
    if records.len() < total {
        text.push_str(&format!(
            "… {} more ({total} in all): pass a larger `limit`\n",
            total - records.len()
        ));
    }
    if text.is_empty() {
        text = "no leases\n".to_owned();
    }
    Ok(Reply::new(
        text,
        LeaseListing {
            leases: records,
            total,
        },
    ))
}
