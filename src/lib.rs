//! chipset: crash-safe coordination for AI agents (or any processes) through
//! a shared directory: work hooks, urgent nudges, threaded mail, prioritised
//! events and reminders, as files on disk. No daemon, no socket, no database.
//!
//! A program opens the state root once and keeps the [`Chipset`] handle: it
//! is cheap to clone, `Send + Sync`, and gives every channel.
//!
//! ```
//! use std::time::Duration;
//! use chipset::Chipset;
//! use chipset::bus::NewEvent;
//! use chipset::hook::Pickup;
//! use chipset::mail::NewMessage;
//!
//! let tmp = tempfile::tempdir()?;
//! let chipset = Chipset::open(tmp.path().join("state"))?;
//! let (mayor, polecat) = ("mayor".parse()?, "polecat-alpha".parse()?);
//! let task: chipset::store::TaskId = "gt-abc12".parse()?;
//!
//! // The mayor assigns work; the agent picks it up in one locked step.
//! chipset.hooks().assign(&polecat, "gt-abc12".parse()?, "Add README section", Some(&mayor))?;
//! let Pickup::Started(work) = chipset.hooks().pickup(&polecat)? else { panic!("work was pending") };
//!
//! // The agent asks; its task may not commit until the mayor answers.
//! let ask = chipset.mail().send(&NewMessage::request(polecat.clone(), mayor.clone(), task.clone(), "which-section", "Usage or Install?"))?;
//! assert_eq!(chipset.mail().pending_replies(&task)?.len(), 1);
//! chipset.mail().send(&NewMessage::response(mayor.clone(), polecat.clone(), ask.id.clone(), "which-section", "Usage"))?;
//! assert!(chipset.mail().pending_replies(&task)?.is_empty()); // the gate clears
//!
//! // The agent tells the mayor, who wakes; then the agent completes.
//! let mut waiter = chipset.bus().waiter(&mayor)?;
//! let _ = chipset.bus().publish(&mayor, &NewEvent::new("polecat-alpha", "work-completed"))?;
//! assert!(!waiter.wait(Duration::from_secs(5))?.is_empty());
//! chipset.hooks().complete(&work)?;
//! assert_eq!(chipset.status()?.agents.len(), 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The handle
//!
//! [`Chipset::hooks`], [`nudges`](Chipset::nudges),
//! [`reminders`](Chipset::reminders), [`mail`](Chipset::mail),
//! [`bus`](Chipset::bus) and [`attention`](Chipset::attention) borrow each
//! channel's handle; the modules below are their manuals.
//! [`Chipset::directory`] is the agent directory ([`directory`]): profiles,
//! roles and when each agent was last seen.
//! [`Chipset::pool`] is the work pool ([`pool`]): items agents claim
//! themselves, each exactly once, onto their hook.
//! [`Chipset::leases`] are the path leases ([`lease`]): who may edit which
//! files, refused with [`lease::Error::Conflict`] when another agent holds
//! them.
//! [`Chipset::open_with`] takes the store's options for a directory (a
//! manual clock for a simulation), [`Chipset::with_config`] each
//! channel's settings ([`Config`]), and where mail is kept: [`Config::mail_folder`] shares a
//! nubos-pilot project's `.nubos-pilot/messages` with every part. Ids parse from
//! text with the same checks as their constructors
//! (`"polecat-alpha".parse::<AgentId>()?`, or `AgentId::try_from(s)`).
//!
//! [`Chipset::status`] is one line per agent across every channel (what
//! `chipset status` prints, and the MCP `status` tool returns for one
//! agent); it serializes to the command line's `--json` form.
//! [`Chipset::doctor`] runs every channel's doctor into one [`Checkup`].
//! [`Chipset::search`] finds words across mail, bus events, hook titles and
//! reminders ([`search`]: the index is a cache that every query first
//! catches up from the files, and that the doctor rebuilds).
//!
//! # Errors
//!
//! Each crate's `Error` says what failed and where, and every one of them,
//! the door's own [`Error`] included, answers one question through one
//! trait, [`Classify::kind`]: an [`ErrorKind`]. `Invalid` input is the
//! caller's to fix; `NotFound`, `Refused` and `Stale` (the work or lease
//! was taken away: read again) are answers; a `Corrupt` or `Unsupported`
//! file waits for the doctor or a newer program; `Io` may pass. Only
//! `OutcomeUnknown` may have made its change, and the same request, with
//! the same ids, settles it: every write is safe to retry.
//! An error carried as `Box<dyn Error>` or `anyhow::Error` is asked
//! through [`error_kind`], which finds the chipset error in its source
//! chain.
//!
//! A message says what failed and where; the reason underneath (the
//! system's "No space left on device", SQLite's) is its
//! [`source`](std::error::Error::source), so print the chain, as
//! anyhow's `{:#}` does and the `chipset` command line does:
//!
//! ```
//! use std::error::Error as _;
//!
//! let tmp = tempfile::tempdir()?;
//! let file = tmp.path().join("file");
//! std::fs::write(&file, "x")?;
//! let e = chipset::Chipset::open(file.join("state")).unwrap_err();
//! let mut line = e.to_string(); // "failed to create state root `…/file/state`"
//! let mut source = e.source();
//! while let Some(s) = source {
//!     line = format!("{line}: {s}");
//!     source = s.source();
//! }
//! assert!(line.ends_with("Not a directory (os error 20)"), "{line}");
//! assert_eq!(chipset::error_kind(&e), Some(chipset::ErrorKind::Io));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Waiting, sync and async
//!
//! Every wait blocks the calling thread: [`bus::Waiter::wait`],
//! [`Attention::wait`](chipset_loop::Attention::wait),
//! [`BriefWatch::next`](chipset_loop::BriefWatch::next), and the channels'
//! watches (`Hooks::watch`, `Nudges::watch`, `Pool::watch`,
//! `Mail::watch_inbox`, each a [`backend::Wait`]). With the
//! `tokio` cargo feature each has an async form that never blocks a runtime
//! thread (the watching runs on a thread of its own, so any executor
//! works, including a current-thread runtime): `Waiter::wait_async` (and
//! `Bus::waiter_async`), `Attention::wait_async`, `Attention::subscribe`
//! / `Attention::stream` for a `Stream` of briefs (`BriefStream`),
//! `Mail::wait_gate_async` (the wait for a task's commit gate,
//! `Mail::wait_gate`), and `backend::AsyncWait` around any watch. They are
//! in these docs when they are built with the feature
//! (`cargo doc -p chipset --features tokio`).
//!
//! # The crates
//!
//! This facade re-exports each crate as a module: the channels [`store`],
//! [`hook`], [`nudge`], [`mail`], [`bus`] and [`r#loop`](chipset_loop)
//! (`loop` is a keyword), and beside them [`lease`], [`directory`],
//! [`pool`], [`search`] and [`backend`] (the storage seam). Each stays
//! usable alone, for a program that wants only mail. Every public name is
//! unique across the six channel modules, so any of them can be
//! glob-imported together (`use chipset::{mail::*, nudge::*, bus::*}`) and
//! read without renames. The one deliberate exception is each crate's
//! `Error` and `Result`: like `std::io::Result` and `std::fmt::Result`, they are named through
//! their module (`bus::Error`, `hook::Result<()>`), which says which
//! channel failed.
//!
//! The guarantees (what is durable when, what a crash can and cannot leave
//! behind) are stated in [`store`]'s crate docs; the loops that tie the
//! channels together are in [`r#loop`](chipset_loop).

