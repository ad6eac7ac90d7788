//! The brief's lease entry: the agent's own leases that expire soon, so it
//! renews (or finishes) before another agent may take the paths. A lease
//! taken from the agent by force is told by the mail `force_release`
//! sends (subject `lease-force-released`), which the mail entry shows.

use std::time::Duration;

use chipset_lease::Leases;
use chipset_store::AgentId;

use super::{Attention, Entry, Item, WorkKind, unreadable, unsupported};
use crate::error::Result;

/// How close to its expiry a live lease of the agent's shows in its brief.
pub const LEASE_EXPIRY_WARNING: Duration = Duration::from_secs(5 * 60);

impl Attention {
    pub(super) fn lease_entry(&self, agent: &AgentId) -> Result<Option<Entry>> {
        let leases = Leases::new(self.hooks.state().clone());
        let now = self.hooks.state().now();
        let mut soon = match leases.live() {
            Ok(all) => all,
            Err(chipset_lease::Error::Corrupt { corruption, .. }) => {
                return Ok(Some(unreadable(WorkKind::Lease, 1, &corruption)));
            }
            Err(chipset_lease::Error::Unsupported { unsupported: u, .. }) => {
                return Ok(Some(unsupported(WorkKind::Lease, 1, &u)));
            }
            Err(e) => return Err(e.into()),
        };
        soon.retain(|l| &l.holder == agent && l.expires_at.since(now) <= LEASE_EXPIRY_WARNING);
        soon.sort_by_key(|l| l.expires_at);
        let Some(first) = soon.first() else {
            return Ok(None);
        };
        let paths: Vec<String> = first.paths.iter().map(ToString::to_string).collect();
        Ok(Some(Entry {
            kind: WorkKind::Lease,
            count: soon.len(),
            top: Item {
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
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chipset_lease::{LeaseMode, LeaseRequest};
    use chipset_testkit::{TempState, agent};

    /// A lease shows in its holder's brief only in its last minutes.
    #[test]
    fn a_lease_shows_when_it_is_about_to_expire() {
        let (t, clock) = TempState::manual();
        let leases = Leases::new(t.state.clone());
        let me = agent("polecat-alpha");
        let req = LeaseRequest::new(me.clone(), LeaseMode::Exclusive, ["src/auth/**"])
            .with_ttl(Duration::from_secs(30 * 60));
        leases.acquire(&req).unwrap();
        let other = LeaseRequest::new(agent("other"), LeaseMode::Shared, ["docs/**"])
            .with_ttl(Duration::from_secs(60));
        leases.acquire(&other).unwrap();
        let attention = Attention::from_state(&t.state);
        assert!(attention.lease_entry(&me).unwrap().is_none());
        clock.advance(Duration::from_secs(26 * 60));
        let entry = attention.lease_entry(&me).unwrap().unwrap();
        assert_eq!((entry.kind, entry.count), (WorkKind::Lease, 1));
        assert!(
            entry.top.summary.contains("src/auth/**"),
            "{}",
            entry.top.summary
        );
        let brief = attention.brief(&me).unwrap();
        assert!(brief.entries.iter().any(|e| e.kind == WorkKind::Lease));
        clock.advance(Duration::from_secs(5 * 60));
        assert!(attention.lease_entry(&me).unwrap().is_none(), "expired");
    }
}
