//! Integration tests for chipset-loop.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "tests plant, corrupt and inspect files as another program would, outside the store's API"
)]

#[macro_use]
mod place;

mod attention;
mod attention_seam;
mod channels;
mod dispatcher;
mod doctor;
mod doctor_seam;
mod formats;
mod procs;
mod rounds;
mod seam;
mod seam_rounds;
mod sim;
mod witness;
mod worker;

use std::sync::Arc;
use std::time::Duration;

use chipset_loop::{
    Brief, BriefEntry, Channels, Rounds, RoundsConfig, Witness, WitnessConfig, WorkKind,
};

use chipset_hook::Hooks;
use chipset_mail::{Mail, ManifestEvent};
use chipset_nudge::Nudges;
use chipset_store::{AgentId, ManualClock};
use chipset_testkit::TempState;

pub(crate) use chipset_testkit::{agent, bead};

/// Short ways to look into a brief in assertions.
pub(crate) trait BriefExt {
    /// The entry of `kind`, if that kind needs the agent.
    fn entry(&self, kind: WorkKind) -> Option<&BriefEntry>;
}

impl BriefExt for Brief {
    fn entry(&self, kind: WorkKind) -> Option<&BriefEntry> {
        self.entries.iter().find(|e| e.kind == kind)
    }
}

/// A state root on a manual clock at [`chipset_testkit::T0`], with handles on the channels.
pub(crate) struct Setup {
    /// On PostgreSQL: the test's schema, dropped with the setup.
    pub(crate) pg: Option<place::Schema>,
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

    /// Returns the channels the loops work through: the state root's, or
    /// the server's.
    pub(crate) fn channels(&self) -> Channels {
        match &self.pg {
            None => Channels::new(self.state()),
            Some(pg) => Channels::with_backend(self.state(), Arc::clone(&pg.backend)),
        }
    }

    /// Returns a witness named `me` escalating to `mayor`, through the
    /// setup's channels.
    pub(crate) fn witness(&self, me: &str, config: WitnessConfig) -> Witness {
        Witness::new(self.channels(), agent(me), agent("mayor"), config)
    }

    /// Writes `bytes` as `agent`'s hook, past the hook's API (a corrupt or
    /// foreign hook).
    pub(crate) fn put_hook_bytes(&self, who: &AgentId, bytes: &[u8]) {
        match &self.pg {
            None => self
                .tmp
                .state
                .write_bytes(&self.hooks.path(who), bytes)
                .unwrap(),
            Some(pg) => {
                let key = chipset_backend::Dir::new("hooks")
                    .unwrap()
                    .key(&format!("{who}.json"))
                    .unwrap();
                let _ = pg.backend.put(&key, bytes).unwrap();
            }
        }
    }

    /// Returns the rounds with `config`, through the setup's channels.
    pub(crate) fn rounds(&self, config: RoundsConfig) -> Rounds {
        Rounds::new(self.channels(), config)
    }

    /// Returns the loops' persisted state, on the setup's place.
    pub(crate) fn loop_state(&self) -> chipset_loop::LoopState {
        chipset_loop::LoopState::new(self.channels())
    }

    /// Returns the bus the loops use.
    pub(crate) fn bus(&self) -> chipset_bus::Bus {
        match &self.pg {
            None => chipset_bus::Bus::new(self.state()),
            Some(pg) => chipset_bus::Bus::with_backend(
                self.state(),
                chipset_bus::BusConfig::default(),
                Arc::clone(&pg.backend),
            ),
        }
    }

    /// Returns the reminders on the setup's place, with the preset kinds.
    pub(crate) fn reminders(&self) -> chipset_nudge::Reminders {
        let kinds = chipset_nudge::KindRegistry::preset();
        match &self.pg {
            None => chipset_nudge::Reminders::new(self.state(), kinds),
            Some(pg) => chipset_nudge::Reminders::with_backend(
                self.state(),
                kinds,
                chipset_nudge::ReminderConfig::default(),
                Arc::clone(&pg.backend),
            ),
        }
    }

    /// Returns attention over the setup's channels: on a directory from
    /// the state root, on a server through its channels.
    pub(crate) fn attention(&self) -> chipset_loop::Attention {
        if self.pg.is_none() {
            return chipset_loop::Attention::from_state(&self.tmp.state);
        }
        chipset_loop::Attention::new(self.channels(), self.reminders())
    }

    /// Returns the backend of another client on the same place (another
    /// connection on a server, on the server's clock), for the writers a
    /// waiter must hear from; `None` on a directory, where another handle
    /// on the root is one.
    pub(crate) fn other_client(&self) -> Option<Arc<dyn chipset_backend::Backend>> {
        self.pg
            .as_ref()
            .map(|pg| place::server(pg.at.url(), pg.at.name()))
    }

