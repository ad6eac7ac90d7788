//! The orchestration loops built from chipset's channels: the witness
//! (heartbeat and escalation), the agent work loop (GUPP), the dispatcher,
//! and critic/executor rounds.
//!
//! Each loop is a typed state machine driven by explicit calls: a `tick`
//! (or a step of a round) reads the time once from the state's clock, takes
//! the steps that are due, and returns what it did as typed values. Each
//! decides through a pure rule that reads no file and no clock (the
//! witness's judgement of an incident, the dispatcher's ledger transition,
//! the rounds' routing), tested exhaustively inside the crate. Nothing sleeps
//! inside a library call except the `run_until` helpers, which are
//! blocking by name; calls do wait, with no timeout, for the advisory lock
//! of a file another process is changing. On a
//! [`ManualClock`](chipset_store::ManualClock), hours of loop time pass in
//! milliseconds.
//!
//! The loops work through [`Channels`]: `Dispatcher::new(state, …)` uses
//! every channel's default config, and `Dispatcher::new(channels, …)` (and
//! `Witness::new`, `Worker::new`, `Rounds::new`) takes the handles you configured (a [`MailConfig`](chipset_mail::MailConfig), a
//! [`BusConfig`](chipset_bus::BusConfig)).
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use chipset_loop::{DispatchAction, Dispatcher, DispatcherConfig, WorkOutcome, Worker, WorkerConfig};
//! use chipset_store::{AgentId, ManualClock, StateDir, StateOptions, Timestamp};
//! use chipset_hook::BeadId;
//!
//! let tmp = tempfile::tempdir()?;
//! let clock = ManualClock::new("2026-03-05T10:30:00Z".parse::<Timestamp>()?);
//! let options = StateOptions { clock: Arc::new(clock.clone()), ..StateOptions::default() };
//! let state = StateDir::open_with(tmp.path(), options)?;
//! let (mayor, alpha) = (AgentId::new("mayor")?, AgentId::new("polecat-alpha")?);
//! let dispatcher = Dispatcher::new(state.clone(), mayor.clone(), [alpha.clone()], DispatcherConfig::default());
//! let worker = Worker::new(state.clone(), alpha, mayor, WorkerConfig::default());
//!
//! // The dispatcher puts the work on an idle agent's hook and mails it the assignment.
//! let bead = BeadId::new("gt-abc12")?;
//! dispatcher.submit(bead.clone(), "Add README section")?;
//! assert!(matches!(dispatcher.tick()?[0], DispatchAction::Assigned { .. }));
//!
//! // The agent picks it up (GUPP), works with checkpoints, completes and reports.
//! let outcome = worker.run_once(|work| {
//!     clock.advance(Duration::from_secs(30));
//!     work.checkpoint()?; // heartbeat, nudges, abort
//!     Ok("README section added".to_owned())
//! })?;
//! assert!(matches!(outcome, WorkOutcome::Completed { .. }));
//!
//! // The dispatcher verifies the completion on the hook and clears it: done, once.
//! assert!(matches!(dispatcher.tick()?[0], DispatchAction::Completed { .. }));
//! assert!(dispatcher.entry(&bead)?.unwrap().is_done());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Witness
//!
//! [`Witness::tick`] looks at every pending and active hook. For each
//! assignment it keeps one incident record, keyed by agent, bead and hook
//! generation ([`IncidentKey`]):
//!
//! ```text
//! quiet > stall_threshold ──health_check──▶ checking ──interval──stall_warning──▶ warned
//!                                              │                                    │
//!                            answered or touched after the health check      interval, no sign
//!                                              ▼                                    ▼
//!                                          resolved                escalating ──mail──▶ escalated (final)
//! ```
//!
//! A sign of life is an answer to the witness (`nudge_response`, read
//! through [`Nudges::response_from`](chipset_nudge::Nudges::response_from))
//! or a touch of the hook at or after the health check. The escalation is
//! one `health-escalation` mail to the dispatcher (kind notify, priority
//! urgent, a JSON body tagged `health_escalation`) plus a critical bus event
//! so a waiting dispatcher wakes at once. No incident opens within the
//! grace period after an assignment, and a restarted witness takes no step
//! within the grace period of its start (agents restarting with it get time
//! to touch their hooks). The nudge interval is
//! [`WitnessConfig::nudge_interval`] (default 60 s), or an agent's own in
//! [`WitnessConfig::nudge_intervals`]. Each tick's
//! step is decided by a pure rule, then carried out in order: the nudge or
//! escalation to send, the record to write, the action to report.
//!
//! # Agent work loop
//!
//! [`Worker::run_once`] is GUPP: [`Hooks::pickup`](chipset_hook::Hooks::pickup)
//! activates pending work (or resumes active work after a restart), then the
//! caller's closure runs with a [`WorkHandle`]. Its
//! [`checkpoint`](WorkHandle::checkpoint) answers nudges that require it,
//! touches the hook (fenced; at most every [`WorkerConfig::touch_every`]),
//! hands `priority_change` and `sync_request` nudges to the caller
//! ([`take_signals`](WorkHandle::take_signals), each the store's
//! [`ReadOutcome`](chipset_store::ReadOutcome) of the agent's nudge file,
//! so an unreadable one reaches the work too),
//! and returns [`Stop::Aborted`] after an `abort` sent after the assignment
//! (an older abort is stale and only marked processed) or
//! [`Stop::TakenAway`] when the hook no longer holds the work. When the
//! closure returns `Ok(summary)`, the hook is completed and a
//! `completion-report` mail (notify) goes to the dispatcher, with a
//! high-priority `work-completed` bus event. If the work was taken away,
//! completion fails with [`Error::Stale`] and nothing is reported. The
//! report is kept in `loop/worker/reports/{agent}.json` from before the
//! completion until it is sent, under an id fixed by the assignment: a
//! failure or a crash after the completion loses no summary, and the
//! next `run_once` sends the report once.
//!
//! # Dispatcher
//!
//! [`Dispatcher::submit`] puts a work item in the ledger; [`Dispatcher::tick`]
//! reads completion reports and escalations (mail inbox and bus queue, both
//! idempotent), finishes interrupted changes, verifies completed hooks even
//! without a report, and assigns queued work to idle agents of its pool. Per
//! bead ([`BeadState`]):
//!
//! ```text
//! queued ──▶ assigning ──hook assign + work-assignment mail──▶ assigned ──completed on the hook──▶ done (final)
//!   ▲                                                            │
//!   └──────── reassigning ◀── health escalation for this exact assignment
//!            (hook reassign: fenced; the agent is suspended and sent an abort)
//! ```
//!
//! Intents (`assigning`, `reassigning`, `done` before the hook is cleared)
//! are written before the hook changes, so a dispatcher killed between two
//! steps is finished by the next tick of any dispatcher. A bead is done once:
//! only the current assignment's completion, verified on its hook, counts;
//! reports about another assignment are [`DispatchAction::Ignored`].
//! Suspended agents get no new work until [`Dispatcher::reinstate`].
//! The ledger's rule is a pure function of (entry, event, time): it returns
//! the entry to write, the effects around the write and the next command
//! (read a hook, assign, mail, reassign, clear), whose result comes back as
//! the next event.
//!
//! # Critic/executor rounds
//!
//! [`Rounds::open`] starts or resumes a task's [`Round`]: executor →
//! critic → routing → commit, another round, or escalation
//! ([`Round::route`]).
//! Commit needs a passing verification, no findings and an empty
//! [`Mail::pending_replies`](chipset_mail::Mail::pending_replies); an error
//! reading the gate blocks the commit ([`Blocker::GateUnreadable`]). Replies
//! pending in two consecutive rounds without shrinking escalate as a
//! stalemate; so does reaching [`RoundsConfig::max_rounds`].
//! [`Round::committed`] sweeps the task's mail into the by-task archive.
//!
//! # Attention: what needs an agent, and waiting for it
//!
//! [`Attention::brief`] reads every channel from one agent's point of view
//! and returns a [`Brief`]: at most one [`BriefEntry`] per [`WorkKind`], each
//! with a count and the most urgent item. What counts:
//!
//! | kind | needs the agent when | most urgent |
//! |---|---|---|
//! | hook | the hook is `pending` (work to pick up; `active` is work in progress) | the work item |
//! | nudge | `latest.json` holds a nudge not processed yet | that nudge |
//! | mail | the inbox holds messages (unread = not archived) | urgent first, then oldest |
//! | bus | the queue holds unacknowledged events | critical first, then oldest |
//! | reminder | an open reminder (or a snoozed one now due) has `metadata.agent` = the agent | `nudge` severity before `info`, then oldest |
//! | lease | a live lease of the agent's is in the last fifth of its term (at most five minutes) | soonest to expire |
//! | pool | the hook is free (missing, empty, or a completed pool item) and ready pool items are for no role or one of the agent's roles in the directory | the three most urgent, then oldest |
//!
//! A file that is there but unreadable is an item too ([`BriefItem::unreadable`]),
//! never "nothing". A reminder that names no agent wakes no one (reminders
//! are scoped to a tenant, not an agent): see [`Attention::REMINDER_AGENT_FIELD`].
//!
//! [`Attention::wait`] returns as soon as the brief is not empty (at once
//! if it is not empty already), or an empty brief on timeout. It uses a
//! [`Watcher`](chipset_store::Watcher) on the agent's hook file, nudge
//! directory, inbox, bus queue and the reminder indexes: inotify wakes it
//! within milliseconds, and a rescan every
//! [`WatchConfig::rescan_interval`](chipset_store::WatchConfig::rescan_interval)
//! (1 s by default) catches what a lost notification would miss. What
//! changes with no file changing (a lease drifting into its warning
//! window, a deferred pool item becoming ready) wakes it at that instant.
//! [`Attention::watch`] gives a [`BriefWatch`] whose
//! [`next`](BriefWatch::next) returns each new brief as it changes. With
//! the `tokio` cargo feature (off by default) each has an async form that
//! watches on a thread of its own, so it blocks no runtime:
//! `Attention::wait_async`, and `Attention::subscribe` (the brief now and
//! a `BriefStream` of each change) or `Attention::stream`.
//!
//! # File layout
//!
//! ```text
//! loop/witness/incidents/{agent}.json   the agent's latest incident (Incident)
//! loop/witness/log.jsonl                every WitnessAction, appended per tick
//! loop/dispatcher/beads/{bead}.json     the ledger: one LedgerEntry per work item
//! loop/dispatcher/agents.json           suspended agents (AgentBook)
//! loop/dispatcher/log.jsonl             every DispatchAction, appended per tick
//! loop/rounds/{task}.json               a task's round checkpoint
//! loop/worker/reports/{agent}.json      a completion report not sent yet
//! ```
//!
//! Files are canonical JSON (sorted keys); the record
//! types are the contract, pinned by snapshot tests. The loops' mail and bus
//! events carry a JSON message (tagged by `type`: `work_assignment`,
//! `completion_report`, `health_escalation`) in the mail body or event
//! payload; mail subjects and bus event kinds are the [`Topic`]s, each mail
//! on the bead's task (`phase` = bead id).
//!
//! # Durability and concurrency
//!
//! Every file change goes through `chipset-store` (durable replace under an
//! advisory lock per file; logs appended with one synced write per tick).
//! A loop step that spans several files holds the lock of the loop file it
//! is about (the incident, the ledger entry, the checkpoint) for the whole
//! step, so two witnesses or two dispatchers never both take it, and it
//! writes its intent durably before changing another channel, so a step
//! cut short by a crash is finished, not repeated, on restart. The
//! witness's escalation intent holds the id of its mail, sent with
//! [`NewMessage::with_id`](chipset_mail::NewMessage::with_id): a restarted witness
//! sends it again under that id, and the mail channel accepts the id once,
//! so exactly one escalation exists per incident; its wake-up goes on the
//! bus under the same id, so a retry never wakes the dispatcher twice. The
//! dispatcher's `assigning` intent holds the id of its `work-assignment`
//! mail the same way, and the agent's `work-assigned` wake-up takes it too;
//! both are sent before the ledger records the assignment, so a tick cut
//! short anywhere is finished by the next one, each sent once. The
//! witness's health checks and stall warnings, the dispatcher's aborts
//! (and a `work-assignment` mail its ledger entry does not name), a
//! worker's completion report and a round's escalation wake-up take ids
//! fixed by what they are about (the assignment and the time it went
//! quiet, was checked or was made; the task and the time it was routed):
//! sent again by a later tick or call, each names the one the agent
//! already got, which its channel keeps.
//!
//! The retry of a failed tick is the next tick. A tick (or a round's
//! `route` or `committed`) that fails after one of its steps changed
//! something returns [`Error::PartlyDone`], an unknown outcome
//! ([`Classify`](chipset_store::Classify)), never a plain
//! failure, and still appends the actions it finished to its log. The log
//! is the record of what was done, not what the next tick goes on from
//! (the ledger and the incidents are): the actions of a tick whose append
//! failed, or that a crash cut before it, are not in it, and the next
//! tick finishes their work without logging it again. [`Dispatcher::submit`] of the same bead and title again
//! returns the entry the ledger holds; a [`Round`] step called again on
//! the same handle returns what it did, writing nothing.
//!
//! [`LoopState`] gives cheap counts for a status screen and a doctor that
//! finds (and with [`DoctorMode::Fix`](chipset_store::DoctorMode::Fix)
//! quarantines, through the store's checked quarantine) corrupt loop files and
//! cuts torn log tails.
//!
//! # On a server
//!
//! [`Channels::with_backend`] puts the channels on a
//! [`Backend`](chipset_backend::Backend) (a PostgreSQL server, issue 30),
//! and the loops built on them keep their records there too: each file
//! above is a value under the key its path names (`loop/witness/incidents/{agent}.json`,
//! the logs `loop/witness/log.jsonl` and `loop/dispatcher/log.jsonl`),
//! byte for byte the canonical JSON a directory holds. A step's lock is the
//! key `{name}.lock` beside the record (a session lock on a server, released
//! when the client dies), its writes are a create or a compare-and-swap at
//! the version held, a tick's actions are one append, and every judgement's
//! time is the backend's clock, the server's. On a directory
//! ([`Channels::new`], or a backend that is a local directory) nothing of
//! this runs: the store's calls and files are what they were. A
//! [`LoopState`] of such channels counts the records on the server, and
//! its doctor checks them there (a fix moves a corrupt one into
//! `quarantine/` beside it).
//! [`Attention`] on such channels is on the server too. Still on the
//! local root on a server: the pool the witness returns a stalled
//! holder's item to.
//!
//! # Errors
//!
//! One enum, [`Error`]: channel errors keep their crate's type; a loop file
//! that is unreadable is [`Error::Corrupt`]; taken-away work is
//! [`Error::Stale`] (of kind [`ErrorKind::Stale`](chipset_store::ErrorKind::Stale), as is the hook's own refusal of a stale assignment).

