//! chipset-search's integration tests: the index against a brute-force
//! scan of the same files, rebuilds, bad input and the peers' files.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "tests plant files from outside and damage the index on purpose"
)]

mod brute;
mod cases;
mod model;
mod peers;

use std::collections::BTreeSet;

use chipset_search::{Hit, Origin};

/// Returns each hit as (channel, id), sorted: what two answers must share.
pub(crate) fn keys(hits: &[Hit]) -> BTreeSet<(Origin, String)> {
    hits.iter().map(|h| (h.channel, h.id.clone())).collect()
}

/// Takes `agent`'s hook through activate and complete to empty.
pub(crate) fn finish_hook(hooks: &chipset_hook::Hooks, agent: &chipset_store::AgentId) {
    for step in 0..3 {
        let Some(held) = hooks.current(agent).unwrap() else {
            return;
        };
        let _ = match step {
            0 => hooks.activate(&held),
            1 => hooks.complete(&held),
            _ => hooks.clear(&held),
        };
    }
}
