//! chipset agent directory: who is here, in which roles, running which
//! program and model on which host, working on what, and last seen when.
//!
//! ```
//! use chipset_directory::{Directory, Filter, Registration, Role};
//! use chipset_store::{AgentId, StateDir};
//!
//! let tmp = tempfile::tempdir()?;
//! let directory = Directory::new(StateDir::open(tmp.path())?);
//! let alpha = AgentId::new("polecat-alpha")?;
//!
//! let mut me = Registration::new();
//! me.roles = Some(vec![Role::new("reviewer")?]);
//! me.model = Some("opus-4".to_owned());
//! directory.register(&alpha, &me)?;
//! // Registering again is a retry: nothing is written.
//! directory.register(&alpha, &me)?;
//!
//! let who = directory.whois(&alpha)?;
//! assert_eq!(who.profile.model.as_deref(), Some("opus-4"));
//!
//! let mut reviewers = Filter::default();
//! reviewers.role = Some(Role::new("reviewer")?);
//! reviewers.seen_within = Some(std::time::Duration::from_secs(600));
//! assert_eq!(directory.list(&reviewers)?.items.len(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Profiles
//!
//! A [`Profile`] holds the agent's name (its [`AgentId`](chipset_store::AgentId)),
//! its [`Role`]s, `program`, `model`, `host`, current `task` and a free-text
//! `note`. [`Directory::register`] creates or updates it: a field the
//! [`Registration`] leaves `None` keeps its value, an empty string (or an
//! empty role list) clears it, and registering what the profile already
//! says writes nothing, so a retry is always safe.
//!
//! Roles are the names a later group mail's `@role` lists will use: 1 to
//! 64 bytes of `a-z0-9-_`, starting with a letter or digit, at most
//! [`MAX_ROLES`] per profile. Text fields are bounded ([`MAX_FIELD_LEN`],
//! [`MAX_NOTE_LEN`] for the note) and hold no control characters (the note
//! may hold line breaks and tabs). Bad input is a typed error
//! (of kind [`ErrorKind::Invalid`](chipset_store::ErrorKind::Invalid)) and changes nothing.
//!
//! # Last seen
//!
//! `last_seen` is never written by an operation: [`Directory::whois`] and
//! [`Directory::list`] compute it when they read, as the latest of
//! ([`Source`]):
//!
//! - the profile's `updated_at` (a registration that changed something);
//! - the bus presence's `last_seen` (`bus/{agent}/presence.json`);
//! - the hook's `last_activity` when the hook is active or completed (the
//!   agent's touches and completion; a pending or empty hook was last
//!   changed by the dispatcher);
//! - the modification time of `bus/{agent}/processed/` (acknowledgements);
//! - `sent` (by the agent) and `archived` (from its inbox) events in the
//!   last [`MANIFEST_TAIL`] bytes of `mail/manifest.jsonl`, read once per
//!   call.
//!
//! Each costs one bounded read or one `stat` per agent (the manifest tail
//! once for all of them), whatever the size of the mail. What they miss: a
//! send older than the manifest's tail (on a busy root, the agent's older
//! mail); reading an inbox without archiving; publishing a bus event (the
//! recipient's queue says nothing of the sender); and a retention prune of
//! `processed/` moves its mtime as an acknowledgement would. A corrupt
//! presence or hook is no evidence (its channel's doctor reports it).
//!
//! # File layout
//!
//! ```text
//! agents/{agent}.json   one profile: name, roles (sorted), program, model,
//!                       host, task, note (absent when unset),
//!                       registered_at, updated_at; canonical JSON
//! ```
//!
//! Unknown fields in a profile are kept on update. Names starting with a dot
//! are the store's (temps, `.{agent}.json.lock`, `.quarantine/`).
//!
//! # Durability and failures
//!
//! A registration is a compare-and-swap on the storage seam
//! (`chipset_backend::Backend`): the profile is read with its version, the
//! change decided at the backend's clock, and the new profile created or
//! swapped in at that version (decided again when another writer came
//! first). On a directory the swap is the store's: under the profile's
//! kernel lock (`.{agent}.json.lock`), the new profile is written to a
//! synced temp file and renamed into place, then the folder is synced. A
//! SIGKILL at any point leaves the old profile or the new one, never a
//! torn file. [`Directory::with_backend`] puts the profiles (and the hooks
//! read for last activity) on a PostgreSQL server (issue 30): registrations
//! are linearizable across hosts and `updated_at` is the server's clock;
//! the bus presence, the acknowledgements folder and the mail manifest
//! are still read from the local state root, and the doctor checks the
//! profiles' rows. A
//! corrupt profile is [`ReadOutcome::Corrupt`](chipset_store::ReadOutcome)
//! from [`Directory::read`], an [`Error::Corrupt`] from `whois` and
//! `register` (which never overwrites it), and listed in
//! [`Listing::corrupt`](chipset_store::Listing::corrupt): never read as absent.

#![forbid(unsafe_code)]

mod directory;
mod doctor;
mod error;
mod lists;
mod profile;
mod seam;
mod seen;

pub use directory::{AgentInfo, Directory, Filter, Registered};
pub use error::{Error, Result};
pub use lists::{ALL, Recipients, Resolved, Target};
pub use profile::{
    MAX_FIELD_LEN, MAX_NOTE_LEN, MAX_ROLE_LEN, MAX_ROLES, Profile, Registration, Role,
};
pub use seen::{MANIFEST_TAIL, Seen, Source};

/// The directory's channel: `agents/` under the state root.
pub(crate) const DIRECTORY_CHANNEL: chipset_store::Channel = chipset_store::Channel::new("agents");
