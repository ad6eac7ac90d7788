//! Prioritised, de-duplicated per-agent event queues with acknowledgement
//! and wake-ups, on files (the coordination bus of seed 004, in JSON).
//!
//! Agents cannot interrupt each other; they share a directory. An event is a
//! file in its recipient's queue: it survives the publisher, the recipient
//! and the machine, and the queue is the bridge between one session of an
//! agent and the next.
//!
//! ```
//! use std::time::Duration;
//! use chipset_bus::{Bus, NewEvent, Priority, Published};
//! use chipset_store::{AgentId, StateDir};
//!
//! let tmp = tempfile::tempdir()?;
//! let bus = Bus::new(StateDir::open(tmp.path())?);
//! let supervisor = AgentId::new("supervisor")?;
//!
//! // The supervisor starts: its (empty) queue exists from now on, and it is present.
//! let startup = bus.start(&supervisor, std::process::id())?;
//! assert!(startup.pending.is_empty());
//! let mut waiter = bus.waiter(&supervisor)?;
//!
//! // Workers publish. The critical one jumps the queue; the repeated mention is dropped.
//! let status = NewEvent::new("worker-1", "status").with_priority(Priority::Low);
//! let _ = bus.publish(&supervisor, &status)?;
//! let ask = NewEvent::new("worker-2", "needs-input").with_priority(Priority::Critical);
//! let _ = bus.publish(&supervisor, &ask)?;
//! let mention = NewEvent::new("chat-watcher", "chat-mention").with_dedup_key("debug.chat#42");
//! assert!(matches!(bus.publish(&supervisor, &mention)?, Published::Delivered(_)));
//! assert!(matches!(bus.publish(&supervisor, &mention)?, Published::Duplicate { .. }));
//!
//! // The supervisor wakes, reads in priority order and acknowledges.
//! assert!(!waiter.wait(Duration::from_secs(5))?.is_empty());
//! let pending = bus.pending(&supervisor)?;
//! let kinds: Vec<_> = pending.events.iter().map(|e| e.kind.as_str()).collect();
//! assert_eq!(kinds, ["needs-input", "chat-mention", "status"]);
//! for event in &pending.events {
//!     assert!(bus.ack_event(&supervisor, event)?, "acknowledged now");
//! }
//! assert!(bus.pending(&supervisor)?.is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Events and their order
//!
//! An [`Event`] has an id ([`EventId`], `{unix-ms}-{uuid-v4}`), a source (who
//! caused it), a kind, a [`Priority`] (`critical`, `high`, `normal`, `low`),
//! the time it was created, an optional de-duplication key and a JSON
//! payload. Build one with [`NewEvent`] and [`Bus::publish`] it to one agent,
//! or [`Bus::publish_to`] several: each recipient gets its own copy, and one
//! recipient acknowledging never removes another's.
//!
//! [`Bus::pending`] returns every unacknowledged event: critical first, and
//! oldest first within a priority. There is no cap anywhere, so a flood of
//! low events never hides a critical one. Reading never acknowledges; only
//! [`Bus::ack`] / [`Bus::ack_event`] do, which move the event to the
//! processed area and return true; acknowledging again changes nothing
//! and returns false.
//!
//! # De-duplication
//!
//! A publish with a key is dropped, and reported as [`Published::Duplicate`]
//! (not an error), when the same key was accepted for the same recipient
//! within the window ([`NewEvent::with_dedup_window`], else
//! [`BusConfig::dedup_window`], 60 s by default). After the window the key
//! works again. The check, the publish and the key's record happen under
//! one lock, so of many processes publishing one key at once exactly one
//! delivers; the record is a file, so it survives restarts. The event is
//! published before its key is recorded: a crash between the two can let a
//! later duplicate through, but never loses the event.
//!
//! # Presence, availability and restart
//!
//! Availability is structural: an agent's queue exists ([`Bus::is_available`])
//! and accumulates events whether or not the agent runs. Presence is
//! transient: [`Bus::start`] and [`Bus::heartbeat`] record the pid, start time
//! and last-seen time. [`Bus::presence`] reads the presence file as the
//! store's [`ReadOutcome`](chipset_store::ReadOutcome) (missing, corrupt,
//! unsupported or a [`Presence`]), and [`Bus::is_live`] judges a presence
//! live or stale ([`BusConfig::presence_stale_after`]). Presence never
//! deletes or blocks a queue. [`Bus::start`] follows the seed's restart steps: it makes sure the
//! queue exists, returns the pending events in order, and registers presence.
//!
//! # Control inbox and registry
//!
//! An agent (or its wrapper) appends commands, register or unregister a
//! [`Resource`] such as a chat or another queue, with [`Bus::control`] to an
//! append-only log that is never truncated. [`Bus::apply_control`] reads the
//! log forward from the offset stored in the registry and replaces the
//! registry and the offset in one atomic write: a crash applies nothing or
//! everything, and since the registry is a set, applying lines again gives
//! the same registry.
//!
//! # Reminders
//!
//! [`Bus::due_reminders`] returns the unacknowledged events due for a
//! reminder now, at the seed's cadence: critical every 30 s, high every
//! 2 min, normal at the next poll, low at the next poll when nothing else is
//! pending. It records each timed reminder, so a restart does not cause a
//! storm of them.
//!
//! # Wake-ups
//!
//! A [`Waiter`] ([`Bus::waiter`]) blocks until a new event arrives for its
//! agent or a timeout passes. It is woken by directory notifications
//! (inotify on Linux, through chipset-store's
//! [`Watcher`](chipset_store::Watcher)) and also lists the queue every
//! rescan interval of [`BusConfig::watch`] (1 s by default): the rescan is
//! the safety net when a notification is lost, and the only mechanism where
//! notifications are unavailable or turned off
//! ([`WatchConfig::notify`](chipset_store::WatchConfig::notify)).
//!
//! With the `tokio` cargo feature (off by default), `Waiter::wait_async`
//! is the same wait awaited without blocking a runtime thread (the
//! watching moves to a thread of its own), and `Bus::waiter_async` makes a
//! waiter without blocking.
//!
//! # File layout
//!
//! Everything lives under `bus/` in the state root, one directory per
//! recipient:
//!
//! ```text
//! bus/{agent}/
//!   queue/{P}-{id}-{source}-{kind}.json   unacknowledged events, one file each
//!   processed/{same name}                 acknowledged events (pruned by retention)
//!   dedup/{key}.json                      last accepted publish per de-duplication key
//!   presence.json                         pid, started_at, last_seen
//!   control.jsonl                         append-only control commands
//!   registry.json                         registered resources + applied log offset
//!   nag.json                              last reminder time per unacknowledged event
//! ```
//!
//! An event file's name is `{P}-{id}-{source}-{kind}.json`: `P` is the
//! priority digit (`0` critical, `1` high, `2` normal, `3` low), `id` is the
//! event id (`{unix-ms, 13 digits}-{uuid}`), and source and kind are
//! percent-encoded outside `[A-Za-z0-9_-]` and cut to 40 bytes, for example
//! `0-1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab-worker-2-needs-input.json`.
//! So `ls queue/` is the processing order: priority, then time, then (within
//! one millisecond) the publisher's order. The id comes before source and
//! kind so that one publisher's events keep their order whatever their
//! kinds. The contents are canonical JSON with the fields `id`, `source`,
//! `kind`, `priority`, `created_at` (RFC 3339 UTC with milliseconds),
//! `dedup_key` (when set) and `payload`; the recipient is the directory.
//!
//! A de-duplication key's file name is the key percent-encoded the same way;
//! keys whose encoding exceeds 96 bytes are cut to 64 bytes and suffixed with
//! `~` and a 64-bit FNV-1a hash of the whole key. The record holds the full
//! `key`, `accepted_at`, `event_id` and `window_ms`. Names starting with a
//! dot are the store's (temps, `.{name}.lock` lock files, `.quarantine/`).
//!
//! Every path the bus reads or writes is a
//! [`StatePath`](chipset_store::StatePath) ([`Bus::queue_dir`],
//! [`Bus::processed_dir`], [`Bus::ensure_queue`]): the channel's directory
//! and checked segments, so none can leave the root. Event and key file
//! names are always one safe segment; a listed name that is not is foreign
//! ([`Problem::ForeignName`]), reported by its path and left alone.
//!
//! # Durability
//!
//! Every change goes through `chipset-store`: a publish is one no-clobber
//! durable create (the file written and synced, a rename or link that
//! never overwrites, a directory sync), so a reader sees a whole event or none, and a publish
//! that returned `Ok` survives a crash. An acknowledgement is one no-clobber
//! durable move. The control log is appended with one synced write per
//! command. Removing pruned files and the leftover queue copy of an event
//! found in both places after a crash are the only deletions this crate
//! makes itself.
//!
//! # Commit points and retries
//!
//! A publish's commit point is the no-clobber create of the event's file in
//! the recipient's queue; an acknowledgement's is the no-clobber move to the
//! processed area. A failure before it leaves nothing visible; a failed sync
//! after it is [`Error::OutcomeUnknown`], which carries the event's id. With
//! a caller-chosen id ([`NewEvent::with_id`], the twin of mail's
//! `NewMessage::with_id`), publishing again follows the store's idempotent-retry
//! rule: the same id and content return the first delivery as
//! [`Published::Delivered`] (from the queue, or from the processed area once
//! acknowledged) and finish a missing de-duplication record; the same id
//! with other content is [`Error::IdTaken`]. Acknowledging again
//! returns false. A publish to several recipients that failed
//! after some copies is [`Error::PartlyPublished`]; the retry publishes the
//! rest. A batch that failed with some of its events published is
//! [`Error::BatchPartlyPublished`], naming them: the retry gives their ids.
//! A failed keyed publish may leave the key's `dedup/` directory,
//! holding only its lock file (lock files are never removed).
//!
//! # On a server
//!
//! [`Bus::with_backend`] puts the same queues on a `chipset_backend`
//! backend, a PostgreSQL server, for agents on several hosts: the keys
//! mirror the files above and hold the same bytes. A publish is one
//! create; a keyed publish is judged under the key's lock, which on a
//! server is the server's advisory lock, and the event and the key's
//! record are one transaction whose record step is a swap at the version
//! judged, so of many clients on many hosts exactly one delivers and no
//! publish is half done; acknowledging is one no-clobber move; presence,
//! `created_at`, de-duplication windows and reminders use the server's
//! clock ([`Bus::now`]); a [`Waiter`] is woken by the server's
//! notifications, with the rescan kept. A publish cut at commit is
//! [`Error::OutcomeUnknown`] with the event's id, whose retry returns the
//! first delivery. The upkeep below ([`Bus::status`], [`Bus::prune`],
//! [`Bus::doctor`]) reads the rows the same way.
//!
//! # Upkeep
//!
//! [`Bus::agent_status`] and [`Bus::status`] count pending events per priority from
//! directory listings alone, for a status screen. [`Bus::prune`] removes
//! processed events beyond a [`Retention`] (nothing calls it on its own:
//! an operator runs `chipset bus prune`, from cron, say). [`Bus::doctor`] finds corrupt or
//! misnamed event files, corrupt state files, torn control logs, bad control
//! lines, a directory or FIFO where the control log belongs, and stale
//! temps (removed by the store's
//! [`StateDir::sweep_temps`](chipset_store::StateDir::sweep_temps)), and with [`DoctorMode::Fix`](chipset_store::DoctorMode::Fix)
//! quarantines or removes them (bad lines move to `.quarantine/` with every
//! whole command kept, and the registry is rebuilt from the repaired log).
//! [`Bus::doctor`] returns the store's one
//! [`Report`](chipset_store::Report) shape; files are
//! moved aside through
//! [`StateDir::quarantine_checked`](chipset_store::StateDir::quarantine_checked),
//! so presence, registry, nag state and de-duplication records are read
//! again under the lock their writers take, and a file a heartbeat rewrote
//! since the check is left alone.
//!
//! # Files written by other programs
//!
//! Fields this version does not know are kept: an event's
//! ([`Event::extra`]) stay in its file, which acknowledging moves byte for
//! byte; a heartbeat keeps [`Presence::extra`] (a new session starts without
//! them); applying control commands keeps [`Registry::extra`]; reminder
//! state keeps its own. An event whose `priority` is not one of the four
//! names is unsupported, not corrupt: [`Pending::unreadable`] lists it as
//! [`Problem::Unsupported`], and the doctor reports it and never moves it.
//! (De-duplication records are replaced whole on each accepted publish.)
//!
//! # Errors
//!
//! One enum, [`Error`]. A duplicate publish and a second acknowledgement are
//! outcomes, not errors; an unreadable queue file is reported in
//! [`Pending::unreadable`], never taken as "nothing there".

#![forbid(unsafe_code)]

mod bus;
mod config;
mod control;
mod dedup;
mod error;
mod format;
mod maintain;
mod nag;
mod name;
mod wait;
#[cfg(feature = "tokio")]
mod wait_async;

pub use bus::{Bus, Pending, Problem, Published, Startup};
pub use config::{BusConfig, Occasion, Retention};
pub use error::{Error, Result};
pub use format::{
    Event, EventId, NewEvent, Priority,
    agent::{ControlOp, Presence, Registry, Resource},
};
pub use maintain::{AgentStatus, Pruned};
pub use wait::Waiter;

impl Bus {
    /// The bus's directory under the state root, `bus/`.
    pub const CHANNEL: chipset_store::Channel = chipset_store::Channel::new("bus");
}
