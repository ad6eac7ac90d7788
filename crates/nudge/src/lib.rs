//! The nudge channel: a latest-wins urgent signal per agent ([`Nudges`]), and
//! persistent reminders for open obligations ([`Reminders`]).
//!
//! ```
//! use chipset_nudge::{Delivery, NewNudge, Nudges, NudgeType, Received};
//! use chipset_store::{AgentId, ReadOutcome, StateDir};
//!
//! let tmp = tempfile::tempdir()?;
//! let state = StateDir::open(tmp.path())?;
//! let nudges = Nudges::new(state);
//! let (witness, polecat) = (AgentId::new("witness-d3e4f")?, AgentId::new("polecat-alpha")?);
//!
//! // The witness asks; the polecat polls, answers, and marks the nudge processed.
//! let draft = NewNudge::new(witness.clone(), NudgeType::HealthCheck, "Are you working?");
//! let sent = nudges.send(&polecat, &draft.requiring_response())?;
//! let sent_at = sent.nudge().timestamp;
//! let ReadOutcome::Value(Received::New(nudge)) = nudges.receive(&polecat)? else { panic!("expected a nudge") };
//! let answered = nudges.respond(&polecat, &nudge, "Working on gt-abc12")?;
//! assert!(matches!(answered, Delivery::Delivered { .. }), "no abort held it back");
//! nudges.mark_processed(&polecat, &nudge)?;
//! assert!(matches!(nudges.receive(&polecat)?, ReadOutcome::Value(Received::Seen(_))));
//!
//! // The witness sees exactly who answered.
//! let answer = nudges.response_from(&witness, &polecat, sent_at)?;
//! assert_eq!(answer.map(|a| a.message), Some("Working on gt-abc12".to_owned()));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Signals
//!
//! Each agent has one `latest.json`; a send replaces it (latest wins, as in
//! seed `000`). The seed's five fields keep their names and types (`from`,
//! `type`, `message`, `timestamp`, `requires_response`); the recipient is the
//! directory, never a field. A type this version does not know is kept as
//! [`NudgeType::Unknown`].
//!
//! Beyond the seed, each an extra field or file that seed programs ignore:
//!
//! - **Told apart by id.** Every nudge sent here carries `id`
//!   (`{unix-ms}-{uuid-v4}`). A nudge is processed when it is the one in the
//!   recipient's processed record (same id; for an id-less seed nudge, every
//!   field equal), never by comparing timestamps, so a second nudge within
//!   one timestamp is not skipped.
//! - **Persisted progress.** [`Nudges::receive`] says [`Received::New`] or
//!   [`Received::Seen`] inside the store's read outcome, which is
//!   [`ReadOutcome::Missing`](chipset_store::ReadOutcome::Missing) when no
//!   nudge was sent and [`ReadOutcome::Corrupt`](chipset_store::ReadOutcome::Corrupt)
//!   for a bad file (never "no nudge"); [`Nudges::mark_processed`] records the nudge
//!   durably in `processed.json`, so a restarted agent neither reprocesses it
//!   nor misses the next.
//! - **Abort precedence.** Urgency, highest first: `abort` >
//!   `stall_warning` > `health_check` = `priority_change` = `sync_request` =
//!   unknown types > `nudge_response`. Only the top
//!   level holds: an `abort` the recipient has not processed is replaced only
//!   by another `abort`; every other nudge is latest-wins. The check and the
//!   write happen under the recipient's lock, and [`Nudges::send`] reports
//!   what happened: [`Delivery::Delivered`], [`Delivery::Replaced`] (with the
//!   unprocessed nudge that was lost), [`Delivery::Held`] (with the pending
//!   abort, handing the unsent nudge back) or [`Delivery::RepairedCorrupt`].
//! - **No lost answers.** [`Nudges::respond`] writes the `nudge_response` to
//!   the sender's `latest.json` per the seed, and first to
//!   `responses/{responder}.json` beside it, one file per responder. So
//!   [`Nudges::responses_since`] tells exactly which agents answered since a
//!   given time, however many answered at once, and
//!   [`Nudges::response_from`] reads one responder's answer. When to
//!   escalate an unanswered nudge (the seed's nudge interval, 60 s) is
//!   the sender's rule: `chipset-loop`'s witness keeps one per agent.
//!
//! # Reminders
//!
//! The seed `003` `nudges` table as files: a row is a [`Reminder`] with every
//! column, written with `null` for unset ones. Kinds are a closed set the
//! application registers ([`KindRegistry`], with the seed's six kinds as
//! [`KindRegistry::preset`]). At most one reminder is open (or snoozed) per
//! key: (kind, source type, source id).
//!
//! ```text
//!  open ──auto_resolve / resolve──▶ history (auto_cleared | completed | ignored)
//!   │
//!   └──snooze──▶ snoozed ──(due, on read)──▶ history, plus a new open row
//!                                            with metadata.reopened_from
//! ```
//!
//! Nothing is ever deleted: a resolved reminder stays in the history, and a
//! reopened one is a new row naming its predecessor. Resolving (by verb or
//! by hand) a snoozed reminder reopens and resolves it at once as a new row,
//! so an obligation that is gone is not brought back when the snooze ends.
//! Opening a key that is snoozed and not due is a no-op ([`Opened::Snoozed`]).
//!
//! # File layout
//!
//! ```text
//! nudge/{agent}/latest.json                 the current nudge (seed 000 fields + id, in_reply_to)
//! nudge/{agent}/processed.json              the last nudge the agent processed
//! nudge/{agent}/responses/{responder}.json  each responder's latest answer to {agent}
//! reminders/open/{kind}/{source_type}/{escaped source_id}.json     open reminders (the index)
//! reminders/snoozed/{kind}/{source_type}/{escaped source_id}.json  snoozed reminders
//! reminders/history/{id}.json               resolved reminders, forever
//! reminders/locks/.stripe-NN.lock           64 lock files the keys hash onto
//! ```
//!
//! A source id is escaped into a file name by keeping ASCII letters, digits,
//! `-`, `_`, non-ASCII characters, and `.` (except first), and writing every
//! other byte as `%XX`. Listing the open reminders reads only `open/` and
//! `snoozed/`, so it costs in proportion to the open set, not the history.
//! Every path above is a [`StatePath`](chipset_store::StatePath)
//! ([`Nudges::agent_dir`], [`Reminders::index_dirs`] for a watcher): built from the
//! channel's directory and checked segments, so none can leave the root; a
//! listed name that is not one safe segment was not written by chipset and
//! is skipped (the doctor reports it as a stray).
//!
//! # Concurrency and durability
//!
//! Every change goes through `chipset-store`: durable replace with unique
//! temp names, no-clobber create and move, each synced. A send is a locked
//! read-check-write of `latest.json`. A reminder change takes its key's lock
//! stripe; opening is a no-clobber create under it, so of many processes
//! opening one key exactly one creates it. Resolving is two durable steps
//! (rewrite the index file as resolved, then move it to `history/` or
//! `snoozed/`); a crash between them is finished by the next operation on
//! the key, by [`Reminders::list`], or by the doctor.
//!
//! # Commit points and retries
//!
//! | operation | commit point | a retry after it applied |
//! |---|---|---|
//! | [`Nudges::send`] | the rename of the new `latest.json` | with a chosen id: the first delivery, nothing written ([`Error::IdTaken`] for other content) |
//! | [`Nudges::respond`] | the rename of `responses/{responder}.json` | the recorded response reused, delivered only if not there yet |
//! | [`Nudges::mark_processed`] | the rename of `processed.json` | a no-op |
//! | [`Reminders::open`] | the no-clobber create of the open index file | [`Opened::Existing`] |
//! | [`Reminders::resolve`], [`Reminders::snooze`] | the replace of the index file by the resolved record | the same record, when resolved the same way (resolution, note, snooze duration) |
//!
//! A failure before the commit point leaves nothing a reader sees (the
//! first write under a directory may leave it holding only its dot-named
//! lock file). A failed sync after it is the store's
//! [`OutcomeUnknown`](chipset_store::Error::OutcomeUnknown); a respond whose
//! delivery failed after its record is [`Error::ResponseNotDelivered`];
//! [`Classify::is_outcome_unknown`](chipset_store::Classify::is_outcome_unknown)
//! tells both from plain failures. The move of
//! a resolved reminder into `history/` or `snoozed/` is follow-up: its
//! failure is logged, not returned, and the next operation on the key
//! finishes it. A retry of [`Nudges::send`] without an id is a new nudge
//! (latest wins); give the draft an id ([`NewNudge::with_id`]) where that matters.
//!
//! # Errors and repair
//!
//! One enum, [`Error`]. Unreadable files are reported, never taken as
//! absent: [`ReadOutcome::Corrupt`](chipset_store::ReadOutcome::Corrupt), [`Listing::corrupt`](chipset_store::Listing::corrupt), [`Error::Corrupt`].
//! [`Nudges::doctor`] and [`Reminders::doctor`] find them and, with
//! [`DoctorMode::Fix`](chipset_store::DoctorMode::Fix), quarantine them
//! (moved aside, never deleted, through the store's
//! [`StateDir::quarantine_checked`](chipset_store::StateDir::quarantine_checked),
//! which re-reads under the writers' lock) and finish interrupted
//! transitions. Both return the store's one
//! [`Report`](chipset_store::Report) shape. [`Reminders::open_counts`]
//! is a cheap count for a status screen.
//!
//! # Files written by other programs
//!
//! Fields this version does not know are kept and written back:
//! [`Nudge::extra`] travels with the nudge it was read with (into
//! `processed.json`'s `last`; a new nudge or response starts without
//! them), a processed record's own fields
//! stay with it when it is rewritten, and [`Reminder::extra`] stays with
//! the reminder through resolve, snooze and reopen. A nudge `type` this
//! version does not know is not an error: the seed reads it as a routine
//! nudge ([`NudgeType::Unknown`]). A reminder whose `severity` or
//! `resolution` is outside the seed's values is unsupported: listed in
//! [`Listing::unsupported`](chipset_store::Listing::unsupported), refused by changes
//! ([`chipset_store::Error::Unsupported`] inside [`Error::Store`]), reported
//! by the doctor and never quarantined.

#![forbid(unsafe_code)]

mod doctor;
mod error;
mod format;
mod key;
mod kinds;
mod reminders;
mod signals;
mod transition;

pub use error::{Error, Result};
pub use format::{Nudge, NudgeId, NudgeType, Reminder, ReminderId, Resolution, Severity};
pub use kinds::{KindRegistry, KindSpec};
pub use reminders::{
    ManualResolution, NewReminder, Opened, ReminderConfig, ReminderFilter, Reminders,
};
pub use signals::{Delivery, NewNudge, Nudges, Received};

/// The nudges' directory under the state root, `nudge/`.
pub(crate) const NUDGE_CHANNEL: chipset_store::Channel = chipset_store::Channel::new("nudge");

impl Reminders {
    /// The reminders' directory under the state root, `reminders/`.
    pub const CHANNEL: chipset_store::Channel = chipset_store::Channel::new("reminders");
}

#[cfg(test)]
mod tests {
    /// The directory names are the on-disk contract other programs read.
    #[test]
    fn channel_directories_keep_their_names() {
        assert_eq!(super::NUDGE_CHANNEL.as_str(), "nudge");
        assert_eq!(super::Reminders::CHANNEL.as_str(), "reminders");
    }
}
