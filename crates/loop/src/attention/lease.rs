//! The brief's lease entry: the agent's own leases that expire soon, so it
//! renews (or finishes) before another agent may take the paths. A lease
//! taken from the agent by force is told by the mail `force_release`
//! sends (subject `lease-force-released`), which the mail entry shows.

use std::time::Duration;

use chipset_store::{AgentId, Timestamp};

use super::{Attention, BriefEntry, BriefItem, WorkKind, unreadable, unsupported};
use crate::error::Result;

/// How close to its expiry a live lease of the agent's shows in its brief,
/// at most: a shorter lease shows for the last fifth of its term
/// ([`warning`]).
pub(crate) const LEASE_EXPIRY_WARNING: Duration = Duration::from_secs(5 * 60);

/// How close to its expiry `lease` shows in its holder's brief: the last
/// fifth of its term (from its grant or last renewal), at most
/// [`LEASE_EXPIRY_WARNING`]. A lease shorter than that window would show
/// for its whole life, and a `wait` on it would never sleep.
pub(crate) fn warning(lease: &chipset_lease::Lease) -> Duration {
    (lease.expires_at.since(lease.renewed_at) / 5).min(LEASE_EXPIRY_WARNING)
}

impl Attention {
    /// Returns the lease entry of `agent`'s brief, and when it next changes
    /// with no file changing: the soonest of the agent's live leases
    /// drifting into the warning window, or leaving it by expiring.
    pub(super) fn lease_entry(
        &self,
        agent: &AgentId,
    ) -> Result<(Option<BriefEntry>, Option<Timestamp>)> {
        let leases = self.leases();
        let now = self.now()?;
        let mut soon = match leases.live() {
            Ok(all) => all,
            Err(chipset_lease::Error::Corrupt { corruption, .. }) => {
                return Ok((Some(unreadable(WorkKind::Lease, 1, &corruption)), None));
            }
            Err(chipset_lease::Error::Unsupported { unsupported: u, .. }) => {
                return Ok((Some(unsupported(WorkKind::Lease, 1, &u)), None));
            }
            Err(e) => return Err(e.into()),
        };
        soon.retain(|l| &l.holder == agent);
        let next = soon
            .iter()
            .map(|l| {
                let warn = l.expires_at - warning(l);
                if warn > now { warn } else { l.expires_at }
            })
            .filter(|at| *at > now)
            .min();
        soon.retain(|l| l.expires_at.since(now) <= warning(l));
        soon.sort_by_key(|l| l.expires_at);
        let Some(first) = soon.first() else {
            return Ok((None, next));
        };
        let paths: Vec<String> = first.paths.iter().map(ToString::to_string).collect();
        let entry = BriefEntry {
            kind: WorkKind::Lease,
            count: soon.len(),
            top: BriefItem {
                id: first.token.to_string(),
                from: None,
                priority: Some(first.mode.as_str().to_owned()),
                at: Some(first.expires_at),
                summary: format!(
                    "lease on {} expires in {}s: renew it or release it",
                    paths.join(", "),
                    first.expires_at.since(now).as_secs()
                ),
                unreadable: false,
            },
            more: Vec::new(),
        };
        Ok((Some(entry), next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chipset_lease::{LeaseMode, LeaseRequest, Leases};
    use chipset_testkit::{TempState, agent};

    /// A lease shows in its holder's brief only in its last minutes.
    #[test]
    fn a_lease_shows_when_it_is_about_to_expire() {
        let (t, clock) = TempState::manual();
        let leases = Leases::new(t.state.clone());
        let me = agent("polecat-alpha");
        let req = LeaseRequest::new(me.clone(), LeaseMode::Exclusive, ["src/auth/**"])
            .with_ttl(Duration::from_secs(30 * 60));
        let _ = leases.acquire(&req).unwrap();
        let other = LeaseRequest::new(agent("other"), LeaseMode::Shared, ["docs/**"])
            .with_ttl(Duration::from_secs(60));
        let _ = leases.acquire(&other).unwrap();
        let attention = Attention::from_state(&t.state);
        let expires = t.state.now() + Duration::from_secs(30 * 60);
        let (entry, next) = attention.lease_entry(&me).unwrap();
        assert!(entry.is_none());
        // No file changes when the lease drifts into the window: the wait
        // needs this deadline.
        assert_eq!(next, Some(expires - LEASE_EXPIRY_WARNING));
        clock.advance(Duration::from_secs(26 * 60));
        let (entry, next) = attention.lease_entry(&me).unwrap();
        let entry = entry.unwrap();
        assert_eq!(
            next,
            Some(expires),
            "then it changes when the lease expires"
        );
        assert_eq!((entry.kind, entry.count), (WorkKind::Lease, 1));
        assert!(
            entry.top.summary.contains("src/auth/**"),
            "{}",
            entry.top.summary
        );
        let brief = attention.brief(&me).unwrap();
        assert!(brief.entries.iter().any(|e| e.kind == WorkKind::Lease));
        clock.advance(Duration::from_secs(5 * 60));
        assert_eq!(attention.lease_entry(&me).unwrap(), (None, None), "expired");
    }

    /// A lease shorter than five minutes shows for the last fifth of its
    /// term, not for its whole life (a `wait` on it would never sleep).
    #[test]
    fn a_short_lease_shows_for_the_last_fifth_of_its_term() {
        let (t, clock) = TempState::manual();
        let me = agent("polecat-alpha");
        let req = LeaseRequest::new(me.clone(), LeaseMode::Exclusive, ["src/**"])
            .with_ttl(Duration::from_secs(120));
        let leases = Leases::new(t.state.clone());
        let lease = leases.acquire(&req).unwrap().lease;
        let attention = Attention::from_state(&t.state);
        let expires = t.state.now() + Duration::from_secs(120);
        let (entry, next) = attention.lease_entry(&me).unwrap();
        assert!(entry.is_none(), "{entry:?}");
        assert_eq!(next, Some(expires - Duration::from_secs(24)));
        clock.advance(Duration::from_secs(95));
        assert!(attention.lease_entry(&me).unwrap().0.is_none());
        clock.advance(Duration::from_secs(1));
        assert!(attention.lease_entry(&me).unwrap().0.is_some());
        // Renewed for two minutes more: out of the window again.
        leases
            .renew(&me, lease.token, Duration::from_secs(120))
            .unwrap();
        assert!(attention.lease_entry(&me).unwrap().0.is_none());
    }
}
