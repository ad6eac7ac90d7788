//! One work item per agent, with a typed lifecycle that never loses an assignment.
//!
//! A hook binds an agent to the bead it must work on. The dispatcher assigns,
//! the agent picks the work up (GUPP: it cannot decline), touches the hook
//! while it works and completes it; the dispatcher verifies and clears.
//!
//! ```
//! use chipset_hook::{BeadId, HookStatus, Hooks, Pickup};
//! use chipset_store::{AgentId, Classify, ErrorKind, StateDir};
//!
//! let tmp = tempfile::tempdir()?;
//! let hooks = Hooks::new(StateDir::open(tmp.path())?);
//! let agent = AgentId::new("polecat-alpha")?;
//! let mayor = AgentId::new("mayor")?;
//!
//! // Dispatcher: assign work to an empty hook.
//! let assigned = hooks.assign(&agent, BeadId::new("gt-abc12")?, "Add README section", Some(&mayor))?;
//!
//! // Agent: find the work and start it, in one step.
//! let Pickup::Started(work) = hooks.pickup(&agent)? else { unreachable!() };
//! assert_eq!(work, assigned);
//! hooks.touch(&work)?; // heartbeat while working
//! hooks.complete(&work)?;
//!
//! // Dispatcher: verify, then clear. The file stays, as an empty hook.
//! hooks.clear(&assigned)?;
//! assert_eq!(HookStatus::of(&hooks.read(&agent)?), Some(HookStatus::Empty));
//!
//! // The agent's old assignment is now stale: a late touch changes nothing.
//! assert_eq!(hooks.touch(&work).unwrap_err().kind(), ErrorKind::Stale);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # States and transitions
//!
//! ```text
//! empty --assign--> pending --activate--> active --complete--> completed --clear--> empty
//!                      |                  |  ^
//!                      |                  touch
//!                      +----reassign------+------> empty   (taking the work away)
//! ```
//!
//! | operation | who | from | to |
//! |---|---|---|---|
//! | [`assign`](Hooks::assign) | a dispatcher | empty | pending |
//! | [`activate`](Hooks::activate) (or [`pickup`](Hooks::pickup)) | the owning agent | pending | active |
//! | [`touch`](Hooks::touch) | the owning agent | active | active, new `last_activity` |
//! | [`complete`](Hooks::complete) | the owning agent | active | completed |
//! | [`clear`](Hooks::clear) | a dispatcher | completed | empty |
//! | [`reassign`](Hooks::reassign) | a dispatcher | pending, active | empty (reported as a reassignment) |
//!
//! The rules are one pure function of (hook, event, actor, now), applied
//! with a compare-and-swap on the hook.
//! The typed [`Hook`] cannot be pending, active or completed without its
//! [`WorkItem`]. Everything else (skipping a step, a second assignment, an
//! agent acting on another agent's hook, a dispatcher completing work) is a
//! refusal that names the current state and who may do what: of kind
//! [`ErrorKind::Refused`](chipset_store::ErrorKind::Refused), or
//! [`ErrorKind::Stale`](chipset_store::ErrorKind::Stale) when the
//! assignment named was replaced.
//!
//! # Fencing
//!
//! Every operation after assign names the [`Assignment`] the caller holds:
//! agent, bead id, generation and assignment time. The generation grows on
//! every assign, clear and reassign. If the hook no longer holds that
//! assignment, the call fails with [`Error::StaleAssignment`] and
//! writes nothing: a late touch cannot bring back a cleared hook, and an
//! agent whose work was taken away cannot complete it. [`Hooks::current`]
//! returns the assignment a hook holds now, for callers (such as the command
//! line) that act on whatever is there.
//!
//! # File layout
//!
//! One file per agent, `hooks/{agent}.json` under the state root, in seed
//! 001's format with sorted keys, plus `generation` (absent in seed-written
//! files, read as 0) and, when the dispatcher named itself, `assigned_by`:
//!
//! ```json
//! {
//!   "agent_id": "polecat-alpha",
//!   "assigned_by": "mayor",
//!   "generation": 1,
//!   "last_activity": "2026-03-05T10:32:00.000Z",
//!   "status": "active",
//!   "work_item": {
//!     "assigned_at": "2026-03-05T10:30:00.000Z",
//!     "bead_id": "gt-abc12",
//!     "title": "Add README section"
//!   }
//! }
//! ```
//!
//! `work_item` is `null` when empty. A missing file is an empty hook;
//! clearing writes an empty hook and never deletes the file. The lock is
//! `hooks/.{agent}.json.lock`; repaired files go to `hooks/.quarantine/`.
//!
//! # Files written by other programs
//!
//! Fields chipset does not know, at the top level or inside the work item,
//! are kept ([`Hook::extra`], [`WorkItem::extra`]) and written back on every
//! rewrite. The work item's own fields go with it: a clear or a new
//! assignment starts the new work item without them.
//!
//! The camelCase hooks of Tibsfox's `StateManager` (the seed author's public
//! code) read as the same hook: `agentId`, `lastActivity`, `workItem` with
//! `beadId`, `title` and extra fields (`description`, `priority`, `status`,
//! `hookStatus`), no `assigned_at`, and no `workItem` at all when empty.
//! Where `assigned_at` is absent, the hook's `last_activity` stands in.
//! When chipset rewrites such a hook it writes the seed form: `agent_id`,
//! `status`, `work_item` (`null` when empty, else `bead_id`, `title`,
//! `assigned_at` plus the item's extra fields), `last_activity`,
//! `generation` (0 for a file that had none, then counting) and
//! `assigned_by` when known, plus every other top-level field unchanged.
//! `agentId`, `workItem`, `beadId` and `lastActivity` are replaced by their
//! seed names, not kept beside them, so the file holds one value per field.
//!
//! `StateManager` still works on such a file: its lifecycle checks read only
//! `status`, which both forms share; `activateHook` and `completeHook` keep
//! the object they read and add a fresh `lastActivity`. A file holding both
//! spellings reads `last_activity` as the later of the two, and `agent_id`
//! and `agentId` (or two work items' beads) must agree, else the file is
//! corrupt.
//!
//! A status this version does not know (say `"paused"`) is
//! [`ReadOutcome::Unsupported`](chipset_store::ReadOutcome::Unsupported), not corrupt: every transition refuses it with
//! [`Error::Unsupported`], [`Hooks::list`] reports it, and [`Hooks::doctor`]
//! reports it and never moves or resets it.
//!
//! # Durability and concurrency
//!
//! Each change is one compare-and-swap on the storage seam
//! (`chipset_backend::Backend`, issue 30): read the hook and its version,
//! apply the transition, write it only if the hook is still at that
//! version (else read and decide again). On a directory a missing hook is
//! created with the store's no-clobber publish, and an existing one is
//! replaced under its lock (read, compare, durable replace: temp file,
//! fsync, rename, directory fsync), so the files are what they always
//! were; [`Hooks::with_backend`] puts the same transitions on PostgreSQL.
//! Changes to one hook are therefore linearizable across
//! processes: of eight dispatchers assigning at once, one wins and seven get
//! [`Error::AlreadyAssigned`]. A crash at any moment leaves the old
//! or the new hook, both legal. A change that alters nothing (two touches in
//! one millisecond) writes nothing.
//!
//! # Commit points and retries
//!
//! Every transition has one commit point: the rename of the new hook file
//! (the no-clobber publish of the first, the replace under the hook's lock
//! of the others). A failure before it changes nothing a reader sees
//! (the first write to an agent's hook may leave `hooks/` holding only the
//! dot-named lock file, which is never removed); a failed directory sync
//! after it is the store's [`OutcomeUnknown`](chipset_store::Error::OutcomeUnknown)
//! (in [`Error::Store`]). Retries follow the store's idempotent-retry rule:
//! repeating a transition with the same assignment after it applied is a
//! success that writes nothing: assign finds the hook
//! holding the same bead and title from the same dispatcher and returns
//! that assignment, activate finds the hook active, complete finds it
//! completed, clear and reassign find it empty at the next generation.
//! Touch simply applies again, and a [`Hooks::pickup`] repeated after it
//! started the work finds it active and hands it back as
//! [`Pickup::Resumed`]. A retry is recognised only while the hook
//! still shows what the first attempt left: once the next step has moved
//! it on (the dispatcher cleared a completed hook, or an assignment was
//! cleared and the same bead assigned again), the retry is refused as
//! stale or, for assign, is a new assignment.
//!
//! # Corrupt hooks
//!
//! A file that is not a legal hook of its agent (unparsable, wrong shape,
//! pending without a work item, another agent's `agent_id`, a symlink) is
//! [`ReadOutcome::Corrupt`](chipset_store::ReadOutcome::Corrupt), never empty. Every transition on it fails with
//! [`Error::Corrupt`], so no work is assigned over a hook whose contents are
//! unknown. [`Hooks::doctor`] with [`DoctorMode::Fix`](chipset_store::DoctorMode::Fix)
//! moves every corrupt hook into quarantine, writes an empty hook in its
//! place, and reports stray files. The doctor is the store's one shape: it returns a
//! [`Report`](chipset_store::Report) of [`Finding`](chipset_store::Finding)s
//! coded `hook-corrupt`, `hook-unsupported` and `hook-stray`; the store's
//! [`StateDir::quarantine_checked`](chipset_store::StateDir::quarantine_checked)
//! moves the file aside, under the hook's lock, only if it is still the
//! bytes judged corrupt. [`Hooks::list`] reports corrupt hooks instead of
//! skipping them.
//!
//! # Errors
//!
//! One enum, [`Error`]: a refusal by the rules, a title assign refuses
//! ([`Error::InvalidTitle`]: empty, over 1024 bytes, or not one
//! line), a corrupt hook, or a store error that names the operation and
//! the path. When a refusal or a
//! corrupt hook is returned, nothing was written. A store error is the same,
//! with one exception the store documents: when only the final directory
//! sync fails ([`OutcomeUnknown`](chipset_store::Error::OutcomeUnknown)),
//! the new hook is already in place, not known to be durable. Retry the
//! same call, with the same assignment: it finds the hook as that attempt
//! left it and succeeds, writing nothing but a touch, which applies again
//! (see "Commit points and retries"); there is nothing to read first.

#![forbid(unsafe_code)]

mod error;
mod format;
mod id;
mod scan;
mod state;
mod store;
mod transition;

pub use error::{Error, Result};
pub use id::BeadId;
pub use state::{Assignment, Hook, HookState, HookStatus, WorkItem};
pub use store::{Hooks, Pickup, Reassigned};
