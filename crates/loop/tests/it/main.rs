//! Integration tests for chipset-loop.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "tests plant, corrupt and inspect files as another program would, outside the store's API"
)]

mod attention;
mod channels;
mod dispatcher;
mod doctor;
mod formats;
mod procs;
mod rounds;
mod sim;
mod witness;
mod worker;

use std::time::Duration;

use chipset_hook::Hooks;
use chipset_mail::{InboxFilter, Mail, ManifestEvent};
use chipset_nudge::Nudges;
use chipset_store::{AgentId, ManualClock};
use chipset_testkit::TempState;

pub(crate) use chipset_testkit::{agent, bead};

/// A state root on a manual clock at [`chipset_testkit::T0`], with handles on the channels.
pub(crate) struct Setup {
    pub(crate) tmp: TempState,
    pub(crate) clock: ManualClock,
    pub(crate) hooks: Hooks,
    pub(crate) nudges: Nudges,
    pub(crate) mail: Mail,
}

impl Setup {
    pub(crate) fn advance(&self, secs: u64) {
        self.clock.advance(Duration::from_secs(secs));
    }

    pub(crate) fn state(&self) -> chipset_store::StateDir {
        self.tmp.state.clone()
    }

    /// Returns the ids of the mail sent with `subject`, from the manifest.
    pub(crate) fn sent(&self, subject: &str) -> Vec<chipset_mail::MessageId> {
        self.mail
            .read_manifest()
            .unwrap()
            .events
            .into_iter()
            .filter_map(|e| match e {
                ManifestEvent::Sent { id, subject: s, .. } if s == subject => Some(id),
                _ => None,
            })
            .collect()
    }

    /// Returns the loop file `loop/{rel}` as JSON.
    pub(crate) fn loop_json(&self, rel: &str) -> serde_json::Value {
        let path = self.tmp.state.root().join("loop").join(rel);
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }

    /// Returns the messages in `agent`'s inbox.
    pub(crate) fn inbox(&self, agent: &AgentId) -> Vec<chipset_mail::Message> {
        self.mail.inbox(agent, &InboxFilter::default()).unwrap()
    }
}

/// Returns the body of a `health_escalation` about `a`, as a witness
/// writes it (every time the assignment's).
pub(crate) fn escalation_body(a: &chipset_hook::Assignment) -> String {
    let t = a.work.assigned_at;
    let body = serde_json::json!({
        "type": "health_escalation",
        "assignment": a,
        "last_activity": t,
        "health_check_at": t,
        "stall_warning_at": t,
        "escalated_at": t,
    });
    String::from_utf8(chipset_store::StateDir::to_canonical_json(&body).unwrap()).unwrap()
}

/// Returns a mail body or bus payload as JSON.
pub(crate) fn body_json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap()
}

pub(crate) fn setup() -> Setup {
    setup_on(TempState::manual())
}

/// As [`setup`], on a store that skips its syncs: for the property tests.
pub(crate) fn setup_no_sync() -> Setup {
    setup_on(TempState::manual_no_sync())
}

fn setup_on((tmp, clock): (TempState, ManualClock)) -> Setup {
    let state = tmp.state.clone();
    Setup {
        hooks: Hooks::new(state.clone()),
        nudges: Nudges::new(state.clone()),
        mail: Mail::new(state),
        tmp,
        clock,
    }
}

pub(crate) fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}
