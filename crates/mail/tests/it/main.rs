//! Integration tests for chipset-mail, one module per area.

mod doctor;
mod foreign;
mod formats;
mod gate;
mod gate_cache;
mod model;
mod ops;
mod peers;
mod procs;
mod seam;
mod seam_syncs;

use std::sync::Arc;

use chipset_mail::{Mail, MailConfig};
use chipset_store::{AgentId, ManualClock, MessageId, StateOptions, TaskId, Timestamp};
use chipset_testkit::TempState;

/// Returns what a doctor report found, as (code, subject, line): what the
/// mail doctor's findings assert on, with or without what a fix did.
pub(crate) fn seen(report: &chipset_store::Report) -> Vec<(&'static str, Option<String>, String)> {
    report
        .findings
        .iter()
        .map(|f| (f.code, f.subject.clone(), f.message.clone()))
        .collect()
}

/// 2026-03-05T10:35:00.123Z
pub(crate) const T0: i64 = 1_772_706_900_123;

pub(crate) fn agent(s: &str) -> AgentId {
    AgentId::new(s).unwrap()
}

pub(crate) fn task(s: &str) -> TaskId {
    TaskId::new(s).unwrap()
}

pub(crate) fn mid(s: &str) -> MessageId {
    MessageId::new(s).unwrap()
}

/// A fresh state root on a manual clock, and its mail channel.
pub(crate) struct Fixture {
    #[allow(
        dead_code,
        reason = "owns the temporary directory for the test's lifetime"
    )]
    pub(crate) tmp: TempState,
    pub(crate) clock: ManualClock,
    pub(crate) mail: Mail,
}

pub(crate) fn fixture() -> Fixture {
    fixture_with(MailConfig::default())
}

pub(crate) fn fixture_with(config: MailConfig) -> Fixture {
    let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
    let tmp = TempState::with_options(StateOptions {
        clock: Arc::new(clock.clone()),
        ..StateOptions::default()
    });
    let mail = Mail::with_config(tmp.state.clone(), config);
    Fixture { tmp, clock, mail }
}