#![forbid(unsafe_code)]

mod doctor;
mod door;
mod error;
pub mod migrate;
mod root;
mod server;
mod status;

// Inlined: the facade's docs hold every module's pages under the paths a
// program writes (`chipset::hook::Hooks`), and its links work in a
// `cargo doc --no-deps -p chipset` that documents no other crate.
#[doc(inline)]
pub use chipset_backend as backend;
#[doc(inline)]
pub use chipset_bus as bus;
#[doc(inline)]
pub use chipset_directory as directory;
#[doc(inline)]
pub use chipset_hook as hook;
#[doc(inline)]
pub use chipset_lease as lease;
#[doc(inline)]
pub use chipset_loop as r#loop;
#[doc(inline)]
pub use chipset_mail as mail;
#[doc(inline)]
pub use chipset_nudge as nudge;
#[doc(inline)]
pub use chipset_pool as pool;
#[doc(inline)]
pub use chipset_search as search;
#[doc(inline)]
pub use chipset_store as store;

pub use chipset_store::{Classify, DoctorMode, ErrorKind};
pub use doctor::{Area, Checkup, STALE_TEMP_AGE};
pub use door::{Chipset, Config};
pub use error::{Error, Result, error_kind};
pub use root::{Root, ServerUrl};
pub use server::ServerOptions;
pub use status::{
    AgentLine, AgentReport, BusLine, HookLine, NudgeLine, PresenceLine, ProfileLine,
    ReminderCounts, Status,
};
