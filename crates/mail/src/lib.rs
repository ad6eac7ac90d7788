//! Addressed, threaded messages between agents, with an audit manifest and a
//! pending-reply gate that fails closed (seed ADR-0015, "named-agent messaging").
//!
//! Every message is a file. Delivery works the way Maildir delivers: a
//! message is written in full before it is published into its recipient's
//! inbox under a new name that never replaces another, so a reader never
//! sees half a message and no message ever overwrites another. No daemon, no lock that all
//! senders queue on.
//!
//! ```
//! use chipset_mail::{ArchiveOutcome, NewMessage, Mail, Error};
//! use chipset_store::{AgentId, StateDir, TaskId};
//!
//! let tmp = tempfile::tempdir()?;
//! let mail = Mail::new(StateDir::open(tmp.path())?);
//! let (critic, executor) = (AgentId::new("np-critic")?, AgentId::new("np-executor")?);
//! let task = TaskId::new("M005-S007-T0002")?;
//!
//! // The critic asks; the task may not commit until the executor answers.
//! let question = mail.send(
//!     &NewMessage::request(critic.clone(), executor.clone(), task.clone(), "dead-code",
//!         "did you intend to delete FoobarService?").with_round(2),
//! )?;
//! assert_eq!(mail.pending_replies(&task)?.len(), 1);
//! assert!(matches!(mail.archive(&question.id), Err(Error::ArchiveWithoutReply { .. })));
//!
//! // The executor reads its inbox and answers; answering archives the request.
//! let inbox = mail.inbox(&executor)?;
//! assert_eq!(inbox[0].subject, "dead-code");
//! let answer = mail.send(&NewMessage::response(executor.clone(), critic.clone(),
//!     question.id.clone(), "dead-code", "yes: it was unused"))?;
//! assert!(mail.pending_replies(&task)?.is_empty());
//! assert_eq!(mail.thread(&answer.id)?.len(), 2);
//!
//! // The critic archives the answer; after the commit the task's mail is swept.
//! assert!(matches!(mail.archive(&answer.id)?, ArchiveOutcome::Archived(_)));
//! assert_eq!(mail.sweep_task_on_commit(&task)?.moved, 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Messages
//!
//! A [`Message`] has exactly the seed's fields — `id`, `from`, `to`, `phase`
//! (the task), `round`, `kind`, `subject`, `body`, `expects_reply`,
//! `in_reply_to`, `created_at` — plus an optional `priority` (`urgent`,
//! `normal`, `low`; a file without it reads as normal). Files are canonical
//! JSON with sorted keys. A file another seed program wrote for a phase no
//! task name can be (nubos-pilot takes `plan/phase-1`) is unsupported, not
//! corrupt, and belongs to no gate ([`Message::foreign_task`]). The [`Kind`]s:
//!
//! - `request` expects a reply (`expects_reply: true`); it holds up its task
//!   in [`Mail::pending_replies`] until a response is sent, and
//!   [`Mail::archive`] refuses it before then ([`Error::ArchiveWithoutReply`]).
//! - `response` answers a request (`in_reply_to`). Sending one checks that
//!   the request exists and expects a reply, that the responder is its
//!   addressee and that the task matches; then it archives the request.
//! - `notify` expects no reply; the receiver archives it after reading.
//!
//! A [`NewMessage`] is what a sender asks for; [`Mail::send`] checks it (subject
//! kebab-case, body at most [`MailConfig::max_body`], recipient in the
//! optional registry, the reply rules above) and assigns the id
//! (`{unix-ms}-{uuid-v4}`, sorting in send order) and `created_at`.
//! [`Mail::send_batch`] sends many sharing syncs.
//!
//! A message's life: published into `inbox/{to}/` → archived into
//! `archive/` (by [`Mail::archive`], or by a response) → swept with its task
//! into `archive/by-task/{task}/` ([`Mail::sweep_task_on_commit`]). An
//! unarchived message can also be swept directly, or moved aside into
//! `archive/orphan/` by [`Mail::doctor`]. Messages only move forward, so
//! [`Mail::locate`] finds one by looking in that order. Messages written by
//! other programs per the seed (nubos-pilot's `lib/messaging.cjs` among them:
//! `"round": null`, keys in any order, extra fields) are listed, archived
//! and threaded like ours, and a response such a program wrote answers its
//! request at once (see [`Mail::has_reply`]).
//!
//! Agent names in `from` and `to` must match the seed's schema,
//! `^[a-zA-Z0-9_-]+$`, for [`Mail::send`] to write them (other programs
//! would silently skip the message); reading accepts any valid
//! [`AgentId`](chipset_store::AgentId) already on disk.
//!
//! # File layout
//!
//! Under the state root's `mail/`:
//!
//! ```text
//! inbox/{agent}/{id}.json                  unarchived, addressed to {agent}
//! archive/{id}.json                        archived (acknowledged or answered)
//! archive/by-task/{task}/{id}.json         swept after the task committed
//! archive/orphan/{id}.json                 moved aside by the doctor
//! replies/{parent-id}/{kind}-{id}.json     reply index: one entry per reply
//! .gate/inbox/{agent}.json                 gate cache: an inbox's files (see below)
//! .gate/archive.json                       gate cache: the files of archive/ (top level)
//! .gate/task/{task}.json                   gate cache: a task's files per inbox and in archive/
//! .gate/archive-tail.json                  archive tail: how far the manifest was read
//! manifest.jsonl                           append-only audit log (ManifestEvent)
//! ```
//!
//! The reply index (not in the seed; other programs ignore it) answers "has
//! this request a reply?" with one small directory listing, and lets
//! [`Mail::thread`] walk down a thread, whatever the size of the archive.
//! An entry is written after its reply is published, so the index never
//! claims a reply that does not exist; a crash in between leaves the request
//! pending (the safe side), and [`Mail::doctor`] adds the entry.
//!
//! Every path above is a [`StatePath`](chipset_store::StatePath)
//! ([`Mail::dir`], [`Mail::inbox_dir`], [`Mail::path_of`],
//! [`Mail::manifest_path`]): the channel's directory (or, for
//! [`Mail::in_folder`], the root itself,
//! [`StateDir::root_path`](chipset_store::StateDir::root_path)) and checked
//! segments, so none can leave the root. `.gate/` is mail's own hidden
//! folder ([`StatePath::join_static`](chipset_store::StatePath::join_static));
//! an inbox's `.quarantine/` is the store's, read only through
//! [`StateDir::list_quarantine`](chipset_store::StateDir::list_quarantine).
//! A listed name that is not one safe segment is reported by the doctor as
//! corrupt and left for a person: no `StatePath` can name it, so no repair
//! moves it.
//!
//! # Costs
//!
//! - [`Mail::inbox`] reads only that agent's inbox.
//! - [`Mail::locate`] and [`Mail::find`] cost a stat per agent inbox (and,
//!   only when the message is not in an inbox, `archive/` or
//!   `archive/orphan/`, one per swept task): never a scan of the messages.
//! - [`Mail::archive`] and [`Mail::has_reply`] add one listing of the reply
//!   index, which answers for every reply chipset sent. Only on a miss (a
//!   request without a response, or answered by another program) do they
//!   look for the response files themselves: they read the manifest's
//!   events appended since the last look (the archive tail, below: what
//!   entered `archive/`), then list the request sender's inbox and the
//!   task's by-task archive (each only if its mtime shows that something
//!   entered it since the request was sent), and read only the files newer
//!   than the request that mention its id. `archive/` itself is listed only
//!   for a request sent before the tail began. So an open request costs
//!   what it costs with an empty archive, however many messages it holds.
//! - [`Mail::pending_replies`] costs what the task's own mail costs: one
//!   listing of `inbox/` with a `statx` per inbox relative to it (and one
//!   for an inbox's `.quarantine/` while it exists), and the task's file of
//!   the gate cache (`mail/.gate/`, below), which also holds the bytes of
//!   the task's open requests: a request's file is read only when its inbox
//!   changed since. Then the index for each open request, the archive tail
//!   (its file and the manifest's stat; the manifest's bytes only when it
//!   changed since the tail was last at its end), and the archives as
//!   above only for requests neither answers. An inbox whose stamp changed
//!   since the cache saw it is listed and only its new files are read.
//! - [`Mail::thread`] reads the inboxes, and the files of `archive/` and the
//!   task's by-task archive newer than the thread's root.
//! - [`Mail::sweep_task_on_commit`] reads the inboxes and `archive/` (the
//!   archived messages of tasks not yet swept).
//! - [`Mail::inbox_counts`] lists directories and reads no file.
//!
//! # The gate cache
//!
//! `mail/.gate/` (a dot-name: the seed's other programs and chipset's
//! listings skip it) keeps, per inbox (and for the top level of
//! `archive/`), what the gate, the sweep and the thread need from each
//! message file (task, kind, needs-reply, in-reply-to, sender) keyed by
//! file name, inode, size and times, and per task every file of the task
//! in each inbox and in `archive/` (its requests and responses with those
//! facts, its other files with their parent). Every entry carries the stamp of its inbox
//! directory (device, inode, mtime and ctime, taken *before* the listing)
//! and is used only while the inbox's stamp is still exactly that and at
//! least two seconds old. What this relies on: every create, rename and
//! unlink in a directory sets its mtime and ctime, and no program can set a
//! ctime (one that puts the mtime back still moves it). Where it would not
//! hold: a change within two seconds of the last one may share its stamp on
//! coarse-timestamp filesystems (hence the two-second window, during which
//! the inbox is listed every time); a clock stepped back by more than two
//! seconds could in principle repeat a stamp exactly; a file rewritten in
//! place (which the seed forbids) is noticed only by its own size and times
//! when its inbox is next listed. Cache files are written without sync; a
//! missing, stale, unparsable or other-version file is ignored and rebuilt,
//! so the cache can cost a listing but never open the gate. Files written by
//! other programs are read exactly as without the cache: an unreadable,
//! oversized or unsupported message file in any inbox fails the gate closed.
//!
//! The sweep and the thread rely on the same cache, on the same terms: a
//! folder whose stamp is not exactly the cached one (and settled) is
//! listed, and every file it holds that its folder cache does not know
//! (same name, inode, size and times) is read, so a file another program
//! wrote, with no cache entry, is always found. The cache of `archive/`
//! costs what `archive/` holds when it changed (one listing and a stat per
//! file, reading only new files); `archive/` holds only the archived mail of
//! tasks not yet swept, since a sweep moves a task's mail out of it.
//!
//! - [`Mail::thread`] costs what the mail of the thread's tasks (the start
//!   message's and its ancestors') costs: a stat per inbox and of
//!   `archive/` (through the cache, as the gate), a read of each reply among
//!   those tasks' files there, and the files of the task's by-task archive
//!   newer than the thread's root. Replies are found through the reply
//!   index whatever their task; a reply without an index entry (written by
//!   another program) is found when it is of one of those tasks, as a
//!   response always is.
//! - [`Mail::sweep_task_on_commit`] costs what the task's own mail costs: a
//!   stat per inbox (relative to `inbox/`, as the gate) and of `archive/`,
//!   the task's cache file, and the moves; plus, for each inbox holding the
//!   task's files that changed since the task's cache saw it, one listing
//!   with a `statx` per entry and a read of the entries that came in since
//!   (an entry's ctime says whether it was there when the task's cache
//!   listed the inbox: see the gate module), not that inbox's cache. An
//!   inbox that held none of the task's files at the task's last gate, less
//!   than ten minutes before, is not listed even when it changed since
//!   (other tasks' sweeps and sends change most inboxes between a task's
//!   gate and its sweep): a message of the task put there after that gate
//!   is left in its inbox, as one sent after the sweep is, and
//!   [`Mail::doctor`] reports it (`messaging-orphan-inbox`, its task
//!   swept). Without a usable task cache or a recent gate, every changed
//!   inbox is listed.
//!   A folder the cache cannot take (it holds an unreadable or unsupported
//!   file) is read whole, as without the cache, so every other message
//!   still moves and the sweep then names the file.
//! - [`Mail::inbox_counts`] lists directories and reads no file.
//!
//! # The archive tail
//!
//! A response another program archived is in `archive/`, which a busy
//! project fills with 100,000 files and more. Rather than list it, the
//! reply fallback reads the manifest: the seed has every `archive()` append
//! an `archived` event after its move (nubos-pilot does, with the message's
//! kind; so does chipset), and the manifest only grows. `.gate/archive-tail.json`
//! records where the tail began (the manifest's length, then the time) and
//! how far it has read; a miss of the reply index reads the events since,
//! enters each archived response that fits its request in the reply index,
//! and moves on. A request sent after the tail began (with two seconds'
//! slack for clocks) can only have been answered from `archive/` by an
//! archive after that, so `archive/` is never listed for it; older requests
//! are looked for by listing, as before. Where it would not hold: a writer
//! stopped between its move and its event (or one that does not log) leaves
//! a response the tail does not see, and its request stays pending (the safe
//! side) until [`Mail::doctor`] appends the missing `archived` event. A
//! manifest replaced or truncated (another inode, shorter than the tail's
//! offset, or other bytes just before it) and a missing or unparsable tail
//! file make the tail begin again. The tail only adds index entries for
//! responses it has read and checked, so it can never answer a request that
//! has no response.
//!
//! # Durability
//!
//! Every change goes through `chipset-store`: [`Mail::send`] publishes with a
//! no-clobber rename (or link) after syncing the file, then syncs the directory, then
//! appends its `sent` event with one write and **no** data sync: two syncs
//! per send. The event can be rebuilt
//! from the message file, so its sync is shared with the next synced append
//! to the manifest (any `archived` or `task-swept` event, or a response's
//! send) or left to the kernel's writeback; a power cut before either may
//! lose it, and [`Mail::doctor`] writes it again. So when `send` returns the
//! message is durable, and its `sent` event is in the manifest for every
//! reader (durable within the filesystem's commit interval, about 5 s on
//! ext4). A response's events (its `sent` and the request's `archived`) are
//! synced before `send` returns. [`Mail::send_batch`] costs two sync rounds
//! for the files (all data, then every inbox once) however many drafts
//! (the store's Durability docs say which calls each round makes, per
//! filesystem). Moves (archive,
//! sweep, orphan) are no-clobber renames with both directories synced; of two
//! processes moving one message exactly one succeeds. [`Mail::archive`]
//! appends its `archived` event as `send` appends its `sent` event, with no
//! data sync of its own: the message in `archive/` is durable when `archive`
//! returns, and [`Mail::doctor`] rebuilds an `archived` event a power cut
//! lost (`reconciled: true`); until then the archive tail, which learns from
//! these events, may not see the move, which can only keep a request
//! pending, never open the gate. When `send` returns,
//! the message is durable; a crash before that leaves either nothing, or a
//! whole message whose `sent` event (and reply-index entry, and for a
//! response the request's archiving) [`Mail::doctor`] completes. The manifest
//! reader returns only whole records. [`Mail::sweep_task_on_commit`] is safe
//! to run again after a crash.
//!
//! # Commit points and retries
//!
//! Each operation has one commit point, named in its docs, after which it
//! has happened:
//!
//! | operation | commit point | follow-up (finished by the doctor if it fails) |
//! |---|---|---|
//! | [`Mail::send`] | the no-clobber publish of `inbox/{to}/{id}.json` | reply-index entry, archive of the answered request, `sent` event |
//! | [`Mail::send_batch`] | each message's own publish | as for `send`, once for the batch |
//! | [`Mail::archive`] | the no-clobber move into `archive/` | reply-index entry of an unindexed response, `archived` event |
//! | [`Mail::sweep_task_on_commit`] | each message's move into `archive/by-task/{task}/` | `task-swept` event |
//!
//! A failure before the commit point leaves nothing a reader can see and is
//! returned as it is. A failure of the follow-up is not returned (the
//! operation happened; a failure would invite a duplicate): it is logged
//! through `tracing`, and [`Mail::doctor`] completes a missing `sent` event,
//! index entry, archive of an answered request, `archived` event of a
//! message in `archive/`, or `task-swept` event of a by-task folder (each
//! appended with `reconciled: true`; a folder swept by nubos-pilot, whose
//! event names the task `task_id`, counts as swept). Where the
//! outcome is truly unknown (the sync of the publish itself failed) `send`
//! returns [`Error::OutcomeUnknown`] carrying the id; a sweep that
//! failed after moving some messages returns [`Error::PartlySwept`];
//! [`Classify::is_outcome_unknown`](chipset_store::Classify::is_outcome_unknown)
//! tells both apart from plain failures.
//!
//! Retries follow the store's idempotent-retry rule. A send with a
//! caller-chosen id ([`NewMessage::with_id`]) repeated with the same content
//! (every field but `created_at` and the declared `schema`) returns the
//! first delivery, wherever it went since (an inbox, `archive/`, a by-task
//! or the orphan archive), and writes no second copy; other content is
//! [`Error::IdTaken`]. Archiving again is
//! [`ArchiveOutcome::AlreadyArchived`], and sweeping again moves the rest.
//! A send without a chosen id cannot be recognised when retried: give one
//! wherever a retry must not duplicate.
//!
//! # Fail closed
//!
//! A `{id}.json` file in an inbox that is not a readable message is never
//! skipped: [`Mail::inbox`], [`Mail::pending_replies`] and [`Mail::thread`]
//! return [`Error::Corrupt`] naming it, so the commit gate cannot pass
//! while a request might be unreadable. [`Mail::doctor`] in
//! [`DoctorMode::Fix`](chipset_store::DoctorMode::Fix) quarantines such
//! files (moves them into `.quarantine/` beside them), unless the seed's own
//! reader (nubos-pilot's) still lists the file as a valid message: then it
//! is reported and left for a person.
//!
//! Files another program left that cannot be a message do not stop a
//! listing. A name that does not end in `.json` (`notes.txt`, an editor's
//! swap file) is skipped by every listing and by the gate; any name that is
//! not `{id}.json` is skipped by [`Mail::inbox`] and reported by the doctor
//! (`messaging-stray-file`), which leaves it where it is. A message file is
//! read up to 16 MiB (or the state's read cap, when larger): the seed sets
//! no limit, and nubos-pilot's largest valid message (a 256 KiB body of
//! control characters, six bytes each once escaped) is about 1.5 MiB. A file
//! over that cap is skipped by [`Mail::inbox`] with a `tracing` warning,
//! reported by the doctor (`messaging-oversized-file`) and never moved, and
//! fails the gate closed: it may be an open request.
//!
//! A message that is well-formed but holds a value this version does not
//! know — a `kind` other than request, response and notify, a `priority`
//! other than urgent, normal and low, or a `schema` other than
//! `message.v1` (nubos-pilot's name for the seed's
//! format) — is *unsupported*, not corrupt: the same readers fail closed on
//! it with [`Error::Unsupported`], and the doctor reports it
//! (`messaging-unsupported-file`) and never moves it aside.
//!
//! # Repair and status
//!
//! [`Mail::doctor`] scans everything and reports, in the store's one shape
//! (a [`Report`](chipset_store::Report) of
//! [`Finding`](chipset_store::Finding)s, each with a stable code): corrupt files,
//! duplicates left by a crash mid-move, replies missing from the index,
//! answered requests still in an inbox, orphans (inbox messages whose task
//! was swept, whose recipient is not registered, or older than
//! [`MailConfig::orphan_after`]), messages without a `sent` event, messages
//! in `archive/` without an `archived` event, and a torn or bad manifest
//! line; stray names and files over the read cap are reported and left in
//! place. The fix never moves a file the seed's own reader (nubos-pilot)
//! still lists unless the seed says the move is right (a response archives
//! its request; an orphan goes to `archive/orphan/`; the copy a cut move
//! left at an earlier stage is set aside), and then its action says so.
//! A message without its `sent` (or `archived`) event that is younger
//! than [`MailConfig::in_flight_grace`] is in flight
//! ([`Defect::InFlight`](chipset_store::Defect::InFlight), `messaging-in-flight`): not
//! repaired yet (its sender or archiver may be appending), and not clean
//! either (the report says when to check again). The doctor cannot tell
//! when a message was moved into `archive/`, so it measures the grace from
//! the message's `created_at` (see [`Mail::doctor`]). [`Mail::inbox_counts`] gives per-agent inbox counts cheaply.
//!
//! The doctor's memory does not grow with the number of messages. It reads
//! every file once and writes one line per copy of a message (what its
//! checks need: place, kind, names as indexes, parent, time), per `sent`
//! and `archived` event of the manifest (read one record at a time), and
//! per reply-index entry into two external sorts; beyond a fixed budget
//! (8 MB each) a sort writes sorted runs to a scratch file in `mail/` that
//! has no name (`O_TMPFILE`: nothing is left behind, crash or not) and is
//! never synced. It then merges the runs and looks at one message id at a
//! time: first by id (duplicates, orphans, missing events, by-task
//! folders), then by parent id (replies that do not fit, missing index
//! entries, answered requests). It holds the agent and task names (once
//! each), the findings and what their repair needs, and one directory entry
//! at a time (message folders are walked, never listed whole); a repair
//! that needs a whole message reads it again, so its peak memory is about
//! the two 8 MB sort buffers, whatever the number of messages.
//! [`Mail::inbox_counts`] counts directory entries as they are listed and holds
//! none.
//!
//! # On a server
//!
//! [`Mail::with_backend`] puts the channel on a storage backend such as
//! PostgreSQL (`chipset_backend::PgBackend`, issue 30), for a team whose
//! agents share no disk. The operations and their contracts are the same,
//! on the server's terms: each send, batch, archive or sweep is one
//! transaction (the message, its index rows, the archive of the request a
//! response answers, its manifest events), so a send that returns is
//! committed and its request is in [`Mail::pending_replies`] on every
//! client at once, which reads one folder of open requests kept in the
//! same transactions. A send whose commit's answer was lost is
//! [`Error::Backend`] with an unknown outcome
//! ([`Classify::is_outcome_unknown`](chipset_store::Classify::is_outcome_unknown)):
//! retried with the same id it returns the first delivery. Times come
//! from the server's clock. [`Mail::inbox_counts`] counts the rows there,
//! [`Mail::doctor`] checks them and only reports, and [`Mail::watch_inbox`]
//! wakes on a delivery from any host. The directory keeps its own
//! code paths (the gate cache, the sent journal, the archive tail), and its
//! files are the seed's, byte for byte.
//!
//! # Errors
//!
//! One enum, [`Error`]: refusals are typed variants that change nothing;
//! filesystem failures carry the store's error with the path and operation;
//! a server's failures carry the backend's ([`Error::Backend`]).

#![forbid(unsafe_code)]

mod archive;
mod doctor;
mod draft;
mod error;
mod foreign;
mod format;
mod gate;
mod group;
mod id;
mod layout;
mod mail;
mod read;
mod repair;
mod replies;
mod send;
mod server;
mod spill;
mod tail;
mod thread;
mod wait_gate;

pub use doctor::OrphanReason;
pub use draft::{MailConfig, NewMessage};
pub use error::{Error, Result};
pub use format::{Kind, MailPriority, ManifestEvent, Message};
pub use group::Group;
pub use id::MessageId;
pub use layout::Location;
pub use mail::{ArchiveOutcome, Mail, SweepReport};

/// The mail's directory under the state root, `mail/`.
pub(crate) const MAIL_CHANNEL: chipset_store::Channel = chipset_store::Channel::new("mail");

#[cfg(test)]
mod tests {
    /// The directory name is the seed's layout, which other programs read.
    #[test]
    fn channel_directory_keeps_its_name() {
        assert_eq!(super::MAIL_CHANNEL.as_str(), "mail");
    }
}