#![forbid(unsafe_code)]

mod attention;
mod channels;
mod dispatcher;
mod error;
mod files;
mod format;
mod rounds;
mod scan;
#[cfg(feature = "tokio")]
mod stream;
mod witness;
mod worker;

pub use attention::{
    Attention, AttentionConfig, Brief, BriefEntry, BriefItem, BriefWatch, WorkKind,
};
pub use channels::Channels;
pub use dispatcher::{DispatchAction, Dispatcher, DispatcherConfig, IgnoreReason};
pub use error::{Error, Result};
pub use format::{
    Attempt, AttemptOutcome, BeadState, Blocker, CriticFinding, CriticReport, EscalationReason,
    Evidence, IncidentKey, LedgerEntry, Phase, Routing, Topic,
};
pub use rounds::{Round, Rounds, RoundsConfig};
pub use scan::{LoopCounts, LoopState};
#[cfg(feature = "tokio")]
pub use stream::BriefStream;
pub use witness::{Witness, WitnessAction, WitnessConfig};
pub use worker::{Stop, WorkHandle, WorkOutcome, Worker, WorkerConfig};

/// The loops' directory under the state root, `loop/`.
pub(crate) const LOOP_CHANNEL: chipset_store::Channel = chipset_store::Channel::new("loop");

#[cfg(test)]
mod tests {
    /// The directory name is where earlier versions left the loops' files.
    #[test]
    fn channel_directory_keeps_its_name() {
        assert_eq!(super::LOOP_CHANNEL.as_str(), "loop");
    }
}