    /// Returns the loop record `loop/{rel}` as its bytes, `None` when
    /// there is none.
    pub(crate) fn loop_bytes(&self, rel: &str) -> Option<Vec<u8>> {
        match &self.pg {
            None => std::fs::read(self.tmp.state.root().join("loop").join(rel)).ok(),
            Some(pg) => pg.backend.read(&loop_key(rel)).unwrap().map(|v| v.value),
        }
    }

    /// Writes the loop record `loop/{rel}` (a crash state, a corrupt value).
    pub(crate) fn put_loop_bytes(&self, rel: &str, bytes: &[u8]) {
        match &self.pg {
            None => {
                let path = self.tmp.at(&format!("loop/{rel}"));
                self.tmp.state.write_bytes(&path, bytes).unwrap();
            }
            Some(pg) => {
                let _ = pg.backend.put(&loop_key(rel), bytes).unwrap();
            }
        }
    }

    /// Returns the names of the records in the loop folder `loop/{rel}`.
    pub(crate) fn loop_names(&self, rel: &str) -> Vec<String> {
        match &self.pg {
            None => {
                let path = self.tmp.at(&format!("loop/{rel}"));
                // A folder no record was written to yet lists nothing.
                self.tmp.state.list(&path).unwrap_or_default()
            }
            Some(pg) => {
                let mut dir = chipset_backend::Dir::new("loop").unwrap();
                for part in rel.split('/') {
                    dir = dir.join(part).unwrap();
                }
                pg.backend.list(&dir).unwrap()
            }
        }
    }

    /// Returns the records of the loop log `loop/{rel}`.
    pub(crate) fn loop_log<T: serde::de::DeserializeOwned>(&self, rel: &str) -> Vec<T> {
        match &self.pg {
            None => {
                let path = self.tmp.at(&format!("loop/{rel}"));
                self.tmp
                    .state
                    .log(&path)
                    .unwrap()
                    .read_from::<T>(0)
                    .unwrap()
                    .records
            }
            Some(pg) => {
                let read = pg
                    .backend
                    .read_log(&loop_key(rel), chipset_backend::LogPos::START)
                    .unwrap();
                read.records
                    .iter()
                    .map(|r| serde_json::from_slice(r).unwrap())
                    .collect()
            }
        }
    }

    /// Returns the ids of the mail sent with `subject`, from the manifest.
    pub(crate) fn sent(&self, subject: &str) -> Vec<chipset_mail::MessageId> {
        self.mail
            .read_manifest()
            .unwrap()
            .into_iter()
            .filter_map(|e| match e {
                ManifestEvent::Sent { id, subject: s, .. } if s == subject => Some(id),
                _ => None,
            })
            .collect()
    }

    /// Returns the loop file `loop/{rel}` as JSON.
    pub(crate) fn loop_json(&self, rel: &str) -> serde_json::Value {
        serde_json::from_slice(&self.loop_bytes(rel).expect("the loop record is there")).unwrap()
    }

    /// Returns the messages in `agent`'s inbox.
    pub(crate) fn inbox(&self, agent: &AgentId) -> Vec<chipset_mail::Message> {
        self.mail.inbox(agent).unwrap()
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
        pg: None,
        tmp,
        clock,
    }
}

/// As [`setup`], with every channel and the loops' records on a schema of
/// the test's own on the server `CHIPSET_TEST_PG` names (the manual clock
/// in front of the server's); `None` when the variable is not set.
pub(crate) fn setup_pg(test: &str) -> Option<Setup> {
    let (tmp, clock) = TempState::manual();
    let pg = place::Schema::open(test, Some(clock.clone()))?;
    let state = tmp.state.clone();
    let b = Arc::clone(&pg.backend);
    Some(Setup {
        hooks: Hooks::with_backend(state.clone(), Arc::clone(&b)),
        nudges: Nudges::with_backend(state.clone(), Arc::clone(&b)),
        mail: Mail::with_backend(state, chipset_mail::MailConfig::default(), b),
        pg: Some(pg),
        tmp,
        clock,
    })
}

/// The key of the loop record `loop/{rel}` on a server.
fn loop_key(rel: &str) -> chipset_backend::Key {
    let mut parts: Vec<&str> = rel.split('/').collect();
    let name = parts.pop().unwrap();
    let mut dir = chipset_backend::Dir::new("loop").unwrap();
    for part in parts {
        dir = dir.join(part).unwrap();
    }
    dir.key(name).unwrap()
}

pub(crate) fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}
