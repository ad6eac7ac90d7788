//! chipset: crash-safe coordination for AI agents (or any processes) through
//! a shared directory: work hooks, urgent nudges, threaded mail, prioritised
//! events and reminders, as files on disk. No daemon, no socket, no database.
//!
//! This facade re-exports each crate as a module: [`store`], [`hook`],
//! [`nudge`], [`mail`], [`bus`] and [`r#loop`](chipset_loop) (`loop` is a keyword). Each
//! module's docs are the manual for its channel.
//!
//! ```
//! use std::time::Duration;
//! use chipset::bus::{Bus, NewEvent, Priority};
//! use chipset::hook::{Hooks, Pickup};
//! use chipset::mail::{Draft, Mail};
//! use chipset::nudge::{NewNudge, NudgeType, Nudges, Received};
//! use chipset::store::{AgentId, ReadOutcome, StateDir, TaskId};
//! use chipset::hook::BeadId;
//!
//! let tmp = tempfile::tempdir()?;
//! let state = StateDir::open(tmp.path().join("state"))?;
//! let (mayor, witness) = (AgentId::new("mayor")?, AgentId::new("witness")?);
//! let polecat = AgentId::new("polecat-alpha")?;
//!
//! // The dispatcher assigns work; the agent picks it up (GUPP) in one locked step.
//! let hooks = Hooks::new(state.clone());
//! hooks.assign(&polecat, BeadId::new("gt-abc12")?, "Add README section", Some(&mayor))?;
//! let Pickup::Started(work) = hooks.pickup(&polecat)? else { panic!("work was pending") };
//!
//! // The witness asks whether the agent is alive; the agent answers.
//! let nudges = Nudges::new(state.clone());
//! nudges.send(&polecat, NewNudge::new(witness.clone(), NudgeType::HealthCheck, "working?").requiring_response())?;
//! if let ReadOutcome::Value(Received::New(check)) = nudges.receive(&polecat)? {
//!     nudges.respond(&polecat, &check, "yes, on gt-abc12")?;
//!     nudges.mark_processed(&polecat, &check)?;
//! }
//! assert_eq!(nudges.responses_since(&witness, state.now().sub(Duration::from_secs(60)))?.answered.len(), 1);
//!
//! // The agent finishes (fenced on its assignment), reports by mail and wakes the mayor.
//! hooks.complete(&work)?;
//! let mail = Mail::new(state.clone());
//! mail.send(&Draft::notify(polecat.clone(), mayor.clone(), TaskId::new("gt-abc12")?, "completion-report", "done"))?;
//! let bus = Bus::new(state.clone());
//! bus.publish(&mayor, &NewEvent::new("polecat-alpha", "work-completed").priority(Priority::High))?;
//! assert_eq!(bus.pending(&mayor)?.len(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Every public name is unique across these modules, so any of them can be
//! glob-imported together (`use chipset::{mail::*, nudge::*, bus::*}`) and
//! read without renames. The one deliberate exception is each crate's
//! `Error` and `Result` (`chipset_mail`'s error is [`mail::MailError`]):
//! like `std::io::Result` and `std::fmt::Result`, they are named through
//! their module (`bus::Error`, `hook::Result<()>`), which says which
//! channel failed.
//!
//! The guarantees (what is durable when, what a crash can and cannot leave
//! behind) are stated in [`store`]'s crate docs; the loops that tie the
//! channels together are in [`r#loop`](chipset_loop).

#![forbid(unsafe_code)]

pub use chipset_bus as bus;
pub use chipset_hook as hook;
pub use chipset_loop as r#loop;
pub use chipset_mail as mail;
pub use chipset_nudge as nudge;
pub use chipset_store as store;

/// Every channel's directory under the state root, each constant from the
/// crate that owns it: the store knows channels only as opaque names
/// ([`store::Channel`]), so a new channel is added here, not in the store.
pub const CHANNELS: [store::Channel; 6] = [
    hook::HOOK_CHANNEL,
    nudge::NUDGE_CHANNEL,
    mail::MAIL_CHANNEL,
    bus::BUS_CHANNEL,
    nudge::REMINDERS_CHANNEL,
    r#loop::LOOP_CHANNEL,
];
